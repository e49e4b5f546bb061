"""One AMGFNO training step (teacher-forced forward + loss + backward + Adam step) per provider.

u [B, T+1, S, 1] random (timing does not depend on the values); the model is AMGFNO of width H with
K = S/2 modes and omega_f = 0.1, the loss is the trainer's (sum of squares over space, mean over
trajectories and steps). "compiled" compiles forward + loss (backward through AOTAutograd; the
Adam step stays eager, as in the trainer); "triton" builds the model with backend="triton".
Run: pytest bench/test_bench_train_step.py --benchmark-only (knobs: see bench/_providers.py).
"""
import pytest
import torch

from _providers import DEVICE, Compiled, cases, generator, randn, record_compile, run, shape_for
from _roofline import TRAIN_STEP
from amg_fast.models import get_model


@pytest.mark.parametrize("S, provider", cases())
def test_amgfno_train_step(benchmark, S, provider):
    shape = shape_for(S)
    torch.manual_seed(0)
    backend = "reference" if provider == "compiled" else provider
    model = get_model("amgfno", width=shape.H, modes=shape.K, omega=0.1, backend=backend).to(DEVICE)
    # capturable on a GPU, so the step can also be timed as a CUDA-graph replay (as --cuda-graph trains)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, capturable=DEVICE.type == "cuda")
    u = randn(shape.B, shape.T + 1, shape.S, 1, gen=generator(0), grad=False)

    def loss_fn(u):
        return (model(u[:, :-1]) - u[:, 1:]).square().sum(dim=(2, 3)).mean()

    # A fresh model per test, so one compiled loss per (shape, model): nothing to share across tests.
    loss = Compiled(loss_fn) if provider == "compiled" else loss_fn

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss(u).backward()
        optimizer.step()

    params = sum(p.numel() for p in model.parameters())
    run(benchmark, step, op=TRAIN_STEP, mode="step", provider=provider, shape=shape, tensors={"u": u},
        extra={"params": params, "model": "amgfno", "optimizer": f"Adam(lr=1e-3, capturable={DEVICE.type == 'cuda'})"})
    record_compile(benchmark, loss)
