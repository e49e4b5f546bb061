"""S4DMemory: the S4D memory layer applied along time, spatial points as batch.

z = GLU(Linear_{H->2H}(GELU(S4D(h)))), S4D as in state-spaces' s4d.py: diagonal A with S4D-Lin
init (A_n = -1/2 + i pi n), B folded into C, ZOH discretisation, D skip, log_dt ~ U[log dt_min,
log dt_max]. state_dim counts real dimensions: 64 -> 32 complex pairs.
"""
from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F

from amg_fast._checks import check_int_range
from amg_fast.ops import linear_glu, s4d_step
from amg_fast.ops.s4d import s4d_discretize, s4d_zoh_scan

__all__ = ["S4DMemory"]

# Parameters that the optimizer should not decay (as s4d.py registers them).
NO_WEIGHT_DECAY = {"weight_decay": 0.0}


class S4DMemory(nn.Module):
    """h [B, T, S, H] -> z [B, T, S, H], causal in time; step() advances one time step.
    Several spatial axes (h [B, T, X, Y, H]) are folded into one for the scan: every grid point
    is a row of the batch."""

    def __init__(self, width: int, state_dim: int = 64, *, dt_min: float = 1e-3, dt_max: float = 1e-1,
                 backend: str = "auto"):
        super().__init__()
        check_int_range("width", width, 1)
        check_int_range("state_dim", state_dim, 2)
        if state_dim % 2:
            raise ValueError(f"state_dim must be even (it counts complex pairs twice), got {state_dim}")
        if not 0 < dt_min <= dt_max:
            raise ValueError(f"need 0 < dt_min <= dt_max, got dt_min={dt_min}, dt_max={dt_max}")
        n = state_dim // 2
        self.width, self.n_pairs, self.backend = width, n, backend
        log_dt = torch.rand(width) * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min)
        self.log_dt = nn.Parameter(log_dt)
        self.log_A_real = nn.Parameter(torch.full((width, n), math.log(0.5)))
        self.A_imag = nn.Parameter(math.pi * torch.arange(n, dtype=torch.float32).expand(width, n).clone())
        self.C = nn.Parameter(torch.view_as_real(torch.randn(width, n, dtype=torch.cfloat)).clone())
        self.D = nn.Parameter(torch.randn(width))
        for p in (self.log_dt, self.log_A_real, self.A_imag):
            p._optim = NO_WEIGHT_DECAY
        self.output_linear = nn.Linear(width, 2 * width)

    def discretize(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(lam, c) as real [H, N, 2]: lam = exp(dt A), c = C (exp(dt A) - 1) / A."""
        return s4d_discretize(*self._continuous_params())

    def _continuous_params(self) -> tuple[torch.Tensor, ...]:
        """(log_dt [H], log_A_real [H, N], A_imag [H, N], C [H, N, 2])."""
        return self.log_dt, self.log_A_real, self.A_imag, self.C

    def readout(self, a: torch.Tensor) -> torch.Tensor:
        """z = GLU(Linear_{H->2H}(a)) of the activations a = GELU(S4D(h)): [..., H] -> [..., H] (op linear_glu: on the
        Triton backend the GLU's backward and the bias gradient in one pass)."""
        return linear_glu(a, self.output_linear.weight, self.output_linear.bias, backend=self.backend)

    def activations(self, h: torch.Tensor) -> torch.Tensor:
        """a = GELU(S4D(h)), h [B, T, S, H] or [B, T, X, Y, H] -> the same shape (what the readout takes; AMGFNO hands it to
        the gate with the readout folded in). On the Triton Toeplitz path the discretisation runs inside
        the K kernel and the GELU in the scan's epilogue (s4d_zoh_scan, activation="gelu")."""
        dtype = torch.promote_types(h.dtype, torch.float32)  # parameters' math in fp32 / fp64, never bf16
        params = tuple(p.to(dtype) for p in self._continuous_params())
        return s4d_zoh_scan(h, *params, self.D.to(dtype), backend=self.backend, activation="gelu")

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return self.readout(self.activations(h))

    def initial_state(self, h_t: torch.Tensor) -> torch.Tensor:
        """Zero state for a step input h_t [..., H] -> [..., H, N, 2]."""
        return h_t.new_zeros(h_t.shape + (self.n_pairs, 2))

    def step(self, h_t: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """h_t [..., H], state [..., H, N, 2] -> (z_t [..., H], new state)."""
        lam, c = self.discretize()
        y, state = s4d_step(h_t, state, lam.to(h_t.dtype), c.to(h_t.dtype), self.D.to(h_t.dtype), backend=self.backend)
        return self.readout(F.gelu(y)), state
