"""Truncated-rFFT spectral convolution along the second-to-last axis.

y = irfft(Y, n=S) with Y[k, o] = sum_i rfft(x)[k, i] * W[k, i, o] for k < K, 0 for k >= K
(both transforms with norm="ortho"). Reads top to bottom: validation -> reference -> custom ops
over the Triton kernels (torch.library.triton_op, so torch.compile traces through them) ->
autograd Function -> public op.
"""
from __future__ import annotations

import torch

from amg_fast._checks import check_nonempty, check_rank, check_real_float, check_same_device, compute_dtype
from amg_fast._nvtx import nvtx_range
from amg_fast.ops._backend import autocast_dtype, resolve_backend, triton_importable

__all__ = ["spectral_conv1d", "spectral_conv1d_ref", "check_spectral_conv1d_args", "SpectralConv1dFn"]


def check_spectral_conv1d_args(x: torch.Tensor, weight: torch.Tensor) -> None:
    """Validate x [..., S, H_in] and weight [K, H_in, H_out, 2] with 1 <= K <= S//2+1."""
    check_real_float("x", x)
    check_real_float("weight", weight)
    check_rank("x", x, range(2, 16), "[..., S, H_in]")
    check_rank("weight", weight, 4, "[K, H_in, H_out, 2]")
    check_nonempty("x", x, "[..., S, H_in]")
    check_same_device(x=x, weight=weight)
    S, h_in = x.shape[-2], x.shape[-1]
    K = weight.shape[0]
    if weight.shape[-1] != 2:
        raise ValueError(
            f"weight must have a last dimension of 2 (real, imag), got shape {tuple(weight.shape)}"
        )
    if weight.shape[1] != h_in:
        raise ValueError(
            f"weight.shape[1] (H_in) must equal x.shape[-1] = {h_in}, got weight shape "
            f"{tuple(weight.shape)}"
        )
    if not 1 <= K <= S // 2 + 1:
        raise ValueError(
            f"weight.shape[0] (modes K) must be in 1..S//2+1 = 1..{S // 2 + 1} for S = {S}, got {K}"
        )


def spectral_conv1d_ref(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """Pure-PyTorch reference. x [..., S, H_in], weight [K, H_in, H_out, 2] -> y [..., S, H_out].

    Computes in float32 at least (torch.fft has no half-precision CPU path); returns x.dtype.
    """
    dtype = compute_dtype(x, weight)
    S, K = x.shape[-2], weight.shape[0]
    x_hat = torch.fft.rfft(x.to(dtype), dim=-2, norm="ortho")[..., :K, :]  # [..., K, H_in]
    w = torch.view_as_complex(weight.to(dtype).contiguous())  # [K, H_in, H_out]
    y_hat = torch.einsum("...ki,kio->...ko", x_hat, w)  # [..., K, H_out]
    return torch.fft.irfft(y_hat, n=S, dim=-2, norm="ortho").to(x.dtype)


if triton_importable():
    from torch.library import triton_op

    from amg_fast.kernels import spectral_conv as _kernels

    @triton_op("amg_fast::spectral_conv1d_fwd", mutates_args=())
    def _spectral_conv1d_fwd_op(x: torch.Tensor, weight: torch.Tensor, analysis: torch.Tensor,
                                synthesis: torch.Tensor, mode_weights: torch.Tensor, fft: bool
                                ) -> tuple[torch.Tensor, torch.Tensor]:
        """x [R, S, H_in], weight [K, H_in, H_out, 2] -> (y [R, S, H_out], spectrum [2, K, R, H_in])."""
        return _kernels.spectral_conv1d_fwd(x, weight, analysis, synthesis, mode_weights, fft)

    @triton_op("amg_fast::spectral_conv1d_bwd", mutates_args=())
    def _spectral_conv1d_bwd_op(dy: torch.Tensor, spec_x: torch.Tensor, weight: torch.Tensor,
                                analysis: torch.Tensor, synthesis: torch.Tensor, mode_weights: torch.Tensor,
                                x_like: torch.Tensor, fft: bool) -> tuple[torch.Tensor, torch.Tensor]:
        """dy [R, S, H_out] -> (dx [R, S, H_in] in x_like's dtype, dweight like weight)."""
        return _kernels.spectral_conv1d_bwd(dy, spec_x, weight, analysis, synthesis, mode_weights,
                                            x_like.dtype, fft)


class SpectralConv1dFn(torch.autograd.Function):
    """Autograd over the Triton kernels. x [..., S, H_in], weight [K, H_in, H_out, 2] -> y.

    The forward keeps the truncated spectrum of x (as large as x at K = S/2) for dweight.
    transform: "auto" | "dft" (basis GEMM) | "fft" (torch.fft transforms, Triton mixing); "auto"
    uses fft from kernels.spectral_conv.TRANSFORM_FFT_MIN_S on. The DFT bases are computed here
    (cached in eager mode) and passed to the custom ops as tensors.
    """

    @staticmethod
    def forward(ctx, x, weight, transform="auto"):
        lead, (S, h_in) = x.shape[:-2], x.shape[-2:]
        fft = _kernels.use_fft(S, transform)
        bases = _kernels.spectral_bases(S, weight.shape[0], _kernels.work_dtype(x.dtype), x.device)
        y, spec_x = _spectral_conv1d_fwd_op(x.reshape(-1, S, h_in), weight, *bases, fft)
        ctx.save_for_backward(spec_x, weight, *bases)
        ctx.x_meta = (x.shape, x.dtype, fft)
        return y.view(*lead, S, weight.shape[2])

    @staticmethod
    def backward(ctx, dy):
        spec_x, weight, *bases = ctx.saved_tensors
        x_shape, x_dtype, fft = ctx.x_meta
        x_like = spec_x.new_empty((0,), dtype=x_dtype)
        dx, dweight = _spectral_conv1d_bwd_op(dy.reshape(-1, *dy.shape[-2:]), spec_x, weight, *bases, x_like, fft)
        return dx.view(x_shape), dweight, None


def spectral_conv1d(x: torch.Tensor, weight: torch.Tensor, *, backend: str = "auto") -> torch.Tensor:
    """Spectral convolution keeping the first K rFFT modes of x along dim -2.

    x: real [..., S, H_in]; weight: real [K, H_in, H_out, 2] (real, imag parts), 1 <= K <= S//2+1.
    Returns y [..., S, H_out] in x's dtype. backend: "auto" | "triton" | "reference".
    """
    check_spectral_conv1d_args(x, weight)
    if resolve_backend("spectral_conv1d", backend, x.device) == "reference":
        return spectral_conv1d_ref(x, weight)
    with nvtx_range("amg_fast.spectral_conv1d"):
        cast = autocast_dtype(x.device)
        if cast is not None:  # activations in the autocast dtype; weights stay fp32, cast in-kernel
            x = x.to(cast)
        if x.dtype == torch.float16 or weight.dtype == torch.float16:
            raise TypeError("spectral_conv1d with backend='triton' takes float32, float64 or bfloat16 "
                            f"tensors, got x {x.dtype}, weight {weight.dtype}")
        return SpectralConv1dFn.apply(x, weight)
