"""Benchmark session set-up: helper import path, torch settings, and what the results JSON records.

`pytest bench/ --benchmark-only --benchmark-json=PATH` writes pytest-benchmark's JSON; the hook
below adds the GPU, the torch / triton / CUDA versions, the date, the commit and the bench knobs to
its machine_info (bench/bench_table.py reads them).
"""
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # bench/_providers.py, bench/_roofline.py (pytest runs with importlib mode)

import torch  # noqa: E402

import _providers  # noqa: E402

_providers.raise_recompile_limits()

if _providers.ON_GPU:
    # TF32 GEMMs for the eager and compiled references too, as the Triton kernels use (fair
    # comparison). AMG_BENCH_MATMUL_PRECISION=highest: fp32. bench/gpu_summary.py times each
    # precision mode (fp32, tf32, bf16) separately.
    torch.set_float32_matmul_precision(_providers.MATMUL_PRECISION)


def pytest_benchmark_update_machine_info(config, machine_info):
    machine_info.update(_providers.machine_info())
    machine_info.update(amg_bench=_providers.config())
