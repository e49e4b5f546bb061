"""The grid encoder as one kernel: a Linear over the input channels and the normalised grid coordinate.

    y[r, :] = u[r, :] W[:, :C]^T + g[r mod S] W[:, C] + b        (= Linear([u, x/L]) of every FFNO model)

u [M, C] activation rows (M = B T S, the grid position s = r mod S; read in place from a slice of frames), g [S] the grid coordinates x_s / L
(models.base.grid_coordinates, passed in so that the kernel adds exactly the reference's values), W [H, C + 1],
b [H]. Forward, one launch: y written once, the [M, C + 1] concatenation never formed. Backward, two
launches: (1) du = dy W[:, :C] (when asked) and each program's partial sums of dW = dy^T [u, g] and db =
sum dy over its rows; (2) one program sums the partials in order into dW and db.

Why (issue 19, the small ops folded): the reference runs torch.cat and the GEMM forward, and backward
cuBLAS's dW GEMM over all M rows (with its split-K reduction: a [H, C + 1] result from an M-long
reduction) and a bias sum: 5 kernels on a GPU against these 3. C + 1 <= GRID_LINEAR_MAX_K columns: the
products are C + 1 outer products on the CUDA cores (no tensor-core shape), accumulated in fp32 (fp64
for fp64 inputs).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from amg_fast.kernels._common import acc_dtype, new_output, next_pow2, wrap_triton
from amg_fast.kernels._rows import ROW_STREAM_POLICY, row_stream_tiling, to_acc

__all__ = ["grid_linear_fwd", "grid_linear_bwd", "GRID_LINEAR_MAX_K", "GRID_LINEAR_MAX_H", "LAUNCH_POLICY"]

# The kernels hold a [BLOCK_M, H_PAD] output tile and the [K_PAD, H_PAD] weight-gradient accumulator in
# registers: C + 1 <= GRID_LINEAR_MAX_K input columns, H <= GRID_LINEAR_MAX_H outputs.
GRID_LINEAR_MAX_K = 32
GRID_LINEAR_MAX_H = 512
# The launch policy (kernels._rows.ROW_STREAM_POLICY: the row tile's register budget, the grid).
LAUNCH_POLICY = {device: dict(policy) for device, policy in ROW_STREAM_POLICY.items()}


# ----------------------------------------------------------------------------- kernels


@triton.jit
def _row_offsets(rows, Q, stride_p, C):
    """Offsets of rows r = p Q + q of u [P, Q, C] (strides stride_p, C, 1): a batch's frames sliced out of a
    longer trajectory are read in place."""
    return (rows // Q) * stride_p + (rows % Q) * C


@triton.jit
def _grid_linear_fwd_kernel(u_ptr, g_ptr, w_ptr, b_ptr, y_ptr, M, Q, stride_p, S, C, H, FP64: tl.constexpr,
                            H_PAD: tl.constexpr, BLOCK_M: tl.constexpr, STAGES: tl.constexpr):
    """y [M, H] = [u, g] W^T + b over row tiles pid, pid + grid, ... (u: rows r = p Q + q at p stride_p + q C,
    channels contiguous; g [S]; W [H, C + 1])."""
    hs = tl.arange(0, H_PAD)
    hmask = hs < H
    bias = to_acc(tl.load(b_ptr + hs, mask=hmask, other=0.0), FP64)
    w_grid = to_acc(tl.load(w_ptr + hs * (C + 1) + C, mask=hmask, other=0.0), FP64)
    for m0 in tl.range(tl.program_id(0) * BLOCK_M, M, tl.num_programs(0) * BLOCK_M, num_stages=STAGES):
        rows = m0 + tl.arange(0, BLOCK_M).to(tl.int64)
        rmask = rows < M
        g = to_acc(tl.load(g_ptr + rows % S, mask=rmask, other=0.0), FP64)
        u_rows = _row_offsets(rows, Q, stride_p, C)
        y = g[:, None] * w_grid[None, :] + bias[None, :]
        for c in range(0, C):
            uc = to_acc(tl.load(u_ptr + u_rows + c, mask=rmask, other=0.0), FP64)
            y += uc[:, None] * to_acc(tl.load(w_ptr + hs * (C + 1) + c, mask=hmask, other=0.0), FP64)[None, :]
        tl.store(y_ptr + rows[:, None] * H + hs[None, :], y.to(y_ptr.dtype.element_ty),
                 mask=rmask[:, None] & hmask[None, :])


@triton.jit
def _grid_linear_bwd_kernel(dy_ptr, u_ptr, g_ptr, w_ptr, du_ptr, part_ptr, M, Q, stride_p, S, C, H,
                            NEED_DU: tl.constexpr, FP64: tl.constexpr, K_PAD: tl.constexpr, H_PAD: tl.constexpr,
                            BLOCK_M: tl.constexpr, STAGES: tl.constexpr):
    """du [M, C] (contiguous) = dy W[:, :C] (when NEED_DU; u's rows as the forward's); part [G, K_PAD + 1, H_PAD]: this program's rows' dW^T =
    [u, g]^T dy in rows 0..C and their sum of dy (db) in row K_PAD, in the accumulation dtype."""
    hs = tl.arange(0, H_PAD)
    hmask = hs < H
    ks = tl.arange(0, K_PAD)
    dwt = tl.zeros((K_PAD, H_PAD), dtype=tl.float64 if FP64 else tl.float32)
    db = tl.zeros((H_PAD,), dtype=dwt.dtype)
    for m0 in tl.range(tl.program_id(0) * BLOCK_M, M, tl.num_programs(0) * BLOCK_M, num_stages=STAGES):
        rows = m0 + tl.arange(0, BLOCK_M).to(tl.int64)
        rmask = rows < M
        dy = to_acc(tl.load(dy_ptr + rows[:, None] * H + hs[None, :], mask=rmask[:, None] & hmask[None, :], other=0.0),
                  FP64)
        db += tl.sum(dy, axis=0)
        g = to_acc(tl.load(g_ptr + rows % S, mask=rmask, other=0.0), FP64)
        u_rows = _row_offsets(rows, Q, stride_p, C)
        dwt += tl.where(ks[:, None] == C, tl.sum(g[:, None] * dy, axis=0)[None, :], 0.0)
        for c in range(0, C):
            uc = to_acc(tl.load(u_ptr + u_rows + c, mask=rmask, other=0.0), FP64)
            dwt += tl.where(ks[:, None] == c, tl.sum(uc[:, None] * dy, axis=0)[None, :], 0.0)
            if NEED_DU:
                wc = to_acc(tl.load(w_ptr + hs * (C + 1) + c, mask=hmask, other=0.0), FP64)
                tl.store(du_ptr + rows * C + c, tl.sum(dy * wc[None, :], axis=1).to(du_ptr.dtype.element_ty),
                         mask=rmask)
    part = part_ptr + tl.program_id(0).to(tl.int64) * (K_PAD + 1) * H_PAD
    tl.store(part + ks[:, None] * H_PAD + hs[None, :], dwt)
    tl.store(part + K_PAD * H_PAD + hs, db)


@triton.jit
def _grid_linear_wgrad_kernel(part_ptr, dw_ptr, db_ptr, G, C, H, FP64: tl.constexpr, K_PAD: tl.constexpr,
                              H_PAD: tl.constexpr):
    """One program: dW [H, C + 1] and db [H] from the G partial sums (summed in order), in their dtypes."""
    hs = tl.arange(0, H_PAD)
    ks = tl.arange(0, K_PAD)
    dwt = tl.zeros((K_PAD, H_PAD), dtype=tl.float64 if FP64 else tl.float32)
    db = tl.zeros((H_PAD,), dtype=dwt.dtype)
    for g in range(0, G):
        part = part_ptr + g * (K_PAD + 1) * H_PAD
        dwt += tl.load(part + ks[:, None] * H_PAD + hs[None, :])
        db += tl.load(part + K_PAD * H_PAD + hs)
    tl.store(dw_ptr + hs[None, :] * (C + 1) + ks[:, None], dwt.to(dw_ptr.dtype.element_ty),
             mask=(ks <= C)[:, None] & (hs < H)[None, :])
    tl.store(db_ptr + hs, db.to(db_ptr.dtype.element_ty), mask=hs < H)


# ----------------------------------------------------------------------------- launchers


def _tiling(M: int, K: int, H: int, device: torch.device) -> dict:
    """Grid and block sizes: K_PAD >= K = C + 1, H_PAD >= H (powers of two), BLOCK_M rows a tile."""
    if K > GRID_LINEAR_MAX_K or H > GRID_LINEAR_MAX_H:
        raise ValueError(f"the grid-linear kernels take C + 1 <= {GRID_LINEAR_MAX_K} input columns and H <= "
                         f"{GRID_LINEAR_MAX_H} outputs (kernels.grid_linear), got C + 1 = {K}, H = {H}")
    return {**row_stream_tiling(M, H, LAUNCH_POLICY, device), "K_PAD": next_pow2(K, 1)}


def _row_groups(u: torch.Tensor) -> torch.Tensor:
    """u [P, Q, C] with rows contiguous inside a group (strides (any, C, 1)); a copy otherwise."""
    P, Q, C = u.shape
    if (u.stride(2) == 1 or C == 1) and (u.stride(1) == C or Q == 1):
        return u
    return u.contiguous()


def grid_linear_fwd(u: torch.Tensor, grid: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """y [M, H] = [u, grid[r mod S]] weight^T + bias in u's dtype, M = P Q rows: u [P, Q, C] (read in place when
    each group's rows are contiguous, as a slice of frames t < T of [B, T + 1, S, C] is), grid [S],
    weight [H, C + 1], bias [H] (any float dtypes: read and accumulated in the accumulation dtype). One launch."""
    u = _row_groups(u)
    grid, weight, bias = (t.contiguous() for t in (grid, weight, bias))
    (P, Q, C), H, S = u.shape, weight.shape[0], grid.shape[0]
    tiling = _tiling(P * Q, C + 1, H, u.device)
    tiling.pop("K_PAD")
    y = new_output((P * Q, H), dtype=u.dtype, device=u.device)
    wrap_triton(_grid_linear_fwd_kernel)[tiling.pop("grid")](
        u, grid, weight, bias, y, P * Q, Q, u.stride(0), S, C, H,
        FP64=acc_dtype(u, grid, weight, bias) == torch.float64, **tiling)
    return y


def grid_linear_bwd(dy: torch.Tensor, u: torch.Tensor, grid: torch.Tensor, weight: torch.Tensor,
                    bias: torch.Tensor, need_du: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradients of grid_linear_fwd: (du [M, C] in u's dtype, or an empty tensor unless need_du; dweight,
    dbias in their parameters' dtypes). dy [M, H]; u [P, Q, C] as the forward's. Two launches."""
    u = _row_groups(u)
    dy, grid, weight = (t.contiguous() for t in (dy, grid, weight))
    (P, Q, C), H, S = u.shape, weight.shape[0], grid.shape[0]
    M = P * Q
    tiling = _tiling(M, C + 1, H, u.device)
    programs = tiling.pop("grid")[0]
    acc = acc_dtype(dy, u, grid, weight, bias)
    fp64 = acc == torch.float64
    du = new_output((M, C) if need_du else (0,), dtype=u.dtype, device=u.device)
    part = new_output((programs, tiling["K_PAD"] + 1, tiling["H_PAD"]), dtype=acc, device=u.device)
    wrap_triton(_grid_linear_bwd_kernel)[(programs,)](
        dy, u, grid, weight, du, part, M, Q, u.stride(0), S, C, H, NEED_DU=need_du, FP64=fp64, **tiling)
    dweight = new_output(weight.shape, dtype=weight.dtype, device=u.device)
    dbias = new_output(bias.shape, dtype=bias.dtype, device=u.device)
    wrap_triton(_grid_linear_wgrad_kernel)[(1,)](
        part, dweight, dbias, programs, C, H, FP64=fp64, K_PAD=tiling["K_PAD"], H_PAD=tiling["H_PAD"],
        num_warps=tiling["num_warps"])
    return du, dweight, dbias
