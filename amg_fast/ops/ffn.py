"""The FFNO feed-forward: y = relu(x W1^T + b1) W2^T + b2 (+ residual), x [..., H_in] -> y [..., H_out].

Reads top to bottom: validation -> reference -> autograd Function -> public op.

The reference is what nn.Sequential(Linear, ReLU, Linear) runs: three kernels forward (GEMM + bias,
ReLU, GEMM + bias), the ReLU reading and writing the [rows, 4H] hidden activation once more. The
fused path (backend="triton", the model's fast path; cuBLAS does the GEMMs) runs the first GEMM with
cuBLASLt's bias + ReLU epilogue (torch._addmm_activation), so the hidden activation is written once and
no ReLU kernel runs; its backward (one autograd node, saving x and the hidden activation) masks the hidden
gradient and forms both bias gradients in one Triton pass (kernels/relu_grad.py), where threshold_backward
and two column sums read the hidden gradient twice and dy once more.
"auto" picks per precision mode from kernels.limits.FFN_AUTO_METHOD (the row GEMMs in fp32 mode, the
epilogue in the others, as measured) or $AMG_FAST_FFN_METHOD. method="gemm" (GemmFeedForwardFn over
kernels/ffn_gemm.py) runs the forward's GEMMs and the backward's dh, dx as Triton row GEMMs with the bias, ReLU,
its backward mask, the residual and the bias gradients in their epilogues, fp32 mode on tensor cores by 3xTF32
dots against weights split once per pass into TF32 planes; the weight gradients go by
kernels.limits.wgrad_method (cuBLAS for fp32 activations). The H200's step with it against the epilogue:
1.12x / 1.14x in fp32 at S = 32 / 128, 0.87-0.99x in TF32 and bf16 (2026-11-30). The Triton MLP that kept the hidden activation on chip (method
"fused") was removed on 2026-11-29: 1.2-1.9x slower than the epilogue in every mode on an H200, and a fault of
triton 3.6's sm_90 code in fp32. residual (the FFNO block's x in x + FeedForward(...)) is added in the gemm
kernels' epilogue (one activation pass fewer); on the epilogue path it is one add. Under bf16 autocast both
Functions take the fp32 weights and cast all four to bf16 in one launch (kernels._tf32.cast_weights), and their
gradients back in one, where autocast's casts ran a kernel a parameter each way (32 launches a step of the
paper's four layers); the bias gradients stay the fp32 sums (autocast rounded them to bf16 and back).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from amg_fast._checks import check_rank, check_real_float, check_same_device, check_shape
from amg_fast.kernels._common import flat_views
from amg_fast.kernels.limits import FFN_METHODS, ffn_dh_method, ffn_method, wgrad_method
from amg_fast.ops._backend import run_op, triton_ops

__all__ = ["feed_forward", "feed_forward_ref", "FeedForwardFn", "GemmFeedForwardFn",
           "check_feed_forward_args"]


def check_feed_forward_args(x, w1, b1, w2, b2, residual=None) -> None:
    """x [..., H_in]; w1 [F, H_in]; b1 [F]; w2 [H_out, F]; b2 [H_out] (nn.Linear convention); residual
    None or [..., H_out] like the output."""
    for name, t in (("x", x), ("w1", w1), ("b1", b1), ("w2", w2), ("b2", b2)):
        check_real_float(name, t)
    check_same_device(x=x, w1=w1, b1=b1, w2=w2, b2=b2)
    check_rank("x", x, range(1, 16), "[..., H_in]")
    check_rank("w1", w1, 2, "[F, H_in]")
    hidden, h_in = w1.shape
    check_shape("w1", w1, (hidden, x.shape[-1]), f"[F, H_in] with H_in = {x.shape[-1]} (x's last dim)")
    check_shape("b1", b1, (hidden,), f"[F] with F = {hidden}")
    check_rank("w2", w2, 2, "[H_out, F]")
    check_shape("w2", w2, (w2.shape[0], hidden), f"[H_out, F] with F = {hidden}")
    check_shape("b2", b2, (w2.shape[0],), f"[H_out] with H_out = {w2.shape[0]}")
    if residual is not None:
        check_real_float("residual", residual)
        check_same_device(x=x, residual=residual)
        check_shape("residual", residual, (*x.shape[:-1], w2.shape[0]), "[..., H_out], the output's shape")


def feed_forward_ref(x, w1, b1, w2, b2, residual=None) -> torch.Tensor:
    """Pure PyTorch: F.linear(relu(F.linear(x, w1, b1)), w2, b2) (+ residual). x [..., H_in] -> [..., H_out]."""
    y = F.linear(F.relu(F.linear(x, w1, b1)), w2, b2)
    return y if residual is None else residual + y


def _in_dtype(dtype: torch.dtype, *params: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The parameters in dtype: as they are, or (bf16 autocast over fp32 weights) cast in one launch, views of one
    flat buffer -- where autocast ran a cast kernel a parameter (and one a gradient back: _as_params)."""
    if all(p.dtype == dtype for p in params):
        return params
    return flat_views(triton_ops().cast_weights(list(params), dtype), params)


def _as_params(grads: tuple, dtypes: tuple) -> tuple:
    """Gradients computed in the activations' dtype (None where not needed) in their parameters' dtypes: as they
    are, or cast in one launch (see _in_dtype)."""
    todo = [i for i, g in enumerate(grads) if g is not None and g.dtype != dtypes[i]]
    if not todo:
        return grads
    out, todo_grads = list(grads), [grads[i] for i in todo]
    for i, g in zip(todo, flat_views(triton_ops().cast_weights(todo_grads, dtypes[todo[0]]), todo_grads)):
        out[i] = g.to(dtypes[i])  # a no-op but for parameters of several dtypes
    return tuple(out)


class FeedForwardFn(torch.autograd.Function):
    """x [M, H_in] (2-D), weights as feed_forward's -> y [M, H_out] in x's dtype; weights of another dtype (fp32
    under bf16 autocast) are cast to x's in one launch, and their gradients back in one.

    Forward: hidden = relu(x W1^T + b1) (one GEMM with the bias + ReLU epilogue), y = hidden W2^T + b2.
    Backward: dW2 = dy^T hidden; dhidden = (dy W2) masked where hidden = 0, db1 = sum dhidden and db2 = sum dy
    in one Triton pass over cuBLAS's dy W2 (kernels/relu_grad.py), or with $AMG_FAST_FFN_DH=triton in one Triton
    row GEMM with the mask and the sums in its epilogue (kernels.ffn_gemm.masked_hidden_grad; untimed);
    dW1 = dhidden^T x, dx = dhidden W1.
    """

    @staticmethod
    def forward(ctx, x, w1, b1, w2, b2):
        ctx.param_dtypes = [t.dtype for t in (w1, b1, w2, b2)]
        w1, b1, w2, b2 = _in_dtype(x.dtype, w1, b1, w2, b2)
        hidden = torch._addmm_activation(b1, x, w1.t())  # relu(x w1^T + b1), cuBLASLt epilogue on CUDA
        ctx.save_for_backward(x, w1, w2, hidden)
        return torch.addmm(b2, hidden, w2.t())

    @staticmethod
    def backward(ctx, dy):
        x, w1, w2, hidden = ctx.saved_tensors
        need, (w1_dtype, b1_dtype, w2_dtype, b2_dtype) = ctx.needs_input_grad, ctx.param_dtypes
        dw2 = dy.t().mm(hidden) if need[3] else None
        if not (need[0] or need[1] or need[2]):
            (dw2,) = _as_params((dw2,), (w2_dtype,))
            return None, None, None, dw2, dy.sum(0, dtype=b2_dtype) if need[4] else None
        # the ReLU's mask, db1 and db2 (summed in the accumulation dtype: cast to the biases' own) in one pass
        if ffn_dh_method() == "triton":  # ... of the GEMM forming dy W2 itself
            dhidden, bias_grads = triton_ops().feed_forward_dh(dy, hidden, w1, w2)
        else:  # ... over cuBLAS's dy W2
            dhidden, bias_grads = triton_ops().relu_backward_with_bias_grads(dy.mm(w2), hidden, dy)
        db1, db2 = bias_grads.split((hidden.shape[1], dy.shape[1]))
        dw1, dw2 = _as_params((dhidden.t().mm(x) if need[1] else None, dw2), (w1_dtype, w2_dtype))
        return (dhidden.mm(w1) if need[0] else None, dw1, db1.to(b1_dtype) if need[2] else None, dw2,
                db2.to(b2_dtype) if need[4] else None)


class GemmFeedForwardFn(torch.autograd.Function):
    """x [M, H_in] (2-D), weights as feed_forward's (of another dtype than x's: cast to it in one launch, their
    gradients back in one), residual [M, H_out] or None -> y [M, H_out] (+ residual), in the residual's dtype when
    there is one, else x's. Four Triton row GEMMs with the bias,
    ReLU, the ReLU's backward mask and the residual in their epilogues (kernels/ffn_gemm.py; in fp32 mode
    3xTF32 dots against the weights' TF32 planes, made once per pass), the weight gradients by
    kernels.limits.wgrad_method (cuBLAS for fp32 activations). Saves x, the hidden activation, the weights and in
    fp32 mode the TF32 planes of their transposes (split in the forward's launch); the residual's gradient is dy
    itself."""

    @staticmethod
    def forward(ctx, x, w1, b1, w2, b2, residual=None):
        ctx.param_dtypes = [t.dtype for t in (w1, b1, w2, b2)]
        w1, b1, w2, b2 = _in_dtype(x.dtype, w1, b1, w2, b2)
        x, w1, w2 = x.contiguous(), w1.contiguous(), w2.contiguous()
        y, hidden, w_planes = triton_ops().feed_forward_gemm_fwd(
            x, w1, b1.contiguous(), w2, b2.contiguous(), None if residual is None else residual.contiguous())
        ctx.save_for_backward(x, hidden, w1, w2, w_planes)
        ctx.wgrad = wgrad_method("auto", x.dtype)
        return y

    @staticmethod
    def backward(ctx, dy):
        from amg_fast.kernels.ffn_gemm import gemm_weight_grads  # imports triton: Triton path only

        x, hidden, w1, w2, w_planes = ctx.saved_tensors
        need = ctx.needs_input_grad
        dx, flat = triton_ops().feed_forward_gemm_bwd(dy.contiguous(), x, hidden, w1, w2, need[0], ctx.wgrad,
                                                      w_planes)
        grads = gemm_weight_grads(flat, w1.shape[0], w1.shape[1], w2.shape[0])
        return _with_residual_grad(need, dy, dx, _as_params(grads, ctx.param_dtypes))


def _with_residual_grad(need: tuple, dy: torch.Tensor, dx: torch.Tensor, weight_grads: tuple) -> tuple:
    """A kernel Function's gradients: (dx or None, dw1, db1, dw2, db2) and, when it was apply()'d with a
    residual argument (6 entries in need), the residual's: dy itself (y = ... + residual)."""
    residual_grad = (dy if need[5] else None,) if len(need) > 5 else ()
    return (dx if need[0] else None, *weight_grads, *residual_grad)


def feed_forward(x, w1, b1, w2, b2, *, residual=None, backend: str = "auto", method: str = "auto") -> torch.Tensor:
    """relu(x W1^T + b1) W2^T + b2 (+ residual). x [..., H_in]; w1 [F, H_in]; b1 [F]; w2 [H_out, F];
    b2 [H_out]; residual None or [..., H_out]. Returns [..., H_out] in x's dtype (under autocast: the
    autocast dtype, as nn.Linear), promoted with the residual's when there is one (as residual + y).

    backend: "reference" = Linear, ReLU, Linear (then + residual); "triton" (or "auto" on CUDA) = one
    of two fused paths, by method: "epilogue" (FeedForwardFn: bias + ReLU in the first GEMM's
    epilogue, one autograd node; the same GEMMs as the reference; residual added after) or "gemm"
    (GemmFeedForwardFn: four Triton row GEMMs with the elementwise work in their epilogues, fp32 mode
    on tensor cores by 3xTF32 dots; any width). "auto" = $AMG_FAST_FFN_METHOD, else per precision mode
    kernels.limits.FFN_AUTO_METHOD (the row GEMMs in fp32 mode, else the epilogue, as measured).
    """
    check_feed_forward_args(x, w1, b1, w2, b2, residual)
    if method not in FFN_METHODS:
        raise ValueError(f"method must be one of {FFN_METHODS}, got {method!r}")

    def fused(x_):
        dtype = x_.dtype  # the autocast dtype under autocast (fp64 stays), as nn.Linear computes
        x2 = x_.reshape(-1, x_.shape[-1])
        res2 = None if residual is None else residual.reshape(-1, w2.shape[0])
        if res2 is not None:  # in y's dtype, the reference's residual + y: x's and the residual's promoted
            res2 = res2.to(torch.promote_types(dtype, res2.dtype))  # (fp32 under bf16 autocast: unchanged)
        # both Functions cast the weights to x's dtype (as nn.Linear under autocast) in one launch
        if ffn_method(method, dtype) == "gemm":
            y = GemmFeedForwardFn.apply(x2, w1, b1, w2, b2, res2)
        else:
            y = FeedForwardFn.apply(x2, w1, b1, w2, b2)
            y = y if res2 is None else res2 + y
        return y.reshape(*x_.shape[:-1], w2.shape[0])

    return run_op("feed_forward", backend, x, lambda: feed_forward_ref(x, w1, b1, w2, b2, residual), fused)
