"""Memory models: ffno, ffno, memory, ffno, ffno (S4D memory at position 3).

S4FFNO1d fuses the memory output z with the state h of block 2 by a fixed rule; AMGFNO1d by the
adaptive memory gate. Both carry the S4D state through rollout, one step costing O(1) in the
history length. S4FFNO2d and AMGFNO2d are the same models on a 2D grid (u [B, T, X, Y, C]): the
blocks' spectral convs are factorised over the two axes, the S4D memory runs over time at every
grid point, and the gate acts pointwise.
"""
from __future__ import annotations

import torch

from amg_fast._nvtx import nvtx_range
from amg_fast.kernels.limits import READOUT_MAX_H, memory_readout
from amg_fast.layers import AdaptiveMemoryGate, FixedFusion, S4DMemory
from amg_fast.models.base import FFNOBackbone

__all__ = ["MemoryFFNO", "S4FFNO1d", "AMGFNO1d", "S4FFNO2d", "AMGFNO2d"]

MEMORY_POSITION = 2  # blocks before the memory layer (the memory is layer 3 of 5)


class MemoryFFNO(FFNOBackbone):
    """Shared body; subclasses define fuse(h, z, **kw) -> h, both [B, (T,) S, H].
    backbone_options (share_weights, weight_norm, decoder_input): FFNOBackbone's."""

    def __init__(self, in_channels: int = 1, out_channels: int = 1, width: int = 128,
                 modes: int | None = None, *, state_dim: int = 64, backend: str = "auto", **backbone_options):
        super().__init__(in_channels, out_channels, width, modes, backend=backend, **backbone_options)
        self.memory = S4DMemory(width, state_dim, backend=backend)

    def fuse(self, h: torch.Tensor, z: torch.Tensor, **kwargs) -> torch.Tensor:
        raise NotImplementedError

    def _head(self, u):
        return self.run_blocks(self.encode(u), 0, MEMORY_POSITION)

    def _tail(self, h):
        return self.decode(self.run_blocks(h, MEMORY_POSITION, len(self.blocks)))

    def memory_and_fuse(self, h: torch.Tensor, **fuse_kwargs) -> torch.Tensor:
        """h [B, T, S, H] -> fuse(h, memory(h)): the memory layer over the whole sequence, then the fusion."""
        with nvtx_range("amg_fast.model.memory"):
            z = self.memory(h)
        with nvtx_range("amg_fast.model.fuse"):
            return self.fuse(h, z, **fuse_kwargs)

    def forward(self, u: torch.Tensor, **fuse_kwargs) -> torch.Tensor:
        self.check_sequence(u)
        return self._tail(self.memory_and_fuse(self._head(u), **fuse_kwargs))  # h: [B, T, S, H]

    def initial_state(self, u0):
        return self.memory.initial_state(u0.new_zeros(u0.shape[:-1] + (self.width,)))

    def step(self, u_t, state, **fuse_kwargs):
        h = self._head(u_t)  # [B, S, H]
        z, state = self.memory.step(h, state)
        return self._tail(self.fuse(h, z, **fuse_kwargs)), state


class S4FFNO1d(MemoryFFNO):
    """S4FFNO with fusion "residual" (h + z, MemNO), "convex" (alpha z + (1 - alpha) h) or
    "additive" (h + alpha z); alpha is fixed, not learned."""

    def __init__(self, in_channels: int = 1, out_channels: int = 1, width: int = 128,
                 modes: int | None = None, *, fusion: str = "residual", alpha: float | None = None,
                 state_dim: int = 64, backend: str = "auto", **backbone_options):
        super().__init__(in_channels, out_channels, width, modes, state_dim=state_dim, backend=backend,
                         **backbone_options)
        self.fusion = FixedFusion(fusion, alpha)

    @classmethod
    def options_kwargs(cls, options, omega=None) -> dict:
        """The backbone's plus fusion and alpha."""
        return {**super().options_kwargs(options, omega), "fusion": options.fusion, "alpha": options.alpha}

    def fuse(self, h, z):
        return self.fusion(h, z)


class AMGFNO1d(MemoryFFNO):
    """AMGFNO: memory fused by the adaptive memory gate g = content gate * frequency gate.

    omega: the fixed omega_f of the training data (buffer); freq_gate=False drops the frequency
    gate; forward(u, omega=[B]) / rollout(u0, steps, omega=[B]) use a per-batch omega instead.
    After each forward or rollout, `last_gate_mean` holds the mean gate g-bar (a detached 0-dim
    tensor; paper eq. app-mean-gate) and `gate_mean` the same as a float.
    """

    def __init__(self, in_channels: int = 1, out_channels: int = 1, width: int = 128,
                 modes: int | None = None, *, omega=None, freq_gate: bool = True,
                 state_dim: int = 64, backend: str = "auto", **backbone_options):
        super().__init__(in_channels, out_channels, width, modes, state_dim=state_dim, backend=backend,
                         **backbone_options)
        self.gate = AdaptiveMemoryGate(width, omega, freq_gate=freq_gate, backend=backend)
        self.last_gate_mean: torch.Tensor | None = None
        self._gate_sum, self._gate_count = None, 0

    @classmethod
    def options_kwargs(cls, options, omega=None) -> dict:
        """The backbone's plus omega (the data's omega_f) and freq_gate (off with options.no_freq_gate)."""
        return {**super().options_kwargs(options, omega), "omega": omega, "freq_gate": not options.no_freq_gate}

    def fuse(self, h, z, omega=None):
        out, g = self.gate(h, z, omega)
        self._record_gate(g.detach().mean(dtype=torch.promote_types(g.dtype, torch.float32)))
        return out

    def memory_and_fuse(self, h, omega=None):
        """As MemoryFFNO's, with the memory's readout GLU(Linear(a)) folded into the gate op
        (memory_gate: z never materialised, g only as its mean) unless AMG_FAST_MEMORY_READOUT=separate
        or the width exceeds READOUT_MAX_H; the same values either way."""
        if memory_readout() != "fused" or self.width > READOUT_MAX_H:
            return super().memory_and_fuse(h, omega=omega)
        with nvtx_range("amg_fast.model.memory"):
            a = self.memory.activations(h)
        with nvtx_range("amg_fast.model.fuse"):
            out, g_mean = self.gate.forward_readout(h, a, self.memory.output_linear, omega)
        self._record_gate(g_mean)
        return out

    def _record_gate(self, g_mean: torch.Tensor) -> None:
        self._gate_sum = g_mean if self._gate_sum is None else self._gate_sum + g_mean
        self._gate_count += 1

    def _reset_gate_record(self):
        self._gate_sum, self._gate_count = None, 0

    def _close_gate_record(self):  # one forward records one mean: no division (no kernel) then
        self.last_gate_mean = self._gate_sum if self._gate_count == 1 else self._gate_sum / self._gate_count

    def forward(self, u: torch.Tensor, omega=None) -> torch.Tensor:
        self._reset_gate_record()
        out = super().forward(u, omega=omega)
        self._close_gate_record()
        return out

    def rollout(self, u0: torch.Tensor, steps: int, omega=None, *, check_finite: bool = False) -> torch.Tensor:
        """As SequenceModel.rollout; g-bar is the mean gate over all rollout steps."""
        self._reset_gate_record()
        out = super().rollout(u0, steps, omega=omega, check_finite=check_finite)
        self._close_gate_record()
        return out

    @property
    def gate_mean(self) -> float | None:
        """g-bar of the last forward or rollout as a float (None before the first call)."""
        return None if self.last_gate_mean is None else float(self.last_gate_mean)


class S4FFNO2d(S4FFNO1d):
    """S4FFNO1d on a 2D grid: u [B, T, X, Y, C] -> [B, T, X, Y, C]; rollout(u0 [B, X, Y, C], steps)."""

    spatial_dims = 2


class AMGFNO2d(AMGFNO1d):
    """AMGFNO1d on a 2D grid: u [B, T, X, Y, C] -> [B, T, X, Y, C]; rollout(u0 [B, X, Y, C], steps).
    omega: the training data's 2D omega_f (amg_fast.data.spectral.unresolved_energy_ratio with
    spatial_dims=2: the energy outside the f x f grid's modes)."""

    spatial_dims = 2
