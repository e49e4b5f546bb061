"""The Markovian baselines factformer, gkt, unet: shapes, exact causality, rollout, gradients,
training on a tiny KS set, periodic U-Net resampling, bad input."""
import pytest
import torch
from helpers import rel_err

from amg_fast.models import MarkovianModel, available_models, get_model
from amg_fast.models.unet import Downsample1d, Upsample1d

BASELINES = ["factformer", "gkt", "unet"]
# Small sizes for speed; each keeps the paper's structure (depth 4 / four U-Net levels).
SMALL = {"factformer": dict(width=16, heads=2, dim_head=8), "gkt": dict(width=16, modes=4), "unet": dict(width=8)}


def small_model(name, dtype=torch.float64, **kw):
    torch.manual_seed(0)
    return get_model(name, **{**SMALL[name], **kw}).to(dtype)


def test_registry_lists_the_baselines():
    assert set(BASELINES) <= set(available_models())
    assert all(isinstance(get_model(name), MarkovianModel) for name in BASELINES)


@pytest.mark.parametrize("name", BASELINES)
def test_one_model_runs_at_every_resolution(name):
    model = small_model(name)
    for S in (32, 64, 128):
        u = torch.randn(2, 3, S, 1, dtype=torch.float64)
        assert model(u).shape == (2, 3, S, 1), f"S={S}"
        assert model.rollout(u[:, 0], 2).shape == (2, 2, S, 1), f"S={S}"


@pytest.mark.parametrize("S", [32, 64, 128], ids=lambda s: f"S{s}")
def test_gkt_lazy_modes_take_half_the_grid(S):
    model = get_model("gkt", width=8)
    model(torch.randn(1, 2, S, 1))
    assert all(conv.modes == S // 2 for conv in model.regressor.spectral)


@pytest.mark.parametrize("name", BASELINES)
@pytest.mark.parametrize("t0", [0, 3, 5], ids=lambda t: f"t0-{t}")
def test_causal_in_time_exactly(name, t0):
    """A per-step map: changing input t0 leaves every output before t0 bit-identical and moves output t0."""
    model = small_model(name)
    u = torch.randn(2, 6, 32, 1, dtype=torch.float64)
    v = u.clone()
    v[:, t0] += torch.randn_like(v[:, t0])
    a, b = model(u), model(v)
    assert torch.equal(a[:, :t0], b[:, :t0])
    assert rel_err(b[:, t0], a[:, t0]) > 1e-3
    assert torch.equal(a[:, t0 + 1:], b[:, t0 + 1:])  # Markovian: later outputs see only their own step


@pytest.mark.parametrize("name", BASELINES)
def test_rollout_equals_teacher_forcing_on_its_own_predictions(name):
    model = small_model(name)
    u0 = torch.randn(2, 32, 1, dtype=torch.float64)
    preds = model.rollout(u0, 5)
    for k in range(5):
        history = torch.cat([u0[:, None], preds[:, :k]], dim=1)
        assert rel_err(preds[:, k], model(history)[:, -1]) <= 1e-10, f"step {k}"


@pytest.mark.parametrize("name", BASELINES)
def test_gradients_reach_every_parameter(name):
    model = small_model(name)
    model(torch.randn(2, 3, 32, 1, dtype=torch.float64)).square().mean().backward()
    for pname, p in model.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, pname


@pytest.fixture(scope="module")
def ks_tiny():
    """8 KS trajectories (nu = 0.1, 26 frames) at f = 32 as float32 [8, 26, 32, 1]."""
    from amg_fast.data.ks import generate_ks
    from amg_fast.data.resample import to_resolution

    return torch.from_numpy(to_resolution(generate_ks(8, nu=0.1, seed=0), 32)).float()[..., None]


def teacher_forcing_loss(model, u):
    """As amg_fast.train.trainer._loss: mean over (b, t) of ||model(u)[:, t] - u[:, t+1]||^2."""
    return (model(u[:, :-1]) - u[:, 1:]).square().sum(dim=(2, 3)).mean()


@pytest.mark.parametrize("name", BASELINES)
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


@pytest.mark.parametrize("layer,factor", [(Downsample1d(3), 0.5), (Upsample1d(3), 2)], ids=["down", "up"])
def test_unet_resampling_is_periodic(layer, factor):
    """Circular padding: shifting the input by 2 cells shifts the output by 2 * factor cells."""
    x = torch.randn(2, 3, 16)
    y = layer(x)
    assert y.shape == (2, 3, int(16 * factor))
    torch.testing.assert_close(layer(torch.roll(x, 2, dims=-1)), torch.roll(y, int(2 * factor), dims=-1))


@pytest.mark.parametrize("name", BASELINES)
def test_wrong_channel_count(name):
    model = small_model(name)
    with pytest.raises(ValueError, match=r"u must have 1 channel\(s\) .* got shape \(2, 3, 32, 2\)"):
        model(torch.zeros(2, 3, 32, 2, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"u0 must have 1 channel\(s\)"):
        model.rollout(torch.zeros(2, 32, 3, dtype=torch.float64), 2)


@pytest.mark.parametrize("S", [40, 8, 100], ids=lambda s: f"S{s}")
def test_unet_rejects_grids_not_divisible_by_16(S):
    model = small_model("unet")
    msg = rf"S \(u.shape\[-2\]\) must be a multiple of 16 \(4 downsamplings by 2\), got {S}"
    with pytest.raises(ValueError, match=msg):
        model(torch.zeros(1, 2, S, 1, dtype=torch.float64))
    with pytest.raises(ValueError, match=msg):
        model.rollout(torch.zeros(1, S, 1, dtype=torch.float64), 1)


@pytest.mark.parametrize(
    "name,kw,match",
    [("factformer", dict(modes=16), r"modes does not apply to Factformer1d .* got modes=16"),
     ("unet", dict(modes=16), r"modes does not apply to UNet1d .* got modes=16"),
     ("gkt", dict(modes=0), "modes must be >= 1, got 0"),
     ("gkt", dict(width=30, heads=4), "width must be divisible by heads = 4, got width 30"),
     ("factformer", dict(dim_head=7), "dim_head must be even .* got 7"),
     ("unet", dict(ch_mults=(1, 0)), r"ch_mults must be a non-empty sequence of ints >= 1, got \(1, 0\)"),
     ("unet", dict(width=0), "width must be >= 1, got 0"),
     ("gkt", dict(backend="cuda"), r"backend must be one of \('auto', 'triton', 'reference'\), got 'cuda'")],
    ids=["factformer-modes", "unet-modes", "gkt-modes-0", "gkt-heads", "factformer-odd-dim-head",
         "unet-ch-mults", "unet-width", "gkt-backend"],
)
def test_bad_constructor_arguments(name, kw, match):
    with pytest.raises(ValueError, match=match):
        get_model(name, **kw)
