"""Every experiment trains what it says: each run's job (the TrainConfig the worker trains, and
config.json after it) and the model that config builds carry the run's settings -- alpha, fusion,
variant, omega source, data reading and overrides -- for every registered experiment, a user grid and
the paper's omega. A RunSpec.train_config that dropped alpha or forced no_freq_gate=False fails here."""
import json

import pytest
import torch

from amg_fast.experiments import runner
from amg_fast.experiments.registry import EXPERIMENTS, grid_experiment
from amg_fast.experiments.specs import RunSpec
from amg_fast.models import Normalized
from amg_fast.train.config import TrainConfig, resolve_config
from amg_fast.train.trainer import build_model, normalization_stats

DATA_OMEGA = 0.3  # the omega_f a run's training data would give (the trainer passes it unless --omega)
GRID = {"model": ["amgfno", "s4ffno", "ffno"], "lr": [3e-4], "width": [12], "weight_norm": [True],
        "normalize": [True], "precision": ["tf32"]}


U_TRAIN = 2.0 + 3.0 * torch.randn(4, 5, 16, 1, generator=torch.Generator().manual_seed(0))  # std ~ 3


def check_run(spec: RunSpec, cfg: TrainConfig) -> None:
    """cfg (and the model it builds) against the spec, field by field, from the spec's own values."""
    overrides = dict(spec.overrides)
    assert (cfg.model, cfg.pde, cfg.nu, cfg.res, cfg.seed) == (spec.model, spec.pde, spec.nu, spec.res, spec.seed)
    assert (cfg.fusion, cfg.alpha) == (spec.fusion, spec.alpha), spec.name
    assert cfg.no_freq_gate == (spec.variant == "no-freq-gate"), spec.name
    assert cfg.omega_mode == ("batch" if spec.variant == "omega-batch" else "fixed"), spec.name
    assert cfg.omega == spec.omega, spec.name
    for key, value in overrides.items():
        assert getattr(cfg, key) == value, f"{spec.name}: {key}"
    # the trainer gives the gate cfg.omega when set, else the training data's omega_f (trainer.setup)
    stats = normalization_stats(U_TRAIN, normalize=cfg.normalize, increment=cfg.increment)
    model = build_model(cfg, DATA_OMEGA if cfg.omega is None else cfg.omega, "reference", stats)
    wrapped = cfg.normalize or cfg.increment
    assert isinstance(model, Normalized) == wrapped, spec.name
    if wrapped:
        assert model.increment == cfg.increment and (float(model.in_std) > 2.0) == cfg.normalize
        model = model.model
    assert model.width == cfg.width
    if spec.model in ("s4ffno", "s4ffno2d"):
        fusion = model.fusion
        assert (fusion.fusion, None if fusion.fusion == "residual" else fusion.alpha) == (spec.fusion, spec.alpha)
    if spec.model in ("amgfno", "amgfno2d"):
        assert model.gate.freq_gate == (spec.variant != "no-freq-gate"), spec.name
        expected = spec.omega if spec.omega is not None else DATA_OMEGA
        assert float(model.gate.omega) == pytest.approx(expected), spec.name
    if spec.model in ("ffno", "multi_input_ffno", "s4ffno", "amgfno", "ffno2d", "s4ffno2d", "amgfno2d"):
        assert (model.share_weights, model.weight_norm, model.decoder_input) == (
            overrides.get("share_weights", False), overrides.get("weight_norm", False),
            overrides.get("decoder_input", "stream")), spec.name


SOURCES = {**{(name, "data"): exp for name, exp in EXPERIMENTS.items()},
           ("table3", "paper"): EXPERIMENTS["table3"], ("grid", "data"): grid_experiment(GRID)}


@pytest.mark.parametrize("name,omega_from", list(SOURCES), ids=[f"{n}-{o}" for n, o in SOURCES])
def test_each_runs_job_and_model_carry_its_settings(tmp_path, name, omega_from):
    specs = SOURCES[(name, omega_from)].runs((0,), omega_from)
    assert specs
    if omega_from == "paper":
        assert any(s.omega is not None for s in specs)  # the paper's omega_f reaches some runs
    for spec in specs:
        run_dir = runner.write_job(tmp_path, spec, "smoke")
        job = json.loads((run_dir / "job.json").read_text())
        assert RunSpec.from_dict(job["spec"]) == spec and run_dir.name == spec.name
        check_run(spec, TrainConfig.from_dict(job["config"]))


def test_the_check_fails_on_a_train_config_that_drops_a_setting(monkeypatch, tmp_path):
    """The mutations issue 20 tried: alpha dropped, the frequency gate forced on."""
    convex = RunSpec("s4ffno", "ks", 0.1, 32, fusion="convex", alpha=0.25)
    ablation = RunSpec("amgfno", "ks", 0.1, 32, variant="no-freq-gate")
    original = RunSpec.train_config

    def drop(self, *args, **kw):
        cfg = original(self, *args, **kw)
        cfg.alpha, cfg.no_freq_gate = (0.5 if cfg.alpha is not None else None), False
        return cfg
    monkeypatch.setattr(RunSpec, "train_config", drop)
    for spec in (convex, ablation):
        job = json.loads((runner.write_job(tmp_path, spec, "smoke") / "job.json").read_text())
        with pytest.raises(AssertionError):
            check_run(spec, TrainConfig.from_dict(job["config"]))


@pytest.mark.parametrize("preset,expected", [
    ("smoke", {"n_train": 4, "n_test": 2, "epochs": 2, "width": 8, "batch_size": 2, "ns_grid": 64, "ns_t_end": 2.0,
               "ns_frames": 3, "data_seed": 0}),
    ("cpu", {"n_train": 16, "n_test": 4, "epochs": 20, "width": 24, "batch_size": 8, "ns_grid": 128, "ns_t_end": None,
             "ns_frames": 11, "data_seed": 0}),
    ("paper", {"n_train": 1000, "n_test": 200, "epochs": 200, "width": 64, "batch_size": 16, "ns_grid": 256,
               "ns_t_end": None, "ns_frames": None, "data_seed": None}),
])
def test_ns2d_runs_train_at_the_2d_sizes_of_their_preset(tmp_path, preset, expected):
    """The ns2d experiment's runs get the 2D sizes of the sweep preset (not the 1D ones: 2048
    trajectories of a 256 x 256 solve would be hours on a CPU), every seed on the data set of
    data_seed 0 where the preset shares one."""
    specs = EXPERIMENTS["ns2d"].runs((0, 2))
    assert {(s.model, s.pde) for s in specs} == {(m, "ns2d") for m in ("ffno2d", "s4ffno2d", "amgfno2d")}
    for spec in specs[:2]:  # amgfno2d, seeds 0 and 2
        cfg = resolve_config(TrainConfig.from_dict(json.loads(
            (runner.write_job(tmp_path, spec, preset) / "job.json").read_text())["config"]))
        assert {key: getattr(cfg, key) for key in expected} == expected, spec.name
        assert cfg.seed == spec.seed
