"""Named readings of the paper's KS data: generator options (amg_fast.data.generate.KS_OPTIONS) that
docs/fidelity.md compares, and the omega_f each gives.

A RunSpec with `reading=NAME` trains on the data set generated with that reading's options (in the
sweep's data folder, named after its options); `omega_rows` measures omega_f of each reading
(`reproduce.py omega`). "s4ffno-*" follow the S4FFNO authors' generator (their LPSDA fork): 10 sines,
k_i = randint(1, 8) in {1..7}; "-t5" keeps t in [0, 5] (their README's command), every 0.2 (26
frames, the paper's step count) or every 0.1 (51 frames).
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Reading", "READINGS", "check_reading", "omega_rows"]


@dataclass(frozen=True)
class Reading:
    """label: how docs/fidelity.md names it; options: KS generator options (non-default ones only)."""

    label: str
    options: dict


_S4FFNO_IC = {"ic_terms": 10, "ic_max_wavenumber": 7}
READINGS = {
    "paper": Reading("paper [0, 2.5] (default)", {}),
    "paper-amp2": Reading("paper, IC amplitude x2", {"ic_amplitude": 1.0}),
    "paper-burn-in": Reading("paper, burn-in 2.5", {"burn_in": 2.5}),
    "paper-t5": Reading("paper [0, 5]", {"t_end": 5.0}),
    "s4ffno-ic": Reading("s4ffno IC [0, 2.5]", _S4FFNO_IC),
    "s4ffno-ic-burn-in": Reading("s4ffno IC, burn-in 2.5", {**_S4FFNO_IC, "burn_in": 2.5}),
    "s4ffno-t5-dt0.1": Reading("s4ffno IC [0, 5], dt 0.1 (51 frames)", {**_S4FFNO_IC, "t_end": 5.0}),
    "s4ffno-t5": Reading("s4ffno IC [0, 5], dt 0.2 (26 frames)", {**_S4FFNO_IC, "t_end": 5.0, "frame_dt": 0.2}),
}


def check_reading(name: str, pde: str) -> None:
    """A run's reading: one of READINGS other than the default ("paper" is no reading), KS only."""
    allowed = [n for n in READINGS if n != "paper"]
    if name not in allowed:
        raise ValueError(f"reading must be one of {', '.join(allowed)} (or none: the default data), got {name!r}")
    if pde != "ks":
        raise ValueError(f"reading {name!r} is a reading of the KS data; pde is {pde!r}")


def omega_rows(n: int, nus, seed: int = 1) -> list[dict]:
    """omega_f at f = 32, 64, 128 over all saved frames of n trajectories per (nu, reading), and the
    energy-weighted omega_32 (sum of unresolved energy over sum of energy, a different estimator)."""
    import numpy as np

    from amg_fast.data import ks
    from amg_fast.data.generate import check_ks_options
    from amg_fast.data.spectral import unresolved_energy_ratio, unresolved_energy_ratio_per_state

    rows = []
    for nu in nus:
        for name, reading in READINGS.items():
            o = check_ks_options(reading.options)
            u = ks.generate_ks(n, nu=nu, seed=seed, t=ks.ks_times(o["t_end"], o["frame_dt"]), burn_in=o["burn_in"],
                               ic_terms=o["ic_terms"], ic_max_wavenumber=o["ic_max_wavenumber"],
                               ic_amplitude=o["ic_amplitude"])
            energy = np.square(np.abs(np.fft.fft(u, axis=-1))).sum(-1)
            weighted = float((unresolved_energy_ratio_per_state(u, 32) * energy).sum() / energy.sum())
            rows.append({"nu": nu, "reading": name, "label": reading.label,
                         **{f"omega_{f}": unresolved_energy_ratio(u, f) for f in (32, 64, 128)},
                         "energy_weighted_omega_32": weighted})
    return rows
