"""One AMGFNO training step (teacher-forced forward + loss + backward + Adam step) per provider.

u [B, T+1, S, 1] random (timing does not depend on the values); the model is AMGFNO of width H with
K = S/2 modes and omega_f = 0.1, the loss is the trainer's (sum of squares over space, mean over
trajectories and steps), the optimizer the trainer's fused Adam (tensor lr; capturable on a GPU,
so the step can also be timed as a CUDA-graph replay). "compiled" compiles forward + loss
(backward through AOTAutograd; the Adam step stays eager, as in the trainer); "triton" builds the
model with backend="triton". Precision "bf16" runs forward + loss under the trainer's bf16
autocast (fp32 master weights, the loss taken in fp32), for the eager providers only.
After timing, the kernels of one eager step are counted (extra_info["kernels"]; bench/_kernel_count.py).
Run: pytest bench/test_bench_train_step.py --benchmark-only (knobs: see bench/_providers.py).
"""
import pytest
import torch

from _kernel_count import count_kernels
from _providers import DEVICE, KERNEL_COUNT, Compiled, generator, randn, record_compile, run, shape_for, step_cases
from _roofline import TRAIN_STEP
from amg_fast.models import get_model
from amg_fast.train.precision import autocast


@pytest.mark.parametrize("S, provider, precision", step_cases())
def test_amgfno_train_step(benchmark, S, provider, precision):
    shape = shape_for(S)
    torch.manual_seed(0)
    backend = "reference" if provider == "compiled" else provider
    model = get_model("amgfno", width=shape.H, modes=shape.K, omega=0.1, backend=backend).to(DEVICE)
    capturable = DEVICE.type == "cuda"
    optimizer = torch.optim.Adam(model.parameters(), lr=torch.tensor(1e-3, device=DEVICE), fused=True,
                                 capturable=capturable)
    u = randn(shape.B, shape.T + 1, shape.S, 1, gen=generator(0), grad=False)

    def loss_fn(u):
        with autocast(precision, DEVICE):  # the loss in fp32: the prediction is cast up first
            return (model(u[:, :-1]).float() - u[:, 1:]).square().sum(dim=(2, 3)).mean()

    # A fresh model per test, so one compiled loss per (shape, model): nothing to share across tests.
    loss = Compiled(loss_fn) if provider == "compiled" else loss_fn

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss(u).backward()
        optimizer.step()

    params = sum(p.numel() for p in model.parameters())
    run(benchmark, step, op=TRAIN_STEP, mode="step", provider=provider, shape=shape, tensors={"u": u},
        extra={"params": params, "model": "amgfno", "precision": precision,
               "optimizer": f"Adam(lr=tensor(1e-3), fused=True, capturable={capturable})"})
    record_compile(benchmark, loss)
    if KERNEL_COUNT:  # after run(): its first call was the warm-up (JIT, autotuning, Adam state)
        benchmark.extra_info.update(count_kernels(step, DEVICE))
