"""The training settings in one place: flags generated from TrainConfig, configs of older runs,
parameter groups from what parameters declare, the console entry points."""
import dataclasses
import importlib.metadata
import inspect
from pathlib import Path

import pytest
import torch

from amg_fast.cli.train import build_parser, parse_args
from amg_fast.train.config import TrainConfig
from amg_fast.train.trainer import _param_groups

ROOT = Path(__file__).parents[2]


def test_every_setting_is_a_flag_with_the_dataclass_default():
    parser = build_parser()
    flags = {a.dest: a for a in parser._actions if a.dest != "help"}
    fields = {f.name for f in dataclasses.fields(TrainConfig)}
    assert set(flags) == fields
    assert parse_args([]) == TrainConfig()
    for f in dataclasses.fields(TrainConfig):
        assert f.metadata["help"], f"{f.name} has no help text"
    help_text = parser.format_help()
    assert all(f"--{name.replace('_', '-')}" in help_text for name in fields)


def test_flags_parse_to_the_typed_fields():
    cfg = parse_args(["--model", "s4ffno", "--fusion", "convex", "--alpha", "0.5", "--res", "64", "--lr", "3e-4",
                      "--resume", "--share-weights", "--nu", "0.075"])
    assert (cfg.model, cfg.fusion, cfg.alpha, cfg.res, cfg.lr, cfg.resume, cfg.share_weights, cfg.nu) == \
        ("s4ffno", "convex", 0.5, 64, 3e-4, True, True, 0.075)
    with pytest.raises(SystemExit):
        parse_args(["--precision", "fp8"])  # choices come from the field


def test_config_of_an_older_run_loads_and_unknown_keys_are_named():
    old = TrainConfig().to_dict()
    old["num_workers"] = 0  # a retired setting
    del old["increment"], old["eval_batch_size"]  # settings added since: their defaults at the time
    assert TrainConfig.from_dict(old) == TrainConfig(increment=False)  # LEGACY_DEFAULTS: raw before 2026-12-01
    with pytest.raises(ValueError, match=r"unknown training settings \['lr_warmup'\]"):
        TrainConfig.from_dict({**old, "lr_warmup": 5})


def test_parameter_groups_follow_what_parameters_declare():
    model = torch.nn.Linear(3, 2)
    model.bias._optim = {"weight_decay": 0.0}
    extra = torch.nn.Parameter(torch.zeros(4))
    extra._optim = {"weight_decay": 0.0, "lr": 1e-4}
    model.register_parameter("extra", extra)
    groups = _param_groups(model, weight_decay=0.1)
    by_params = {tuple(id(p) for p in g["params"]): {k: v for k, v in g.items() if k != "params"} for g in groups}
    assert by_params == {(id(model.weight),): {"weight_decay": 0.1}, (id(model.bias),): {"weight_decay": 0.0},
                         (id(extra),): {"weight_decay": 0.0, "lr": 1e-4}}


def test_console_entry_points_are_declared_and_load():
    text = (ROOT / "pyproject.toml").read_text()
    tools = ("train", "evaluate", "generate", "reproduce")
    # each through amg_fast._entry (Ctrl-C handling before torch loads), which runs amg_fast.cli.<tool>
    assert all(f'amg-fast-{tool} = "amg_fast._entry:{tool}"' in text for tool in tools)
    installed = {ep.name: ep for ep in importlib.metadata.entry_points(group="console_scripts")}
    for tool in tools:
        name = f"amg-fast-{tool}"
        assert name in installed, f"{name} is not installed: pip install -e . (re)creates the console scripts"
        entry = installed[name].load()
        assert callable(entry) and f'run_cli("amg_fast.cli.{tool}")' in inspect.getsource(entry)
        assert callable(importlib.import_module(f"amg_fast.cli.{tool}").main)
