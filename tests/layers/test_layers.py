"""Layers: S4D discretisation and init, gate init and frequency prior, fixed fusion, lazy modes."""
import math

import pytest
import torch
from helpers import randn, rel_err

from amg_fast.layers import AdaptiveMemoryGate, FFNOBlock, FixedFusion, S4DMemory, SpectralConv1d
from amg_fast.ops import s4d_scan


def test_s4d_lin_init_and_dt_range():
    torch.manual_seed(0)
    layer = S4DMemory(16, state_dim=64)
    assert layer.n_pairs == 32
    assert torch.allclose(-torch.exp(layer.log_A_real), torch.full((16, 32), -0.5))
    assert torch.allclose(layer.A_imag, math.pi * torch.arange(32.0).expand(16, 32))
    dt = torch.exp(layer.log_dt.detach())
    assert bool(((dt >= 1e-3) & (dt <= 1e-1)).all()) and float(dt.max() / dt.min()) > 5
    for p in (layer.log_dt, layer.log_A_real, layer.A_imag):
        assert p._optim == {"weight_decay": 0.0}


def test_s4d_discretisation_gives_the_s4d_py_kernel():
    """Our (lam, c) reproduce s4d.py's kernel K = 2 Re(C (e^{dtA} - 1)/A e^{dtA l}) through the scan."""
    torch.manual_seed(1)
    layer = S4DMemory(3, state_dim=8).double()
    lam, c = layer.discretize()
    T = 20
    impulse = torch.zeros(1, T, 1, 3, dtype=torch.float64)
    impulse[:, 0] = 1.0
    response = s4d_scan(impulse, lam, c, torch.zeros(3, dtype=torch.float64))[0, :, 0].T  # [H, T]
    A = torch.complex(-torch.exp(layer.log_A_real), layer.A_imag)
    dtA = A * torch.exp(layer.log_dt)[:, None]
    C = torch.view_as_complex(layer.C) * (torch.exp(dtA) - 1.0) / A
    kernel = 2 * torch.einsum("hn,hnl->hl", C, torch.exp(dtA[..., None] * torch.arange(T))).real
    assert rel_err(response, kernel) <= 1e-10


def test_s4d_memory_step_matches_forward():
    torch.manual_seed(2)
    layer = S4DMemory(8, state_dim=16).double()
    h = torch.randn(2, 7, 5, 8, dtype=torch.float64)
    state, outs = layer.initial_state(h[:, 0]), []
    for t in range(7):
        z, state = layer.step(h[:, t], state)
        outs.append(z)
    assert rel_err(torch.stack(outs, 1), layer(h)) <= 1e-10


def test_s4d_memory_4096_steps_finite():
    torch.manual_seed(3)
    layer = S4DMemory(16)
    z = layer(torch.randn(1, 4096, 2, 16))
    assert torch.isfinite(z).all()
    z.sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in layer.parameters())


def test_gate_zero_initialised_gives_half_of_frequency_prior():
    gate = AdaptiveMemoryGate(8).double()
    gate.set_omega(0.083)
    h, z = randn(2, 4, 8), randn(2, 4, 8)
    out, g = gate(h, z)
    assert gate.w1.item() == 2.0 and gate.b_omega.item() == pytest.approx(3.8, rel=1e-7)
    chi = 1 / (1 + math.exp(-(2.0 * math.log(0.083 + 1e-8) + gate.b_omega.item())))
    assert torch.allclose(g, torch.full_like(g, 0.5 * chi), rtol=1e-12, atol=0)
    assert torch.allclose(out, g * z + (1 - g) * h, rtol=1e-12, atol=0)
    assert not gate.w_z.any() and not gate.w_h.any() and not gate.b.any()


def test_gate_prior_decreases_with_omega():
    gate = AdaptiveMemoryGate(4)
    with torch.no_grad():
        chis = [float(gate.chi(torch.tensor(w))) for w in (0.584, 0.083, 0.0003)]
    assert chis[0] > 0.9 and 0.1 < chis[1] < 0.5 and chis[2] < 1e-4


def test_gate_without_frequency_gate_and_without_omega():
    assert float(AdaptiveMemoryGate(4, omega=0.001, freq_gate=False).chi()) == 1.0
    assert float(AdaptiveMemoryGate(4).chi()) == 1.0  # no omega yet: prior off


@pytest.mark.parametrize("omega", [-0.1, float("nan"), float("inf")], ids=["negative", "nan", "inf"])
def test_bad_omega_rejected(omega):
    with pytest.raises(ValueError, match="omega must be finite and >= 0"):
        AdaptiveMemoryGate(4, omega=omega)
    with pytest.raises(ValueError, match="omega must be finite and >= 0"):
        AdaptiveMemoryGate(4).chi(torch.tensor([0.1, omega]))


def test_fixed_fusion_formulas():
    h, z = randn(3, 4), randn(3, 4)
    assert torch.equal(FixedFusion("residual")(h, z), h + z)
    assert torch.allclose(FixedFusion("convex", 0.25)(h, z), 0.25 * z + 0.75 * h)
    assert torch.allclose(FixedFusion("additive", 0.5)(h, z), h + 0.5 * z)
    assert torch.equal(FixedFusion("convex", 0.0)(h, z), h)


@pytest.mark.parametrize(
    "fusion,alpha,match",
    [("convex", 1.5, r"alpha must be in \[0, 1\] for convex fusion, got 1.5"),
     ("convex", -0.1, r"alpha must be in \[0, 1\] for convex fusion, got -0.1"),
     ("residual", 0.5, "alpha applies to fusion 'convex' or 'additive'"),
     ("gated", None, r"fusion must be one of \('residual', 'convex', 'additive'\), got 'gated'"),
     ("additive", float("nan"), "alpha must be finite")],
    ids=["convex-above-1", "convex-negative", "residual-with-alpha", "unknown", "additive-nan"],
)
def test_fixed_fusion_bad_input(fusion, alpha, match):
    with pytest.raises(ValueError, match=match):
        FixedFusion(fusion, alpha)


def test_lazy_modes_take_half_the_first_resolution():
    conv = SpectralConv1d(4, 4)
    conv(torch.randn(2, 48, 4))
    assert conv.modes == 24 and conv.weight.shape == (24, 4, 4, 2)
    block = FFNOBlock(8, modes=5)
    assert block(torch.randn(3, 16, 8)).shape == (3, 16, 8)
