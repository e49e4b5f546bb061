"""Adaptive memory gate fusion: g = sigmoid(z W_z^T + h W_h^T + b) * chi, out = g z + (1 - g) h.

Reads top to bottom: validation -> reference -> public op.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from amg_fast._checks import check_rank, check_real_float, check_same_device, check_shape, compute_dtype
from amg_fast.ops._backend import resolve_backend

__all__ = ["gate_fusion", "gate_fusion_ref", "check_gate_fusion_args"]


def check_gate_fusion_args(h, z, w_z, w_h, b, chi) -> None:
    """h, z [..., H]; w_z, w_h [H, H]; b [H]; chi 0-dim, or [B] with one value per h.shape[0]."""
    for name, t in (("h", h), ("z", z), ("w_z", w_z), ("w_h", w_h), ("b", b), ("chi", chi)):
        check_real_float(name, t)
    check_same_device(h=h, z=z, w_z=w_z, w_h=w_h, b=b, chi=chi)
    check_rank("h", h, range(1, 16), "[..., H]")
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


def gate_fusion(h, z, w_z, w_h, b, chi, *, backend: str = "auto") -> tuple[torch.Tensor, torch.Tensor]:
    """Fuse the memory output z with the Markovian state h through the adaptive gate.

    h, z: [..., H]; w_z, w_h: [H, H] (x @ W.T); b: [H]; chi: 0-dim frequency gate (or [B] with
    one value per leading index of h). Returns (out, g), both [..., H] in h's dtype.
    """
    check_gate_fusion_args(h, z, w_z, w_h, b, chi)
    resolve_backend("gate_fusion", backend, h.device)
    return gate_fusion_ref(h, z, w_z, w_h, b, chi)
