"""Algorithm thresholds, kernel limits and the environment switches of every op, in one place
(imports nothing from triton).

The ops (amg_fast.ops) read these to pick an algorithm for "auto" and to refuse what a kernel cannot
take; the kernels' launchers read them to guard their own inputs. Measured values say where they
were measured (bench/kernel_sweep.py times the crossovers).
"""
from __future__ import annotations

import os

import torch

__all__ = ["S4D_METHODS", "TOEPLITZ_MAX_T", "TOEPLITZ_DOT_MAX_T", "SPECTRAL_TRANSFORMS", "TRANSFORM_FFT_MIN_S",
           "TRANSFORM_FFT_MIN_S_BY_MODE", "GATE_MAX_H",
           "READOUT_MAX_H", "WGRAD_METHODS", "WGRAD_AUTO_METHOD", "MEMORY_READOUT_METHODS",
           "FFN_METHODS", "FFN_AUTO_METHOD", "s4d_method", "spectral_transform", "ffn_method",
           "precision_mode", "wgrad_method", "memory_readout", "GATE_X3_METHODS", "gate_x3", "GATE_METHODS",
           "gate_method", "gate_bwd_wgmma", "s4d_channels_first", "ffn_persistent", "FFN_DH_METHODS",
           "ffn_dh_method", "readout_gemm", "KERNEL_SWITCHES", "reread_switches"]

# s4d_scan(method=...): "toeplitz" (the causal Toeplitz product per channel as batched tl.dots, with
# a kernel-built K; T <= TOEPLITZ_DOT_MAX_T: the [T, T] matrices live on chip), "toeplitz_loop" (the
# same product as a loop over the lag, the earlier kernels, any T) or "scan" (sequential recurrence in
# registers). "auto" = toeplitz for T <= TOEPLITZ_MAX_T, else scan, unless $AMG_FAST_S4D_METHOD names
# one of the three (how a GPU session times each). The crossover was measured on an H200 with the
# lag-loop kernels (B*T = 800, S = 128, H = 128, N = 32, fwd+bwd ms, toeplitz / scan): T=25 1.59 /
# 1.67, T=50 1.79 / 1.53, T=100 1.91 / 1.51, T=200 2.87 / 1.52 (forward alone near T=100: 0.33 /
# 0.33); the batched dots are untimed, so it stays at 32 until a GPU re-measures it.
S4D_METHODS = ("auto", "toeplitz", "toeplitz_loop", "scan")
TOEPLITZ_MAX_T = 32
TOEPLITZ_DOT_MAX_T = 64
# The batched-dot Toeplitz kernels' launch order (kernels.s4d_scan.TOEPLITZ_DOT_POLICY "channels_first"): column
# groups first (programs launched together read the same BH channels, 16 B of each 512-B row of u in fp32 at
# T = 25, of rows far apart) or channel blocks first (neighbouring channels of the same rows: the other half of
# each 32-B sector is read by the next program, likely from L2). $AMG_FAST_S4D_CHANNELS_FIRST ("0" / "1") overrides
# the policy: how the campaign times the order in the whole step (variant s4d_channels_first). Untimed.

# spectral_conv1d(transform=...): "dft" (truncated DFT as a GEMM against cached bases) or "fft"
# (torch.fft transforms, Triton mixing). "auto" = fft from S = TRANSFORM_FFT_MIN_S on (H200 sweep, with
# the old relayout copies on the fft path), or what AMG_FAST_SPECTRAL_TRANSFORM (auto | dft | fft, read at
# import into SPECTRAL_TRANSFORM_AUTO, and again by reread_switches) says: how a GPU session times the whole
# training step on either path.
SPECTRAL_TRANSFORMS = ("auto", "dft", "fft")
TRANSFORM_FFT_MIN_S = 512
# A precision mode's own crossover (precision_mode() -> the S from which "auto" takes fft), where a measurement
# found one; a mode not listed takes TRANSFORM_FFT_MIN_S. In fp32 mode the "dft" path's cuBLAS GEMMs run on the
# CUDA cores and torch.fft's transforms are fp32-exact at HBM speed, so its crossover may lie far lower (the
# campaign's variant spectral_fft times the step there; untimed, 2026-11-30).
TRANSFORM_FFT_MIN_S_BY_MODE: dict[str, int] = {}

# gate_fusion: one program holds all H output columns of a row tile in registers (two [BLOCK_M,
# BLOCK_H] accumulators in the backward), so the Triton kernels take H <= GATE_MAX_H. With the S4D
# memory's readout (Linear H -> 2H + GLU) folded in (ops/readout_gate.py) every product is one
# full-width dot against an [H, H] weight block: H <= READOUT_MAX_H (the paper's width).
GATE_MAX_H = 256
READOUT_MAX_H = 128

# Weight gradients over the activation rows, dW = dY^T X (the gate's dW_z, dW_h; the row-GEMM feed-forward's
# dW1, dW2): "triton" (gate_fusion.weight_grads: a split-K kernel over the rows, the bias sums folded in, tf32x3
# tensor-core dots in fp32 mode) or "cublas" (torch GEMMs: TF32 tensor cores under TF32, fp32 on the CUDA cores
# in fp32 mode; the bias sums by torch or in an epilogue). "auto" = $AMG_FAST_WGRAD when set, else
# WGRAD_AUTO_METHOD[precision mode]. cuBLAS for fp32 activations: both operands of dY^T X are row-major, so the
# reduction runs along their strided axis, and a TF32 wgmma takes K-major operands only. Compiled for sm_90 by
# triton 3.6, the kernel loads them 4 bytes at a time under TF32 (192 4-byte cp.async in its SASS against 24
# 16-byte ones in bf16; bench/compile_sm90.py), and in fp32 mode splits both in registers through shared
# memory. On the H200 (2026-11-29, results/gpu/20261129-1927-h200/bench, profile) it formed the memory gate's
# 13.4 GFLOP of weight gradients in 0.70 ms under TF32 (19 TFLOP/s) and in 0.52 ms in fp32 mode; cuBLAS's TF32
# kernel formed the feed-forward's at 176 TFLOP/s, its fp32 one at ~52. bf16 (a 16-bit wgmma takes either
# layout) and fp64 keep the kernel. Untimed as a default: the campaign's variant wgrad_triton reverts it.
WGRAD_METHODS = ("auto", "triton", "cublas")
WGRAD_AUTO_METHOD = {"fp32": "cublas", "tf32": "cublas", "bf16": "triton", "fp16": "triton", "fp64": "triton"}

# The gate kernels' fp32-accurate dots in fp32 mode: "split" (the weights split once per call into TF32 planes
# in memory, kernels._tf32.split_tf32, and only the activation tile split in registers: three TF32 products)
# or "dot" (Triton's tf32x3 dot, splitting both operands every step). $AMG_FAST_GATE_X3; default dot: the H200's
# graphed fp32 step was 1.11x / 1.10x faster with it at S = 32 / 128 (results/gpu/20261129-1927-h200/bench,
# variant gate_x3dot; the other modes do not split, 1.00x), measured with the fused readout.
GATE_X3_METHODS = ("split", "dot")

# The plain gate's products (gate_fusion, gate_fusion_freq; AMGFNO's with the separate readout): "fused"
# (kernels/gate_fusion.py: one kernel each way, the logits on chip, recomputed by the backward) or "cublas" (the
# logits z W_z^T + h W_h^T + b and the backward's dlogits W_z, dlogits W_h as torch GEMMs, the elementwise work in
# one Triton pass each way, the logits kept for the backward: gate_cublas_fwd / gate_cublas_grads). The cuBLAS form
# moves more through HBM (by count, not measured: ~0.5 / ~0.9 GB forward / backward at S = 128 in fp32, ~0.1 / 0.2
# ms at the H200's HBM rate, against ~0.16 / ~0.4 GB) but runs its GEMMs on cuBLAS's tiles, where the fused backward
# runs 32-row mma.sync tiles (255 registers, 32-48 B of spills under TF32, compiled for sm_90 by triton 3.6) and the
# H200 timed the plain gate at 8.2x its floor in fp32 mode. fp32 and fp64 activations only (bf16 GEMMs would round
# the logits to bf16); other dtypes run fused. "auto" = $AMG_FAST_GATE_METHOD when set, else fused. Untimed: the
# campaign's variant gate_cublas.
GATE_METHODS = ("auto", "fused", "cublas")

# AMGFNO's memory readout and gate: "fused" (ops/readout_gate.py: GLU(Linear(a)) formed inside the
# gate kernels, z never written; H <= READOUT_MAX_H) or "separate" (Linear, GLU, then the gate op),
# by $AMG_FAST_MEMORY_READOUT; default separate: the H200's graphed step was faster with it in every cell, 1.23x
# / 1.20x (fp32), 1.06x / 1.07x (TF32), 1.11x / 1.16x (bf16) at S = 32 / 128 (results/gpu/20261129-1927-h200/
# bench, variant readout_separate; why the fused kernels lose is not yet profiled).
MEMORY_READOUT_METHODS = ("fused", "separate")

# feed_forward(method=...) on the Triton backend: "epilogue" (cuBLASLt GEMMs, bias + ReLU in the first one's
# epilogue) or "gemm" (kernels/ffn_gemm.py, 2026-11-27: four Triton row GEMMs with the bias, ReLU, its backward
# mask and the residual in their epilogues, fp32 mode's dots 3xTF32 against weights split once into TF32 planes:
# the hidden through HBM, as the epilogue path, but on tensor cores at fp32 accuracy). "auto" =
# $AMG_FAST_FFN_METHOD when set, else FFN_AUTO_METHOD[precision mode] (precision_mode()). The H200's graphed
# step (2026-11-29, results/gpu/20261129-1927-h200/bench, variant ffn_gemm) with the row GEMMs against the
# epilogue: 0.97x / 0.97x (fp32), 0.69x / 0.66x (TF32), 1.05x / 0.98x (bf16) at S = 32 / 128: the epilogue in
# every mode. Rebuilt since (K-major backward weights, cuBLAS weight gradients, db1 in an epilogue), the H200's
# step with the row GEMMs (2026-11-30, results/gpu/20261130-0050-h200/bench): 1.12x / 1.14x (fp32), 0.91x /
# 0.87x (TF32), 0.99x / 0.93x (bf16): the row GEMMs in fp32 mode (cuBLAS's fp32 GEMMs run on the CUDA cores,
# the row GEMMs on tensor cores by 3xTF32), the epilogue in the others. A third path, Triton kernels keeping
# the [rows, 4H] hidden on chip ("fused"), lost to the epilogue 1.7x (2026-11-27) and 1.2-1.9x in every mode
# (2026-11-29), and its dx kernel faulted in fp32 on sm_90 (triton 3.6): removed.
FFN_METHODS = ("auto", "epilogue", "gemm")
FFN_AUTO_METHOD = {"fp32": "gemm", "tf32": "epilogue", "bf16": "epilogue", "fp16": "epilogue", "fp64": "epilogue"}


# Every environment switch of the kernels (docs/kernels.md). The functions below read theirs at each call; the
# spectral conv's (and AMG_FAST_SPECTRAL_TRANSFORM) are read into module settings at import, and read again by
# reread_switches(): so bench/gpu_summary.py times a variant's switches in its own process.
KERNEL_SWITCHES = ("AMG_FAST_FFN_METHOD", "AMG_FAST_FFN_PERSISTENT", "AMG_FAST_FFN_DH",
                   "AMG_FAST_READOUT_GEMM",
                   "AMG_FAST_S4D_METHOD", "AMG_FAST_S4D_CHANNELS_FIRST", "AMG_FAST_WGRAD",
                   "AMG_FAST_GATE_X3", "AMG_FAST_GATE_METHOD", "AMG_FAST_GATE_BWD_WGMMA", "AMG_FAST_MEMORY_READOUT",
                   "AMG_FAST_SPECTRAL_TRANSFORM", "AMG_FAST_SPECTRAL_MIX", "AMG_FAST_SPECTRAL_DFT_GEMM",
                   "AMG_FAST_SPECTRAL_REDUCED_DOTS", "AMG_FAST_SPECTRAL_WEIGHT_PLANES", "AMG_FAST_SPECTRAL_X3")
_IMPORT_TIME_READERS: list = []  # each module's reader of its import-time switches (read_at_import)


def read_at_import(reader):
    """Decorator: register reader() (it sets its module's switch settings from os.environ) with
    reread_switches and call it now, at the module's import."""
    _IMPORT_TIME_READERS.append(reader)
    reader()
    return reader


def reread_switches() -> None:
    """Set the switches read at import from os.environ again (each module imported so far; one imported later
    reads them then). A bad value raises ValueError naming the variable, as at import."""
    for reader in _IMPORT_TIME_READERS:
        reader()


def _choice(name: str, value: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
    return value


def _env_choice(name: str, allowed: tuple[str, ...]) -> str | None:
    """The value of environment variable `name` (one of allowed), or None when unset or empty."""
    value = os.environ.get(name, "")
    if value and value not in allowed:
        raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
    return value or None


@read_at_import
def _read_transform_switch() -> None:
    global SPECTRAL_TRANSFORM_AUTO
    SPECTRAL_TRANSFORM_AUTO = os.environ.get("AMG_FAST_SPECTRAL_TRANSFORM") or "auto"  # unset or empty: auto


def s4d_method(method: str, T: int) -> str:
    """The S4D algorithm ("toeplitz", "toeplitz_loop" or "scan") for method: "auto" = the
    AMG_FAST_S4D_METHOD environment variable when set, else toeplitz for T <= TOEPLITZ_MAX_T, else scan."""
    if _choice("method", method, S4D_METHODS) != "auto":
        return method
    chosen = _env_choice("AMG_FAST_S4D_METHOD", S4D_METHODS[1:])
    if chosen is not None:
        return chosen
    return "toeplitz" if T <= TOEPLITZ_MAX_T else "scan"


def spectral_transform(transform: str, S: int, dtype: torch.dtype | None = None) -> str:
    """The spectral conv's transform, "dft" or "fft", for transform ("auto": SPECTRAL_TRANSFORM_AUTO when
    that names one, else resolved by S: fft from the crossover of dtype's precision mode on,
    TRANSFORM_FFT_MIN_S_BY_MODE, or TRANSFORM_FFT_MIN_S for a mode not listed or no dtype)."""
    if _choice("transform", transform, SPECTRAL_TRANSFORMS) != "auto":
        return transform
    chosen = _choice("AMG_FAST_SPECTRAL_TRANSFORM (kernels.limits.SPECTRAL_TRANSFORM_AUTO)",
                     SPECTRAL_TRANSFORM_AUTO, SPECTRAL_TRANSFORMS)
    if chosen != "auto":
        return chosen
    mode = None if dtype is None else precision_mode(dtype)
    return "fft" if S >= TRANSFORM_FFT_MIN_S_BY_MODE.get(mode, TRANSFORM_FFT_MIN_S) else "dft"


def precision_mode(dtype: torch.dtype) -> str:
    """The precision mode a GPU computes matmuls of this activation dtype in: "fp64", "bf16", "fp16",
    and for fp32 "tf32" when TF32 matmuls are allowed (torch.backends.cuda.matmul.allow_tf32, i.e.
    set_float32_matmul_precision("high")), else "fp32"."""
    if dtype == torch.float32:
        return "tf32" if torch.backends.cuda.matmul.allow_tf32 else "fp32"
    return {torch.float64: "fp64", torch.bfloat16: "bf16", torch.float16: "fp16"}[dtype]


def _env_flag(name: str, default: bool) -> bool:
    """Environment variable `name` as a flag ("1" yes, "0" no) when set, else default."""
    value = _env_choice(name, ("0", "1"))
    return default if value is None else value == "1"


def s4d_channels_first(default: bool) -> bool:
    """Whether the batched-dot S4D kernels launch their channel blocks first: $AMG_FAST_S4D_CHANNELS_FIRST ("1" yes,
    "0" no) when set, else default (the launch policy's)."""
    return _env_flag("AMG_FAST_S4D_CHANNELS_FIRST", default)


def ffn_persistent(default: bool) -> bool:
    """Whether the feed-forward's row GEMMs run a fixed grid of persistent programs (kernels.ffn_gemm):
    $AMG_FAST_FFN_PERSISTENT ("1" yes, "0" no) when set, else default (the launch policy's)."""
    return _env_flag("AMG_FAST_FFN_PERSISTENT", default)


# How the epilogue feed-forward's backward forms dh = (dy W2) masked by the ReLU, and the bias gradients:
# "cublas" (a cuBLAS GEMM writes g = dy W2 [rows, 4H], then kernels/relu_grad.py's pass reads it with h and dy
# and writes dh and both bias sums) or "triton" (kernels.ffn_gemm.masked_hidden_grad: one Triton row GEMM with
# the mask and both sums in its epilogue; g is neither written nor read back, 2 x 210 MB a layer at S = 128 in
# fp32). The H200's bf16 profile (2026-11-30, before relu_grad reduced its rows once): the relu_grad pass 0.81 ms
# of the 4.43-ms step (four layers), where the row-GEMM path's dh and dx kernels took 0.63 together.
FFN_DH_METHODS = ("cublas", "triton")


def ffn_dh_method(default: str = "cublas") -> str:
    """The epilogue feed-forward's dh method (FFN_DH_METHODS): $AMG_FAST_FFN_DH when set, else default."""
    return _env_choice("AMG_FAST_FFN_DH", FFN_DH_METHODS) or default


def ffn_method(method: str, dtype: torch.dtype = torch.float32) -> str:
    """The feed-forward's Triton-backend path, "epilogue" or "gemm", for method and activations of dtype.
    "auto" = $AMG_FAST_FFN_METHOD (one of those) when set, else the table FFN_AUTO_METHOD for
    precision_mode(dtype). How a GPU session times the training step with each path (the models call "auto")."""
    if _choice("method", method, FFN_METHODS) != "auto":
        return method
    return _env_choice("AMG_FAST_FFN_METHOD", FFN_METHODS[1:]) or FFN_AUTO_METHOD[precision_mode(dtype)]


def wgrad_method(method: str = "auto", dtype: torch.dtype = torch.float32) -> str:
    """How a backward forms its row-reduced weight gradients for activations of dtype, "triton" or "cublas":
    method itself unless "auto", then $AMG_FAST_WGRAD (one of those) when set, else WGRAD_AUTO_METHOD for
    precision_mode(dtype)."""
    if _choice("method", method, WGRAD_METHODS) != "auto":
        return method
    return _env_choice("AMG_FAST_WGRAD", WGRAD_METHODS[1:]) or WGRAD_AUTO_METHOD[precision_mode(dtype)]


def gate_x3() -> str:
    """How the gate kernels run fp32 mode's tf32x3 dots: $AMG_FAST_GATE_X3 ("split" or "dot"), else "dot"."""
    return _env_choice("AMG_FAST_GATE_X3", GATE_X3_METHODS) or "dot"


def gate_method(method: str = "auto", dtype: torch.dtype = torch.float32) -> str:
    """The plain gate's form for activations of dtype, "fused" or "cublas": method itself unless "auto", then
    $AMG_FAST_GATE_METHOD (one of those) when set, else "fused"; "cublas" only for fp32 and fp64 activations."""
    if _choice("method", method, GATE_METHODS) == "auto":
        method = _env_choice("AMG_FAST_GATE_METHOD", GATE_METHODS[1:]) or "fused"
    return method if dtype in (torch.float32, torch.float64) else "fused"


def gate_bwd_wgmma(default: bool) -> bool:
    """Whether the plain gate's fused backward at H = 128 runs on 64-row tiles (wgmma) instead of its policy's
    32-row ones (mma.sync) for fp32 activations (fp32 mode and TF32): $AMG_FAST_GATE_BWD_WGMMA ("1" yes, "0" no)
    when set, else default (kernels.gate_fusion.TILE_POLICY's)."""
    return _env_flag("AMG_FAST_GATE_BWD_WGMMA", default)


def readout_gemm(default: bool) -> bool:
    """Whether the S4D memory's readout Linear (amg_fast.ops.readout.LinearGluFn) runs its forward and dx in fp32
    mode as Triton row GEMMs on 3xTF32 tensor-core dots against W's TF32 planes (kernels.ffn_gemm.linear_split_fwd,
    linear_split_dx; dW stays cuBLAS's) instead of cuBLAS's fp32 GEMMs on the CUDA cores, as the feed-forward's row
    GEMMs do (fp32 mode's default since they beat cuBLAS there, 1.12x / 1.14x of the H200's step at S = 32 / 128):
    $AMG_FAST_READOUT_GEMM ("1" yes, "0" no) when set, else default. Untimed: off by default, the campaign's variant
    readout_gemm. The H200's fp32 profile of 2026-11-30 at S = 128 (reference readout then): its forward GEMM
    0.19 ms and its backward (AddmmBackward0, 5 kernels) 0.43 ms of the 15.5-ms step."""
    return _env_flag("AMG_FAST_READOUT_GEMM", default)


def memory_readout() -> str:
    """How AMGFNO runs its memory readout and gate: $AMG_FAST_MEMORY_READOUT ("fused" or "separate"),
    else "separate"."""
    return _env_choice("AMG_FAST_MEMORY_READOUT", MEMORY_READOUT_METHODS) or "separate"
