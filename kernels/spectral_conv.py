"""Triton kernels for the truncated-rFFT spectral convolution (amg_fast.ops.spectral_conv1d).

The op y = irfft(W . rfft(x)[:K]) (norm="ortho") is three GEMM-shaped stages, each a kernel:

  analysis   X[m, r, i] = sum_s A[m, s] x[r, s, i]        A [2K, S]: cos rows, then -sin rows
  mixing     Y[k, r, o] = sum_i X[k, r, i] W[k, i, o]     complex, per mode k (4 real tl.dots)
  synthesis  y[r, s, o] = sum_m G[s, m] Y[m, r, o]        G [S, 2K]: a_k cos, -a_k sin (a_k = 1 or 2)

Intermediates are real, mode-major [2, K, R, H] (real parts, then imaginary parts), so every
tile load is contiguous along channels and the mixing reads [rows, channels] tiles directly.
The backward is the same kernels on the adjoint bases (dY = G^T dy, dX = dY W^H, dx = A^T dX)
plus one kernel for dW[k] = X[k]^H dY[k]. Why not one kernel per row tile: at K = S/2 the
spectrum of a tile is as large as the tile, and the mixing must reuse W across many rows (the
tl.dot M dimension) while the transforms contract over S within a row; a row tile's working set
(rows x S x H) does not fit on chip at the paper's sizes, so the intermediates go through L2/HBM
between three launches. With transform "fft" (from S = TRANSFORM_FFT_MIN_S on under "auto", see
kernels/limits.py) the analysis/synthesis go through torch.fft (O(S log S)) and only the mixing runs
in Triton.
"""
from __future__ import annotations

import collections
import math
import os

import torch
import triton
import triton.language as tl
from torch.library import wrap_triton

from amg_fast.kernels._common import acc_dtype, cdiv, dot_precision, irfft_ortho, new_output, next_pow2, tracing

# Reduced-precision MMAs: on an H200 (2026-11-26, results/gpu/20261126-h200/) these kernels with plain
# TF32 dots (TF32 allowed) were 3-9% off an fp32 reference at S = 128 and at S = 1024 (where only the
# mixing kernel runs), and with bf16 operands 6% off at S = 128, while a CPU emulation of the same
# bf16 algorithm is 4.5e-3 off and the fp32-accurate "tf32x3" path passed every test at every size.
# Until a GPU run shows the reduced paths right, the spectral conv computes in fp32 with tf32x3 dots
# whatever the input dtype (bf16 in, bf16 out) and the TF32 setting. AMG_FAST_SPECTRAL_REDUCED_DOTS=1
# (read at import) or REDUCED_PRECISION_DOTS = True opts back in: bf16 intermediates and bf16 MMAs for
# bf16 inputs, plain TF32 dots for fp32 inputs when TF32 is allowed.
REDUCED_PRECISION_DOTS = os.environ.get("AMG_FAST_SPECTRAL_REDUCED_DOTS", "0") == "1"

# Launch configurations (block sizes are capped by the problem size, min 16 for tl.dot). Tuned by
# bench/kernel_sweep.py on a GPU; module-level so a sweep can override them.
TRANSFORM_CONFIG = dict(BLOCK_M=64, BLOCK_J=32, BLOCK_N=128, num_warps=4)
MIX_CONFIG = dict(BLOCK_R=64, BLOCK_I=32, BLOCK_O=64, num_warps=4)
DWEIGHT_CONFIG = dict(BLOCK_R=32, BLOCK_I=64, BLOCK_O=64, num_warps=4)


def _blocks(config: dict, **sizes: int) -> dict:
    """Cap each BLOCK_X of config at next_pow2(size X) (>= 16); keep the other launch options."""
    out = dict(config)
    for name, size in sizes.items():
        out[f"BLOCK_{name}"] = min(config[f"BLOCK_{name}"], next_pow2(size))
    return out


@triton.jit
def _spectral_conv1d_transform_kernel(
    basis_ptr, inp_ptr, out_ptr,
    M, J, N,
    stride_bm, stride_bj,
    stride_ij, stride_ir, stride_in,
    stride_om, stride_or, stride_on,
    BLOCK_M: tl.constexpr, BLOCK_J: tl.constexpr, BLOCK_N: tl.constexpr, DOT_PRECISION: tl.constexpr,
):
    """out[m, r, n] = sum_j basis[m, j] * inp[j, r, n] for one row r per program (grid axis 0)."""
    r = tl.program_id(0)
    n_tiles_n = tl.cdiv(N, BLOCK_N)
    pid_m = tl.program_id(1) // n_tiles_n
    pid_n = tl.program_id(1) % n_tiles_n
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_j = tl.arange(0, BLOCK_J)
    r64 = r.to(tl.int64)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float64 if DOT_PRECISION == "ieee" else tl.float32)
    for j0 in range(0, J, BLOCK_J):
        jj = j0 + offs_j
        a = tl.load(basis_ptr + offs_m[:, None] * stride_bm + jj[None, :] * stride_bj,
                    mask=(offs_m[:, None] < M) & (jj[None, :] < J), other=0.0)
        b = tl.load(inp_ptr + r64 * stride_ir + jj[:, None] * stride_ij + offs_n[None, :] * stride_in,
                    mask=(jj[:, None] < J) & (offs_n[None, :] < N), other=0.0)
        acc += tl.dot(a, b.to(a.dtype), input_precision=DOT_PRECISION)
    tl.store(out_ptr + r64 * stride_or + offs_m[:, None] * stride_om + offs_n[None, :] * stride_on,
             acc.to(out_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@triton.jit
def _spectral_conv1d_mix_kernel(
    inp_ptr, w_ptr, out_ptr,
    R, C_IN, C_OUT,
    stride_ic, stride_ik, stride_ir,
    stride_wk, stride_wi, stride_wo,
    stride_oc, stride_ok, stride_or,
    CONJ: tl.constexpr,
    BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr, BLOCK_O: tl.constexpr, DOT_PRECISION: tl.constexpr,
):
    """out[k, r, o] = sum_i inp[k, r, i] * w[k, i, o] in complex arithmetic on split parts.

    inp/out: [2, K, R, C] (real, imag planes; channels contiguous); w: interleaved (re, im)
    pairs addressed by (stride_wk, stride_wi, stride_wo); CONJ uses conj(w). Grid (R tiles, K, O tiles).
    """
    pid_r, k, pid_o = tl.program_id(0), tl.program_id(1).to(tl.int64), tl.program_id(2)
    offs_r = pid_r * BLOCK_R + tl.arange(0, BLOCK_R)
    offs_o = pid_o * BLOCK_O + tl.arange(0, BLOCK_O)
    offs_i = tl.arange(0, BLOCK_I)
    acc_ty = tl.float64 if DOT_PRECISION == "ieee" else tl.float32  # "ieee" only for fp64 inputs
    acc_re = tl.zeros((BLOCK_R, BLOCK_O), dtype=acc_ty)
    acc_im = tl.zeros((BLOCK_R, BLOCK_O), dtype=acc_ty)
    in_base = inp_ptr + k * stride_ik + offs_r[:, None].to(tl.int64) * stride_ir
    w_base = w_ptr + k * stride_wk + offs_o[None, :] * stride_wo
    for i0 in range(0, C_IN, BLOCK_I):
        ii = i0 + offs_i
        x_mask = (offs_r[:, None] < R) & (ii[None, :] < C_IN)
        x_re = tl.load(in_base + ii[None, :], mask=x_mask, other=0.0)
        x_im = tl.load(in_base + stride_ic + ii[None, :], mask=x_mask, other=0.0)
        w_mask = (ii[:, None] < C_IN) & (offs_o[None, :] < C_OUT)
        w_ptrs = w_base + ii[:, None] * stride_wi
        w_re = tl.load(w_ptrs, mask=w_mask, other=0.0).to(x_re.dtype)
        w_im = tl.load(w_ptrs + 1, mask=w_mask, other=0.0).to(x_re.dtype)
        if CONJ:
            w_im = -w_im
        acc_re += tl.dot(x_re, w_re, input_precision=DOT_PRECISION) - tl.dot(x_im, w_im, input_precision=DOT_PRECISION)
        acc_im += tl.dot(x_re, w_im, input_precision=DOT_PRECISION) + tl.dot(x_im, w_re, input_precision=DOT_PRECISION)
    out_ptrs = out_ptr + k * stride_ok + offs_r[:, None].to(tl.int64) * stride_or + offs_o[None, :]
    out_mask = (offs_r[:, None] < R) & (offs_o[None, :] < C_OUT)
    tl.store(out_ptrs, acc_re.to(out_ptr.dtype.element_ty), mask=out_mask)
    tl.store(out_ptrs + stride_oc, acc_im.to(out_ptr.dtype.element_ty), mask=out_mask)


@triton.jit
def _spectral_conv1d_dweight_kernel(
    x_ptr, dy_ptr, dw_ptr,
    R, C_IN, C_OUT,
    stride_xc, stride_xk, stride_xr,
    stride_yc, stride_yk, stride_yr,
    stride_wk, stride_wi, stride_wo,
    BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr, BLOCK_O: tl.constexpr, DOT_PRECISION: tl.constexpr,
):
    """dw[k, i, o] = sum_r conj(x[k, r, i]) * dy[k, r, o], written as interleaved (re, im).

    x: [2, K, R, C_IN], dy: [2, K, R, C_OUT] (split planes). Grid (K, I tiles, O tiles).
    """
    k, pid_i, pid_o = tl.program_id(0).to(tl.int64), tl.program_id(1), tl.program_id(2)
    offs_i = pid_i * BLOCK_I + tl.arange(0, BLOCK_I)
    offs_o = pid_o * BLOCK_O + tl.arange(0, BLOCK_O)
    offs_r = tl.arange(0, BLOCK_R)
    acc_ty = tl.float64 if DOT_PRECISION == "ieee" else tl.float32  # "ieee" only for fp64 inputs
    acc_re = tl.zeros((BLOCK_I, BLOCK_O), dtype=acc_ty)
    acc_im = tl.zeros((BLOCK_I, BLOCK_O), dtype=acc_ty)
    for r0 in range(0, R, BLOCK_R):
        rr = (r0 + offs_r).to(tl.int64)
        xt_mask = (offs_i[:, None] < C_IN) & (rr[None, :] < R)
        xt_ptrs = x_ptr + k * stride_xk + rr[None, :] * stride_xr + offs_i[:, None]  # [I, R] = x^T
        xt_re = tl.load(xt_ptrs, mask=xt_mask, other=0.0)
        xt_im = tl.load(xt_ptrs + stride_xc, mask=xt_mask, other=0.0)
        dy_mask = (rr[:, None] < R) & (offs_o[None, :] < C_OUT)
        dy_ptrs = dy_ptr + k * stride_yk + rr[:, None] * stride_yr + offs_o[None, :]
        dy_re = tl.load(dy_ptrs, mask=dy_mask, other=0.0).to(xt_re.dtype)
        dy_im = tl.load(dy_ptrs + stride_yc, mask=dy_mask, other=0.0).to(xt_re.dtype)
        acc_re += tl.dot(xt_re, dy_re, input_precision=DOT_PRECISION) + tl.dot(xt_im, dy_im, input_precision=DOT_PRECISION)
        acc_im += tl.dot(xt_re, dy_im, input_precision=DOT_PRECISION) - tl.dot(xt_im, dy_re, input_precision=DOT_PRECISION)
    w_ptrs = dw_ptr + k * stride_wk + offs_i[:, None] * stride_wi + offs_o[None, :] * stride_wo
    w_mask = (offs_i[:, None] < C_IN) & (offs_o[None, :] < C_OUT)
    tl.store(w_ptrs, acc_re.to(dw_ptr.dtype.element_ty), mask=w_mask)
    tl.store(w_ptrs + 1, acc_im.to(dw_ptr.dtype.element_ty), mask=w_mask)


# ---------------------------------------------------------------------------------------------
# Bases and launchers
# ---------------------------------------------------------------------------------------------

def work_dtype(dtype: torch.dtype) -> torch.dtype:
    """Dtype of bases and intermediates: the accumulation dtype (_common.acc_dtype: fp64 for fp64,
    else fp32), or the input's own for bf16/fp16 with REDUCED_PRECISION_DOTS."""
    if REDUCED_PRECISION_DOTS and dtype in (torch.bfloat16, torch.float16):
        return dtype
    return acc_dtype(dtype)


def _dots(dtype: torch.dtype) -> str:
    """tl.dot input_precision of these kernels: _common.dot_precision, reduced (plain TF32) only with
    REDUCED_PRECISION_DOTS."""
    return dot_precision(dtype, reduced=REDUCED_PRECISION_DOTS)


# Bases per (S, K, dtype, device), least recently used dropped beyond this many (each is 3 S K values).
BASES_CACHE_SIZE = 32
_BASES_CACHE: collections.OrderedDict[tuple, tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = collections.OrderedDict()


def spectral_bases(S: int, K: int, dtype: torch.dtype, device: torch.device
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(A [2K, S], G [S, 2K], a [K]) for S samples and K modes, in dtype (use work_dtype(x.dtype)).

    A: the ortho rFFT analysis basis (cos rows, then -sin rows): [X_re; X_im] = A x.
    G: the synthesis basis: irfft(Y, n=S, norm="ortho") = G [Y_re; Y_im], G = (A * [a; a]).T.
    a: the irfft mode weights a_k (1 for k = 0 and the Nyquist mode of an even S, else 2).
    Cached per (S, K, dtype, device) in eager mode, so a call launches no basis work.
    """
    key = (S, K, dtype, device)
    if key in _BASES_CACHE and not tracing():
        _BASES_CACHE.move_to_end(key)
        return _BASES_CACHE[key]
    k = torch.arange(K, dtype=torch.int64, device=device)
    s = torch.arange(S, dtype=torch.int64, device=device)
    angle = (2 * math.pi / S) * torch.remainder(k[:, None] * s[None, :], S).to(torch.float64)  # exact reduction
    A = torch.cat([torch.cos(angle), -torch.sin(angle)]) / math.sqrt(S)
    a = torch.where((k == 0) | (2 * k == S), 1.0, 2.0).to(torch.float64)
    G = (A * torch.cat([a, a])[:, None]).t().contiguous()
    bases = (A.to(dtype), G.to(dtype), a.to(dtype))
    if not tracing():
        _BASES_CACHE[key] = bases
        while len(_BASES_CACHE) > BASES_CACHE_SIZE:
            _BASES_CACHE.popitem(last=False)
    return bases


def _launch_transform(basis: torch.Tensor, inp: torch.Tensor, out: torch.Tensor, inp_strides, out_strides) -> None:
    """out[m, r, n] = sum_j basis[m, j] inp[j, r, n]; strides are (j|m, r, n) element strides."""
    M, J = basis.shape
    R, N = out.numel() // (M * out.shape[-1]), out.shape[-1]
    cfg = _blocks(TRANSFORM_CONFIG, M=M, J=J, N=N)
    grid = (R, cdiv(M, cfg["BLOCK_M"]) * cdiv(N, cfg["BLOCK_N"]))
    wrap_triton(_spectral_conv1d_transform_kernel)[grid](
        basis, inp, out, M, J, N, basis.stride(0), basis.stride(1), *inp_strides, *out_strides,
        DOT_PRECISION=_dots(basis.dtype), **cfg,
    )


def _analysis(x: torch.Tensor, basis: torch.Tensor, mode_weights: torch.Tensor, fft: bool, adjoint: bool
              ) -> torch.Tensor:
    """x [R, S, C] -> spectrum [2, K, R, C] = basis @ x (basis [2K, S], any strides).

    Forward: basis = A (rfft(x)[:K]); backward of the synthesis: basis = G^T (= a_k rfft(x)[:K]).
    With fft, torch.fft does the transform (times mode_weights when adjoint, i.e. basis is G^T)."""
    R, S, C = x.shape
    K = basis.shape[0] // 2
    if fft:
        spec = torch.fft.rfft(x.to(torch.promote_types(basis.dtype, torch.float32)), dim=1, norm="ortho")[:, :K]
        if adjoint:
            spec = spec * mode_weights.to(spec.real.dtype)[:, None]
        return torch.view_as_real(spec).permute(3, 1, 0, 2).to(basis.dtype).contiguous()
    out = new_output((2, K, R, C), dtype=basis.dtype, device=x.device)
    _launch_transform(basis, x, out, (x.stride(1), x.stride(0), x.stride(2)),
                      (out.stride(1), out.stride(2), out.stride(3)))
    return out


def _synthesis(spec: torch.Tensor, basis: torch.Tensor, mode_weights: torch.Tensor, out_dtype: torch.dtype,
               fft: bool, adjoint: bool) -> torch.Tensor:
    """spectrum [2, K, R, C] -> y [R, S, C] = basis @ spectrum (basis [S, 2K], any strides).

    Forward: basis = G (irfft); backward of the analysis: basis = A^T (= irfft(spec / a_k)).
    With fft, torch.fft does the transform (dividing by mode_weights when adjoint, i.e. basis is A^T)."""
    _, K, R, C = spec.shape
    S = basis.shape[0]
    if fft:
        z = torch.view_as_complex(spec.to(torch.promote_types(spec.dtype, torch.float32)).permute(2, 1, 3, 0).contiguous())
        if adjoint:
            z = z / mode_weights.to(z.real.dtype)[:, None]
        return irfft_ortho(z, S, dim=1).to(out_dtype)
    out = new_output((R, S, C), dtype=out_dtype, device=spec.device)
    flat = spec.view(2 * K, R, C)
    _launch_transform(basis, flat, out, (flat.stride(0), flat.stride(1), flat.stride(2)),
                      (out.stride(1), out.stride(0), out.stride(2)))
    return out


def _mix(spec: torch.Tensor, weight: torch.Tensor, adjoint: bool) -> torch.Tensor:
    """spec [2, K, R, C_in] x weight [K, H_in, H_out, 2] -> [2, K, R, C_out].
    adjoint=False: Y = X W (C_in = H_in); True: dX = dY W^H (C_in = H_out, C_out = H_in)."""
    _, K, R, C_in = spec.shape
    h_in, h_out = weight.shape[1], weight.shape[2]
    C_out = h_in if adjoint else h_out
    s_wi, s_wo = (weight.stride(2), weight.stride(1)) if adjoint else (weight.stride(1), weight.stride(2))
    out = new_output((2, K, R, C_out), dtype=spec.dtype, device=spec.device)
    cfg = _blocks(MIX_CONFIG, R=R, I=C_in, O=C_out)
    grid = (cdiv(R, cfg["BLOCK_R"]), K, cdiv(C_out, cfg["BLOCK_O"]))
    wrap_triton(_spectral_conv1d_mix_kernel)[grid](
        spec, weight, out, R, C_in, C_out,
        spec.stride(0), spec.stride(1), spec.stride(2),
        weight.stride(0), s_wi, s_wo,
        out.stride(0), out.stride(1), out.stride(2),
        CONJ=adjoint, DOT_PRECISION=_dots(spec.dtype), **cfg,
    )
    return out


def _dweight(spec_x: torch.Tensor, spec_dy: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """dW [K, H_in, H_out, 2] = X^H dY per mode, from X [2, K, R, H_in] and dY [2, K, R, H_out]."""
    _, K, R, h_in = spec_x.shape
    h_out = spec_dy.shape[-1]
    dw = new_output(weight.shape, dtype=weight.dtype, device=weight.device)
    cfg = _blocks(DWEIGHT_CONFIG, R=R, I=h_in, O=h_out)
    grid = (K, cdiv(h_in, cfg["BLOCK_I"]), cdiv(h_out, cfg["BLOCK_O"]))
    wrap_triton(_spectral_conv1d_dweight_kernel)[grid](
        spec_x, spec_dy, dw, R, h_in, h_out,
        spec_x.stride(0), spec_x.stride(1), spec_x.stride(2),
        spec_dy.stride(0), spec_dy.stride(1), spec_dy.stride(2),
        dw.stride(0), dw.stride(1), dw.stride(2),
        DOT_PRECISION=_dots(spec_x.dtype), **cfg,
    )
    return dw


def spectral_conv1d_fwd(x: torch.Tensor, weight: torch.Tensor, analysis: torch.Tensor, synthesis: torch.Tensor,
                        mode_weights: torch.Tensor, fft: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """x [R, S, H_in], weight [K, H_in, H_out, 2], bases from spectral_bases(S, K, work dtype) ->
    (y [R, S, H_out] in x.dtype, the truncated spectrum X [2, K, R, H_in] kept for the backward)."""
    x, weight = x.contiguous(), weight.contiguous()
    spec_x = _analysis(x, analysis, mode_weights, fft, adjoint=False)
    spec_y = _mix(spec_x, weight, adjoint=False)
    return _synthesis(spec_y, synthesis, mode_weights, x.dtype, fft, adjoint=False), spec_x


def spectral_conv1d_bwd(dy: torch.Tensor, spec_x: torch.Tensor, weight: torch.Tensor, analysis: torch.Tensor,
                        synthesis: torch.Tensor, mode_weights: torch.Tensor, x_dtype: torch.dtype, fft: bool
                        ) -> tuple[torch.Tensor, torch.Tensor]:
    """dy [R, S, H_out], spec_x [2, K, R, H_in] (from the forward), weight, the forward's bases ->
    (dx [R, S, H_in] in x_dtype, dweight like weight). Runs the adjoint chain G^T, W^H, A^T."""
    dy, weight = dy.contiguous(), weight.contiguous()
    spec_dy = _analysis(dy.to(spec_x.dtype), synthesis.t(), mode_weights, fft, adjoint=True)
    dweight = _dweight(spec_x, spec_dy, weight)
    spec_dx = _mix(spec_dy, weight, adjoint=True)
    return _synthesis(spec_dx, analysis.t(), mode_weights, x_dtype, fft, adjoint=True), dweight
