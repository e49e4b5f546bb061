"""Shared base of the Markovian baselines (Factformer1d, GalerkinTransformer1d, UNet1d).

Each applies one map u_t [..., S, C] -> prediction of u_{t+1} [..., S, C] to every time step on
its own: forward(u [B, T, S, C]) maps all steps at once (causal by construction) and step()
carries no state, so rollout() simply feeds predictions back.
"""
from __future__ import annotations

import torch
from torch import nn

from amg_fast._checks import check_int_range
from amg_fast.models.base import SequenceModel, append_grid
from amg_fast.ops._backend import check_backend

__all__ = ["MarkovianModel", "mlp"]


def mlp(in_dim: int, hidden: int, out_dim: int, activation: type[nn.Module] = nn.GELU) -> nn.Sequential:
    """[..., in_dim] -> Linear -> activation -> Linear -> [..., out_dim]."""
    return nn.Sequential(nn.Linear(in_dim, hidden), activation(), nn.Linear(hidden, out_dim))


class MarkovianModel(SequenceModel):
    """A per-step map predict(u) [..., S, C] -> [..., S, C] applied to every time step.

    uses_modes (class attribute): False for models without Fourier layers; they accept only
    modes=None. backend is checked against ("auto", "triton", "reference") and handed to the
    model's ops (models without amg_fast ops only check it).
    """

    uses_modes = True

    def __init__(self, in_channels: int = 1, out_channels: int = 1, *, width: int, modes: int | None = None,
                 backend: str = "auto"):
        super().__init__(in_channels, out_channels)
        self.width = check_int_range("width", width, 1)
        if modes is not None and not self.uses_modes:
            raise ValueError(f"modes does not apply to {type(self).__name__} (it has no Fourier layer); "
                             f"pass modes=None, got modes={modes!r}")
        self.modes = None if modes is None else check_int_range("modes", modes, 1)
        self.backend = check_backend(backend)

    with_grid = staticmethod(append_grid)

    def predict(self, u: torch.Tensor) -> torch.Tensor:
        """The one-step map: u [..., S, C] -> prediction of the next state [..., S, C]."""
        raise NotImplementedError

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        """u [B, T, S, C] -> [B, T, S, C]; output t = predict(u[:, t])."""
        self.check_sequence(u)
        return self.predict(u)

    def step(self, u_t, state):
        return self.predict(u_t), state
