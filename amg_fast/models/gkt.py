"""GalerkinTransformer1d: Cao (2021), "Choose a Transformer: Fourier or Galerkin", as a Markovian
baseline: Galerkin-type (softmax-free) linear attention over space, then a spectral regressor of
FNO layers (Cao's SpectralRegressor, built here on amg_fast.layers.SpectralConv1d).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from amg_fast._checks import check_int_range
from amg_fast.layers import FeedForward, SpectralConv1d
from amg_fast.models.base import grid_coordinates
from amg_fast.models.markovian import MarkovianModel, mlp

__all__ = ["GalerkinTransformer1d", "GalerkinAttention1d", "SpectralRegressor1d", "HeadwiseLayerNorm",
           "GalerkinEncoderLayer"]


class HeadwiseLayerNorm(nn.Module):
    """LayerNorm over the last dim of x [..., heads, d] with its own affine weights per head
    (Cao's one nn.LayerNorm(d_k) per head)."""

    def __init__(self, heads: int, dim: int, eps: float = 1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(heads, dim))
        self.bias = nn.Parameter(torch.zeros(heads, dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, x.shape[-1:], eps=self.eps) * self.weight + self.bias


class GalerkinAttention1d(nn.Module):
    """h [..., S, width] -> [..., S, width], Cao's SimpleAttention(attention_type="galerkin", norm=True).

    q, k, v = Linear(width, width) split into heads of d = width / heads; k and v layer-normalised
    per head; the grid coordinate x/L is prepended to q, k and v of every head (pos_dim = 1);
    z = q (k^T v) / S per head; heads concatenated [..., S, heads * (d + 1)] -> Linear -> width.
    Init as Cao: Xavier-uniform gain 1e-2 plus 1e-2 * identity, zero biases.
    """

    def __init__(self, width: int, heads: int, *, init_gain: float = 1e-2, diagonal_weight: float = 1e-2):
        super().__init__()
        self.heads = check_int_range("heads", heads, 1)
        if width % heads:
            raise ValueError(f"width must be divisible by heads = {heads}, got width {width}")
        self.dim_head = width // heads
        self.to_q, self.to_k, self.to_v = (nn.Linear(width, width) for _ in range(3))
        for lin in (self.to_q, self.to_k, self.to_v):
            nn.init.xavier_uniform_(lin.weight, gain=init_gain)
            with torch.no_grad():
                lin.weight += diagonal_weight * torch.eye(width)
            nn.init.zeros_(lin.bias)
        self.norm_k = HeadwiseLayerNorm(heads, self.dim_head)
        self.norm_v = HeadwiseLayerNorm(heads, self.dim_head)
        self.to_out = nn.Linear(width + heads, width)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        S = h.shape[-2]
        split = h.shape[:-1] + (self.heads, self.dim_head)  # [..., S, heads, d]
        pos = grid_coordinates(S, h)[:, None, :].expand(split[:-1] + (1,))  # [..., S, heads, 1]
        q = torch.cat([pos, self.to_q(h).view(split)], dim=-1)
        k = torch.cat([pos, self.norm_k(self.to_k(h).view(split))], dim=-1)
        v = torch.cat([pos, self.norm_v(self.to_v(h).view(split))], dim=-1)
        kv = torch.einsum("...shc,...shd->...hcd", k, v) / S  # [..., heads, d+1, d+1]
        z = torch.einsum("...shc,...hcd->...shd", q, kv)
        return self.to_out(z.flatten(-2))


class GalerkinEncoderLayer(nn.Module):
    """Cao's encoder layer (layer_norm=False): h + attn(h), then + FeedForward(h) (width -> 2 width
    -> ReLU -> width)."""

    def __init__(self, width: int, heads: int):
        super().__init__()
        self.attention = GalerkinAttention1d(width, heads)
        self.feed_forward = FeedForward(width, factor=2)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        h = h + self.attention(h)
        return h + self.feed_forward(h)


class SpectralRegressor1d(nn.Module):
    """h [..., S, width] -> [..., S, out]: `n_layers` FNO layers h = SiLU(SpectralConv1d(h) + Linear(h)),
    then Linear(width, 2 width) -> SiLU -> Linear(2 width, out) (Cao's SpectralRegressor, 1D)."""

    def __init__(self, width: int, out_channels: int, modes: int | None, *, n_layers: int = 2, backend: str = "auto"):
        super().__init__()
        check_int_range("n_layers", n_layers, 1)
        self.spectral = nn.ModuleList(SpectralConv1d(width, width, modes, backend=backend) for _ in range(n_layers))
        self.pointwise = nn.ModuleList(nn.Linear(width, width) for _ in range(n_layers))
        self.head = mlp(width, 2 * width, out_channels, nn.SiLU)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        for spectral, pointwise in zip(self.spectral, self.pointwise):
            h = F.silu(spectral(h) + pointwise(h))
        return self.head(h)


class GalerkinTransformer1d(MarkovianModel):
    """Markovian Galerkin Transformer. u [B, T, S, C] -> [B, T, S, C], each step from u_t alone.

    Linear(C, width) on u (position enters through the attention); `depth` (4) Galerkin encoder
    layers with `heads` (1, Cao's 1D setting) heads; spectral regressor of 2 FNO layers keeping
    `modes` Fourier modes (None = S//2 of the first input, created lazily). width default 32.
    """

    def __init__(self, in_channels: int = 1, out_channels: int = 1, width: int = 32, modes: int | None = None, *,
                 depth: int = 4, heads: int = 1, backend: str = "auto"):
        super().__init__(in_channels, out_channels, width=width, modes=modes, backend=backend)
        check_int_range("depth", depth, 1)
        self.encoder = nn.Linear(in_channels, width)
        self.layers = nn.Sequential(*(GalerkinEncoderLayer(width, heads) for _ in range(depth)))
        self.regressor = SpectralRegressor1d(width, out_channels, self.modes, backend=backend)

    def predict(self, u: torch.Tensor) -> torch.Tensor:
        return self.regressor(self.layers(self.encoder(u)))
