"""Backend selection shared by every op: "auto" | "triton" | "reference".

"auto" picks Triton when the tensors are on CUDA and the op has Triton kernels, else the
reference; the choice and its reason are logged once per (op, choice, reason). "triton" never
falls back silently: it raises when the kernels cannot run.
"""
from __future__ import annotations

import logging

import torch

BACKENDS = ("auto", "triton", "reference")
logger = logging.getLogger("amg_fast.ops")
_logged: set[tuple[str, str, str]] = set()


def _log_once(op: str, choice: str, reason: str) -> None:
    key = (op, choice, reason)
    if key not in _logged:
        _logged.add(key)
        logger.info("amg_fast.ops.%s: using the %s backend (%s)", op, choice, reason)


def resolve_backend(op: str, backend: str, device: torch.device, *, has_triton_kernels: bool) -> str:
    """Return "triton" or "reference" for op on device, or raise with the reason."""
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if backend == "reference":
        return "reference"
    if backend == "triton":
        if not has_triton_kernels:
            raise NotImplementedError(
                f"backend='triton' for {op}: the Triton kernels are not implemented yet "
                "(they arrive with the kernel issue); use backend='reference' or 'auto'"
            )
        return "triton"
    # auto
    if not has_triton_kernels:
        _log_once(op, "reference", "no Triton kernels for this op yet")
        return "reference"
    if device.type != "cuda":
        _log_once(op, "reference", f"tensors are on {device.type}, Triton needs CUDA")
        return "reference"
    _log_once(op, "triton", "tensors on CUDA")
    return "triton"
