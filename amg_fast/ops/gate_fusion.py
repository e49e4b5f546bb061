"""Adaptive memory gate fusion: g = sigmoid(z W_z^T + h W_h^T + b) * chi, out = g z + (1 - g) h.

Reads top to bottom: validation -> reference -> custom ops over the Triton kernels
(torch.library.triton_op, so torch.compile traces through them) -> autograd Function -> public op.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from amg_fast._checks import (check_nonempty, check_rank, check_real_float, check_same_device, check_shape,
                              check_unit_interval, compute_dtype)
from amg_fast._nvtx import nvtx_range
from amg_fast.ops._backend import _log_once, autocast_dtype, resolve_backend, triton_importable

__all__ = ["gate_fusion", "gate_fusion_ref", "check_gate_fusion_args", "GateFusionFn"]


def check_gate_fusion_args(h, z, w_z, w_h, b, chi) -> None:
    """h, z [..., H] (no empty dimension); w_z, w_h [H, H]; b [H]; chi 0-dim, or [B] with one value per
    h.shape[0], finite and in [0, 1] (checked with one host sync, except while compiling or capturing)."""
    for name, t in (("h", h), ("z", z), ("w_z", w_z), ("w_h", w_h), ("b", b), ("chi", chi)):
        check_real_float(name, t)
    check_same_device(h=h, z=z, w_z=w_z, w_h=w_h, b=b, chi=chi)
    check_rank("h", h, range(1, 16), "[..., H]")
    check_nonempty("h", h, "[..., H]")
    if z.shape != h.shape:
        raise ValueError(f"z must have the shape of h {tuple(h.shape)}, got {tuple(z.shape)}")
    H = h.shape[-1]
    check_shape("w_z", w_z, (H, H), "[H, H], nn.Linear convention")
    check_shape("w_h", w_h, (H, H), "[H, H], nn.Linear convention")
    check_shape("b", b, (H,), "[H]")
    if chi.dim() == 1 and h.dim() >= 2:
        check_shape("chi", chi, (h.shape[0],), "0-dim, or [B] = one value per h.shape[0]")
    elif chi.dim() != 0:
        raise ValueError(
            f"chi must be a 0-dim tensor (or [B] with B = h.shape[0]), got shape {tuple(chi.shape)}"
        )
    check_unit_interval("chi", chi)  # a gate weight: g = sigmoid(.) * chi must stay in [0, 1]


def _broadcast_chi(chi: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """chi 0-dim or [B] -> a tensor broadcastable against h [B, ..., H]."""
    return chi.reshape(chi.shape + (1,) * (h.dim() - chi.dim()))


def gate_fusion_ref(h, z, w_z, w_h, b, chi) -> tuple[torch.Tensor, torch.Tensor]:
    """Pure-PyTorch reference. h, z [..., H] -> (out [..., H], g [..., H]) in h's dtype."""
    dtype = compute_dtype(h, z, w_z, w_h, b, chi)
    h32, z32 = h.to(dtype), z.to(dtype)
    logits = F.linear(z32, w_z.to(dtype)) + F.linear(h32, w_h.to(dtype), b.to(dtype))
    g = torch.sigmoid(logits) * _broadcast_chi(chi.to(dtype), h)
    out = g * z32 + (1 - g) * h32
    return out.to(h.dtype), g.to(h.dtype)


if triton_importable():
    from torch.library import triton_op

    from amg_fast.kernels import gate_fusion as _kernels

    @triton_op("amg_fast::gate_fusion_fwd", mutates_args=())
    def _gate_fusion_fwd_op(h: torch.Tensor, z: torch.Tensor, w_z: torch.Tensor, w_h: torch.Tensor,
                            b: torch.Tensor, chi: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """h, z [..., H] (one dtype), w_z, w_h [H, H], b [H], chi 0-dim or [B] -> (out, g) [..., H]."""
        return _kernels.gate_fusion_fwd(h, z, w_z, w_h, b, chi)

    @triton_op("amg_fast::gate_fusion_bwd", mutates_args=())
    def _gate_fusion_bwd_op(h: torch.Tensor, z: torch.Tensor, w_z: torch.Tensor, w_h: torch.Tensor,
                            b: torch.Tensor, chi: torch.Tensor, dout: torch.Tensor, dg: torch.Tensor | None
                            ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Forward args + dout, dg [..., H] -> (dz, dh [..., H], dlogits [M, H], db [H], dchi like chi);
        the last three in fp32 (fp64 for fp64 inputs)."""
        return _kernels.gate_fusion_bwd(h, z, w_z, w_h, b, chi, dout, dg)


class GateFusionFn(torch.autograd.Function):
    """Autograd over the Triton kernels. h, z [..., H] (one dtype); w_z, w_h [H, H]; b [H];
    chi 0-dim or [B] -> (out, g) [..., H] in h's dtype.

    Saves only the inputs: the backward kernel recomputes the logits. It returns dz, dh, db, dchi
    and the logits' gradient dlogits [M, H]; the weight gradients dlogits^T z, dlogits^T h are
    GEMMs over the M rows, left to cuBLAS. Each gradient comes back in its input's dtype.
    """

    @staticmethod
    def forward(ctx, h, z, w_z, w_h, b, chi):
        out, g = _gate_fusion_fwd_op(h, z, w_z, w_h, b, chi)
        ctx.save_for_backward(h, z, w_z, w_h, b, chi)
        return out, g

    @staticmethod
    def backward(ctx, dout, dg):
        h, z, w_z, w_h, b, chi = ctx.saved_tensors
        dz, dh, dlogits, db, dchi = _gate_fusion_bwd_op(h, z, w_z, w_h, b, chi, dout, dg)
        need = ctx.needs_input_grad
        H, M = h.shape[-1], dlogits.shape[0]
        # dW = dlogits^T x over all M rows (cuBLAS). bf16 activations: a bf16 GEMM with fp32
        # accumulation, as autocast's own nn.Linear backward does; else in dlogits' dtype (fp16
        # too: a sum over M rows can pass fp16's range).
        gemm_dtype = torch.bfloat16 if h.dtype == torch.bfloat16 else dlogits.dtype
        dlogits_t = dlogits.to(gemm_dtype).T if (need[2] or need[3]) else None

        def weight_grad(x, w):  # [H, M] @ [M, H] -> [H, H] in w's dtype
            return (dlogits_t @ x.reshape(M, H).to(gemm_dtype)).to(w.dtype)

        return (dh, dz, weight_grad(z, w_z) if need[2] else None, weight_grad(h, w_h) if need[3] else None,
                db.to(b.dtype) if need[4] else None, dchi.to(chi.dtype) if need[5] else None)


def gate_fusion(h, z, w_z, w_h, b, chi, *, backend: str = "auto") -> tuple[torch.Tensor, torch.Tensor]:
    """Fuse the memory output z with the Markovian state h through the adaptive gate.

    h, z: [..., H]; w_z, w_h: [H, H] (x @ W.T); b: [H]; chi: 0-dim frequency gate (or [B] with
    one value per leading index of h). Returns (out, g), both [..., H] in h's dtype.

    backend="triton" runs the fused kernels for H <= 256 (a ValueError above that; "auto" then
    uses the reference). Under autocast, h and z are cast to the autocast dtype (fp64 stays).
    The kernels accumulate in fp32 (fp64 for fp64 inputs); fp32 dots are fp32-accurate (tf32x3)
    unless TF32 matmuls are allowed (kernels._common.dot_precision).
    """
    check_gate_fusion_args(h, z, w_z, w_h, b, chi)
    if resolve_backend("gate_fusion", backend, h.device) == "reference":
        return gate_fusion_ref(h, z, w_z, w_h, b, chi)
    H = h.shape[-1]
    if H > _kernels.MAX_H:
        if backend == "triton":
            _kernels.check_width(H)  # raises, naming H and the limit
        _log_once("gate_fusion", "reference", f"H = {H} > {_kernels.MAX_H}, wider than the Triton kernels take")
        return gate_fusion_ref(h, z, w_z, w_h, b, chi)
    with nvtx_range("amg_fast.gate_fusion"):
        cast = autocast_dtype(h.device)
        if cast is not None and h.dtype != torch.float64:  # activations in the autocast dtype;
            h = h.to(cast)                                   # weights stay as given, cast in-kernel
        return GateFusionFn.apply(h, z.to(h.dtype), w_z, w_h, b, chi)
