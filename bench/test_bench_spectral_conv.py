"""spectral_conv1d: reference vs torch.compile(reference) vs Triton, fwd / bwd / fwd+bwd.

x [B, T, S, H] (B*T = 800 rows at the paper's GPU shapes), weight [K = S/2, H, H, 2].
Run: pytest bench/test_bench_spectral_conv.py --benchmark-only (knobs: see bench/_providers.py).
"""
import pytest

from _providers import Shape, bench_op, cases, generator, modes, randn, shape_for
from amg_fast.ops import spectral_conv1d


def make_inputs(shape: Shape) -> dict:
    gen = generator(0)
    return {"x": randn(shape.B, shape.T, shape.S, shape.H, gen=gen),
            "weight": randn(shape.K, shape.H, shape.H, 2, gen=gen, scale=shape.H ** -1)}


@pytest.mark.parametrize("mode", modes())
@pytest.mark.parametrize("S, provider", cases())
def test_spectral_conv1d(benchmark, S, provider, mode):
    shape = shape_for(S)
    bench_op(benchmark, name="spectral_conv1d", op=spectral_conv1d, inputs=make_inputs(shape),
             mode=mode, provider=provider, shape=shape)
