"""Training configuration: one dataclass, two presets (quick, paper), validation."""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path

from amg_fast.layers import FUSIONS
from amg_fast.models import MODELS, available_models
from amg_fast.models.base import DECODER_INPUTS
from amg_fast.train.precision import check_precision

__all__ = ["TrainConfig", "PRESETS", "resolve_config", "default_cache_dir"]

OMEGA_MODES = ("fixed", "batch")
FFNO_FAMILY = ("ffno", "multi_input_ffno", "s4ffno", "amgfno")  # models built on FFNOBackbone


def default_cache_dir() -> str:
    """Where generated data sets are cached: $AMG_FAST_CACHE, else ~/.cache/amg_fast."""
    return os.environ.get("AMG_FAST_CACHE", str(Path.home() / ".cache" / "amg_fast"))


@dataclass
class TrainConfig:
    """Every setting of a run. None means "the preset's value" (see PRESETS and resolve_config)."""

    model: str = "amgfno"
    pde: str = "ks"
    nu: float | None = None
    res: int = 32
    data: str | None = None
    cache_dir: str = field(default_factory=default_cache_dir)
    n_train: int | None = None
    n_test: int | None = None
    epochs: int | None = None
    batch_size: int | None = None
    lr: float = 1e-3
    weight_decay: float = 0.0
    width: int | None = None
    modes: int | None = None
    seed: int = 0
    out: str | None = None
    device: str = "auto"
    preset: str = "quick"
    fast_kernels: bool = False
    cuda_graph: bool = False
    precision: str = "fp32"
    resume: bool = False
    eval_every: int = 5
    eval_batch_size: int | None = None
    checkpoint_every: int = 1
    num_workers: int = 0
    alpha: float | None = None
    fusion: str = "residual"
    no_freq_gate: bool = False
    omega_mode: str = "fixed"
    omega: float | None = None
    # Fidelity options (docs/fidelity.md), all off by default. Model (FFNO family): fourierflow's
    # shared spectral weights, weight-normalised Linears, decoder input. Training: per-channel
    # input/output normalisation from the training split, and predicting u_{t+1} - u_t.
    share_weights: bool = False
    weight_norm: bool = False
    decoder_input: str = "stream"
    normalize: bool = False
    increment: bool = False

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


# The quick preset fits the <= 5 minute CPU budget; the paper preset is the paper's protocol
# (appendix "Training Details"): 2048 trajectories, 200 epochs, Adam 1e-3 + cosine, batch 32 / 64.
PRESETS = {
    "quick": {"n_train": 256, "n_test": 32, "epochs": 40, "batch_size": 16, "width": 64},
    "paper": {"n_train": 2048, "n_test": None, "epochs": 200, "batch_size": {"ks": 32, "burgers": 64}, "width": 128},
}
DEFAULT_NU = {"ks": 0.1, "burgers": 0.001}


def _positive(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")


def resolve_config(cfg: TrainConfig) -> TrainConfig:
    """Fill preset values into the None fields and check every setting; returns a new config."""
    if cfg.preset not in PRESETS:
        raise ValueError(f"preset must be one of {tuple(PRESETS)}, got {cfg.preset!r}")
    if cfg.pde not in DEFAULT_NU:
        raise ValueError(f"pde must be one of {tuple(DEFAULT_NU)}, got {cfg.pde!r}")
    if cfg.model not in available_models():
        raise ValueError(f"unknown model {cfg.model!r}; available: {', '.join(available_models())}")
    values = cfg.to_dict()
    for key, value in PRESETS[cfg.preset].items():
        if values[key] is None:
            values[key] = value[cfg.pde] if isinstance(value, dict) else value
    values["nu"] = DEFAULT_NU[cfg.pde] if cfg.nu is None else cfg.nu
    if getattr(MODELS[cfg.model], "uses_modes", True):
        values["modes"] = values["modes"] if values["modes"] is not None else values["res"] // 2
    elif values["modes"] is not None:
        raise ValueError(f"--modes applies to models with Fourier layers; --model {cfg.model} has none "
                         f"(got --modes {values['modes']})")
    out = TrainConfig(**values)
    for name in ("res", "n_train", "epochs", "batch_size", "width", "eval_every", "checkpoint_every"):
        _positive(name, getattr(out, name))
    for name in ("modes", "n_test", "eval_batch_size"):
        if getattr(out, name) is not None:
            _positive(name, getattr(out, name))
    check_precision(out.precision)
    if not out.nu > 0:
        raise ValueError(f"nu must be > 0, got {out.nu}")
    if not out.lr > 0 or out.weight_decay < 0:
        raise ValueError(f"need lr > 0 and weight_decay >= 0, got lr={out.lr}, weight_decay={out.weight_decay}")
    if out.omega_mode not in OMEGA_MODES:
        raise ValueError(f"omega_mode must be one of {OMEGA_MODES}, got {out.omega_mode!r}")
    if out.fusion not in FUSIONS:
        raise ValueError(f"fusion must be one of {FUSIONS}, got {out.fusion!r}")
    model_specific = {"alpha": out.alpha is not None, "fusion": out.fusion != "residual"}
    for flag, used in model_specific.items():
        if used and out.model != "s4ffno":
            raise ValueError(f"--{flag} applies to --model s4ffno only, got --model {out.model}")
    if out.omega is not None:
        if out.model != "amgfno" or out.omega_mode != "fixed" or out.no_freq_gate:
            raise ValueError("--omega (a fixed omega_f instead of the data's) applies to --model amgfno with the "
                             f"frequency gate and --omega-mode fixed, got --model {out.model}"
                             + (" --omega-mode batch" if out.omega_mode != "fixed" else "")
                             + (" --no-freq-gate" if out.no_freq_gate else ""))
        if isinstance(out.omega, bool) or not isinstance(out.omega, (int, float)) or not 0 <= out.omega < float("inf"):
            raise ValueError(f"omega must be a finite number >= 0 (an unresolved-energy ratio), got {out.omega!r}")
    if (out.no_freq_gate or out.omega_mode != "fixed") and out.model != "amgfno":
        raise ValueError(f"--no-freq-gate and --omega-mode apply to --model amgfno only, got --model {out.model}")
    if out.decoder_input not in DECODER_INPUTS:
        raise ValueError(f"decoder_input must be one of {DECODER_INPUTS}, got {out.decoder_input!r}")
    backbone_flags = {"share-weights": out.share_weights, "weight-norm": out.weight_norm,
                      "decoder-input": out.decoder_input != "stream"}
    for flag, used in backbone_flags.items():
        if used and out.model not in FFNO_FAMILY:
            raise ValueError(f"--{flag} applies to the FFNO family ({', '.join(FFNO_FAMILY)}), got --model {out.model}")
    if out.no_freq_gate and out.omega_mode != "fixed":
        raise ValueError("--omega-mode batch needs the frequency gate; it cannot be combined with --no-freq-gate")
    return out
