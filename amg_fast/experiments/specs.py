"""Runs as data: RunSpec (one training run, before a preset fills in its scale) and the presets.

A RunSpec names what a run is (model, PDE, viscosity, resolution, seed and the model-specific
settings); a preset says how large it is (trajectories, epochs, width). Two experiments that need
the same run produce equal RunSpecs, which share one run directory (`RunSpec.name`).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from amg_fast.train.config import TrainConfig

__all__ = ["RunSpec", "PRESETS", "FILTER_KEYS", "check_preset"]

# Scale of a sweep. "paper" is train.py's paper preset; "cpu" keeps the headline experiments,
# filtered to a few settings, well under an hour on a 2-core CPU; "smoke" is seconds per run.
PRESETS = {
    "paper": {"preset": "paper"},
    "cpu": {"preset": "quick", "n_train": 128, "n_test": 32, "epochs": 20, "width": 32, "batch_size": 16,
            "eval_every": 5},
    "smoke": {"preset": "quick", "n_train": 8, "n_test": 4, "epochs": 2, "width": 8, "batch_size": 4,
              "eval_every": 1},
}

# RunSpec fields a sweep can be filtered on (reproduce.py --where KEY=V1,V2).
FILTER_KEYS = ("model", "pde", "nu", "res", "alpha", "fusion", "seed")


def check_preset(preset: str) -> str:
    if preset not in PRESETS:
        raise ValueError(f"preset must be one of {tuple(PRESETS)}, got {preset!r}")
    return preset


@dataclass(frozen=True, order=True)
class RunSpec:
    """One run: the settings that define it. variant: None (the model as is), "no-freq-gate" or
    "omega-batch" (AMGFNO ablations). omega: a fixed omega_f instead of the data's (None: data)."""

    model: str
    pde: str
    nu: float
    res: int
    seed: int = 0
    fusion: str = "residual"
    alpha: float | None = None
    variant: str | None = None
    omega: float | None = None

    @property
    def name(self) -> str:
        """Readable and unique: amgfno_ks_nu0.1_f32_seed0, s4ffno-convex-a0.25_ks_..., ..."""
        model = self.model
        if self.fusion != "residual":
            model += f"-{self.fusion}-a{self.alpha:g}"
        if self.variant:
            model += f"-{self.variant}"
        if self.omega is not None:
            model += f"-omega{self.omega:g}"
        return f"{model}_{self.pde}_nu{self.nu:g}_f{self.res}_seed{self.seed}"

    def get(self, key: str):
        """The value of a filter key (None where the run has no such setting)."""
        value = getattr(self, key)
        return None if key == "alpha" and self.fusion == "residual" else value

    def train_config(self, preset: str, out: str, cache_dir: str, device: str = "auto",
                     fast_kernels: bool = False, cuda_graph: bool = False) -> TrainConfig:
        """The TrainConfig of this run at a sweep preset (resolve_config fills the rest)."""
        extra = dict(PRESETS[check_preset(preset)])
        return TrainConfig(model=self.model, pde=self.pde, nu=self.nu, res=self.res, seed=self.seed,
                           fusion=self.fusion, alpha=self.alpha, no_freq_gate=self.variant == "no-freq-gate",
                           omega_mode="batch" if self.variant == "omega-batch" else "fixed", omega=self.omega,
                           out=out, cache_dir=cache_dir, device=device, fast_kernels=fast_kernels,
                           cuda_graph=cuda_graph, **extra)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)
