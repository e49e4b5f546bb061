#!/usr/bin/env python
"""Quickstart: build AMGFNO, run teacher-forced forward and an autoregressive rollout on random data.

Prints shapes, the parameter count and the mean gate g-bar: the model API of the README's "Using
the models". To train and evaluate a model on KS or Burgers data: scripts/train.py
(docs/training.md).
"""
from __future__ import annotations

import argparse
import time

import torch

from amg_fast._checks import ArgumentError, resolve_device
from amg_fast.models import count_parameters, get_model


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {value}")
    return value


def device_arg(text: str) -> torch.device:
    """--device: 'auto', 'cpu', 'cuda' or 'cuda:N', refused by name where there is no such device."""
    try:
        return resolve_device(text)
    except ArgumentError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--res", type=positive_int, default=32, help="spatial resolution f (grid points); modes = f//2 (default 32)")
    p.add_argument("--batch", type=positive_int, default=4, help="trajectories in the random batch (default 4)")
    p.add_argument("--steps", type=positive_int, default=25, help="time steps to predict; the input has steps+1 frames (default 25)")
    p.add_argument("--width", type=positive_int, default=128, help="hidden channels H (default 128, the paper's)")
    p.add_argument("--omega", type=float, default=0.584,
                   help="fixed omega_f for the frequency gate (default 0.584, the paper's KS value at f=32)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("--device", type=device_arg, default="cpu",
                   help="torch device: auto, cpu, cuda or cuda:N (default cpu)")
    return p.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    device = args.device
    model = get_model("amgfno", width=args.width, modes=args.res // 2, omega=args.omega).to(device)
    u = torch.randn(args.batch, args.steps + 1, args.res, 1, device=device)  # [B, T, S, C]
    print(f"AMGFNO1d: width={args.width}, modes={args.res // 2}, parameters={count_parameters(model):,}")
    print(f"input u (teacher forcing): {tuple(u.shape)}  [B, T, S, C]")
    with torch.no_grad():
        start = time.perf_counter()
        pred = model(u[:, :-1])
        print(f"teacher-forced predictions: {tuple(pred.shape)}, mean gate g-bar = {model.gate_mean:.4f}, "
              f"{time.perf_counter() - start:.3f} s")
        start = time.perf_counter()
        roll = model.rollout(u[:, 0], args.steps)
        print(f"rollout from u_0 only: {tuple(roll.shape)}, mean gate g-bar = {model.gate_mean:.4f}, "
              f"{time.perf_counter() - start:.3f} s")


if __name__ == "__main__":
    main()
