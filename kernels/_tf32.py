"""TF32 rounding, on the device (inside kernels) and on the host: the one definition every kernel uses;
and the split of fp32 weights into TF32 planes for 3xTF32 products (split_tf32), transposed on the way where
a kernel needs the other layout (transposed_weights without the split), or cast to another dtype in the same one
launch (cast_weights: bf16 autocast's weights, formed once for a layer's GEMMs).

TF32 keeps fp32's 8 exponent bits and 10 of its 23 explicit mantissa bits. A plain-TF32 MMA on Hopper
drops an fp32 operand's low 13 bits (truncation); a value rounded here first is read exactly, and
x - round_tf32(x) is exact in fp32 (the "lo" part of a 3xTF32 product: kernels/ffn_gemm.py, the gate
kernels). Triton's own tf32x3 dot splits both operands in registers and writes a shared-memory operand's
parts back every K step; with the weight split once per pass into planes in memory (hi = round_tf32(w),
lo = w - hi) only the activation tile is split in registers (split_dot).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from amg_fast.kernels._common import (ELEMENTWISE_BLOCK, cdiv, dot_operand, flat_views, for_device, new_output,
                                     wrap_triton)

__all__ = ["round_tf32", "round_to_tf32", "split_tf32", "transposed_weights", "cast_weights", "dot_operands",
           "split_dot", "store_split"]



@triton.jit
def round_tf32(x):
    """fp32 tile x rounded to TF32's 10 explicit mantissa bits, to nearest with ties away from zero (PTX
    cvt.rna.tf32.f32): a plain-TF32 MMA then reads it exactly. Rounding instead of letting the MMA truncate
    halves an operand's error and removes its bias (round_to_tf32 is the host version). NaN stays NaN: the
    integer add would carry a GPU's NaN (0x7FFFFFFF) into -0.0 and a low-payload NaN into inf."""
    bits = x.to(tl.int32, bitcast=True)
    return tl.where(x == x, ((bits + 0x1000) & -8192).to(tl.float32, bitcast=True), x)


@triton.jit
def _tf32_dot(a, b, acc):
    return tl.dot(a, b, acc, input_precision="tf32", out_dtype=acc.dtype)


@triton.jit
def split_dot(x, w, w_lo, acc, SPLIT: tl.constexpr, DOT_PRECISION: tl.constexpr, X_RIGHT: tl.constexpr = False):
    """acc + x @ w (X_RIGHT: acc + w @ x). SPLIT (fp32 mode): w, w_lo are a weight tile's TF32 planes
    (split_tf32) and x is split here, three TF32 products x_lo w + x_hi w_lo + x_hi w (small terms first; the
    dropped x_lo w_lo is ~2^-22 relative); else one dot at DOT_PRECISION (w_lo unused)."""
    if SPLIT:
        x_hi = round_tf32(x)
        x_lo = x - x_hi
        if X_RIGHT:
            acc = _tf32_dot(w, x_lo, acc)
            acc = _tf32_dot(w_lo, x_hi, acc)
            acc = _tf32_dot(w, x_hi, acc)
        else:
            acc = _tf32_dot(x_lo, w, acc)
            acc = _tf32_dot(x_hi, w_lo, acc)
            acc = _tf32_dot(x_hi, w, acc)
    elif X_RIGHT:
        acc = tl.dot(w, x, acc, input_precision=DOT_PRECISION, out_dtype=acc.dtype)
    else:
        acc = tl.dot(x, w, acc, input_precision=DOT_PRECISION, out_dtype=acc.dtype)
    return acc


@triton.jit
def store_split(hi_ptrs, lo_ptrs, v, mask):
    """Store v's TF32 parts: hi = round_tf32(v) at hi_ptrs, lo = v - hi (exact) at lo_ptrs."""
    hi = round_tf32(v)
    tl.store(hi_ptrs, hi, mask=mask)
    tl.store(lo_ptrs, v - hi, mask=mask)


@triton.jit
def _weight_planes_kernel(src1_ptr, dst1_ptr, n1, rows1, src2_ptr, dst2_ptr, n2, rows2, src3_ptr, dst3_ptr, n3,
                          rows3, src4_ptr, dst4_ptr, n4, rows4, SPLIT: tl.constexpr, TRANSPOSE: tl.constexpr,
                          BLOCK: tl.constexpr):
    """For up to four flat tensors (program axis 1 picks one) of n elements: dst[:n] = src (converted to dst's
    dtype by the store, rounding to nearest even), or with TRANSPOSE src [rows, n / rows] transposed (dst
    [n / rows, rows] row-major; rows = 1 copies as is); SPLIT: in TF32 parts instead, hi = round_tf32 at dst[:n],
    lo = the rest at dst[n:2n]."""
    which = tl.program_id(1)
    src = tl.where(which == 0, src1_ptr, tl.where(which == 1, src2_ptr, tl.where(which == 2, src3_ptr, src4_ptr)))
    dst = tl.where(which == 0, dst1_ptr, tl.where(which == 1, dst2_ptr, tl.where(which == 2, dst3_ptr, dst4_ptr)))
    n = tl.where(which == 0, n1, tl.where(which == 1, n2, tl.where(which == 2, n3, n4)))
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    if TRANSPOSE:  # dst element (c, r) of [cols, rows] is src element (r, c) of [rows, cols]
        rows = tl.where(which == 0, rows1, tl.where(which == 1, rows2, tl.where(which == 2, rows3, rows4)))
        src_offs = (offs % rows) * (n // rows) + offs // rows
    else:
        src_offs = offs
    v = tl.load(src + src_offs, mask=mask, other=0.0)
    if SPLIT:
        store_split(dst + offs, dst + n + offs, v, mask)
    else:
        tl.store(dst + offs, v, mask=mask)


MAX_WEIGHTS = 4  # slots of _weight_planes_kernel


def _weight_planes(weights: tuple[torch.Tensor, ...], split: bool, transpose: bool | tuple[bool, ...],
                   name: str, dtype: torch.dtype | None = None) -> torch.Tensor:
    """split_tf32's, transposed_weights' and cast_weights' one launch: the weights (each transposed where
    transpose says: one flag for all, or one a weight) one after another in one flat buffer, as TF32 planes
    [hi | lo] each (fp32) with split, else in dtype (None: the first weight's; the others cast to that first)."""
    if not 1 <= len(weights) <= MAX_WEIGHTS:
        raise ValueError(f"{name} takes 1 to {MAX_WEIGHTS} weights, got {len(weights)}")
    flags = (transpose,) * len(weights) if isinstance(transpose, bool) else tuple(transpose)
    if len(flags) != len(weights) or not all(isinstance(f, bool) for f in flags):
        raise ValueError(f"{name}: transpose must be a bool or one bool a weight ({len(weights)}), got {transpose!r}")
    if any(f and w.dim() != 2 for f, w in zip(flags, weights)):
        raise ValueError(f"{name}(transpose) takes 2-D weights, got shapes {[tuple(w.shape) for w in weights]}")
    source = torch.float32 if split else weights[0].dtype
    dtype = torch.float32 if split else dtype or source
    sizes = [w.numel() for w in weights]
    per = 2 if split else 1
    out = new_output((per * sum(sizes),), dtype=dtype, device=weights[0].device)
    if sum(sizes):
        # Each slot writes its own, non-overlapping slice, and an unused slot (never picked) an empty tensor:
        # under torch.compile, functionalization copies every written argument back in order, so two slots
        # aliasing one view would overwrite the first's planes with the second's untouched copy.
        args, offset = [], 0
        for w, n, flag in zip(weights, sizes, flags):
            args += [w.contiguous().to(source), out[offset:offset + per * n], n, max(1, w.shape[0]) if flag else 1]
            offset += per * n
        for _ in range(MAX_WEIGHTS - len(weights)):
            args += [out.new_empty(0, dtype=source), out.new_empty(0), 0, 1]
        block = for_device(ELEMENTWISE_BLOCK, weights[0].device)
        wrap_triton(_weight_planes_kernel)[(cdiv(max(sizes), block), len(weights))](
            *args, SPLIT=split, TRANSPOSE=any(flags), BLOCK=block)
    return out


def split_tf32(*weights: torch.Tensor, transpose: bool | tuple[bool, ...] = False) -> torch.Tensor:
    """Up to four weights' TF32 planes in one flat fp32 buffer, [hi1 | lo1 | hi2 | lo2 | ...] (hi = w rounded
    to TF32, lo = w - hi: hi + lo == w exactly; weight i's hi plane starts at 2 (n_1 + ... + n_{i-1})), in one
    launch; a weight of another dtype is cast to fp32 first (as the kernels cast a weight tile to the
    activations' dtype). transpose: the planes of each (2-D) weight's transpose, w^T made row-major; or one flag
    a weight (a weight twice, as is and transposed: the feed-forward's forward and backward operands)."""
    return _weight_planes(weights, True, transpose, "split_tf32")


def transposed_weights(*weights: torch.Tensor) -> torch.Tensor:
    """Up to four 2-D weights' transposes, each row-major, one after another in one flat buffer of the first
    weight's dtype ([w1^T | w2^T | ...]), in one launch."""
    return _weight_planes(weights, False, True, "transposed_weights")


def cast_weights(*weights: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Up to four weights in dtype, one after another in one flat buffer ([w1 | w2 | ...], each row-major), in one
    launch, rounded to nearest even as torch's .to(dtype); a weight of another dtype than the first is cast to the
    first's on the host first. Where bf16 autocast cast a layer's fp32 weights one kernel each (and their
    gradients back), the feed-forward casts all four, and their gradients, in one (amg_fast.ops.ffn)."""
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"cast_weights: dtype must be a floating-point torch.dtype, got {dtype!r}")
    return _weight_planes(weights, False, False, "cast_weights", dtype)


def dot_operands(dtype: torch.dtype, *weights: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Up to four weights as dot operands beside activations of dtype (_common.dot_operand), the ones of another
    dtype (fp32 weights under bf16 autocast) cast together in one launch (cast_weights), as views."""
    if sum(w.dtype != dtype for w in weights) < 2:
        return tuple(dot_operand(w, dtype) for w in weights)
    return flat_views(cast_weights(*weights, dtype=dtype), weights)


def round_to_tf32(t: torch.Tensor) -> torch.Tensor:
    """fp32 t rounded to TF32's 10 mantissa bits, to nearest with ties away from zero; NaN kept (as round_tf32)."""
    t = t.contiguous()
    return torch.where(t.isnan(), t, ((t.view(torch.int32) + 0x1000) & -8192).view(torch.float32))
