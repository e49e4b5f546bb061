"""One AMGFNO training step (teacher-forced forward + loss + backward + Adam step) per provider, and
the same step of AMGFNO2d on an S x S grid (test_amgfno2d_train_step: the ns2d experiment's model).

The step is bench/_step.py's (the trainer's loss and fused Adam; tensor lr, capturable on a GPU,
so the step can also be timed as a CUDA-graph replay). "compiled" compiles forward + loss
(backward through AOTAutograd; the Adam step stays eager, as in the trainer); "triton" builds the
model with backend="triton". Precision "bf16" runs forward + loss under the trainer's bf16
autocast (fp32 master weights, the loss taken in fp32), for the eager providers only.
The first step's loss and gradients are checked against the float64 reference before timing.
After timing, the kernels of one eager step are counted (extra_info["kernels"]; bench/_kernel_count.py).
bench/gpu_summary.py times the same step in every precision mode (fp32, tf32, bf16).
Run: pytest bench/test_bench_train_step.py --benchmark-only (knobs: see bench/_providers.py).
"""
import pytest

from _kernel_count import count_kernels
from _providers import (DEVICE, KERNEL_COUNT, STEP_SIZES_2D, assert_close, effective_precision, record_compile, run,
                        shape_for, shape_for_2d, step_cases)
from _roofline import TRAIN_STEP, TRAIN_STEP_2D
from _step import build_step, reference_step64, step_result
from amg_fast.train.graphs import EagerTrainStep


@pytest.mark.parametrize("S, provider, precision", step_cases())
def test_amgfno_train_step(benchmark, S, provider, precision):
    time_train_step(benchmark, shape_for(S), provider, precision, TRAIN_STEP, "amgfno")


@pytest.mark.parametrize("S, provider, precision", step_cases(STEP_SIZES_2D))
def test_amgfno2d_train_step(benchmark, S, provider, precision):
    time_train_step(benchmark, shape_for_2d(S), provider, precision, TRAIN_STEP_2D, "amgfno2d")


def time_train_step(benchmark, shape, provider: str, precision: str, op: str, model: str) -> None:
    """Check the step's first call against the float64 reference, time it, count its kernels."""
    backend = "reference" if provider == "compiled" else provider
    # A fresh model per test, so one compiled loss per (shape, model): nothing to share across tests.
    case = build_step(shape, backend, precision, DEVICE, compile_backend="inductor" if provider == "compiled" else None)
    step = EagerTrainStep(case.model, case.optimizer, case.loss_fn)
    expected = reference_step64(case, shape)
    loss, _ = step(case.u, case.w)  # the first call: also compile / JIT
    assert_close(step_result(case, loss), expected, effective_precision(precision),
                 f"{op} {provider} {precision} {shape.id}")

    def one_step():
        step(case.u, case.w)

    params = sum(p.numel() for p in case.model.parameters())
    run(benchmark, one_step, op=op, mode="step", provider=provider, shape=shape, tensors={"u": case.u},
        extra={"params": params, "model": model, "precision": precision,
               "optimizer": f"Adam(lr=tensor(1e-3), fused=True, capturable={DEVICE.type == 'cuda'})"})
    if case.compiled is not None:
        record_compile(benchmark, case.compiled)
    if KERNEL_COUNT:  # after run(): its first call was the warm-up (JIT, autotuning, Adam state)
        benchmark.extra_info.update(count_kernels(one_step, DEVICE))
