"""Benchmark session set-up: helper import path, torch settings, and what the results JSON records.

`pytest bench/ --benchmark-only --benchmark-json=PATH` writes pytest-benchmark's JSON; the hook
below adds the GPU, the torch / triton / CUDA versions, the date, the commit and the bench knobs to
its machine_info (bench/bench_table.py reads them).
"""
import datetime
import platform
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # bench/_providers.py, bench/_roofline.py (pytest runs with importlib mode)

import torch  # noqa: E402
import torch._dynamo  # noqa: E402

import _providers  # noqa: E402

# One compiled callable per (op, shape) recompiles the same code object once per shape and
# provider input set; the default limit (8) would silently fall back to eager.
for _name in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit", "accumulated_cache_size_limit"):
    if hasattr(torch._dynamo.config, _name):
        setattr(torch._dynamo.config, _name, max(getattr(torch._dynamo.config, _name), 256))

if _providers.ON_GPU:
    # TF32 GEMMs for the eager and compiled references too, as the Triton kernels use (fair
    # comparison; PERFORMANCE.md's floors assume TF32). AMG_BENCH_MATMUL_PRECISION=highest: fp32.
    torch.set_float32_matmul_precision(_providers.MATMUL_PRECISION)


def _git(*args: str) -> str | None:
    try:
        proc = subprocess.run(["git", *args], cwd=HERE.parent, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def _versions() -> dict:
    try:
        import triton
        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    return {"python": platform.python_version(), "torch": torch.__version__, "triton": triton_version,
            "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version() if torch.cuda.is_available() else None}


def _gpu() -> dict:
    if not torch.cuda.is_available():
        return {"gpu": None, "gpu_count": 0}
    props = torch.cuda.get_device_properties(0)
    return {"gpu": props.name, "gpu_count": torch.cuda.device_count(),
            "gpu_memory_gib": round(props.total_memory / 2**30, 1), "gpu_sm_count": props.multi_processor_count,
            "gpu_capability": f"{props.major}.{props.minor}"}


def pytest_benchmark_update_machine_info(config, machine_info):
    status = _git("status", "--porcelain", "--untracked-files=no")
    machine_info.update(_gpu())
    machine_info.update(versions=_versions(),
                        date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                        commit=_git("rev-parse", "HEAD"), commit_dirty=None if status is None else bool(status),
                        amg_bench=_providers.config())
