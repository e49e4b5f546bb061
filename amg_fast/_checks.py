"""Argument validation shared by ops, layers, models, the data generators and the CLIs.

Every check raises a ValueError / TypeError whose message names the argument, the value it got
and what is allowed, so a user sees at once what to fix.
"""
from __future__ import annotations

import re
from typing import Mapping, Sequence

import numpy as np
import torch

from amg_fast.kernels._common import acc_dtype  # noqa: F401  (re-exported: one definition for ops and kernels)

REAL_FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


class ArgumentError(ValueError):
    """A refused argument whose message names keyword arguments (`names`, each written in the message
    only where it means that argument): str() is the library's message (`t_end must be ...`);
    `naming(flags)` the same message with those names a CLI maps replaced by its flags (`--ks-t-end`)."""

    def __init__(self, message: str, *names: str):
        super().__init__(message)
        self.names = names

    def naming(self, flags: Mapping[str, str]) -> str:
        mapped = [name for name in self.names if name in flags]
        if not mapped:
            return str(self)
        # whole words only: not inside another name (ns_t_end), a flag (--ns-t-end) or a path (/d/field.h5)
        pattern = r"(?<![\w./-])(" + "|".join(map(re.escape, mapped)) + r")(?![\w/-])(?!\.\w)"
        return re.sub(pattern, lambda match: flags[match[1]], str(self))


def flag(name: str) -> str:
    """The command-line flag of a setting: "batch_size" -> "--batch-size"."""
    return "--" + name.replace("_", "-")


def check_tensor(name: str, value) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    return value


def check_real_float(name: str, value) -> torch.Tensor:
    """Require a real floating-point tensor (fp16, bf16, fp32 or fp64)."""
    check_tensor(name, value)
    if value.dtype not in REAL_FLOAT_DTYPES:
        raise TypeError(
            f"{name} must be a real floating-point tensor (float16, bfloat16, float32 or float64), "
            f"got dtype {value.dtype}"
        )
    return value


def check_rank(name: str, value: torch.Tensor, allowed: Sequence[int] | int, layout: str) -> None:
    """Require value.dim() in allowed; layout describes the expected shape, e.g. '[B, T, S, C]'."""
    allowed = (allowed,) if isinstance(allowed, int) else tuple(allowed)
    if value.dim() not in allowed:
        consecutive = len(allowed) > 2 and list(allowed) == list(range(allowed[0], allowed[-1] + 1))
        ranks = f"{allowed[0]} to {allowed[-1]}" if consecutive else " or ".join(str(r) for r in allowed)
        raise ValueError(
            f"{name} must have rank {ranks} ({layout}), got shape {tuple(value.shape)}"
        )


def check_shape(name: str, value: torch.Tensor, expected: Sequence[int], layout: str) -> None:
    if tuple(value.shape) != tuple(expected):
        raise ValueError(
            f"{name} must have shape {tuple(expected)} ({layout}), got {tuple(value.shape)}"
        )


def check_same_device(**tensors: torch.Tensor) -> None:
    devices = {name: t.device for name, t in tensors.items()}
    if len(set(devices.values())) > 1:
        listing = ", ".join(f"{n} on {d}" for n, d in devices.items())
        raise ValueError(f"all tensors must be on one device, got {listing}")


def check_int_range(name: str, value, low: int, high: int | None = None) -> int:
    """Require an int with low <= value (<= high)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {value!r} ({type(value).__name__})")
    if value < low or (high is not None and value > high):
        allowed = f">= {low}" if high is None else f"in {low}..{high}"
        raise ValueError(f"{name} must be {allowed}, got {value}")
    return value


SEED_LIMIT = 2**32  # seeds are in [0, 2^32): numpy's SeedSequence, torch.manual_seed and the file names all take them


def check_seed(name: str, value) -> int:
    """Require an integer seed in [0, 2^32) (numpy integers too); returns it as an int."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise ArgumentError(f"{name} must be an integer in [0, 2^32), got {value!r}", name)
    if not 0 <= value < SEED_LIMIT:
        raise ArgumentError(f"{name} must be in [0, 2^32) = 0..{SEED_LIMIT - 1}, got {value}", name)
    return int(value)


def check_device(device: str) -> None:
    """device: "auto", "cpu", "cuda" or "cuda:N" (N < the number of GPUs); CUDA must be available."""
    allowed = "'auto', 'cpu', 'cuda' or 'cuda:N'"
    if device == "auto":
        return
    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError):
        raise ArgumentError(f"device must be {allowed}, got {device!r}", "device") from None
    if parsed.type not in ("cpu", "cuda"):
        raise ArgumentError(f"device must be {allowed}, got {device!r}", "device")
    if parsed.type == "cuda":
        if not torch.cuda.is_available():
            raise ArgumentError(f"device {device!r}: CUDA is not available here (torch {torch.__version__}"
                                + (", a CPU-only build" if torch.version.cuda is None else ", no GPU visible")
                                + "); use 'cpu' or 'auto'", "device")
        if parsed.index is not None and parsed.index >= torch.cuda.device_count():
            raise ArgumentError(f"device {device!r}: this machine has {torch.cuda.device_count()} GPU(s), "
                                f"cuda:0..cuda:{torch.cuda.device_count() - 1}", "device")


def resolve_device(device: str) -> torch.device:
    """The torch device of a checked --device: "auto" is CUDA where it is available, else the CPU."""
    check_device(device)
    return torch.device(("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device)


def check_nonempty(name: str, value: torch.Tensor, layout: str) -> None:
    """Require every dimension >= 1 (an empty batch, time or space axis has nothing to compute and
    fails deep inside FFTs otherwise)."""
    if value.numel() == 0:
        raise ValueError(f"{name} must have no empty dimension ({layout}), got shape {tuple(value.shape)}")


def _traced() -> bool:
    """True inside torch.compile tracing or CUDA-graph capture, where a value check (a host sync)
    cannot run; the eager call with the same arguments is checked."""
    return torch.compiler.is_compiling() or (torch.cuda.is_available() and torch.cuda.is_current_stream_capturing())


def check_unit_interval(name: str, value: torch.Tensor) -> None:
    """Require every entry finite and in [0, 1] (one host sync; skipped while compiling or capturing)."""
    if _traced():
        return
    bad = ~((value >= 0) & (value <= 1))  # NaN compares False: caught too
    if bool(bad.any()):
        first = value.detach().flatten()[bad.flatten()][0].item()
        raise ValueError(f"{name} must be finite and in [0, 1], got {first} (shape {tuple(value.shape)})")


def first_non_finite(value: torch.Tensor, dim: int) -> int | None:
    """The first index along dim whose slice holds a NaN or Inf, or None when all are finite."""
    finite = torch.isfinite(value).movedim(dim, 0).flatten(1).all(dim=1)
    if bool(finite.all()):
        return None
    return int((~finite).nonzero()[0, 0])
