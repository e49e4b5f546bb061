"""The FFNO decoder H -> 128 -> C: two Linears with no activation between as one (op composed_linear),
y = (x W1^T + b1) W2^T + b2, x [..., H] -> y [..., C].

Reads top to bottom: validation -> reference -> autograd Function -> public op.

The reference forms W = W2 W1 and b = W2 b1 + b2 (two small products) and runs one Linear over the
activations: exact (no activation between) and one GEMM over the rows instead of two, with no
[..., 128] intermediate. The Triton path (kernels/composed_linear.py) forms W inside its kernels: one
launch forward, two backward (dx and the partial sums of dW from one read of x, then the parameters'
gradients), against the reference's 3 + 9 on a GPU; it takes C <= COMPOSED_MAX_C outputs and
H <= COMPOSED_MAX_H inputs ("auto" runs the reference beyond, "triton" refuses).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from amg_fast._checks import check_rank, check_real_float, check_same_device, check_shape
from amg_fast.ops._backend import run_op, triton_ops

__all__ = ["composed_linear", "composed_linear_ref", "ComposedLinearFn", "check_composed_linear_args"]

# The Triton kernels' limits (kernels.composed_linear, which imports triton: repeated here and checked equal
# by the tests).
COMPOSED_MAX_C = 8
COMPOSED_MAX_H = 512


def check_composed_linear_args(x, w1, b1, w2, b2) -> None:
    """x [..., H]; w1 [F, H]; b1 [F]; w2 [C, F]; b2 [C] (nn.Linear convention)."""
    for name, t in (("x", x), ("w1", w1), ("b1", b1), ("w2", w2), ("b2", b2)):
        check_real_float(name, t)
    check_same_device(x=x, w1=w1, b1=b1, w2=w2, b2=b2)
    check_rank("x", x, range(1, 16), "[..., H]")
    check_rank("w1", w1, 2, "[F, H]")
    hidden = w1.shape[0]
    check_shape("w1", w1, (hidden, x.shape[-1]), f"[F, H] with H = {x.shape[-1]} (x's last dim)")
    check_shape("b1", b1, (hidden,), f"[F] with F = {hidden}")
    check_rank("w2", w2, 2, "[C, F]")
    check_shape("w2", w2, (w2.shape[0], hidden), f"[C, F] with F = {hidden}")
    check_shape("b2", b2, (w2.shape[0],), f"[C] with C = {w2.shape[0]}")


def composed_linear_ref(x, w1, b1, w2, b2) -> torch.Tensor:
    """Pure PyTorch: F.linear(x, W2 W1, W2 b1 + b2) = F.linear(F.linear(x, w1, b1), w2, b2) up to rounding.
    x [..., H] -> [..., C]."""
    return F.linear(x, w2 @ w1, torch.addmv(b2, w2, b1))


class ComposedLinearFn(torch.autograd.Function):
    """x [M, H] (2-D), w1 [F, H], b1 [F], w2 [C, F], b2 [C] -> y [M, C] in x's dtype (the weights in
    theirs: read and accumulated in fp32, fp64 when any input is fp64). Saves x and the weights."""

    @staticmethod
    def forward(ctx, x, w1, b1, w2, b2):
        x, w1, b1, w2, b2 = (t.contiguous() for t in (x, w1, b1, w2, b2))
        ctx.save_for_backward(x, w1, b1, w2, b2)
        return triton_ops().composed_linear_fwd(x, w1, b1, w2, b2)

    @staticmethod
    def backward(ctx, dy):
        x, w1, b1, w2, b2 = ctx.saved_tensors
        need = ctx.needs_input_grad
        dx, dw1, db1, dw2, db2 = triton_ops().composed_linear_bwd(dy.contiguous(), x, w1, b1, w2, b2, need[0])
        return (dx if need[0] else None, *(g if n else None for g, n in zip((dw1, db1, dw2, db2), need[1:])))


def composed_linear(x, w1, b1, w2, b2, *, backend: str = "auto") -> torch.Tensor:
    """(x W1^T + b1) W2^T + b2. x [..., H]; w1 [F, H]; b1 [F]; w2 [C, F]; b2 [C]. Returns [..., C] in x's
    dtype (under autocast: the autocast dtype, as nn.Linear).

    backend: "reference" = composed_linear_ref (W = W2 W1 formed by torch, one Linear); "triton" (or
    "auto" on CUDA) = ComposedLinearFn (kernels/composed_linear.py): W formed in the kernels, one launch
    forward and two backward; C <= 8 and H <= 512 ("auto" uses the reference beyond).
    """
    check_composed_linear_args(x, w1, b1, w2, b2)
    C, H = w2.shape[0], x.shape[-1]
    unsupported = None
    if C > COMPOSED_MAX_C or H > COMPOSED_MAX_H:
        unsupported = (f"composed_linear's Triton kernels take C <= {COMPOSED_MAX_C} outputs and H <= {COMPOSED_MAX_H} "
                       f"inputs, got C={C} (w2.shape[0]), H={H} (x.shape[-1])")

    def fused(x_):
        y = ComposedLinearFn.apply(x_.reshape(-1, H), w1, b1, w2, b2)
        return y.reshape(*x_.shape[:-1], C)

    return run_op("composed_linear", backend, x, lambda: composed_linear_ref(x, w1, b1, w2, b2), fused,
                  unsupported=unsupported)
