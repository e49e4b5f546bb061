"""SpectralConv1d: the learnable truncated-rFFT channel mixing of an FFNO block."""
from __future__ import annotations

import math

import torch
from torch import nn

from amg_fast._checks import check_int_range
from amg_fast.ops import spectral_conv1d

__all__ = ["SpectralConv1d"]


class SpectralConv1d(nn.modules.lazy.LazyModuleMixin, nn.Module):
    """x [..., S, H_in] -> [..., S, H_out] keeping the first `modes` rFFT modes along S.

    modes=None means S//2 of the first input: the weight is then created lazily on the first
    call (torch's LazyModuleMixin), so build the optimizer after one forward.
    Weight [K, H_in, H_out, 2] ~ N(0, 1 / ((H_in + H_out) K)) (Xavier-normal as in fourierflow).
    """

    def __init__(self, in_channels: int, out_channels: int, modes: int | None = None, *, backend: str = "auto"):
        super().__init__()
        self.in_channels = check_int_range("in_channels", in_channels, 1)
        self.out_channels = check_int_range("out_channels", out_channels, 1)
        self.modes = None if modes is None else check_int_range("modes", modes, 1)
        self.backend = backend
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
            self.modes = max(1, x.shape[-2] // 2)
            with torch.no_grad():
                self.weight.materialize((self.modes, self.in_channels, self.out_channels, 2))
                self.reset_parameters()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return spectral_conv1d(x, self.weight, backend=self.backend)

    def extra_repr(self) -> str:
        return f"{self.in_channels}, {self.out_channels}, modes={self.modes}"
