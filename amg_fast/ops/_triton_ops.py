"""The Triton kernels registered as torch.library custom ops (torch.ops.amg_fast.*), in one module.

Every autograd Function in amg_fast.ops calls its kernels as torch.ops.amg_fast.<name>. This module
imports triton, so it is imported lazily: amg_fast.ops._backend.load_triton_ops() runs it the first
time an op resolves to the Triton backend (also inside a torch.compile trace, where the import runs
at trace time); importing amg_fast never imports triton. Registered as triton_op so that
torch.compile traces through the kernel launches (each launcher calls its kernel through
torch.library.wrap_triton).
"""
from __future__ import annotations

import torch
from torch.library import triton_op

from amg_fast.kernels import _tf32
from amg_fast.kernels import composed_linear as _composed
from amg_fast.kernels import ffn_gemm as _ffn_gemm
from amg_fast.kernels import glu_grad as _glu_grad
from amg_fast.kernels import gate_fusion as _gate
from amg_fast.kernels import grid_linear as _grid_linear
from amg_fast.kernels import relu_grad as _relu_grad
from amg_fast.kernels import s4d_scan as _s4d
from amg_fast.kernels import spectral_conv as _spectral

# ----------------------------------------------------------------------------- spectral_conv1d

@triton_op("amg_fast::spectral_conv1d_fwd", mutates_args=())
def _spectral_conv1d_fwd_op(x: torch.Tensor, planes: torch.Tensor, analysis: torch.Tensor,
                            synthesis: torch.Tensor, fft: bool, dim: int, split: int
                            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """x [..., S, ..., H_in] (S at dim >= 0, rows grouped by split), W's planes (weight_planes: [2, K, H_in,
    H_out], fp32 mode's split planes [2 P, K, H_in, H_out]) ->
    (y like x with H_out channels, the spectrum of x [P, modes, Q, H_in, 2], the cuBLAS mixing's W blocks for
    the backward or an empty tensor)."""
    return _spectral.spectral_conv1d_fwd(x, planes, analysis, synthesis, fft, dim, split)

@triton_op("amg_fast::spectral_conv1d_bwd", mutates_args=())
def _spectral_conv1d_bwd_op(dy: torch.Tensor, spec_x: torch.Tensor, planes: torch.Tensor,
                            analysis: torch.Tensor, synthesis: torch.Tensor, blocks: torch.Tensor,
                            x_like: torch.Tensor, weight_like: torch.Tensor, fft: bool, dim: int, split: int
                            ) -> tuple[torch.Tensor, torch.Tensor]:
    """dy like y -> (dx in x_like's dtype, dweight [K, H_in, H_out, 2] in weight_like's)."""
    return _spectral.spectral_conv1d_bwd(dy, spec_x, planes, analysis, synthesis, x_like.dtype, weight_like.dtype,
                                        fft, dim, split, blocks)


# ----------------------------------------------------------------------------- s4d_scan, s4d_step

@triton_op("amg_fast::s4d_conv_kernel_fwd", mutates_args=())
def _s4d_conv_kernel_fwd_op(lam: torch.Tensor, c: torch.Tensor, T: int) -> torch.Tensor:
    return _s4d.s4d_conv_kernel_fwd(lam, c, T)

@triton_op("amg_fast::s4d_conv_kernel_bwd", mutates_args=())
def _s4d_conv_kernel_bwd_op(part: torch.Tensor, lam: torch.Tensor, c: torch.Tensor
                            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """part [G, H, T] (partial sums of dK) -> (dlam, dc [H, N, 2], dd [H])."""
    return _s4d.s4d_conv_kernel_bwd(part, lam, c)

@triton_op("amg_fast::s4d_zoh_conv_kernel_fwd", mutates_args=())
def _s4d_zoh_conv_kernel_fwd_op(log_dt: torch.Tensor, log_A_real: torch.Tensor, A_imag: torch.Tensor,
                                C: torch.Tensor, T: int) -> torch.Tensor:
    return _s4d.s4d_zoh_conv_kernel_fwd(log_dt, log_A_real, A_imag, C, T)

@triton_op("amg_fast::s4d_zoh_conv_kernel_bwd", mutates_args=())
def _s4d_zoh_conv_kernel_bwd_op(part: torch.Tensor, log_dt: torch.Tensor, log_A_real: torch.Tensor,
                                A_imag: torch.Tensor, C: torch.Tensor
                                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """part [G, H, T] (partial sums of dK) -> (dlog_dt, dlog_A_real, dA_imag, dC, dd)."""
    return _s4d.s4d_zoh_conv_kernel_bwd(part, log_dt, log_A_real, A_imag, C)

@triton_op("amg_fast::s4d_toeplitz_fwd", mutates_args=())
def _s4d_toeplitz_fwd_op(u: torch.Tensor, kk: torch.Tensor, d: torch.Tensor, gelu: bool, loop: bool
                         ) -> torch.Tensor:
    return _s4d.s4d_toeplitz_fwd(u, kk, d, gelu, loop)

@triton_op("amg_fast::s4d_toeplitz_bwd", mutates_args=())
def _s4d_toeplitz_bwd_op(dy: torch.Tensor, u: torch.Tensor, kk: torch.Tensor, d: torch.Tensor, gelu: bool,
                         loop: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """-> (du, part [G, H, T]: partial sums of dK over groups of columns)."""
    return _s4d.s4d_toeplitz_bwd(dy, u, kk, d, gelu, loop)

@triton_op("amg_fast::s4d_scan_fwd", mutates_args=())
def _s4d_scan_fwd_op(u: torch.Tensor, lam: torch.Tensor, c: torch.Tensor, d: torch.Tensor) -> torch.Tensor:
    return _s4d.s4d_scan_fwd(u, lam, c, d)

@triton_op("amg_fast::s4d_scan_bwd", mutates_args=())
def _s4d_scan_bwd_op(dy: torch.Tensor, u: torch.Tensor, lam: torch.Tensor, c: torch.Tensor, d: torch.Tensor
                     ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    return _s4d.s4d_scan_bwd(dy, u, lam, c, d)

@triton_op("amg_fast::s4d_step_fwd", mutates_args=())
def _s4d_step_fwd_op(u_t: torch.Tensor, state: torch.Tensor, lam: torch.Tensor, c: torch.Tensor,
                     d: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return _s4d.s4d_step_fwd(u_t, state, lam, c, d)


# ----------------------------------------------------------------------------- gate_fusion

@triton_op("amg_fast::gate_fusion_fwd", mutates_args=())
def _gate_fusion_fwd_op(h: torch.Tensor, z: torch.Tensor, w_z: torch.Tensor, w_h: torch.Tensor,
                        b: torch.Tensor, chi: torch.Tensor, w1: torch.Tensor | None = None,
                        b_omega: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """h, z [..., H] (one dtype), w_z, w_h [H, H], b [H], chi 0-dim or [B] -> (out, g) [..., H].
    With w1, b_omega (0-dim) chi holds log(omega + eps) and the kernel forms the frequency gate."""
    return _gate.gate_fusion_fwd(h, z, w_z, w_h, b, chi, None if w1 is None else (w1, b_omega))

@triton_op("amg_fast::gate_fusion_bwd", mutates_args=())
def _gate_fusion_bwd_op(h: torch.Tensor, z: torch.Tensor, w_z: torch.Tensor, w_h: torch.Tensor,
                        b: torch.Tensor, chi: torch.Tensor, dout: torch.Tensor, dg: torch.Tensor | None,
                        w1: torch.Tensor | None = None, b_omega: torch.Tensor | None = None, cublas: bool = False
                        ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Forward args + dout, dg [..., H] -> (dz, dh [..., H], grads: [dW_z | dW_h | db | dchi] flat,
    dchi = chi's values or, with w1 and b_omega, (db_omega, dw1); fp32, fp64 for fp64 inputs)."""
    return _gate.gate_grads(h, z, w_z, w_h, b, chi, dout, dg, None if w1 is None else (w1, b_omega), None, cublas)

@triton_op("amg_fast::gate_cublas_fwd", mutates_args=())
def _gate_cublas_fwd_op(h: torch.Tensor, z: torch.Tensor, w_z: torch.Tensor, w_h: torch.Tensor,
                        b: torch.Tensor, chi: torch.Tensor, w1: torch.Tensor | None = None,
                        b_omega: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """gate_fusion_fwd's arguments (fp32 / fp64 h, z) -> (out, g [..., H], logits [M, H] for the backward): the
    cuBLAS method (kernels.limits.gate_method)."""
    return _gate.gate_cublas_fwd(h, z, w_z, w_h, b, chi, None if w1 is None else (w1, b_omega))

@triton_op("amg_fast::gate_cublas_bwd", mutates_args=())
def _gate_cublas_bwd_op(h: torch.Tensor, z: torch.Tensor, w_z: torch.Tensor, w_h: torch.Tensor,
                        b: torch.Tensor, chi: torch.Tensor, logits: torch.Tensor, dout: torch.Tensor,
                        dg: torch.Tensor | None, w1: torch.Tensor | None = None, b_omega: torch.Tensor | None = None,
                        cublas: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """gate_fusion_bwd's arguments and gate_cublas_fwd's logits -> (dz, dh, grads) as gate_fusion_bwd's."""
    return _gate.gate_cublas_grads(h, z, w_z, w_h, b, chi, logits, dout, dg, None if w1 is None else (w1, b_omega),
                                   cublas)

@triton_op("amg_fast::memory_gate_fwd", mutates_args=())
def _memory_gate_fwd_op(h: torch.Tensor, a: torch.Tensor, w_out: torch.Tensor, b_out: torch.Tensor,
                        w_z: torch.Tensor, w_h: torch.Tensor, b: torch.Tensor, chi: torch.Tensor,
                        w1: torch.Tensor | None = None, b_omega: torch.Tensor | None = None
                        ) -> tuple[torch.Tensor, torch.Tensor]:
    """h, a [..., H]; w_out [2H, H], b_out [2H]; gate args as gate_fusion_fwd's -> (out [..., H],
    mean gate 0-dim): z = GLU(a w_out^T + b_out) formed in the kernel, g never written."""
    return _gate.gate_fusion_fwd(h, a, w_z, w_h, b, chi, None if w1 is None else (w1, b_omega), (w_out, b_out), True)

@triton_op("amg_fast::memory_gate_bwd", mutates_args=())
def _memory_gate_bwd_op(h: torch.Tensor, a: torch.Tensor, w_out: torch.Tensor, b_out: torch.Tensor,
                        w_z: torch.Tensor, w_h: torch.Tensor, b: torch.Tensor, chi: torch.Tensor,
                        dout: torch.Tensor, w1: torch.Tensor | None = None, b_omega: torch.Tensor | None = None
                        ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """-> (da, dh [..., H], grads: [dW_z | dW_h | db | dW_out | db_out | dchi] flat, as gate_fusion_bwd's)."""
    return _gate.gate_grads(h, a, w_z, w_h, b, chi, dout, None, None if w1 is None else (w1, b_omega),
                            (w_out, b_out))


# ----------------------------------------------------------------------------- feed_forward (row GEMMs)

@triton_op("amg_fast::feed_forward_gemm_fwd", mutates_args=())
def _feed_forward_gemm_fwd_op(x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor, w2: torch.Tensor,
                              b2: torch.Tensor, residual: torch.Tensor | None = None
                              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """x [M, H_in] -> (y [M, H_out] (+ residual), the hidden activation h [M, F], the backward's weight planes
    (fp32 mode), else an empty tensor)."""
    y, h, w_planes = _ffn_gemm.feed_forward_gemm_fwd(x, w1, b1, w2, b2, residual)
    return y, h, x.new_empty((0,), dtype=torch.float32) if w_planes is None else w_planes

@triton_op("amg_fast::feed_forward_gemm_bwd", mutates_args=())
def _feed_forward_gemm_bwd_op(dy: torch.Tensor, x: torch.Tensor, h: torch.Tensor, w1: torch.Tensor,
                              w2: torch.Tensor, need_dx: bool, wgrad: str, w_planes: torch.Tensor
                              ) -> tuple[torch.Tensor, torch.Tensor]:
    """dy [M, H_out] -> (dx (empty without need_dx), [dW1 | db1 | dW2 | db2] flat; the weight gradients by wgrad:
    "triton" or "cublas"; w_planes: the forward's, or empty)."""
    return _ffn_gemm.feed_forward_gemm_bwd(dy, x, h, w1, w2, need_dx, wgrad, w_planes)


@triton_op("amg_fast::feed_forward_dh", mutates_args=())
def _feed_forward_dh_op(dy: torch.Tensor, h: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor
                        ) -> tuple[torch.Tensor, torch.Tensor]:
    """dy [M, H_out], h [M, F] -> (dh = (dy W2) where h > 0, [db1 | db2] flat, accumulation dtype): one row GEMM."""
    return _ffn_gemm.masked_hidden_grad(dy, h, w1, w2)


@triton_op("amg_fast::relu_backward_with_bias_grads", mutates_args=())
def _relu_backward_with_bias_grads_op(g: torch.Tensor, h: torch.Tensor, dy: torch.Tensor
                                      ) -> tuple[torch.Tensor, torch.Tensor]:
    """g, h [M, F], dy [M, H_out] -> (dh = g where h > 0 else 0, [db1 | db2] flat: dh's and dy's column sums,
    accumulation dtype)."""
    return _relu_grad.relu_backward_with_bias_grads(g, h, dy)

@triton_op("amg_fast::cast_weights", mutates_args=())
def _cast_weights_op(weights: list[torch.Tensor], dtype: torch.dtype) -> torch.Tensor:
    """Up to four tensors -> one flat buffer [w1 | w2 | ...] in dtype, in one launch (kernels._tf32.cast_weights)."""
    return _tf32.cast_weights(*weights, dtype=dtype)


# ----------------------------------------------------------------------------- linear_glu

@triton_op("amg_fast::linear_split_fwd", mutates_args=())
def _linear_split_fwd_op(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor
                         ) -> tuple[torch.Tensor, torch.Tensor]:
    """fp32 x [M, K], weight [N, K], bias [N] -> (x W^T + b [M, N], W^T's TF32 planes [2, K, N]): 3xTF32 row GEMM."""
    return _ffn_gemm.linear_split_fwd(x, weight, bias)

@triton_op("amg_fast::linear_split_dx", mutates_args=())
def _linear_split_dx_op(dpre: torch.Tensor, transposed_planes: torch.Tensor) -> torch.Tensor:
    """dpre [M, N], W^T's TF32 planes [2, K, N] -> dpre W [M, K] fp32: 3xTF32 row GEMM."""
    return _ffn_gemm.linear_split_dx(dpre, transposed_planes)


@triton_op("amg_fast::glu_backward_with_bias_grads", mutates_args=())
def _glu_backward_with_bias_grads_op(dz: torch.Tensor, pre: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """dz [M, H], pre [M, 2H] -> (dpre = glu_backward(dz, pre, -1), its column sums [2H] in the accumulation
    dtype)."""
    return _glu_grad.glu_backward_with_bias_grads(dz, pre)


# ----------------------------------------------------------------------------- composed_linear

@triton_op("amg_fast::composed_linear_fwd", mutates_args=())
def _composed_linear_fwd_op(x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor, w2: torch.Tensor,
                            b2: torch.Tensor) -> torch.Tensor:
    """x [M, H] -> y [M, C] = (x W1^T + b1) W2^T + b2, W2 W1 formed in the kernel."""
    return _composed.composed_linear_fwd(x, w1, b1, w2, b2)

@triton_op("amg_fast::composed_linear_bwd", mutates_args=())
def _composed_linear_bwd_op(dy: torch.Tensor, x: torch.Tensor, w1: torch.Tensor, b1: torch.Tensor,
                            w2: torch.Tensor, b2: torch.Tensor, need_dx: bool
                            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """dy [M, C] -> (dx [M, H] (empty without need_dx), dw1, db1, dw2, db2)."""
    return _composed.composed_linear_bwd(dy, x, w1, b1, w2, b2, need_dx)


# ----------------------------------------------------------------------------- grid_linear

@triton_op("amg_fast::grid_linear_fwd", mutates_args=())
def _grid_linear_fwd_op(u: torch.Tensor, grid: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """u [M, C], grid [S] -> y [M, H] = [u, grid[r mod S]] weight^T + bias."""
    return _grid_linear.grid_linear_fwd(u, grid, weight, bias)

@triton_op("amg_fast::grid_linear_bwd", mutates_args=())
def _grid_linear_bwd_op(dy: torch.Tensor, u: torch.Tensor, grid: torch.Tensor, weight: torch.Tensor,
                        bias: torch.Tensor, need_du: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """dy [M, H] -> (du [M, C] (empty without need_du), dweight, dbias)."""
    return _grid_linear.grid_linear_bwd(dy, u, grid, weight, bias, need_du)
