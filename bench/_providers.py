"""Shared machinery of the benchmark suites: shapes, providers, modes, timing, extra_info.

Providers (side by side in one pytest-benchmark group per op + mode + shape):
  reference  the eager PyTorch reference (backend="reference")
  compiled   the reference under torch.compile (dynamic=False, fullgraph where Dynamo can; one
             compiled callable per (op, shape), compiled during warm-up, outside the timing)
  triton     backend="triton" (CUDA only: on CPU it would time Triton's interpreter)
Modes: fwd (forward on inputs that require grad, as in training), bwd (backward only: the forward
runs once outside the timed region and the graph is retained), fwd+bwd. Gradients are returned by
torch.autograd.grad, so nothing accumulates into .grad between calls.

Every suite first checks the timed call's result against the eager reference in float64 on the
same inputs (check_close: relative error within TOLERANCE of the precision mode), so a wrong op
cannot pass as a benchmark. bench/gpu_summary.py builds its calls with the same functions.

Timing: pytest-benchmark times each call followed by torch.cuda.synchronize() on a GPU; on CUDA
triton.testing.do_bench (L2 flushed between calls, CUDA events) also runs and its median, in ms,
goes to extra_info["do_bench_ms"] -- the figure bench/bench_table.py reports.

Environment knobs (comma-separated lists), for a time-limited run:
  AMG_BENCH_SIZES          S values (GPU default 32,64,128,256,1024; CPU 32,64)
  AMG_BENCH_STEP_SIZES     S values of the training-step benchmark (GPU default: those of
                           AMG_BENCH_SIZES up to 128, i.e. 32,64,128; CPU: AMG_BENCH_SIZES)
  AMG_BENCH_STEP_SIZES_2D  S values (points per axis) of the 2D (AMGFNO2d) training-step benchmark
                           (GPU default 32,64, the ns2d experiment's f; CPU 16)
  AMG_BENCH_PROVIDERS      subset of reference,compiled,triton (default all)
  AMG_BENCH_COMPILE_SIZES  S values the compiled provider runs at (GPU default: all sizes; CPU: the
                           smallest only, as compiling the training step takes ~25 s a size there)
  AMG_BENCH_MODES          subset of fwd,bwd,fwd+bwd (default all)
  AMG_BENCH_ROUND_BUDGET_S seconds of pytest-benchmark rounds per benchmark (GPU 0.1, CPU 0.3)
  AMG_BENCH_DO_BENCH_MS    do_bench warmup,rep in ms (default 25,100)
  AMG_BENCH_MATMUL_PRECISION  torch.set_float32_matmul_precision on CUDA (default "high" = TF32,
                           what the Triton kernels use; "highest" = true fp32 GEMMs)
  AMG_BENCH_CUDA_GRAPH     "1" (default on a GPU): also capture each timed call in a CUDA graph and
                           time its replays (extra_info["graph_ms"]): the GPU time without the
                           per-launch host cost, which dominates at the paper's sizes; "0" skips it
  AMG_BENCH_KERNEL_COUNT   "1" (default): after timing, count the kernels of one training step with
                           the torch profiler (extra_info["kernels"], bench/_kernel_count.py); "0" skips it
"""
from __future__ import annotations

import datetime
import functools
import math
import os
import platform
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Sequence

import pytest
import torch

from _roofline import flops_and_bytes
from amg_fast.kernels._common import fake_rfft_strides_match
from amg_fast.train.precision import autocast

ON_GPU = torch.cuda.is_available()
DEVICE = torch.device("cuda" if ON_GPU else "cpu")
DTYPE = torch.float32
PROVIDERS = ("reference", "compiled", "triton")
MODES = ("fwd", "bwd", "fwd+bwd")
CPU_TRITON_SKIP = "triton provider on CPU: interpreter timings mean nothing"


def _env_list(name: str, default: Sequence, allowed: Sequence | None = None, cast=str) -> tuple:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return tuple(default)
    try:
        values = tuple(cast(v.strip()) for v in raw.split(",") if v.strip())
    except ValueError as err:
        raise ValueError(f"{name}={raw!r}: {err}") from None
    bad = [v for v in values if allowed is not None and v not in allowed]
    if bad or not values:
        raise ValueError(f"{name}={raw!r}: allowed values are {', '.join(map(str, allowed or ()))}")
    return values


def _even_size(text: str) -> int:
    value = int(text)
    if value < 2 or value % 2:
        raise ValueError(f"S must be an even integer >= 2, got {value}")
    return value


SIZES = _env_list("AMG_BENCH_SIZES", (32, 64, 128, 256, 1024) if ON_GPU else (32, 64), cast=_even_size)
STEP_SIZES = _env_list("AMG_BENCH_STEP_SIZES", [s for s in SIZES if s <= 128] if ON_GPU else SIZES,
                       cast=_even_size)
STEP_SIZES_2D = _env_list("AMG_BENCH_STEP_SIZES_2D", (32, 64) if ON_GPU else (16,), cast=_even_size)
ENABLED_PROVIDERS = _env_list("AMG_BENCH_PROVIDERS", PROVIDERS, PROVIDERS)
# On a CPU, compiling AMGFNO's training step costs ~25 s a size: the compiled provider runs at the
# smallest size only there, so `pytest bench --benchmark-disable` (CI) stays near 1 minute.
COMPILE_SIZES = _env_list("AMG_BENCH_COMPILE_SIZES", SIZES if ON_GPU else SIZES[:1], cast=_even_size)
ENABLED_MODES = _env_list("AMG_BENCH_MODES", MODES, MODES)
ROUND_BUDGET_S = float(os.environ.get("AMG_BENCH_ROUND_BUDGET_S", "0.1" if ON_GPU else "0.3"))
_DO_BENCH = _env_list("AMG_BENCH_DO_BENCH_MS", (25, 100), cast=int)
if len(_DO_BENCH) != 2:
    raise ValueError(f"AMG_BENCH_DO_BENCH_MS must be 'warmup,rep' in ms, got {os.environ['AMG_BENCH_DO_BENCH_MS']!r}")
DO_BENCH_WARMUP_MS, DO_BENCH_REP_MS = _DO_BENCH
MATMUL_PRECISION = os.environ.get("AMG_BENCH_MATMUL_PRECISION", "high")
CUDA_GRAPH = ON_GPU and os.environ.get("AMG_BENCH_CUDA_GRAPH", "1") == "1"
KERNEL_COUNT = os.environ.get("AMG_BENCH_KERNEL_COUNT", "1") == "1"
# The training step also runs in bf16 autocast, for the eager providers (not "compiled").
STEP_PRECISIONS = ("fp32", "bf16")


def config() -> dict:
    """The knobs this run used (recorded in the results JSON's machine_info)."""
    return {"sizes": list(SIZES), "step_sizes": list(STEP_SIZES), "step_sizes_2d": list(STEP_SIZES_2D),
            "providers": list(ENABLED_PROVIDERS),
            "compile_sizes": list(COMPILE_SIZES), "kernel_count": KERNEL_COUNT,
            "modes": list(ENABLED_MODES), "round_budget_s": ROUND_BUDGET_S, "dtype": str(DTYPE).removeprefix("torch."),
            "do_bench_warmup_ms": DO_BENCH_WARMUP_MS, "do_bench_rep_ms": DO_BENCH_REP_MS,
            "matmul_precision": torch.get_float32_matmul_precision(), "device": str(DEVICE),
            "cuda_graph": CUDA_GRAPH}


def raise_recompile_limits() -> None:
    """One compiled callable per (op, shape) recompiles the same code object once per shape and
    provider input set; the default limit (8) would silently fall back to eager."""
    import torch._dynamo

    for name in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit", "accumulated_cache_size_limit"):
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, max(getattr(torch._dynamo.config, name), 256))


def machine_info() -> dict:
    """GPU (name, count, memory, SMs, capability; None without one), versions, UTC date, commit (of this
    checkout: amg_fast._provenance.code_version), the AMG_FAST_* kernel switches set."""
    from amg_fast._provenance import code_version, kernel_switches

    try:
        import triton
        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    info = {"gpu": None, "gpu_count": 0}
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        info = {"gpu": props.name, "gpu_count": torch.cuda.device_count(),
                "gpu_memory_gib": round(props.total_memory / 2**30, 1), "gpu_sm_count": props.multi_processor_count,
                "gpu_capability": f"{props.major}.{props.minor}"}
    info.update(versions={"python": platform.python_version(), "torch": torch.__version__, "triton": triton_version,
                          "cuda": torch.version.cuda,
                          "cudnn": torch.backends.cudnn.version() if torch.cuda.is_available() else None},
                date=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                **code_version(Path(__file__).resolve().parent), kernel_switches=kernel_switches())
    return info


# -- shapes and parametrisation ----------------------------------------------------------------
@dataclass(frozen=True)
class Shape:
    """B trajectories x T steps of S points (spatial_dims 2: an S x S grid) x H channels; K = S/2
    Fourier modes (per axis), N S4D pairs."""
    B: int
    T: int
    S: int
    H: int
    N: int = 32
    spatial_dims: int = 1

    @property
    def K(self) -> int:
        return self.S // 2

    @property
    def id(self) -> str:
        grid = f"{self.S}x{self.S}" if self.spatial_dims == 2 else f"{self.S}"
        return f"B{self.B}-T{self.T}-S{grid}-H{self.H}"

    def as_dict(self) -> dict:
        return {**asdict(self), "K": self.K}


def shape_for(S: int, tiny: bool = False, paper: bool = ON_GPU) -> Shape:
    """The paper's shapes (B*T = 32*25 rows, H = 128) if paper (default: on a GPU), else small ones
    (4*25 rows, H = 32); tiny ones (2*4 rows, H = 16) for a dry run of bench/gpu_summary.py."""
    if tiny:
        return Shape(2, 4, S, 16)
    return Shape(32, 25, S, 128) if paper else Shape(4, 25, S, 32)


def shape_for_2d(S: int, paper: bool = ON_GPU) -> Shape:
    """The 2D step's shapes: the ns2d paper preset's batch and width at the nu = 1e-4 data's 30 steps
    (B 16, T 30, H 64) on an S x S grid if paper (default: on a GPU), else a small one (B 2, T 4, H 16)."""
    return Shape(16, 30, S, 64, spatial_dims=2) if paper else Shape(2, 4, S, 16, spatial_dims=2)


def cases(sizes: Sequence[int] = SIZES) -> list:
    """pytest params (S, provider), ids like S128-triton; skips say why."""
    params = []
    for S in sizes:
        for provider in ENABLED_PROVIDERS:
            marks = []
            if provider == "triton" and not ON_GPU:
                marks.append(pytest.mark.skip(reason=CPU_TRITON_SKIP))
            elif provider == "compiled" and not fake_rfft_strides_match(DEVICE.type):
                marks.append(pytest.mark.skip(reason=f"torch {torch.__version__}'s fake rfft on {DEVICE.type} reports "
                                                     "strides its kernel does not write (fixed in torch 2.12): "
                                                     "inductor's stride check fails the graphs of the spectral conv, "
                                                     "S4D and the training step"))
            elif provider == "compiled" and S not in COMPILE_SIZES:
                where = "" if ON_GPU else " on CPU"
                marks.append(pytest.mark.skip(reason=f"compiled provider runs at S in {list(COMPILE_SIZES)} only{where}, "
                                                     "to bound compile time (AMG_BENCH_COMPILE_SIZES)"))
            params.append(pytest.param(S, provider, id=f"S{S}-{provider}", marks=marks))
    return params


def step_cases(sizes: Sequence[int] = STEP_SIZES) -> list:
    """pytest params (S, provider, precision) of the training step at sizes (default STEP_SIZES):
    every case in fp32 (ids as cases(), S32-triton) and the eager providers in bf16 too (S32-triton-bf16)."""
    params = []
    for case in cases(sizes):
        S, provider = case.values
        for precision in STEP_PRECISIONS:
            if precision == "fp32" or provider != "compiled":
                suffix = "" if precision == "fp32" else f"-{precision}"
                params.append(pytest.param(S, provider, precision, id=case.id + suffix, marks=case.marks))
    return params


def modes() -> list:
    return [pytest.param(m, id=m) for m in ENABLED_MODES]


# -- providers ---------------------------------------------------------------------------------
class Compiled:
    """torch.compile(fn, dynamic=False), fullgraph=True unless Dynamo cannot trace fn whole: then
    it says why once and compiles with graph breaks. fullgraph / break_reason go to extra_info.
    backend: torch.compile's ("inductor"; a dry run uses "eager": Dynamo's tracing only)."""

    def __init__(self, fn: Callable, backend: str = "inductor"):
        self.fn, self.backend, self.fullgraph, self.break_reason = fn, backend, True, None
        self._compiled = torch.compile(fn, fullgraph=True, dynamic=False, backend=backend)

    def __call__(self, *args):
        try:
            return self._compiled(*args)
        except torch._dynamo.exc.Unsupported as err:
            if not self.fullgraph:
                raise
            self.fullgraph = False
            self.break_reason = str(err).strip().splitlines()[0]
            warnings.warn(f"torch.compile(fullgraph=True) failed ({self.break_reason}); compiling with graph breaks",
                          stacklevel=2)
            self._compiled = torch.compile(self.fn, dynamic=False, backend=self.backend)
            return self._compiled(*args)


_COMPILED: dict[tuple[str, str], Compiled] = {}


def compiled(key: tuple[str, str], make_fn: Callable[[], Callable]) -> Compiled:
    """The compiled callable cached under key = (op, shape id); make_fn builds the eager one."""
    if key not in _COMPILED:
        _COMPILED[key] = Compiled(make_fn())
    return _COMPILED[key]


def op_callable(op: Callable, name: str, provider: str, shape: Shape) -> Callable:
    """op(*inputs, backend=...) for the provider; the compiled one is cached per (op, shape)."""
    if provider == "compiled":
        return compiled((name, shape.id), lambda: functools.partial(op, backend="reference"))
    return functools.partial(op, backend=provider)


# -- timing ------------------------------------------------------------------------------------
def sync() -> None:
    if ON_GPU:
        torch.cuda.synchronize()


def _synced(fn: Callable) -> Callable:
    def call():
        fn()
        sync()
    return call


def run(benchmark, fn: Callable, *, op: str, mode: str, provider: str, shape: Shape,
        tensors: dict | None = None, extra: dict | None = None) -> None:
    """Time fn() (one call = one op/step) under the benchmark fixture and fill extra_info.

    Warm-up (compile, autotune, JIT) happens before timing; rounds are sized to ROUND_BUDGET_S.
    Under --benchmark-disable fn runs once, untimed.
    """
    benchmark.group = f"{op} {mode} {shape.id}"
    flops, nbytes = flops_and_bytes(op, mode, shape.as_dict(), DTYPE.itemsize)
    info = {"op": op, "mode": mode, "provider": provider, "shape_id": shape.id, "shape": shape.as_dict(),
            "dtype": str(DTYPE).removeprefix("torch."), "device": str(DEVICE), "flops": flops, "bytes": nbytes,
            "matmul_precision": torch.get_float32_matmul_precision(),
            "tensors": {k: list(v.shape) for k, v in (tensors or {}).items()}}
    info.update(extra or {})
    benchmark.extra_info.update(info)
    if benchmark.disabled:
        benchmark(fn)
        return
    call = _synced(fn)
    call()  # compile / autotune / JIT
    start = time.perf_counter()
    call()
    per_call = max(time.perf_counter() - start, 1e-7)
    rounds = int(min(max(ROUND_BUDGET_S / per_call, 5), 1000))
    benchmark.pedantic(call, rounds=rounds, iterations=1, warmup_rounds=1)
    if ON_GPU:
        import triton.testing

        p50, p20, p80 = triton.testing.do_bench(fn, warmup=DO_BENCH_WARMUP_MS, rep=DO_BENCH_REP_MS,
                                                quantiles=[0.5, 0.2, 0.8])
        benchmark.extra_info.update(do_bench_ms=p50, do_bench_p20_ms=p20, do_bench_p80_ms=p80)
    if CUDA_GRAPH:
        benchmark.extra_info.update(graph_replay(fn))


def graph_replay(fn: Callable) -> dict:
    """{"graph_ms": median of do_bench over replays of fn captured in a CUDA graph} (after two
    warm-up calls on a side stream), or {"graph_ms": None, "graph_error": why} when fn cannot be
    captured (e.g. a host sync)."""
    import triton.testing

    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(2):
                fn()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn()
        ms = triton.testing.do_bench(graph.replay, warmup=DO_BENCH_WARMUP_MS, rep=DO_BENCH_REP_MS,
                                     return_mode="median")
        return {"graph_ms": float(ms)}
    except Exception as err:  # report, do not fail the benchmark: eager timings stand on their own
        torch.cuda.synchronize()
        return {"graph_ms": None, "graph_error": f"{type(err).__name__}: {str(err).strip().splitlines()[0][:200]}"}


def time_ms(fn: Callable, cpu_calls: int = 1) -> float:
    """Median time of fn() in ms: triton.testing.do_bench on a GPU (CUDA events, L2 flushed), the
    median of cpu_calls wall-clock calls on a CPU (a dry run: such times mean nothing)."""
    if ON_GPU:
        import triton.testing

        return float(triton.testing.do_bench(fn, warmup=DO_BENCH_WARMUP_MS, rep=DO_BENCH_REP_MS,
                                             return_mode="median"))
    times = []
    for _ in range(cpu_calls):
        start = time.perf_counter()
        fn()
        times.append(1e3 * (time.perf_counter() - start))
    return sorted(times)[len(times) // 2]


def _first(out):
    return out[0] if isinstance(out, (tuple, list)) else out


def _as_tuple(out) -> tuple:
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


@dataclass
class OpCall:
    """One benchmarked call of an op: fn() is what is timed (its result: the op's outputs in mode
    "fwd", else the input gradients), forward the provider's op (a Compiled for "compiled"), and
    expected() the same result from the eager reference in float64 on the same inputs."""
    fn: Callable[[], object]
    forward: Callable
    expected: Callable[[], tuple]


def op_call(op: Callable, name: str, inputs: dict, mode: str, provider: str, shape: Shape,
            precision: str = "fp32") -> OpCall:
    """The call of op(*inputs.values(), backend=...) in mode; gradients w.r.t. the inputs that
    require grad, from the first output (gate_fusion's out; g is a detached statistic in the model).
    Under precision "bf16" every call runs in the trainer's bf16 autocast."""
    args = tuple(inputs.values())
    forward = op_callable(op, name, provider, shape)
    wrt = [t for t in args if t.requires_grad]

    def forward_in_precision():
        with autocast(precision, args[0].device):
            return forward(*args)

    grad_out = None
    if mode == "fwd":
        fn = forward_in_precision
    else:
        out = _first(forward_in_precision())
        grad_out = torch.randn_like(out)
        if mode == "bwd":
            def fn():
                return torch.autograd.grad(out, wrt, grad_out, retain_graph=True, allow_unused=True)
        else:
            del out

            def fn():
                return torch.autograd.grad(_first(forward_in_precision()), wrt, grad_out, allow_unused=True)

    def expected() -> tuple:
        args64 = [t.detach().double().requires_grad_(t.requires_grad) for t in args]
        out64 = op(*args64, backend="reference")
        if mode == "fwd":
            return _as_tuple(out64)
        return torch.autograd.grad(_first(out64), [a for a in args64 if a.requires_grad], grad_out.double(),
                                   allow_unused=True)

    return OpCall(fn, forward, expected)


# -- checks: a timed call's result against the float64 reference -------------------------------------
# Relative error ||got - expected|| / ||expected|| (all tensors of a result as one vector) allowed in
# each precision mode. Measured on CPU for AMGFNO's training step (H = 128, S = 32 and 128): fp32
# 1e-6, bf16 autocast 5e-3 (TF32 rounds 8x finer than bf16); a wrong op is off by O(1). fp32 allows
# 5e-4: the H200 (2026-11-27) measured the feed-forward op at S = 128 (102,400 rows) 1.8e-4 off in fp32,
# the reference and the Triton path alike (ReLU masks that flip between fp32 and fp64 near zero).
TOLERANCE = {"fp32": 5e-4, "tf32": 1e-2, "bf16": 5e-2}


def effective_precision(precision: str) -> str:
    """The precision mode a call really runs in: bf16 as given; fp32 is tf32 where the float32
    matmul precision lets a GPU use TF32 (the suites' default, AMG_BENCH_MATMUL_PRECISION=high)."""
    if precision == "fp32" and ON_GPU and torch.get_float32_matmul_precision() != "highest":
        return "tf32"
    return precision


def relative_error(got, expected) -> float:
    """||got - expected|| / ||expected|| over all tensors of two results of the same structure (None
    where both have no gradient), in float64; inf if an entry is missing on one side only."""
    got, expected = _as_tuple(got), _as_tuple(expected)
    if len(got) != len(expected):
        return math.inf
    diff = norm = 0.0
    for g, e in zip(got, expected):
        if g is None or e is None:
            if g is not None or e is not None:
                return math.inf
            continue
        g, e = g.detach().double(), e.detach().double().to(g.device)
        diff += float((g - e).square().sum())
        norm += float(e.square().sum())
    return math.sqrt(diff / norm) if norm > 0 else math.sqrt(diff)


def check_close(got, expected, precision: str) -> dict:
    """{"rel_err", "tol", "ok"}: got against the float64 expected result, within TOLERANCE[precision]
    (NaN fails)."""
    error, tol = relative_error(got, expected), TOLERANCE[precision]
    return {"rel_err": error, "tol": tol, "ok": bool(error <= tol)}


def assert_close(got, expected, precision: str, what: str) -> None:
    check = check_close(got, expected, precision)
    assert check["ok"], (f"{what}: the timed call's result is off the float64 reference by "
                         f"{check['rel_err']:.3g} (relative, allowed {check['tol']:g} in {precision})")


def bench_op(benchmark, *, name: str, op: Callable, inputs: dict, mode: str, provider: str, shape: Shape) -> None:
    """Benchmark op(*inputs.values(), backend=...) in mode (see op_call), after checking the first
    call's result against the float64 reference."""
    call = op_call(op, name, inputs, mode, provider, shape)
    assert_close(call.fn(), call.expected(), effective_precision("fp32"), f"{name} {mode} {provider} {shape.id}")
    run(benchmark, call.fn, op=name, mode=mode, provider=provider, shape=shape, tensors=inputs)
    record_compile(benchmark, call.forward)


def record_compile(benchmark, fn: Callable) -> None:
    """For the compiled provider: whether Dynamo captured one graph (else the first break's reason)."""
    if isinstance(fn, Compiled):
        benchmark.extra_info.update(fullgraph=fn.fullgraph, graph_break=fn.break_reason)


def generator(seed: int = 0) -> torch.Generator:
    return torch.Generator(DEVICE).manual_seed(seed)


def randn(*shape: int, gen: torch.Generator, scale: float = 1.0, grad: bool = True) -> torch.Tensor:
    t = torch.randn(shape, generator=gen, device=DEVICE, dtype=DTYPE) * scale
    return t.requires_grad_(grad)


def probe_main(argv, doc: str, default_sizes: list[int], column: str, settings: tuple[tuple, ...],
               measure: Callable[..., object]) -> int:
    """The command line of a bench/probe_*.py script: `--sizes S... --json OUT`; runs measure(S, into=row)
    (it fills the row dict as it measures) for each S under each (label, allow_tf32) or (label, allow_tf32,
    autocast dtype) of settings (the label in `column` of each row), prints a line per row and writes
    {"gpu", "torch", "unit": "ms", "rows"} to --json after every row. Stopped by SIGINT / Ctrl-C (the
    campaign's time limit), it writes what the current row measured so far, marked "stopped": true, and
    exits 130. Exit 3 without a GPU."""
    import argparse
    import json
    import sys

    p = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", type=int, nargs="+", default=default_sizes,
                   help=f"S values (default {' '.join(map(str, default_sizes))})")
    p.add_argument("--json", help="write the results to this JSON file")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("error: this probe times CUDA kernels and needs a GPU", file=sys.stderr)
        return 3
    results = []

    def publish(row: dict) -> None:
        results.append(row)
        print(" ".join(f"{key}={value:.4g}" if isinstance(value, float) else f"{key}={value}"
                       for key, value in row.items()), flush=True)
        if args.json:  # after every row, whole: a probe stopped by its time limit keeps what it measured
            from amg_fast._files import atomic_write_text

            summary = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "unit": "ms",
                       "rows": results}
            atomic_write_text(args.json, json.dumps(summary, indent=1))

    for label, allow, *cast in settings:
        torch.backends.cuda.matmul.allow_tf32 = allow
        for S in args.sizes:
            row = {column: label}
            try:
                with torch.autocast("cuda", dtype=cast[0] if cast else None, enabled=bool(cast)):
                    measure(S, into=row)
            except KeyboardInterrupt:
                publish({**row, "stopped": True})
                return 130
            publish(row)
    return 0
