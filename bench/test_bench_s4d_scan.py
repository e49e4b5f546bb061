"""s4d_scan: reference vs torch.compile(reference) vs Triton, fwd / bwd / fwd+bwd.

u [B, T, S, H] (B = 32, T = 25 at the paper's GPU shapes); lam, c [H, N = 32, 2] from an S4D-Lin
initialised S4DMemory (|lam| < 1, as in training); d [H].
Run: pytest bench/test_bench_s4d_scan.py --benchmark-only (knobs: see bench/_providers.py).
"""
import pytest
import torch

from _providers import DEVICE, DTYPE, Shape, bench_op, cases, generator, modes, randn, shape_for
from amg_fast.layers import S4DMemory
from amg_fast.ops import s4d_scan


def make_inputs(shape: Shape) -> dict:
    torch.manual_seed(0)
    with torch.no_grad():
        lam, c = S4DMemory(shape.H, 2 * shape.N).discretize()
    leaf = lambda t: t.to(DEVICE, DTYPE).contiguous().requires_grad_()  # noqa: E731
    gen = generator(0)
    return {"u": randn(shape.B, shape.T, shape.S, shape.H, gen=gen), "lam": leaf(lam), "c": leaf(c),
            "d": randn(shape.H, gen=gen)}


@pytest.mark.parametrize("mode", modes())
@pytest.mark.parametrize("S, provider", cases())
def test_s4d_scan(benchmark, S, provider, mode):
    shape = shape_for(S)
    bench_op(benchmark, name="s4d_scan", op=s4d_scan, inputs=make_inputs(shape), mode=mode,
             provider=provider, shape=shape)
