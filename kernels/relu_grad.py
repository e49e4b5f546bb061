"""The epilogue feed-forward's one Triton kernel (ops/ffn.py FeedForwardFn, method="epilogue"): the ReLU's
backward and the first bias's gradient in one pass over the hidden activation's gradient.

    dh = g where h > 0, else 0          (torch.ops.aten.threshold_backward(g, h, 0): NaN in h passes g)
    db = sum over the rows of dh         (in the accumulation dtype)

g = dy W2 (cuBLAS) and h the saved hidden activation, both [M, F] row-major. cuBLAS writes g, so the mask
cannot go in its epilogue; before this kernel the backward ran threshold_backward (read g and h, write dh)
and then dh.sum(0) (read dh again): on the H200 at S = 128 (M = 102400, F = 512; 2026-11-29,
results/gpu/20261129-1927-h200/bench, profile) 0.145 ms and ~0.15 ms a layer, against an HBM floor of
0.131 ms for the one pass (630 MB) and 0.044 for the sum's. Here each program streams row tiles pid,
pid + grid, ... (kernels/_rows.py) with every column in registers, sums its tiles' columns, and writes one
partial sum a program; one torch sum of the partials (deterministic).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from amg_fast.kernels._common import acc_dtype, new_output, wrap_triton
from amg_fast.kernels._rows import ROW_STREAM_POLICY, row_stream_tiling, to_acc

__all__ = ["relu_backward_with_bias_grad", "LAUNCH_POLICY"]

# Every column of a row tile in registers: F = 512 takes 16-row tiles of 8192 elements (untimed).
LAUNCH_POLICY = {device: dict(policy) for device, policy in ROW_STREAM_POLICY.items()}


@triton.jit
def _relu_grad_kernel(g_ptr, h_ptr, dh_ptr, part_ptr, M, N, FP64: tl.constexpr, H_PAD: tl.constexpr,
                      BLOCK_M: tl.constexpr, STAGES: tl.constexpr):
    """dh = where(h <= 0, 0, g) for the row tiles pid, pid + grid, ... of g, h, dh [M, N] (row-major); part[pid]
    = the sum of those rows of dh, per column, in the accumulation dtype."""
    cols = tl.arange(0, H_PAD)
    cmask = cols < N
    acc = to_acc(tl.zeros((H_PAD,), dtype=tl.float32), FP64)
    for m0 in tl.range(tl.program_id(0) * BLOCK_M, M, tl.num_programs(0) * BLOCK_M, num_stages=STAGES):
        rows = m0 + tl.arange(0, BLOCK_M).to(tl.int64)
        mask = (rows < M)[:, None] & cmask[None, :]
        off = rows[:, None] * N + cols[None, :]
        g = tl.load(g_ptr + off, mask=mask, other=0.0)
        dh = tl.where(tl.load(h_ptr + off, mask=mask, other=0.0) <= 0, 0.0, g)
        tl.store(dh_ptr + off, dh.to(dh_ptr.dtype.element_ty), mask=mask)
        acc += tl.sum(to_acc(dh, FP64), axis=0)
    tl.store(part_ptr + tl.program_id(0).to(tl.int64) * N + cols, acc, mask=cmask)


def relu_backward_with_bias_grad(g: torch.Tensor, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(dh, db) for g, h [M, F] of one dtype: dh = g where h > 0 else 0 (as threshold_backward, in g's dtype),
    db [F] = dh's column sums in the accumulation dtype (fp32; fp64 for fp64). One launch and one torch sum."""
    if g.shape != h.shape or g.dim() != 2 or g.dtype != h.dtype:
        raise ValueError(f"relu_backward_with_bias_grad: g and h must be [M, F] of one dtype, got "
                         f"{tuple(g.shape)} {g.dtype} and {tuple(h.shape)} {h.dtype}")
    g, h = g.contiguous(), h.contiguous()
    M, N = g.shape
    dh = new_output((M, N), dtype=g.dtype, device=g.device)
    tiling = row_stream_tiling(M, N, LAUNCH_POLICY, g.device)
    part = new_output((tiling["grid"][0], N), dtype=acc_dtype(g), device=g.device)
    if M == 0 or N == 0:
        return dh, part.zero_().sum(0)
    grid = tiling.pop("grid")
    wrap_triton(_relu_grad_kernel)[grid](g, h, dh, part, M, N, FP64=g.dtype == torch.float64, **tiling)
    return dh, part.sum(0)
