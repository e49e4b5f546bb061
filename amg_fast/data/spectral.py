"""The unresolved spectral-energy ratio omega_f (paper eq. app-exp-omega-state / -estimate)."""
from __future__ import annotations

import numpy as np

from amg_fast.data._arrays import as_numpy_real

__all__ = ["unresolved_energy_ratio", "unresolved_energy_ratio_per_state"]


def unresolved_energy_ratio_per_state(u, f: int) -> np.ndarray:
    """sum_{|n| > f//2} |a_n|^2 / sum_n |a_n|^2 per state (0 where the state is 0; NaN or Inf states raise).

    u: real [..., N] periodic high-resolution states -> float64 [...]. The two-sided DFT
    wave numbers n run over -N//2..(N-1)//2 (the Nyquist mode of even N has |n| = N/2).
    """
    u = as_numpy_real("u", u, min_rank=1)
    if isinstance(f, bool) or not isinstance(f, (int, np.integer)) or f < 1:
        raise ValueError(f"f (the observation resolution) must be an int >= 1, got {f!r}")
    if not np.all(np.isfinite(u)):
        bad = int(np.sum(~np.all(np.isfinite(u), axis=-1)))
        raise ValueError(f"u holds NaN or Inf values ({bad} of {u.size // max(u.shape[-1], 1)} states): omega_f is "
                         "undefined for non-finite states")
    N = u.shape[-1]
    power = np.abs(np.fft.fft(u, axis=-1)) ** 2
    wave_numbers = np.abs(np.fft.fftfreq(N, d=1.0 / N))
    total = power.sum(-1)
    unresolved = power[..., wave_numbers > f // 2].sum(-1)
    return np.divide(unresolved, total, out=np.zeros_like(total), where=total > 0)


def unresolved_energy_ratio(u, f: int) -> float:
    """omega_f: the per-state ratio averaged over all leading dims. u real [..., N] -> float."""
    return float(unresolved_energy_ratio_per_state(u, f).mean())
