"""Backend selection shared by every op: "auto" | "triton" | "reference".

"auto" picks Triton when the tensors are on CUDA and Triton imports, else the reference; the
choice and its reason are logged once per (op, choice, reason). "triton" never falls back
silently: it raises a RuntimeError saying why the kernels cannot run. With TRITON_INTERPRET=1 set
before Triton is first imported, "triton" runs the same kernels on CPU tensors (how CI tests them).
"""
from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import logging
import os
from typing import Any, Callable

import torch

from amg_fast._nvtx import nvtx_range

BACKENDS = ("auto", "triton", "reference")
logger = logging.getLogger("amg_fast.ops")
_logged: set[tuple[str, str, str]] = set()
_TRITON_INSTALLED = importlib.util.find_spec("triton") is not None  # looked up once, without importing


def _log_once(op: str, choice: str, reason: str) -> None:
    key = (op, choice, reason)
    if key not in _logged:
        _logged.add(key)
        logger.info("amg_fast.ops.%s: using the %s backend (%s)", op, choice, reason)


def triton_importable() -> bool:
    """True when the triton package is installed (checked without importing it)."""
    return _TRITON_INSTALLED


def triton_interpreter_on() -> bool:
    """True when TRITON_INTERPRET=1: Triton kernels then run on CPU tensors, in the interpreter."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"


def _major_minor(version: str) -> tuple[int, int]:
    major, minor = (version.split(".") + ["0"])[:2]
    return int(major), int("".join(ch for ch in minor if ch.isdigit()) or 0)


@functools.cache
def interpreter_blocker() -> str | None:
    """Why Triton's interpreter cannot run the kernels with the installed packages, or None.

    Triton <= 3.6 (torch 2.11's, the GPU machines') turns a scalar kernel argument into a loop bound
    with int() of a 1-element array, which numpy >= 2.3 refuses ("only 0-dimensional arrays can be
    converted to Python scalars", at the first `range(0, n, BLOCK)`); triton 3.7 fixed it."""
    import numpy

    try:
        triton_version = importlib.metadata.version("triton")
    except importlib.metadata.PackageNotFoundError:  # importable without its metadata: cannot tell
        return None
    if _major_minor(triton_version) < (3, 7) and _major_minor(numpy.__version__) >= (2, 3):
        return (f"triton {triton_version}'s interpreter cannot run with numpy {numpy.__version__} (it calls int() "
                "on 1-element arrays, which numpy >= 2.3 refuses; fixed in triton 3.7): install 'numpy<2.3' "
                "or triton >= 3.7")
    return None


def triton_unavailable_reason(device: torch.device) -> str | None:
    """Why the Triton kernels cannot run on tensors of this device, or None when they can."""
    if not triton_importable():
        return "the triton package is not installed (pip install triton; Linux with an NVIDIA GPU)"
    if device.type == "cuda":
        return None
    if device.type == "cpu" and triton_interpreter_on():
        return interpreter_blocker()
    return (f"tensors are on {device.type}; the Triton kernels need CUDA tensors, or CPU tensors with "
            "TRITON_INTERPRET=1 set before triton is imported")


def check_backend(backend) -> str:
    """Require one of BACKENDS (models call this at build, ops at each call); returns it."""
    if not isinstance(backend, str) or backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    return backend


def resolve_backend(op: str, backend: str, device: torch.device) -> str:
    """Return "triton" or "reference" for op on device, or raise saying why Triton cannot run."""
    check_backend(backend)
    if backend == "reference":
        return "reference"
    if torch.compiler.is_compiling():  # no logging or environment lookups inside a traced graph
        return "triton" if backend == "triton" or (device.type == "cuda" and triton_importable()) else "reference"
    reason = triton_unavailable_reason(device)
    if backend == "triton":
        if reason is not None:
            raise RuntimeError(f"backend='triton' for {op} cannot run: {reason}; use backend='reference' "
                               "or 'auto'")
        return "triton"
    if device.type != "cuda" or reason is not None:  # auto: Triton only on CUDA
        _log_once(op, "reference", reason or f"tensors are on {device.type}, 'auto' uses Triton on CUDA only")
        return "reference"
    _log_once(op, "triton", "tensors on CUDA")
    return "triton"


def load_triton_ops() -> None:
    """Register the Triton kernels as torch.ops.amg_fast.* (amg_fast.ops._triton_ops, which imports
    triton) the first time an op needs them; later calls find the module in sys.modules."""
    import amg_fast.ops._triton_ops  # noqa: F401


def triton_ops():
    """torch.ops.amg_fast with the Triton kernels registered: what every autograd Function calls
    (also when a Function is applied directly, without its public op having run first)."""
    load_triton_ops()
    return torch.ops.amg_fast


def run_op(op: str, backend: str, x: torch.Tensor, reference: Callable[[], Any],
           triton: Callable[[torch.Tensor], Any], *, unsupported: str | None = None) -> Any:
    """The opening every public op shares, after its argument checks: resolve the backend for x's
    device; "reference" -> reference(). Triton -> triton(x) inside an nvtx range named
    "amg_fast.<op>", with x (the activation) cast to the autocast dtype when autocast is on (fp64
    stays fp64, as autocast leaves it) and autocast off inside, so the op decides every dtype itself.
    unsupported: why the Triton kernels cannot take these arguments (e.g. too wide), or None: then
    backend="triton" raises a ValueError with that text and "auto" runs the reference (logged once).
    """
    choice = resolve_backend(op, backend, x.device)
    if choice == "triton" and unsupported is not None:
        if backend == "triton":
            raise ValueError(unsupported)
        _log_once(op, "reference", unsupported)
        choice = "reference"
    if choice == "reference":
        return reference()
    load_triton_ops()
    with nvtx_range(f"amg_fast.{op}"):
        cast = autocast_dtype(x.device)
        if cast is not None and x.dtype != torch.float64:
            x = x.to(cast)
        with torch.autocast(x.device.type, enabled=False):
            return triton(x)


def autocast_dtype(device: torch.device) -> torch.dtype | None:
    """The autocast dtype active for this device type, or None when autocast is off."""
    if torch.is_autocast_enabled(device.type):
        return torch.get_autocast_dtype(device.type)
    return None
