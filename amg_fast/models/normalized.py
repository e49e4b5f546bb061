"""Input/output normalisation and increment prediction around any sequence model.

Normalized(model, ...) keeps the wrapped model's contract (u [B, T, S, C] -> prediction of u_{t+1},
causal; rollout(u0, steps) from u_0 only) and changes only what the inner network sees and emits:

    x_t = (u_t - in_mean) / in_std                         (per channel)
    y_t = inner(x)_t * out_std + out_mean                  (per channel)
    prediction of u_{t+1} = y_t              (increment=False: the network emits the next state)
                          = u_t + y_t        (increment=True: it emits u_{t+1} - u_t)

With in_mean = out_mean = 0 and in_std = out_std = 1 it is the identity map around the model
(plus the increment, if asked). The statistics are buffers (saved with the state dict); the
trainer fills them from the training split (amg_fast.train.data.normalization_stats). The
loss stays the paper's, on u_{t+1} in physical units: only the parametrisation changes.
"""
from __future__ import annotations

import torch

from amg_fast.models.base import SequenceModel

__all__ = ["Normalized"]


def _channel_vector(name: str, value, channels: int, positive: bool) -> torch.Tensor:
    t = torch.as_tensor(value, dtype=torch.float32).flatten()
    if t.numel() == 1:
        t = t.expand(channels).clone()
    if t.numel() != channels:
        raise ValueError(f"{name} must hold one value per channel ({channels}), got {t.numel()} values")
    if not bool(torch.isfinite(t).all()) or (positive and not bool((t > 0).all())):
        raise ValueError(f"{name} must be finite{' and > 0' if positive else ''}, got {t.tolist()}")
    return t


class Normalized(SequenceModel):
    """model wrapped by per-channel input/output normalisation and, optionally, increment prediction.

    model: a SequenceModel with in_channels == out_channels; in_mean, in_std, out_mean, out_std:
    per-channel statistics (scalars or [C]); increment: the network predicts u_{t+1} - u_t.
    forward/step/rollout keyword arguments (AMGFNO's omega) go to the wrapped model; AMGFNO's
    gate_mean / last_gate_mean read through.
    """

    def __init__(self, model: SequenceModel, *, in_mean=0.0, in_std=1.0, out_mean=0.0, out_std=1.0,
                 increment: bool = False):
        if model.in_channels != model.out_channels:
            raise ValueError(f"Normalized needs in_channels == out_channels, got {model.in_channels} and "
                             f"{model.out_channels}")
        super().__init__(model.in_channels, model.out_channels)
        if not isinstance(increment, bool):
            raise TypeError(f"increment must be a bool, got {increment!r}")
        self.model, self.increment = model, increment
        self.spatial_dims = model.spatial_dims  # the input checks expect the wrapped model's grid
        C = model.in_channels
        self.register_buffer("in_mean", _channel_vector("in_mean", in_mean, C, False))
        self.register_buffer("in_std", _channel_vector("in_std", in_std, C, True))
        self.register_buffer("out_mean", _channel_vector("out_mean", out_mean, C, False))
        self.register_buffer("out_std", _channel_vector("out_std", out_std, C, True))

    def _inputs(self, u: torch.Tensor) -> torch.Tensor:
        return (u - self.in_mean.to(u.dtype)) / self.in_std.to(u.dtype)

    def _outputs(self, y: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        y = y * self.out_std.to(y.dtype) + self.out_mean.to(y.dtype)
        return u + y if self.increment else y

    def forward(self, u: torch.Tensor, **kwargs) -> torch.Tensor:
        self.check_sequence(u)
        return self._outputs(self.model(self._inputs(u), **kwargs), u)

    def initial_state(self, u0: torch.Tensor):
        return self.model.initial_state(self._inputs(u0))

    def step(self, u_t: torch.Tensor, state, **kwargs):
        y, state = self.model.step(self._inputs(u_t), state, **kwargs)
        return self._outputs(y, u_t), state

    def rollout(self, u0: torch.Tensor, steps: int, **kwargs) -> torch.Tensor:
        reset = getattr(self.model, "_reset_gate_record", None)  # AMGFNO: g-bar over the rollout
        if reset is not None:
            reset()
        out = super().rollout(u0, steps, **kwargs)
        if reset is not None:
            self.model._close_gate_record()
        return out

    @property
    def last_gate_mean(self):
        return getattr(self.model, "last_gate_mean", None)

    @property
    def gate_mean(self):
        return getattr(self.model, "gate_mean", None)

    def extra_repr(self) -> str:
        return f"increment={self.increment}"

