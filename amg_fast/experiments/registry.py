"""The paper's experiments and our studies: which runs each needs (per seed) and what it produces.

An Experiment is data: an id, the artefact it reproduces, and `runs(seeds, omega_from)`, the
RunSpecs it needs in priority order (the order it lists its runs, then seeds; or stage by stage,
seed by seed). Reports (tables, figures) live in amg_fast.experiments.reports, keyed by the same
ids. Add your own with `register(Experiment(...))`, or sweep a grid of settings without registering anything
(`grid_experiment`, reproduce.py --grid).
"""
from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass
from typing import Callable, Iterable

from amg_fast.experiments.specs import OVERRIDABLE, RunSpec

__all__ = ["Experiment", "EXPERIMENTS", "register", "get_experiment", "KS_NUS", "RESOLUTIONS", "BURGERS_NU",
           "TABLE2_MODELS", "OMEGA_SOURCES", "paper_omega", "NORM_INC", "RAW_OUTPUT", "FIDELITY_VARIANTS", "PRECISIONS",
           "GRID_KEYS", "grid_experiment", "fidelity_variant", "NS2D_NUS", "NS2D_RESOLUTIONS", "NS2D_MODELS"]

KS_NUS = (0.075, 0.1, 0.125)
BURGERS_NU = 0.001
RESOLUTIONS = (32, 64, 128)
TABLE2_MODELS = ("ffno", "multi_input_ffno", "s4ffno", "amgfno", "factformer", "gkt", "unet")
ALPHAS = {"convex": (0.0, 0.25, 0.5, 0.75, 1.0), "additive": (0.0, 0.5, 1.0, 1.5, 2.0)}
OMEGA_SOURCES = ("data", "paper")


@dataclass(frozen=True)
class Experiment:
    """id: the name reproduce.py takes; artefact: what it reproduces; build(omega) -> the RunSpecs
    for seed 0 in priority order (other seeds are the same runs with another seed).

    Optional: stage(spec) -> an int: the runs go stage by stage, and within a stage seed by seed (the
    first seed of every run of the stage, then the second...), so that a sweep stopped part way holds
    whole comparisons; first_seed_only(spec) -> True for a run trained with the first seed only."""

    id: str
    artefact: str
    build: Callable[[Callable[[str, float, int], float | None]], list[RunSpec]]
    stage: Callable[[RunSpec], int] | None = None
    first_seed_only: Callable[[RunSpec], bool] | None = None

    def runs(self, seeds: Iterable[int] = (0,), omega_from: str = "data") -> list[RunSpec]:
        """The runs for these seeds, each run's seeds together in the order build lists the runs
        (with stage: stage by stage, seed by seed); omega_from "paper" gives AMGFNO runs the paper's
        omega_f."""
        if omega_from not in OMEGA_SOURCES:
            raise ValueError(f"omega_from must be one of {OMEGA_SOURCES}, got {omega_from!r}")
        omega = paper_omega if omega_from == "paper" else (lambda pde, nu, res: None)
        base = list(dict.fromkeys(self.build(omega)))  # a run listed twice (additive alpha = 1 ...) once
        seeds = tuple(dict.fromkeys(seeds))
        pairs = [(i, spec, seed) for i, spec in enumerate(base)
                 for seed in (seeds[:1] if self.first_seed_only and self.first_seed_only(spec) else seeds)]
        if self.stage is not None:
            pairs.sort(key=lambda p: (self.stage(p[1]), seeds.index(p[2]), p[0]))
        return [spec.with_seed(seed) for _, spec, seed in pairs]


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


# -- our studies ------------------------------------------------------------------------------------
# The output parametrisations, explicit: --normalize --increment (the default on KS and Burgers since
# 2026-12-01: amg_fast.train.config.OUTPUT_DEFAULTS) and the raw one (the default before).
NORM_INC = {"normalize": True, "increment": True}
RAW_OUTPUT = {"normalize": False, "increment": False}
_FOURIERFLOW = {"share_weights": True, "weight_norm": True, "decoder_input": "last_block"}
# docs/fidelity.md's variants: name -> (TrainConfig overrides, KS data reading); "base" is the raw
# parametrisation, as the paper's code trains.
FIDELITY_VARIANTS = {
    "base": (RAW_OUTPUT, None),
    "norm-inc": (NORM_INC, None),
    "base@lpsda5": (RAW_OUTPUT, "s4ffno-t5"),
    "norm": ({"normalize": True, "increment": False}, None),
    "inc": ({"normalize": False, "increment": True}, None),
    "lastblock": ({"decoder_input": "last_block", **RAW_OUTPUT}, None),
    "ff": ({**_FOURIERFLOW, **RAW_OUTPUT}, None),
    "ff-norm-inc": ({**_FOURIERFLOW, **NORM_INC}, None),
    "base@lpsda": (RAW_OUTPUT, "s4ffno-ic"),
}
# Which model ran which variants (docs/fidelity.md sections 3 and 8), most telling first.
_FIDELITY_RUNS = (("ffno", "base"), ("ffno", "norm-inc"), ("amgfno", "base"), ("amgfno", "norm-inc"),
                  ("s4ffno", "base"), ("s4ffno", "norm-inc"), ("ffno", "base@lpsda5"), ("amgfno", "base@lpsda5"),
                  *(("ffno", v) for v in ("norm", "inc", "lastblock", "ff", "ff-norm-inc", "base@lpsda")))
PRECISIONS = ("fp32", "tf32", "bf16")
HEADLINE_MODELS = ("amgfno", "s4ffno", "ffno")  # issue 21's order: the memory models' cells first


def fidelity_variant(spec: RunSpec) -> str | None:
    """The docs/fidelity.md variant name of a run's overrides and reading (None: not one of them)."""
    overrides = dict(spec.overrides)
    return next((name for name, (o, reading) in FIDELITY_VARIANTS.items()
                 if o == overrides and reading == spec.reading), None)


def _variant_run(model: str, variant: str, omega) -> RunSpec:
    overrides, reading = FIDELITY_VARIANTS[variant]
    base = _amgfno("ks", 0.1, 32, omega if reading is None else (lambda *k: None)) if model == "amgfno" \
        else RunSpec(model, "ks", 0.1, 32)
    return dataclasses.replace(base, overrides=overrides, reading=reading)


def _headline(omega):
    """Issue 21's runs in its order: (a) AMGFNO and S4FFNO, (b) FFNO, on KS nu = 0.1 at f = 32 with the
    raw parametrisation (the default until 2026-12-01) and --normalize --increment; (c) the three at
    f = 128 and (d) on Burgers f = 32, with the defaults (--normalize --increment since 2026-12-01)."""
    def run(model, pde, nu, res, overrides=None):
        spec = _amgfno(pde, nu, res, omega) if model == "amgfno" else RunSpec(model, pde, nu, res)
        return dataclasses.replace(spec, overrides=overrides or {})
    pairs = [run(m, "ks", 0.1, 32, o) for m in HEADLINE_MODELS for o in (RAW_OUTPUT, NORM_INC)]
    return pairs + [run(m, "ks", 0.1, 128) for m in HEADLINE_MODELS] + \
        [run(m, "burgers", BURGERS_NU, 32) for m in HEADLINE_MODELS]


def _headline_stage(spec: RunSpec) -> int:
    """0: (a) the memory models' pairs; 1: (b) FFNO's; 2: (c) f = 128 and (d) Burgers, first seed only."""
    return 2 if (spec.res, spec.pde) != (32, "ks") else 1 if spec.model == "ffno" else 0


register(Experiment("headline", "The headline comparison (issue 21): AMGFNO and S4FFNO, then FFNO, on KS nu = 0.1, "
                    "f = 32, raw and --normalize --increment, seed by seed; then the three at f = 128 and "
                    "on Burgers f = 32 (defaults, first seed); AMGFNO vs S4FFNO reduction", _headline,
                    stage=_headline_stage, first_seed_only=lambda spec: _headline_stage(spec) == 2))
register(Experiment("fidelity", "docs/fidelity.md's variants on KS nu = 0.1, f = 32: output parametrisation "
                    "(normalize, increment), fourierflow's options, the S4FFNO authors' data readings; one-step "
                    "error, amplitude, train vs test",
                    lambda omega: [_variant_run(model, variant, omega) for model, variant in _FIDELITY_RUNS]))
register(Experiment("precision", "AMGFNO on KS nu = 0.1, f = 32 in fp32 / tf32 / bf16 (--precision), seed by seed, "
                    "raw parametrisation (as its runs of 2026-11-29 trained); the GPU campaign runs it with "
                    "--preset quick",
                    lambda omega: [dataclasses.replace(_amgfno("ks", 0.1, 32, omega),
                                                       overrides={"precision": p, **RAW_OUTPUT})
                                   for p in PRECISIONS],
                    stage=lambda spec: 0))  # one stage: the three modes of a seed together, a session may stop


# -- 2D Navier-Stokes (issue 22) ----------------------------------------------------------------------
NS2D_NUS = (1e-4, 1e-3)  # 1e-4 first: where the observation misses the most (docs/data.md)
NS2D_RESOLUTIONS = (8, 16, 32, 64)  # 8, 16: low resolutions, where more of the energy is unobserved
NS2D_MODELS = ("amgfno2d", "s4ffno2d", "ffno2d")  # AMGFNO2d first: its runs answer the gate question


register(Experiment("ns2d", "2D Navier-Stokes (issue 22): FFNO2d, S4FFNO2d and AMGFNO2d at f = 8, 16, 32 and 64, nu = 1e-4 "
                    "and 1e-3; nRMSE per model and f, AMGFNO2d's g-bar vs f: does the gate open at low resolution?",
                    lambda omega: [RunSpec(model, "ns2d", nu, res) for model in NS2D_MODELS for nu in NS2D_NUS
                                   for res in NS2D_RESOLUTIONS]))


# -- your own grid ----------------------------------------------------------------------------------
GRID_KEYS = ("model", "pde", "nu", "res", "fusion", "alpha", "variant", "omega", "reading") + OVERRIDABLE


def grid_experiment(axes: dict[str, list]) -> Experiment:
    """An (unregistered) experiment of every combination of the axes' values, the first axis varying
    slowest: {"model": ["amgfno", "s4ffno"], "lr": [1e-3, 3e-4]} -> 4 runs. Keys: RunSpec fields
    and TrainConfig settings (GRID_KEYS); unset: model amgfno (amgfno2d for pde ns2d), pde ks, nu the pde's
    default, res 32."""
    from amg_fast.train.config import DEFAULT_NU

    if not axes:
        raise ValueError("a grid needs at least one axis KEY=V1,V2,...")
    for key, values in axes.items():
        if key not in GRID_KEYS:
            raise ValueError(f"grid: unknown key {key!r}" + (" (give seeds with --seeds)" if key == "seed" else "")
                             + f"; keys: {', '.join(GRID_KEYS)}")
        if not values:
            raise ValueError(f"grid: axis {key!r} has no values")
    spec_keys = {"model", "pde", "nu", "res", "fusion", "alpha", "variant", "omega", "reading"}

    def build(_omega):
        specs = []
        for combo in itertools.product(*axes.values()):
            point = dict(zip(axes, combo))
            fields = {k: v for k, v in point.items() if k in spec_keys}
            pde = fields.setdefault("pde", "ks")
            fields.setdefault("nu", DEFAULT_NU.get(pde))
            fields.setdefault("model", "amgfno2d" if pde == "ns2d" else "amgfno")
            fields.setdefault("res", 32)
            specs.append(RunSpec(**fields, overrides={k: v for k, v in point.items() if k not in spec_keys}))
        return specs
    label = " x ".join(f"{k} ({len(v)})" for k, v in axes.items())
    return Experiment("grid", f"your grid: {label}", build)
