"""The grid encoder (op grid_linear): y = Linear([u, x/L]), u [..., S, C] -> y [..., S, H] (every FFNO model's
first layer).

Reads top to bottom: validation -> reference -> autograd Function -> public op.

The reference concatenates the grid coordinate to the channels (torch.cat) and runs nn.Linear's GEMM;
backward, the weight's gradient is a GEMM reducing over all B T S rows. The Triton path
(kernels/grid_linear.py) adds the grid's column inside the kernel (the concatenation is never formed):
one launch forward, two backward (du and the partial sums of dW, db from one read of dy; then their
sum), against the reference's 5 kernels on a GPU. It takes C + 1 <= 32 input columns and H <= 512
outputs ("auto" runs the reference beyond, "triton" refuses).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from amg_fast._checks import check_rank, check_real_float, check_same_device, check_shape
from amg_fast.kernels._common import merged_stride
from amg_fast.ops._backend import run_op, triton_ops

__all__ = ["grid_linear", "grid_linear_ref", "GridLinearFn", "check_grid_linear_args", "row_groups"]

# The Triton kernels' limits (kernels.grid_linear, which imports triton: repeated here, checked equal by the tests).
GRID_LINEAR_MAX_K = 32
GRID_LINEAR_MAX_H = 512


def check_grid_linear_args(u, grid, weight, bias) -> None:
    """u [..., S, C]; grid [S]; weight [H, C + 1]; bias [H] (nn.Linear convention)."""
    for name, t in (("u", u), ("grid", grid), ("weight", weight), ("bias", bias)):
        check_real_float(name, t)
    check_same_device(u=u, grid=grid, weight=weight, bias=bias)
    check_rank("u", u, range(2, 16), "[..., S, C]")
    S, C = u.shape[-2], u.shape[-1]
    check_shape("grid", grid, (S,), f"[S] with S = {S} (u's second-to-last dim)")
    check_rank("weight", weight, 2, "[H, C + 1]")
    check_shape("weight", weight, (weight.shape[0], C + 1), f"[H, C + 1] with C = {C} (u's last dim)")
    check_shape("bias", bias, (weight.shape[0],), f"[H] with H = {weight.shape[0]}")


def grid_linear_ref(u, grid, weight, bias) -> torch.Tensor:
    """Pure PyTorch: F.linear([u, grid], weight, bias), the grid broadcast over the leading axes.
    u [..., S, C], grid [S] -> [..., S, H]."""
    return F.linear(torch.cat([u, grid[:, None].expand(u.shape[:-1] + (1,))], dim=-1), weight, bias)


def row_groups(u: torch.Tensor) -> torch.Tensor:
    """u [..., S, C] as a view [P, Q, C] whose groups' rows are contiguous (strides (any, C, 1): the leading
    axes split where their strides allow, the fewest groups first; frames 0..T-1 sliced from [B, T + 1, S, C]
    are [B, T S, C]), which the kernels read in place; a contiguous copy [1, M, C] when no split gives one.
    Decided from the strides (no view attempted and caught: torch.compile's fake tensors raise another error
    than eager's, which Dynamo cannot catch)."""
    lead, C = u.shape[:-1], u.shape[-1]
    if C == 1 or u.stride(-1) == 1:
        strides = u.stride()[:-1]
        for k in range(len(lead)):
            inner = merged_stride(lead[k:], strides[k:])
            Q = math.prod(lead[k:])
            if merged_stride(lead[:k], strides[:k]) is not None and inner is not None and (Q == 1 or inner == C):
                return u.view(math.prod(lead[:k]), Q, C)
    return u.contiguous().view(1, -1, C)


class GridLinearFn(torch.autograd.Function):
    """u [P, Q, C] (rows r = p Q + q at grid position r mod S; read in place when each group's rows are
    contiguous), grid [S], weight [H, C + 1], bias [H] -> y [P Q, H] in u's dtype (the others in theirs: read
    and accumulated in fp32, fp64 when any input is fp64). The grid takes no gradient (coordinates). Saves
    u, the grid, the weight and the bias."""

    @staticmethod
    def forward(ctx, u, grid, weight, bias):
        grid, weight, bias = (t.contiguous() for t in (grid, weight, bias))
        ctx.save_for_backward(u, grid, weight, bias)
        return triton_ops().grid_linear_fwd(u, grid, weight, bias)

    @staticmethod
    def backward(ctx, dy):
        u, grid, weight, bias = ctx.saved_tensors
        need = ctx.needs_input_grad
        du, dweight, dbias = triton_ops().grid_linear_bwd(dy.contiguous(), u, grid, weight, bias, need[0])
        return du.view(u.shape) if need[0] else None, None, dweight if need[2] else None, dbias if need[3] else None


def grid_linear(u, grid, weight, bias, *, backend: str = "auto") -> torch.Tensor:
    """[u, grid] weight^T + bias. u [..., S, C]; grid [S] (the coordinates x_s / L); weight [H, C + 1];
    bias [H]. Returns [..., S, H] in u's dtype (under autocast: the autocast dtype, as nn.Linear).

    backend: "reference" = grid_linear_ref (torch.cat, then nn.Linear's GEMM); "triton" (or "auto" on
    CUDA) = GridLinearFn (kernels/grid_linear.py): the grid's column added in the kernel, one launch
    forward and two backward; C + 1 <= 32, H <= 512 and a grid that requires no gradient ("auto" uses the
    reference otherwise).
    """
    check_grid_linear_args(u, grid, weight, bias)
    H, C = weight.shape[0], u.shape[-1]
    unsupported = None
    if C + 1 > GRID_LINEAR_MAX_K or H > GRID_LINEAR_MAX_H:
        unsupported = (f"grid_linear's Triton kernels take C + 1 <= {GRID_LINEAR_MAX_K} input columns and H <= "
                       f"{GRID_LINEAR_MAX_H} outputs, got C = {C} (u.shape[-1]), H = {H} (weight.shape[0])")
    elif grid.requires_grad:
        unsupported = ("grid_linear's Triton kernels give the grid no gradient, got a grid that requires grad: "
                       "pass grid.detach(), or use backend='reference'")

    def fused(u_):
        y = GridLinearFn.apply(row_groups(u_), grid, weight, bias)
        return y.reshape(*u_.shape[:-1], H)

    return run_op("grid_linear", backend, u, lambda: grid_linear_ref(u, grid, weight, bias), fused,
                  unsupported=unsupported)
