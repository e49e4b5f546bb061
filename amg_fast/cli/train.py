"""Train a model of amg_fast on KS, Burgers or 2D Navier-Stokes and evaluate its rollout nRMSE.

With no flags: the quick default (KS nu=0.1 at f=32, 256 generated training trajectories, AMGFNO
of width 64, 40 epochs), about 2.5 minutes on a 2-core CPU. --preset paper: the paper's protocol (2048
trajectories, 200 epochs, Adam 1e-3 + cosine, batch 32 KS / 64 Burgers, width 128, modes f//2).
Multi-GPU: torchrun --nproc_per_node=N scripts/train.py ... (data-parallel DDP; --batch-size is global).
Every flag is a field of amg_fast.train.config.TrainConfig, its default and help defined there.
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from amg_fast._checks import ArgumentError, flag
from amg_fast._interrupt import command_line, run_interruptible
from amg_fast.train.checkpoint import CheckpointError, latest_checkpoint, load_checkpoint
from amg_fast.train.config import TrainConfig, resolve_config
from amg_fast.train.data import generator_fields
from amg_fast.train.trainer import USER_ERRORS, default_out, train

__all__ = ["build_parser", "parse_args", "main"]

_TYPES = {"int": int, "float": float, "str": str}


def _flag_type(annotation: str):
    """int / float / str from a field's annotation ("int | None" -> int)."""
    return _TYPES[annotation.replace(" | None", "").strip()]


def build_parser() -> argparse.ArgumentParser:
    """One flag per TrainConfig field (--field-name), with its default, choices and help."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    groups: dict[str | None, argparse._ActionsContainer] = {None: parser}
    defaults = TrainConfig()
    for f in dataclasses.fields(TrainConfig):
        meta, default = f.metadata, getattr(defaults, f.name)
        target = groups.get(meta.get("group"))
        if target is None:
            target = groups[meta["group"]] = parser.add_argument_group(meta["group"])
        option = flag(f.name)
        if f.type == "bool":
            target.add_argument(option, action="store_true", help=meta["help"])
            continue
        if f.type == "bool | None":  # the preset's value unless given: --name or --no-name
            target.add_argument(option, action=argparse.BooleanOptionalAction, default=None, help=meta["help"])
            continue
        choices = meta.get("choices")
        choices = choices() if callable(choices) else choices
        shown = "" if default is None or f.default_factory is not dataclasses.MISSING else f" (default {default})"
        target.add_argument(option, type=_flag_type(f.type), default=default, choices=choices,
                            help=meta["help"] + shown)
    return parser


def parse_args(argv=None) -> TrainConfig:
    return TrainConfig(**vars(build_parser().parse_args(argv)))


def main(argv=None) -> int:
    cfg = parse_args(argv)
    return run_interruptible(lambda: _train(cfg), lambda: _kept(cfg, argv))


def _train(cfg: TrainConfig) -> int:
    if cfg.data is not None and cfg.data_seed is not None:  # a sweep's reading runs set both: refused here only
        print(f"error: --data-seed {cfg.data_seed}: the seed of the generated data set; --data {cfg.data} is used as "
              "it is (drop --data-seed, or drop --data to generate the data set)", file=sys.stderr)
        return 2
    try:
        results = train(cfg)
    except USER_ERRORS as err:  # a message, no traceback (a corrupt checkpoint is a ValueError too)
        print(f"error: {_naming_flags(err, cfg)}", file=sys.stderr)
        return 2
    if results:
        gate = "-" if results["gate_mean"] is None else f"{results['gate_mean']:.4f}"
        print(f"\n| model | pde | nu | f | params | test nRMSE | g-bar | wall time |\n|---|---|---|---|---|---|---|---|\n"
              f"| {results['model']} | {results['pde']} | {results['nu']:g} | {results['res']} | {results['params']:,} "
              f"| {results['nrmse']:.4f} | {gate} | {results['wall_time_s']:.0f} s |")
    return 0


def _naming_flags(err: Exception, cfg: TrainConfig) -> str:
    """The message of err; a refusal of a setting, the data generator or reader (ArgumentError) names
    the flags typed (`--batch-size`, `--ns-t-end`, `--field`; not the setting `batch_size`, the
    generator's `t_end`, the reader's `field`)."""
    if not isinstance(err, ArgumentError):
        return str(err)
    return err.naming({**{f.name: flag(f.name) for f in dataclasses.fields(TrainConfig)},
                       **{key: flag(name) for key, name in generator_fields(cfg).items()}, "field": "--field"})


def _kept(cfg: TrainConfig, argv) -> str:
    """After Ctrl-C: the epoch the run directory's checkpoint holds and the command that resumes
    it, or that nothing was kept (the trainer removes a run directory that has no checkpoint)."""
    out = Path(cfg.out if cfg.out is not None else default_out(resolve_config(cfg)))
    path = latest_checkpoint(out)
    if path is None:
        return f"no checkpoint was written yet, so nothing was kept in {out}; run the same command to start again"
    try:
        state = load_checkpoint(path, required=("epoch", "config"))
    except CheckpointError as err:
        return f"{err}"
    return (f"run directory {out} keeps the checkpoint of epoch {state['epoch']} of {state['config']['epochs']}; "
            f"continue with: {command_line(argv, *([] if cfg.resume else ['--resume']))}")
