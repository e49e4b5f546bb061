"""nvtx ranges for profilers (Nsight): `with nvtx_range("amg_fast.spectral_conv1d"): ...`.

Uses the `nvtx` package where installed, else torch.cuda.nvtx when CUDA is initialised; a no-op
without either (and costs ~1 us when no profiler is attached). Never initialises CUDA.
"""
from __future__ import annotations

import contextlib

try:
    import nvtx as _nvtx_pkg
except ImportError:  # a GPU machine may lack the package
    _nvtx_pkg = None

import torch


@contextlib.contextmanager
def nvtx_range(name: str):
    """Mark the enclosed region as `name` in an Nsight timeline."""
    if _nvtx_pkg is not None:
        with _nvtx_pkg.annotate(name, domain="amg_fast"):
            yield
    elif torch.cuda.is_initialized():
        torch.cuda.nvtx.range_push(name)
        try:
            yield
        finally:
            torch.cuda.nvtx.range_pop()
    else:
        yield
