"""The S4D memory's readout: z = GLU(x W^T + b) (nn.Linear H -> 2H, then F.glu over the last axis), x [..., H]
-> z [..., H].

Reads top to bottom: validation -> reference -> autograd Function -> public op.

The reference is what the memory ran before (Linear, then F.glu): on a GPU its backward is autograd's
glu_backward and AddmmBackward0, whose bias gradient is a torch column sum over the [rows, 2H] pre-activation
gradient (0.118 ms at S = 128 in TF32 on the H200, 0.9 TB/s). The Triton path (LinearGluFn) runs the same
cuBLAS GEMM and F.glu forward, and in its backward the GLU's gradient and the bias gradient in one Triton pass
(kernels/glu_grad.py) before the two cuBLAS GEMMs of dx and dW. In fp32 mode with $AMG_FAST_READOUT_GEMM=1
(kernels.limits.readout_gemm, off by default: untimed) the forward GEMM and dx are Triton row GEMMs of 3xTF32
products on tensor cores (kernels.ffn_gemm.linear_split_fwd / linear_split_dx) where cuBLAS's fp32 GEMMs run on
the CUDA cores; dW stays cuBLAS's.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from amg_fast._checks import check_rank, check_real_float, check_same_device, check_shape
from amg_fast.kernels.limits import precision_mode, readout_gemm
from amg_fast.ops._backend import run_op, triton_ops

__all__ = ["linear_glu", "linear_glu_ref", "LinearGluFn", "check_linear_glu_args"]


def check_linear_glu_args(x, weight, bias) -> None:
    """x [..., H]; weight [2 H_out, H]; bias [2 H_out] (nn.Linear convention; an even number of outputs)."""
    for name, t in (("x", x), ("weight", weight), ("bias", bias)):
        check_real_float(name, t)
    check_same_device(x=x, weight=weight, bias=bias)
    check_rank("x", x, range(1, 16), "[..., H]")
    check_rank("weight", weight, 2, "[2 H_out, H]")
    out = weight.shape[0]
    check_shape("weight", weight, (out, x.shape[-1]), f"[2 H_out, H] with H = {x.shape[-1]} (x's last dim)")
    if out % 2:
        raise ValueError(f"weight must have an even number of rows (2 H_out: the GLU halves), got {out}")
    check_shape("bias", bias, (out,), f"[2 H_out] with 2 H_out = {out}")


def linear_glu_ref(x, weight, bias) -> torch.Tensor:
    """Pure PyTorch: F.glu(F.linear(x, weight, bias), dim=-1). x [..., H] -> [..., H_out]."""
    return F.glu(F.linear(x, weight, bias), dim=-1)


def _split_gemms(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether LinearGluFn runs its forward and dx as 3xTF32 row GEMMs: fp32 mode (fp32 x and weight, TF32 off)
    with $AMG_FAST_READOUT_GEMM=1 (kernels.limits.readout_gemm)."""
    return x.dtype == weight.dtype == torch.float32 and precision_mode(x.dtype) == "fp32" and readout_gemm(False)


class LinearGluFn(torch.autograd.Function):
    """x [M, H] (2-D), weight [2 H_out, H], bias [2 H_out], all in one dtype -> z [M, H_out]. Forward: the
    pre-activation by one cuBLAS GEMM with the bias (in fp32 mode with $AMG_FAST_READOUT_GEMM=1: a Triton row GEMM
    of 3xTF32 products, W's and W^T's TF32 planes split in one launch before it), then F.glu; saves x, weight, the
    pre-activation and W^T's planes (an empty tensor on cuBLAS). Backward: dpre and the bias gradient in one Triton
    pass (glu_backward_with_bias_grads), dx = dpre W (by cuBLAS, or the row GEMM against W^T's planes) and
    dW = dpre^T x by cuBLAS."""

    @staticmethod
    def forward(ctx, x, weight, bias):
        if _split_gemms(x, weight):
            pre, transposed_planes = triton_ops().linear_split_fwd(*(t.contiguous() for t in (x, weight, bias)))
        else:
            pre, transposed_planes = torch.addmm(bias, x, weight.t()), x.new_empty((0,))
        ctx.save_for_backward(x, weight, pre, transposed_planes)
        return F.glu(pre, dim=-1)

    @staticmethod
    def backward(ctx, dz):
        x, weight, pre, transposed_planes = ctx.saved_tensors
        need = ctx.needs_input_grad
        dpre, dbias = triton_ops().glu_backward_with_bias_grads(dz.to(pre.dtype).contiguous(), pre)
        dx = None
        if need[0]:
            dx = triton_ops().linear_split_dx(dpre, transposed_planes) if transposed_planes.numel() \
                else dpre.mm(weight)
        return dx, dpre.t().mm(x) if need[1] else None, dbias.to(weight.dtype) if need[2] else None


def linear_glu(x, weight, bias, *, backend: str = "auto") -> torch.Tensor:
    """GLU(x W^T + b) over the last axis. x [..., H]; weight [2 H_out, H]; bias [2 H_out]. Returns [..., H_out]
    in x's dtype (under autocast: the autocast dtype, as nn.Linear).

    backend: "reference" = linear_glu_ref (Linear, then F.glu); "triton" (or "auto" on CUDA) = LinearGluFn: the
    same forward, the GLU's backward and the bias gradient in one Triton pass (kernels/glu_grad.py).
    """
    check_linear_glu_args(x, weight, bias)

    def fused(x_):
        dtype = x_.dtype  # the autocast dtype under autocast (fp64 stays), as nn.Linear computes
        z = LinearGluFn.apply(x_.reshape(-1, x_.shape[-1]), weight.to(dtype), bias.to(dtype))
        return z.reshape(*x_.shape[:-1], weight.shape[0] // 2)

    return run_op("linear_glu", backend, x, lambda: linear_glu_ref(x, weight, bias), fused)
