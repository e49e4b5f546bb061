"""The sequence-model contract, checked for every registered model (available_models()): shapes at
every resolution, causality in time, rollout = teacher forcing on its own predictions, determinism,
gradients reaching every parameter, a few Adam steps lowering the loss, bad input refused.

A newly registered model is checked by these tests without an edit here; SMALL only shrinks the
models that are slow at their default sizes (a model missing from it runs at its defaults).
Models on a 2D grid (spatial_dims = 2) get [B, T, X, Y, C] inputs with X = S, Y = S/2 + 4 (not square)
and 2D Navier-Stokes data for the training check.
Model-specific behaviour lives in test_models.py (the FFNO family) and test_baselines.py.
"""
import numpy as np
import pytest
import torch
from helpers import rel_err

from amg_fast.models import MODELS as REGISTRY
from amg_fast.models import MarkovianModel, available_models, get_model

MODELS = available_models()
# Small sizes for speed; each keeps the model's structure (depth, the U-Net's four levels).
FFNO_SMALL = dict(width=16, modes=4)
SMALL = {
    "ffno": FFNO_SMALL, "multi_input_ffno": FFNO_SMALL, "s4ffno": FFNO_SMALL,
    "amgfno": dict(FFNO_SMALL, omega=0.083),
    "factformer": dict(width=16, heads=2, dim_head=8), "gkt": dict(width=16, modes=4), "unet": dict(width=8),
    "ffno2d": FFNO_SMALL, "s4ffno2d": FFNO_SMALL, "amgfno2d": dict(FFNO_SMALL, omega=0.083),
}


def small_model(name, dtype=torch.float64, **kw):
    torch.manual_seed(0)
    return get_model(name, **{"in_channels": 1, "out_channels": 1, **SMALL.get(name, {}), **kw}).to(dtype)


def grid(name, S=32) -> tuple:
    """The spatial shape of model `name`'s input at resolution S: (S,) or, on a 2D grid, (S, S/2 + 4)."""
    return (S,) if REGISTRY[name].spatial_dims == 1 else (S, S // 2 + 4)


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("S", [32, 64, 128], ids=lambda s: f"S{s}")
def test_same_model_runs_at_every_resolution(name, S):
    model = small_model(name)
    u = torch.randn(2, 3, *grid(name, S), 1, dtype=torch.float64)
    assert model(u).shape == (2, 3, *grid(name, S), 1)
    assert model.rollout(u[:, 0], 2).shape == (2, 2, *grid(name, S), 1)


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("t0", [0, 4, 7], ids=lambda t: f"t0-{t}")
def test_causal_in_time(name, t0):
    """Outputs before t0 do not move when input t0 changes (beyond the float64 round-off of the
    S4D reference's FFT convolution); output t0 moves by O(1). A Markovian model (a per-step map)
    leaves every other output bit-identical."""
    model = small_model(name)
    u = torch.randn(2, 8, *grid(name), 1, dtype=torch.float64)
    v = u.clone()
    v[:, t0] += torch.randn_like(v[:, t0])
    a, b = model(u), model(v)
    if t0 > 0:
        assert rel_err(b[:, :t0], a[:, :t0]) <= 1e-13
    assert rel_err(b[:, t0], a[:, t0]) > 1e-3
    if isinstance(model, MarkovianModel):
        assert torch.equal(a[:, :t0], b[:, :t0])
        assert torch.equal(a[:, t0 + 1:], b[:, t0 + 1:])  # later outputs see only their own step


@pytest.mark.parametrize("name", MODELS)
def test_rollout_equals_teacher_forcing_on_its_own_predictions(name):
    model = small_model(name)
    u0 = torch.randn(2, *grid(name), 1, dtype=torch.float64)
    preds = model.rollout(u0, 6)
    for k in range(6):
        history = torch.cat([u0[:, None], preds[:, :k]], dim=1)
        assert rel_err(preds[:, k], model(history)[:, -1]) <= 1e-10, f"step {k}"


@pytest.mark.parametrize("name", MODELS)
def test_deterministic_given_a_seed(name):
    u = torch.randn(2, 4, *grid(name), 1)
    outs = []
    for _ in range(2):
        model = small_model(name, dtype=torch.float32)
        outs.append((model(u), model.rollout(u[:, 0], 3)))
    assert torch.equal(outs[0][0], outs[1][0]) and torch.equal(outs[0][1], outs[1][1])


@pytest.mark.parametrize("name", MODELS)
def test_gradients_reach_every_parameter(name):
    model = small_model(name)
    with torch.no_grad():  # AMGFNO's zero-init content gate: W_z, W_h only get gradient through sigmoid' * (z - h)
        for pname, p in model.named_parameters():
            if pname.endswith("gate.w_z"):
                p.normal_()
    model(torch.randn(2, 4, *grid(name), 1, dtype=torch.float64)).square().mean().backward()
    for pname, p in model.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, pname


@pytest.fixture(scope="module")
def ks_tiny():
    """8 KS trajectories (nu = 0.1, 26 frames) at f = 32 as float32 [8, 26, 32, 1]."""
    from amg_fast.data.ks import generate_ks
    from amg_fast.data.resample import to_resolution

    return torch.from_numpy(to_resolution(generate_ks(8, nu=0.1, seed=0), 32)).float()[..., None]


@pytest.fixture(scope="module")
def ns_tiny():
    """4 Navier-Stokes vorticity trajectories (nu = 1e-3, FNO's forcing and random field, 9 frames
    0, 0.5, ..., 4) solved at 32 x 32 and observed at f = 16, float32 [4, 9, 16, 16, 1]."""
    from amg_fast.data.ns2d import generate_ns2d

    u, _ = generate_ns2d(4, nu=1e-3, seed=0, N=32, t=np.arange(9) * 0.5, dt=0.02, resolution=16,
                         omega_resolutions=(16,), progress=False)
    return torch.from_numpy(u)[..., None]


def teacher_forcing_loss(model, u):
    """As the trainer's loss: mean over (b, t) of ||model(u)[:, t] - u[:, t+1]||^2."""
    return (model(u[:, :-1]) - u[:, 1:]).square().flatten(2).sum(-1).mean()


@pytest.mark.parametrize("name", MODELS)
def test_a_few_adam_steps_lower_the_loss(name, request):
    data = request.getfixturevalue("ks_tiny" if REGISTRY[name].spatial_dims == 1 else "ns_tiny")
    model = small_model(name, dtype=torch.float32)
    with torch.no_grad():
        before = teacher_forcing_loss(model, data).item()  # also materialises lazy weights
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(30):
        opt.zero_grad()
        loss = teacher_forcing_loss(model, data)
        loss.backward()
        opt.step()
    with torch.no_grad():
        after = teacher_forcing_loss(model, data).item()
    assert after < 0.5 * before, (before, after)


LAYOUT = {1: ("[B, T, S, C]", "[B, S, C]"), 2: ("[B, T, X, Y, C]", "[B, X, Y, C]")}


def shape_text(shape) -> str:
    return r"\(" + ", ".join(map(str, shape)) + r"\)"


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize(
    "case", ["rank", "channels", "int", "complex", "rank-of-the-other-grid"],
)
def test_bad_input(name, case):
    d = REGISTRY[name].spatial_dims
    g = grid(name)
    rank = 3 + d
    other = (2, 3, 32, 20, 1) if d == 1 else (2, 3, 32, 1)  # a 2D input to a 1D model and vice versa
    u, match = {
        "rank": (torch.zeros(2, *g, 1), rf"u must have rank {rank} \({re_escape(LAYOUT[d][0])}\), got shape "
                                        + shape_text((2, *g, 1))),
        "channels": (torch.zeros(2, 3, *g, 2), r"u must have 1 channel\(s\) .* got shape " + shape_text((2, 3, *g, 2))),
        "int": (torch.zeros(2, 3, *g, 1, dtype=torch.int64), "u must be a real floating-point tensor.*int64"),
        "complex": (torch.zeros(2, 3, *g, 1, dtype=torch.complex64), "u must be a real floating-point tensor.*complex64"),
        "rank-of-the-other-grid": (torch.zeros(other), rf"u must have rank {rank} \({re_escape(LAYOUT[d][0])}\)"),
    }[case]
    model = small_model(name, dtype=torch.float32)
    with pytest.raises((ValueError, TypeError), match=match):
        model(u)


def re_escape(text: str) -> str:
    import re

    return re.escape(text)


@pytest.mark.parametrize("name", MODELS)
def test_rollout_bad_input(name):
    d, g = REGISTRY[name].spatial_dims, grid(name)
    model = small_model(name, dtype=torch.float32)
    with pytest.raises(ValueError, match=rf"u0 must have rank {2 + d} \({re_escape(LAYOUT[d][1])}\)"):
        model.rollout(torch.zeros(2, 1, *g, 1), 3)
    with pytest.raises(ValueError, match=r"u0 must have 1 channel\(s\)"):
        model.rollout(torch.zeros(2, *g, 3), 2)
    with pytest.raises(ValueError, match="steps must be >= 1, got 0"):
        model.rollout(torch.zeros(2, *g, 1), 0)
