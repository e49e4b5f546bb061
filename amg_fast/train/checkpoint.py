"""Checkpoints: plain dicts written to a temporary file and renamed, loadable with
torch.load(weights_only=True).

A checkpoint holds: model, optimizer, scheduler (state_dicts), epoch (last finished), rng
(torch CPU state, data-order generator state, CUDA states where present), config (dict),
history (the per-epoch metrics so far).
"""
from __future__ import annotations

import os
from pathlib import Path

import torch

__all__ = ["save_checkpoint", "load_checkpoint", "latest_checkpoint", "capture_rng", "restore_rng"]

CHECKPOINT_NAME = "checkpoint.pt"


def save_checkpoint(path, state: dict) -> None:
    """torch.save(state) to path atomically (temp file in the same directory, then rename)."""
    path = Path(path)
    tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}")
    try:
        torch.save(state, tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def load_checkpoint(path, map_location="cpu") -> dict:
    return torch.load(path, map_location=map_location, weights_only=True)


def latest_checkpoint(run_dir) -> Path | None:
    path = Path(run_dir) / CHECKPOINT_NAME
    return path if path.is_file() else None


def capture_rng(data_generator: torch.Generator) -> dict:
    state = {"torch": torch.get_rng_state(), "data": data_generator.get_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng(state: dict, data_generator: torch.Generator) -> None:
    torch.set_rng_state(state["torch"])
    data_generator.set_state(state["data"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
