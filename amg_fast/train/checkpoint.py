"""Checkpoints: plain dicts written to a temporary file and renamed, loadable with
torch.load(weights_only=True).

A checkpoint holds: model, optimizer, scheduler (state_dicts), epoch (last finished), rng
(torch CPU state, data-order generator state, CUDA states where present), config (dict),
history (the per-epoch metrics so far), wall_time_s (the run's wall time up to this checkpoint,
summed over all segments of a resumed run).

A file that cannot be read back (truncated, overwritten, not a checkpoint) raises
CheckpointError naming the file; a file holding anything but tensors and plain containers is
refused the same way and never unpickled.
"""
from __future__ import annotations

import pickle
import zipfile
from pathlib import Path

import torch

from amg_fast._files import atomic_path

__all__ = ["save_checkpoint", "load_checkpoint", "latest_checkpoint", "capture_rng", "restore_rng",
           "CheckpointError", "TRAINING_KEYS"]

CHECKPOINT_NAME = "checkpoint.pt"
# What a checkpoint written by the trainer holds (scripts/evaluate.py needs model and config).
TRAINING_KEYS = ("model", "optimizer", "scheduler", "epoch", "rng", "config", "history")


class CheckpointError(ValueError):
    """A checkpoint file that is corrupt, truncated or not a checkpoint; the message names it."""


def save_checkpoint(path, state: dict) -> None:
    """torch.save(state) to path atomically (temp file in the same directory, then rename)."""
    with atomic_path(path) as tmp:
        torch.save(state, tmp)


RESUME_ADVICE = "it cannot be used. Delete it to start the run over, or point at another checkpoint"


def load_checkpoint(path, map_location="cpu", *, required=("model", "config"), advice: str = RESUME_ADVICE) -> dict:
    """torch.load(path, weights_only=True) -> the checkpoint dict, which must hold `required`.

    Raises CheckpointError (naming the file, why, and `advice`: by default that deleting it
    restarts the run) when the file cannot be read as a checkpoint."""
    path = Path(path)

    def corrupt(why: str) -> CheckpointError:
        return CheckpointError(f"{path}: corrupt or not a checkpoint ({why}); {advice}")

    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as err:  # torch's text advises weights_only=False: never repeated here
        if "Unsupported global" in str(err):  # a payload weights_only refused: never unpickled
            raise corrupt("it holds objects other than tensors and plain containers, which are not loaded") from None
        detail = str(err).partition("WeightsUnpickler error:")[2].strip().split("\n")[0][:160]
        raise corrupt("truncated or damaged: UnpicklingError" + (f": {detail}" if detail else "")) from None
    except (RuntimeError, EOFError, zipfile.BadZipFile, ValueError, KeyError) as err:
        first = str(err).split(". ")[0].strip()[:160]
        raise corrupt(f"truncated or damaged: {type(err).__name__}" + (f": {first}" if first else "")) from None
    if not isinstance(state, dict):
        raise corrupt(f"holds a {type(state).__name__}, not a checkpoint dict")
    missing = [key for key in required if key not in state]
    if missing:
        raise corrupt(f"missing {', '.join(missing)}")
    return state


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
