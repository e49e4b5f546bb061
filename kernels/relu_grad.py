"""The epilogue feed-forward's one Triton kernel (ops/ffn.py FeedForwardFn, method="epilogue"): the ReLU's
backward and both bias gradients in one pass over the hidden activation's gradient (and dy).

    dh  = g where h > 0, else 0          (torch.ops.aten.threshold_backward(g, h, 0): NaN in h passes g)
    db1 = sum over the rows of dh         (in the accumulation dtype)
    db2 = sum over the rows of dy         (the second Linear's bias; dy read once more here, not in a sum kernel)

g = dy W2 (cuBLAS) and h the saved hidden activation, both [M, F] row-major. cuBLAS writes g, so the mask
cannot go in its epilogue; before this kernel the backward ran threshold_backward (read g and h, write dh)
and then dh.sum(0) (read dh again): on the H200 at S = 128 (M = 102400, F = 512; 2026-11-29,
results/gpu/20261129-1927-h200/bench, profile) 0.145 ms and ~0.15 ms a layer, against an HBM floor of
0.131 ms for the one pass (630 MB) and 0.044 for the sum's; db2's own sum kernel read dy [M, 128]
(the same profile: the column sums took 0.84 ms a step, 8 kernels). Here each program streams row tiles pid,
pid + grid, ... (kernels/_rows.py) with every column in registers, adds its tiles elementwise, sums the rows of
that once at the end, and writes one partial sum a program; one torch sum of the partials (deterministic).
The H200 timed the first form, which summed each tile's rows in the loop (a cross-warp reduction with barriers
every 16 rows), at 0.17 ms a layer in TF32 (77% of HBM's rate) and 0.20 ms in bf16 (1.6 TB/s: 19% of the bf16
step; 2026-11-30, results/gpu/20261130-0050-h200/bench, profile); compiled for sm_90, the loop of this form has
no shuffle and only the pipeline's barriers (untimed).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from amg_fast.kernels._common import acc_dtype, new_output, next_pow2, wrap_triton
from amg_fast.kernels._rows import ROW_STREAM_POLICY, acc_zeros, streamed_partial_sums, to_acc

__all__ = ["relu_backward_with_bias_grads", "LAUNCH_POLICY", "MAX_WIDTH"]

# Every column of a row tile in registers, the row count from the wider of F and H_out: F = 512 takes 16-row tiles
# of 8192 elements, dy's [16, H_out] beside them (untimed). Wider than MAX_WIDTH columns (a row of each tensor
# in one program's registers would spill), the torch ops instead: threshold_backward and two column sums.
LAUNCH_POLICY = {device: dict(policy) for device, policy in ROW_STREAM_POLICY.items()}
MAX_WIDTH = 8192


@triton.jit
def _relu_grad_kernel(g_ptr, h_ptr, dy_ptr, dh_ptr, part_ptr, M, N, N_DY, FP64: tl.constexpr, H_PAD: tl.constexpr,
                      DY_PAD: tl.constexpr, BLOCK_M: tl.constexpr, STAGES: tl.constexpr):
    """dh = where(h <= 0, 0, g) for the row tiles pid, pid + grid, ... of g, h, dh [M, N] (row-major); part[pid]
    = [the sums of those rows of dh per column | of dy [M, N_DY] per column], in the accumulation dtype."""
    cols = tl.arange(0, H_PAD)
    cmask = cols < N
    dy_cols = tl.arange(0, DY_PAD)
    dy_cmask = dy_cols < N_DY
    acc, acc_dy = acc_zeros(BLOCK_M, H_PAD, FP64), acc_zeros(BLOCK_M, DY_PAD, FP64)  # rows reduced after the loop
    for m0 in tl.range(tl.program_id(0) * BLOCK_M, M, tl.num_programs(0) * BLOCK_M, num_stages=STAGES):
        rows = m0 + tl.arange(0, BLOCK_M).to(tl.int64)
        rmask = rows < M
        mask = rmask[:, None] & cmask[None, :]
        off = rows[:, None] * N + cols[None, :]
        g = tl.load(g_ptr + off, mask=mask, other=0.0)
        dh = tl.where(tl.load(h_ptr + off, mask=mask, other=0.0) <= 0, 0.0, g)
        tl.store(dh_ptr + off, dh.to(dh_ptr.dtype.element_ty), mask=mask)
        acc += to_acc(dh, FP64)
        dy = tl.load(dy_ptr + rows[:, None] * N_DY + dy_cols[None, :], mask=rmask[:, None] & dy_cmask[None, :],
                     other=0.0)
        acc_dy += to_acc(dy, FP64)
    part = part_ptr + tl.program_id(0).to(tl.int64) * (N + N_DY)
    tl.store(part + cols, tl.sum(acc, axis=0), mask=cmask)
    tl.store(part + N + dy_cols, tl.sum(acc_dy, axis=0), mask=dy_cmask)


def relu_backward_with_bias_grads(g: torch.Tensor, h: torch.Tensor, dy: torch.Tensor
                                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """(dh, [db1 | db2]) for g, h [M, F] and dy [M, H_out] of one dtype: dh = g where h > 0 else 0 (as
    threshold_backward, in g's dtype); db1 [F], db2 [H_out] = dh's and dy's column sums in the accumulation dtype
    (fp32; fp64 for fp64), in one flat tensor (a custom op's outputs may not alias each other). One launch and
    one torch sum; for F or H_out above MAX_WIDTH, threshold_backward and two torch sums."""
    if g.shape != h.shape or g.dim() != 2 or dy.dim() != 2 or dy.shape[0] != g.shape[0] or \
            not g.dtype == h.dtype == dy.dtype:
        raise ValueError(f"relu_backward_with_bias_grads: g, h must be [M, F] and dy [M, H_out], of one dtype, got "
                         f"{tuple(g.shape)} {g.dtype}, {tuple(h.shape)} {h.dtype} and {tuple(dy.shape)} {dy.dtype}")
    g, h, dy = g.contiguous(), h.contiguous(), dy.contiguous()
    (M, N), n_dy = g.shape, dy.shape[1]
    if max(N, n_dy) > MAX_WIDTH:
        dh = torch.ops.aten.threshold_backward(g, h, 0)
        return dh, torch.cat([dh.sum(0, dtype=acc_dtype(g)), dy.sum(0, dtype=acc_dtype(g))])
    dh = new_output((M, N), dtype=g.dtype, device=g.device)
    # BLOCK_M from the wider of the two
    return dh, streamed_partial_sums(M, max(N, n_dy), N + n_dy, acc_dtype(g), g.device, LAUNCH_POLICY,
                                     lambda grid, part, **tiles: wrap_triton(_relu_grad_kernel)[grid](
                                         g, h, dy, dh, part, M, N, n_dy, FP64=g.dtype == torch.float64,
                                         H_PAD=next_pow2(N, 1), DY_PAD=next_pow2(n_dy, 1), **tiles))
