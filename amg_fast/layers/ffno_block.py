"""FFNO block (fourierflow): x + FeedForward(SpectralConv(x)), FeedForward = H -> 4H -> ReLU -> H.

On a grid of several spatial axes SpectralConv is the factorised one (a 1D spectral conv per axis,
summed) and the one FeedForward follows the sum, as in fourierflow's 2D F-FNO."""
from __future__ import annotations

import torch
from torch import nn

from amg_fast.layers.spectral_conv import FactorizedSpectralConv, SpectralConv1d
from amg_fast.ops.ffn import feed_forward

__all__ = ["FeedForward", "FFNOBlock"]


class FeedForward(nn.Sequential):
    """[..., H] -> [..., H] through a hidden layer of factor * H with ReLU (Linear, ReLU, Linear: the
    parameter names of nn.Sequential), run by the feed_forward op (backend: its fused path on CUDA)."""

    def __init__(self, width: int, factor: int = 4, *, backend: str = "auto"):
        super().__init__(nn.Linear(width, factor * width), nn.ReLU(), nn.Linear(factor * width, width))
        self.backend = backend

    def forward(self, x: torch.Tensor, residual: torch.Tensor | None = None) -> torch.Tensor:
        """x [..., H] -> residual + FeedForward(x) (residual None: FeedForward(x))."""
        first, _, second = self
        return feed_forward(x, first.weight, first.bias, second.weight, second.bias, residual=residual,
                            backend=self.backend)


class FFNOBlock(nn.Module):
    """x [..., S, H] -> x + FeedForward(SpectralConv1d(x)), same shape.

    spatial_dims > 1: x [..., X, Y, (Z,) H] and the spectral conv is FactorizedSpectralConv (one
    SpectralConv1d per axis, summed); spatial_dims = 1 keeps the SpectralConv1d itself (its
    parameter names, `spectral.weight`, unchanged)."""

    def __init__(self, width: int, modes: int | None = None, *, ff_factor: int = 4, spatial_dims: int = 1,
                 backend: str = "auto"):
        super().__init__()
        if spatial_dims == 1:
            self.spectral = SpectralConv1d(width, width, modes, backend=backend)
        else:
            self.spectral = FactorizedSpectralConv(width, width, modes, spatial_dims=spatial_dims, backend=backend)
        self.feed_forward = FeedForward(width, ff_factor, backend=backend)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.feed_forward(self.spectral(x), residual=x)  # x + b, the add in the fused kernel's epilogue

    def branch(self, x: torch.Tensor) -> torch.Tensor:
        """The block's update b = FeedForward(SpectralConv1d(x)) alone (forward is x + b); what
        fourierflow's decoder reads from the last block (FFNOBackbone decoder_input="last_block")."""
        return self.feed_forward(self.spectral(x))
