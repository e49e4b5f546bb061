"""Triton kernels for the adaptive memory gate (op: amg_fast.ops.gate), optionally with the S4D memory's
readout folded in front of it (op: amg_fast.ops.readout_gate).

    z      = GLU(a W_o^T + b_o)                 READOUT only: a [M, H], W_o [2H, H], b_o [2H];
           = p1 * sigmoid(p2), p1, p2 the halves   GLU(p) = p[:, :H] * sigmoid(p[:, H:]) (F.glu)
    logits = z @ w_z.T + h @ w_h.T + b          h, z [M, H] (rows = all leading dims), w_z, w_h [H, H]
    s      = sigmoid(logits)
    g      = s * chi[row // rows_per_batch]      chi 0-dim (broadcast) or [B]; FREQ: chi = sigmoid(w1 v + b_omega)
    out    = g * z + (1 - g) * h                 from v = log(omega + eps) (the frequency gate)

Tiling: one program owns BLOCK_M rows and *all* H output columns (H padded to a power of two
BLOCK_H and masked), so the gate is applied and out written once, with no logits in HBM. The products
reduce over H in BLOCK_K chunks (H <= GATE_MAX_H = 256). With READOUT (H <= READOUT_MAX_H = 128: a
[BLOCK_M, BLOCK_H] tile of a stays in registers) z is formed BLOCK_K columns at a time, each chunk
going straight into the logits' product and out to a buffer of this program's rows (the forward's out,
the backward's saved z), read back after a barrier: full-width z, p1 and sigmoid(p2) are never live
through the dots (in fp32 mode, tf32x3, they spilled 1.4 KB / 3.7 KB a thread when they were, sm_90).
G_MEAN: instead of g [M, H] each program writes the sum of its g times
1 / (M H), so the mean gate (all AMGFNO records of g) is one small sum and g never reaches HBM.

Backward, per row tile (_gate_fusion_bwd_kernel; nothing stored by the forward, no atomics):
  recompute (z,) logits -> s, g; dg = dout (z - h) + dg_ext; dlogits = dg chi s (1 - s), written
  once (fp32 / fp64) for the weight gradients; dchi per row (FREQ: d(chi's logit) and its product
  with v), written for the reduction; dz = dout g + dlogits @ w_z, dh = dout (1 - g) + dlogits @ w_h
  (after a barrier, dlogits is read back in BLOCK_N column chunks -- Triton cannot slice a register
  tile -- instead of recomputing the logits); READOUT then, BLOCK_K columns of z at a time (dz parked
  in dp's first half, p1 and p2 recomputed from a): dp1 = dz sigmoid(p2), dp2 = dz p1 sigmoid'(p2),
  da += dp1 W_o1 + dp2 W_o2; z (written by the recomputation) and dp = [dp1 | dp2] are kept for the
  readout's weight gradient.
Weight gradients (_weight_grad_kernel, a split-K GEMM over the rows): per group of rows the partial
sums of dW = dY^T [X1 | X2] and of db = colsum(dY) (and of extra per-row columns: dchi) into one
[groups, P] buffer, reduced by one torch sum: dW_z, dW_h from (dlogits; z, h), dW_o from (dp; a).
Deterministic, on tensor cores (tf32x3 in fp32). With fp32 activations the plain gate's two go to cuBLAS
instead (kernels.limits.wgrad_method, AMG_FAST_WGRAD; ops/gate.py): both operands are row-major, so the
reduction runs along their strided axis, which a TF32 wgmma does not take from shared memory (see limits.py).
The cuBLAS method (kernels.limits.gate_method, AMG_FAST_GATE_METHOD=cublas; fp32 / fp64 activations): the logits
and the backward's dlogits w_z, dlogits w_h by torch GEMMs, and only the elementwise work here, one pass each
way (_gate_cublas_fwd_kernel, _gate_cublas_bwd_kernel: the fused kernels' tails, _store_gate and
_gate_grad_terms); the forward's logits are kept for the backward (gate_cublas_fwd, gate_cublas_grads).

Precision: tl.dot inputs are h's dtype (weights are cast to it in-kernel, so fp32 weights work
with bf16 activations); accumulation is fp32, fp64 for fp64 inputs. fp32 dots: see _common.dot_precision.
In fp32 mode (tf32x3) the launchers split w_z, w_h (and W_o) once per call into TF32 planes in memory
(_tf32.split_tf32, one launch; AMG_FAST_GATE_X3=dot: Triton's tf32x3 dot instead) and the kernels split
only the activation tiles in registers (_tf32.split_dot), the readout's a then read again BLOCK_K columns
at a time rather than split full-width: compiled for sm_90 by triton 3.6, the memory gate's 136 / 304 B
a thread of spills (fwd / bwd; tf32x3 splits every operand in three) went to none.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from amg_fast.kernels._common import (acc_dtype, cdiv, dot_operand, dot_precision, for_device, new_output,
                                     next_pow2, wrap_triton)
from amg_fast.kernels._rows import column_sums
from amg_fast.kernels._tf32 import dot_operands, split_dot, split_tf32
from amg_fast.kernels.limits import GATE_MAX_H, READOUT_MAX_H, gate_bwd_wgmma, gate_x3

__all__ = ["gate_fusion_fwd", "gate_fusion_bwd", "gate_grads", "gate_cublas_fwd", "gate_cublas_grads", "weight_grads",
           "check_width", "WGRAD_POLICY", "TILE_POLICY"]


# ----------------------------------------------------------------------------- device helpers


@triton.jit
def _load_tile(ptr, rows, row_mask, cols, col_mask, H):
    """x[rows, cols] of a row-major [M, H] tensor as [len(rows), len(cols)], 0 outside the masks."""
    return tl.load(ptr + rows[:, None] * H + cols[None, :], mask=row_mask[:, None] & col_mask[None, :], other=0.0)


@triton.jit
def _row_tile(M, H, BLOCK_M: tl.constexpr, BLOCK_H: tl.constexpr):
    """This program's rows [pid*BLOCK_M, +BLOCK_M) and all H columns: (rows, row_mask, cols, col_mask,
    offsets, mask) with offsets / mask [BLOCK_M, BLOCK_H] into a row-major [M, H] tensor."""
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_mask = rows < M
    cols = tl.arange(0, BLOCK_H)
    col_mask = cols < H
    return rows, row_mask, cols, col_mask, rows[:, None] * H + cols[None, :], row_mask[:, None] & col_mask[None, :]


@triton.jit
def _weight_tile(w_ptr, lo, rows, row_mask, cols, col_mask, H, dtype, SPLIT: tl.constexpr):
    """(w, w_lo): w[rows, cols] of a row-major weight with H columns, cast to dtype; with SPLIT w_ptr is the
    weight's TF32 hi plane and w_lo the same tile of its lo plane, lo elements further (split_tf32), else w."""
    w = _load_tile(w_ptr, rows, row_mask, cols, col_mask, H).to(dtype)
    if SPLIT:
        return w, _load_tile(w_ptr + lo, rows, row_mask, cols, col_mask, H)
    return w, w


@triton.jit
def _chunked_product(acc, x_ptr, w_ptr, rows, row_mask, cols, col_mask, H, BLOCK_K: tl.constexpr,
                     SPLIT: tl.constexpr, DOT_PRECISION: tl.constexpr):
    """acc + x[rows] @ w[cols].T with x [M, H], w [H, H] read from memory in BLOCK_K chunks of the
    reduction (weights cast to x's dtype for tl.dot; SPLIT: w's TF32 planes, split_dot)."""
    for k0 in range(0, H, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        k_mask = ks < H
        x = _load_tile(x_ptr, rows, row_mask, ks, k_mask, H)                                  # [BLOCK_M, BLOCK_K]
        w, w_lo = _weight_tile(w_ptr, H * H, cols, col_mask, ks, k_mask, H, x.dtype, SPLIT)  # [BLOCK_N, BLOCK_K]
        acc = split_dot(x, tl.trans(w), tl.trans(w_lo), acc, SPLIT, DOT_PRECISION)
    return acc


@triton.jit
def _logits_tile(z_ptr, h_ptr, wz_ptr, wh_ptr, b_ptr, rows, row_mask, cols, col_mask, H,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT: tl.constexpr,
                 DOT_PRECISION: tl.constexpr):
    """logits[rows, cols] = z[rows] @ w_z[cols].T + h[rows] @ w_h[cols].T + b[cols]: [BLOCK_M, BLOCK_N]
    from z and h in memory. Masked rows/columns read zeros (padded columns give logits 0; callers mask them)."""
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float64 if z_ptr.dtype.element_ty == tl.float64 else tl.float32)
    acc = _chunked_product(acc, z_ptr, wz_ptr, rows, row_mask, cols, col_mask, H, BLOCK_K, SPLIT, DOT_PRECISION)
    acc = _chunked_product(acc, h_ptr, wh_ptr, rows, row_mask, cols, col_mask, H, BLOCK_K, SPLIT, DOT_PRECISION)
    bias = tl.load(b_ptr + cols, mask=col_mask, other=0.0).to(acc.dtype)
    return acc + bias[None, :]


@triton.jit
def _sigmoid(x):
    return 1.0 / (1.0 + tl.exp(-x))


@triton.jit
def _readout_chunk(a, a_ptr, rows, row_mask, wo_ptr, bo_ptr, ks, k_mask, cols, col_mask, H, acc_t,
                   BLOCK_J: tl.constexpr, SPLIT: tl.constexpr, DOT_PRECISION: tl.constexpr):
    """Columns ks of the S4D memory's readout p = a W_o^T + b_o, a [BLOCK_M, BLOCK_H] (dot dtype):
    (p1, sigmoid(p2)) [BLOCK_M, BLOCK_K] in acc_t, p1 / p2 from the first / second halves of W_o [2H, H].
    SPLIT (W_o's TF32 planes, the lo plane 2 H H elements on): a is read again from a_ptr (this program's
    rows, from L1 / L2) BLOCK_J columns at a time and split per chunk, so no full-width split of a is live
    (the register tile a is unused then)."""
    zero = tl.zeros((a.shape[0], ks.shape[0]), dtype=acc_t)
    if SPLIT:
        p1, p2 = zero, zero
        for j0 in range(0, H, BLOCK_J):
            js = j0 + tl.arange(0, BLOCK_J)
            j_mask = js < H
            a_j = _load_tile(a_ptr, rows, row_mask, js, j_mask, H)
            w1, w1_lo = _weight_tile(wo_ptr, 2 * H * H, ks, k_mask, js, j_mask, H, a_j.dtype, SPLIT)       # W_o[ks]
            p1 = split_dot(a_j, tl.trans(w1), tl.trans(w1_lo), p1, SPLIT, DOT_PRECISION)
            w2, w2_lo = _weight_tile(wo_ptr + H * H, 2 * H * H, ks, k_mask, js, j_mask, H, a_j.dtype, SPLIT)
            p2 = split_dot(a_j, tl.trans(w2), tl.trans(w2_lo), p2, SPLIT, DOT_PRECISION)
    else:
        w1 = _load_tile(wo_ptr, ks, k_mask, cols, col_mask, H).to(a.dtype)              # W_o[ks, :]
        w2 = _load_tile(wo_ptr + H * H, ks, k_mask, cols, col_mask, H).to(a.dtype)      # W_o[H + ks, :]
        p1 = tl.dot(a, tl.trans(w1), zero, input_precision=DOT_PRECISION, out_dtype=acc_t)
        p2 = tl.dot(a, tl.trans(w2), zero, input_precision=DOT_PRECISION, out_dtype=acc_t)
    p1 += tl.load(bo_ptr + ks, mask=k_mask, other=0.0).to(acc_t)[None, :]
    return p1, _sigmoid(p2 + tl.load(bo_ptr + H + ks, mask=k_mask, other=0.0).to(acc_t)[None, :])


@triton.jit
def _readout_logits(a, a_ptr, wo_ptr, bo_ptr, wz_ptr, zbuf_ptr, rows, row_mask, cols, col_mask, H, acc_t,
                    BLOCK_M: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT: tl.constexpr,
                    DOT_PRECISION: tl.constexpr):
    """z @ w_z.T [BLOCK_M, BLOCK_H] with z = GLU(a W_o^T + b_o) formed BLOCK_K columns at a time (each chunk
    stored to zbuf [M, H] in its dtype: the full z is never held in registers)."""
    acc = tl.zeros((BLOCK_M, BLOCK_H), dtype=acc_t)
    for k0 in range(0, H, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        k_mask = ks < H
        p1, sg = _readout_chunk(a, a_ptr, rows, row_mask, wo_ptr, bo_ptr, ks, k_mask, cols, col_mask, H, acc_t,
                                BLOCK_K, SPLIT, DOT_PRECISION)
        z = p1 * sg
        tl.store(zbuf_ptr + rows[:, None] * H + ks[None, :], z.to(zbuf_ptr.dtype.element_ty),
                 mask=row_mask[:, None] & k_mask[None, :])
        w_z, w_z_lo = _weight_tile(wz_ptr, H * H, cols, col_mask, ks, k_mask, H, a.dtype, SPLIT)  # w_z[:, ks]
        acc = split_dot(z.to(a.dtype), tl.trans(w_z), tl.trans(w_z_lo), acc, SPLIT, DOT_PRECISION)
    return acc


@triton.jit
def _gate_inputs(h_ptr, z_ptr, wz_ptr, wh_ptr, b_ptr, wo_ptr, bo_ptr, zbuf_ptr, rows, row_mask, cols, col_mask,
                 H, READOUT: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_K: tl.constexpr,
                 SPLIT: tl.constexpr, DOT_PRECISION: tl.constexpr):
    """(logits, z, h) [BLOCK_M, BLOCK_H] in the accumulation dtype, the products in BLOCK_K chunks of their
    reduction, and h and z (full width) loaded after them: not live through the dots. READOUT: z_ptr holds
    a, and z = GLU(a W_o^T + b_o) is formed chunk by chunk into zbuf (this program's rows), then read back."""
    acc_t = tl.float64 if h_ptr.dtype.element_ty == tl.float64 else tl.float32
    if READOUT:
        a = _load_tile(z_ptr, rows, row_mask, cols, col_mask, H)
        logits = _readout_logits(a, z_ptr, wo_ptr, bo_ptr, wz_ptr, zbuf_ptr, rows, row_mask, cols, col_mask, H, acc_t,
                                 BLOCK_M, BLOCK_H, BLOCK_K, SPLIT, DOT_PRECISION)
        logits = _chunked_product(logits, h_ptr, wh_ptr, rows, row_mask, cols, col_mask, H, BLOCK_K, SPLIT,
                                  DOT_PRECISION)
        logits += tl.load(b_ptr + cols, mask=col_mask, other=0.0).to(acc_t)[None, :]
        tl.debug_barrier()  # z's chunks, stored by other threads of this program, are in zbuf
        z = _load_tile(zbuf_ptr, rows, row_mask, cols, col_mask, H).to(acc_t)
    else:
        logits = _logits_tile(z_ptr, h_ptr, wz_ptr, wh_ptr, b_ptr, rows, row_mask, cols, col_mask, H,
                              BLOCK_M, BLOCK_H, BLOCK_K, SPLIT, DOT_PRECISION)
        z = _load_tile(z_ptr, rows, row_mask, cols, col_mask, H).to(acc_t)
    return logits, z, _load_tile(h_ptr, rows, row_mask, cols, col_mask, H).to(acc_t)


@triton.jit
def _row_chi(chi_ptr, w1_ptr, bo_ptr, rows, row_mask, rows_per_batch, chi_stride, FREQ: tl.constexpr):
    """(chi, v) for each row [BLOCK_M], v = chi_ptr[row // rows_per_batch] ([B]; chi_stride 1) or
    chi_ptr[0] (0-dim; stride 0). Without FREQ chi = v; with FREQ, v is log(omega + eps) and
    chi = sigmoid(w1 v + b_omega) (the frequency gate, w1 and b_omega 0-dim)."""
    v = tl.load(chi_ptr + (rows // rows_per_batch) * chi_stride, mask=row_mask, other=0.0)
    if FREQ:  # in fp32 whatever the dtype (tl.exp takes fp32/fp64 only; bf16 under autocast)
        v = v.to(tl.float32) if v.dtype != tl.float64 else v
        chi = _sigmoid(tl.load(w1_ptr).to(v.dtype) * v + tl.load(bo_ptr).to(v.dtype))
    else:
        chi = v
    return chi, v


# ----------------------------------------------------------------------------- kernels


@triton.jit
def _gate_fusion_fwd_kernel(
    h_ptr, z_ptr, wz_ptr, wh_ptr, b_ptr, chi_ptr,   # h, z (READOUT: a) [M, H]; w_z, w_h [H, H]; b [H]; chi [B] or [1]
    w1_ptr, bo_ptr,                                 # FREQ: chi_ptr holds log(omega + eps); w1, b_omega 0-dim
    wout_ptr, bout_ptr,                             # READOUT: W_o [2H, H], b_o [2H]
    out_ptr, g_ptr,                                 # out [M, H] in h's dtype; g [M, H] (G_MEAN: [n_programs], acc dtype)
    M, H, rows_per_batch, chi_stride,
    FREQ: tl.constexpr, READOUT: tl.constexpr, G_MEAN: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_H: tl.constexpr,
    BLOCK_K: tl.constexpr, SPLIT: tl.constexpr, DOT_PRECISION: tl.constexpr,
):
    """One program: rows [pid*BLOCK_M, +BLOCK_M) x all H columns (padded to BLOCK_H). SPLIT: the weight
    pointers are their TF32 planes (split_tf32; fp32 mode)."""
    rows, row_mask, cols, col_mask, offsets, mask = _row_tile(M, H, BLOCK_M, BLOCK_H)
    logits, z, h = _gate_inputs(h_ptr, z_ptr, wz_ptr, wh_ptr, b_ptr, wout_ptr, bout_ptr, out_ptr, rows, row_mask,
                                cols, col_mask, H, READOUT, BLOCK_M, BLOCK_H, BLOCK_K, SPLIT, DOT_PRECISION)
    _store_gate(logits, z, h, chi_ptr, w1_ptr, bo_ptr, out_ptr, g_ptr, rows, row_mask, offsets, mask, M, H,
                rows_per_batch, chi_stride, FREQ, G_MEAN, READOUT)


@triton.jit
def _store_gate(logits, z, h, chi_ptr, w1_ptr, bo_ptr, out_ptr, g_ptr, rows, row_mask, offsets, mask, M, H,
                rows_per_batch, chi_stride, FREQ: tl.constexpr, G_MEAN: tl.constexpr, BARRIER: tl.constexpr):
    """The gate from this program's logits, z, h tiles [BLOCK_M, BLOCK_H] (acc dtype): g = sigmoid(logits) chi,
    out = g z + (1 - g) h stored at offsets, and g (G_MEAN: this program's share of its mean). BARRIER: out_ptr
    holds what other threads still read (the readout's z), so all of them finish first."""
    chi, _ = _row_chi(chi_ptr, w1_ptr, bo_ptr, rows, row_mask, rows_per_batch, chi_stride, FREQ)
    g = _sigmoid(logits) * chi.to(logits.dtype)[:, None]
    out = g * z + (1.0 - g) * h
    if BARRIER:  # out_ptr held z: every thread has read it back before out overwrites it
        tl.debug_barrier()
    tl.store(out_ptr + offsets, out.to(out_ptr.dtype.element_ty), mask=mask)
    if G_MEAN:  # this program's share of the mean gate; M, H plain operands (not M.to(...)): torch.compile's
        # mutation analysis traces the kernel with its integers as constants, and "M.to" on a Python int failed
        # there ("every input mutated" assumed instead; H200, 2026-11-29, results/gpu/20261129-1927-h200/diagnosis)
        share = tl.sum(tl.sum(tl.where(mask, g, 0.0), axis=1), axis=0) / M / H
        tl.store(g_ptr + tl.program_id(0), share.to(g_ptr.dtype.element_ty))
    else:
        tl.store(g_ptr + offsets, g.to(g_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _gate_fusion_bwd_kernel(
    h_ptr, z_ptr, wz_ptr, wh_ptr, b_ptr, chi_ptr,   # as in the forward (READOUT: z_ptr holds a)
    w1_ptr, bo_ptr, wout_ptr, bout_ptr,
    dout_ptr, dg_ptr,                               # upstream grads of out and g [M, H] (dg unused if not HAS_DG)
    dz_ptr, dh_ptr,                                 # [M, H] in h's dtype (READOUT: dz_ptr receives da)
    dlogits_ptr, dchi_ptr,                          # [M, H], [M, E] (E = 2 with FREQ, else 1): acc dtype
    zsave_ptr, dp_ptr,                              # READOUT: z [M, H] in h's dtype, dp [M, 2H] acc dtype
    M, H, rows_per_batch, chi_stride,
    FREQ: tl.constexpr, HAS_DG: tl.constexpr, READOUT: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_H: tl.constexpr,
    BLOCK_K: tl.constexpr, BLOCK_N: tl.constexpr, SPLIT: tl.constexpr, DOT_PRECISION: tl.constexpr,
):
    """One program: rows [pid*BLOCK_M, +BLOCK_M) x all H columns; see the module docstring."""
    rows, row_mask, cols, col_mask, offsets, mask = _row_tile(M, H, BLOCK_M, BLOCK_H)
    logits, z, h = _gate_inputs(h_ptr, z_ptr, wz_ptr, wh_ptr, b_ptr, wout_ptr, bout_ptr, zsave_ptr, rows, row_mask,
                                cols, col_mask, H, READOUT, BLOCK_M, BLOCK_H, BLOCK_K, SPLIT, DOT_PRECISION)
    dz, dh = _gate_grad_terms(logits, z, h, chi_ptr, w1_ptr, bo_ptr, dout_ptr, dg_ptr, dlogits_ptr, dchi_ptr, rows,
                              row_mask, cols, col_mask, offsets, mask, H, rows_per_batch, chi_stride, FREQ, HAS_DG)
    dot_dtype = h_ptr.dtype.element_ty
    # dlogits @ w in chunks n of its columns, read back from memory (this program just wrote them)
    tl.debug_barrier()
    for n0 in range(0, H, BLOCK_N):
        ns = n0 + tl.arange(0, BLOCK_N)
        n_mask = ns < H
        dl_n = _load_tile(dlogits_ptr, rows, row_mask, ns, n_mask, H).to(dot_dtype)   # [BLOCK_M, BLOCK_N]
        w_z, w_z_lo = _weight_tile(wz_ptr, H * H, ns, n_mask, cols, col_mask, H, dot_dtype, SPLIT)  # [BLOCK_N, BLOCK_H]
        dz = split_dot(dl_n, w_z, w_z_lo, dz, SPLIT, DOT_PRECISION)
        w_h, w_h_lo = _weight_tile(wh_ptr, H * H, ns, n_mask, cols, col_mask, H, dot_dtype, SPLIT)
        dh = split_dot(dl_n, w_h, w_h_lo, dh, SPLIT, DOT_PRECISION)
    tl.store(dh_ptr + offsets, dh.to(dh_ptr.dtype.element_ty), mask=mask)
    if READOUT:  # back through the GLU and the Linear, BLOCK_K columns of z at a time (p recomputed)
        dp_offsets = rows[:, None] * (2 * H) + cols[None, :]
        tl.store(dp_ptr + dp_offsets, dz, mask=mask)  # dz parked in dp's first half (acc dtype)
        tl.debug_barrier()
        a = _load_tile(z_ptr, rows, row_mask, cols, col_mask, H)
        for k0 in range(0, H, BLOCK_K):  # dp, then da from it: a and da are never live together
            ks = k0 + tl.arange(0, BLOCK_K)
            k_mask = ks < H
            k_offsets = rows[:, None] * (2 * H) + ks[None, :]
            tile_mask = row_mask[:, None] & k_mask[None, :]
            dz_k = tl.load(dp_ptr + k_offsets, mask=tile_mask, other=0.0)
            p1, sg = _readout_chunk(a, z_ptr, rows, row_mask, wout_ptr, bout_ptr, ks, k_mask, cols, col_mask, H,
                                    dz.dtype, BLOCK_K, SPLIT, DOT_PRECISION)
            dp1 = dz_k * sg
            dp2 = dz_k * p1 * sg * (1.0 - sg)
            tl.debug_barrier()  # every thread has read its dz_k before dp1 overwrites them
            tl.store(dp_ptr + k_offsets, dp1, mask=tile_mask)
            tl.store(dp_ptr + k_offsets + H, dp2, mask=tile_mask)
        tl.debug_barrier()
        da = tl.zeros_like(dz)
        for k0 in range(0, H, BLOCK_K):
            ks = k0 + tl.arange(0, BLOCK_K)
            k_mask = ks < H
            k_offsets = rows[:, None] * (2 * H) + ks[None, :]
            tile_mask = row_mask[:, None] & k_mask[None, :]
            dp1 = tl.load(dp_ptr + k_offsets, mask=tile_mask, other=0.0).to(dot_dtype)
            dp2 = tl.load(dp_ptr + k_offsets + H, mask=tile_mask, other=0.0).to(dot_dtype)
            w1, w1_lo = _weight_tile(wout_ptr, 2 * H * H, ks, k_mask, cols, col_mask, H, dot_dtype, SPLIT)  # W_o[ks]
            da = split_dot(dp1, w1, w1_lo, da, SPLIT, DOT_PRECISION)
            w2, w2_lo = _weight_tile(wout_ptr + H * H, 2 * H * H, ks, k_mask, cols, col_mask, H, dot_dtype, SPLIT)
            da = split_dot(dp2, w2, w2_lo, da, SPLIT, DOT_PRECISION)
        tl.store(dz_ptr + offsets, da.to(dz_ptr.dtype.element_ty), mask=mask)
    else:
        tl.store(dz_ptr + offsets, dz.to(dz_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _gate_grad_terms(logits, z, h, chi_ptr, w1_ptr, bo_ptr, dout_ptr, dg_ptr, dlogits_ptr, dchi_ptr, rows, row_mask,
                     cols, col_mask, offsets, mask, H, rows_per_batch, chi_stride, FREQ: tl.constexpr,
                     HAS_DG: tl.constexpr):
    """The backward's elementwise part from this program's logits, z, h tiles [BLOCK_M, BLOCK_H] (acc dtype, all
    H columns): dg = dout (z - h) (+ dg_ext), dlogits = dg chi s (1 - s) stored at offsets, dL/dchi per row
    stored (FREQ: the gradient of chi's logit and its product with v, two columns); returns (dout g,
    dout (1 - g)), the parts of dz and dh that do not go through the logits."""
    chi, v = _row_chi(chi_ptr, w1_ptr, bo_ptr, rows, row_mask, rows_per_batch, chi_stride, FREQ)
    chi = chi.to(logits.dtype)
    s = _sigmoid(logits)
    g = s * chi[:, None]
    dout = _load_tile(dout_ptr, rows, row_mask, cols, col_mask, H).to(logits.dtype)
    dg = dout * (z - h)
    if HAS_DG:
        dg += _load_tile(dg_ptr, rows, row_mask, cols, col_mask, H).to(logits.dtype)
    dlogits = tl.where(mask, dg * chi[:, None] * s * (1.0 - s), 0.0)
    tl.store(dlogits_ptr + offsets, dlogits.to(dlogits_ptr.dtype.element_ty), mask=mask)
    dchi = tl.sum(tl.where(mask, dg * s, 0.0), axis=1)  # dL/dchi per row
    if FREQ:  # through chi = sigmoid(w1 v + b_omega): columns 0 / 1 -> db_omega / dw1
        dchi_logit = dchi * chi * (1.0 - chi)
        tl.store(dchi_ptr + 2 * rows, dchi_logit, mask=row_mask)
        tl.store(dchi_ptr + 2 * rows + 1, dchi_logit * v.to(dchi_logit.dtype), mask=row_mask)
    else:
        tl.store(dchi_ptr + rows, dchi, mask=row_mask)
    dz = dout * g
    return dz, dout - dz


@triton.jit
def _gate_cublas_fwd_kernel(
    logits_ptr, h_ptr, z_ptr, chi_ptr, w1_ptr, bo_ptr,   # logits, h, z [M, H] (logits in the acc dtype)
    out_ptr, g_ptr,                                      # out, g [M, H] in h's dtype
    M, H, rows_per_batch, chi_stride,
    FREQ: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_H: tl.constexpr,
):
    """The cuBLAS method's forward after its GEMMs: out and g from logits = z w_z^T + h w_h^T + b (in memory), one
    program per BLOCK_M rows x all H columns (_store_gate)."""
    rows, row_mask, cols, col_mask, offsets, mask = _row_tile(M, H, BLOCK_M, BLOCK_H)
    logits = tl.load(logits_ptr + offsets, mask=mask, other=0.0)
    z = _load_tile(z_ptr, rows, row_mask, cols, col_mask, H).to(logits.dtype)
    h = _load_tile(h_ptr, rows, row_mask, cols, col_mask, H).to(logits.dtype)
    _store_gate(logits, z, h, chi_ptr, w1_ptr, bo_ptr, out_ptr, g_ptr, rows, row_mask, offsets, mask, M, H,
                rows_per_batch, chi_stride, FREQ, False, False)


@triton.jit
def _gate_cublas_bwd_kernel(
    logits_ptr, h_ptr, z_ptr, chi_ptr, w1_ptr, bo_ptr,   # as _gate_cublas_fwd_kernel's (logits saved by it)
    dout_ptr, dg_ptr,                                    # upstream grads of out and g [M, H] (dg unused if not HAS_DG)
    dz_ptr, dh_ptr, dlogits_ptr, dchi_ptr,               # dout g, dout (1 - g), dlogits [M, H]; dchi rows [M, E]
    M, H, rows_per_batch, chi_stride,
    FREQ: tl.constexpr, HAS_DG: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_H: tl.constexpr,
):
    """The cuBLAS method's backward before its GEMMs: the elementwise terms (_gate_grad_terms) from the saved
    logits, one program per BLOCK_M rows x all H columns; dz and dh then take dlogits w_z, dlogits w_h."""
    rows, row_mask, cols, col_mask, offsets, mask = _row_tile(M, H, BLOCK_M, BLOCK_H)
    logits = tl.load(logits_ptr + offsets, mask=mask, other=0.0)
    z = _load_tile(z_ptr, rows, row_mask, cols, col_mask, H).to(logits.dtype)
    h = _load_tile(h_ptr, rows, row_mask, cols, col_mask, H).to(logits.dtype)
    dz, dh = _gate_grad_terms(logits, z, h, chi_ptr, w1_ptr, bo_ptr, dout_ptr, dg_ptr, dlogits_ptr, dchi_ptr, rows,
                              row_mask, cols, col_mask, offsets, mask, H, rows_per_batch, chi_stride, FREQ, HAS_DG)
    tl.store(dz_ptr + offsets, dz.to(dz_ptr.dtype.element_ty), mask=mask)
    tl.store(dh_ptr + offsets, dh.to(dh_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _weight_grad_kernel(
    dy_ptr, x1_ptr, x2_ptr, e_ptr,                  # dY [M, O] (any float dtype), X1 [M, I1], X2 [M, I2], E [M, E] (acc)
    part_ptr, part_stride,                          # part[group] = [dW1 (O x I1) | dW2 (O x I2) | db (O) | e (E)]
    M, O, I1, I2, E, rows_per_group,
    HAS_X2: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_O: tl.constexpr, BLOCK_I: tl.constexpr,
    E_PAD: tl.constexpr, DOT_PRECISION: tl.constexpr,
):
    """Partial sums over the rows [group * rows_per_group, +rows_per_group) of dW = dY^T [X1 | X2],
    db = colsum(dY) (written by the programs of the first X column block) and colsum(E) (by the
    first program of the group). Grid (cdiv(O, BLOCK_O), X column blocks of X1 then X2, groups)."""
    pid_o, pid_i, group = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    n_i1 = tl.cdiv(I1, BLOCK_I)
    if HAS_X2:
        second = pid_i >= n_i1
        x_ptr = tl.where(second, x2_ptr, x1_ptr)
        width = tl.where(second, I2, I1)
        i0 = tl.where(second, pid_i - n_i1, pid_i) * BLOCK_I
        region = tl.where(second, O * I1, 0)
    else:
        x_ptr, width, i0, region = x1_ptr, I1, pid_i * BLOCK_I, 0
    os = pid_o * BLOCK_O + tl.arange(0, BLOCK_O)
    o_mask = os < O
    cols = i0 + tl.arange(0, BLOCK_I)
    i_mask = cols < width
    es = tl.arange(0, E_PAD)
    dot_dtype = x1_ptr.dtype.element_ty
    acc_t = tl.float64 if dot_dtype == tl.float64 else tl.float32  # the dots' (dY is cast to X1's dtype)
    dw = tl.zeros((BLOCK_O, BLOCK_I), dtype=acc_t)
    db = tl.zeros((BLOCK_O,), dtype=acc_t)
    ee = tl.zeros((E_PAD,), dtype=acc_t)
    first = group * rows_per_group
    last = tl.minimum(first + rows_per_group, M)
    for m0 in range(first, last, BLOCK_M):
        rows = (m0 + tl.arange(0, BLOCK_M)).to(tl.int64)
        row_mask = rows < last
        dy = _load_tile(dy_ptr, rows, row_mask, os, o_mask, O)                          # [BLOCK_M, BLOCK_O]
        x = tl.load(x_ptr + rows[:, None] * width + cols[None, :], mask=row_mask[:, None] & i_mask[None, :],
                    other=0.0)
        dw = tl.dot(tl.trans(dy.to(dot_dtype)), x.to(dot_dtype), dw, input_precision=DOT_PRECISION, out_dtype=acc_t)
        db += tl.sum(dy.to(acc_t), axis=0)
        ee += tl.sum(_load_tile(e_ptr, rows, row_mask, es, es < E, E).to(acc_t), axis=0)
    part = part_ptr + group.to(tl.int64) * part_stride
    tl.store(part + region + os[:, None] * width + cols[None, :], dw, mask=o_mask[:, None] & i_mask[None, :])
    tail = part + O * (I1 + I2)
    tl.store(tail + os, db, mask=os < tl.where(pid_i == 0, O, 0))  # from the first X column block only
    tl.store(tail + O + es, ee, mask=es < tl.where(pid_o + pid_i == 0, E, 0))  # from the first program only


# ----------------------------------------------------------------------------- launchers


def check_width(H: int, readout: bool = False) -> None:
    """Raise a ValueError when H exceeds what one program's register tiles hold (GATE_MAX_H; with the
    readout folded in, READOUT_MAX_H)."""
    limit, name = (READOUT_MAX_H, "memory_gate") if readout else (GATE_MAX_H, "gate_fusion")
    if H > limit:
        raise ValueError(f"{name} Triton kernels support H <= {limit} (all H output columns of a row tile "
                         f"live in one program), got H={H}; use backend='reference' for wider gates")


# Tile choices. For BLOCK_H 128 (H = 65..128: the paper's 128) the table TILE_POLICY holds each kernel's
# tiles per precision mode ("fp32": tf32x3 dots, "tf32", "bf16"; fp16 takes bf16's), so that
# bench/kernel_sweep.py --only gate can time its alternatives on a GPU; other widths and fp64 take
# _width_config's formulae (sized to stay inside shared memory and registers, untuned). Every tl.dot dim is
# >= 16. Under TF32 and bf16 the plain-gate entries are the fastest of a sweep at the paper shape (R*S =
# 102400 rows, H = 128) on an H200 with triton 3.6, TF32 allowed (its backward then recomputed the logits in
# pass 2). The rest are chosen by what they spill compiled for sm_90 by triton 3.6 (bench/compile_sm90.py,
# 2026-11-28; untimed, the sweep decides): in fp32 mode (tf32x3 splits every dot operand in three) the
# plain gate's 64 x 64 / 32 x 64 tiles (rows x reduction chunk) spilled 120 / 480 B a thread (272 / 752 B
# before h was loaded after the products), 32-column chunks and 8 warps in the backward spill nothing.
# READOUT forms z BLOCK_K columns at a time; in fp32 mode its 64-row tiles put the products on wgmma with
# the weights in shared memory (32-row tiles ran mma.sync with the weights in registers and spilled 12-15
# KB), spilling 136 / 304 B (forward / backward; the full-width form spilled 1,472 / 3,768 B) with Triton's
# tf32x3 dots ("fp32-dot": AMG_FAST_GATE_X3=dot keeps those tiles; its backward spilled 496 B at 16-column
# chunks); on split weights (_split_weights) none forward, and none backward at 16-column chunks (88 B at 32);
# under TF32 and bf16 32 rows and the chunks below spill nothing (152 / 520 and 16 / 352 B before).
# READOUT's loops (over z's column chunks and the weights' reduction chunks) ran unpipelined (num_stages 1:
# every load synchronous, with one 8-warp program an SM in fp32 mode nothing hides the weights' L2 latency);
# at 2 stages Triton prefetches the loops' weight and activation chunks (cp.async), which compiled for sm_90
# (triton 3.6, 2026-11-29) spills nothing forward (fp32 232 -> 216 registers) but 8 B under TF32 without the
# frequency gate (AMGFNO has it), nothing backward under TF32 / bf16, and 48 B backward in fp32 mode, which
# keeps 1 stage; so do the "fp32-dot" entries (AMG_FAST_GATE_X3=dot: the former path, unchanged) and the
# readout at other widths (_width_config). Every read of a parked buffer (z, dz, dlogits) in those loops comes
# after the barrier that follows its writes, before the loop; a prefetch stays within its loop. Untimed: the
# gate sweep has both stage counts.
_PLAIN_FWD = {"BLOCK_M": 64, "BLOCK_K": 64, "num_warps": 8, "num_stages": 2}
_PLAIN_BWD = {"BLOCK_M": 32, "BLOCK_K": 64, "BLOCK_N": 32, "num_warps": 4, "num_stages": 2}
_READOUT_FWD = {"BLOCK_M": 32, "BLOCK_K": 32, "num_warps": 8, "num_stages": 2}
_READOUT_BWD = {"BLOCK_M": 32, "BLOCK_N": 32, "num_warps": 8, "num_stages": 2}
# "bwd"'s "wgmma" (2026-11-30; $AMG_FAST_GATE_BWD_WGMMA=1, fp32 activations: fp32 mode and TF32; untimed): the
# plain gate's backward at 32 rows a program runs mma.sync (a wgmma takes 64 rows a warpgroup), 0.52 / 0.23 ms of
# the H200's fp32 / TF32 step at S = 128 (2026-11-30: 77 TFLOP/s of TF32 MMAs in fp32 mode). 64 rows x 32 x 16 on
# 8 warps, 2 stages: wgmma, 234-255 registers, no spills in fp32 mode (both AMG_FAST_GATE_X3 paths) and under TF32
# (sm_90, triton 3.6), where 64 x 32 x 32 spilled 16-40 B and 4 warps 700-900 B. The campaign's variant
# `gate_bwd_wgmma` times it; the policy keeps 32 rows until it wins.
_PLAIN_BWD_WGMMA = {"BLOCK_M": 64, "BLOCK_K": 32, "BLOCK_N": 16, "num_warps": 8, "num_stages": 2}
TILE_POLICY = {
    "fwd": {"fp32": dict(_PLAIN_FWD, BLOCK_K=32), "tf32": dict(_PLAIN_FWD), "bf16": dict(_PLAIN_FWD)},
    "bwd": {"fp32": dict(_PLAIN_BWD, BLOCK_K=32, num_warps=8), "tf32": dict(_PLAIN_BWD), "bf16": dict(_PLAIN_BWD),
            "wgmma": dict(_PLAIN_BWD_WGMMA)},
    "fwd_readout": {"fp32": dict(_READOUT_FWD, BLOCK_M=64), "fp32-dot": dict(_READOUT_FWD, BLOCK_M=64, num_stages=1),
                    "tf32": dict(_READOUT_FWD), "bf16": dict(_READOUT_FWD)},
    "bwd_readout": {"fp32": dict(_READOUT_BWD, BLOCK_M=64, BLOCK_K=16, num_stages=1),
                    "fp32-dot": dict(_READOUT_BWD, BLOCK_M=64, BLOCK_K=32, num_stages=1),
                    "tf32": dict(_READOUT_BWD, BLOCK_K=64),
                    "bf16": dict(_READOUT_BWD, BLOCK_K=16)},
}
TILED_BLOCK_H = 128  # the width TILE_POLICY is for


def _on_cpu(config: dict, device: torch.device, M: int, readout: bool = False, block_h: int = 0) -> dict:
    """On CPU (Triton's interpreter: a fixed cost per program, and per op one proportional to the
    tile) up to 256-row tiles, no larger than M needs, and the readout's z in one chunk of block_h
    columns (its GPU chunks doubled the interpreted memory gate's time); the GPU's elsewhere. The tests
    run the GPU's tiles too (tests/ops/test_readout_gate.py, test_gpu_tiles)."""
    if device.type != "cpu":
        return config
    config = dict(config, BLOCK_M=min(256, next_pow2(M)))
    if readout:
        config.update({key: block_h for key in ("BLOCK_K", "BLOCK_N") if key in config})
    return config


def _tile_mode(dtype: torch.dtype) -> str:
    """TILE_POLICY's mode for activations of dtype (fp32: by its dots, tf32x3 or tf32; tf32x3 by Triton's dot,
    AMG_FAST_GATE_X3=dot: "fp32-dot", where a kernel has that entry, else "fp32")."""
    if dtype == torch.float32:
        if dot_precision(dtype) != "tf32x3":
            return "tf32"
        return "fp32-dot" if gate_x3() == "dot" else "fp32"
    return "bf16"


def _width_config(kind: str, block_h: int, dtype: torch.dtype, readout: bool) -> dict:
    """Tiles of kind ("fwd" / "bwd") at widths other than TILED_BLOCK_H, and for fp64."""
    if readout:
        rows = 64 if dot_precision(dtype) == "tf32x3" else 32
        config = {"BLOCK_M": rows, "BLOCK_K": min(block_h, 32), "num_warps": 8 if block_h == 128 else 4,
                  "num_stages": 1}
        return dict(config, BLOCK_N=min(block_h, 32)) if kind == "bwd" else config
    narrow = block_h < 128 and dtype != torch.float64
    config = {"BLOCK_M": 32 if kind == "bwd" or block_h > 128 else 64,
              "BLOCK_K": min(block_h, 64 if narrow else 32 if block_h <= 128 else 16),
              "num_warps": 4 if block_h <= 64 else 8, "num_stages": 2}
    return dict(config, BLOCK_N=min(block_h, 32)) if kind == "bwd" else config


def _config(kind: str, H: int, dtype: torch.dtype, readout: bool) -> dict:
    """Launch options of the forward (kind "fwd": BLOCK_M rows per program, BLOCK_K reduction chunk, with the
    readout also the chunk of z's columns formed at a time) or backward ("bwd": also BLOCK_N, the column
    chunk of dlogits @ W) kernel for width H, with the readout folded in or not: TILE_POLICY's entry at the
    paper's width (the plain backward's "wgmma" for fp32 activations with $AMG_FAST_GATE_BWD_WGMMA=1),
    _width_config's elsewhere."""
    block_h = next_pow2(H)
    if block_h == TILED_BLOCK_H and dtype != torch.float64:
        entries, mode = TILE_POLICY[kind + ("_readout" if readout else "")], _tile_mode(dtype)
        if kind == "bwd" and not readout and dtype == torch.float32 and gate_bwd_wgmma(False):
            mode = "wgmma"
        return dict(entries[mode if mode in entries else "fp32"])  # "fp32-dot" only where it differs
    return _width_config(kind, block_h, dtype, readout)


def _prepare(h, z, w_z, w_h, b, chi, readout):
    """Flatten and make contiguous: (h2, z2 [M, H], w_z, w_h (as dot operands: in h's dtype, see
    _common.dot_operand; the biases stay as given, added in fp32), b, chi1 [B or 1], scalars)."""
    H = h.shape[-1]
    check_width(H, readout is not None)
    h2 = h.reshape(-1, H).contiguous()
    z2 = z.to(h.dtype).reshape(-1, H).contiguous()
    M = h2.shape[0]
    per_batch = chi.dim() == 1
    scalars = {"M": M, "H": H, "rows_per_batch": max(M // chi.shape[0] if per_batch else M, 1),
               "chi_stride": 1 if per_batch else 0}
    weights = (*dot_operands(h.dtype, w_z, w_h), b.contiguous())  # fp32 weights under bf16 autocast: one cast
    return (h2, z2, *weights, chi.reshape(-1).contiguous()), scalars


def _extra_args(chi, freq, readout, dtype: torch.dtype):
    """(w1, b_omega, W_o, b_o, FREQ, READOUT) kernel arguments: freq = (w1, b_omega) 0-dim or None,
    readout = (W_o [2H, H], a dot operand for activations of dtype, b_o [2H]) or None (chi then stands in for
    the unused pointers)."""
    w1, b_omega = (chi, chi) if freq is None else (freq[0].reshape(()).contiguous(), freq[1].reshape(()).contiguous())
    w_out, b_out = (chi, chi) if readout is None else (dot_operand(readout[0], dtype), readout[1].contiguous())
    return w1, b_omega, w_out, b_out, freq is not None, readout is not None


def _split_weights(inputs: tuple, extra: tuple, dtype: torch.dtype) -> tuple[tuple, tuple, bool]:
    """(inputs, extra, SPLIT): in fp32 mode (tf32x3 dots) with AMG_FAST_GATE_X3 "split" (not the default), w_z,
    w_h (and W_o) replaced by their TF32 planes, split in one launch (split_tf32): the kernels then split
    only the activation tiles in registers; else as given."""
    if dtype != torch.float32 or dot_precision(dtype) != "tf32x3" or gate_x3() != "split":
        return inputs, extra, False
    h2, z2, w_z, w_h, b, chi1 = inputs
    readout = extra[5]
    planes = split_tf32(w_z, w_h, *((extra[2],) if readout else ()))
    n = w_z.numel()
    w_out = planes[4 * n:] if readout else extra[2]
    return (h2, z2, planes, planes[2 * n:], b, chi1), (*extra[:2], w_out, *extra[3:]), True


def gate_fusion_fwd(h, z, w_z, w_h, b, chi, freq=None, readout=None, g_mean=False
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """Forward gate. h, z [..., H] (z is cast to h's dtype); w_z, w_h [H, H]; b [H]; chi 0-dim or [B]
    (B = h.shape[0]). Returns (out, g): out [..., H] in h's dtype; g [..., H] in h's dtype, or with
    g_mean its mean (0-dim, fp32 / fp64: g is not written). H <= GATE_MAX_H.
    freq = (w1, b_omega) (0-dim): chi holds log(omega + eps) and the kernel applies the frequency
    gate chi = sigmoid(w1 chi + b_omega) itself. readout = (W_o [2H, H], b_o [2H]): z holds the S4D
    memory's activations a and the kernel forms z = GLU(a W_o^T + b_o) (H <= READOUT_MAX_H)."""
    inputs, sc = _prepare(h, z, w_z, w_h, b, chi, readout)
    inputs, extra, split = _split_weights(inputs, _extra_args(chi, freq, readout, h.dtype), h.dtype)
    config = _on_cpu(_config("fwd", sc["H"], h.dtype, readout is not None), h.device, sc["M"], readout is not None,
                     next_pow2(sc["H"]))
    grid = (cdiv(sc["M"], config["BLOCK_M"]),)
    out = new_output(inputs[0].shape, dtype=h.dtype, device=h.device)
    g = new_output(grid if g_mean else inputs[0].shape, dtype=acc_dtype(h) if g_mean else h.dtype, device=h.device)
    if sc["M"] > 0:
        wrap_triton(_gate_fusion_fwd_kernel)[grid](
            *inputs, *extra[:4], out, g, sc["M"], sc["H"], sc["rows_per_batch"], sc["chi_stride"],
            FREQ=extra[4], READOUT=extra[5], G_MEAN=g_mean, BLOCK_H=next_pow2(sc["H"]), SPLIT=split,
            DOT_PRECISION=dot_precision(h.dtype), **config)
    return out.view(h.shape), (g.sum() if g_mean else g.view(h.shape))


# The weight-gradient kernel: BLOCK_O x BLOCK_I output tiles, BLOCK_M rows per step, and how many
# programs (tiles x row groups) to aim for; each row group writes one partial sum of every weight
# gradient. On CPU (the interpreter) few, large programs run fastest.
WGRAD_POLICY = {
    "cuda": {"BLOCK_M": 64, "BLOCK_O": 64, "BLOCK_I": 64, "num_warps": 4, "programs": 512},
    "cpu": {"BLOCK_M": 256, "BLOCK_O": 128, "BLOCK_I": 128, "num_warps": 4, "programs": 1},
}


def _wgrad_groups(M: int, tiles: int, device: torch.device) -> tuple[int, int]:
    """(groups, rows_per_group) for the weight-gradient kernel: about policy["programs"] programs."""
    policy = for_device(WGRAD_POLICY, device)
    block_m = policy["BLOCK_M"]
    groups = max(1, min(cdiv(M, block_m), cdiv(policy["programs"], tiles)))
    rows_per_group = cdiv(cdiv(M, groups), block_m) * block_m
    return cdiv(M, rows_per_group) if M > 0 else 1, rows_per_group


def weight_grads(products, extra=None) -> torch.Tensor:
    """Weight gradients as one flat tensor in X1's accumulation dtype: for each (dY [M, O], X1 [M, I1], X2
    [M, I2] or None) of products, in order, [dY^T X1 (O x I1) | dY^T X2 (O x I2) | colsum(dY) (O)], then
    colsum(extra) for extra [M, E] (or nothing). dY may be of any float dtype (cast to X1's for the dots,
    which accumulate in X1's accumulation dtype). The kernel reads every operand row-major: a strided view
    (channels not innermost, rows sliced from a wider tensor, an expanded axis) is copied first. One launch
    per product (partial sums over groups of rows into one buffer), one torch sum."""
    products = [tuple(None if t is None else t.contiguous() for t in product) for product in products]
    extra = None if extra is None else extra.contiguous()
    policy = for_device(WGRAD_POLICY, products[0][0].device)
    sizes = [dy.shape[1] * (x1.shape[1] + (0 if x2 is None else x2.shape[1]) + 1) for dy, x1, x2 in products]
    n_extra = 0 if extra is None else extra.shape[1]
    dy0 = products[0][0]
    M, tiles = dy0.shape[0], 0
    for dy, x1, x2 in products:
        width = x1.shape[1] + (0 if x2 is None else x2.shape[1])
        tiles = max(tiles, cdiv(dy.shape[1], policy["BLOCK_O"]) * cdiv(width, policy["BLOCK_I"]))
    groups, rows_per_group = _wgrad_groups(M, tiles, dy0.device)
    part = new_output((groups, sum(sizes) + n_extra), dtype=acc_dtype(products[0][1]), device=dy0.device)
    if M == 0:
        part.zero_()
    offset = 0
    for i, ((dy, x1, x2), size) in enumerate(zip(products, sizes)):
        last = i == len(products) - 1
        e = extra if (last and extra is not None) else dy
        E = n_extra if (last and extra is not None) else 0
        O, I1, I2 = dy.shape[1], x1.shape[1], 0 if x2 is None else x2.shape[1]
        region = part[:, offset:]
        n_i = cdiv(I1, policy["BLOCK_I"]) + cdiv(I2, policy["BLOCK_I"])
        if M > 0:
            wrap_triton(_weight_grad_kernel)[(cdiv(O, policy["BLOCK_O"]), n_i, groups)](
                dy, x1, x1 if x2 is None else x2, e, region, part.stride(0), M, O, I1, I2, E, rows_per_group,
                HAS_X2=x2 is not None, E_PAD=next_pow2(max(E, 1), 2), DOT_PRECISION=dot_precision(x1.dtype),
                BLOCK_M=policy["BLOCK_M"], BLOCK_O=policy["BLOCK_O"], BLOCK_I=policy["BLOCK_I"],
                num_warps=policy["num_warps"])
        offset += size + E
    return part.sum(0)


def gate_fusion_bwd(h, z, w_z, w_h, b, chi, dout, dg=None, freq=None, readout=None):
    """Backward through the gate (and the readout), recomputing the forward. Arguments as
    gate_fusion_fwd, plus dout [..., H] (grad of out) and dg [..., H] or None (grad of g; None means
    zeros; must be None with readout).

    Returns (dz, dh, dlogits, dchi_rows, saved) with
      dz       [..., H] in h's dtype: the gradient w.r.t. z (with readout: w.r.t. a);
      dh       [..., H] in h's dtype;
      dlogits  [M, H] (M = rows of h), fp32 (fp64 for fp64 inputs): grad of the pre-sigmoid logits;
      dchi_rows [M, E] in the same dtype: per-row dL/dchi (E = 1), or with freq the per-row
               gradient of chi's logit and its product with log(omega + eps) (E = 2: db_omega, dw1);
      saved    with readout (z [M, H] in h's dtype, dp [M, 2H] acc dtype: the GLU's input gradient),
               else None.
    The weight gradients are weight_grads' (or cuBLAS's) business.
    """
    inputs, sc = _prepare(h, z, w_z, w_h, b, chi, readout)
    inputs, extra, split = _split_weights(inputs, _extra_args(chi, freq, readout, h.dtype), h.dtype)
    M, H = sc["M"], sc["H"]
    acc = acc_dtype(h)
    dout2 = dout.to(h.dtype).reshape(M, H).contiguous()
    dg2 = None if dg is None else dg.to(h.dtype).reshape(M, H).contiguous()
    dz = new_output((M, H), dtype=h.dtype, device=h.device)
    dh = new_output((M, H), dtype=h.dtype, device=h.device)
    dlogits = new_output((M, H), dtype=acc, device=h.device)
    dchi_rows = new_output((M, 2 if freq is not None else 1), dtype=acc, device=h.device)
    zsave = new_output((M, H) if readout is not None else (0,), dtype=h.dtype, device=h.device)
    dp = new_output((M, 2 * H) if readout is not None else (0,), dtype=acc, device=h.device)
    config = _on_cpu(_config("bwd", H, h.dtype, readout is not None), h.device, M, readout is not None, next_pow2(H))
    if M > 0:
        wrap_triton(_gate_fusion_bwd_kernel)[(cdiv(M, config["BLOCK_M"]),)](
            *inputs, *extra[:4], dout2, dout2 if dg2 is None else dg2, dz, dh, dlogits, dchi_rows,
            zsave if readout is not None else dz, dp if readout is not None else dlogits,
            M, H, sc["rows_per_batch"], sc["chi_stride"],
            FREQ=extra[4], HAS_DG=dg2 is not None, READOUT=extra[5], BLOCK_H=next_pow2(H), SPLIT=split,
            DOT_PRECISION=dot_precision(h.dtype), **config)
    saved = (zsave, dp) if readout is not None else None
    return dz.view(h.shape), dh.view(h.shape), dlogits, dchi_rows, saved


def _weight_grad_parts(dlogits, dchi_rows, z2, h2, chi, freq, saved, cublas: bool) -> torch.Tensor:
    """The gate's weight gradients as one flat tensor in dlogits' dtype, [dW_z | dW_h | db], then with the readout
    (saved = (z, dp)) [dW_o | db_o], then dchi: from dlogits [M, H], the per-row dchi [M, E] and the rows z2, h2
    (with the readout z2 holds a). cublas: dW_z, dW_h by torch GEMMs (not with the readout), else weight_grads."""
    per_batch = chi.dim() == 1 and freq is None  # dchi per trajectory: a sum per block of rows
    dchi_batch = dchi_rows.reshape(chi.shape[0], -1).sum(1) if per_batch else None
    if cublas:  # bf16 activations: a bf16 GEMM with fp32 accumulation, as autocast's nn.Linear backward
        if saved is not None:
            raise ValueError("cublas weight gradients are for the plain gate (readout=None)")
        gemm_dtype = torch.bfloat16 if h2.dtype == torch.bfloat16 else dlogits.dtype
        dl_t = dlogits.to(gemm_dtype).T
        sums = column_sums(dlogits, None if per_batch else dchi_rows)  # [db | dchi], or [db] beside dchi_batch
        parts = [(dl_t @ z2.to(gemm_dtype)).flatten(), (dl_t @ h2.to(gemm_dtype)).flatten(), sums]
        return torch.cat([p.to(dlogits.dtype) for p in parts + ([dchi_batch] if per_batch else [])])
    if saved is None:
        products = [(dlogits, z2, h2)]
    else:  # z2 holds a: (dlogits; z formed and saved by the kernel, h) and (dp; a)
        products = [(dlogits, saved[0], h2), (saved[1], z2, None)]
    grads = weight_grads(products, None if per_batch else dchi_rows)
    return torch.cat([grads, dchi_batch]) if per_batch else grads


def gate_grads(h, z, w_z, w_h, b, chi, dout, dg=None, freq=None, readout=None, cublas=False
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The whole backward: (dz, dh, grads) with dz (with readout: da) and dh as gate_fusion_bwd's and
    grads one flat tensor in the accumulation dtype, [dW_z (H x H) | dW_h (H x H) | db (H)], then with
    readout [dW_o (2H x H) | db_o (2H)], then dchi: chi's values (0-dim: 1, [B]: B), or with freq
    (db_omega, dw1). cublas: dW_z, dW_h by torch GEMMs (not with readout)."""
    H = h.shape[-1]  # flattened and made contiguous once, for the kernels and the weight gradients alike
    h2, z2 = h.reshape(-1, H).contiguous(), z.to(h.dtype).reshape(-1, H).contiguous()
    dz, dh, dlogits, dchi_rows, saved = gate_fusion_bwd(h2, z2, w_z, w_h, b, chi, dout, dg, freq, readout)
    grads = _weight_grad_parts(dlogits, dchi_rows, z2, h2, chi, freq, saved, cublas)
    return dz.view(h.shape), dh.view(h.shape), grads


# The cuBLAS method (kernels.limits.gate_method): the GEMMs by torch, the elementwise work in one Triton pass each
# way, over all H columns of BLOCK_M rows (EPILOGUE_TILE elements a program: 16 rows at H = 128, 4 warps).
EPILOGUE_TILE = 2048


def _epilogue_launch(M: int, H: int, device: torch.device) -> tuple[tuple[int], dict]:
    """(grid, launch options) of the cuBLAS method's elementwise kernels."""
    config = _on_cpu({"BLOCK_M": max(1, EPILOGUE_TILE // next_pow2(H)), "num_warps": 4}, device, M)
    return (cdiv(M, config["BLOCK_M"]),), dict(config, BLOCK_H=next_pow2(H))


def gate_cublas_fwd(h, z, w_z, w_h, b, chi, freq=None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """gate_fusion_fwd's (out, g) by the cuBLAS method, and the logits [M, H] (M = rows of h; h's dtype, fp32 or
    fp64) that gate_cublas_grads takes: logits = z w_z^T + h w_h^T + b by two torch GEMMs (the bias in the first
    one's epilogue, the first's result the second's C), then one Triton pass for g and out
    (_gate_cublas_fwd_kernel). h, z as gate_fusion_fwd's, in fp32 or fp64."""
    (h2, z2, w_z, w_h, b, chi1), sc = _prepare(h, z, w_z, w_h, b, chi, None)
    w1, b_omega, _, _, is_freq, _ = _extra_args(chi, freq, None, h.dtype)
    logits = torch.addmm(torch.addmm(b.to(h2.dtype), z2, w_z.t()), h2, w_h.t())
    M, H = sc["M"], sc["H"]
    grid, config = _epilogue_launch(M, H, h.device)
    out, g = (new_output((M, H), dtype=h.dtype, device=h.device) for _ in range(2))
    if M > 0:
        wrap_triton(_gate_cublas_fwd_kernel)[grid](
            logits, h2, z2, chi1, w1, b_omega, out, g, M, H, sc["rows_per_batch"], sc["chi_stride"], FREQ=is_freq,
            **config)
    return out.view(h.shape), g.view(h.shape), logits


def gate_cublas_grads(h, z, w_z, w_h, b, chi, logits, dout, dg=None, freq=None, cublas=False
                      ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """gate_grads' (dz, dh, grads) by the cuBLAS method from gate_cublas_fwd's logits: one Triton pass for the
    elementwise terms (_gate_cublas_bwd_kernel: dlogits, dchi per row, dout g, dout (1 - g)), then dz = dout g +
    dlogits w_z and dh = dout (1 - g) + dlogits w_h by torch GEMMs (the elementwise terms as their C), and the
    weight gradients (cublas: torch GEMMs, else weight_grads) as gate_grads'."""
    (h2, z2, w_z, w_h, _, chi1), sc = _prepare(h, z, w_z, w_h, b, chi, None)
    w1, b_omega, _, _, is_freq, _ = _extra_args(chi, freq, None, h.dtype)
    M, H = sc["M"], sc["H"]
    dout2 = dout.to(h.dtype).reshape(M, H).contiguous()
    dg2 = None if dg is None else dg.to(h.dtype).reshape(M, H).contiguous()
    dz0, dh0, dlogits = (new_output((M, H), dtype=h.dtype, device=h.device) for _ in range(3))
    dchi_rows = new_output((M, 2 if freq is not None else 1), dtype=acc_dtype(h), device=h.device)
    grid, config = _epilogue_launch(M, H, h.device)
    if M > 0:
        wrap_triton(_gate_cublas_bwd_kernel)[grid](
            logits, h2, z2, chi1, w1, b_omega, dout2, dout2 if dg2 is None else dg2, dz0, dh0, dlogits, dchi_rows,
            M, H, sc["rows_per_batch"], sc["chi_stride"], FREQ=is_freq, HAS_DG=dg2 is not None, **config)
    dz, dh = torch.addmm(dz0, dlogits, w_z), torch.addmm(dh0, dlogits, w_h)
    grads = _weight_grad_parts(dlogits, dchi_rows, z2, h2, chi, freq, None, cublas)
    return dz.view(h.shape), dh.view(h.shape), grads
