"""amg_fast.models.build_model: every registered model is built from a run's settings by its own
class (options_kwargs), carrying the settings that belong to it; a model registered later trains
through the trainer with no trainer edit."""
import numpy as np
import pytest
import torch
from helpers import translating_waves

from amg_fast.data.h5 import write_amg_fast
from amg_fast.models import MODELS, AMGFNO1d, FFNO1d, Normalized, available_models, build_model
from amg_fast.train.config import TrainConfig, output_parametrisation, resolve_config
from amg_fast.train.trainer import train


def options(**settings) -> TrainConfig:
    """A resolved config; the model bare (raw output parametrisation) unless settings ask otherwise."""
    return resolve_config(TrainConfig(width=8, res=32, **{"normalize": False, "increment": False, **settings}))


def test_the_default_output_parametrisation_wraps_1d_models_and_leaves_ns2d_bare():
    """--normalize --increment is the preset's default on ks and burgers since 2026-12-01, not on ns2d."""
    for pde, model in (("ks", "ffno"), ("burgers", "amgfno")):
        wrapped = build_model(resolve_config(TrainConfig(model=model, pde=pde, width=8, res=32)), omega=0.3)
        assert isinstance(wrapped, Normalized) and wrapped.increment
    ns2d = resolve_config(TrainConfig(model="ffno2d", pde="ns2d", width=8, res=32))
    assert type(build_model(ns2d)) is MODELS["ffno2d"]
    assert output_parametrisation(ns2d) == "raw (--no-normalize --no-increment)"
    assert output_parametrisation(options(increment=True)) == "--increment"


@pytest.mark.parametrize("name", available_models())
def test_every_model_is_built_from_its_settings(name):
    modes = None if not getattr(MODELS[name], "uses_modes", True) else 4
    pde = "ns2d" if getattr(MODELS[name], "spatial_dims", 1) == 2 else "ks"  # a model trains on data of its rank
    model = build_model(options(model=name, modes=modes, pde=pde), omega=0.3, backend="reference")
    assert type(model) is MODELS[name] and model.width == 8
    assert model.modes == modes
    shape = (1, 2) + (32,) * getattr(model, "spatial_dims", 1) + (1,)  # [B, T, S, C] or [B, T, X, Y, C]
    assert model(torch.zeros(shape)).shape == shape


def test_model_settings_reach_the_model():
    s4 = build_model(options(model="s4ffno", fusion="convex", alpha=0.25))
    assert (s4.fusion.fusion, s4.fusion.alpha) == ("convex", 0.25)
    amg = build_model(options(model="amgfno", no_freq_gate=True), omega=0.3)
    assert isinstance(amg, AMGFNO1d) and amg.gate.freq_gate is False
    amg = build_model(options(model="amgfno"), omega=0.3)
    assert amg.gate.freq_gate is True and float(amg.gate.omega) == pytest.approx(0.3)
    ffno = build_model(options(model="ffno", share_weights=True, weight_norm=True, decoder_input="last_block"))
    assert (ffno.share_weights, ffno.weight_norm, ffno.decoder_input) == (True, True, "last_block")
    assert ffno.blocks[1].spectral.weight is ffno.blocks[0].spectral.weight
    stats = {"in_mean": torch.tensor([1.0]), "in_std": torch.tensor([2.0]), "out_mean": torch.tensor([0.5]),
             "out_std": torch.tensor([0.25])}
    wrapped = build_model(options(model="ffno", normalize=True, increment=True), stats=stats)
    assert isinstance(wrapped, Normalized) and wrapped.increment and float(wrapped.out_std) == 0.25
    assert isinstance(wrapped.model, FFNO1d)
    inc_only = build_model(options(model="gkt", increment=True))  # normalize off: identity statistics
    assert isinstance(inc_only, Normalized) and float(inc_only.in_std) == 1.0


def test_unknown_model_named():
    with pytest.raises(ValueError, match="unknown model name 'fno'; available: amgfno, "):
        build_model(TrainConfig(model="fno"))


class TwoBlockFFNO(FFNO1d):
    """A model registered after the trainer was written: it chooses its own constructor arguments."""

    @classmethod
    def options_kwargs(cls, options, omega=None):
        return {**super().options_kwargs(options, omega), "n_blocks": 2}


def test_a_newly_registered_model_trains_without_a_trainer_edit(monkeypatch, tmp_path):
    monkeypatch.setitem(MODELS, "two_block_ffno", TwoBlockFFNO)
    tiny_data = tmp_path / "tiny.h5"
    write_amg_fast(tiny_data, translating_waves(8), np.arange(64) / 64, np.arange(6) * 0.1,
                   attrs={"pde": "ks", "n_test": 2})
    out = tmp_path / "run"
    results = train(TrainConfig(model="two_block_ffno", data=str(tiny_data), out=str(out), epochs=1, res=32, n_train=4,
                                n_test=2, batch_size=4, width=8, eval_every=100, device="cpu"), log=lambda *a: None)
    assert results["model"] == "two_block_ffno" and results["nrmse"] > 0
    state = torch.load(out / "checkpoint.pt", weights_only=True)["model"]
    # wrapped by the default --normalize --increment (Normalized: the model's parameters under "model.")
    assert "model.blocks.1.spectral.weight" in state and "model.blocks.2.spectral.weight" not in state
