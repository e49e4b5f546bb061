"""Compile every Triton kernel for a Hopper GPU (sm_90) on a machine without one, at the launch
configurations the ops use at the paper's shapes, and report each compiled kernel's resources.

Why: Triton's interpreter (how CI runs the kernels on CPU) checks the arithmetic, not what the GPU
compiler accepts: 3-D dots, dot operand dtypes, tl.dot's minimum sizes, shared memory per program.
A kernel that fails to compile wastes a borrowed GPU's first call. Triton compiles for any target
without the GPU (its wheel carries ptxas), so this script runs each launcher (kernels/*.py) on meta
tensors, captures every kernel launch (grid, arguments, constexprs, num_warps) instead of running
it, and compiles it for sm_90 through the same specialization the JIT uses (integers equal to 1
become constants, 16-byte alignment of pointers and sizes). Checked per launch: it compiles; shared
memory <= the H100's 227 KB per block; grid axes 1 and 2 <= 65535; registers and spills are
reported (ptxas caps registers so that num_warps fit; spills only slow a kernel down), and so are the
dots' instructions (wgmma / mma / fma) and how the kernel loads global memory (cp.async: pipelined;
ldg: synchronous loads into registers; tma), from its SASS.

Run it with the Triton the GPU machine has (triton 3.6 there, 2026-11):

    pip install --no-deps --target /tmp/tri36 triton==3.6.0
    PYTHONPATH=/tmp/tri36 python bench/compile_sm90.py            # every case (a few minutes on 2 cores)
    python bench/compile_sm90.py --quick                          # one case per kernel and mode
    python bench/compile_sm90.py --ops gate_tiles --quick         # what each tiling the gate sweep times spills
    python bench/compile_sm90.py --ops s4d_tiles --quick          # ... the S4D sweep's
    python bench/compile_sm90.py --ops spectral_tiles --quick     # ... the spectral conv's (--only configs)
    python bench/compile_sm90.py --ops test_tiles                 # the CUDA tests' own tiles and shapes

TRITON_INTERPRET must not be set (the kernels would be interpreter functions). Compiled kernels go to
Triton's cache (~/.triton/cache), so a second run takes seconds. Exit status 1 when any case fails.
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
import importlib.util
import itertools
import os
import pkgutil
import re
import subprocess
import sys
import tempfile
import time
from unittest import mock

import torch

SHARED_LIMIT = 232448  # bytes of shared memory one block may use on an H100 / H200 (227 KB, opt-in)
GRID_YZ_LIMIT = 65535  # programs along grid axes 1 and 2 (axis 0: 2**31 - 1)
META = torch.device("meta")


@dataclasses.dataclass
class Launch:
    """One captured kernel launch: the case that made it, the JIT function, grid, arguments."""
    case: str
    fn: object
    grid: tuple
    args: tuple
    kwargs: dict


class _Recorder:
    """Stands in for torch.library.wrap_triton(kernel)[grid](*args, **kwargs): records the launch."""

    def __init__(self, sink: list, case: list):
        self.sink, self.case = sink, case

    def __call__(self, fn):
        recorder = self

        class _Grid:
            def __getitem__(self, grid):
                def launch(*args, **kwargs):
                    recorder.sink.append(Launch(recorder.case[0], fn, tuple(grid), args, kwargs))
                return launch
        return _Grid()


@contextlib.contextmanager
def recording(sink: list, case: list):
    """Within the block every kernel launch of amg_fast.kernels is recorded into sink, not run (each
    kernel module launches through its name wrap_triton, amg_fast.kernels._common's)."""
    import amg_fast.kernels as package

    names = (info.name for info in pkgutil.iter_modules(package.__path__))
    modules = [module for module in (importlib.import_module(f"amg_fast.kernels.{name}") for name in names)
               if hasattr(module, "wrap_triton") and module.__name__ != "amg_fast.kernels._common"]
    saved = [module.wrap_triton for module in modules]
    for module in modules:
        module.wrap_triton = _Recorder(sink, case)
    try:
        yield
    finally:
        for module, original in zip(modules, saved):
            module.wrap_triton = original


MODES = {"fp32": torch.float32, "tf32": torch.float32, "bf16": torch.bfloat16, "fp64": torch.float64}


def _t(*shape, dtype=torch.float32):
    return torch.empty(shape, dtype=dtype, device=META)


# ----------------------------------------------------------------------------- the cases


def _spectral_fwd_bwd(x, K, variant, reduced, dim):
    """The spectral conv's forward and backward kernels on x (meta) along dim, K modes, in variant."""
    from amg_fast.kernels import spectral_conv as sc

    with sc.use_variant(variant, reduced=reduced) as transform:
        S, H = x.shape[dim], x.shape[-1]
        weight = _t(K, H, H, 2)
        bases = sc.spectral_bases(S, K, sc.work_dtype(x.dtype), META)
        planes, forward_planes = sc.weight_planes_for_forward(weight, x.dtype)
        split = sc.row_split(x, dim)
        y, spec, blocks = sc.spectral_conv1d_fwd(x, forward_planes, *bases, transform == "fft", dim, split)
        sc.spectral_conv1d_bwd(torch.empty_like(y), spec, planes, *bases, x.dtype, weight.dtype,
                               transform == "fft", dim, split, blocks)


def _with_x3(method: str, thunk):
    """thunk() with kernels.spectral_conv.X3_METHOD = method (fp32 mode's mixing), restored after."""
    from amg_fast.kernels import spectral_conv as sc

    with mock.patch.object(sc, "X3_METHOD", method):
        thunk()


def spectral_cases(quick: bool):
    """(name, thunk) for the spectral conv: forward and backward of the FFNO layer's x [B*T, S, H]
    (rows P = 800, K = S/2) per S, variant and mode; and a 2D field read along each axis."""
    from amg_fast.kernels import spectral_conv as sc

    run = _spectral_fwd_bwd

    sizes = (128,) if quick else (32, 64, 128, 256, 512, 1024)
    variants = ("dft-gauss", "fft-gauss", "dft-cublas") if quick else tuple(sc.VARIANTS)
    for S, variant, mode in itertools.product(sizes, variants, MODES):
        for reduced in ((False, True) if mode in ("tf32", "bf16") else (False,)):
            x = _t(800, S, 128, dtype=MODES[mode])
            yield (f"spectral S{S} {variant} {mode}{' reduced' if reduced else ''}",
                   lambda x=x, S=S, v=variant, r=reduced: run(x, S // 2, v, r, 1), mode)
    for S in sizes:  # fp32 mode's mixing by Triton's tf32x3 dot (AMG_FAST_SPECTRAL_X3=dot, not the default)
        x = _t(800, S, 128)
        yield (f"spectral S{S} dft-gauss fp32 x3dot",
               lambda x=x, S=S: _with_x3("dot", lambda: run(x, S // 2, "dft-gauss", False, 1)), "fp32")
    if not quick:  # 2D fields [B, X, Y, H]: along X (rows B | Y) and Y (rows B*X), and X of a Y-major field
        field = _t(8, 64, 64, 128)
        yield "spectral 2D dim1", lambda: run(field, 32, "dft-gauss", False, 1), "fp32"
        yield "spectral 2D dim2", lambda: run(field, 32, "dft-gauss", False, 2), "fp32"
        swapped = _t(8, 64, 64, 128).transpose(1, 2)
        yield "spectral 2D swapped dim2", lambda: run(swapped, 32, "fft-gauss", False, 2), "fp32"


def s4d_cases(quick: bool):
    """S4D at u [B, T, S, H] = [32, T, S, 128], N = 32: every method's forward and backward, the
    convolution-kernel builders (poles and ZOH), the rollout step; the memory's readout GLU(Linear) backward
    (kernels/glu_grad.py) on its [rows, 2H] pre-activation."""
    from amg_fast.kernels import glu_grad
    from amg_fast.kernels import s4d_scan as k

    def run(u, method, gelu):
        H, T, N = u.shape[-1], u.shape[1], 32
        acc = torch.float64 if u.dtype == torch.float64 else torch.float32
        lam, c, d = _t(H, N, 2, dtype=acc), _t(H, N, 2, dtype=acc), _t(H, dtype=torch.float32)
        zoh = (_t(H, dtype=acc), _t(H, N, dtype=acc), _t(H, N, dtype=acc), _t(H, N, 2, dtype=acc))
        if method == "scan":
            y = k.s4d_scan_fwd(u, lam, c, d)
            k.s4d_scan_bwd(torch.empty_like(y), u, lam, c, d)
            return
        kk = k.s4d_conv_kernel_fwd(lam, c, T)
        k.s4d_zoh_conv_kernel_fwd(*zoh, T)
        loop = method == "toeplitz_loop"
        y = k.s4d_toeplitz_fwd(u, kk, d, gelu, loop)
        _, part = k.s4d_toeplitz_bwd(torch.empty_like(y), u, kk, d, gelu, loop)
        k.s4d_conv_kernel_bwd(part, lam, c)
        k.s4d_zoh_conv_kernel_bwd(part, *zoh)
        k.s4d_step_fwd(u[:, 0], _t(*u[:, 0].shape, N, 2, dtype=acc), lam, c, d)

    shapes = ((25, 128),) if quick else ((25, 32), (25, 128), (25, 1024), (1, 128), (64, 32))
    for (T, S), mode in itertools.product(shapes, MODES):
        u = _t(32, T, S, 128, dtype=MODES[mode])
        methods = [("toeplitz", True), ("toeplitz", False)]
        if T <= 25:
            methods += [("toeplitz_loop", False), ("scan", False)]
        for method, gelu in methods:
            yield (f"s4d T{T} S{S} {method}{' gelu' if gelu else ''} {mode}",
                   lambda u=u, m=method, g=gelu: run(u, m, g), mode)
        dz, pre = _t(u.numel() // 128, 128, dtype=u.dtype), _t(u.numel() // 128, 256, dtype=u.dtype)
        yield (f"s4d-readout glu-grad T{T} S{S} {mode}",
               lambda a=dz, b=pre: glu_grad.glu_backward_with_bias_grads(a, b), mode)


def gate_cases(quick: bool):
    """The gate at h [B*T*S, H] (B = 32, T = 25, S = 128) for H in the tests' widths: forward and
    backward with chi 0-dim and [B], the frequency gate, the readout folded in (memory_gate, H <= 128),
    the split-K weight-gradient kernel or cuBLAS's GEMMs and the column sums beside them, the cuBLAS method's
    elementwise kernels (fp32, fp64)."""
    from amg_fast.kernels import gate_fusion as k

    def run(h, freq, readout, per_batch):
        H = h.shape[-1]
        w_z, w_h, b = _t(H, H), _t(H, H), _t(H)
        chi = _t(32) if per_batch else _t()
        fr = (_t(), _t()) if freq else None
        ro = (_t(2 * H, H), _t(2 * H)) if readout else None
        k.gate_fusion_fwd(h, h, w_z, w_h, b, chi, fr, ro, g_mean=readout)
        k.gate_grads(h, h, w_z, w_h, b, chi, torch.empty_like(h), None, fr, ro)
        if not readout:
            k.gate_grads(h, h, w_z, w_h, b, chi, torch.empty_like(h), torch.empty_like(h), fr, ro)
            k.gate_grads(h, h, w_z, w_h, b, chi, torch.empty_like(h), None, fr, ro, cublas=True)  # column_sums
        if not readout and h.dtype in (torch.float32, torch.float64):  # the cuBLAS method's elementwise kernels
            _, _, logits = k.gate_cublas_fwd(h, h, w_z, w_h, b, chi, fr)
            k.gate_cublas_grads(h, h, w_z, w_h, b, chi, logits, torch.empty_like(h), torch.empty_like(h), fr)

    widths = (128,) if quick else (16, 48, 80, 128, 256)
    for H, mode in itertools.product(widths, MODES):
        h = _t(32, 25, 128, H, dtype=MODES[mode])
        for freq, readout, per_batch in ((False, False, False), (True, False, True), (True, True, True),
                                         (False, True, False)):
            if readout and H > 128:
                continue
            yield (f"gate H{H} {'freq ' if freq else ''}{'readout ' if readout else ''}"
                   f"{'chi[B] ' if per_batch else ''}{mode}",
                   lambda h=h, f=freq, r=readout, p=per_batch: run(h, f, r, p), mode)
        if H == 128 and mode in ("fp32", "tf32"):  # the plain backward's 64-row tiles ($AMG_FAST_GATE_BWD_WGMMA)
            yield (f"gate H{H} freq chi[B] {mode} bwd-wgmma",
                   lambda h=h: _with_env({"AMG_FAST_GATE_BWD_WGMMA": "1"}, lambda: run(h, True, False, True)), mode)


def _with_env(env: dict, thunk):
    """thunk() with the environment variables env set, restored after."""
    with mock.patch.dict(os.environ, env):
        return thunk()


def _sweep_module():
    """bench/kernel_sweep.py (its tiling spaces), loaded from beside this file."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kernel_sweep.py")
    spec = importlib.util.spec_from_file_location("kernel_sweep", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def _policy_entry(policy: dict, key: str, config: dict):
    """policy[key] = config within the block (the launchers read their tiles from it), restored (or removed,
    where the policy had no such key) after."""
    saved = dict(policy)
    policy[key] = config
    try:
        yield
    finally:
        policy.clear()
        policy.update(saved)


def _tiling_cases(label: str, space: dict, run, modes=("fp32", "tf32")):
    """(name, thunk, mode) for each configuration of space in each of modes (fp32 mode and TF32): run(mode,
    config)."""
    for values, mode in itertools.product(itertools.product(*space.values()), modes):
        config = dict(zip(space, values))
        name = " ".join(f"{key}={value}" for key, value in config.items())
        yield f"{label} {mode} {name}", lambda c=config, m=mode: run(m, c), mode


def gate_tile_cases(quick: bool):
    """The gate's kernels at H = 128 (h [32 * 25 * 128, 128], the frequency gate on) under each tiling that
    bench/kernel_sweep.py --only gate times on a GPU (its GATE_QUICK with --quick, else GATE_SPACE), in fp32
    mode and under TF32 (on the split weights, as the sweep): which of them compile, and what they spill,
    before a GPU session times them."""
    from amg_fast.kernels import gate_fusion as k

    def run(kernel, mode, config):
        policy, key = (k.WGRAD_POLICY, "cuda") if kernel == "wgrad" else (k.TILE_POLICY[kernel], mode)
        with _policy_entry(policy, key, config), mock.patch.dict(os.environ, {"AMG_FAST_GATE_X3": "split"}):
            h, w, b, chi = _t(32, 25, 128, 128), _t(128, 128), _t(128), _t()
            readout = (_t(256, 128), _t(256)) if kernel not in ("fwd", "bwd") else None
            if kernel.startswith("fwd"):
                k.gate_fusion_fwd(h, h, w, w, b, chi, (_t(), _t()), readout, g_mean=readout is not None)
            else:
                k.gate_grads(h, h, w, w, b, chi, torch.empty_like(h), None, (_t(), _t()), readout)

    sweep = _sweep_module()
    for kernel, space in (sweep.GATE_QUICK if quick else sweep.GATE_SPACE).items():
        yield from _tiling_cases(f"gate-tiles {kernel}", space, lambda m, c, n=kernel: run(n, m, c))


def ffn_tile_cases(quick: bool):
    """The feed-forward's row GEMMs (method="gemm", x [32 * 25 * 128, 128], F = 512, the residual on), forward and
    backward, under each tiling that bench/kernel_sweep.py --only ffn times (FFN_GEMM_QUICK in fp32 mode with
    --quick, else FFN_GEMM_SPACE in fp32 mode and under TF32) as LAUNCH_POLICY["cuda"]'s entry for the mode."""
    from amg_fast.kernels import ffn_gemm as k

    def run(mode, config):
        with _policy_entry(k.LAUNCH_POLICY["cuda"], "x3" if mode == "fp32" else "default", config):
            x, w1, b1, w2, b2 = _t(102400, 128), _t(512, 128), _t(512), _t(128, 512), _t(128)
            y, h, w_planes = k.feed_forward_gemm_fwd(x, w1, b1, w2, b2, x)
            k.feed_forward_gemm_bwd(torch.empty_like(y), x, h, w1, w2, True, "cublas", w_planes)

    sweep = _sweep_module()
    yield from _tiling_cases("ffn-tiles", sweep.FFN_GEMM_QUICK if quick else sweep.FFN_GEMM_SPACE, run,
                             tuple(sweep.FFN_GEMM_QUICK_MODES if quick else sweep.FFN_GEMM_MODES))


def s4d_tile_cases(quick: bool):
    """The S4D Toeplitz kernels with the GELU epilogue (AMGFNO's memory) at u [32, 25, 128, 128] under each
    tiling that bench/kernel_sweep.py --only s4d times (S4D_TOEPLITZ_QUICK with --quick, else
    S4D_TOEPLITZ_SPACE), in fp32 mode and under TF32."""
    from amg_fast.kernels import s4d_scan as k

    def run(mode, config):
        with _policy_entry(k.TOEPLITZ_DOT_POLICY, "cuda", config):
            u, kk, d = _t(32, 25, 128, 128), _t(128, 25), _t(128)
            k.s4d_toeplitz_fwd(u, kk, d, gelu=True)
            k.s4d_toeplitz_bwd(torch.empty_like(u), u, kk, d, gelu=True)

    sweep = _sweep_module()
    yield from _tiling_cases("s4d-tiles", sweep.S4D_TOEPLITZ_QUICK if quick else sweep.S4D_TOEPLITZ_SPACE, run)


def spectral_tile_cases(quick: bool):
    """The spectral conv's kernels (x [800, 128, 128], K = 64, "dft-gauss" with reduced-precision dots) under each
    tiling that bench/kernel_sweep.py --only configs times (SPECTRAL_QUICK with --quick, else SPECTRAL_SPACE),
    as LAUNCH_POLICY["cuda"][kernel]'s entry of the mode (in fp32 mode "x3", "x3split" for the mixing on split W
    planes; "tf32" under TF32)."""
    from amg_fast.kernels import spectral_conv as k

    sweep = _sweep_module()

    def run(kernel, mode, config):
        entry = sweep.spectral_fp32_entry(kernel) if mode == "fp32" else "tf32"
        with _policy_entry(k.LAUNCH_POLICY["cuda"][kernel], entry, config):
            _spectral_fwd_bwd(_t(800, 128, 128), 64, "dft-gauss", True, 1)

    for kernel, space in (sweep.SPECTRAL_QUICK if quick else sweep.SPECTRAL_SPACE).items():
        yield from _tiling_cases(f"spectral-tiles {kernel}", space, lambda m, c, n=kernel: run(n, m, c))


def ffn_cases(quick: bool):
    """The row GEMMs of the feed-forward's method="gemm" (kernels/ffn_gemm.py, fp32 mode with the weights'
    TF32 planes) at x [B*T*S, 128], F = 512, forward and backward with the residual, one program a tile and as
    persistent programs (AMG_FAST_FFN_PERSISTENT=1), in fp32 mode also with an fp64 residual against fp32 x (dy in
    fp64); the epilogue path's ReLU backward (kernels/relu_grad.py) at [B*T*S, 512], or its
    dh as one row GEMM (AMG_FAST_FFN_DH=triton: masked_hidden_grad); in bf16
    mode the weights' casts (kernels/_tf32.cast_weights: fp32 -> bf16 forward, bf16 -> fp32 gradients); in fp32 mode
    the S4D memory readout's Linear H -> 2H as row GEMMs (AMG_FAST_READOUT_GEMM=1: linear_split_fwd, _dx)."""
    from amg_fast.kernels import _tf32, ffn_gemm, relu_grad

    def run_persistent(x):
        _with_env({"AMG_FAST_FFN_PERSISTENT": "1"}, lambda: run_gemm(x))

    def run_gemm(x, res_dtype=None):
        H, F = x.shape[-1], 4 * x.shape[-1]
        w1, b1, w2, b2 = (_t(*shape, dtype=x.dtype) for shape in ((F, H), (F,), (H, F), (H,)))
        res = _t(*x.shape, dtype=res_dtype or (torch.float64 if x.dtype == torch.float64 else torch.float32))
        y, h, w_planes = ffn_gemm.feed_forward_gemm_fwd(x, w1, b1, w2, b2, res)
        for wgrad in ("triton", "cublas"):  # Triton's split-K kernel or cuBLAS (db1 in dh's epilogue)
            ffn_gemm.feed_forward_gemm_bwd(torch.empty_like(y), x, h, w1, w2, True, wgrad, w_planes)

    def run_dh(dy, h):  # the epilogue path's dh with AMG_FAST_FFN_DH=triton: one row GEMM, mask and sums
        H, F = dy.shape[-1], h.shape[-1]
        ffn_gemm.masked_hidden_grad(dy, h, _t(F, H, dtype=dy.dtype), _t(H, F, dtype=dy.dtype))

    def run_readout(x):  # fp32 mode's readout Linear: forward and dx as 3xTF32 row GEMMs
        H = x.shape[-1]
        pre, transposed = ffn_gemm.linear_split_fwd(x, _t(2 * H, H), _t(2 * H))
        ffn_gemm.linear_split_dx(torch.empty_like(pre), transposed)

    def run_casts():
        weights = [_t(*shape) for shape in ((512, 128), (512,), (128, 512), (128,))]
        flat = _tf32.cast_weights(*weights, dtype=torch.bfloat16)
        _tf32.cast_weights(flat[:512 * 128], flat[512 * 129:512 * 257], dtype=torch.float32)

    for mode in MODES:
        x = _t(102400, 128, dtype=MODES[mode])
        yield f"ffn-gemm H128 residual {mode}", lambda x=x: run_gemm(x), mode
        yield f"ffn-gemm H128 residual persistent {mode}", lambda x=x: run_persistent(x), mode
        g = _t(102400, 512, dtype=MODES[mode])  # the epilogue path's backward: ReLU mask, db1, db2 in one pass
        yield f"ffn-epilogue relu-grad F512 {mode}", lambda g=g, x=x: relu_grad.relu_backward_with_bias_grads(g, g, x), mode
        yield f"ffn-epilogue dh-gemm F512 {mode}", lambda g=g, x=x: run_dh(x, g), mode
        if not quick and mode == "fp32":  # an fp64 residual: y and dy in fp64 against fp32 x and weights
            yield f"ffn-gemm H128 fp64-residual {mode}", lambda x=x: run_gemm(x, torch.float64), mode
        if mode == "fp32":
            yield f"readout-gemm H128 {mode}", lambda x=x: run_readout(x), mode
        if mode == "bf16":  # bf16 autocast's weights: the fp32 parameters cast in one launch, their gradients back
            yield f"ffn weight casts {mode}", run_casts, mode


def decoder_cases(quick: bool):
    """The FFNO decoder H -> 128 -> C as one composed Linear (kernels/composed_linear.py) at x [B*T*S, H]
    (S = 128), H = 128 with C = 1 (every model) and C = 8, and the kernels' limits H = 512, C = 8; forward and
    backward; fp32 weights against bf16 x, as the op leaves them under autocast."""
    from amg_fast.kernels import composed_linear as k

    def run(x, C):
        wd = torch.float64 if x.dtype == torch.float64 else torch.float32
        w1, b1, w2, b2 = (_t(*shape, dtype=wd) for shape in ((128, x.shape[1]), (128,), (C, 128), (C,)))
        y = k.composed_linear_fwd(x, w1, b1, w2, b2)
        k.composed_linear_bwd(torch.empty_like(y), x, w1, b1, w2, b2, True)

    for mode in MODES:
        for H, C in (((128, 1),) if quick else ((128, 1), (128, 8), (512, 8))):  # the paper's; the limits
            yield f"decoder H{H} C{C} {mode}", lambda x=_t(102400, H, dtype=MODES[mode]), C=C: run(x, C), mode


def encoder_cases(quick: bool):
    """The grid encoder Linear([u, x/L]) (kernels/grid_linear.py) at u [B, T*S, C], S = 128: H = 128 with C = 1
    (the KS / Burgers models) and C = 31, and the kernels' limits H = 512, C = 31; forward and backward with du."""
    from amg_fast.kernels import grid_linear as k

    def run(u, H):
        wd = torch.float64 if u.dtype == torch.float64 else torch.float32
        grid, weight, bias = _t(128, dtype=wd), _t(H, u.shape[2] + 1, dtype=wd), _t(H, dtype=wd)
        y = k.grid_linear_fwd(u, grid, weight, bias)
        k.grid_linear_bwd(torch.empty_like(y), u, grid, weight, bias, True)

    for mode in MODES:
        for H, C in (((128, 1),) if quick else ((128, 1), (128, 31), (512, 31))):  # the paper's; the limits
            yield (f"encoder H{H} C{C} {mode}", lambda u=_t(32, 25 * 128, C, dtype=MODES[mode]), H=H: run(u, H),
                   mode)


def test_tile_cases(quick: bool):
    """Configurations the CUDA tests launch beyond the cases above (the tests phase compiles them on the GPU): the
    spectral transform with its input tile as the register operand (X_LEFT) and without, fp64 on 16 x 16 x 16
    tiles, the dweight split over 3 row ranges (tests/ops/test_spectral_conv_triton.py's several-tiles test)."""
    from amg_fast.kernels import spectral_conv as sc

    def spectral(x_left):
        small = {"mix": {"default": dict(BLOCK_R=16, BLOCK_I=16, BLOCK_O=16, num_warps=4)},
                 "dweight": {"default": dict(BLOCK_R=16, BLOCK_I=16, BLOCK_O=16, SPLIT_R=3, num_warps=4)},
                 "transform": {"default": dict(BLOCK_M=16, BLOCK_J=16, BLOCK_N=16, num_warps=4, X_LEFT=x_left)}}
        with _policy_entry(sc.LAUNCH_POLICY, "cuda", small):
            _spectral_fwd_bwd(_t(45, 20, 20, dtype=torch.float64), 7, "dft-gauss", False, 1)

    for x_left in (True, False):
        yield f"test-tiles spectral fp64 16-tiles X_LEFT={x_left}", lambda x=x_left: spectral(x), "fp64"


CASES = {"spectral": spectral_cases, "s4d": s4d_cases, "gate": gate_cases, "ffn": ffn_cases, "decoder": decoder_cases,
         "encoder": encoder_cases, "gate_tiles": gate_tile_cases, "s4d_tiles": s4d_tile_cases,
         "spectral_tiles": spectral_tile_cases, "ffn_tiles": ffn_tile_cases, "test_tiles": test_tile_cases}
# the sweeps' spaces and the tests' own tiles: compiled only when named
TILING_CASES = {"gate_tiles", "s4d_tiles", "spectral_tiles", "ffn_tiles", "test_tiles"}


# ----------------------------------------------------------------------------- compiling


def capture(ops: list[str], quick: bool) -> tuple[list[Launch], list[tuple[str, str]]]:
    """Run the chosen ops' cases on meta tensors, TF32 matmuls allowed in mode "tf32" only (what
    _common.dot_precision reads); returns (launches, [(case, error)] of cases whose launcher raised)."""
    launches, errors, case = [], [], [""]
    allow_tf32 = torch.backends.cuda.matmul.allow_tf32
    with recording(launches, case):
        for op in ops:
            for name, thunk, mode in CASES[op](quick):
                case[0] = name
                torch.backends.cuda.matmul.allow_tf32 = mode == "tf32"
                try:
                    thunk()
                except Exception as exc:  # noqa: BLE001 (reported, the run goes on)
                    errors.append((name, f"{type(exc).__name__}: {exc}"))
                finally:
                    torch.backends.cuda.matmul.allow_tf32 = allow_tf32
    return launches, errors


def _specialize(launch: Launch, backend):
    """(key, src, options) as JITFunction.run would build them for this launch."""
    from triton.compiler import ASTSource
    from triton.runtime.jit import create_function_from_signature

    fn = launch.fn
    kwargs = dict(launch.kwargs, debug=False)
    binder = create_function_from_signature(fn.signature, fn.params, backend)
    bound_args, specialization, options = binder(*launch.args, **kwargs)
    key = (fn.fn.__name__, str(specialization), str(options))
    options, signature, constexprs, attrs = fn._pack_args(backend, kwargs, bound_args, specialization, options)
    return key, ASTSource(fn, signature, constexprs, attrs), options


def _cuobjdump(cubin: bytes, cuobjdump: str) -> str | None:
    """cuobjdump -res-usage -sass of a cubin (resource lines and SASS in one pass), None when it fails."""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        proc = subprocess.run([cuobjdump, "-res-usage", "-sass", f.name], capture_output=True, text=True)
    return proc.stdout if proc.returncode == 0 else None


def _registers(dump: str) -> tuple[int | None, int | None]:
    """(registers per thread, spill stores in bytes) from cuobjdump -res-usage's output."""
    regs = re.search(r"REG:(\d+)", dump)
    stack = re.search(r"STACK:(\d+)", dump)
    return (int(regs.group(1)) if regs else None), (int(stack.group(1)) if stack else None)


def _global_loads(sass: str) -> str:
    """How the kernel reads global memory, from its SASS: "tma" (UTMALDG), "cp.async" (LDGSTS: Triton's
    pipeliner prefetching a loop's tiles into shared memory, several in flight) and/or "ldg" (loads into
    registers, each waited for where it is used), "+"-joined, "-" for none. A loop whose only loads are
    "ldg" runs one tile at a time per program: an elementwise use of a loaded tile besides a dot, or a
    conversion before it, keeps Triton from pipelining it (the S4D skip term did, 2026-11-29)."""
    ops = set(re.findall(r"^\s+/\*[0-9a-f]+\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9]*)", sass, re.MULTILINE))
    kinds = [name for op, name in (("UTMALDG", "tma"), ("LDGSTS", "cp.async"), ("LDG", "ldg")) if op in ops]
    return "+".join(kinds) or "-"


def _mma(ttgir: str) -> str:
    """Which matrix instructions the kernel's dots became: wgmma (Hopper), mma (v2) or fma."""
    kinds = []
    if "warp_group_dot" in ttgir:
        kinds.append("wgmma")
    if re.search(r"versionMajor = 2", ttgir):
        kinds.append("mma")
    if "tt.dot" in ttgir and not kinds:
        kinds.append("fma")
    return "+".join(kinds) or "-"


def compile_all(launches: list[Launch], capability: int) -> list[dict]:
    """Compile each distinct specialization once for cuda:capability; one result row per distinct kernel."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import make_backend

    target = GPUTarget("cuda", capability, 32)
    backend = make_backend(target)
    cuobjdump = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
    rows, seen = [], {}
    for launch in launches:
        problems = [f"grid axis {i} = {n} > {GRID_YZ_LIMIT}" for i, n in enumerate(launch.grid) if i and n > GRID_YZ_LIMIT]
        try:
            key, src, options = _specialize(launch, backend)
        except Exception as exc:  # noqa: BLE001
            rows.append(dict(case=launch.case, kernel=launch.fn.fn.__name__, error=f"{type(exc).__name__}: {exc}"))
            continue
        if key in seen:
            if problems:
                rows.append(dict(seen[key], case=launch.case, error="; ".join(problems)))
            continue
        row = dict(case=launch.case, kernel=launch.fn.fn.__name__, grid=launch.grid,
                   warps=options.num_warps, stages=options.num_stages)
        start = time.perf_counter()
        try:
            compiled = triton.compile(src, target=target, options=options.__dict__)
        except Exception as exc:  # noqa: BLE001
            msg = str(exc).strip().splitlines()
            row["error"] = f"{type(exc).__name__}: {' | '.join(msg[-6:])}"
        else:
            row["shared"] = compiled.metadata.shared
            dump = _cuobjdump(compiled.asm["cubin"], cuobjdump) or ""
            row["regs"], row["stack"] = _registers(dump)
            row["mma"] = _mma(compiled.asm["ttgir"])
            row["loads"] = _global_loads(dump) if dump else "?"  # "?": cuobjdump failed
            if row["shared"] > SHARED_LIMIT:
                problems.append(f"shared memory {row['shared']} B > {SHARED_LIMIT}")
            if problems:
                row["error"] = "; ".join(problems)
        row["seconds"] = round(time.perf_counter() - start, 1)
        seen[key] = row
        rows.append(row)
        print(_line(row), flush=True)
    return rows


def _line(row: dict) -> str:
    if "shared" in row and "error" not in row:
        status = (f"ok   smem {row['shared'] / 1024:6.1f} KB  regs {row['regs']}  stack {row['stack']}  "
                  f"{row['mma']:<9} {row['loads']:<12} warps {row['warps']}")
    else:
        status = f"FAIL {row['error']}"
    return f"{row['kernel']:<40} {status}  [{row['case']}]"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ops", nargs="+", choices=sorted(CASES), default=sorted(set(CASES) - TILING_CASES),
                        help="which ops' kernels to compile (default: all; gate_tiles / s4d_tiles / spectral_tiles / "
                             "ffn_tiles, the tilings kernel_sweep.py --only gate / s4d / configs / ffn times, only "
                             "when named)")
    parser.add_argument("--quick", action="store_true",
                        help="one shape per op (S = 128, H = 128, T = 25) in every precision mode")
    parser.add_argument("--kernels", nargs="+", metavar="NAME",
                        help="compile only these kernels (function names, e.g. _row_gemm_kernel)")
    parser.add_argument("--capability", type=int, default=90, help="CUDA compute capability (default 90: Hopper)")
    args = parser.parse_args(argv)
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        parser.error("TRITON_INTERPRET is set: the kernels would be interpreter functions; unset it")
    import triton

    print(f"triton {triton.__version__} ({triton.__file__}), torch {torch.__version__}, target sm_{args.capability}")
    launches, errors = capture(args.ops, args.quick)
    if args.kernels:
        launches = [launch for launch in launches if launch.fn.fn.__name__ in args.kernels]
        if not launches:
            parser.error(f"no launch of {args.kernels} in the cases of {args.ops}")
    for case, error in errors:
        print(f"{'launcher':<40} FAIL {error}  [{case}]")
    rows = compile_all(launches, args.capability)
    failed = [r for r in rows if "error" in r]
    print(f"{len(launches)} launches, {len(rows)} distinct kernels compiled, {len(failed) + len(errors)} failures")
    return 1 if failed or errors else 0


if __name__ == "__main__":
    sys.exit(main())
