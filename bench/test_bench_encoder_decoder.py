"""grid_linear (the encoder Linear([u, x/L]), C = 1 -> H) and composed_linear (the decoder H -> 128 -> 1 as
one Linear): reference vs torch.compile(reference) vs Triton, fwd / bwd / fwd+bwd. Small ops (one pass over
an activation each way): what their kernels save is launches and the reference's skinny cuBLAS GEMMs.

u [B, T, S, 1], grid [S], weight [H, 2], bias [H]; x [B, T, S, H], w1 [128, H], b1 [128], w2 [1, 128], b2 [1].
Run: pytest bench/test_bench_encoder_decoder.py --benchmark-only (knobs: see bench/_providers.py).
"""
import pytest

from _ops import bench_case
from _providers import cases, modes


@pytest.mark.parametrize("op", ["grid_linear", "composed_linear"])
@pytest.mark.parametrize("mode", modes())
@pytest.mark.parametrize("S, provider", cases())
def test_encoder_decoder(benchmark, S, provider, mode, op):
    bench_case(benchmark, op, S, provider, mode)
