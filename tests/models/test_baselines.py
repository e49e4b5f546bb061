"""The Markovian baselines factformer, gkt, unet: registry, lazy GKT modes, periodic U-Net resampling,
U-Net grid sizes, bad constructor arguments. The contract every model keeps (shapes, exact causality,
rollout, gradients, training on a tiny KS set, bad input) is in test_model_contract.py."""
import pytest
import torch

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


@pytest.mark.parametrize("S", [32, 64, 128], ids=lambda s: f"S{s}")
def test_gkt_lazy_modes_take_half_the_grid(S):
    model = get_model("gkt", width=8)
    model(torch.randn(1, 2, S, 1))
    assert all(conv.modes == S // 2 for conv in model.regressor.spectral)


@pytest.mark.parametrize("layer,factor", [(Downsample1d(3), 0.5), (Upsample1d(3), 2)], ids=["down", "up"])
def test_unet_resampling_is_periodic(layer, factor):
    """Circular padding: shifting the input by 2 cells shifts the output by 2 * factor cells."""
    x = torch.randn(2, 3, 16)
    y = layer(x)
    assert y.shape == (2, 3, int(16 * factor))
    torch.testing.assert_close(layer(torch.roll(x, 2, dims=-1)), torch.roll(y, int(2 * factor), dims=-1))


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
