"""Factformer1d: the 1D adaptation of FactFormer (Li et al. 2023, "Scalable Transformer for PDE
surrogate modeling") used as a Markovian baseline in the paper.

FactFormer factorises attention into one low-rank kernel per axis: features are pooled over the
other axes, projected to q and k, rotary-encoded with the axis coordinate, and the kernel
K = q k^T (no softmax) is applied to v along that axis. On a 1D grid nothing is pooled, so the
block is a kernelized linear attention along space, z = q (k^T v) / S per head (computed in the
associative order, O(S d^2); the 1/S quadrature weight keeps it resolution-consistent).
"""
from __future__ import annotations

import torch
from torch import nn

from amg_fast._checks import check_int_range
from amg_fast.models.base import grid_coordinates
from amg_fast.models.markovian import MarkovianModel, mlp

__all__ = ["Factformer1d", "FactAttention1d", "rotary_embedding", "FactformerLayer"]


def rotary_embedding(x: torch.Tensor, min_freq: float = 1 / 64) -> torch.Tensor:
    """Rotate channel pairs of x [..., S, heads, d] (d even) by angles (x_s/L) / min_freq * 10000^(-2j/d),
    FactFormer's RotaryEmbedding on the grid coordinate x/L."""
    S, d = x.shape[-3], x.shape[-1]
    inv_freq = 10000.0 ** (-torch.arange(0, d, 2, device=x.device, dtype=x.dtype) / d)  # [d/2]
    angles = grid_coordinates(S, x) / min_freq * inv_freq  # [S, d/2]
    angles = torch.cat([angles, angles], dim=-1)[:, None, :]  # [S, 1, d]
    x1, x2 = x.chunk(2, dim=-1)
    return x * angles.cos() + torch.cat([-x2, x1], dim=-1) * angles.sin()


class FactAttention1d(nn.Module):
    """h [..., S, width] -> [..., S, width]: per head z = RoPE(q) (RoPE(k)^T v) / S, then Linear.

    q, k, v: Linear(width, heads * dim_head, bias=False); q and k Xavier-uniform with gain 0.02
    as in FactFormer's LowRankKernel (the kernel starts near zero).
    """

    def __init__(self, width: int, heads: int, dim_head: int):
        super().__init__()
        self.heads = check_int_range("heads", heads, 1)
        self.dim_head = check_int_range("dim_head", dim_head, 2)
        if dim_head % 2:
            raise ValueError(f"dim_head must be even (the rotary embedding rotates channel pairs), got {dim_head}")
        inner = heads * dim_head
        self.to_q, self.to_k, self.to_v = (nn.Linear(width, inner, bias=False) for _ in range(3))
        for lin in (self.to_q, self.to_k):
            nn.init.xavier_uniform_(lin.weight, gain=0.02)
        self.to_out = nn.Linear(inner, width)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        split = h.shape[:-1] + (self.heads, self.dim_head)  # [..., S, heads, dim_head]
        q = rotary_embedding(self.to_q(h).view(split))
        k = rotary_embedding(self.to_k(h).view(split))
        v = self.to_v(h).view(split)
        kv = torch.einsum("...shc,...shd->...hcd", k, v) / h.shape[-2]  # [..., heads, d, d]
        z = torch.einsum("...shc,...hcd->...shd", q, kv)
        return self.to_out(z.flatten(-2))


class FactformerLayer(nn.Module):
    """Pre-norm transformer layer: h + attn(LN(h)), then + MLP(LN(h)) (GELU, hidden heads*dim_head)."""

    def __init__(self, width: int, heads: int, dim_head: int):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attention = FactAttention1d(width, heads, dim_head)
        self.feed_forward = mlp(width, heads * dim_head, width)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        h = h + self.attention(self.norm1(h))
        return h + self.feed_forward(self.norm2(h))


class Factformer1d(MarkovianModel):
    """Markovian FactFormer (1D). u [B, T, S, C] -> [B, T, S, C], each step from u_t alone.

    Linear([u, x/L]) -> width (64); `depth` (4) FactformerLayers with `heads` (4) x `dim_head` (32)
    = 128 attention channels; head LayerNorm -> Linear(width, width) -> GELU -> Linear(width, C).
    modes does not apply (modes=None only); backend is only checked (no amg_fast op inside).
    """

    uses_modes = False

    def __init__(self, in_channels: int = 1, out_channels: int = 1, width: int = 64, modes: int | None = None, *,
                 depth: int = 4, heads: int = 4, dim_head: int = 32, backend: str = "auto"):
        super().__init__(in_channels, out_channels, width=width, modes=modes, backend=backend)
        check_int_range("depth", depth, 1)
        self.encoder = nn.Linear(in_channels + 1, width)
        self.layers = nn.Sequential(*(FactformerLayer(width, heads, dim_head) for _ in range(depth)))
        self.decoder = nn.Sequential(nn.LayerNorm(width), mlp(width, width, out_channels))

    def predict(self, u: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.layers(self.encoder(self.with_grid(u))))

