import os
import signal

# pytest-xdist workers share the cores: each gets cores // workers torch (OpenMP) threads, and so do
# the CLIs the tests start (they inherit OMP_NUM_THREADS). torch's default of one thread per core in
# every worker oversubscribed the 2-core CI machine: small-op loops (the KS solver, training steps)
# ran 7x to 100x slower. An OMP_NUM_THREADS set by the user wins.
_XDIST_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
_CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)  # as -n auto
_THREADS = max(1, _CORES // _XDIST_WORKERS)
_SHARE_CORES = _XDIST_WORKERS > 1 and "OMP_NUM_THREADS" not in os.environ
if _SHARE_CORES:
    os.environ["OMP_NUM_THREADS"] = str(_THREADS)

import pytest  # noqa: E402
import torch  # noqa: E402

# The Ctrl-C tests (tests/test_interrupt.py; the campaign's and the benches' time limits) signal processes they
# start, and a child inherits an ignored SIGINT, which the tools keep ignored on purpose (amg_fast._entry). A suite
# started in the background by a script (`pytest ... &` without job control: SIGINT and SIGQUIT ignored) had failed
# 13 tests, each after minutes of waiting, when it was stopped. With Python's handler here (as in a foreground run;
# in the controller and in each xdist worker) every child starts with SIGINT's default action.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

if _SHARE_CORES:
    torch.set_num_threads(_THREADS)  # in case a plugin imported torch before this file

# Without a GPU the Triton kernels run in Triton's interpreter on CPU tensors. The variable must be
# set before triton is first imported (the kernels are defined at import time).
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

KERNEL_DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@pytest.fixture
def kdev():
    """Device the kernel tests run on: the GPU when there is one, else CPU under TRITON_INTERPRET=1."""
    return torch.device(KERNEL_DEVICE)


@pytest.fixture
def poisoned():
    """Every kernel output buffer starts as NaN inside the test, so an unwritten element fails it."""
    from amg_fast.kernels._common import poisoned_outputs

    with poisoned_outputs():
        yield


@pytest.fixture
def allow_tf32():
    """Set torch.backends.cuda.matmul.allow_tf32 inside the test (allow_tf32(True)); restored afterwards
    (monkeypatch cannot: torch.backends.cuda.matmul routes its attributes through __getattr__)."""
    previous = torch.backends.cuda.matmul.allow_tf32

    def set_(value: bool):
        torch.backends.cuda.matmul.allow_tf32 = value
    yield set_
    torch.backends.cuda.matmul.allow_tf32 = previous


@pytest.fixture(autouse=True)
def tf32_mma(request, monkeypatch):
    """Triton's interpreter multiplies fp32 dots exactly whatever their input_precision: in every test (but
    those marked exact_dots) a "tf32" dot reads its fp32 operands as a Hopper MMA does, the low 13 mantissa
    bits dropped (truncation), so a TF32 path is checked at TF32 hardware's accuracy on CPU as on a GPU
    (3xTF32 with an operand left unsplit or unrounded shows; so does plain TF32 without the rounding where
    its operands are formed). On a GPU the hardware does this itself and nothing is patched. Tests that
    name the fixture state that they depend on it."""
    if os.environ.get("TRITON_INTERPRET") != "1" or request.node.get_closest_marker("exact_dots"):
        return
    import numpy as np
    import triton.language as tl
    from triton._C.libtriton import ir
    from triton.runtime import interpreter

    create_dot = interpreter.InterpreterBuilder.create_dot

    def truncated(t):
        if t.dtype != tl.float32:
            return t
        return interpreter.TensorHandle((t.data.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32), t.dtype)

    def tf32_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        if input_precision == ir.INPUT_PRECISION.TF32:
            a, b = truncated(a), truncated(b)
        return create_dot(self, a, b, d, input_precision, max_num_imprecise_acc)

    monkeypatch.setattr(interpreter.InterpreterBuilder, "create_dot", tf32_dot)


@pytest.fixture
def gen(request):
    """A torch.Generator seeded from the test's node id: fresh inputs per test, reproducible runs."""
    import zlib

    return torch.Generator().manual_seed(zlib.crc32(request.node.nodeid.encode()))


def pytest_configure(config):
    from variant_report import VariantReport  # "VARIANT FAILED ..." lines for a GPU session's verdict

    config.pluginmanager.register(VariantReport(config, run_last=KERNEL_DEVICE == "cuda"), "variant_report")
    if KERNEL_DEVICE == "cuda":  # one faulting kernel must not fail every later test of its process
        from cuda_fault import CudaFaultGuard

        config.pluginmanager.register(CudaFaultGuard(), "cuda_fault_guard")


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU (compiled Triton kernels / bf16); none on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)
