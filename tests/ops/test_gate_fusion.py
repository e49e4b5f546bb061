"""gate_fusion reference vs the gate formula written out, gradcheck, per-batch chi, bad input."""
import pytest
import torch
from helpers import randn, rel_err

from amg_fast.ops import gate_fusion


def written_out_gate(h, z, w_z, w_h, b, chi):
    """g[..., o] = chi / (1 + exp(-(sum_i z_i w_z[o, i] + sum_i h_i w_h[o, i] + b_o))); out = g z + (1 - g) h."""
    logits = (z[..., None, :] * w_z).sum(-1) + (h[..., None, :] * w_h).sum(-1) + b
    g = chi / (1.0 + torch.exp(-logits))
    return g * z + (1.0 - g) * h, g


def random_args(shape, gen, chi_shape=()):
    H = shape[-1]
    return (randn(*shape, generator=gen), randn(*shape, generator=gen), randn(H, H, generator=gen) / H**0.5,
            randn(H, H, generator=gen) / H**0.5, randn(H, generator=gen), torch.rand(chi_shape, generator=gen,
                                                                                       dtype=torch.float64))


@pytest.mark.parametrize("shape", [(7,), (3, 32, 16), (2, 25, 48, 16), (1, 1, 1, 128)],
                         ids=["H7", "B3-S32-H16", "B2-T25-S48-H16", "B1-T1-S1-H128"])
def test_reference_matches_written_out_formula(shape, gen):
    args = random_args(shape, gen)
    out, g = gate_fusion(*args, backend="reference")
    out_ref, g_ref = written_out_gate(*args)
    assert rel_err(out, out_ref) <= 1e-10 and rel_err(g, g_ref) <= 1e-10
    assert out.dtype == g.dtype == torch.float64


def test_per_batch_chi_matches_each_sample(gen):
    h, z, w_z, w_h, b, chi = random_args((3, 5, 8, 16), gen, chi_shape=(3,))
    out, g = gate_fusion(h, z, w_z, w_h, b, chi)
    for i in range(3):
        out_i, g_i = written_out_gate(h[i], z[i], w_z, w_h, b, chi[i])
        assert rel_err(out[i], out_i) <= 1e-10 and rel_err(g[i], g_i) <= 1e-10


def test_chi_zero_returns_h_exactly(gen):
    h, z, w_z, w_h, b, _ = random_args((4, 8), gen)
    out, g = gate_fusion(h, z, w_z, w_h, b, torch.zeros((), dtype=torch.float64))
    assert torch.equal(out, h) and torch.equal(g, torch.zeros_like(g))


def test_gradcheck_float64(gen):
    args = [a.requires_grad_() for a in random_args((2, 3, 6), gen)]
    assert torch.autograd.gradcheck(lambda *a: gate_fusion(*a, backend="reference"), args)


def test_float32_and_bf16_keep_dtype(gen):
    args = random_args((4, 32, 16), gen)
    for dtype, tol in ((torch.float32, 1e-5), (torch.bfloat16, 2e-2)):
        h, z = args[0].to(dtype), args[1].to(dtype)
        out, g = gate_fusion(h, z, *(a.float() for a in args[2:]))
        assert out.dtype == g.dtype == dtype
        assert rel_err(out, written_out_gate(h.double(), z.double(), *args[2:])[0]) <= tol


@pytest.mark.parametrize(
    "change,match",
    [
        ({"z": torch.zeros(2, 5)}, r"z must have the shape of h \(2, 4\)"),
        ({"w_z": torch.zeros(4, 5)}, r"w_z must have shape \(4, 4\)"),
        ({"w_h": torch.zeros(3, 4)}, r"w_h must have shape \(4, 4\)"),
        ({"b": torch.zeros(5)}, r"b must have shape \(4,\)"),
        ({"chi": torch.zeros(3)}, r"chi must have shape \(2,\)"),
        ({"chi": torch.zeros(2, 1)}, "chi must be a 0-dim tensor"),
    ],
    ids=["z-shape", "w_z-shape", "w_h-shape", "b-shape", "chi-batch", "chi-rank"],
)
def test_bad_input_errors(change, match):
    args = {"h": torch.zeros(2, 4), "z": torch.zeros(2, 4), "w_z": torch.zeros(4, 4), "w_h": torch.zeros(4, 4),
            "b": torch.zeros(4), "chi": torch.zeros(())}
    args.update(change)
    with pytest.raises(ValueError, match=match):
        gate_fusion(**args)


def test_integer_h_rejected():
    with pytest.raises(TypeError, match="h must be a real floating-point tensor"):
        gate_fusion(torch.zeros(2, 4, dtype=torch.int64), torch.zeros(2, 4), torch.zeros(4, 4), torch.zeros(4, 4),
                    torch.zeros(4), torch.zeros(()))
