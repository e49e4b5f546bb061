"""SpectralConv1d: the learnable truncated-rFFT channel mixing of an FFNO block, along one spatial
axis; FactorizedSpectralConv: one per spatial axis, summed (the F-FNO of 2D and 3D grids)."""
from __future__ import annotations

import math

import torch
from torch import nn

from amg_fast._checks import check_int_range
from amg_fast.ops import spectral_conv1d

__all__ = ["SpectralConv1d", "FactorizedSpectralConv"]


class SpectralConv1d(nn.modules.lazy.LazyModuleMixin, nn.Module):
    """x [..., S, H_in] -> [..., S, H_out] keeping the first `modes` rFFT modes along S.

    dim: the spatial axis S of x (negative, before the channel axis; default -2), e.g. -3 for the
    X axis of [..., X, Y, H]. modes=None means (the size of that axis)//2 of the first input: the
    weight is then created lazily on the first call (torch's LazyModuleMixin), so build the
    optimizer after one forward.
    Weight [K, H_in, H_out, 2] ~ N(0, 1 / ((H_in + H_out) K)) (Xavier-normal as in fourierflow).
    """

    def __init__(self, in_channels: int, out_channels: int, modes: int | None = None, *, dim: int = -2,
                 backend: str = "auto"):
        super().__init__()
        self.in_channels = check_int_range("in_channels", in_channels, 1)
        self.out_channels = check_int_range("out_channels", out_channels, 1)
        self.modes = None if modes is None else check_int_range("modes", modes, 1)
        if isinstance(dim, bool) or not isinstance(dim, int) or dim > -2:
            raise ValueError(f"dim (the spatial axis, counted from the end) must be an int <= -2 (-1 holds the "
                             f"channels), got {dim!r}")
        self.dim, self.backend = dim, backend
        if modes is None:
            self.weight = nn.UninitializedParameter()
        else:
            self.weight = nn.Parameter(torch.empty(modes, in_channels, out_channels, 2))
            self.reset_parameters()

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params():
            std = math.sqrt(1.0 / ((self.in_channels + self.out_channels) * self.weight.shape[0]))
            nn.init.normal_(self.weight, std=std)

    def initialize_parameters(self, x: torch.Tensor) -> None:  # LazyModuleMixin hook
        if self.has_uninitialized_params():
            self.modes = max(1, x.shape[self.dim] // 2)
            with torch.no_grad():
                self.weight.materialize((self.modes, self.in_channels, self.out_channels, 2))
                self.reset_parameters()

    def share_weight_of(self, other: SpectralConv1d) -> None:
        """Use other's weight (one Parameter for both; fourierflow's share_weight)."""
        self.weight = other.weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.modes is not None and x.dim() >= -self.dim and self.modes > x.shape[self.dim] // 2 + 1:
            size = x.shape[self.dim]  # said in the model's terms (the op would name weight.shape[0])
            raise ValueError(f"modes={self.modes}: a grid of {size} points holds at most {size // 2 + 1} rFFT modes "
                             f"(S//2+1) along axis {self.dim} of the input; build the model with modes <= "
                             f"{size // 2 + 1}, or give it a grid of at least {2 * self.modes - 2} points")
        return spectral_conv1d(x, self.weight, dim=self.dim, backend=self.backend)  # the axis read in place

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}, modes={self.modes}" + ("" if self.dim == -2 else
                                                                                 f", dim={self.dim}")


class FactorizedSpectralConv(nn.Module):
    """x [..., X_1, ..., X_d, H_in] -> sum over the d spatial axes of a SpectralConv1d along that
    axis, [..., X_1, ..., X_d, H_out] (F-FNO's factorised Fourier layer, fourierflow's
    SpectralConv2d: one weight [K, H_in, H_out, 2] per axis, the per-axis outputs summed).

    modes: K kept along every axis (None = each axis' size // 2, lazily). `axes[i]` acts on
    spatial axis i (dim = i - d - 1).
    """

    def __init__(self, in_channels: int, out_channels: int, modes: int | None = None, *, spatial_dims: int,
                 backend: str = "auto"):
        super().__init__()
        check_int_range("spatial_dims", spatial_dims, 1)
        self.axes = nn.ModuleList(SpectralConv1d(in_channels, out_channels, modes, dim=i - spatial_dims - 1,
                                                 backend=backend) for i in range(spatial_dims))

    def share_weight_of(self, other: FactorizedSpectralConv) -> None:
        """Use other's per-axis weights (fourierflow's share_weight)."""
        for mine, theirs in zip(self.axes, other.axes):
            mine.share_weight_of(theirs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.axes[0](x)
        for conv in self.axes[1:]:
            out = out + conv(x)
        return out
