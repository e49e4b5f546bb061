"""Triton kernels for the adaptive memory gate fusion (op: amg_fast.ops.gate).

    logits = z @ w_z.T + h @ w_h.T + b          h, z [M, H] (rows = all leading dims), w_z, w_h [H, H]
    s      = sigmoid(logits)
    g      = s * chi[row // rows_per_batch]      chi 0-dim (broadcast) or [B]
    out    = g * z + (1 - g) * h

Tiling: one program owns BLOCK_M rows and *all* H output columns (H padded to a power of two
BLOCK_H and masked), so the gate is applied and out, g written once, with no logits in HBM.
The reduction over H runs in BLOCK_K chunks. H is limited to GATE_MAX_H = 256 (kernels/limits.py): the [BLOCK_M, BLOCK_H]
accumulators must fit in registers (the backward keeps two). Wider gates use backend="reference".

Backward (no stored logits, no atomics), per row tile:
  pass 1, full width:  recompute logits -> s, g; dg = dout (z - h) + dg_ext;
                       dlogits = dg chi s (1 - s)  (stored, fp32 / fp64);
                       per-tile partial sums of dlogits over rows (-> db) and per-row sums of dg s
                       (-> dchi), stored and reduced in torch: deterministic, no atomics;
                       dz = dout g, dh = dout (1 - g)  (register accumulators)
  pass 2, over BLOCK_N chunks n of the logits columns (the reduction index of dlogits @ W):
                       recompute logits[:, n] (reduction in BLOCK_KN chunks) -> dlogits[:, n];
                       dz += dlogits[:, n] @ w_z[n, :], dh += dlogits[:, n] @ w_h[n, :]
Pass 2 recomputes a chunk of the logits instead of slicing registers (Triton cannot index a
register tile by column): ~1.5x the minimum GEMM work, for an op bound by HBM traffic.
The weight gradients dlogits^T z, dlogits^T h are GEMMs over all rows, left to cuBLAS by the caller.

Precision: tl.dot inputs are h's dtype (weights are cast to it in-kernel, so fp32 weights work
with bf16 activations); accumulation is fp32, fp64 for fp64 inputs. fp32 dots: see _common.dot_precision.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from amg_fast.kernels._common import acc_dtype, cdiv, dot_precision, new_output, next_pow2
from amg_fast.kernels.limits import GATE_MAX_H

__all__ = ["gate_fusion_fwd", "gate_fusion_bwd", "check_width"]


# ----------------------------------------------------------------------------- device helpers


@triton.jit
def _load_tile(ptr, rows, row_mask, cols, col_mask, H):
    """x[rows, cols] of a row-major [M, H] tensor as [len(rows), len(cols)], 0 outside the masks."""
    return tl.load(ptr + rows[:, None] * H + cols[None, :], mask=row_mask[:, None] & col_mask[None, :], other=0.0)


@triton.jit
def _logits_tile(z_ptr, h_ptr, wz_ptr, wh_ptr, b_ptr, rows, row_mask, cols, col_mask, H,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                 DOT_PRECISION: tl.constexpr):
    """logits[rows, cols] = z[rows] @ w_z[cols].T + h[rows] @ w_h[cols].T + b[cols]: [BLOCK_M, BLOCK_N].

    Reduction over H in BLOCK_K chunks; weights are cast to the activations' dtype for tl.dot.
    Masked rows/columns read zeros (padded columns give logits 0; callers mask them).
    """
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float64 if z_ptr.dtype.element_ty == tl.float64 else tl.float32)
    for k0 in range(0, H, BLOCK_K):
        ks = k0 + tl.arange(0, BLOCK_K)
        k_mask = ks < H
        z = _load_tile(z_ptr, rows, row_mask, ks, k_mask, H)                       # [BLOCK_M, BLOCK_K]
        h = _load_tile(h_ptr, rows, row_mask, ks, k_mask, H)
        w_z = _load_tile(wz_ptr, cols, col_mask, ks, k_mask, H).to(z.dtype)        # [BLOCK_N, BLOCK_K]
        w_h = _load_tile(wh_ptr, cols, col_mask, ks, k_mask, H).to(z.dtype)
        acc = tl.dot(z, tl.trans(w_z), acc, input_precision=DOT_PRECISION, out_dtype=acc.dtype)
        acc = tl.dot(h, tl.trans(w_h), acc, input_precision=DOT_PRECISION, out_dtype=acc.dtype)
    bias = tl.load(b_ptr + cols, mask=col_mask, other=0.0).to(acc.dtype)
    return acc + bias[None, :]


@triton.jit
def _sigmoid(x):
    return 1.0 / (1.0 + tl.exp(-x))


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


@triton.jit
def _dlogits_tile(z_ptr, h_ptr, wz_ptr, wh_ptr, b_ptr, dout_ptr, dg_ptr, chi, rows, row_mask, cols, col_mask,
                  H, HAS_DG: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  BLOCK_K: tl.constexpr, DOT_PRECISION: tl.constexpr):
    """Recompute the gate on [rows, cols] and differentiate it: returns (s, dg, dlogits, dout).

    chi: [BLOCK_M] (one value per row). dg = dout (z - h) + dg_ext; dlogits = dg chi s (1 - s).
    All [BLOCK_M, BLOCK_N] in the accumulation dtype, 0 on masked rows and columns.
    """
    logits = _logits_tile(z_ptr, h_ptr, wz_ptr, wh_ptr, b_ptr, rows, row_mask, cols, col_mask, H,
                          BLOCK_M, BLOCK_N, BLOCK_K, DOT_PRECISION)
    s = _sigmoid(logits)
    z = _load_tile(z_ptr, rows, row_mask, cols, col_mask, H).to(logits.dtype)
    h = _load_tile(h_ptr, rows, row_mask, cols, col_mask, H).to(logits.dtype)
    dout = _load_tile(dout_ptr, rows, row_mask, cols, col_mask, H).to(logits.dtype)
    dg = dout * (z - h)
    if HAS_DG:
        dg += _load_tile(dg_ptr, rows, row_mask, cols, col_mask, H).to(logits.dtype)
    dlogits = dg * chi[:, None] * s * (1.0 - s)
    return s, dg, dlogits, dout


# ----------------------------------------------------------------------------- kernels


@triton.jit
def _gate_fusion_fwd_kernel(
    h_ptr, z_ptr, wz_ptr, wh_ptr, b_ptr, chi_ptr,   # h, z [M, H]; w_z, w_h [H, H]; b [H]; chi [B] or [1]
    w1_ptr, bo_ptr,                                 # FREQ: chi_ptr holds log(omega + eps); w1, b_omega 0-dim
    out_ptr, g_ptr,                                 # out, g [M, H] in h's dtype
    M, H, rows_per_batch, chi_stride,
    FREQ: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_K: tl.constexpr, DOT_PRECISION: tl.constexpr,
):
    """One program: rows [pid*BLOCK_M, +BLOCK_M) x all H columns (padded to BLOCK_H)."""
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_mask = rows < M
    cols = tl.arange(0, BLOCK_H)
    col_mask = cols < H

    logits = _logits_tile(z_ptr, h_ptr, wz_ptr, wh_ptr, b_ptr, rows, row_mask, cols, col_mask, H,
                          BLOCK_M, BLOCK_H, BLOCK_K, DOT_PRECISION)
    chi, _ = _row_chi(chi_ptr, w1_ptr, bo_ptr, rows, row_mask, rows_per_batch, chi_stride, FREQ)
    chi = chi.to(logits.dtype)
    g = _sigmoid(logits) * chi[:, None]
    z = _load_tile(z_ptr, rows, row_mask, cols, col_mask, H).to(logits.dtype)
    h = _load_tile(h_ptr, rows, row_mask, cols, col_mask, H).to(logits.dtype)
    out = g * z + (1.0 - g) * h

    offsets = rows[:, None] * H + cols[None, :]
    mask = row_mask[:, None] & col_mask[None, :]
    tl.store(out_ptr + offsets, out.to(out_ptr.dtype.element_ty), mask=mask)
    tl.store(g_ptr + offsets, g.to(g_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _gate_fusion_bwd_kernel(
    h_ptr, z_ptr, wz_ptr, wh_ptr, b_ptr, chi_ptr,   # as in the forward
    w1_ptr, bo_ptr,
    dout_ptr, dg_ptr,                               # upstream grads of out and g [M, H] (dg unused if not HAS_DG)
    dz_ptr, dh_ptr,                                 # [M, H] in h's dtype
    dlogits_ptr, db_tiles_ptr, dchi_rows_ptr,       # [M, H], [n_programs, H], [M] ([2, M] with FREQ): acc dtype
    M, H, rows_per_batch, chi_stride,
    FREQ: tl.constexpr, HAS_DG: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_K: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_KN: tl.constexpr, DOT_PRECISION: tl.constexpr,
):
    """One program: rows [pid*BLOCK_M, +BLOCK_M) x all H columns; see the module docstring."""
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_mask = rows < M
    cols = tl.arange(0, BLOCK_H)
    col_mask = cols < H
    offsets = rows[:, None] * H + cols[None, :]
    mask = row_mask[:, None] & col_mask[None, :]
    chi, v = _row_chi(chi_ptr, w1_ptr, bo_ptr, rows, row_mask, rows_per_batch, chi_stride, FREQ)
    chi = chi.to(dlogits_ptr.dtype.element_ty)

    # Pass 1, all columns: element-wise terms, dlogits and the partial sums for db and dchi.
    s, dg, dlogits, dout = _dlogits_tile(z_ptr, h_ptr, wz_ptr, wh_ptr, b_ptr, dout_ptr, dg_ptr, chi, rows,
                                         row_mask, cols, col_mask, H, HAS_DG, BLOCK_M, BLOCK_H, BLOCK_K,
                                         DOT_PRECISION)
    tl.store(dlogits_ptr + offsets, dlogits, mask=mask)
    tl.store(db_tiles_ptr + tl.program_id(0) * H + cols, tl.sum(dlogits, axis=0), mask=col_mask)  # 0 on masked rows
    dchi = tl.sum(tl.where(mask, dg * s, 0.0), axis=1)  # dL/dchi per row
    if FREQ:  # through chi = sigmoid(w1 v + b_omega): rows 0 / 1 -> db_omega / dw1 partials
        dchi_logit = dchi * chi * (1.0 - chi)
        tl.store(dchi_rows_ptr + rows, dchi_logit, mask=row_mask)
        tl.store(dchi_rows_ptr + M + rows, dchi_logit * v.to(dchi_logit.dtype), mask=row_mask)
    else:
        tl.store(dchi_rows_ptr + rows, dchi, mask=row_mask)
    g = s * chi[:, None]
    dz = dout * g
    dh = dout - dz

    # Pass 2: dz += dlogits @ w_z, dh += dlogits @ w_h, reducing over chunks n of the logits columns.
    dot_dtype = z_ptr.dtype.element_ty
    for n0 in range(0, H, BLOCK_N):
        ns = n0 + tl.arange(0, BLOCK_N)
        n_mask = ns < H
        _, _, dlogits_n, _ = _dlogits_tile(z_ptr, h_ptr, wz_ptr, wh_ptr, b_ptr, dout_ptr, dg_ptr, chi, rows,
                                           row_mask, ns, n_mask, H, HAS_DG, BLOCK_M, BLOCK_N, BLOCK_KN,
                                           DOT_PRECISION)
        dlogits_n = dlogits_n.to(dot_dtype)                                             # [BLOCK_M, BLOCK_N]
        w_z = _load_tile(wz_ptr, ns, n_mask, cols, col_mask, H).to(dot_dtype)           # [BLOCK_N, BLOCK_H]
        w_h = _load_tile(wh_ptr, ns, n_mask, cols, col_mask, H).to(dot_dtype)
        dz = tl.dot(dlogits_n, w_z, dz, input_precision=DOT_PRECISION, out_dtype=dz.dtype)
        dh = tl.dot(dlogits_n, w_h, dh, input_precision=DOT_PRECISION, out_dtype=dh.dtype)

    tl.store(dz_ptr + offsets, dz.to(dz_ptr.dtype.element_ty), mask=mask)
    tl.store(dh_ptr + offsets, dh.to(dh_ptr.dtype.element_ty), mask=mask)


# ----------------------------------------------------------------------------- launchers


def check_width(H: int) -> None:
    """Raise a ValueError when H exceeds what one program's register tiles hold (GATE_MAX_H)."""
    if H > GATE_MAX_H:
        raise ValueError(f"gate_fusion Triton kernels support H <= {GATE_MAX_H} (all H output columns of a row tile "
                         f"live in one program), got H={H}; use backend='reference' for wider gates")


# Tile choices. For H <= 128 in fp32/bf16 the configs are the fastest of a sweep at the paper
# shape (R*S = 102400 rows, H = 128) on an H200 with triton 3.6; the others (fp64, H = 256) are
# sized to stay well inside shared memory and registers. Every tl.dot dim is >= 16.


def _fwd_config(H: int, dtype: torch.dtype) -> dict:
    """Forward tiles for width H: BLOCK_M rows per program, BLOCK_K reduction chunk, launch options."""
    block_h = next_pow2(H)
    if block_h <= 128 and dtype != torch.float64:
        return {"BLOCK_M": 64, "BLOCK_K": min(block_h, 64), "num_warps": 8 if block_h == 128 else 4,
                "num_stages": 2}
    return {"BLOCK_M": 64 if block_h <= 128 else 32, "BLOCK_K": min(block_h, 32 if block_h <= 128 else 16),
            "num_warps": 4 if block_h <= 64 else 8, "num_stages": 2}


def _bwd_config(H: int, dtype: torch.dtype) -> dict:
    """Backward tiles: BLOCK_K reduction chunk of pass 1, BLOCK_N logits-column chunk of pass 2 and
    BLOCK_KN the reduction chunk of its logits recompute."""
    block_h = next_pow2(H)
    if block_h <= 128 and dtype != torch.float64:
        return {"BLOCK_M": 32, "BLOCK_K": min(block_h, 64), "BLOCK_N": min(block_h, 32),
                "BLOCK_KN": min(block_h, 64), "num_warps": 4, "num_stages": 2}
    return {"BLOCK_M": 32, "BLOCK_K": min(block_h, 32 if block_h <= 128 else 16), "BLOCK_N": min(block_h, 32),
            "BLOCK_KN": min(block_h, 32), "num_warps": 4 if block_h <= 64 else 8, "num_stages": 2}


def _prepare(h, z, w_z, w_h, b, chi):
    """Flatten and make contiguous: (h2, z2 [M, H], w_z, w_h, b, chi1 [B or 1], scalars)."""
    H = h.shape[-1]
    check_width(H)
    h2 = h.reshape(-1, H).contiguous()
    z2 = z.to(h.dtype).reshape(-1, H).contiguous()
    M = h2.shape[0]
    per_batch = chi.dim() == 1
    scalars = {"M": M, "H": H, "rows_per_batch": max(M // chi.shape[0] if per_batch else M, 1),
               "chi_stride": 1 if per_batch else 0}
    return (h2, z2, w_z.contiguous(), w_h.contiguous(), b.contiguous(), chi.reshape(-1).contiguous()), scalars


def _freq_args(chi, freq):
    """(w1, b_omega, FREQ) kernel arguments: freq = (w1, b_omega) 0-dim, or None (chi given;
    chi then stands in for the unused pointers)."""
    if freq is None:
        return chi, chi, False
    return freq[0].reshape(()).contiguous(), freq[1].reshape(()).contiguous(), True


def gate_fusion_fwd(h, z, w_z, w_h, b, chi, freq=None) -> tuple[torch.Tensor, torch.Tensor]:
    """Forward gate. h, z [..., H] (z is cast to h's dtype); w_z, w_h [H, H]; b [H]; chi 0-dim or [B]
    (B = h.shape[0]). Returns (out, g), both [..., H] in h's dtype. H <= GATE_MAX_H.
    freq = (w1, b_omega) (0-dim): chi holds log(omega + eps) and the kernel applies the frequency
    gate chi = sigmoid(w1 chi + b_omega) itself."""
    inputs, sc = _prepare(h, z, w_z, w_h, b, chi)
    w1, b_omega, is_freq = _freq_args(chi, freq)
    out = new_output(inputs[0].shape, dtype=h.dtype, device=h.device)
    g = new_output(inputs[0].shape, dtype=h.dtype, device=h.device)
    if sc["M"] > 0:
        config = _fwd_config(sc["H"], h.dtype)
        grid = (cdiv(sc["M"], config["BLOCK_M"]),)
        torch.library.wrap_triton(_gate_fusion_fwd_kernel)[grid](
            *inputs, w1, b_omega, out, g, sc["M"], sc["H"], sc["rows_per_batch"], sc["chi_stride"],
            FREQ=is_freq, BLOCK_H=next_pow2(sc["H"]), DOT_PRECISION=dot_precision(h.dtype), **config)
    return out.view(h.shape), g.view(h.shape)


def gate_fusion_bwd(h, z, w_z, w_h, b, chi, dout, dg=None, freq=None):
    """Backward through the gate, recomputing the logits. Arguments as gate_fusion_fwd, plus
    dout [..., H] (grad of out) and dg [..., H] or None (grad of g; None means zeros).

    Returns (dz, dh, dlogits, db, dchi):
      dz, dh   [..., H] in h's dtype: full gradients w.r.t. z and h;
      dlogits  [M, H] (M = rows of h) in fp32 (fp64 for fp64 inputs): grad of the pre-sigmoid
               logits, from which the caller forms dw_z = dlogits^T z and dw_h = dlogits^T h;
      db       [H], dchi (chi's shape), same dtype: reduced in torch from per-program / per-row
               partial sums the kernel writes (deterministic).
    With freq = (w1, b_omega) (see gate_fusion_fwd) dchi is instead [2]: (db_omega, dw1), summed
    over all rows (log(omega + eps) gets no gradient).
    """
    inputs, sc = _prepare(h, z, w_z, w_h, b, chi)
    w1, b_omega, is_freq = _freq_args(chi, freq)
    M, H = sc["M"], sc["H"]
    acc = acc_dtype(h)
    dout2 = dout.to(h.dtype).reshape(M, H).contiguous()
    dg2 = None if dg is None else dg.to(h.dtype).reshape(M, H).contiguous()
    dz = new_output((M, H), dtype=h.dtype, device=h.device)
    dh = new_output((M, H), dtype=h.dtype, device=h.device)
    dlogits = new_output((M, H), dtype=acc, device=h.device)
    dchi_rows = new_output((2, M) if is_freq else (M,), dtype=acc, device=h.device)
    config = _bwd_config(H, h.dtype)
    grid = (cdiv(M, config["BLOCK_M"]),)
    db_tiles = new_output((grid[0], H), dtype=acc, device=h.device)
    if M > 0:
        torch.library.wrap_triton(_gate_fusion_bwd_kernel)[grid](
            *inputs, w1, b_omega, dout2, dout2 if dg2 is None else dg2, dz, dh, dlogits, db_tiles, dchi_rows,
            M, H, sc["rows_per_batch"], sc["chi_stride"],
            FREQ=is_freq, HAS_DG=dg2 is not None, BLOCK_H=next_pow2(H), DOT_PRECISION=dot_precision(h.dtype), **config)
    if is_freq:
        return dz.view(h.shape), dh.view(h.shape), dlogits, db_tiles.sum(0), dchi_rows.sum(1)
    B = chi.shape[0] if chi.dim() == 1 else 1
    dchi = dchi_rows.reshape(B, M // B).sum(1).reshape(chi.shape)
    return dz.view(h.shape), dh.view(h.shape), dlogits, db_tiles.sum(0), dchi
