"""Truncated-rFFT spectral convolution along the second-to-last axis.

y = irfft(Y, n=S) with Y[k, o] = sum_i rfft(x)[k, i] * W[k, i, o] for k < K, 0 for k >= K
(both transforms with norm="ortho"). Reads top to bottom: validation -> reference -> public op.
"""
from __future__ import annotations

import torch

from amg_fast._checks import check_rank, check_real_float, check_same_device, compute_dtype
from amg_fast.ops._backend import resolve_backend

__all__ = ["spectral_conv1d", "spectral_conv1d_ref", "check_spectral_conv1d_args"]


def check_spectral_conv1d_args(x: torch.Tensor, weight: torch.Tensor) -> None:
    """Validate x [..., S, H_in] and weight [K, H_in, H_out, 2] with 1 <= K <= S//2+1."""
    check_real_float("x", x)
    check_real_float("weight", weight)
    check_rank("x", x, range(2, 16), "[..., S, H_in]")
    check_rank("weight", weight, 4, "[K, H_in, H_out, 2]")
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


def spectral_conv1d(x: torch.Tensor, weight: torch.Tensor, *, backend: str = "auto") -> torch.Tensor:
    """Spectral convolution keeping the first K rFFT modes of x along dim -2.

    x: real [..., S, H_in]; weight: real [K, H_in, H_out, 2] (real, imag parts), 1 <= K <= S//2+1.
    Returns y [..., S, H_out] in x's dtype. backend: "auto" | "triton" | "reference".
    """
    check_spectral_conv1d_args(x, weight)
    resolve_backend("spectral_conv1d", backend, x.device, has_triton_kernels=False)
    return spectral_conv1d_ref(x, weight)
