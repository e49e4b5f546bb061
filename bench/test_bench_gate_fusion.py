"""gate_fusion: reference vs torch.compile(reference) vs Triton, fwd / bwd / fwd+bwd.

h, z [B, T, S, H]; w_z, w_h [H, H]; b [H]; chi 0-dim (requires grad, as the frequency gate's
output does in training). The backward differentiates `out`; g is a detached statistic in AMGFNO.
Run: pytest bench/test_bench_gate_fusion.py --benchmark-only (knobs: see bench/_providers.py).
"""
import pytest

from _ops import bench_case
from _providers import cases, modes


@pytest.mark.parametrize("mode", modes())
@pytest.mark.parametrize("S, provider", cases())
def test_gate_fusion(benchmark, S, provider, mode):
    bench_case(benchmark, "gate_fusion", S, provider, mode)
