"""UNet1d: the PDE-surrogate U-Net (Gupta & Brandstetter 2022, pdearena's `Unet`) in 1D as a
Markovian baseline, with circular padding for the periodic domain and no time embedding.

Differences from pdearena's 2D Unet: 1D convolutions with circular padding; a stride-2
downsampling after every one of the four levels (pdearena skips it after the last level), so
the middle block runs at S/16 and every up level starts with a 2x upsampling.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from amg_fast._checks import check_int_range
from amg_fast.models.markovian import MarkovianModel

__all__ = ["UNet1d", "ResidualBlock1d", "Downsample1d", "Upsample1d", "circular_conv"]


def circular_conv(c_in: int, c_out: int, kernel_size: int = 3, stride: int = 1) -> nn.Conv1d:
    """Conv1d [N, c_in, S] -> [N, c_out, S / stride] with periodic (circular) padding."""
    return nn.Conv1d(c_in, c_out, kernel_size, stride=stride, padding=kernel_size // 2, padding_mode="circular")


class ResidualBlock1d(nn.Module):
    """pdearena's ResidualBlock (norm=True): x [N, c_in, S] -> conv(GELU(GN(conv(GELU(GN(x)))))) + shortcut(x)
    [N, c_out, S]; GroupNorm with one group, 3-point circular convolutions, 1x1 shortcut if c_in != c_out."""

    def __init__(self, c_in: int, c_out: int):
        super().__init__()
        self.norm1, self.norm2 = nn.GroupNorm(1, c_in), nn.GroupNorm(1, c_out)
        self.conv1, self.conv2 = circular_conv(c_in, c_out), circular_conv(c_out, c_out)
        self.activation = nn.GELU()
        self.shortcut = nn.Conv1d(c_in, c_out, 1) if c_in != c_out else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.conv1(self.activation(self.norm1(x)))
        return self.conv2(self.activation(self.norm2(h))) + self.shortcut(x)


class Downsample1d(nn.Module):
    """x [N, c, S] -> [N, c, S/2]: 3-point circular convolution with stride 2 (pdearena's Downsample)."""

    def __init__(self, c: int):
        super().__init__()
        self.conv = circular_conv(c, c, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


class Upsample1d(nn.Module):
    """x [N, c, S] -> [N, c, 2S]: pdearena's ConvTranspose(4, stride 2, padding 1) made periodic.

    Padding the input circularly by one cell per side and cropping three outputs per side of the
    transposed convolution gives exactly the wrapped-around (circular) transposed convolution.
    """

    def __init__(self, c: int):
        super().__init__()
        self.conv = nn.ConvTranspose1d(c, c, 4, stride=2, padding=3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(nn.functional.pad(x, (1, 1), mode="circular"))


class UNet1d(MarkovianModel):
    """Markovian 1D U-Net. u [B, T, S, C] -> [B, T, S, C], each step from u_t alone; S % 16 == 0.

    lift: circular Conv1d([u, x/L] -> width, 3). Down level i (4 levels, channel multipliers
    ch_mults = (1, 2, 2, 2), applied cumulatively as in pdearena: width, width, 2 width, 4 width,
    8 width): `n_blocks` (2) ResidualBlocks, then Downsample (stride 2). Middle: 2 ResidualBlocks at
    S/16. Up level i: Upsample (2x), `n_blocks` + 1 ResidualBlocks each fed [h, skip] (skips: the
    lift, every down ResidualBlock, every Downsample but the last), the last one reducing the
    channels. Output: GroupNorm -> GELU -> circular Conv1d(width -> C, 3).
    modes does not apply (modes=None only); backend is only checked (no amg_fast op inside).
    """

    uses_modes = False

    def __init__(self, in_channels: int = 1, out_channels: int = 1, width: int = 64, modes: int | None = None, *,
                 ch_mults: tuple[int, ...] = (1, 2, 2, 2), n_blocks: int = 2, backend: str = "auto"):
        super().__init__(in_channels, out_channels, width=width, modes=modes, backend=backend)
        check_int_range("n_blocks", n_blocks, 1)
        if not ch_mults or any(isinstance(m, bool) or not isinstance(m, int) or m < 1 for m in ch_mults):
            raise ValueError(f"ch_mults must be a non-empty sequence of ints >= 1, got {ch_mults!r}")
        self.factor = 2 ** len(ch_mults)
        channels = [width]  # channels[i] enters level i; channels[i + 1] leaves it
        for m in ch_mults:
            channels.append(channels[-1] * m)
        self.lift = circular_conv(in_channels + 1, width)
        self.down = nn.ModuleList(
            nn.ModuleList(ResidualBlock1d(channels[i] if j == 0 else channels[i + 1], channels[i + 1])
                          for j in range(n_blocks)) for i in range(len(ch_mults)))
        self.downsample = nn.ModuleList(Downsample1d(c) for c in channels[1:])
        self.middle = nn.Sequential(*(ResidualBlock1d(channels[-1], channels[-1]) for _ in range(2)))
        levels = list(reversed(range(len(ch_mults))))  # coarse to fine
        self.upsample = nn.ModuleList(Upsample1d(channels[i + 1]) for i in levels)
        self.up = nn.ModuleList(
            nn.ModuleList([ResidualBlock1d(2 * channels[i + 1], channels[i + 1]) for _ in range(n_blocks)]
                          + [ResidualBlock1d(channels[i + 1] + channels[i], channels[i])]) for i in levels)
        self.head = nn.Sequential(nn.GroupNorm(math.gcd(8, width), width), nn.GELU(),
                                  circular_conv(width, out_channels))

    def predict(self, u: torch.Tensor) -> torch.Tensor:
        S = u.shape[-2]
        if S % self.factor:
            raise ValueError(f"S (u.shape[-2]) must be a multiple of {self.factor} ({len(self.down)} downsamplings "
                             f"by 2), got {S}")
        x = self.with_grid(u).reshape(-1, S, self.in_channels + 1).transpose(1, 2)  # [N, C + 1, S]
        h = self.lift(x)
        skips = [h]
        for blocks, downsample in zip(self.down, self.downsample):
            for block in blocks:
                h = block(h)
                skips.append(h)
            h = downsample(h)
            skips.append(h)
        skips.pop()  # the coarsest map feeds the middle block only
        h = self.middle(h)
        for upsample, blocks in zip(self.upsample, self.up):
            h = upsample(h)
            for block in blocks:
                h = block(torch.cat([h, skips.pop()], dim=1))
        return self.head(h).transpose(1, 2).reshape(u.shape[:-1] + (self.out_channels,))
