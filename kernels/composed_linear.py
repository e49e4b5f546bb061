"""Two Linears with no activation between, run as one narrow Linear: the FFNO decoder H -> 128 -> C.

    y = (x W1^T + b1) W2^T + b2 = x W^T + b,   W = W2 W1 [C, H],  b = W2 b1 + b2 [C]

x [M, H] activation rows, W1 [F, H], b1 [F], W2 [C, F], b2 [C] (nn.Linear layout), C <= COMPOSED_MAX_C
outputs (1 for the paper's scalar fields). Forward, one launch: each program forms W and b itself (F H C
fused multiply-adds, in the accumulation dtype) and streams its row tiles, y[:, c] = sum_h x[:, h] W[c, h]
+ b[c]. Backward, two launches: (1) dx = dy W and each program's partial sums of dW = dy^T x and db =
sum dy over its rows; (2) one program sums the partials and forms the parameters' gradients

    dW1 = W2^T dW,   db1 = W2^T db,   dW2 = dW W1^T + db b1^T,   db2 = db.

Why (issue 19: at most 100 kernels a step, the small ops folded): the reference (ops.decoder.composed_linear_ref)
runs W2 W1, the bias's addmv and the GEMM forward, and eight kernels backward (two GEMMs and a bias sum for
the Linear, four weight-side products and an add for the composition) plus cuBLAS's split-K reduction for
dW = dy^T x: 12 on a GPU against these 3, and one pass over x fewer in the backward (dx and dW's partial
sums from one read). All arithmetic is on the CUDA cores (C columns: no tensor-core shape), fp32 (or fp64)
accumulation whatever the precision mode, so the composition is at least as accurate as the reference's.
The rows are int64 offsets; every program runs the same loop over its row tiles (grid-stride), so W is
formed once per program.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from amg_fast.kernels._common import acc_dtype, for_device, new_output, next_pow2, wrap_triton
from amg_fast.kernels._rows import ROW_STREAM_POLICY, row_stream_tiling, to_acc

__all__ = ["composed_linear_fwd", "composed_linear_bwd", "COMPOSED_MAX_C", "COMPOSED_MAX_H", "LAUNCH_POLICY"]

# The kernels hold W [C_PAD, H_PAD] and one [BLOCK_M, H_PAD] row tile in registers: C <= COMPOSED_MAX_C outputs,
# H <= COMPOSED_MAX_H inputs (the hidden F is looped over, any size).
COMPOSED_MAX_C = 8
COMPOSED_MAX_H = 512
# The launch policy (kernels._rows.ROW_STREAM_POLICY: the row tile's register budget, the grid).
LAUNCH_POLICY = {device: dict(policy) for device, policy in ROW_STREAM_POLICY.items()}


# ----------------------------------------------------------------------------- kernels


@triton.jit
def _composed_weight(w1_ptr, b1_ptr, w2_ptr, b2_ptr, F, H, C, FP64: tl.constexpr, C_PAD: tl.constexpr,
                     H_PAD: tl.constexpr, BLOCK_F: tl.constexpr):
    """(W [C_PAD, H_PAD] = W2 W1, b [C_PAD] = W2 b1 + b2), 0 outside [C, H], in the accumulation dtype."""
    cs = tl.arange(0, C_PAD)
    hs = tl.arange(0, H_PAD)
    w = tl.zeros((C_PAD, H_PAD), dtype=tl.float64 if FP64 else tl.float32)
    b = to_acc(tl.load(b2_ptr + cs, mask=cs < C, other=0.0), FP64)
    for f0 in range(0, F, BLOCK_F):
        fs = f0 + tl.arange(0, BLOCK_F)
        w1 = to_acc(tl.load(w1_ptr + fs[:, None] * H + hs[None, :], mask=(fs < F)[:, None] & (hs < H)[None, :],
                          other=0.0), FP64)                                                  # [BLOCK_F, H_PAD]
        w2 = to_acc(tl.load(w2_ptr + cs[:, None] * F + fs[None, :], mask=(cs < C)[:, None] & (fs < F)[None, :],
                          other=0.0), FP64)                                                  # [C_PAD, BLOCK_F]
        b1 = to_acc(tl.load(b1_ptr + fs, mask=fs < F, other=0.0), FP64)
        w += tl.sum(w2[:, :, None] * w1[None, :, :], axis=1)
        b += tl.sum(w2 * b1[None, :], axis=1)
    return w, b


@triton.jit
def _row(t, cs, c):
    """Row c of t [C_PAD, N] as [N] (a masked sum: registers cannot be indexed)."""
    return tl.sum(tl.where(cs[:, None] == c, t, 0.0), axis=0)


@triton.jit
def _composed_linear_fwd_kernel(x_ptr, w1_ptr, b1_ptr, w2_ptr, b2_ptr, y_ptr, M, F, H, C,
                                FP64: tl.constexpr, C_PAD: tl.constexpr, H_PAD: tl.constexpr,
                                BLOCK_M: tl.constexpr, BLOCK_F: tl.constexpr, STAGES: tl.constexpr):
    """y [M, C] = x [M, H] W^T + b, W and b formed by each program; row tiles pid, pid + grid, ..."""
    w, b = _composed_weight(w1_ptr, b1_ptr, w2_ptr, b2_ptr, F, H, C, FP64, C_PAD, H_PAD, BLOCK_F)
    cs = tl.arange(0, C_PAD)
    hs = tl.arange(0, H_PAD)
    for m0 in tl.range(tl.program_id(0) * BLOCK_M, M, tl.num_programs(0) * BLOCK_M, num_stages=STAGES):
        rows = m0 + tl.arange(0, BLOCK_M).to(tl.int64)
        rmask = rows < M
        x = to_acc(tl.load(x_ptr + rows[:, None] * H + hs[None, :], mask=rmask[:, None] & (hs < H)[None, :],
                         other=0.0), FP64)
        for c in tl.static_range(C_PAD):
            if c < C:
                y = tl.sum(x * _row(w, cs, c)[None, :], axis=1) + tl.sum(tl.where(cs == c, b, 0.0), axis=0)
                tl.store(y_ptr + rows * C + c, y.to(y_ptr.dtype.element_ty), mask=rmask)


@triton.jit
def _composed_linear_bwd_kernel(dy_ptr, x_ptr, w1_ptr, b1_ptr, w2_ptr, b2_ptr, dx_ptr, part_w_ptr, part_b_ptr,
                                M, F, H, C, NEED_DX: tl.constexpr, FP64: tl.constexpr, C_PAD: tl.constexpr,
                                H_PAD: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_F: tl.constexpr,
                                STAGES: tl.constexpr):
    """dx [M, H] = dy [M, C] W (when NEED_DX); part_w [G, C_PAD, H_PAD] = this program's rows' dy^T x,
    part_b [G, C_PAD] = their sum of dy (accumulation dtype), over the same row tiles as the forward."""
    w, b = _composed_weight(w1_ptr, b1_ptr, w2_ptr, b2_ptr, F, H, C, FP64, C_PAD, H_PAD, BLOCK_F)
    cs = tl.arange(0, C_PAD)
    hs = tl.arange(0, H_PAD)
    dw = tl.zeros((C_PAD, H_PAD), dtype=w.dtype)
    db = tl.zeros((C_PAD,), dtype=w.dtype)
    for m0 in tl.range(tl.program_id(0) * BLOCK_M, M, tl.num_programs(0) * BLOCK_M, num_stages=STAGES):
        rows = m0 + tl.arange(0, BLOCK_M).to(tl.int64)
        rmask = rows < M
        tile = rmask[:, None] & (hs < H)[None, :]
        x = to_acc(tl.load(x_ptr + rows[:, None] * H + hs[None, :], mask=tile, other=0.0), FP64)
        g = to_acc(tl.load(dy_ptr + rows[:, None] * C + cs[None, :], mask=rmask[:, None] & (cs < C)[None, :],
                         other=0.0), FP64)                                                   # [BLOCK_M, C_PAD]
        db += tl.sum(g, axis=0)
        dx = tl.zeros((BLOCK_M, H_PAD), dtype=w.dtype)
        for c in tl.static_range(C_PAD):
            if c < C:
                gc = tl.sum(tl.where(cs[None, :] == c, g, 0.0), axis=1)                     # [BLOCK_M]
                dx += gc[:, None] * _row(w, cs, c)[None, :]
                dw += tl.where(cs[:, None] == c, tl.sum(gc[:, None] * x, axis=0)[None, :], 0.0)
        if NEED_DX:
            tl.store(dx_ptr + rows[:, None] * H + hs[None, :], dx.to(dx_ptr.dtype.element_ty), mask=tile)
    pid = tl.program_id(0).to(tl.int64)
    tl.store(part_w_ptr + pid * C_PAD * H_PAD + cs[:, None] * H_PAD + hs[None, :], dw)
    tl.store(part_b_ptr + pid * C_PAD + cs, db)


@triton.jit
def _composed_linear_wgrad_kernel(part_w_ptr, part_b_ptr, w1_ptr, b1_ptr, w2_ptr, dw1_ptr, db1_ptr, dw2_ptr, db2_ptr,
                                  G, F, H, C, FP64: tl.constexpr, C_PAD: tl.constexpr, H_PAD: tl.constexpr,
                                  BLOCK_F: tl.constexpr):
    """One program: dW [C, H] and db [C] summed over the G partials (in order), then dW1 = W2^T dW,
    db1 = W2^T db, dW2 = dW W1^T + db b1^T, db2 = db, each in its output's dtype."""
    cs = tl.arange(0, C_PAD)
    hs = tl.arange(0, H_PAD)
    dw = tl.zeros((C_PAD, H_PAD), dtype=tl.float64 if FP64 else tl.float32)
    db = tl.zeros((C_PAD,), dtype=dw.dtype)
    for g in range(0, G):
        dw += tl.load(part_w_ptr + g * C_PAD * H_PAD + cs[:, None] * H_PAD + hs[None, :])
        db += tl.load(part_b_ptr + g * C_PAD + cs)
    tl.store(db2_ptr + cs, db.to(db2_ptr.dtype.element_ty), mask=cs < C)
    for f0 in range(0, F, BLOCK_F):
        fs = f0 + tl.arange(0, BLOCK_F)
        fmask = fs < F
        w1_tile = fmask[:, None] & (hs < H)[None, :]
        w1 = to_acc(tl.load(w1_ptr + fs[:, None] * H + hs[None, :], mask=w1_tile, other=0.0), FP64)  # [BLOCK_F, H_PAD]
        w2_tile = (cs < C)[:, None] & fmask[None, :]
        w2 = to_acc(tl.load(w2_ptr + cs[:, None] * F + fs[None, :], mask=w2_tile, other=0.0), FP64)  # [C_PAD, BLOCK_F]
        b1 = to_acc(tl.load(b1_ptr + fs, mask=fmask, other=0.0), FP64)
        dw1 = tl.sum(w2[:, :, None] * dw[:, None, :], axis=0)                                   # [BLOCK_F, H_PAD]
        tl.store(dw1_ptr + fs[:, None] * H + hs[None, :], dw1.to(dw1_ptr.dtype.element_ty), mask=w1_tile)
        tl.store(db1_ptr + fs, tl.sum(w2 * db[:, None], axis=0).to(db1_ptr.dtype.element_ty), mask=fmask)
        dw2 = tl.sum(dw[:, None, :] * w1[None, :, :], axis=2) + db[:, None] * b1[None, :]      # [C_PAD, BLOCK_F]
        tl.store(dw2_ptr + cs[:, None] * F + fs[None, :], dw2.to(dw2_ptr.dtype.element_ty), mask=w2_tile)


# ----------------------------------------------------------------------------- launchers


def _tiling(M: int, F: int, H: int, C: int, device: torch.device) -> dict:
    """Grid and block sizes: H_PAD >= H, C_PAD >= C (powers of two), BLOCK_M rows a tile, BLOCK_F hidden
    units at a time when forming W (the [C_PAD, BLOCK_F, H_PAD] product within the tile budget)."""
    if C > COMPOSED_MAX_C or H > COMPOSED_MAX_H:
        raise ValueError(f"the composed-linear kernels take C <= {COMPOSED_MAX_C} outputs and H <= {COMPOSED_MAX_H} "
                         f"inputs (kernels.composed_linear), got C={C}, H={H}")
    tiling = row_stream_tiling(M, H, LAUNCH_POLICY, device)
    c_pad = next_pow2(C, 1)
    elements = for_device(LAUNCH_POLICY, device)["elements"]
    block_f = min(next_pow2(F, 1), max(1, elements // (c_pad * tiling["H_PAD"])))
    return {**tiling, "C_PAD": c_pad, "BLOCK_F": block_f}


def _contiguous(*tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
    return tuple(t.contiguous() for t in tensors)


def composed_linear_fwd(x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor, w2: torch.Tensor,
                        b2: torch.Tensor) -> torch.Tensor:
    """y [M, C] = (x W1^T + b1) W2^T + b2 in x's dtype: x [M, H], w1 [F, H], b1 [F], w2 [C, F], b2 [C]
    (weights in any float dtype: read and accumulated in the accumulation dtype). One launch."""
    x, w1, b1, w2, b2 = _contiguous(x, w1, b1, w2, b2)
    (M, H), F, C = x.shape, w1.shape[0], w2.shape[0]
    tiling = _tiling(M, F, H, C, x.device)
    y = new_output((M, C), dtype=x.dtype, device=x.device)
    wrap_triton(_composed_linear_fwd_kernel)[tiling.pop("grid")](
        x, w1, b1, w2, b2, y, M, F, H, C, FP64=acc_dtype(x, w1, b1, w2, b2) == torch.float64, **tiling)
    return y


def composed_linear_bwd(dy: torch.Tensor, x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor, w2: torch.Tensor,
                        b2: torch.Tensor, need_dx: bool
                        ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradients of composed_linear_fwd: (dx [M, H] in x's dtype, or an empty tensor unless need_dx; dw1,
    db1, dw2, db2 in their parameters' dtypes). dy [M, C]. Two launches."""
    dy, x, w1, b1, w2, b2 = _contiguous(dy, x, w1, b1, w2, b2)
    (M, H), F, C = x.shape, w1.shape[0], w2.shape[0]
    tiling = _tiling(M, F, H, C, x.device)
    grid = tiling.pop("grid")
    acc = acc_dtype(dy, x, w1, b1, w2, b2)
    fp64 = acc == torch.float64
    dx = new_output((M, H) if need_dx else (0,), dtype=x.dtype, device=x.device)
    part_w = new_output((grid[0], tiling["C_PAD"], tiling["H_PAD"]), dtype=acc, device=x.device)
    part_b = new_output((grid[0], tiling["C_PAD"]), dtype=acc, device=x.device)
    wrap_triton(_composed_linear_bwd_kernel)[grid](
        dy, x, w1, b1, w2, b2, dx, part_w, part_b, M, F, H, C, NEED_DX=need_dx, FP64=fp64, **tiling)
    grads = [new_output(p.shape, dtype=p.dtype, device=x.device) for p in (w1, b1, w2, b2)]
    tiling.pop("BLOCK_M")
    tiling.pop("STAGES")
    wrap_triton(_composed_linear_wgrad_kernel)[(1,)](
        part_w, part_b, w1, b1, w2, *grads, grid[0], F, H, C, FP64=fp64, **tiling)
    return (dx, *grads)
