"""s4d_scan: reference vs torch.compile(reference) vs Triton, fwd / bwd / fwd+bwd.

u [B, T, S, H] (B = 32, T = 25 at the paper's GPU shapes); lam, c [H, N = 32, 2] from an S4D-Lin
initialised S4DMemory (|lam| < 1, as in training); d [H].
Run: pytest bench/test_bench_s4d_scan.py --benchmark-only (knobs: see bench/_providers.py).
"""
import pytest

from _ops import bench_case
from _providers import cases, modes


@pytest.mark.parametrize("mode", modes())
@pytest.mark.parametrize("S, provider", cases())
def test_s4d_scan(benchmark, S, provider, mode):
    bench_case(benchmark, "s4d_scan", S, provider, mode)
