"""The sequence-model contract, checked for every registered model (available_models()): shapes at
every resolution, causality in time, rollout = teacher forcing on its own predictions, determinism,
gradients reaching every parameter, a few Adam steps lowering the loss, bad input refused.

A newly registered model is checked by these tests without an edit here; SMALL only shrinks the
models that are slow at their default sizes (a model missing from it runs at its defaults).
Model-specific behaviour lives in test_models.py (the FFNO family) and test_baselines.py.
"""
import pytest
import torch
from helpers import rel_err

from amg_fast.models import MarkovianModel, available_models, get_model

MODELS = available_models()
# Small sizes for speed; each keeps the model's structure (depth, the U-Net's four levels).
FFNO_SMALL = dict(width=16, modes=4)
SMALL = {
    "ffno": FFNO_SMALL, "multi_input_ffno": FFNO_SMALL, "s4ffno": FFNO_SMALL,
    "amgfno": dict(FFNO_SMALL, omega=0.083),
    "factformer": dict(width=16, heads=2, dim_head=8), "gkt": dict(width=16, modes=4), "unet": dict(width=8),
}


def small_model(name, dtype=torch.float64, **kw):
    torch.manual_seed(0)
    return get_model(name, **{"in_channels": 1, "out_channels": 1, **SMALL.get(name, {}), **kw}).to(dtype)


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("S", [32, 64, 128], ids=lambda s: f"S{s}")
def test_same_model_runs_at_every_resolution(name, S):
    model = small_model(name)
    u = torch.randn(2, 3, S, 1, dtype=torch.float64)
    assert model(u).shape == (2, 3, S, 1)
    assert model.rollout(u[:, 0], 2).shape == (2, 2, S, 1)


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("t0", [0, 4, 7], ids=lambda t: f"t0-{t}")
def test_causal_in_time(name, t0):
    """Outputs before t0 do not move when input t0 changes (beyond the float64 round-off of the
    S4D reference's FFT convolution); output t0 moves by O(1). A Markovian model (a per-step map)
    leaves every other output bit-identical."""
    model = small_model(name)
    u = torch.randn(2, 8, 32, 1, dtype=torch.float64)
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
    u0 = torch.randn(2, 32, 1, dtype=torch.float64)
    preds = model.rollout(u0, 6)
    for k in range(6):
        history = torch.cat([u0[:, None], preds[:, :k]], dim=1)
        assert rel_err(preds[:, k], model(history)[:, -1]) <= 1e-10, f"step {k}"


@pytest.mark.parametrize("name", MODELS)
def test_deterministic_given_a_seed(name):
    u = torch.randn(2, 4, 32, 1)
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
    model(torch.randn(2, 4, 32, 1, dtype=torch.float64)).square().mean().backward()
    for pname, p in model.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, pname


@pytest.fixture(scope="module")
def ks_tiny():
    """8 KS trajectories (nu = 0.1, 26 frames) at f = 32 as float32 [8, 26, 32, 1]."""
    from amg_fast.data.ks import generate_ks
    from amg_fast.data.resample import to_resolution

    return torch.from_numpy(to_resolution(generate_ks(8, nu=0.1, seed=0), 32)).float()[..., None]


def teacher_forcing_loss(model, u):
    """As the trainer's loss: mean over (b, t) of ||model(u)[:, t] - u[:, t+1]||^2."""
    return (model(u[:, :-1]) - u[:, 1:]).square().sum(dim=(2, 3)).mean()


@pytest.mark.parametrize("name", MODELS)
def test_a_few_adam_steps_lower_the_loss(name, ks_tiny):
    model = small_model(name, dtype=torch.float32)
    with torch.no_grad():
        before = teacher_forcing_loss(model, ks_tiny).item()  # also materialises lazy weights
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for _ in range(30):
        opt.zero_grad()
        loss = teacher_forcing_loss(model, ks_tiny)
        loss.backward()
        opt.step()
    with torch.no_grad():
        after = teacher_forcing_loss(model, ks_tiny).item()
    assert after < 0.5 * before, (before, after)


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize(
    "u,match",
    [(torch.zeros(2, 32, 1), r"u must have rank 4 \(\[B, T, S, C\]\), got shape \(2, 32, 1\)"),
     (torch.zeros(2, 3, 32, 2), r"u must have 1 channel\(s\) .* got shape \(2, 3, 32, 2\)"),
     (torch.zeros(2, 3, 32, 1, dtype=torch.int64), "u must be a real floating-point tensor.*int64"),
     (torch.zeros(2, 3, 32, 1, dtype=torch.complex64), "u must be a real floating-point tensor.*complex64")],
    ids=["rank", "channels", "int", "complex"],
)
def test_bad_input(name, u, match):
    model = small_model(name, dtype=torch.float32)
    with pytest.raises((ValueError, TypeError), match=match):
        model(u)


@pytest.mark.parametrize("name", MODELS)
def test_rollout_bad_input(name):
    model = small_model(name, dtype=torch.float32)
    with pytest.raises(ValueError, match=r"u0 must have rank 3 \(\[B, S, C\]\)"):
        model.rollout(torch.zeros(2, 1, 32, 1), 3)
    with pytest.raises(ValueError, match=r"u0 must have 1 channel\(s\)"):
        model.rollout(torch.zeros(2, 32, 3), 2)
    with pytest.raises(ValueError, match="steps must be >= 1, got 0"):
        model.rollout(torch.zeros(2, 32, 1), 0)
