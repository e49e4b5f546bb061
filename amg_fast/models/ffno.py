"""FFNO1d (Markovian), MultiInputFFNO1d (window of the last 4 states) and FFNO2d (FFNO1d on a 2D grid)."""
from __future__ import annotations

import torch

from amg_fast._checks import check_int_range
from amg_fast.models.base import FFNOBackbone

__all__ = ["FFNO1d", "MultiInputFFNO1d", "FFNO2d"]


class FFNO1d(FFNOBackbone):
    """Markovian FFNO: each prediction from the current state. u [B, T, S, C] -> [B, T, S, C]."""

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        self.check_sequence(u)
        return self.decode(self.run_blocks(self.encode(u), 0, len(self.blocks)))

    def step(self, u_t, state):
        return self.decode(self.run_blocks(self.encode(u_t), 0, len(self.blocks))), state


class MultiInputFFNO1d(FFNOBackbone):
    """FFNO fed the last `window` states (oldest first, concatenated as channels); steps before
    the start are padded with u_0. u [B, T, S, C] -> [B, T, S, C]."""

    def __init__(self, in_channels: int = 1, out_channels: int = 1, width: int = 128,
                 modes: int | None = None, *, window: int = 4, backend: str = "auto", **backbone_options):
        self.window = check_int_range("window", window, 1)
        super().__init__(in_channels, out_channels, width, modes, encoder_channels=window * in_channels,
                         backend=backend, **backbone_options)

    def _predict(self, stacked: torch.Tensor) -> torch.Tensor:
        """stacked [..., window, S, C] -> prediction [..., S, C]."""
        x = stacked.movedim(-3, -2).flatten(-2)  # [..., S, window * C], oldest state first
        return self.decode(self.run_blocks(self.encode(x), 0, len(self.blocks)))

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        self.check_sequence(u)
        T = u.shape[1]
        lags = torch.arange(self.window - 1, -1, -1, device=u.device)  # window-1 .. 0
        index = (torch.arange(T, device=u.device)[:, None] - lags).clamp(min=0)  # [T, window]
        return self._predict(u[:, index])  # u[:, index]: [B, T, window, S, C]

    def initial_state(self, u0):
        return [u0] * (self.window - 1)

    def step(self, u_t, state):
        pred = self._predict(torch.stack(state + [u_t], dim=1))
        return pred, (state + [u_t])[1:]


class FFNO2d(FFNO1d):
    """F-FNO on a 2D grid (fourierflow's 2D F-FNO): each block x + FeedForward(SpectralConv_x(x) +
    SpectralConv_y(x)), one spectral weight per axis, modes K per axis. u [B, T, X, Y, C] -> same."""

    spatial_dims = 2
