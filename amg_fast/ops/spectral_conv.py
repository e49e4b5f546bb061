"""Truncated-rFFT spectral convolution along one axis (default: the second-to-last), channels last.

y = irfft(Y, n=S) with Y[k, o] = sum_i rfft(x)[k, i] * W[k, i, o] for k < K, 0 for k >= K
(both transforms along `dim`, norm="ortho"). Reads top to bottom: validation -> reference -> autograd
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


def check_spectral_conv1d_args(x: torch.Tensor, weight: torch.Tensor, dim: int = -2) -> int:
    """Validate x [..., S, ..., H_in] (S at dim), weight [K, H_in, H_out, 2] with 1 <= K <= S//2+1 and
    dim (any axis of x but the last, the channel axis; counted from either end). Returns dim >= 0."""
    check_real_float("x", x)
    check_real_float("weight", weight)
    check_rank("x", x, range(2, 16), "[..., S, H_in]")
    check_rank("weight", weight, 4, "[K, H_in, H_out, 2]")
    check_nonempty("x", x, "[..., S, H_in]")
    check_same_device(x=x, weight=weight)
    n = x.dim()
    if isinstance(dim, bool) or not isinstance(dim, int) or not -n <= dim < n or dim % n == n - 1:
        raise ValueError(f"dim must be an axis of x other than the last (the channel axis): an int in "
                         f"{-n}..{-2} or 0..{n - 2} for x of shape {tuple(x.shape)}, got {dim!r}")
    dim %= n
    S, h_in = x.shape[dim], x.shape[-1]
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
    return dim


def spectral_conv1d_ref(x: torch.Tensor, weight: torch.Tensor, dim: int = -2) -> torch.Tensor:
    """Pure-PyTorch reference. x [..., S, ..., H_in] (S at dim), weight [K, H_in, H_out, 2] -> y like x
    with H_out channels. Computes in float32 at least (torch.fft has no half-precision CPU path); returns
    x.dtype. Another dim than -2 moves that axis to -2 and back (views)."""
    if dim % x.dim() != x.dim() - 2:
        return spectral_conv1d_ref(x.movedim(dim, -2), weight).movedim(-2, dim)
    dtype = acc_dtype(x, weight)
    S, K = x.shape[-2], weight.shape[0]
    x_hat = torch.fft.rfft(x.to(dtype), dim=-2, norm="ortho")[..., :K, :]  # [..., K, H_in]
    w = torch.view_as_complex(weight.to(dtype).contiguous())  # [K, H_in, H_out]
    y_hat = torch.einsum("...ki,kio->...ko", x_hat, w)  # [..., K, H_out]
    return irfft_ortho(y_hat, S, dim=-2).to(x.dtype)  # torch.fft.irfft, with DC's (and Nyquist's) imag. part 0


class SpectralConv1dFn(torch.autograd.Function):
    """Autograd over the Triton kernels. x [..., S, ..., H_in] (S at dim), weight [K, H_in, H_out, 2] -> y.

    transform: "dft" (basis GEMM) | "fft" (torch.fft transforms, Triton mixing) | "auto"
    (kernels.limits.spectral_transform). The forward keeps the spectrum of x (as large as x at K = S/2)
    and W's planes as the mixing reads them (real and imaginary; in fp32 mode the TF32 splits of what its
    products read, 2x (four) or 3x (Gauss) as large) and, from the cuBLAS mixing of the "dft" path, W's real
    blocks [K, 2 H_in, 2 H_out], whose transpose is W^H's (the backward builds none), for the backward. The DFT
    bases are computed here (cached in eager mode) and passed to the custom ops as tensors; the fft path reads
    only their dtype, so it gets (and saves) two empty tensors of the work dtype instead (at S = 4096 the fp32
    bases' planes were 256 MB).
    """

    @staticmethod
    def forward(ctx, x, weight, transform="dft", dim=-2):
        from amg_fast.kernels import spectral_conv as kernels  # imports triton: only on the Triton path

        dim %= x.dim()
        S = x.shape[dim]
        fft = spectral_transform(transform, S, x.dtype) == "fft"
        work = kernels.work_dtype(x.dtype)
        bases = ((x.new_empty((0,), dtype=work),) * 2 if fft
                 else kernels.spectral_bases(S, weight.shape[0], work, x.device))
        split = kernels.row_split(x, dim)  # how the other axes form two strided row groups (no copy of x)
        # W as the mixing reads it ([2 or 2 P, K, H_in, H_out]), and as the forward's does (weight_planes_for_forward)
        planes, forward_planes = kernels.weight_planes_for_forward(weight, x.dtype)
        y, spec_x, blocks = triton_ops().spectral_conv1d_fwd(x, forward_planes, *bases, fft, dim, split)
        ctx.save_for_backward(spec_x, planes, *bases, blocks)
        ctx.meta = (x.dtype, weight.dtype, fft, dim, split)
        return y

    @staticmethod
    def backward(ctx, dy):
        spec_x, planes, analysis, synthesis, blocks = ctx.saved_tensors
        x_dtype, weight_dtype, fft, dim, split = ctx.meta
        x_like = spec_x.new_empty((0,), dtype=x_dtype)
        weight_like = spec_x.new_empty((0,), dtype=weight_dtype)
        dx, dweight = triton_ops().spectral_conv1d_bwd(dy, spec_x, planes, analysis, synthesis, blocks, x_like,
                                                       weight_like, fft, dim, split)
        return dx, dweight, None, None


def spectral_conv1d(x: torch.Tensor, weight: torch.Tensor, *, dim: int = -2, backend: str = "auto",
                    transform: str = "auto") -> torch.Tensor:
    """Spectral convolution keeping the first K rFFT modes of x along dim; channels are the last axis.

    x: real [..., S, ..., H_in] with S = x.shape[dim]; dim: any axis but the last (default -2, e.g. 1 or
    2 for X or Y of a [B, X, Y, H] field), counted from either end. weight: real [K, H_in, H_out, 2]
    (real, imag parts), 1 <= K <= S//2+1. Returns y like x with H_out channels, in x's dtype.
    backend: "auto" | "triton" | "reference". The Triton kernels read the axis in place through strides.
    transform (Triton backend only; the reference always uses torch.fft): "auto" | "dft" | "fft":
    "dft" runs the truncated transforms as GEMMs against cached cos/sin bases (fastest at small S),
    "fft" runs them through torch.fft with only the mode mixing in Triton; "auto" = fft from
    S = TRANSFORM_FFT_MIN_S on, or the precision mode's own crossover (TRANSFORM_FFT_MIN_S_BY_MODE;
    kernels/limits.py, measured; AMG_FAST_SPECTRAL_TRANSFORM overrides).
    Results agree to rounding.
    """
    dim = check_spectral_conv1d_args(x, weight, dim)
    if transform not in SPECTRAL_TRANSFORMS:
        raise ValueError(f"transform must be one of {SPECTRAL_TRANSFORMS}, got {transform!r}")

    def triton(x_):
        if x_.dtype == torch.float16 or weight.dtype == torch.float16:
            raise TypeError("spectral_conv1d with backend='triton' takes float32, float64 or bfloat16 "
                            f"tensors, got x {x_.dtype}, weight {weight.dtype}")
        return SpectralConv1dFn.apply(x_, weight, spectral_transform(transform, x_.shape[dim], x_.dtype), dim)

    return run_op("spectral_conv1d", backend, x, lambda: spectral_conv1d_ref(x, weight, dim), triton)
