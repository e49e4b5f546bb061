"""The unresolved spectral-energy ratio omega_f (paper eq. app-exp-omega-state / -estimate), on 1D
states and on 2D fields (spatial_dims=2: the energy outside the f x f grid's modes)."""
from __future__ import annotations

import numpy as np

from amg_fast.data._arrays import as_numpy_real

__all__ = ["unresolved_energy_ratio", "unresolved_energy_ratio_per_state"]

_CHUNK_VALUES = 1 << 22  # states are transformed this many grid values at a time (bounded memory)


def unresolved_energy_ratio_per_state(u, f: int, *, spatial_dims: int = 1) -> np.ndarray:
    """sum_{|n| > f//2} |a_n|^2 / sum_n |a_n|^2 per state (0 where the state is 0; NaN or Inf states raise).

    u: real [..., N] periodic high-resolution states -> float64 [...]. The two-sided DFT
    wave numbers n run over -N//2..(N-1)//2 (the Nyquist mode of even N has |n| = N/2).
    spatial_dims=2: u [..., N_x, N_y] fields -> [...], a mode n = (n_x, n_y) is unresolved when
    max(|n_x|, |n_y|) > f//2, i.e. when the f x f observation grid cannot hold it (the per-axis
    rule, not the radial |n| > f//2: the corners of the square band are resolved).
    """
    if spatial_dims not in (1, 2):
        raise ValueError(f"spatial_dims must be 1 ([..., N]) or 2 ([..., N_x, N_y]), got {spatial_dims!r}")
    u = as_numpy_real("u", u, min_rank=spatial_dims)
    if isinstance(f, bool) or not isinstance(f, (int, np.integer)) or f < 1:
        raise ValueError(f"f (the observation resolution) must be an int >= 1, got {f!r}")
    grid_shape = u.shape[u.ndim - spatial_dims:]
    states = u.reshape((-1,) + grid_shape)
    finite = np.isfinite(states).reshape(len(states), -1).all(axis=1)
    if not finite.all():
        raise ValueError(f"u holds NaN or Inf values ({int((~finite).sum())} of {len(states)} states): omega_f is "
                         "undefined for non-finite states")
    axes = tuple(range(-spatial_dims, 0))
    highest = np.zeros(grid_shape)  # max_i |n_i| per mode
    for axis, size in zip(axes, grid_shape):
        wave = np.abs(np.fft.fftfreq(size, d=1.0 / size))
        highest = np.maximum(highest, wave.reshape((-1,) + (1,) * (-axis - 1)))
    unresolved_modes = highest > f // 2
    ratios = np.zeros(len(states))
    step = max(1, _CHUNK_VALUES // max(1, int(np.prod(grid_shape))))
    for start in range(0, len(states), step):
        power = np.abs(np.fft.fftn(states[start:start + step], axes=axes)) ** 2
        total = power.reshape(len(power), -1).sum(-1)
        unresolved = power[:, unresolved_modes].sum(-1)
        ratios[start:start + step] = np.divide(unresolved, total, out=np.zeros_like(total), where=total > 0)
    return ratios.reshape(u.shape[:u.ndim - spatial_dims])


def unresolved_energy_ratio(u, f: int, *, spatial_dims: int = 1) -> float:
    """omega_f: the per-state ratio averaged over all leading dims. u real [..., N] (spatial_dims=2:
    [..., N_x, N_y]) -> float."""
    return float(unresolved_energy_ratio_per_state(u, f, spatial_dims=spatial_dims).mean())
