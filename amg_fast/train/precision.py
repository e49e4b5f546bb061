"""Precision modes of training and evaluation: fp32 (default), tf32, bf16.

- fp32: fp32 GEMMs (TF32 off) and fp32-accurate Triton dots ("tf32x3").
- tf32: TF32 tensor-core GEMMs in cuBLAS and plain TF32 Triton dots (about 3e-4 relative error
  per product; torch.set_float32_matmul_precision("high")).
- bf16: the forward and loss under torch.autocast(bfloat16) with fp32 master weights and an fp32
  optimizer; the ops cast activations to bf16 and accumulate in fp32. Matmul precision as fp32.

`precision_scope(p)` sets the matmul precision for its block and restores the caller's setting
afterwards (it is process-global state); `autocast(p, device)` is the autocast context of a
forward pass (a no-op except for bf16). Autocast's weight-cast cache is off, so the same context
works inside a CUDA-graph capture.
"""
from __future__ import annotations

import contextlib

import torch

from amg_fast._checks import ArgumentError

__all__ = ["PRECISIONS", "check_precision", "precision_scope", "autocast"]

PRECISIONS = ("fp32", "tf32", "bf16")


def check_precision(precision: str) -> str:
    if precision not in PRECISIONS:
        raise ArgumentError(f"precision must be one of {PRECISIONS}, got {precision!r}", "precision")
    return precision


@contextlib.contextmanager
def precision_scope(precision: str):
    """Matmul precision for the block: "high" (TF32) for tf32, "highest" (fp32) otherwise."""
    check_precision(precision)
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high" if precision == "tf32" else "highest")
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


def autocast(precision: str, device: torch.device | str):
    """torch.autocast(bf16) for precision "bf16" (cache off: graph-capture safe), else a no-op."""
    check_precision(precision)
    if precision != "bf16":
        return contextlib.nullcontext()
    device_type = torch.device(device).type
    return torch.autocast(device_type, dtype=torch.bfloat16, cache_enabled=False)
