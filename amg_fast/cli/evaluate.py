"""Evaluate a checkpoint: autoregressive rollout from u_0 on a data set's test split (1D data for
the 1D models, 2D Navier-Stokes files for ffno2d / s4ffno2d / amgfno2d).

Prints the rollout nRMSE (mean over trajectories and steps 1..T), the per-step curve, the
rollout's amplitude per step, the one-step (teacher-forced) nRMSE and loss and, for AMGFNO, the
mean gate g-bar during rollout. --json writes the same numbers to a file.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from amg_fast._checks import ArgumentError, resolve_device
from amg_fast._files import atomic_write_text, check_output_file
from amg_fast._interrupt import command_line, run_interruptible
from amg_fast.data.datasets import TrajectoryDataset
from amg_fast.data.h5 import cfd_fields
from amg_fast.models import build_model
from amg_fast.train.checkpoint import CheckpointError, load_checkpoint
from amg_fast.train.config import TrainConfig
from amg_fast.train.data import run_data_file
from amg_fast.train.evaluate import evaluate
from amg_fast.train.rundir import RunDir
from amg_fast.train.trainer import USER_ERRORS, check_model_runs

__all__ = ["positive_int", "parse_args", "load_run", "main"]


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1 (argparse reports anything else as a usage error)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {value}")
    return value


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("checkpoint", help="a checkpoint.pt written by scripts/train.py (or its run directory)")
    p.add_argument("--data", help="HDF5 data file (PDEBench, LPSDA or amg_fast layout; default: the data the run "
                                  "trained on, its --data or the data set it generated into its --cache-dir)")
    p.add_argument("--res", type=positive_int, help="observation resolution f (default: the run's)")
    p.add_argument("--split", default="test", choices=("train", "test"), help="which split to roll out (default test)")
    p.add_argument("--field", help="the field of a PDEBench CFD --data file with several (density, pressure, Vx, Vy, "
                                   "Vz; default: the run's --field when the file holds it, else the file's only one)")
    p.add_argument("--limit", type=positive_int, help="evaluate only the first N trajectories (N >= 1)")
    p.add_argument("--batch-size", type=positive_int, default=64, help="trajectories per rollout batch (default 64)")
    p.add_argument("--device", default="cpu", help="'auto' (CUDA where available), 'cpu', 'cuda' or 'cuda:N' (default cpu)")
    p.add_argument("--json", help="also write the results to this JSON file")
    return p.parse_args(argv)


def load_run(path: Path) -> tuple[TrainConfig, torch.nn.Module]:
    """The run's config and its model with the checkpoint's weights; CheckpointError if the file
    is not a checkpoint of scripts/train.py."""
    state = load_checkpoint(path, advice="it cannot be evaluated: give a checkpoint.pt written by scripts/train.py, or "
                                         "its run directory (a damaged one: train or resume the run again)")
    try:
        cfg = TrainConfig.from_dict(state["config"])
        model = build_model(cfg, omega=0.0, backend="reference")
        model.load_state_dict(state["model"])  # restores the run's fixed omega_f buffer too
    except (TypeError, ValueError, RuntimeError, AttributeError) as err:
        raise CheckpointError(f"{path}: corrupt or not a checkpoint of scripts/train.py (its config and weights do "
                              f"not build its model: {str(err).splitlines()[0]})") from None
    return cfg, model


def main(argv=None) -> int:
    args = parse_args(argv)
    kept = (f"nothing was written (--json {args.json} is written when the evaluation finishes)" if args.json
            else "nothing was written") + f"; run it again with: {command_line(argv)}"
    return run_interruptible(lambda: _run(args), lambda: kept)


def _run(args) -> int:
    try:
        return _evaluate(args)
    except USER_ERRORS as err:  # a message, no traceback; the reader's `field` is --field here, `device` --device
        flags = {"field": "--field", "device": "--device"}
        print(f"error: {err.naming(flags) if isinstance(err, ArgumentError) else err}", file=sys.stderr)
        return 2


def _run_data(cfg: TrainConfig) -> str:
    """The data file the run trained on (without --data): its --data, or its generated data set. A path the
    run recorded relative (to the directory train.py ran in, unknown here) is refused, not looked up here."""
    data = run_data_file(cfg)
    source = "--data" if cfg.data is not None else f"the data set it generated into --cache-dir {cfg.cache_dir}"
    if not data.is_absolute():
        raise ValueError(f"the run trained on {data} ({source}), a path relative to the directory train.py ran in: "
                         "pass --data FILE")
    if not data.is_file():
        raise ValueError(f"the run trained on {data} ({source}), which is not there now: pass --data FILE")
    return str(data)


def _evaluate(args) -> int:
    path = Path(args.checkpoint)
    path = RunDir(path).checkpoint_path if path.is_dir() else path
    if not path.is_file():
        raise ValueError(f"{path}: no such checkpoint")
    device = resolve_device(args.device)
    json_path = check_output_file("--json", args.json) if args.json else None  # before the rollout, which takes a while
    cfg, model = load_run(path)
    data = args.data or _run_data(cfg)
    res = args.res or cfg.res
    field = args.field
    if field is None and cfg.field is not None and cfg.field in cfd_fields(data):
        field = cfg.field  # the run's field, where the file holds it (another file's only field otherwise)
    ds = TrajectoryDataset(data, res, split=args.split, limit=args.limit, field=field,
                           omega_per_trajectory=cfg.omega_mode == "batch", nonzero_rollout_frames=True)
    if ds.spatial_dims != model.spatial_dims or ds.pde != cfg.pde:  # another PDE: an nRMSE that means nothing
        raise ValueError(f"--data {data} holds {ds.spatial_dims}D {ds.pde} trajectories; the checkpoint's model "
                         f"{cfg.model} is {model.spatial_dims}D, trained on --pde {cfg.pde}: evaluate it on "
                         f"{cfg.pde} data")
    model.to(device)
    check_model_runs(model, res, device)
    loader = torch.utils.data.DataLoader(ds, batch_size=args.batch_size)
    print(f"evaluating {path} ({cfg.model}) at f={res} on {len(ds)} {args.split} trajectories of {data}"
          + (f" of field {field}" if field is not None else ""), flush=True)
    result = evaluate(model, loader, device, omega_mode=cfg.omega_mode, precision=cfg.precision)
    out = {"checkpoint": str(path), "data": str(data), "field": field, "res": res, "split": args.split, "n": len(ds),
           "nrmse": result.nrmse, "nrmse_per_step": result.nrmse_per_step.tolist(), "gate_mean": result.gate_mean,
           "one_step_nrmse": result.one_step_nrmse, "one_step_loss": result.one_step_loss,
           "amplitude_per_step": result.amplitude_per_step.tolist()}
    print(f"{cfg.model} at f={res} on {len(ds)} {args.split} trajectories: rollout nRMSE {result.nrmse:.4f}"
          + (f", g-bar {result.gate_mean:.4f}" if result.gate_mean is not None else ""))
    print("per step: " + " ".join(f"{e:.3g}" for e in result.nrmse_per_step))
    print("amplitude ||pred|| / ||true|| per step: " + " ".join(f"{a:.3g}" for a in result.amplitude_per_step))
    print(f"one-step (teacher-forced) nRMSE {result.one_step_nrmse:.4f}, loss {result.one_step_loss:.4g}")
    if json_path is not None:
        atomic_write_text(json_path, json.dumps(out, indent=2) + "\n")  # a symlink's target, written through
    return 0

