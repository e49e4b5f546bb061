"""Triton kernels for the truncated-rFFT spectral convolution (amg_fast.ops.spectral_conv1d).

The op y = irfft(W . rfft(x, dim)[:K]) (norm="ortho") along any axis `dim` of x [P..., S, Q..., H]
is three stages. Every tensor is seen as rows r = p * inner + q over two groups of the other axes
(the axes before | after dim when each merges into one stride, see row_split), read in place through
two strides (no transpose copies):

  analysis   X[r, m, i] = sum_s A[m, s] x[r, s, i]    A [2K, S]: rows 2k, 2k+1 = cos, -sin of mode k
  mixing     Y[r, k, o] = sum_i X[r, k, i] W[k, i, o]  complex, per mode k: [rows, H_in] x [H_in, H_out]
  synthesis  y[r, s, o] = sum_m G[s, m] Y[r, m, o]    G [S, 2K] = (A * a_k)^T, a_k = 1 (mode 0 and
                                                       S/2) or 2

Transforms. "dft": each row is a [2K, S] x [S, H] GEMM against a cached basis (this file's transform
kernel, or cuBLAS through torch.matmul with DFT_GEMM = "torch"); the spectrum is stored as
[P, K, 2, Q, H] (mode-major, real and imaginary planes, channels contiguous): exactly what the
row GEMM writes and what the mixing reads as unit-stride [rows, channels] tiles. "fft": torch.fft
(O(S log S)); the mixing reads rfft's complex [P, S//2+1, Q, H] output through view_as_real
([..., H, 2], real and imaginary parts interleaved; cuFFT and x86 CPU builds store the modes innermost,
so channels are 2 (S//2+1) values apart: not the PAIRED load) and writes straight into the
[P, S//2+1, Q, H_out] complex buffer irfft takes: zeros for the modes >= K and the imaginary parts a
real signal cannot have (mode 0 and S/2; cuFFT's C2R does not ignore them, pytorch#154496) -- no
relayout copy.

Mixing. Per mode a complex GEMM on tensor cores, in one of two forms (MIX_METHOD): "four" real dots
(re = a c - b d, im = a d + b c for X = a + ib, W = c + id) or Gauss's "gauss" 3 (k1 = (a + b) c,
k2 = a (d - c), k3 = b (c + d); re = k1 - k3, im = k1 + k2), 25% fewer MMAs for a slightly larger
cancellation error (docs/kernels.md: 1.0-1.4x the four-product error, emulated per mode). W is read
as real and imaginary planes [2, K, H_in, H_out] (weight_planes: with WEIGHT_PLANES one copy per
forward, made by the autograd Function and kept for the backward, so each W tile is a unit-stride
load; else a view of weight); the sums feeding the Gauss products are formed in fp32. In fp32 mode
(X3_METHOD "split") weight_planes instead writes, in one launch, the TF32 hi and lo planes of the values
the products read (c, d - c, c + d; four: c, d), and the kernel splits only the activation tiles; the forward
reads a copy of them stored with the input channels contiguous (weight_planes_for_forward, the same launch).

Backward. With dY = G^T dy = a_k (A dy), the chain rule gives dx = G ((A dy) W^H) and
dW[k] = a_k X[k]^H (A dy)[k]: the same analysis and synthesis (or rfft / irfft) as the forward, the
mixing kernel with conj(W)^T, and a dweight kernel (a reduction over rows, optionally split in
SPLIT_R partial sums added by torch; deterministic).

Precision per mode (see work_dtype, _dots): fp64 -> fp64 dots; fp32 -> tf32x3 (three TF32 MMAs,
fp32-accurate; in the transforms against the cached bases' TF32 planes and in the mixing against W's split
planes, only the activation tile split in registers: _tf32.split_dot, 128 registers against Triton's tf32x3
dot's 207 on sm_90 in the transform, 174-177 against 213-220 in the mixing), plain TF32 when
TF32 is allowed; bf16 inputs -> bf16 intermediates and bf16 MMA operands (fp32 accumulation). Without REDUCED_PRECISION_DOTS (on by default): fp32 intermediates and
tf32x3 in every case. Accumulation is always fp32 (fp64 for fp64).

Why no fused analysis + mixing + synthesis kernel (docs/kernels.md): the mixing needs many rows per
program (the MMA's M dimension, and W[k] read once per row tile instead of once per row), while the
transforms contract over the whole axis S of each row; a program would hold rows x S x H_out of
output (16 x 128 x 128 fp32 = 1 MB at the paper's S = 128) or recompute the spectrum per mode block.
"""
from __future__ import annotations

import collections
import contextlib
import math

import torch
import triton
import triton.language as tl

from amg_fast.kernels._common import (ELEMENTWISE_BLOCK, acc_dtype, cdiv, dot_precision, for_device, merged_stride,
                                     new_output, next_pow2, tracing, wrap_triton)
from amg_fast.kernels._tf32 import round_tf32 as _round_tf32, round_to_tf32, split_dot, store_split  # round_to_tf32: public here too
from amg_fast.kernels.limits import _choice, _env_choice, read_at_import

# Reduced-precision MMAs (the mode's own precision), on by default since an H200 run against an fp64
# reference (2026-11-27, results/gpu/20261127-1354-h200/probes/spectral_accuracy.json, S = 128, 800 rows)
# showed them right: plain TF32 dots 0.77-2.0e-3 off (dft-gauss 2.0e-3, fft-gauss 8.3e-4, the fp32 reference
# under TF32 8.3e-4), bf16 operands 4.6e-3 (dft-gauss), each within 1.1x of the CPU emulation of the
# algorithm (bench/spectral_precision.py). The 3-9% of 2026-11-26 was the fp32 *reference's* cuFFT C2R
# error (the imaginary DC part; fixed since by kernels._common.irfft_ortho); S = 1024 (the "fft" transform:
# only the mixing's dots are reduced) is left to the GPU tests (tests/ops/test_spectral_conv_triton.py). So
# fp32 inputs take plain TF32 dots when TF32 is allowed (torch.backends.cuda.matmul.allow_tf32) and tf32x3
# (fp32-accurate) otherwise; bf16 inputs take bf16 intermediates and bf16 MMAs (fp32 accumulation). Since,
# what the kernels form for a plain-TF32 dot is rounded to TF32 (plain_tf32, _round_tf32): 8.8e-4 emulated.
# AMG_FAST_SPECTRAL_REDUCED_DOTS=0 (read by _read_switches) or REDUCED_PRECISION_DOTS = False keeps fp32
# intermediates and tf32x3 dots whatever the input dtype and the TF32 setting (how a GPU session times
# the fp32-accurate paths in TF32 / bf16 mode).

# The mixing's complex product: "gauss" (3 real dots) or "four" (4) in this file's mixing and dweight kernels, or
# "torch": no kernel of ours, one cuBLAS batched GEMM over the modes (torch.bmm) on each W[k]'s real form
# [[Wr, Wi], [-Wi, Wr]] (the four products as one [rows, 2 H_in] x [2 H_in, 2 H_out] GEMM), writing the mixed
# spectrum in place when its rows merge into one stride (Q = 1: the 1D models; else through a copy) and reading
# the "dft" spectrum in place likewise (rfft's output, modes innermost, is read through a copy: mode_rows), and
# one for dweight; precision as torch's matmul setting (fp32, TF32 when allowed; bf16 spectra: bf16).
# AMG_FAST_SPECTRAL_MIX, read by _read_switches; "auto" (the default) as cublas_by_default says.
MIX_METHODS = ("auto", "gauss", "four", "torch")

# The "dft" transforms' GEMMs: "triton" (this file's transform kernel; fp32 at tf32x3) or "torch"
# (torch.matmul: cuBLAS, precision as torch's matmul setting: fp32, TF32 or bf16). AMG_FAST_SPECTRAL_DFT_GEMM;
# "auto" (the default): "triton" (_dft_gemm; cuBLAS for fp32 work on CUDA until 2026-12-01).
DFT_GEMMS = ("auto", "triton", "torch")

# W's real and imaginary parts as two contiguous planes [2, K, H_in, H_out] (one copy of W per forward, kept
# for the backward: unit-stride W tiles) or read in place from weight [K, H_in, H_out, 2] (stride-2 tiles, no
# copy, one launch fewer). AMG_FAST_SPECTRAL_WEIGHT_PLANES = 1 | 0, read by _read_switches.

# fp32 mode's (tf32x3) mixing: "split" -- W's planes split once per forward into TF32 hi / lo planes in memory
# (weight_planes, one launch as the plain copy: c, d - c, c + d for the Gauss product, c, d for "four"), which
# stream into shared memory like any operand, and only the activation tiles split in registers
# (_tf32.split_dot), as the transforms, the gate and the feed-forward's row GEMMs do; or "dot": Triton's tf32x3
# dot, which splits both operands in registers every step (and forms the Gauss sums of W there). Untimed: see
# LAUNCH_POLICY. AMG_FAST_SPECTRAL_X3, read by _read_switches.
X3_METHODS = ("split", "dot")


@read_at_import
def _read_switches() -> None:
    """This module's switch settings above from os.environ: at import, and again by
    kernels.limits.reread_switches (a bad value raises ValueError naming the variable)."""
    global REDUCED_PRECISION_DOTS, MIX_METHOD, DFT_GEMM, WEIGHT_PLANES, X3_METHOD
    REDUCED_PRECISION_DOTS = _env_choice("AMG_FAST_SPECTRAL_REDUCED_DOTS", ("0", "1")) != "0"  # other values refused
    MIX_METHOD = _env_choice("AMG_FAST_SPECTRAL_MIX", MIX_METHODS) or "auto"
    DFT_GEMM = _env_choice("AMG_FAST_SPECTRAL_DFT_GEMM", DFT_GEMMS) or "auto"
    WEIGHT_PLANES = _env_choice("AMG_FAST_SPECTRAL_WEIGHT_PLANES", ("0", "1")) != "0"
    X3_METHOD = _env_choice("AMG_FAST_SPECTRAL_X3", X3_METHODS) or "split"


SPLIT_PLANES_LIMIT = 2 ** 31  # split planes hold fewer elements than this (int32 offsets), else the plain planes

# Named combinations of the switches above: (transform, MIX_METHOD, DFT_GEMM, WEIGHT_PLANES). What the probes
# time and check and the tests cover (use_variant).
VARIANTS = {
    "dft-gauss": ("dft", "gauss", "triton", True),
    "dft-torchmix": ("dft", "torch", "triton", True),
    "dft-cublas": ("dft", "torch", "torch", True),
    "fft-torchmix": ("fft", "torch", "triton", True),
    "dft-four": ("dft", "four", "triton", True),
    "dft-gauss-wview": ("dft", "gauss", "triton", False),
    "dft-torchgemm": ("dft", "gauss", "torch", True),
    "dft-torchgemm-four": ("dft", "four", "torch", True),
    "fft-gauss": ("fft", "gauss", "triton", True),
    "fft-four": ("fft", "four", "triton", True),
    "fft-gauss-wview": ("fft", "gauss", "triton", False),
    "fft-four-wview": ("fft", "four", "triton", False),
}

# Launch tiles per device type, kernel and dot mode (_tile_mode: "x3" = fp32 inputs at tf32x3 dots, fp32 mode;
# "x3split" = the mixing in fp32 mode on W's split planes (X3_METHOD "split"; "x3" is then its "dot" path);
# "tf32" = plain TF32; "bf16" = bf16 operands; "fp64"), a mode without an entry taking "default"; block sizes
# are capped by the problem size (min 16 for tl.dot); bench/kernel_sweep.py --only configs times each mode's
# alternatives on a GPU. "default" (TF32, bf16): the mixing's BLOCK_O = 128 covers the paper's H_out in one
# tile, so each X tile is read once. "x3": tf32x3 splits every dot operand in three, and those default tiles
# spilled 200-272 B a thread in the mixing and 312 B in the fft path's dweight, compiled for sm_90 by triton 3.6
# (bench/compile_sm90.py, 2026-11-28); 64 output columns in the mixing (64-row tiles keep wgmma; 32-row tiles
# ran mma.sync) and 16-row, 8-warp dweight tiles spill nothing (210-228 / 172-188 registers); the dweight's 8
# warps also end the fft path's 16 B under TF32 and bf16 (4 warps). Untimed: the sweep decides. The mixing's
# grid runs a row tile's output-channel tiles next to each other, so the X tile a second one reads again is in
# L2. "x3split" (2026-11-29, compiled for sm_90 by triton 3.6 at S = 128, 800 rows, H = 128; untimed): six W tiles
# a step (hi and lo of three planes) stream into shared memory, and the activation tiles split in registers; of
# 32 tilings (rows 64 / 128, 16 / 32 input channels a step, 64 / 128 output channels, 4 / 8 warps, 2 / 3 stages)
# the 4-warp ones and 128 x 128 spill (8 B to 2.2 KB a thread), 64 x 32 x 128 at 3 stages needs 324 KB of shared
# memory; 128 rows x 16 x 64 at 8 warps and 3 stages takes 173-177 registers and 104 KB (two programs an SM),
# reads W half as often as 64-row tiles (176 MB of L2 reads at K = 64 against 327 MB for 64 x 16 x 128, whose
# one output tile reads X once: 230-237 registers, 164 KB). CPU (Triton's interpreter: a cost per program and
# loop step) the large tiles; the tests run the GPU's too. The transform's X_LEFT (its kernel's docstring) in
# fp32 mode and under TF32 (2026-11-30, compiled for sm_90 by triton 3.6 at S = 128; untimed): the input tile
# the MMA's register operand (HGMMA R, gdesc), loaded by 16-byte cp.async, where basis @ inp wrote the split
# tile's two parts back to shared memory every step (fp32) or loaded it 4 bytes at a time (TF32: 96 4-byte
# cp.async in its SASS; this form has 24 16-byte ones and no 4-byte one). 128 x 128 on 8 warps: one program a
# row reads its input once, 127 / 112-126 registers, no spills (every tiling of SPECTRAL_QUICK compiles without);
# 2 stages in fp32 (80 KB; 3 took 128 KB, one program an SM) and 3 under TF32 (80 KB): two programs an SM, each
# only 4 K steps long at S = 128, so one's loads overlap the other's epilogue.
# bf16 keeps basis @ inp (bf16 wgmma reads an n-major tile from shared memory as it is; the timed default).
_TRANSFORM_TILES = dict(BLOCK_M=64, BLOCK_J=32, BLOCK_N=128, num_warps=4)
_TRANSFORM_X_LEFT_TILES = dict(BLOCK_M=128, BLOCK_J=32, BLOCK_N=128, num_warps=8, X_LEFT=True, num_stages=3)
_MIX_TILES = dict(BLOCK_R=64, BLOCK_I=32, BLOCK_O=128, num_warps=8)
_DWEIGHT_TILES = dict(BLOCK_R=32, BLOCK_I=64, BLOCK_O=64, SPLIT_R=1, num_warps=4)
LAUNCH_POLICY = {
    "cuda": {"transform": {"default": dict(_TRANSFORM_TILES, X_LEFT=False),
                           "x3": dict(_TRANSFORM_X_LEFT_TILES, num_stages=2),
                           "tf32": dict(_TRANSFORM_X_LEFT_TILES)},
             "mix": {"default": dict(_MIX_TILES), "x3": dict(_MIX_TILES, BLOCK_O=64),
                     "x3split": dict(BLOCK_R=128, BLOCK_I=16, BLOCK_O=64, num_warps=8, num_stages=3)},
             "dweight": {"default": dict(_DWEIGHT_TILES, num_warps=8),
                         "x3": dict(_DWEIGHT_TILES, BLOCK_R=16, num_warps=8)}},
    "cpu": {"transform": {"default": dict(_TRANSFORM_TILES, X_LEFT=True)}, "mix": {"default": dict(_MIX_TILES)},
            "dweight": {"default": dict(_DWEIGHT_TILES)}},
}


def _tile_mode(dots: str, operands: torch.dtype) -> str:
    """LAUNCH_POLICY's mode of a kernel whose dots run at input_precision dots on operands of this dtype."""
    if operands in (torch.bfloat16, torch.float16):
        return "bf16"
    return {"tf32x3": "x3", "split": "x3split", "ieee": "fp64"}.get(dots, "tf32")


def _tiles(kernel: str, device: torch.device, dots: str, operands: torch.dtype, **sizes: int) -> dict:
    """The launch options of kernel ("transform", "mix", "dweight") on device for its dots (_tile_mode): the
    policy's entry, each BLOCK_X capped at next_pow2(size X) (>= 16)."""
    policy = for_device(LAUNCH_POLICY, device)[kernel]
    out = dict(policy.get(_tile_mode(dots, operands), policy["default"]))
    for name, size in sizes.items():
        out[f"BLOCK_{name}"] = min(out[f"BLOCK_{name}"], next_pow2(size))
    return out


@triton.jit
def _row_offsets(rows, INNER, stride_outer, stride_inner):
    """Element offsets (int64) of rows r = p * INNER + q of a tensor [P, ..., Q, ...]."""
    rows = rows.to(tl.int64)
    outer = rows // INNER
    return outer * stride_outer + (rows - outer * INNER) * stride_inner


@triton.jit
def _load_complex(ptr, row_offs, chans, mask, stride_c, stride_p, PAIRED: tl.constexpr):
    """(re, im) tiles [rows, channels] at ptr + row_offs + chans * stride_c (+ stride_p for im).
    PAIRED: (re, im) adjacent and channels at stride 2 (view_as_real of a complex tensor): one
    contiguous [rows, 2 * channels] load, split in registers."""
    if PAIRED:
        part = tl.arange(0, 2)
        offs = row_offs[:, None, None] + chans[None, :, None] * 2 + part[None, None, :]
        pair = tl.load(ptr + offs, mask=mask[:, :, None] & (part[None, None, :] < 2), other=0.0)
        re, im = tl.split(pair)
    else:
        offs = row_offs[:, None] + chans[None, :] * stride_c
        re = tl.load(ptr + offs, mask=mask, other=0.0)
        im = tl.load(ptr + offs + stride_p, mask=mask, other=0.0)
    return re, im


@triton.jit
def _store_complex(ptr, row_offs, chans, mask, re, im, stride_c, stride_p, PAIRED: tl.constexpr):
    """Store (re, im) tiles [rows, channels], addressed as in _load_complex."""
    if PAIRED:
        part = tl.arange(0, 2)
        offs = row_offs[:, None, None] + chans[None, :, None] * 2 + part[None, None, :]
        tl.store(ptr + offs, tl.join(re, im), mask=mask[:, :, None] & (part[None, None, :] < 2))
    else:
        offs = row_offs[:, None] + chans[None, :] * stride_c
        tl.store(ptr + offs, re, mask=mask)
        tl.store(ptr + offs + stride_p, im, mask=mask)


@triton.jit
def _complex_dot(a, b, c, d, acc1, acc2, acc3, GAUSS: tl.constexpr, BF16_OPERANDS: tl.constexpr,
                 DOT_PRECISION: tl.constexpr):
    """Accumulate (a + ib) @ (c + id) (tiles in the accumulators' dtype) into (acc1, acc2, acc3); the
    product is _complex_result(acc1, acc2, acc3). GAUSS: 3 dots, acc1 += (a + b) c, acc2 += a (d - c),
    acc3 += b (c + d), the sums formed before the operands are rounded (to TF32 by _round_tf32 for
    plain-TF32 dots); else 4 dots, acc1 += a c - b d, acc2 += a d + b c (acc3 unused). BF16_OPERANDS:
    bf16 MMAs (fp32 accumulation)."""
    if GAUSS:
        s, dc, cd = a + b, d - c, c + d
        if DOT_PRECISION == "tf32" and not BF16_OPERANDS:  # fp32 sums for plain-TF32 dots: round, not truncate
            s, dc, cd = _round_tf32(s), _round_tf32(dc), _round_tf32(cd)
        if BF16_OPERANDS:
            s, a, b, c, dc, cd = (s.to(tl.bfloat16), a.to(tl.bfloat16), b.to(tl.bfloat16), c.to(tl.bfloat16),
                                  dc.to(tl.bfloat16), cd.to(tl.bfloat16))
        acc1 = tl.dot(s, c, acc1, input_precision=DOT_PRECISION, out_dtype=acc1.dtype)
        acc2 = tl.dot(a, dc, acc2, input_precision=DOT_PRECISION, out_dtype=acc2.dtype)
        acc3 = tl.dot(b, cd, acc3, input_precision=DOT_PRECISION, out_dtype=acc3.dtype)
    else:
        if BF16_OPERANDS:
            a, b, c, d = a.to(tl.bfloat16), b.to(tl.bfloat16), c.to(tl.bfloat16), d.to(tl.bfloat16)
        acc1 = tl.dot(a, c, acc1, input_precision=DOT_PRECISION, out_dtype=acc1.dtype)
        acc1 = tl.dot(-b, d, acc1, input_precision=DOT_PRECISION, out_dtype=acc1.dtype)
        acc2 = tl.dot(a, d, acc2, input_precision=DOT_PRECISION, out_dtype=acc2.dtype)
        acc2 = tl.dot(b, c, acc2, input_precision=DOT_PRECISION, out_dtype=acc2.dtype)
    return acc1, acc2, acc3


@triton.jit
def _complex_result(acc1, acc2, acc3, GAUSS: tl.constexpr):
    """(re, im) of the product _complex_dot accumulated: Gauss re = k1 - k3, im = k1 + k2."""
    if GAUSS:
        re, im = acc1 - acc3, acc1 + acc2
    else:
        re, im = acc1, acc2
    return re, im


@triton.jit
def _weight_plane(w_tile, mask, j, s_wp, lo_offset):
    """(hi, lo) tiles of split plane j: at w_tile + j * s_wp and lo_offset elements further (weight_planes)."""
    hi = tl.load(w_tile + j * s_wp, mask=mask, other=0.0)
    return hi, tl.load(w_tile + j * s_wp + lo_offset, mask=mask, other=0.0)


@triton.jit
def _split_complex_dot(a, b, w_tile, mask, s_wp, lo_offset, acc1, acc2, acc3, GAUSS: tl.constexpr,
                       CONJ: tl.constexpr):
    """_complex_dot's accumulation at fp32 accuracy against W's split planes (fp32 mode, X3_METHOD "split"):
    each product three TF32 MMAs (_tf32.split_dot: the activation tile split in registers, W's hi and lo planes
    read from memory). GAUSS: planes c, d - c, c + d; conj(W) (CONJ: d -> -d) turns d - c into -(c + d) and
    c + d into -(d - c), so acc2 += (-a)(c + d), acc3 += (-b)(d - c). Four: planes c, d; acc1 += a c - b d,
    acc2 += a d + b c (CONJ: + b d, - a d). Signs go on the activation tiles (registers), never on W's."""
    if GAUSS:
        c, c_lo = _weight_plane(w_tile, mask, 0, s_wp, lo_offset)
        acc1 = split_dot(a + b, c, c_lo, acc1, True, "tf32")
        if CONJ:  # acc2 meets plane 2 (c + d), acc3 plane 1 (d - c), both negated
            a, b = -a, -b
        w2, w2_lo = _weight_plane(w_tile, mask, 2 if CONJ else 1, s_wp, lo_offset)
        acc2 = split_dot(a, w2, w2_lo, acc2, True, "tf32")
        w3, w3_lo = _weight_plane(w_tile, mask, 1 if CONJ else 2, s_wp, lo_offset)
        acc3 = split_dot(b, w3, w3_lo, acc3, True, "tf32")
    else:
        c, c_lo = _weight_plane(w_tile, mask, 0, s_wp, lo_offset)
        d, d_lo = _weight_plane(w_tile, mask, 1, s_wp, lo_offset)
        if CONJ:
            acc1 = split_dot(b, d, d_lo, split_dot(a, c, c_lo, acc1, True, "tf32"), True, "tf32")
            acc2 = split_dot(b, c, c_lo, split_dot(-a, d, d_lo, acc2, True, "tf32"), True, "tf32")
        else:
            acc1 = split_dot(-b, d, d_lo, split_dot(a, c, c_lo, acc1, True, "tf32"), True, "tf32")
            acc2 = split_dot(b, c, c_lo, split_dot(a, d, d_lo, acc2, True, "tf32"), True, "tf32")
    return acc1, acc2, acc3


@triton.jit
def _mix_weight_planes_kernel(w_ptr, out_ptr, out_t_ptr, n, H_IN, H_OUT, s_k, s_i, s_o, s_p, GAUSS: tl.constexpr,
                              TRANSPOSED_COPY: tl.constexpr, BLOCK: tl.constexpr):
    """W's split planes (fp32 mode's mixing) from weight [K, H_in, H_out, 2] (c + i d, by strides): out [2 P, K,
    H_in, H_out] fp32, flat, n = K H_in H_out elements a plane: the hi planes (rounded to TF32) of P = 3 values
    c, d - c, c + d (GAUSS; the sums in fp32, as the "dot" path forms them) or P = 2 values c, d, then their lo
    planes (value - hi, exact), in the same order. TRANSPOSED_COPY: the same planes also into out_t, stored
    [2 P, K, H_out, H_in] (what the forward's products read K-major: weight_planes_for_forward)."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    k = offs // (H_IN * H_OUT)
    i = (offs // H_OUT) % H_IN
    o = offs % H_OUT
    src = w_ptr + k * s_k + i * s_i + o * s_o
    c = tl.load(src, mask=mask, other=0.0).to(tl.float32)
    d = tl.load(src + s_p, mask=mask, other=0.0).to(tl.float32)
    t_offs = k * (H_IN * H_OUT) + o * H_IN + i  # the element's place in out_t
    if GAUSS:
        _store_split_planes(out_ptr, out_t_ptr, offs, t_offs, mask, n, 0, 3, c, TRANSPOSED_COPY)
        _store_split_planes(out_ptr, out_t_ptr, offs, t_offs, mask, n, 1, 3, d - c, TRANSPOSED_COPY)
        _store_split_planes(out_ptr, out_t_ptr, offs, t_offs, mask, n, 2, 3, c + d, TRANSPOSED_COPY)
    else:
        _store_split_planes(out_ptr, out_t_ptr, offs, t_offs, mask, n, 0, 2, c, TRANSPOSED_COPY)
        _store_split_planes(out_ptr, out_t_ptr, offs, t_offs, mask, n, 1, 2, d, TRANSPOSED_COPY)


@triton.jit
def _store_split_plane(out_ptr, offs, mask, n, j, NP: tl.constexpr, v):
    """Value plane j of NP: hi = round_tf32(v) at plane j, lo = v - hi at plane NP + j (planes of n elements)."""
    store_split(out_ptr + j * n + offs, out_ptr + (NP + j) * n + offs, v, mask)


@triton.jit
def _store_split_planes(out_ptr, out_t_ptr, offs, t_offs, mask, n, j, NP: tl.constexpr, v,
                        TRANSPOSED_COPY: tl.constexpr):
    """_store_split_plane into out at offs and (TRANSPOSED_COPY) into out_t at t_offs."""
    _store_split_plane(out_ptr, offs, mask, n, j, NP, v)
    if TRANSPOSED_COPY:
        _store_split_plane(out_t_ptr, t_offs, mask, n, j, NP, v)


@triton.jit
def _part_index(ch, part, C, PAIRED: tl.constexpr):
    """Row (or column) of part (0 re, 1 im) of channel ch in a mode_rows row of C channels: 2 ch + part when
    PAIRED, else part C + ch."""
    if PAIRED:
        return 2 * ch + part
    return part * C + ch


@triton.jit
def _weight_blocks_kernel(w_ptr, out_ptr, H_IN, H_OUT, s_p, s_k, s_i, s_o, ADJOINT: tl.constexpr,
                          PAIRED_IN: tl.constexpr, PAIRED_OUT: tl.constexpr, BLOCK_I: tl.constexpr,
                          BLOCK_O: tl.constexpr):
    """weight_blocks in one launch: W's planes [2, K, H_in, H_out] (c + i d, by strides) -> out [K, 2 C_in, 2 C_out]
    contiguous in out's dtype, C_in, C_out = H_in, H_out, or with ADJOINT H_out, H_in and the entries of W^H
    (c - i d, transposed). (input part, output part) entries: (re, re) c, (re, im) d, (im, re) -d, (im, im) c, at
    rows / columns _part_index(PAIRED_IN / PAIRED_OUT). One program a [BLOCK_I, BLOCK_O] tile of mode k (grid
    (K, i tiles, o tiles)): a 2-D tile, so the compiler lays its loads out along o and W^H's transposed stores
    along i, each coalesced (a flat block ordered by o wrote W^H one element per 1-KB row at H = 128: 8x the
    bytes, 64 us a layer on the H200, 2026-11-30, against 8 for W)."""
    k = tl.program_id(0).to(tl.int64)
    i = (tl.program_id(1) * BLOCK_I + tl.arange(0, BLOCK_I))[:, None]
    o = (tl.program_id(2) * BLOCK_O + tl.arange(0, BLOCK_O))[None, :]
    mask = (i < H_IN) & (o < H_OUT)
    src = w_ptr + k * s_k + i * s_i + o * s_o
    c = tl.load(src, mask=mask, other=0.0)  # negated in W's dtype, cast at the stores
    d = tl.load(src + s_p, mask=mask, other=0.0)
    if ADJOINT:  # W^H maps channel o of H_out to channel i of H_in by conj(W[k, i, o])
        d = -d
        c_in, c_out, width_in, width_out = o, i, H_OUT, H_IN
    else:
        c_in, c_out, width_in, width_out = i, o, H_IN, H_OUT
    base = out_ptr + k * (4 * H_IN * H_OUT)
    row_re = _part_index(c_in, 0, width_in, PAIRED_IN) * (2 * width_out)
    row_im = _part_index(c_in, 1, width_in, PAIRED_IN) * (2 * width_out)
    col_re = _part_index(c_out, 0, width_out, PAIRED_OUT)
    col_im = _part_index(c_out, 1, width_out, PAIRED_OUT)
    dtype = out_ptr.dtype.element_ty
    tl.store(base + row_re + col_re, c.to(dtype), mask=mask)
    tl.store(base + row_re + col_im, d.to(dtype), mask=mask)
    tl.store(base + row_im + col_re, (-d).to(dtype), mask=mask)
    tl.store(base + row_im + col_im, c.to(dtype), mask=mask)


@triton.jit
def _dweight_parts_kernel(prod_ptr, dw_ptr, n, H_IN, H_OUT, NYQUIST, PAIRED_X: tl.constexpr,
                          PAIRED_DY: tl.constexpr, BLOCK: tl.constexpr):
    """dweight_parts in one launch: prod = X^T dY [K, 2 H_in, 2 H_out] contiguous (rows x's (channel, part),
    columns dY's, by _part_index(PAIRED_X / PAIRED_DY)) -> dW [K, H_in, H_out, 2] contiguous in dw's dtype
    (n = K H_in H_out): a_k X^H dY, re = (rr + ii) a_k, im = (ri - ir) a_k, a_k = 1 for k = 0 and k = NYQUIST
    (S/2; -1 for an odd S), else 2."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    k = offs // (H_IN * H_OUT)
    i = (offs // H_OUT) % H_IN
    o = offs % H_OUT
    base = prod_ptr + k * (4 * H_IN * H_OUT)
    x_re = _part_index(i, 0, H_IN, PAIRED_X) * (2 * H_OUT)
    x_im = _part_index(i, 1, H_IN, PAIRED_X) * (2 * H_OUT)
    dy_re = _part_index(o, 0, H_OUT, PAIRED_DY)
    dy_im = _part_index(o, 1, H_OUT, PAIRED_DY)
    rr = tl.load(base + x_re + dy_re, mask=mask, other=0.0)
    ii = tl.load(base + x_im + dy_im, mask=mask, other=0.0)
    ri = tl.load(base + x_re + dy_im, mask=mask, other=0.0)
    ir = tl.load(base + x_im + dy_re, mask=mask, other=0.0)
    a_k = tl.where((k == 0) | (k == NYQUIST), 1.0, 2.0).to(rr.dtype)
    tl.store(dw_ptr + 2 * offs, ((rr + ii) * a_k).to(dw_ptr.dtype.element_ty), mask=mask)
    tl.store(dw_ptr + 2 * offs + 1, ((ri - ir) * a_k).to(dw_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _spectral_conv1d_transform_kernel(
    basis_ptr, inp_ptr, out_ptr,
    M, J, N, INNER,
    stride_bm, stride_bj, lo_offset,
    stride_io, stride_ij, stride_iq, stride_in,
    stride_oo, stride_om, stride_oq, stride_on,
    BLOCK_M: tl.constexpr, BLOCK_J: tl.constexpr, BLOCK_N: tl.constexpr, DOT_PRECISION: tl.constexpr,
    ROUND_OUT: tl.constexpr, SPLIT: tl.constexpr, X_LEFT: tl.constexpr, ROUND_IN: tl.constexpr,
):
    """out[r, m, n] = sum_j basis[m, j] * inp[r, j, n], one row r = p * INNER + q per program (grid
    axis 0); inp [P, J, Q, N] and out [P, M, Q, N] addressed by (outer, j|m, inner, n) strides. ROUND_OUT:
    out rounded to TF32 (_round_tf32; an fp32 spectrum that plain-TF32 dots read next). SPLIT (fp32 mode):
    basis_ptr is the basis's TF32 hi plane and its lo plane lo_offset elements on (spectral_bases), inp split
    in registers (_tf32.split_dot: three TF32 products). X_LEFT: the transposed product out^T = inp^T basis^T
    ([BLOCK_N, BLOCK_M] accumulator), so that the inp tile, split (SPLIT) or rounded to TF32 (plain TF32 dots)
    in registers, is the MMA's register operand; else basis @ inp, where a TF32 wgmma takes the [j, n] inp
    tile (n-major) only from shared memory: its split parts written back there every step (SPLIT), or (plain
    TF32) the tile loaded 4 bytes at a time, transposed on the way (LAUNCH_POLICY). ROUND_IN (X_LEFT, fp32
    tiles at plain-TF32 dots): the inp tile rounded to TF32 in registers."""
    r = tl.program_id(0)
    n_tiles_n = tl.cdiv(N, BLOCK_N)
    pid_m = tl.program_id(1) // n_tiles_n
    pid_n = tl.program_id(1) % n_tiles_n
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_j = tl.arange(0, BLOCK_J)
    outer = r.to(tl.int64) // INNER
    inner = r.to(tl.int64) - outer * INNER
    inp_row = inp_ptr + outer * stride_io + inner * stride_iq
    acc_dtype: tl.constexpr = tl.float64 if DOT_PRECISION == "ieee" else tl.float32
    acc = tl.zeros((BLOCK_N, BLOCK_M) if X_LEFT else (BLOCK_M, BLOCK_N), dtype=acc_dtype)
    for j0 in range(0, J, BLOCK_J):
        jj = j0 + offs_j
        if X_LEFT:  # basis^T [j, m] and inp^T [n, j] tiles
            a_offs = jj[:, None] * stride_bj + offs_m[None, :] * stride_bm
            a_mask = (jj[:, None] < J) & (offs_m[None, :] < M)
            b_offs = offs_n[:, None] * stride_in + jj[None, :] * stride_ij
            b_mask = (offs_n[:, None] < N) & (jj[None, :] < J)
        else:
            a_offs = offs_m[:, None] * stride_bm + jj[None, :] * stride_bj
            a_mask = (offs_m[:, None] < M) & (jj[None, :] < J)
            b_offs = jj[:, None] * stride_ij + offs_n[None, :] * stride_in
            b_mask = (jj[:, None] < J) & (offs_n[None, :] < N)
        a = tl.load(basis_ptr + a_offs, mask=a_mask, other=0.0)
        a_lo = tl.load(basis_ptr + lo_offset.to(tl.int64) + a_offs, mask=a_mask, other=0.0) if SPLIT else a
        b = tl.load(inp_row + b_offs, mask=b_mask, other=0.0).to(a.dtype)
        if ROUND_IN:
            b = _round_tf32(b)  # rounded (not truncated by the MMA), and the dot's register operand
        acc = split_dot(b, a, a_lo, acc, SPLIT, DOT_PRECISION, X_RIGHT=not X_LEFT)
    if ROUND_OUT:
        acc = _round_tf32(acc)
    out_row = out_ptr + outer * stride_oo + inner * stride_oq
    if X_LEFT:
        tl.store(out_row + offs_n[:, None] * stride_on + offs_m[None, :] * stride_om,
                 acc.to(out_ptr.dtype.element_ty), mask=(offs_n[:, None] < N) & (offs_m[None, :] < M))
    else:
        tl.store(out_row + offs_m[:, None] * stride_om + offs_n[None, :] * stride_on,
                 acc.to(out_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@triton.jit
def _spectral_conv1d_mix_kernel(
    inp_ptr, w_ptr, out_ptr,
    R, INNER, K, C_IN, C_OUT, NYQ,
    s_io, s_ik, s_iq, s_ic, s_ip,
    s_wp, s_wk, s_wi, s_wo,
    s_oo, s_ok, s_oq, s_oc, s_op,
    CONJ: tl.constexpr, GAUSS: tl.constexpr, PAIRED_IN: tl.constexpr, PAIRED_OUT: tl.constexpr,
    BF16_OPERANDS: tl.constexpr,
    BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr, BLOCK_O: tl.constexpr, DOT_PRECISION: tl.constexpr,
    ROUND_OUT: tl.constexpr, SPLIT: tl.constexpr, W_LO: tl.constexpr,
):
    """out[r, k, o] = sum_i inp[r, k, i] w[k, i, o] (complex; conj(w) with CONJ) for modes k < K, 0 for
    K <= k < the grid's mode count; the imaginary parts of modes 0 and NYQ (S/2, or -1) are set to 0.
    ROUND_OUT: out rounded to TF32 (_round_tf32: the synthesis's plain-TF32 dots read it next). SPLIT (fp32
    mode, X3_METHOD "split"): w holds W's split planes (weight_planes; the lo planes W_LO planes after the hi
    ones) and each product is three TF32 MMAs (_split_complex_dot).

    inp [P, K, Q, C_IN] / out [P, modes, Q, C_OUT] complex, addressed by (outer, mode, inner, channel,
    part) strides (PAIRED_*: view_as_real layout); w: real, imaginary planes [2, K, C_IN, C_OUT] by
    (part, mode, in, out) strides. Grid (modes x row tiles x output channel tiles,), the output tile fastest:
    a row tile's output tiles run next to each other, so the X tile each reads again comes from L2, and a
    mode's programs together (W[k] stays in L2); one axis, so any number of modes fits."""
    n_tiles_o = tl.cdiv(C_OUT, BLOCK_O)
    n_tiles = tl.cdiv(R, BLOCK_R) * n_tiles_o
    k = tl.program_id(0) // n_tiles
    tile = tl.program_id(0) - k * n_tiles
    pid_r, pid_o = tile // n_tiles_o, tile % n_tiles_o
    rows = pid_r * BLOCK_R + tl.arange(0, BLOCK_R)
    offs_o = pid_o * BLOCK_O + tl.arange(0, BLOCK_O)
    offs_i = tl.arange(0, BLOCK_I)
    acc_ty = tl.float64 if DOT_PRECISION == "ieee" else tl.float32  # "ieee" only for fp64 inputs
    acc1 = tl.zeros((BLOCK_R, BLOCK_O), dtype=acc_ty)  # the complex product's accumulators (_complex_dot)
    acc2 = tl.zeros((BLOCK_R, BLOCK_O), dtype=acc_ty)
    acc3 = tl.zeros((BLOCK_R, BLOCK_O), dtype=acc_ty)
    row_mask = rows < R
    k64 = k.to(tl.int64)
    if k < K:
        in_rows = _row_offsets(rows, INNER, s_io, s_iq) + k64 * s_ik
        w_base = w_ptr + k64 * s_wk + offs_o[None, :] * s_wo
        for i0 in range(0, C_IN, BLOCK_I):
            ii = i0 + offs_i
            a, b = _load_complex(inp_ptr, in_rows, ii, row_mask[:, None] & (ii[None, :] < C_IN), s_ic, s_ip,
                                 PAIRED_IN)
            w_mask = (ii[:, None] < C_IN) & (offs_o[None, :] < C_OUT)
            w_tile = w_base + ii[:, None] * s_wi
            if SPLIT:
                acc1, acc2, acc3 = _split_complex_dot(a.to(tl.float32), b.to(tl.float32), w_tile, w_mask, s_wp,
                                                      W_LO * s_wp, acc1, acc2, acc3, GAUSS, CONJ)
            else:
                c = tl.load(w_tile, mask=w_mask, other=0.0)
                d = tl.load(w_tile + s_wp, mask=w_mask, other=0.0)
                if CONJ:
                    d = -d
                acc1, acc2, acc3 = _complex_dot(a.to(c.dtype), b.to(c.dtype), c, d, acc1, acc2, acc3, GAUSS,
                                                BF16_OPERANDS, DOT_PRECISION)
    re, im = _complex_result(acc1, acc2, acc3, GAUSS)
    im = tl.where((k == 0) | (k == NYQ), 0.0, im)  # a real signal's spectrum (irfft input)
    if ROUND_OUT:
        re, im = _round_tf32(re), _round_tf32(im)
    out_rows = _row_offsets(rows, INNER, s_oo, s_oq) + k64 * s_ok
    out_ty = out_ptr.dtype.element_ty
    _store_complex(out_ptr, out_rows, offs_o, row_mask[:, None] & (offs_o[None, :] < C_OUT),
                   re.to(out_ty), im.to(out_ty), s_oc, s_op, PAIRED_OUT)


@triton.jit
def _spectral_conv1d_dweight_kernel(
    x_ptr, dy_ptr, dw_ptr,
    R, INNER, C_IN, C_OUT, NYQ, ROWS_PER_SPLIT,
    s_xo, s_xk, s_xq, s_xc, s_xp,
    s_yo, s_yk, s_yq, s_yc, s_yp,
    s_ws, s_wk, s_wi, s_wo, s_wp,
    GAUSS: tl.constexpr, PAIRED_X: tl.constexpr, PAIRED_Y: tl.constexpr, BF16_OPERANDS: tl.constexpr,
    BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr, BLOCK_O: tl.constexpr, DOT_PRECISION: tl.constexpr,
):
    """dw[split, k, i, o] = a_k sum_r conj(x[r, k, i]) dy[r, k, o] over this split's rows, a_k = 1 for
    k = 0 and k = NYQ, else 2 (dY = G^T dy = a_k A dy).

    x [P, K, Q, C_IN], dy [P, K, Q, C_OUT] complex as in the mixing kernel; dw: (re, im) by the part
    stride s_wp. Grid (K, I tiles x O tiles, splits of ROWS_PER_SPLIT rows)."""
    k, pid_io, split = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    n_tiles_o = tl.cdiv(C_OUT, BLOCK_O)
    offs_i = (pid_io // n_tiles_o) * BLOCK_I + tl.arange(0, BLOCK_I)
    offs_o = (pid_io % n_tiles_o) * BLOCK_O + tl.arange(0, BLOCK_O)
    offs_r = tl.arange(0, BLOCK_R)
    acc_ty = tl.float64 if DOT_PRECISION == "ieee" else tl.float32
    acc1 = tl.zeros((BLOCK_I, BLOCK_O), dtype=acc_ty)  # the complex product's accumulators (_complex_dot)
    acc2 = tl.zeros((BLOCK_I, BLOCK_O), dtype=acc_ty)
    acc3 = tl.zeros((BLOCK_I, BLOCK_O), dtype=acc_ty)
    k64 = k.to(tl.int64)
    row_start = split * ROWS_PER_SPLIT
    row_end = tl.minimum(row_start + ROWS_PER_SPLIT, R)
    for r0 in range(row_start, row_end, BLOCK_R):
        rows = r0 + offs_r
        row_mask = rows < row_end
        x_rows = _row_offsets(rows, INNER, s_xo, s_xq) + k64 * s_xk
        a, b = _load_complex(x_ptr, x_rows, offs_i, row_mask[:, None] & (offs_i[None, :] < C_IN), s_xc, s_xp,
                             PAIRED_X)
        y_rows = _row_offsets(rows, INNER, s_yo, s_yq) + k64 * s_yk
        c, d = _load_complex(dy_ptr, y_rows, offs_o, row_mask[:, None] & (offs_o[None, :] < C_OUT), s_yc, s_yp,
                             PAIRED_Y)
        a, b = tl.trans(a.to(acc_ty)), tl.trans(b.to(acc_ty))  # [I, rows]: conj(x)^T = a^T - i b^T
        acc1, acc2, acc3 = _complex_dot(a, -b, c.to(acc_ty), d.to(acc_ty), acc1, acc2, acc3, GAUSS, BF16_OPERANDS,
                                        DOT_PRECISION)
    re, im = _complex_result(acc1, acc2, acc3, GAUSS)
    scale = tl.where((k == 0) | (k == NYQ), 1.0, 2.0)
    out_ty = dw_ptr.dtype.element_ty
    w_ptrs = dw_ptr + split.to(tl.int64) * s_ws + k64 * s_wk + offs_i[:, None] * s_wi + offs_o[None, :] * s_wo
    w_mask = (offs_i[:, None] < C_IN) & (offs_o[None, :] < C_OUT)
    tl.store(w_ptrs, (re * scale).to(out_ty), mask=w_mask)
    tl.store(w_ptrs + s_wp, (im * scale).to(out_ty), mask=w_mask)


# ---------------------------------------------------------------------------------------------
# Precision, bases, layouts
# ---------------------------------------------------------------------------------------------

@contextlib.contextmanager
def use_variant(name: str, reduced: bool | None = None):
    """Within the block, the module switches of VARIANTS[name] (and REDUCED_PRECISION_DOTS = reduced unless
    None); restored afterwards. Yields the variant's transform ("dft" or "fft")."""
    global MIX_METHOD, DFT_GEMM, WEIGHT_PLANES, REDUCED_PRECISION_DOTS
    transform, mix, gemm, planes = VARIANTS[name]
    saved = MIX_METHOD, DFT_GEMM, WEIGHT_PLANES, REDUCED_PRECISION_DOTS
    MIX_METHOD, DFT_GEMM, WEIGHT_PLANES = mix, gemm, planes
    REDUCED_PRECISION_DOTS = REDUCED_PRECISION_DOTS if reduced is None else reduced
    try:
        yield transform
    finally:
        MIX_METHOD, DFT_GEMM, WEIGHT_PLANES, REDUCED_PRECISION_DOTS = saved


def work_dtype(dtype: torch.dtype) -> torch.dtype:
    """Dtype of bases and the "dft" path's spectra: the accumulation dtype (_common.acc_dtype: fp64 for
    fp64, else fp32), or bf16 / fp16 itself with REDUCED_PRECISION_DOTS."""
    if REDUCED_PRECISION_DOTS and dtype in (torch.bfloat16, torch.float16):
        return dtype
    return acc_dtype(dtype)


def _dots(dtype: torch.dtype) -> str:
    """tl.dot input_precision of these kernels: _common.dot_precision, reduced (plain TF32) only with
    REDUCED_PRECISION_DOTS."""
    return dot_precision(dtype, reduced=REDUCED_PRECISION_DOTS)


def plain_tf32(dtype: torch.dtype) -> bool:
    """Whether fp32 values of this dtype meet plain-TF32 dots (TF32 allowed, REDUCED_PRECISION_DOTS): then
    what feeds them is rounded to TF32 where it is formed -- the bases, the spectra the analysis and the
    mixing store for the next stage, the Gauss sums -- rather than truncated by the MMA (docs/kernels.md)."""
    return dtype == torch.float32 and _dots(dtype) == "tf32"


def _operand_precision(dtype: torch.dtype, bf16_operands: bool) -> str:
    """input_precision of the mixing / dweight dots on dtype tiles: _dots(dtype), or "tf32" (the value
    bf16 dots have always compiled with; ignored for them) when the operands are rounded to bf16."""
    return "tf32" if bf16_operands else _dots(dtype)


def cublas_by_default(work: torch.dtype | None, device: torch.device | str | None) -> bool:
    """What MIX_METHOD "auto" chooses (DFT_GEMM's did too until 2026-12-01) for an op of this work dtype
    (work_dtype of its input) on device: cuBLAS ("torch") for fp32 work on CUDA -- the fp32 and TF32 modes,
    where the H200's graphed training step was 1.03x / 1.07x (fp32) and 1.07x / 1.26x (TF32) faster at S = 32
    / 128 with both on cuBLAS (results/gpu/20261129-1927-h200/bench, variant spectral_cublas) -- else this
    file's kernels: bf16 work (0.83x / 0.99x there), fp64 (untimed) and Triton's interpreter on CPU. Not with REDUCED_PRECISION_DOTS off while TF32
    is allowed: cuBLAS would compute in TF32 (torch's matmul setting), where that switch asks for fp32 accuracy."""
    if work != torch.float32 or device is None or torch.device(device).type != "cuda":
        return False
    return REDUCED_PRECISION_DOTS or not torch.backends.cuda.matmul.allow_tf32


def _mix_method(work: torch.dtype | None = None, device: torch.device | str | None = None) -> str:
    """MIX_METHOD, "auto" resolved for work dtype and device (neither given: this file's "gauss")."""
    method = _choice("AMG_FAST_SPECTRAL_MIX (kernels.spectral_conv.MIX_METHOD)", MIX_METHOD, MIX_METHODS)
    if method != "auto":
        return method
    return "torch" if cublas_by_default(work, device) else "gauss"


def _mix_is_gauss() -> bool:
    """Whether this file's mixing kernels run the Gauss product (MIX_METHOD gauss, or auto where it picks them)."""
    return _mix_method() == "gauss"


def _mix_work(spec: torch.Tensor, bf16_operands: bool) -> torch.dtype:
    """The work dtype of a mixing of spec (what work_dtype gave the op's input)."""
    return torch.bfloat16 if bf16_operands else acc_dtype(spec.dtype)


def _dft_gemm(work: torch.dtype | None = None, device: torch.device | str | None = None) -> str:
    """DFT_GEMM, "auto" resolved: this file's transform kernel ("triton") for every work dtype and device since
    2026-12-01. On the H200 (results/gpu/20261130-2354-h200/bench, variant spectral_dfttriton) the graphed step
    with it against cuBLAS's DFT GEMMs was 1.02x / 1.06x (fp32) and 1.05x / 1.01x (TF32) at S = 32 / 128, 1.00x
    in bf16 (which ran it already). work and device are taken for the callers' symmetry with _mix_method."""
    method = _choice("AMG_FAST_SPECTRAL_DFT_GEMM (kernels.spectral_conv.DFT_GEMM)", DFT_GEMM, DFT_GEMMS)
    return "triton" if method == "auto" else method


# Bases per (S, K, dtype, device), least recently used dropped beyond this many (each is 4 S K values).
BASES_CACHE_SIZE = 32
_BASES_CACHE: collections.OrderedDict[tuple, tuple[torch.Tensor, torch.Tensor]] = collections.OrderedDict()


def _tf32_planes(b: torch.Tensor) -> torch.Tensor:
    """fp64 b -> [2, *b.shape] fp32: hi = b rounded to TF32 (via fp32), lo = b - hi rounded to fp32."""
    hi = round_to_tf32(b.float())
    return torch.stack([hi, (b - hi.double()).float()])


def spectral_bases(S: int, K: int, dtype: torch.dtype, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """(A [2K, S], G [S, 2K]) for S samples and K modes, in dtype (use work_dtype(x.dtype)); rounded to TF32
    when plain_tf32(dtype) at the call; in fp32 mode (fp32 at tf32x3 dots) with the Triton transform
    (DFT_GEMM "triton") each as its TF32 planes [2, rows, cols] (hi = rounded to TF32, lo = the fp64 value
    minus hi, in fp32: the transform kernel then splits only the activation tile, _tf32.split_dot; hi + lo is
    the basis to ~2^-35 relative).

    A: the ortho rFFT analysis basis, rows 2k and 2k+1 = cos and -sin of mode k: X = A x gives mode
    k's (re, im) in rows (2k, 2k+1). G = (A * a_k)^T, a_k = 1 for k = 0 and k = S/2, else 2: the
    synthesis, irfft(Y, n=S, norm="ortho") = G Y (the imaginary parts of modes 0 and S/2 dropped: their sine
    rows of A, so columns of G, are exactly 0, and the cuBLAS mixing leaves them unzeroed).
    Cached per (S, K, dtype, device, rounding, planes) in eager mode, so a call launches no basis work."""
    rounded = plain_tf32(dtype)
    split = dtype == torch.float32 and _dots(dtype) == "tf32x3" and _dft_gemm(dtype, device) == "triton"  # cuBLAS: one
    key = (S, K, dtype, device, rounded, split)
    if key in _BASES_CACHE and not tracing():
        _BASES_CACHE.move_to_end(key)
        return _BASES_CACHE[key]
    k = torch.arange(K, dtype=torch.int64, device=device)
    s = torch.arange(S, dtype=torch.int64, device=device)
    angle = (2 * math.pi / S) * torch.remainder(k[:, None] * s[None, :], S).to(torch.float64)  # exact reduction
    sine = torch.where((2 * k == S)[:, None], 0.0, -torch.sin(angle))  # S/2's exactly 0 (sin(pi) is 1.2e-16)
    A = torch.stack([torch.cos(angle), sine], dim=1).reshape(2 * K, S) / math.sqrt(S)
    a = torch.where((k == 0) | (2 * k == S), 1.0, 2.0).to(torch.float64).repeat_interleave(2)
    G = (A * a[:, None]).t().contiguous()
    if split:
        bases = tuple(_tf32_planes(B) for B in (A, G))
    else:
        bases = tuple(round_to_tf32(B.to(dtype)) if rounded else B.to(dtype) for B in (A, G))
    if not tracing():
        _BASES_CACHE[key] = bases
        while len(_BASES_CACHE) > BASES_CACHE_SIZE:
            _BASES_CACHE.popitem(last=False)
    return bases


def _merges(t: torch.Tensor, axes: list[int]) -> bool:
    """Whether t's axes (in this order) can be seen as one axis with one stride (size-1 axes ignored)."""
    return merged_stride([t.shape[a] for a in axes], [t.stride(a) for a in axes]) is not None


def _row_order(ndim: int, dim: int, split: int, trailing: int) -> list[int]:
    """Axis order (row axes[:split], dim, row axes[split:], trailing axes); row axes = all but dim and trailing."""
    rows = [a for a in range(ndim - trailing) if a != dim]
    return rows[:split] + [dim] + rows[split:] + list(range(ndim - trailing, ndim))


def row_split(t: torch.Tensor, dim: int, trailing: int = 1) -> int:
    """How the row axes of t [..., n, ..., *T] (all but dim and the len(T) = trailing last) split into the
    outer and inner group the kernels address with one stride each: the axes before dim | after dim
    when both merge (any contiguous tensor), else the first split point at which both do (e.g. dim 2
    of a [B, X, Y, H] field whose X and Y are swapped in memory: B | X), else the natural one (copy)."""
    rows = [a for a in range(t.dim() - trailing) if a != dim]
    for split in [dim] + [s for s in range(len(rows) + 1) if s != dim]:
        if _merges(t, rows[:split]) and _merges(t, rows[split:]):
            return split
    return dim


def as_rows(t: torch.Tensor, dim: int, split: int, trailing: int = 1) -> torch.Tensor:
    """t [..., n, ..., *T] as [outer, n, inner, *T]: the row axes in two groups (row_split) read in place
    through two strides -- a view of t, never a copy for a 2D field [B, X, Y, H] in any memory order; a
    copy (reshape) only when a group's axes cannot merge."""
    v = t.permute(_row_order(t.dim(), dim, split, trailing))
    end = v.dim() - trailing
    return v.reshape(math.prod(v.shape[:split]), v.shape[split], math.prod(v.shape[split + 1:end]), *v.shape[end:])


def from_rows(t4: torch.Tensor, shape: torch.Size, dim: int, split: int) -> torch.Tensor:
    """t4 [outer, n, inner, C] (as as_rows(x, dim, split) laid x out) as a tensor of x's shape with C
    channels: a view, the axes back in place (not contiguous when the split is not the natural one)."""
    order = _row_order(len(shape), dim, split, 1)
    v = t4.reshape([shape[a] for a in order[:-1]] + [t4.shape[-1]])
    return v.permute([order.index(a) for a in range(len(shape))])


def _complex_strides(spec: torch.Tensor) -> tuple[tuple[int, ...], bool]:
    """spec [P, modes, Q, C, 2] (real) -> ((outer, mode, inner, channel, part) strides, paired)."""
    strides = spec.stride()
    return strides, strides[3] == 2 and strides[4] == 1


def dft_spectrum_parts(spec: torch.Tensor) -> torch.Tensor:
    """The "dft" path's spectrum [P, 2K, Q, C] seen as [P, K, Q, C, 2] (re, im of mode k = rows 2k, 2k+1)."""
    P, M, Q, C = spec.shape
    return spec.view(P, M // 2, 2, Q, C).permute(0, 1, 3, 4, 2)


def _x3_method() -> str:
    return _choice("AMG_FAST_SPECTRAL_X3 (kernels.spectral_conv.X3_METHOD)", X3_METHOD, X3_METHODS)


def split_mixing(x_dtype: torch.dtype, device: torch.device | str | None = None) -> bool:
    """Whether the mixing of x_dtype inputs reads W as split TF32 planes: fp32 mode (fp32 intermediates at
    tf32x3 dots: fp32 x with TF32 off, or bf16 x without REDUCED_PRECISION_DOTS), this file's mixing kernel
    (MIX_METHOD gauss / four, or auto where it picks them for inputs on device) and X3_METHOD "split"."""
    dtype = acc_dtype(x_dtype)
    return (_x3_method() == "split" and _mix_method(work_dtype(x_dtype), device) != "torch" and dtype == torch.float32
            and not _bf16_operands(x_dtype) and _dots(dtype) == "tf32x3")


def weight_planes(weight: torch.Tensor, x_dtype: torch.dtype) -> torch.Tensor:
    """What the mixing reads of weight [K, H_in, H_out, 2] for inputs of x_dtype: [2, K, H_in, H_out] (real,
    imaginary planes) in x_dtype's accumulation dtype -- with WEIGHT_PLANES a contiguous copy (the mixing
    kernel's W tiles unit-stride; W is S/2 x H^2 x 2 values), else a view of weight (a copy only to change its
    dtype); always a view with MIX_METHOD "torch" (weight_blocks copies it anyway) -- or, when split_mixing,
    the split planes [2 P, K, H_in, H_out] fp32 (one launch: _mix_weight_planes_kernel; the Gauss product's
    P = 3 values c, d - c, c + d, the four products' P = 2 values c, d: hi planes, then lo planes), unless
    those would hold SPLIT_PLANES_LIMIT elements or more (the kernels' plane offsets are int32): then the
    plain planes."""
    return weight_planes_for_forward(weight, x_dtype, forward_copy=False)[0]


def weight_planes_for_forward(weight: torch.Tensor, x_dtype: torch.dtype,
                              forward_copy: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """(weight_planes(weight, x_dtype), the planes the forward's mixing reads): with split planes and
    forward_copy, the same values stored [2 P, K, H_out, H_in] (written by the same launch) and seen as
    [2 P, K, H_in, H_out], so that the forward's products X W read each W tile K-major (input channels
    contiguous: a TF32 wgmma takes its shared-memory operand only K-major, and the tile [H_in, H_out] as stored
    was loaded 4 bytes at a time, transposed on the way: 72 4-byte cp.async in the sm_90 SASS); the backward's
    X W^H reads the stored planes K-major already. Else the planes twice."""
    K, h_in, h_out, _ = weight.shape
    n, gauss = K * h_in * h_out, _mix_is_gauss()
    n_planes = 2 * (3 if gauss else 2)
    if split_mixing(x_dtype, weight.device) and n_planes * n < SPLIT_PLANES_LIMIT:
        planes = new_output((n_planes, K, h_in, h_out), dtype=torch.float32, device=weight.device)
        stored = new_output((n_planes, K, h_out, h_in), dtype=torch.float32, device=weight.device) if forward_copy \
            else planes
        if n:
            block = for_device(ELEMENTWISE_BLOCK, weight.device)
            wrap_triton(_mix_weight_planes_kernel)[(cdiv(n, block),)](
                weight, planes, stored, n, h_in, h_out, *weight.stride(), GAUSS=gauss, TRANSPOSED_COPY=forward_copy,
                BLOCK=block)
        return planes, stored.transpose(2, 3) if forward_copy else planes
    planes = weight.permute(3, 0, 1, 2).to(acc_dtype(x_dtype))
    if WEIGHT_PLANES and _mix_method(work_dtype(x_dtype), weight.device) != "torch":
        planes = planes.contiguous()
    return planes, planes


# ---------------------------------------------------------------------------------------------
# Launchers
# ---------------------------------------------------------------------------------------------

def _transform(basis: torch.Tensor, inp: torch.Tensor, out_dtype: torch.dtype,
               round_out: bool = False) -> torch.Tensor:
    """out[p, m, q, n] = sum_j basis[m, j] inp[p, j, q, n]: inp [P, J, Q, N] (any strides) -> out [P, M, Q, N]
    (contiguous, out_dtype). DFT_GEMM "torch": one cuBLAS batched GEMM (inp reshaped to [P, J, Q N], a copy
    only when Q and N do not merge) in basis.dtype, then cast. round_out: out (a spectrum the next
    stage's dots read) rounded to TF32 when those are plain TF32 (plain_tf32; the Triton kernel only)."""
    P, J, Q, N = inp.shape
    M = basis.shape[-2]
    split = basis.dim() == 3  # the TF32 planes (hi, lo) of fp32 mode's bases (spectral_bases)
    if _dft_gemm(torch.float32 if split else basis.dtype, inp.device) == "torch":
        dense = basis[0] + basis[1] if split else basis  # hi + lo: the basis rounded to fp32
        return torch.matmul(dense, inp.reshape(P, J, Q * N).to(dense.dtype)).view(P, M, Q, N).to(out_dtype)
    out = new_output((P, M, Q, N), dtype=out_dtype, device=inp.device)
    dots = "tf32x3" if split else _dots(basis.dtype)
    cfg = _tiles("transform", inp.device, dots, basis.dtype, M=M, J=J, N=N)
    grid = (P * Q, cdiv(M, cfg["BLOCK_M"]) * cdiv(N, cfg["BLOCK_N"]))
    wrap_triton(_spectral_conv1d_transform_kernel)[grid](
        basis, inp, out, M, J, N, Q, basis.stride(-2), basis.stride(-1), basis.stride(0) if split else 0,
        *inp.stride(), *out.stride(), DOT_PRECISION=dots, ROUND_OUT=round_out and plain_tf32(out_dtype),
        SPLIT=split, ROUND_IN=cfg["X_LEFT"] and not split and plain_tf32(basis.dtype), **cfg,
    )
    return out


def _mix(spec: torch.Tensor, planes: torch.Tensor, out: torch.Tensor, K: int, S: int, adjoint: bool,
         bf16_operands: bool, round_out: bool = False, for_irfft: bool = True,
         blocks: torch.Tensor | None = None) -> torch.Tensor | None:
    """out[p, k, q, :] = spec[p, k, q, :] @ W[k] (adjoint: @ W[k]^H) for k < K, zeros for the other modes of
    out, imaginary parts of modes 0 and S/2 zeroed. spec [P, >=K, Q, C_in, 2], out [P, modes, Q, C_out, 2]
    (real views of complex values, any strides), planes = weight_planes(...): [2, K, H_in, H_out], or fp32
    mode's split planes [2 P, K, H_in, H_out] for the current MIX_METHOD (P = 3 Gauss, 2 four). round_out: out
    rounded to TF32 when plain_tf32 (the "dft" synthesis's dots read it; not irfft's input; the Triton kernel
    only). for_irfft False (the "dft" synthesis reads out): the cuBLAS mixing leaves those imaginary parts as the
    product gives them (no zeroing launches; the synthesis basis is exactly 0 there), the kernel zeroes them at
    no cost. The cuBLAS mixing returns W's real blocks when the backward can reuse them, else None; blocks (the
    forward's, with adjoint): reused transposed where they fit (_mix_torch)."""
    # "auto" is resolved at each call, and the TF32 setting it reads may change between a forward and its
    # backward: split planes, which weight_planes made for our kernel, go to our kernel
    auto_split = MIX_METHOD == "auto" and planes.shape[0] != 2
    if _mix_method(_mix_work(spec, bf16_operands), spec.device) == "torch" and not auto_split:
        if planes.shape[0] != 2:
            raise ValueError(f"the cuBLAS mixing takes W's real and imaginary planes [2, K, H_in, H_out], got "
                             f"{tuple(planes.shape)}: split planes, made by weight_planes for the mixing kernel")
        return _mix_torch(spec, planes, out, K, S, adjoint, for_irfft, blocks)
    P, _, Q, C_in, _ = spec.shape
    C_out = out.shape[3]
    s_wp, s_wk, s_wi, s_wo = planes.stride()
    if adjoint:
        s_wi, s_wo = s_wo, s_wi
    in_strides, paired_in = _complex_strides(spec)
    out_strides, paired_out = _complex_strides(out)
    split = planes.shape[0] > 2  # weight_planes' split planes (fp32 mode): hi planes, then as many lo planes
    if split and planes.shape[0] != 2 * (3 if _mix_is_gauss() else 2):
        raise ValueError(f"planes {tuple(planes.shape)} are split planes of another mixing than MIX_METHOD "
                         f"{_mix_method()!r} (6 for gauss, 4 for four): made before the switch changed")
    dots = "tf32" if split else _operand_precision(planes.dtype, bf16_operands)
    cfg = _tiles("mix", spec.device, "split" if split else dots, torch.bfloat16 if bf16_operands else planes.dtype,
                 R=P * Q, I=C_in, O=C_out)
    grid = (out.shape[1] * cdiv(P * Q, cfg["BLOCK_R"]) * cdiv(C_out, cfg["BLOCK_O"]),)
    wrap_triton(_spectral_conv1d_mix_kernel)[grid](
        spec, planes, out, P * Q, Q, K, C_in, C_out, S // 2 if S % 2 == 0 else -1,
        *in_strides, s_wp, s_wk, s_wi, s_wo, *out_strides,
        CONJ=adjoint, GAUSS=_mix_is_gauss(), PAIRED_IN=paired_in, PAIRED_OUT=paired_out,
        BF16_OPERANDS=bf16_operands, DOT_PRECISION=dots,
        ROUND_OUT=round_out and plain_tf32(out.dtype) and not bf16_operands, SPLIT=split,
        W_LO=planes.shape[0] // 2 if split else 0, **cfg,
    )
    return None


def _dweight(spec_x: torch.Tensor, spec_dy: torch.Tensor, K: int, S: int, weight_dtype: torch.dtype,
             bf16_operands: bool) -> torch.Tensor:
    """dW [K, H_in, H_out, 2] = a_k X[k]^H dY[k] from X [P, >=K, Q, H_in, 2] and dY [P, >=K, Q, H_out, 2]
    (real views of complex values; dY = A dy, before the a_k of G^T). SPLIT_R > 1: that many partial
    sums over row ranges (more programs when K x tiles is small), added by torch."""
    if _mix_method(_mix_work(spec_x, bf16_operands), spec_x.device) == "torch":
        return _dweight_torch(spec_x, spec_dy, K, S, weight_dtype)
    P, _, Q, h_in, _ = spec_x.shape
    h_out = spec_dy.shape[3]
    R = P * Q
    acc = acc_dtype(spec_x.dtype)
    dots = _operand_precision(acc, bf16_operands)
    cfg = _tiles("dweight", spec_x.device, dots, torch.bfloat16 if bf16_operands else acc, R=R, I=h_in, O=h_out)
    split = max(1, min(int(cfg.pop("SPLIT_R")), cdiv(R, cfg["BLOCK_R"])))
    rows_per_split = cdiv(cdiv(R, split), cfg["BLOCK_R"]) * cfg["BLOCK_R"]
    split = cdiv(R, rows_per_split)
    dw = new_output((split, K, h_in, h_out, 2), dtype=weight_dtype if split == 1 else acc, device=spec_x.device)
    x_strides, paired_x = _complex_strides(spec_x)
    y_strides, paired_y = _complex_strides(spec_dy)
    grid = (K, cdiv(h_in, cfg["BLOCK_I"]) * cdiv(h_out, cfg["BLOCK_O"]), split)
    wrap_triton(_spectral_conv1d_dweight_kernel)[grid](
        spec_x, spec_dy, dw, R, Q, h_in, h_out, S // 2 if S % 2 == 0 else -1, rows_per_split,
        *x_strides, *y_strides, *dw.stride(),
        GAUSS=_mix_is_gauss(), PAIRED_X=paired_x, PAIRED_Y=paired_y, BF16_OPERANDS=bf16_operands,
        DOT_PRECISION=dots, **cfg,
    )
    return dw[0] if split == 1 else dw.sum(0).to(weight_dtype)


def _part_axes(paired: bool) -> tuple[int, int]:
    """Axes of (channel, part) in [.., C, 2] for a row laid out (re, im) per channel (paired) or as all real
    parts, then all imaginary parts (the order read from the (channel, part) axes: itself or swapped)."""
    return (0, 1) if paired else (1, 0)


def mode_rows(spec: torch.Tensor, K: int) -> tuple[torch.Tensor, bool]:
    """spec [P, modes, Q, C, 2] (a real view of complex values) -> (its modes < K as real rows [K, P * Q, 2C],
    paired): each row (re, im) per channel when the spectrum stores them adjacent with channels at stride 2
    (paired: a channels-innermost complex tensor, e.g. the "fft" path's mixed buffer), else all real parts then
    all imaginary parts (the "dft" planes; rfft's output, whose modes are innermost). A view when the rows and
    the (channel, part) axes merge into one stride each (the "dft" spectrum with Q = 1: the 1D models), else a
    copy (rfft's output on cuFFT and x86 CPU builds: its channels are 2 (S//2+1) values apart)."""
    P, _, Q, C, _ = spec.shape
    paired = _complex_strides(spec)[1]
    first, second = (3 + a for a in _part_axes(paired))
    return spec[:, :K].permute(1, 0, 2, first, second).reshape(K, P * Q, 2 * C), paired


def _flat_view(t: torch.Tensor, shape: tuple[int, ...]) -> torch.Tensor | None:
    """t.view(shape), or None where t's strides do not allow a view."""
    try:
        return t.view(shape)
    except RuntimeError:
        return None


def weight_blocks_ref(planes: torch.Tensor, adjoint: bool, paired_in: bool, paired_out: bool,
                      dtype: torch.dtype) -> torch.Tensor:
    """planes [2, K, H_in, H_out] (W's real, imaginary planes) -> [K, 2 H_in, 2 H_out] in dtype: W[k] (W[k]^H
    when adjoint) as the real matrix that maps a row of mode_rows laid out as paired_in to one laid out as
    paired_out, [[Wr, Wi], [-Wi, Wr]] by (input part, output part): re = a c - b d, im = a d + b c. The torch
    reference of weight_blocks."""
    wr, wi = planes[0], planes[1]
    if adjoint:  # W^H = Wr^T - i Wi^T
        wr, wi = wr.transpose(1, 2), -wi.transpose(1, 2)
    K, h_in, h_out = wr.shape
    quads = torch.stack([wr, wi, -wi, wr], -1).view(K, h_in, h_out, 2, 2)  # [K, I, O, 2 in, 2 out]
    order = [0] + [(1, 3)[a] for a in _part_axes(paired_in)] + [(2, 4)[a] for a in _part_axes(paired_out)]
    return quads.permute(order).reshape(K, 2 * h_in, 2 * h_out).to(dtype)


# _weight_blocks_kernel's [tile, tile] tile of W (H_in x H_out) a program, per device type: CPU (Triton's interpreter:
# a cost per program, ~7 ms for a 32 x 32 tile) the large one (at K = 64, H = 128 the GPU's 1024 programs took 7.0-7.3 s
# in the interpreter). _dweight_parts_kernel's complex weights a program: _common.ELEMENTWISE_BLOCK.
WEIGHT_TILE = {"cuda": 32, "cpu": 128}


def weight_blocks(planes: torch.Tensor, adjoint: bool, paired_in: bool, paired_out: bool,
                  dtype: torch.dtype) -> torch.Tensor:
    """weight_blocks_ref's matrices, contiguous, in one launch (_weight_blocks_kernel) where the reference
    takes three (neg, stack and the reordering copy; four for W^H)."""
    _, K, h_in, h_out = planes.shape
    out = new_output((K, 2 * h_in, 2 * h_out) if not adjoint else (K, 2 * h_out, 2 * h_in), dtype=dtype,
                     device=planes.device)
    if K * h_in * h_out:
        tile = for_device(WEIGHT_TILE, planes.device)
        grid = (K, cdiv(h_in, tile), cdiv(h_out, tile))
        wrap_triton(_weight_blocks_kernel)[grid](
            planes, out, h_in, h_out, *planes.stride(), ADJOINT=adjoint, PAIRED_IN=paired_in,
            PAIRED_OUT=paired_out, BLOCK_I=tile, BLOCK_O=tile)
    return out


def _nyquist(S: int) -> int:
    """The Nyquist mode S/2 of an even S, -1 for an odd S (no such mode): the kernels' NYQUIST argument."""
    return S // 2 if S % 2 == 0 else -1


def dweight_parts_ref(prod: torch.Tensor, S: int, paired_x: bool, paired_dy: bool,
                      weight_dtype: torch.dtype) -> torch.Tensor:
    """prod = X^T dY [K, 2 H_in, 2 H_out] over mode_rows (rows laid out as paired_x, columns as paired_dy) ->
    dW [K, H_in, H_out, 2] in weight_dtype: a_k X^H dY = a_k ((Xr^T dYr + Xi^T dYi) + i (Xr^T dYi - Xi^T dYr)),
    a_k = 1 for modes 0 and S/2, else 2. The torch reference of dweight_parts."""
    K, two_in, two_out = prod.shape
    in_shape = (two_in // 2, 2) if paired_x else (2, two_in // 2)
    out_shape = (two_out // 2, 2) if paired_dy else (2, two_out // 2)
    order = [0] + [1 + a for a in _part_axes(paired_x)] + [3 + a for a in _part_axes(paired_dy)]
    blocks = prod.view(K, *in_shape, *out_shape).permute(order)  # [K, H_in, 2 (x part), H_out, 2 (dy part)]
    re = blocks[:, :, 0, :, 0] + blocks[:, :, 1, :, 1]
    im = blocks[:, :, 0, :, 1] - blocks[:, :, 1, :, 0]
    a_k = torch.full((K,), 2.0, dtype=prod.dtype, device=prod.device)
    a_k[[mode for mode in (0, _nyquist(S)) if 0 <= mode < K]] = 1.0
    return (torch.stack([re, im], -1) * a_k[:, None, None, None]).to(weight_dtype)


def dweight_parts(prod: torch.Tensor, S: int, paired_x: bool, paired_dy: bool,
                  weight_dtype: torch.dtype) -> torch.Tensor:
    """dweight_parts_ref's dW in one launch (_dweight_parts_kernel) where the reference takes four or more."""
    K, two_in, two_out = prod.shape
    prod = prod.contiguous()
    dw = new_output((K, two_in // 2, two_out // 2, 2), dtype=weight_dtype, device=prod.device)
    n = K * (two_in // 2) * (two_out // 2)
    if n:
        block = for_device(ELEMENTWISE_BLOCK, prod.device)
        wrap_triton(_dweight_parts_kernel)[(cdiv(n, block),)](
            prod, dw, n, two_in // 2, two_out // 2, _nyquist(S), PAIRED_X=paired_x, PAIRED_DY=paired_dy,
            BLOCK=block)
    return dw


def _bmm_acc(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b (batched), fp32 for bf16 / fp16 operands (torch.bmm's out_dtype, torch >= 2.8, CUDA only:
    half-precision operands, fp32 accumulation and result; on CPU, whose bmm has no out_dtype, an fp32 copy)."""
    if a.dtype in (torch.bfloat16, torch.float16):
        return torch.bmm(a, b, out_dtype=torch.float32) if a.is_cuda else torch.bmm(a.float(), b.float())
    return torch.bmm(a, b)


def _mix_torch(spec: torch.Tensor, planes: torch.Tensor, out: torch.Tensor, K: int, S: int, adjoint: bool,
               for_irfft: bool, blocks: torch.Tensor | None = None) -> torch.Tensor | None:
    """_mix with MIX_METHOD "torch": one torch.bmm over the modes, rows [K, P Q, 2 C_in] x weight_blocks, written
    into out's modes < K through a view of out when its rows merge (else through a copy), its other modes zeroed.
    for_irfft: the imaginary parts of modes 0 and S/2 zeroed too, as the kernel does (irfft's input; cuFFT's C2R
    reads them, pytorch#154496); else (the "dft" synthesis, whose basis G is exactly 0 on those parts:
    spectral_bases) left as the product gives them. Computes in spec's dtype (autocast is off inside the ops:
    amg_fast.ops._backend.run_op).

    Rows and out both laid out as all real parts, then all imaginary parts (the "dft" path): W^H's blocks are
    W's transposed, so the forward returns its blocks and the backward, given them as blocks, multiplies by
    their transpose (cuBLAS's transposed operand; no launch; 16 K H^2 bytes kept a layer in fp32). Else None, and the
    blocks are built here (the "fft" path: rfft's rows are not paired, the irfft buffer is)."""
    rows, paired_in = mode_rows(spec, K)
    P, modes, Q, C_out, _ = out.shape
    paired_out = _complex_strides(out)[1]
    symmetric = not paired_in and not paired_out
    reuse = (adjoint and symmetric and blocks is not None and blocks.numel() > 0
             and blocks.dtype == rows.dtype and blocks.shape == (K, 2 * C_out, rows.shape[2]))
    if reuse:
        blocks = blocks.transpose(1, 2)
    else:
        blocks = weight_blocks(planes, adjoint, paired_in, paired_out, rows.dtype)
    first, second = (3 + a for a in _part_axes(paired_out))
    target = out[:, :K].permute(1, 0, 2, first, second)  # [K, P, Q, C, 2] or [K, P, Q, 2, C]
    flat = _flat_view(target, (K, P * Q, 2 * C_out)) if out.dtype == rows.dtype and not tracing() else None
    if flat is not None:  # CUDA (ATen baddbmm_out_cuda_impl): cuBLAS writes flat itself, ldc = its row stride and
        torch.bmm(rows, blocks, out=flat)  # batch stride = its mode stride (a layout cuBLAS refuses: clone, copy back)
    else:  # rows that do not merge into one stride: through a copy
        target.copy_(torch.bmm(rows, blocks).view(target.shape))
    if modes > K:
        out[:, K:].zero_()
    if for_irfft:
        out[:, 0, ..., 1].zero_()  # a real signal's spectrum (irfft input)
        if S % 2 == 0 and S // 2 < K:
            out[:, S // 2, ..., 1].zero_()
    return blocks if symmetric and not adjoint else None


def _dweight_torch(spec_x: torch.Tensor, spec_dy: torch.Tensor, K: int, S: int,
                   weight_dtype: torch.dtype) -> torch.Tensor:
    """_dweight with MIX_METHOD "torch": one torch.bmm over the modes, X^T dY of mode_rows ([K, 2 H_in, 2 H_out],
    fp32 for bf16 spectra), then a_k X^H dY from its blocks (dweight_parts, one launch)."""
    x_rows, paired_x = mode_rows(spec_x, K)
    dy_rows, paired_dy = mode_rows(spec_dy, K)
    return dweight_parts(_bmm_acc(x_rows.transpose(1, 2), dy_rows), S, paired_x, paired_dy, weight_dtype)


def _spectrum(x4: torch.Tensor, analysis: torch.Tensor, fft: bool) -> torch.Tensor:
    """x4 [P, S, Q, C] -> its truncated spectrum as the kernels read it, [P, modes, Q, C, 2] (a real view):
    fft: rfft's complex output, all S//2+1 modes; dft: the analysis GEMM's [P, 2K, Q, C] buffer."""
    if fft:
        return torch.view_as_real(torch.fft.rfft(x4.to(acc_dtype(analysis.dtype)), dim=1, norm="ortho"))
    return dft_spectrum_parts(_transform(analysis, x4, analysis.dtype, round_out=True))


def _mix_and_synthesize(spec: torch.Tensor, planes: torch.Tensor, synthesis: torch.Tensor, S: int, C_out: int,
                        adjoint: bool, out_dtype: torch.dtype, fft: bool, bf16_operands: bool,
                        blocks: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The mixing (W, or W^H when adjoint) of spec [P, modes, Q, C_in, 2] and the synthesis -> ([P, S, Q, C_out]
    in out_dtype, the cuBLAS mixing's blocks for the backward or None: _mix). fft: the mixing writes the
    zero-padded complex buffer irfft takes."""
    P, _, Q = spec.shape[:3]
    K = planes.shape[1]
    if fft:
        mixed = new_output((P, S // 2 + 1, Q, C_out, 2), dtype=spec.dtype, device=spec.device)
        kept = _mix(spec, planes, mixed, K, S, adjoint, bf16_operands, blocks=blocks)
        y = torch.fft.irfft(torch.view_as_complex(mixed), n=S, dim=1, norm="ortho")
        return y.to(out_dtype), kept
    mixed = new_output((P, 2 * K, Q, C_out), dtype=spec.dtype, device=spec.device)
    kept = _mix(spec, planes, dft_spectrum_parts(mixed), K, S, adjoint, bf16_operands, round_out=True,
                for_irfft=False, blocks=blocks)
    return _transform(synthesis, mixed, out_dtype), kept


def _bf16_operands(x_dtype: torch.dtype) -> bool:
    return REDUCED_PRECISION_DOTS and x_dtype == torch.bfloat16


def spectral_conv1d_fwd(x: torch.Tensor, planes: torch.Tensor, analysis: torch.Tensor, synthesis: torch.Tensor,
                        fft: bool, dim: int, split: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """x [..., S, ..., H_in] (S at dim >= 0, any strides; rows grouped by split = row_split(x, dim)),
    planes = weight_planes(weight, x.dtype) (W as the mixing reads it), bases from spectral_bases(S, K, work
    dtype) -> (y like x with H_out channels in x.dtype, the spectrum of x [P, modes, Q, H_in, 2] kept for
    the backward, the cuBLAS mixing's W blocks [K, 2 H_in, 2 H_out] that the backward reuses transposed, or an
    empty tensor)."""
    S, h_out = x.shape[dim], planes.shape[3]
    spec_x = _spectrum(as_rows(x, dim, split), analysis, fft)
    y, blocks = _mix_and_synthesize(spec_x, planes, synthesis, S, h_out, False, x.dtype, fft,
                                    _bf16_operands(x.dtype))
    return from_rows(y, x.shape, dim, split), spec_x, spec_x.new_empty((0,)) if blocks is None else blocks


def spectral_conv1d_bwd(dy: torch.Tensor, spec_x: torch.Tensor, planes: torch.Tensor, analysis: torch.Tensor,
                        synthesis: torch.Tensor, x_dtype: torch.dtype, weight_dtype: torch.dtype, fft: bool,
                        dim: int, split: int, blocks: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """dy like y (any strides) and the forward's spectrum, planes, bases, row split and W blocks (or None / empty)
    -> (dx like x in x_dtype, dweight [K, H_in, H_out, 2] in weight_dtype): dx = G ((A dy) W^H), dW = a_k X^H
    (A dy)."""
    S, h_in = dy.shape[dim], planes.shape[2]
    bf16 = _bf16_operands(x_dtype)
    spec_dy = _spectrum(as_rows(dy, dim, split), analysis, fft)  # rows in the forward's order (dweight pairs them)
    dweight = _dweight(spec_x, spec_dy, planes.shape[1], S, weight_dtype, bf16)
    dx, _ = _mix_and_synthesize(spec_dy, planes, synthesis, S, h_in, True, x_dtype, fft, bf16, blocks)
    return from_rows(dx, dy.shape, dim, split), dweight
