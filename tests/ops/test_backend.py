"""Backend selection: reference runs, triton runs or says exactly why it cannot, unknown names are refused."""
import logging

import pytest
import torch
from helpers import interpreter_only

from amg_fast.ops import _backend, gate_fusion, s4d_scan, spectral_conv1d

OPS = {
    "spectral_conv1d": lambda backend: spectral_conv1d(torch.randn(8, 4), torch.randn(3, 4, 4, 2), backend=backend),
    "s4d_scan": lambda backend: s4d_scan(torch.randn(1, 3, 2, 4), torch.rand(4, 2, 2) / 2, torch.randn(4, 2, 2),
                                         torch.randn(4), backend=backend),
    "gate_fusion": lambda backend: gate_fusion(torch.randn(2, 4), torch.randn(2, 4), torch.randn(4, 4),
                                               torch.randn(4, 4), torch.randn(4), torch.tensor(0.5), backend=backend),
}


@pytest.mark.parametrize("op", OPS)
def test_triton_on_cpu_without_interpreter_raises(op, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(RuntimeError, match=f"backend='triton' for {op} cannot run: tensors are on cpu; the Triton "
                                           "kernels need CUDA tensors, or CPU tensors with TRITON_INTERPRET=1"):
        OPS[op]("triton")


@pytest.mark.parametrize("op", OPS)
def test_triton_without_triton_package_raises(op, monkeypatch):
    monkeypatch.setattr(_backend, "triton_importable", lambda: False)
    with pytest.raises(RuntimeError, match=f"backend='triton' for {op} cannot run: the triton package is not installed"):
        OPS[op]("triton")


@pytest.mark.parametrize("triton_version, numpy_version, blocked", [
    ("3.6.0", "2.4.6", True),    # torch 2.11's triton: its interpreter calls int() on 1-element arrays
    ("3.6.0", "2.2.6", False),
    ("3.5.1", "2.3.0", True),
    ("3.7.0", "2.4.6", False),   # fixed
    ("3.9.0", "2.4.6", False),
])
def test_an_interpreter_that_cannot_run_with_this_numpy_is_named(triton_version, numpy_version, blocked, monkeypatch):
    import importlib.metadata

    import numpy
    monkeypatch.setattr(importlib.metadata, "version", lambda name: {"triton": triton_version}[name])
    monkeypatch.setattr(numpy, "__version__", numpy_version)
    monkeypatch.setattr(_backend, "triton_interpreter_on", lambda: True)  # as on CPU, also on a GPU machine
    _backend.interpreter_blocker.cache_clear()
    try:
        reason = _backend.triton_unavailable_reason(torch.device("cpu"))
        if not blocked:
            assert reason is None
            return
        assert reason == (f"triton {triton_version}'s interpreter cannot run with numpy {numpy_version} (it calls "
                          "int() on 1-element arrays, which numpy >= 2.3 refuses; fixed in triton 3.7): install "
                          "'numpy<2.3' or triton >= 3.7")
        with pytest.raises(RuntimeError, match=r"backend='triton' for spectral_conv1d cannot run: triton "
                                               rf"{triton_version}'s interpreter cannot run with numpy"):
            OPS["spectral_conv1d"]("triton")
        assert _backend.resolve_backend("op", "triton", torch.device("cuda")) == "triton"  # a GPU is not concerned
    finally:
        _backend.interpreter_blocker.cache_clear()


@interpreter_only  # with a GPU, conftest leaves TRITON_INTERPRET unset and triton.jit gives no interpreted kernels
def test_interpreted_kernels_launch_directly():
    """kernels._common.wrap_triton: torch 2.11's wrap_triton refuses the interpreter's kernels (2.13
    returns them), so the shim returns them itself."""
    import triton
    import triton.language as tl

    from amg_fast.kernels._common import wrap_triton

    @triton.jit
    def copy_kernel(x_ptr, y_ptr, BLOCK: tl.constexpr):
        offsets = tl.arange(0, BLOCK)
        tl.store(y_ptr + offsets, tl.load(x_ptr + offsets))

    assert wrap_triton(copy_kernel) is copy_kernel  # conftest set TRITON_INTERPRET=1: an InterpretedFunction
    x, y = torch.randn(16), torch.zeros(16)
    wrap_triton(copy_kernel)[(1,)](x, y, BLOCK=16)
    assert torch.equal(x, y)


def test_other_kernels_go_through_torch_wrap_triton(monkeypatch):
    """kernels._common.wrap_triton: anything but an interpreted kernel goes to torch.library.wrap_triton."""
    from amg_fast.kernels._common import wrap_triton

    calls = []
    monkeypatch.setattr(torch.library, "wrap_triton", lambda kernel: calls.append(kernel) or "wrapped")
    jit_like = object()
    assert wrap_triton(jit_like) == "wrapped" and calls == [jit_like]


def test_auto_on_cuda_picks_triton_and_on_cpu_reference(monkeypatch):
    monkeypatch.setattr(_backend, "_logged", set())
    assert _backend.resolve_backend("op", "auto", torch.device("cuda")) == "triton"
    assert _backend.resolve_backend("op", "auto", torch.device("cpu")) == "reference"  # interpreter or not
    monkeypatch.setattr(_backend, "triton_importable", lambda: False)
    assert _backend.resolve_backend("op", "auto", torch.device("cuda")) == "reference"


@pytest.mark.parametrize("op", OPS)
def test_unknown_backend_rejected(op):
    with pytest.raises(ValueError, match=r"backend must be one of \('auto', 'triton', 'reference'\), got 'cuda'"):
        OPS[op]("cuda")


@pytest.mark.parametrize("op", OPS)
def test_auto_equals_reference_on_cpu_and_logs_reason_once(op, caplog, monkeypatch):
    monkeypatch.setattr(_backend, "_logged", set())
    torch.manual_seed(0)
    with caplog.at_level(logging.INFO, logger="amg_fast.ops"):
        auto = OPS[op]("auto")
        OPS[op]("auto")
    messages = [r.getMessage() for r in caplog.records if op in r.getMessage()]
    assert len(messages) == 1 and "using the reference backend" in messages[0]
    torch.manual_seed(0)
    ref = OPS[op]("reference")
    auto, ref = (auto if isinstance(auto, tuple) else (auto,)), (ref if isinstance(ref, tuple) else (ref,))
    assert all(torch.equal(a, r) for a, r in zip(auto, ref))


# ----------------------------------------------------------------------------- one shape per op


def test_public_ops_do_not_shadow_modules():
    """amg_fast.ops.<op> is the function; no op module carries an op's name (ops/s4d.py, gate.py, ffn.py)."""
    import importlib.util

    import amg_fast.ops as ops

    for name in ops.__all__:
        assert callable(getattr(ops, name)), name
        assert importlib.util.find_spec(f"amg_fast.ops.{name}") is None, f"amg_fast.ops.{name} is also a module"


def test_importing_the_package_does_not_import_triton(tmp_path):
    """The Triton registrations (ops/_triton_ops.py) load on first use, not at import."""
    import subprocess
    import sys

    code = ("import sys, amg_fast, amg_fast.ops, amg_fast.models, amg_fast.layers, amg_fast.train; "
            "print('triton' in sys.modules, hasattr(__import__('torch').ops.amg_fast, 'gate_fusion_fwd'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_spectral_bases_cache_is_bounded_and_least_recently_used():
    from amg_fast.kernels import spectral_conv as k

    k._BASES_CACHE.clear()
    first = k.spectral_bases(8, 3, torch.float64, torch.device("cpu"))
    for S in range(10, 10 + k.BASES_CACHE_SIZE - 1):
        k.spectral_bases(S, 2, torch.float64, torch.device("cpu"))
    assert k.spectral_bases(8, 3, torch.float64, torch.device("cpu")) is first  # hit: now most recent
    for S in range(100, 110):
        k.spectral_bases(S, 2, torch.float64, torch.device("cpu"))
    assert len(k._BASES_CACHE) == k.BASES_CACHE_SIZE
    assert (8, 3, torch.float64, torch.device("cpu"), False, False) in k._BASES_CACHE  # recently used: kept
    assert (10, 2, torch.float64, torch.device("cpu"), False, False) not in k._BASES_CACHE  # least recently used: dropped


@pytest.mark.parametrize("transform", ["dft", "fft", "auto"])
def test_spectral_transform_is_public_on_the_op(transform, kdev, gen):
    from amg_fast.ops import spectral_conv1d, spectral_conv1d_ref

    x = torch.randn(2, 16, 8, generator=gen, dtype=torch.float64).to(kdev)
    w = torch.randn(5, 8, 4, 2, generator=gen, dtype=torch.float64).to(kdev)
    y = spectral_conv1d(x, w, backend="triton", transform=transform)
    assert torch.allclose(y.cpu(), spectral_conv1d_ref(x.cpu(), w.cpu()), rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match=r"transform must be one of \('auto', 'dft', 'fft'\), got 'fast'"):
        spectral_conv1d(x, w, transform="fast")


def test_algorithm_thresholds_live_in_kernels_limits():
    from amg_fast.kernels import limits

    assert limits.s4d_method("auto", limits.TOEPLITZ_MAX_T) == "toeplitz"
    assert limits.s4d_method("auto", limits.TOEPLITZ_MAX_T + 1) == "scan"
    assert limits.spectral_transform("auto", limits.TRANSFORM_FFT_MIN_S - 1) == "dft"
    assert limits.spectral_transform("auto", limits.TRANSFORM_FFT_MIN_S) == "fft"
    assert limits.s4d_method("scan", 1) == "scan"
    with pytest.raises(ValueError, match="method must be one of"):
        limits.s4d_method("fft", 3)


def test_a_function_applied_directly_registers_the_kernels_itself(tmp_path):
    """SpectralConv1dFn.apply in a fresh process, before any public op ran: the Function loads the
    torch.ops.amg_fast registrations itself (they are lazy)."""
    import os
    import subprocess
    import sys

    import torch

    # CPU tensors under the interpreter, or CUDA tensors with compiled kernels where there is a GPU
    # (torch 2.11's wrap_triton refuses interpreted kernels, so no interpreter there)
    cuda = torch.cuda.is_available()
    code = ("import torch; from amg_fast.ops.spectral_conv import SpectralConv1dFn, spectral_conv1d_ref; "
            f"kw = dict(dtype=torch.float64, device={'cuda' if cuda else 'cpu'!r}); "
            "x, w = torch.randn(2, 16, 4, **kw), torch.randn(5, 4, 4, 2, **kw); "
            "print(torch.allclose(SpectralConv1dFn.apply(x, w, 'dft'), spectral_conv1d_ref(x, w)))")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"} if cuda else {**os.environ, "TRITON_INTERPRET": "1"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["True"]
