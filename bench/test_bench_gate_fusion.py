"""gate_fusion: reference vs torch.compile(reference) vs Triton, fwd / bwd / fwd+bwd.

h, z [B, T, S, H]; w_z, w_h [H, H]; b [H]; chi 0-dim (requires grad, as the frequency gate's
output does in training). The backward differentiates `out`; g is a detached statistic in AMGFNO.
Run: pytest bench/test_bench_gate_fusion.py --benchmark-only (knobs: see bench/_providers.py).
"""
import pytest
import torch

from _providers import DEVICE, DTYPE, Shape, bench_op, cases, generator, modes, randn, shape_for
from amg_fast.ops import gate_fusion


def make_inputs(shape: Shape) -> dict:
    gen, act = generator(0), (shape.B, shape.T, shape.S, shape.H)
    return {"h": randn(*act, gen=gen), "z": randn(*act, gen=gen),
            "w_z": randn(shape.H, shape.H, gen=gen, scale=shape.H ** -0.5),
            "w_h": randn(shape.H, shape.H, gen=gen, scale=shape.H ** -0.5),
            "b": randn(shape.H, gen=gen, scale=0.1),
            "chi": torch.tensor(0.7, device=DEVICE, dtype=DTYPE, requires_grad=True)}


@pytest.mark.parametrize("mode", modes())
@pytest.mark.parametrize("S, provider", cases())
def test_gate_fusion(benchmark, S, provider, mode):
    shape = shape_for(S)
    bench_op(benchmark, name="gate_fusion", op=gate_fusion, inputs=make_inputs(shape), mode=mode,
             provider=provider, shape=shape)
