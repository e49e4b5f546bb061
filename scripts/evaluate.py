#!/usr/bin/env python
"""Evaluate a checkpoint: autoregressive rollout from u_0 on a data set's test split.

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

from amg_fast.data.datasets import TrajectoryDataset
from amg_fast.data.h5 import DataFileError
from amg_fast.train.checkpoint import load_checkpoint
from amg_fast.train.config import TrainConfig
from amg_fast.train.evaluate import evaluate
from amg_fast.train.trainer import build_model


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("checkpoint", help="a checkpoint.pt written by scripts/train.py (or its run directory)")
    p.add_argument("--data", required=True, help="HDF5 data file (PDEBench, LPSDA or amg_fast layout)")
    p.add_argument("--res", type=int, help="observation resolution f (default: the run's)")
    p.add_argument("--split", default="test", choices=("train", "test"), help="which split to roll out (default test)")
    p.add_argument("--limit", type=int, help="evaluate only the first N trajectories")
    p.add_argument("--batch-size", type=int, default=64, help="trajectories per rollout batch (default 64)")
    p.add_argument("--device", default="cpu", help="torch device (default cpu)")
    p.add_argument("--json", help="also write the results to this JSON file")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    path = Path(args.checkpoint)
    path = path / "checkpoint.pt" if path.is_dir() else path
    if not path.is_file():
        print(f"error: {path}: no such checkpoint", file=sys.stderr)
        return 2
    state = load_checkpoint(path)
    cfg = TrainConfig(**state["config"])
    res = args.res or cfg.res
    try:
        ds = TrajectoryDataset(args.data, res, split=args.split, limit=args.limit,
                               omega_per_trajectory=cfg.omega_mode == "batch")
    except (DataFileError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    model = build_model(cfg, omega=0.0, backend="reference")
    model.load_state_dict(state["model"])  # restores the run's fixed omega_f buffer too
    model.to(args.device)
    loader = torch.utils.data.DataLoader(ds, batch_size=args.batch_size)
    result = evaluate(model, loader, torch.device(args.device), omega_mode=cfg.omega_mode, precision=cfg.precision)
    out = {"checkpoint": str(path), "data": args.data, "res": res, "split": args.split, "n": len(ds),
           "nrmse": result.nrmse, "nrmse_per_step": result.nrmse_per_step.tolist(), "gate_mean": result.gate_mean,
           "one_step_nrmse": result.one_step_nrmse, "one_step_loss": result.one_step_loss,
           "amplitude_per_step": result.amplitude_per_step.tolist()}
    print(f"{cfg.model} at f={res} on {len(ds)} {args.split} trajectories: rollout nRMSE {result.nrmse:.4f}"
          + (f", g-bar {result.gate_mean:.4f}" if result.gate_mean is not None else ""))
    print("per step: " + " ".join(f"{e:.3g}" for e in result.nrmse_per_step))
    print("amplitude ||pred|| / ||true|| per step: " + " ".join(f"{a:.3g}" for a in result.amplitude_per_step))
    print(f"one-step (teacher-forced) nRMSE {result.one_step_nrmse:.4f}, loss {result.one_step_loss:.4g}")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
