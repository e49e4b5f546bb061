"""spectral_conv1d: reference vs torch.compile(reference) vs Triton, fwd / bwd / fwd+bwd.

x [B, T, S, H] (B*T = 800 rows at the paper's GPU shapes), weight [K = S/2, H, H, 2].
Run: pytest bench/test_bench_spectral_conv.py --benchmark-only (knobs: see bench/_providers.py).
"""
import pytest

from _ops import bench_case
from _providers import cases, modes


@pytest.mark.parametrize("mode", modes())
@pytest.mark.parametrize("S, provider", cases())
def test_spectral_conv1d(benchmark, S, provider, mode):
    bench_case(benchmark, "spectral_conv1d", S, provider, mode)
