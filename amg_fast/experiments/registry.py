"""The paper's experiments: which runs each needs (per seed) and which artefact it produces.

An Experiment is data: an id, the paper artefact it reproduces, and `runs(seeds, omega_from)`,
the RunSpecs it needs. Reports (tables, figures) live in amg_fast.experiments.reports, keyed by
the same ids. Add your own with `register(Experiment(...))`.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Callable, Iterable

from amg_fast.experiments.specs import RunSpec

__all__ = ["Experiment", "EXPERIMENTS", "register", "get_experiment", "KS_NUS", "RESOLUTIONS", "BURGERS_NU",
           "TABLE2_MODELS", "OMEGA_SOURCES", "paper_omega"]

KS_NUS = (0.075, 0.1, 0.125)
BURGERS_NU = 0.001
RESOLUTIONS = (32, 64, 128)
TABLE2_MODELS = ("ffno", "multi_input_ffno", "s4ffno", "amgfno", "factformer", "gkt", "unet")
ALPHAS = {"convex": (0.0, 0.25, 0.5, 0.75, 1.0), "additive": (0.0, 0.5, 1.0, 1.5, 2.0)}
OMEGA_SOURCES = ("data", "paper")


@dataclass(frozen=True)
class Experiment:
    """id: the name reproduce.py takes; artefact: what of the paper it reproduces;
    build(omega) -> the RunSpecs for seed 0 (other seeds are the same runs with another seed)."""

    id: str
    artefact: str
    build: Callable[[Callable[[str, float, int], float | None]], list[RunSpec]]

    def runs(self, seeds: Iterable[int] = (0,), omega_from: str = "data") -> list[RunSpec]:
        """The runs for these seeds; omega_from "paper" gives AMGFNO runs the paper's omega_f."""
        if omega_from not in OMEGA_SOURCES:
            raise ValueError(f"omega_from must be one of {OMEGA_SOURCES}, got {omega_from!r}")
        omega = paper_omega if omega_from == "paper" else (lambda pde, nu, res: None)
        base = self.build(omega)
        return [RunSpec(**{**spec.to_dict(), "seed": seed}) for seed in seeds for spec in base]


def paper_omega(pde: str, nu: float, res: int) -> float | None:
    """The paper's omega_f for a setting (None where the paper gives none)."""
    from amg_fast.experiments import paper

    return paper.OMEGA_F.get((pde, nu, res))


def _settings(pdes=("ks", "burgers")):
    """(pde, nu, res) of the paper's grid: KS 3 nu x 3 f, Burgers 3 f."""
    out = []
    if "ks" in pdes:
        out += [("ks", nu, res) for nu, res in itertools.product(KS_NUS, RESOLUTIONS)]
    if "burgers" in pdes:
        out += [("burgers", BURGERS_NU, res) for res in RESOLUTIONS]
    return out


def _amgfno(pde, nu, res, omega, variant=None) -> RunSpec:
    # The paper's omega_f replaces the data's for the fixed-omega gate only.
    fixed = omega(pde, nu, res) if variant is None else None
    return RunSpec("amgfno", pde, nu, res, variant=variant, omega=fixed)


def _alpha_sweep(fusion: str):
    def build(omega):
        return [RunSpec("s4ffno", pde, nu, res, fusion=fusion, alpha=alpha)
                for pde, nu, res in _settings(("ks",)) for alpha in ALPHAS[fusion]]
    return build


def _table2(omega):
    return [_amgfno(pde, nu, res, omega) if model == "amgfno" else RunSpec(model, pde, nu, res)
            for pde, nu, res in _settings() for model in TABLE2_MODELS]


EXPERIMENTS: dict[str, Experiment] = {}


def register(experiment: Experiment) -> Experiment:
    if experiment.id in EXPERIMENTS:
        raise ValueError(f"an experiment {experiment.id!r} is already registered")
    EXPERIMENTS[experiment.id] = experiment
    return experiment


def get_experiment(name: str) -> Experiment:
    if name not in EXPERIMENTS:
        raise ValueError(f"unknown experiment {name!r}; available: {', '.join(EXPERIMENTS)}")
    return EXPERIMENTS[name]


register(Experiment("alpha-convex", "Figure (motivation): S4FFNO nRMSE vs a fixed convex memory weight alpha "
                    "per nu and f, alpha* marked, and the alpha* heatmap", _alpha_sweep("convex")))
register(Experiment("alpha-additive", "Appendix figure: the same sweep with additive fusion h + alpha z",
                    _alpha_sweep("additive")))
register(Experiment("table2", "Table 2 (main): nRMSE of seven models on KS (3 nu x 3 f) and Burgers (3 f)",
                    _table2))
register(Experiment("table3", "Table 3: AMGFNO's converged mean gate (mean of the last 20 epochs)",
                    lambda omega: [_amgfno(pde, nu, res, omega) for pde, nu, res in _settings()]))
register(Experiment("omega-ablation", "Appendix table: AMGFNO with per-batch omega vs fixed omega_f on KS, "
                    "delta-%", lambda omega: [_amgfno(pde, nu, res, omega, "omega-batch")
                                              for pde, nu, res in _settings(("ks",))]))
register(Experiment("freq-gate-ablation", "Appendix table: AMGFNO without the frequency-aware gate",
                    lambda omega: [_amgfno(pde, nu, res, omega, "no-freq-gate") for pde, nu, res in _settings()]))
