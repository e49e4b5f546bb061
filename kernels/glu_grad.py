"""The memory readout's one Triton kernel (ops/readout.py LinearGluFn): the GLU's backward and the Linear's bias
gradient in one pass over the pre-activation.

    pre = x W^T + b [M, 2H] = [a | b],  z = a * sigmoid(b)      (F.glu(pre, dim=-1))
    dpre = [dz * s | dz * a * s * (1 - s)],  s = sigmoid(b)     (torch.ops.aten.glu_backward(dz, pre, -1))
    dbias = sum over the rows of dpre                           (in the accumulation dtype)

Before it, autograd ran glu_backward (read pre and dz, write dpre) and AddmmBackward0's dpre.sum(0): on the H200
at S = 128 (M = 102400, H = 128; 2026-11-30, results/gpu/20261130-0050-h200/bench, profile) 0.083 ms and 0.118
ms in TF32 (0.058 / 0.078 in bf16), where the one pass moves 367 MB in fp32 (0.077 ms at HBM's rate) and the sum
over dpre's 105 MB ran at 0.9 TB/s. Each program streams row tiles pid, pid + grid, ... (kernels/_rows.py) with
all 2H columns in registers, adds its tiles elementwise, sums their rows once at the end (as relu_grad.py) and
writes one partial sum a program; one torch sum of the partials (deterministic). Untimed.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from amg_fast.kernels._common import acc_dtype, new_output, next_pow2, wrap_triton
from amg_fast.kernels._rows import ROW_STREAM_POLICY, acc_zeros, streamed_partial_sums, to_acc

__all__ = ["glu_backward_with_bias_grads", "LAUNCH_POLICY"]

LAUNCH_POLICY = {device: dict(policy) for device, policy in ROW_STREAM_POLICY.items()}


@triton.jit
def _glu_grad_kernel(dz_ptr, pre_ptr, dpre_ptr, part_ptr, M, H, FP64: tl.constexpr, H_PAD: tl.constexpr,
                     BLOCK_M: tl.constexpr, STAGES: tl.constexpr):
    """dpre [M, 2H] = glu_backward(dz [M, H], pre [M, 2H]) for the row tiles pid, pid + grid, ... (row-major);
    part[pid] = the sums of those rows of dpre per column, [2H], in the accumulation dtype."""
    cols = tl.arange(0, H_PAD)
    cmask = cols < H
    acc_a, acc_b = acc_zeros(BLOCK_M, H_PAD, FP64), acc_zeros(BLOCK_M, H_PAD, FP64)  # rows reduced after the loop
    for m0 in tl.range(tl.program_id(0) * BLOCK_M, M, tl.num_programs(0) * BLOCK_M, num_stages=STAGES):
        rows = m0 + tl.arange(0, BLOCK_M).to(tl.int64)
        mask = (rows < M)[:, None] & cmask[None, :]
        pre = rows[:, None] * (2 * H) + cols[None, :]
        a = to_acc(tl.load(pre_ptr + pre, mask=mask, other=0.0), FP64)
        b = to_acc(tl.load(pre_ptr + pre + H, mask=mask, other=0.0), FP64)
        dz = to_acc(tl.load(dz_ptr + rows[:, None] * H + cols[None, :], mask=mask, other=0.0), FP64)
        s = 1.0 / (1.0 + tl.exp(-b))
        da = dz * s
        db = da * a * (1.0 - s)
        tl.store(dpre_ptr + pre, da.to(dpre_ptr.dtype.element_ty), mask=mask)
        tl.store(dpre_ptr + pre + H, db.to(dpre_ptr.dtype.element_ty), mask=mask)
        acc_a += da  # 0 outside the mask: dz loads 0 there
        acc_b += db
    part = part_ptr + tl.program_id(0).to(tl.int64) * (2 * H)
    tl.store(part + cols, tl.sum(acc_a, axis=0), mask=cmask)
    tl.store(part + H + cols, tl.sum(acc_b, axis=0), mask=cmask)


def glu_backward_with_bias_grads(dz: torch.Tensor, pre: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(dpre, dbias) for dz [M, H] and the pre-activation pre [M, 2H] of one dtype: dpre = glu_backward(dz, pre,
    -1) in pre's dtype (computed in the accumulation dtype), dbias [2H] = dpre's column sums in the accumulation
    dtype (fp32; fp64 for fp64). One launch and one torch sum."""
    if pre.dim() != 2 or dz.dim() != 2 or pre.shape != (dz.shape[0], 2 * dz.shape[1]) or dz.dtype != pre.dtype:
        raise ValueError(f"glu_backward_with_bias_grads: dz must be [M, H] and pre [M, 2H], of one dtype, got "
                         f"{tuple(dz.shape)} {dz.dtype} and {tuple(pre.shape)} {pre.dtype}")
    dz, pre = dz.contiguous(), pre.contiguous()
    M, H = dz.shape
    dpre = new_output((M, 2 * H), dtype=pre.dtype, device=pre.device)
    # both halves of a row in one tile
    return dpre, streamed_partial_sums(M, 2 * H, 2 * H, acc_dtype(pre), pre.device, LAUNCH_POLICY,
                                       lambda grid, part, **tiles: wrap_triton(_glu_grad_kernel)[grid](
                                           dz, pre, dpre, part, M, H, FP64=pre.dtype == torch.float64,
                                           H_PAD=next_pow2(H, 1), **tiles))
