"""Fused feed-forward kernels: y = relu(x W1^T + b1) W2^T + b2 with the [rows, F] hidden activation
kept on chip (never written to memory), forward and backward.

The alternative to ops/ffn.py's cuBLASLt epilogue path (which writes the hidden once and reads it
back): on an H100 the FFN was bound by fp32 arithmetic under cuBLAS (2.40 ms fwd+bwd at S = 128),
which these kernels run on tensor cores with fp32-accurate tf32x3 dots, and under TF32 it was
2.4x its HBM floor with the hidden through memory (bench/probe_ffn.py). Dots: tf32x3 in fp32 mode,
tf32 when TF32 matmuls are allowed, bf16 operands for bf16 (_common.dot_precision). Measured on an
H200 (2026-11-27), fwd + bwd at S = 128: 6.10 ms in fp32 against the epilogue's 2.30, 3.28 against
0.858 under TF32 (the recompute and the weight-gradient kernel's partial sums cost more than the
hidden's round trip saves), so "auto" takes the epilogue (kernels/limits.py, FFN_AUTO_METHOD) and
these kernels run only for method="fused" / AMG_FAST_FFN_METHOD=fused.

Kernels (x [M, H_in], W1 [F, H_in], W2 [H_out, F], nn.Linear layout; H_in, H_out <= FFN_FUSED_MAX_H):
  _ffn_fwd_kernel     one program per BLOCK_M rows: x tile and the [BLOCK_M, H_out] accumulator in
                      registers; for each BLOCK_F slice of F: h = relu(x W1[f]^T + b1[f]) (on chip),
                      acc += h W2[:, f]^T; y = acc + b2 (+ the residual, the FFNO block's x).
  _ffn_bwd_dx_kernel  one program per BLOCK_M rows: recomputes the pre-activation per F slice,
                      dh = (dy W2[:, f]) masked where it is <= 0, dx += dh W1[f].
  _ffn_bwd_dw_kernel  one program per (F slice, group of rows): recomputes h and dh over its rows and
                      writes partial sums of dW1[f], dW2[:, f], db1[f] (and db2 from the first F
                      slice) to one buffer, reduced over the row groups by one torch sum
                      (deterministic: no atomics). Both weight products put the channels on the MMA's
                      M side (dW1[f]^T = x^T dh, dW2[:, f] = dy^T h: M = H, Hopper's wgmma); with
                      RELOAD_T their x^T, dy^T operands are loaded again, transposed (from L1 / L2),
                      instead of transposing the register tiles of the recompute: in fp32 mode
                      (tf32x3 splits every operand) the register tiles then need not stay live
                      across all four dots.
Three launches forward + backward (plus the reduction), against two GEMMs forward and seven
kernels backward on the epilogue path; the price is recomputing x W1^T (twice) and dy W2 (twice)
in the backward.
"""
from __future__ import annotations

import contextlib

import torch
import triton
import triton.language as tl

from amg_fast.kernels._common import acc_dtype, cdiv, dot_operand, dot_precision, new_output, next_pow2, wrap_triton
from amg_fast.kernels.limits import FFN_FUSED_MAX_H

__all__ = ["feed_forward_fwd", "feed_forward_bwd", "split_weight_grads", "LAUNCH_POLICY", "DW_ALTERNATIVES",
           "use_dw_tiling"]

# Tiles per device type: "fwd" / "bwd" (dx) / "dw" the kernels' BLOCK_M, BLOCK_F, num_warps and num_stages
# (untuned on a GPU; "<kernel>_fp64" for fp64 inputs and "<kernel>_tf32x3" for fp32 mode's tf32x3 dots,
# where given), "dw_programs" the (F slices) x (row groups) aimed at for the weight-gradient kernel.
# Shared memory per program, compiled for sm_90 by triton 3.6 at H = 128 (bench/compile_sm90.py; an H100
# block takes 227 KB): the backward at Triton's default 3 stages needed 256 KB in fp32 (tf32x3 splits
# every operand) and 336 KB in fp64, so it pipelines 2 stages (fp32 dx 208 KB) and fp64 runs half the
# rows on 4 warps without pipelining (fwd / dx / dw 72 / 104 / 136 KB). The weight-gradient kernel,
# compiled the same way (2026-11-27): with the dx kernel's 64 x 32 tiles it spilled 2.4 KB a thread in
# fp32 mode (255 registers; 72 bytes in TF32), one of its four dots on mma.sync; with both weight
# products on the channels' side (wgmma) 1.9 KB in fp32, none in TF32 / bf16 ("dw"); fp32 mode's
# "dw_tf32x3" (16 rows x 64 F columns, x^T and dy^T reloaded) spills nothing in fp32 (of ~40 tilings
# tried only it and 32 x 16 did; 168 KB of shared memory; its 8 F slices read the rows twice, as often
# as 16 slices of 32 columns read them once, a quarter of 32 x 16's reads). Untimed: bench/probe_ffn.py
# times the alternatives (DW_ALTERNATIVES).
# On the H200 (2026-11-27, results/gpu/20261127-1354-h200/probes/ffn_fault*) triton 3.6 compiled the bf16
# dx kernel with num_stages=1 into one that returned garbage (relative error 21.6; right with 2 or 3
# stages): keep bf16 entries pipelined (the fp64 entries' single stage passed the CUDA tests).
# On CPU (Triton's interpreter) every program and loop step costs a fixed overhead, so there the tiles
# are as large as the shapes allow; tests patch in the "cuda" policy to run the GPU tiling.
LAUNCH_POLICY = {
    "cuda": {"fwd": dict(BLOCK_M=64, BLOCK_F=32, num_warps=8),
             "bwd": dict(BLOCK_M=64, BLOCK_F=32, num_warps=8, num_stages=2),
             "dw": dict(BLOCK_M=64, BLOCK_F=32, num_warps=8, num_stages=2, RELOAD_T=False),
             "dw_tf32x3": dict(BLOCK_M=16, BLOCK_F=64, num_warps=8, num_stages=2, RELOAD_T=True),
             "fwd_fp64": dict(BLOCK_M=32, BLOCK_F=32, num_warps=4, num_stages=1),
             "bwd_fp64": dict(BLOCK_M=32, BLOCK_F=32, num_warps=4, num_stages=1),
             "dw_fp64": dict(BLOCK_M=32, BLOCK_F=32, num_warps=4, num_stages=1, RELOAD_T=False),
             "dw_programs": 256},
    "cpu": {"fwd": dict(BLOCK_M=256, BLOCK_F=128, num_warps=4), "bwd": dict(BLOCK_M=256, BLOCK_F=128, num_warps=4),
            "dw": dict(BLOCK_M=256, BLOCK_F=128, num_warps=4, RELOAD_T=False), "dw_programs": 1},
}
# The weight-gradient tilings bench/probe_ffn.py times on a GPU in every mode (fp32, TF32, bf16), each in
# place of both "dw" and "dw_tf32x3": "dw"'s (the dx kernel's tiles, which the kernel took before 2026-11-27)
# and "dw_tf32x3"'s.
DW_ALTERNATIVES = {"64x32": dict(BLOCK_M=64, BLOCK_F=32, num_warps=8, num_stages=2, RELOAD_T=False),
                   "16x64-reload": dict(BLOCK_M=16, BLOCK_F=64, num_warps=8, num_stages=2, RELOAD_T=True)}


@contextlib.contextmanager
def use_dw_tiling(name: str, device_type: str = "cuda"):
    """Within the block, DW_ALTERNATIVES[name] as the device type's weight-gradient tiles in every mode
    (in place of its "dw" and "dw_tf32x3" entries); the policy restored afterwards."""
    policy = LAUNCH_POLICY[device_type]
    saved = dict(policy)
    policy.update(dw=DW_ALTERNATIVES[name], dw_tf32x3=DW_ALTERNATIVES[name])
    try:
        yield
    finally:
        policy.clear()
        policy.update(saved)


@triton.jit
def _tile(ptr, rows, row_mask, cols, col_mask, stride_r, stride_c):
    """ptr[rows * stride_r + cols * stride_c] as [len(rows), len(cols)], 0 outside the masks."""
    return tl.load(ptr + rows[:, None] * stride_r + cols[None, :] * stride_c,
                   mask=row_mask[:, None] & col_mask[None, :], other=0.0)


@triton.jit
def _relu(pre):
    """max(pre, 0) with NaN kept (as torch.relu): tl.maximum's default drops NaN on a GPU (PTX max),
    which would hide a diverging run; the interpreter keeps it either way."""
    return tl.maximum(pre, 0.0, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def _plus_residual(acc, res):
    """acc + res (tiles) in the wider of their dtypes: an fp64 residual keeps its digits."""
    sum_t = tl.float64 if res.dtype == tl.float64 else acc.dtype
    return acc.to(sum_t) + res.to(sum_t)


@triton.jit
def _row_block(x_ptr, M, H_in, H_out, BLOCK_M: tl.constexpr, BLOCK_I: tl.constexpr, BLOCK_O: tl.constexpr):
    """This program's rows (BLOCK_M of M), the input and output columns with their masks, and its
    x tile [BLOCK_M, BLOCK_I]."""
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)  # int64: rows * H may pass 2**31
    ci = tl.arange(0, BLOCK_I)
    co = tl.arange(0, BLOCK_O)
    x = _tile(x_ptr, rows, rows < M, ci, ci < H_in, H_in, 1)
    return rows, rows < M, ci, ci < H_in, co, co < H_out, x


@triton.jit
def _pre_activation(x, w1_ptr, b1_ptr, fs, f_mask, ci, ci_mask, H_in, acc, DOT_PRECISION: tl.constexpr):
    """x W1[fs]^T + b1[fs]: [BLOCK_M, BLOCK_F] in acc's dtype (acc: a zero tile of that shape).
    Padded F columns are 0 (so relu gives 0 there)."""
    w1t = _tile(w1_ptr, ci, ci_mask, fs, f_mask, 1, H_in).to(x.dtype)  # W1^T slice [BLOCK_I, BLOCK_F]
    pre = tl.dot(x, w1t, acc, input_precision=DOT_PRECISION, out_dtype=acc.dtype)
    return pre + tl.load(b1_ptr + fs, mask=f_mask, other=0.0).to(acc.dtype)[None, :]


@triton.jit
def _ffn_fwd_kernel(x_ptr, w1_ptr, b1_ptr, w2_ptr, b2_ptr, res_ptr, y_ptr, M, H_in, F, H_out,
                    RESIDUAL: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_I: tl.constexpr, BLOCK_F: tl.constexpr,
                    BLOCK_O: tl.constexpr, DOT_PRECISION: tl.constexpr):
    rows, row_mask, ci, ci_mask, co, co_mask, x = _row_block(x_ptr, M, H_in, H_out, BLOCK_M, BLOCK_I, BLOCK_O)
    acc_t = tl.float64 if x_ptr.dtype.element_ty == tl.float64 else tl.float32
    acc = tl.zeros((BLOCK_M, BLOCK_O), dtype=acc_t)
    for f0 in range(0, F, BLOCK_F):
        fs = f0 + tl.arange(0, BLOCK_F)
        f_mask = fs < F
        pre = _pre_activation(x, w1_ptr, b1_ptr, fs, f_mask, ci, ci_mask, H_in,
                              tl.zeros((BLOCK_M, BLOCK_F), dtype=acc_t), DOT_PRECISION)
        h = _relu(pre).to(x.dtype)
        w2t = _tile(w2_ptr, fs, f_mask, co, co_mask, 1, F).to(x.dtype)  # W2^T slice [BLOCK_F, BLOCK_O]
        acc = tl.dot(h, w2t, acc, input_precision=DOT_PRECISION, out_dtype=acc_t)
    y = acc + tl.load(b2_ptr + co, mask=co_mask, other=0.0).to(acc_t)[None, :]
    if RESIDUAL:  # the FFNO block's x + FeedForward(...), added in the epilogue
        y = _plus_residual(y, _tile(res_ptr, rows, row_mask, co, co_mask, H_out, 1))
    tl.store(y_ptr + rows[:, None] * H_out + co[None, :], y.to(y_ptr.dtype.element_ty),
             mask=row_mask[:, None] & co_mask[None, :])


@triton.jit
def _masked_hidden_grad(x, dy, w1_ptr, b1_ptr, w2_ptr, fs, f_mask, ci, ci_mask, co, co_mask, H_in, F, zero,
                        DOT_PRECISION: tl.constexpr):
    """(pre, dh) on [BLOCK_M, BLOCK_F]: the recomputed pre-activation and dh = (dy W2[:, fs]) where
    pre > 0, else 0 (the ReLU's gradient, as threshold_backward)."""
    pre = _pre_activation(x, w1_ptr, b1_ptr, fs, f_mask, ci, ci_mask, H_in, zero, DOT_PRECISION)
    w2s = _tile(w2_ptr, co, co_mask, fs, f_mask, F, 1).to(dy.dtype)  # W2[:, fs] [BLOCK_O, BLOCK_F]
    dh = tl.dot(dy, w2s, zero, input_precision=DOT_PRECISION, out_dtype=zero.dtype)
    return pre, tl.where(pre > 0, dh, 0.0)


@triton.jit
def _ffn_bwd_dx_kernel(x_ptr, w1_ptr, b1_ptr, w2_ptr, dy_ptr, dx_ptr, M, H_in, F, H_out,
                       BLOCK_M: tl.constexpr, BLOCK_I: tl.constexpr, BLOCK_F: tl.constexpr, BLOCK_O: tl.constexpr,
                       DOT_PRECISION: tl.constexpr):
    rows, row_mask, ci, ci_mask, co, co_mask, x = _row_block(x_ptr, M, H_in, H_out, BLOCK_M, BLOCK_I, BLOCK_O)
    dy = _tile(dy_ptr, rows, row_mask, co, co_mask, H_out, 1).to(x.dtype)
    acc_t = tl.float64 if x_ptr.dtype.element_ty == tl.float64 else tl.float32
    dx = tl.zeros((BLOCK_M, BLOCK_I), dtype=acc_t)
    for f0 in range(0, F, BLOCK_F):
        fs = f0 + tl.arange(0, BLOCK_F)
        f_mask = fs < F
        _, dh = _masked_hidden_grad(x, dy, w1_ptr, b1_ptr, w2_ptr, fs, f_mask, ci, ci_mask, co, co_mask, H_in, F,
                                    tl.zeros((BLOCK_M, BLOCK_F), dtype=acc_t), DOT_PRECISION)
        w1s = _tile(w1_ptr, fs, f_mask, ci, ci_mask, H_in, 1).to(x.dtype)  # W1[fs] [BLOCK_F, BLOCK_I]
        dx = tl.dot(dh.to(x.dtype), w1s, dx, input_precision=DOT_PRECISION, out_dtype=acc_t)
    tl.store(dx_ptr + rows[:, None] * H_in + ci[None, :], dx.to(dx_ptr.dtype.element_ty),
             mask=row_mask[:, None] & ci_mask[None, :])


@triton.jit
def _ffn_bwd_dw_kernel(x_ptr, w1_ptr, b1_ptr, w2_ptr, dy_ptr, part_ptr, M, H_in, F, H_out, rows_per_group,
                       part_stride,
                       BLOCK_M: tl.constexpr, BLOCK_I: tl.constexpr, BLOCK_F: tl.constexpr, BLOCK_O: tl.constexpr,
                       DOT_PRECISION: tl.constexpr, RELOAD_T: tl.constexpr):
    """Partial sums over one group of rows, into part[group] = [dW1 (F x H_in) | dW2 (H_out x F) |
    db1 (F) | db2 (H_out)] (db2 from the first F slice's programs only)."""
    pid_f = tl.program_id(0)
    group = tl.program_id(1)
    fs = pid_f * BLOCK_F + tl.arange(0, BLOCK_F)
    f_mask = fs < F
    ci = tl.arange(0, BLOCK_I)
    ci_mask = ci < H_in
    co = tl.arange(0, BLOCK_O)
    co_mask = co < H_out
    acc_t = tl.float64 if x_ptr.dtype.element_ty == tl.float64 else tl.float32
    dw1t = tl.zeros((BLOCK_I, BLOCK_F), dtype=acc_t)  # dW1[fs]^T
    dw2 = tl.zeros((BLOCK_O, BLOCK_F), dtype=acc_t)
    db1 = tl.zeros((BLOCK_F,), dtype=acc_t)
    db2 = tl.zeros((BLOCK_O,), dtype=acc_t)
    first = group * rows_per_group
    for m0 in range(0, rows_per_group, BLOCK_M):
        rows = (first + m0 + tl.arange(0, BLOCK_M)).to(tl.int64)
        row_mask = (rows < M) & (rows < first + rows_per_group)
        x = _tile(x_ptr, rows, row_mask, ci, ci_mask, H_in, 1)
        dy = _tile(dy_ptr, rows, row_mask, co, co_mask, H_out, 1).to(x.dtype)
        pre, dh = _masked_hidden_grad(x, dy, w1_ptr, b1_ptr, w2_ptr, fs, f_mask, ci, ci_mask, co, co_mask, H_in, F,
                                      tl.zeros((BLOCK_M, BLOCK_F), dtype=acc_t), DOT_PRECISION)
        h = _relu(pre).to(x.dtype)
        if RELOAD_T:  # x^T [BLOCK_I, BLOCK_M], dy^T [BLOCK_O, BLOCK_M] loaded again (just read: L1 / L2)
            xt = _tile(x_ptr, ci, ci_mask, rows, row_mask, 1, H_in)
            dyt = _tile(dy_ptr, co, co_mask, rows, row_mask, 1, H_out).to(x.dtype)
        else:
            xt = tl.trans(x)
            dyt = tl.trans(dy)
        dw1t = tl.dot(xt, dh.to(x.dtype), dw1t, input_precision=DOT_PRECISION, out_dtype=acc_t)
        dw2 = tl.dot(dyt, h, dw2, input_precision=DOT_PRECISION, out_dtype=acc_t)
        db1 += tl.sum(dh, axis=0)
        db2 += tl.sum(dy.to(acc_t), axis=0)
    part = part_ptr + group * part_stride
    tl.store(part + fs[None, :] * H_in + ci[:, None], dw1t, mask=ci_mask[:, None] & f_mask[None, :])
    tl.store(part + F * H_in + co[:, None] * F + fs[None, :], dw2, mask=co_mask[:, None] & f_mask[None, :])
    tl.store(part + F * H_in + H_out * F + fs, db1, mask=f_mask)
    db2_cols = tl.where(pid_f == 0, H_out, 0)  # db2 from the first F slice's programs only
    tl.store(part + F * H_in + H_out * F + F + co, db2, mask=co < db2_cols)


# ----------------------------------------------------------------------------- launchers
def _check(x: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, **same_dtype: torch.Tensor) -> tuple[int, int, int, int]:
    """(M, H_in, F, H_out) of contiguous 2-D x [M, H_in] and nn.Linear weights; refuses widths the
    register tiles cannot hold and weights (w1, w2 and same_dtype's) of another dtype than x's: with
    fp32 weights and bf16 x triton 3.6 compiled the dx kernel for sm_90 into one that read out of
    bounds (or, with fp32 dy, returned garbage; H200, 2026-11-27), so the op casts them first."""
    for name, t in dict(w1=w1, w2=w2, **same_dtype).items():
        if t.dtype != x.dtype:
            raise TypeError(f"feed_forward kernels: {name} is {t.dtype}, x is {x.dtype}; the kernels take the "
                            "weights in x's dtype (cast them first, as ops.ffn.feed_forward does)")
    M, h_in = x.shape
    hidden, h_out = w1.shape[0], w2.shape[0]
    for name, width in (("H_in", h_in), ("H_out", h_out)):
        if width > FFN_FUSED_MAX_H:
            raise ValueError(f"feed_forward method='fused': {name} = {width} is above the kernels' limit "
                             f"{FFN_FUSED_MAX_H} (kernels.limits.FFN_FUSED_MAX_H); use method='epilogue'")
    return M, h_in, hidden, h_out


def _policy(device: torch.device) -> dict:
    return LAUNCH_POLICY.get(device.type, LAUNCH_POLICY["cuda"])


def _blocks(device: torch.device, which: str, M: int, h_in: int, h_out: int, dtype: torch.dtype, dots: str) -> dict:
    """The launch tiles: the policy's which + "_fp64" entry for fp64 inputs, which + "_" + dots (e.g.
    "dw_tf32x3") for fp32 inputs, where it has one, else which; BLOCK_M no larger than M needs on CPU
    (the interpreter's cost grows with the tile)."""
    policy = _policy(device)
    special = f"{which}_fp64" if dtype == torch.float64 else f"{which}_{dots}"
    tiles = policy.get(special, policy[which])
    cfg = dict(tiles, BLOCK_I=next_pow2(h_in), BLOCK_O=next_pow2(h_out))
    if device.type == "cpu":
        cfg["BLOCK_M"] = min(cfg["BLOCK_M"], next_pow2(M))
    return cfg


def feed_forward_fwd(x, w1, b1, w2, b2, residual=None) -> torch.Tensor:
    """y [M, H_out] = relu(x W1^T + b1) W2^T + b2 (+ residual [M, H_out]) for contiguous x [M, H_in] and
    weights in x's dtype; y in the residual's dtype when given (it may be wider than x's), else x's."""
    M, h_in, hidden, h_out = _check(x, w1, w2, b1=b1, b2=b2)
    y = new_output((M, h_out), dtype=x.dtype if residual is None else residual.dtype, device=x.device)
    if M > 0:
        dots = dot_precision(x.dtype, reduced=True)
        cfg = _blocks(x.device, "fwd", M, h_in, h_out, x.dtype, dots)
        wrap_triton(_ffn_fwd_kernel)[(cdiv(M, cfg["BLOCK_M"]),)](
            x, w1, b1, w2, b2, y if residual is None else residual, y, M, h_in, hidden, h_out,
            RESIDUAL=residual is not None, DOT_PRECISION=dots, **cfg)
    return y


def split_weight_grads(flat: torch.Tensor, hidden: int, h_in: int, h_out: int) -> tuple[torch.Tensor, ...]:
    """feed_forward_bwd's flat weight gradients -> (dw1 [F, H_in], db1 [F], dw2 [H_out, F], db2 [H_out]) views."""
    dw1, dw2, db1, db2 = flat.split((hidden * h_in, h_out * hidden, hidden, h_out))
    return dw1.view(hidden, h_in), db1, dw2.view(h_out, hidden), db2


def feed_forward_bwd(dy, x, w1, b1, w2, need_dx: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """(dx, flat weight gradients) for dy [M, H_out]: dx [M, H_in] in x's dtype (empty, and its
    kernel not launched, without need_dx), and [dW1 | dW2 | db1 | db2] flattened in w1's dtype
    (split_weight_grads takes it apart; one tensor, as a custom op's outputs may not alias each other).
    dy of any float dtype: cast to x's first (_common.dot_operand)."""
    M, h_in, hidden, h_out = _check(x, w1, w2, b1=b1)
    dy = dot_operand(dy, x.dtype)
    dots = dot_precision(x.dtype, reduced=True)
    cfg = _blocks(x.device, "bwd", M, h_in, h_out, x.dtype, dots)
    dw_cfg = _blocks(x.device, "dw", M, h_in, h_out, x.dtype, dots)
    dx = new_output((M, h_in) if need_dx else (0,), dtype=x.dtype, device=x.device)
    n_f = cdiv(hidden, dw_cfg["BLOCK_F"])
    groups = max(1, min(cdiv(M, dw_cfg["BLOCK_M"]), _policy(x.device)["dw_programs"] // n_f))
    rows_per_group = cdiv(cdiv(M, groups), dw_cfg["BLOCK_M"]) * dw_cfg["BLOCK_M"]
    sizes = (hidden * h_in, h_out * hidden, hidden, h_out)
    part = new_output((groups, sum(sizes)), dtype=acc_dtype(x), device=x.device)
    if M > 0 and need_dx:
        wrap_triton(_ffn_bwd_dx_kernel)[(cdiv(M, cfg["BLOCK_M"]),)](
            x, w1, b1, w2, dy, dx, M, h_in, hidden, h_out, DOT_PRECISION=dots, **cfg)
    if M > 0:
        wrap_triton(_ffn_bwd_dw_kernel)[(n_f, groups)](
            x, w1, b1, w2, dy, part, M, h_in, hidden, h_out, rows_per_group, part.stride(0),
            DOT_PRECISION=dots, **dw_cfg)
    else:
        part.zero_()
    return dx, part.sum(0).to(w1.dtype)
