"""nvtx ranges for profilers (Nsight): `with nvtx_range("amg_fast.spectral_conv1d"): ...`.

Uses the `nvtx` package where installed, else torch.cuda.nvtx when CUDA is initialised; a no-op
without either, and under torch.compile (where it must not break the graph). Never initialises CUDA.
"""
from __future__ import annotations

try:
    import nvtx as _nvtx_pkg
except ImportError:  # a GPU machine may lack the package
    _nvtx_pkg = None

import torch


class nvtx_range:  # noqa: N801 (used like a function: `with nvtx_range(name):`)
    """Mark the enclosed region as `name` in an Nsight timeline."""

    def __init__(self, name: str):
        self.name = name

    def __enter__(self):
        if not torch.compiler.is_compiling():
            if _nvtx_pkg is not None:
                _nvtx_pkg.push_range(self.name, domain="amg_fast")
            elif torch.cuda.is_initialized():
                torch.cuda.nvtx.range_push(self.name)
        return self

    def __exit__(self, *exc):
        if not torch.compiler.is_compiling():
            if _nvtx_pkg is not None:
                _nvtx_pkg.pop_range(domain="amg_fast")
            elif torch.cuda.is_initialized():
                torch.cuda.nvtx.range_pop()
        return False
