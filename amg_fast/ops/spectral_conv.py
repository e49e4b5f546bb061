"""Truncated-rFFT spectral convolution along the second-to-last axis.

y = irfft(Y, n=S) with Y[k, o] = sum_i rfft(x)[k, i] * W[k, i, o] for k < K, 0 for k >= K
(both transforms with norm="ortho"). Reads top to bottom: validation -> reference -> autograd
Function over the Triton kernels (torch.ops.amg_fast.spectral_conv1d_*, registered in
ops/_triton_ops.py) -> public op.
"""
from __future__ import annotations

import torch

from amg_fast._checks import acc_dtype, check_nonempty, check_rank, check_real_float, check_same_device
from amg_fast.kernels._common import irfft_ortho
from amg_fast.kernels.limits import SPECTRAL_TRANSFORMS, spectral_transform
from amg_fast.ops._backend import run_op, triton_ops

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
    dtype = acc_dtype(x, weight)
    S, K = x.shape[-2], weight.shape[0]
    x_hat = torch.fft.rfft(x.to(dtype), dim=-2, norm="ortho")[..., :K, :]  # [..., K, H_in]
    w = torch.view_as_complex(weight.to(dtype).contiguous())  # [K, H_in, H_out]
    y_hat = torch.einsum("...ki,kio->...ko", x_hat, w)  # [..., K, H_out]
    return irfft_ortho(y_hat, S, dim=-2).to(x.dtype)  # torch.fft.irfft, with DC's (and Nyquist's) imag. part 0


class SpectralConv1dFn(torch.autograd.Function):
    """Autograd over the Triton kernels. x [..., S, H_in], weight [K, H_in, H_out, 2] -> y.

    The forward keeps the truncated spectrum of x (as large as x at K = S/2) for dweight.
    transform: "dft" (basis GEMM) | "fft" (torch.fft transforms, Triton mixing), already resolved
    (kernels.limits.spectral_transform). The DFT bases are computed here (cached in eager mode) and
    passed to the custom ops as tensors.
    """

    @staticmethod
    def forward(ctx, x, weight, transform="dft"):
        from amg_fast.kernels import spectral_conv as kernels  # imports triton: only on the Triton path

        lead, (S, h_in) = x.shape[:-2], x.shape[-2:]
        fft = spectral_transform(transform, S) == "fft"
        bases = kernels.spectral_bases(S, weight.shape[0], kernels.work_dtype(x.dtype), x.device)
        y, spec_x = triton_ops().spectral_conv1d_fwd(x.reshape(-1, S, h_in), weight, *bases, fft)
        ctx.save_for_backward(spec_x, weight, *bases)
        ctx.x_meta = (x.shape, x.dtype, fft)
        return y.view(*lead, S, weight.shape[2])

    @staticmethod
    def backward(ctx, dy):
        spec_x, weight, *bases = ctx.saved_tensors
        x_shape, x_dtype, fft = ctx.x_meta
        x_like = spec_x.new_empty((0,), dtype=x_dtype)
        dx, dweight = triton_ops().spectral_conv1d_bwd(dy.reshape(-1, *dy.shape[-2:]), spec_x, weight, *bases,
                                                             x_like, fft)
        return dx.view(x_shape), dweight, None


def spectral_conv1d(x: torch.Tensor, weight: torch.Tensor, *, backend: str = "auto",
                    transform: str = "auto") -> torch.Tensor:
    """Spectral convolution keeping the first K rFFT modes of x along dim -2.

    x: real [..., S, H_in]; weight: real [K, H_in, H_out, 2] (real, imag parts), 1 <= K <= S//2+1.
    Returns y [..., S, H_out] in x's dtype. backend: "auto" | "triton" | "reference".
    transform (Triton backend only; the reference always uses torch.fft): "auto" | "dft" | "fft":
    "dft" runs the truncated transforms as GEMMs against cached cos/sin bases (fastest at small S),
    "fft" runs them through torch.fft with only the mode mixing in Triton; "auto" = fft from
    S = TRANSFORM_FFT_MIN_S on (kernels/limits.py, measured). Results agree to rounding.
    """
    check_spectral_conv1d_args(x, weight)
    if transform not in SPECTRAL_TRANSFORMS:
        raise ValueError(f"transform must be one of {SPECTRAL_TRANSFORMS}, got {transform!r}")

    def triton(x_):
        if x_.dtype == torch.float16 or weight.dtype == torch.float16:
            raise TypeError("spectral_conv1d with backend='triton' takes float32, float64 or bfloat16 "
                            f"tensors, got x {x_.dtype}, weight {weight.dtype}")
        return SpectralConv1dFn.apply(x_, weight, spectral_transform(transform, x_.shape[-2]))

    return run_op("spectral_conv1d", backend, x, lambda: spectral_conv1d_ref(x, weight), triton)
