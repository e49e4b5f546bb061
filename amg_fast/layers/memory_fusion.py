"""How the memory output z joins the Markovian state h at the memory position.

FixedFusion (S4FFNO): "residual" h + z, "convex" alpha z + (1 - alpha) h, "additive" h + alpha z.
AdaptiveMemoryGate (AMGFNO): g = sigmoid(W_z z + W_h h + b) * chi, out = g z + (1 - g) h, with the
frequency gate chi = sigmoid(w1 log(omega + eps) + b_omega). Both map (h, z) [..., H] -> [..., H].
"""
from __future__ import annotations

import logging
import math

import torch
from torch import nn

from amg_fast._checks import ArgumentError, _traced
from amg_fast.ops import gate_fusion
from amg_fast.ops.gate import frequency_gate, gate_fusion_freq
from amg_fast.ops.readout_gate import memory_gate, memory_gate_freq

__all__ = ["FixedFusion", "check_omega", "AdaptiveMemoryGate"]

FUSIONS = ("residual", "convex", "additive")
logger = logging.getLogger("amg_fast.layers")


class FixedFusion(nn.Module):
    """Fixed memory weight alpha (not learned). alpha applies to "convex" (in [0, 1]) and
    "additive" (finite); "residual" takes none. Default alpha = 1."""

    def __init__(self, fusion: str = "residual", alpha: float | None = None):
        super().__init__()
        if fusion not in FUSIONS:
            raise ArgumentError(f"fusion must be one of {FUSIONS}, got {fusion!r}", "fusion")
        if fusion == "residual" and alpha is not None:  # ArgumentError: a CLI names its flags (--alpha, --fusion)
            raise ArgumentError(f"alpha applies to fusion 'convex' or 'additive', not 'residual' (got alpha={alpha})",
                                "alpha", "fusion")
        alpha = 1.0 if alpha is None else float(alpha)
        if fusion == "convex" and not 0.0 <= alpha <= 1.0:
            raise ArgumentError(f"alpha must be in [0, 1] for convex fusion, got {alpha}", "alpha")
        if not math.isfinite(alpha):
            raise ArgumentError(f"alpha must be finite, got {alpha}", "alpha")
        self.fusion, self.alpha = fusion, alpha

    def forward(self, h: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        if self.fusion == "residual":
            return h + z
        if self.fusion == "convex":
            return self.alpha * z + (1.0 - self.alpha) * h
        return h + self.alpha * z

    def extra_repr(self) -> str:
        return f"fusion={self.fusion!r}" + ("" if self.fusion == "residual" else f", alpha={self.alpha}")


def check_omega(name: str, omega) -> torch.Tensor:
    """omega_f as a real tensor (0-dim or [B]); every value finite and >= 0 -- checked in eager calls only: a
    host sync cannot run while torch.compile traces or a CUDA graph captures, so a compiled or graphed model's
    per-call omega is the caller's to check (a negative one gives NaN, +inf a gate of 1)."""
    t = omega if isinstance(omega, torch.Tensor) else torch.as_tensor(omega, dtype=torch.float64)
    if t.is_complex() or t.dtype == torch.bool:
        raise TypeError(f"{name} must be a real number or tensor, got dtype {t.dtype}")
    if not t.is_floating_point():
        t = t.double()
    if t.dim() > 1:
        raise ValueError(f"{name} must be a scalar or a [B] tensor, got shape {tuple(t.shape)}")
    if not _traced() and bool((~torch.isfinite(t) | (t < 0)).any()):
        raise ValueError(f"{name} must be finite and >= 0 (an unresolved-energy ratio), got {t.tolist()}")
    return t


class AdaptiveMemoryGate(nn.Module):
    """(h, z) [B, ..., H] -> g z + (1 - g) h; the last gate's mean is kept in `last_gate_mean`.

    Content gate Linear(H, H) on z and on h, weights and bias zero-initialised. Frequency gate
    chi = sigmoid(w1 log(omega + eps) + b_omega) with learnable w1 = 2.0, b_omega = 3.8 and the
    fixed buffer omega (training-set omega_f). freq_gate=False drops it (chi = 1). omega=None
    leaves the frequency gate off (chi = 1) until set_omega() is called or omega is passed per
    batch to forward.
    """

    def __init__(self, width: int, omega=None, *, freq_gate: bool = True, w1: float = 2.0,
                 b_omega: float = 3.8, eps: float = 1e-8, backend: str = "auto"):
        super().__init__()
        self.freq_gate, self.eps, self.backend = bool(freq_gate), float(eps), backend
        self.w_z = nn.Parameter(torch.zeros(width, width))
        self.w_h = nn.Parameter(torch.zeros(width, width))
        self.b = nn.Parameter(torch.zeros(width))
        self.w1 = nn.Parameter(torch.tensor(float(w1)))
        self.b_omega = nn.Parameter(torch.tensor(float(b_omega)))
        self.register_buffer("omega", torch.tensor(float("nan")))  # NaN = not set
        # log(omega + eps), kept beside omega (not saved: rebuilt on load) so a step computes no log
        self.register_buffer("log_omega", torch.tensor(float("nan")), persistent=False)
        self._has_omega = False  # Python mirror of "omega is set": no tensor test (a graph break) in chi()
        if omega is not None:
            self.set_omega(omega)
        self._warned_no_omega = False

    def set_omega(self, omega) -> None:
        """Set the fixed omega_f (a float >= 0)."""
        t = check_omega("omega", omega)
        if t.dim() != 0:
            raise ValueError(f"omega (the fixed omega_f) must be a scalar, got shape {tuple(t.shape)}")
        self.omega.fill_(float(t))
        self._omega_changed()

    def _omega_changed(self) -> None:
        self._has_omega = not bool(torch.isnan(self.omega))
        with torch.no_grad():
            self.log_omega.copy_(torch.log(self.omega + self.eps))

    def _apply(self, fn, recurse=True):
        out = super()._apply(fn, recurse)
        self._omega_changed()  # .double() / .to(): log_omega from omega at the new precision
        return out

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)
        self._omega_changed()

    def _log_omega(self, omega) -> torch.Tensor | None:
        """log(omega + eps) of the frequency gate: 0-dim (fixed buffer) or [B] (per-batch omega), or
        None when the frequency gate is off (freq_gate=False, or no omega: chi = 1)."""
        if not self.freq_gate:
            return None
        if omega is not None:
            omega = check_omega("omega", omega).to(device=self.w1.device, dtype=self.w1.dtype)
            return torch.log(omega + self.eps)
        if not self._has_omega:
            # dynamo cannot trace a logging call (and reading the flag first would make it guard on it)
            if not torch.compiler.is_compiling() and not self._warned_no_omega:
                logger.warning("AdaptiveMemoryGate has no omega: frequency gate off (chi = 1) until "
                               "set_omega() is called or omega is passed per batch")
                self._warned_no_omega = True
            return None
        return self.log_omega

    def chi(self, omega: torch.Tensor | None = None) -> torch.Tensor:
        """Frequency gate: 0-dim, or [B] when a per-batch omega [B] is given."""
        log_omega = self._log_omega(omega)
        if log_omega is None:
            return torch.ones((), dtype=self.w1.dtype, device=self.w1.device)
        return frequency_gate(log_omega, self.w1, self.b_omega)

    def _gate_args(self, h: torch.Tensor, omega) -> tuple[tuple[torch.Tensor, ...], tuple | None]:
        """((w_z, w_h, b), and (log(omega + eps), w1, b_omega) or None when the frequency gate is off),
        in the parameters' own dtype: the ops compute in fp32 (fp64) whatever h's dtype, the kernels
        cast their weight tiles themselves and the reference's Linears follow autocast, so under
        bf16 autocast no cast kernels run for them (and chi is formed from the unrounded values)."""
        log_omega = self._log_omega(omega)
        if log_omega is not None and log_omega.dim() == 1 and log_omega.shape[0] != h.shape[0]:
            raise ValueError(f"omega per batch must have {h.shape[0]} values (one per trajectory), "
                             f"got {log_omega.shape[0]}")
        weights = (self.w_z, self.w_h, self.b)
        if log_omega is None:
            return weights, None
        return weights, (log_omega, self.w1, self.b_omega)

    def forward(self, h: torch.Tensor, z: torch.Tensor, omega=None) -> tuple[torch.Tensor, torch.Tensor]:
        """h, z [B, ..., H]; omega None (fixed buffer) or per-batch [B] -> (out, g) [B, ..., H].
        The frequency gate runs inside the gate op (gate_fusion_freq)."""
        weights, freq = self._gate_args(h, omega)
        if freq is None:
            return gate_fusion(h, z, *weights, torch.ones((), dtype=h.dtype, device=h.device), backend=self.backend)
        return gate_fusion_freq(h, z, *weights, *freq, backend=self.backend)

    def forward_readout(self, h: torch.Tensor, a: torch.Tensor, readout: nn.Linear, omega=None
                        ) -> tuple[torch.Tensor, torch.Tensor]:
        """forward(h, GLU(readout(a)), omega) with the readout folded into the gate op (memory_gate):
        h, a [B, ..., H]; readout: the memory's Linear(H, 2H) -> (out [B, ..., H], mean gate 0-dim)."""
        weights, freq = self._gate_args(h, omega)
        if freq is None:
            return memory_gate(h, a, readout.weight, readout.bias, *weights,
                               torch.ones((), dtype=h.dtype, device=h.device), backend=self.backend)
        return memory_gate_freq(h, a, readout.weight, readout.bias, *weights, *freq, backend=self.backend)
