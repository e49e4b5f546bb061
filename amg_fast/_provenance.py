"""What code trained a run or timed a benchmark: the package's git commit (and whether its checkout had
uncommitted changes), the versions of torch, CUDA and triton, and the kernel switches (the AMG_FAST_*
environment variables of docs/kernels.md) set in this process. A sweep that several GPU sessions continue
trains its runs with the code of each session; this is how a report can tell them apart.

Nothing here imports triton or initialises CUDA: triton's version comes from its installed metadata.
"""
from __future__ import annotations

import importlib.metadata
import os
import subprocess
from pathlib import Path

__all__ = ["code_version", "kernel_switches", "software"]

SWITCH_PREFIX = "AMG_FAST_"
_PACKAGE_DIR = Path(__file__).resolve().parent


def _git(*args: str, cwd: Path) -> str | None:
    """git's output in cwd, or None (not a checkout, no git, an error, 10 s without an answer)."""
    try:
        proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def code_version(path: Path | str = _PACKAGE_DIR) -> dict:
    """{"commit": the HEAD of the git checkout holding path (default: this package) or None, "commit_dirty":
    whether tracked files differ from it (None where unknown)}."""
    commit = _git("rev-parse", "HEAD", cwd=Path(path))
    status = _git("status", "--porcelain", "--untracked-files=no", cwd=Path(path)) if commit else None
    return {"commit": commit, "commit_dirty": None if status is None else bool(status)}


def kernel_switches(environ=None) -> dict[str, str]:
    """The AMG_FAST_* environment variables set (non-empty) in environ (default os.environ), sorted by name.
    Unset and empty ones mean the defaults of the recorded commit."""
    environ = os.environ if environ is None else environ
    return {name: environ[name] for name in sorted(environ) if name.startswith(SWITCH_PREFIX) and environ[name]}


def _installed(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def software() -> dict:
    """{"torch", "cuda" (torch's CUDA build, None for a CPU build), "triton" (None if not installed), "commit",
    "commit_dirty" (code_version()), "kernel_switches" (kernel_switches())}."""
    import torch

    return {"torch": torch.__version__, "cuda": torch.version.cuda, "triton": _installed("triton"),
            **code_version(), "kernel_switches": kernel_switches()}
