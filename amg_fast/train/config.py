"""Training configuration: one dataclass, two presets (quick, paper), validation."""
from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from amg_fast._checks import ArgumentError, check_device, check_seed, flag
from amg_fast.data.generate import PDES, SPATIAL_DIMS
from amg_fast.layers import FUSIONS
from amg_fast.models import MODELS, available_models
from amg_fast.models.base import DECODER_INPUTS, FFNOBackbone
from amg_fast.models.memory import AMGFNO1d, S4FFNO1d
from amg_fast.train.precision import PRECISIONS, check_precision

__all__ = ["TrainConfig", "PRESETS", "OUTPUT_DEFAULTS", "LEGACY_DEFAULTS", "output_default", "output_parametrisation",
           "resolve_config", "default_cache_dir", "check_device", "setting"]

OMEGA_MODES = ("fixed", "batch")
FFNO_FAMILY = tuple(name for name, cls in MODELS.items() if issubclass(cls, FFNOBackbone))  # take the backbone options
S4FFNO_FAMILY = tuple(name for name, cls in MODELS.items() if issubclass(cls, S4FFNO1d))  # s4ffno, s4ffno2d
AMGFNO_FAMILY = tuple(name for name, cls in MODELS.items() if issubclass(cls, AMGFNO1d))  # amgfno, amgfno2d


def default_cache_dir() -> str:
    """Where generated data sets are cached: $AMG_FAST_CACHE, else ~/.cache/amg_fast."""
    return os.environ.get("AMG_FAST_CACHE", str(Path.home() / ".cache" / "amg_fast"))


def setting(default=None, help: str = "", *, choices=None, default_factory=None, group: str | None = None):
    """A TrainConfig field with what its command-line flag needs: help text, allowed choices (a
    sequence, or a callable returning one) and the argparse group. scripts/train.py builds every
    flag from these (amg_fast.cli.train), so each default lives here only."""
    metadata = {"help": help, "choices": choices, "group": group}
    if default_factory is not None:
        return field(default_factory=default_factory, metadata=metadata)
    return field(default=default, metadata=metadata)


FIDELITY = "fidelity options (docs/fidelity.md; off by default but --normalize --increment on ks and burgers)"
NS2D = "2D Navier-Stokes data (--pde ns2d; docs/data.md)"
RETIRED_SETTINGS = {"num_workers"}  # fields of older config.json / checkpoints, no longer used
# What a setting missing from an older config.json meant when that file was written: the output
# parametrisation was off until 2026-12-01 (its default since comes from the preset).
LEGACY_DEFAULTS = {"normalize": False, "increment": False}


@dataclass
class TrainConfig:
    """Every setting of a run. None means "the preset's value" (see PRESETS and resolve_config)."""

    model: str = setting("amgfno", "model to train", choices=lambda: available_models())
    pde: str = setting("ks", "data set: ks, burgers (1D models) or ns2d (2D Navier-Stokes vorticity: the 2D models "
                             "ffno2d, s4ffno2d, amgfno2d)", choices=PDES)
    nu: float | None = setting(None, "viscosity: KS 0.075/0.1/0.125 (default 0.1); Burgers file Nu (default 0.001); "
                                     "ns2d 1e-3 or 1e-4 (default 1e-3)")
    res: int = setting(32, "observation resolution f")
    data: str | None = setting(None, "an HDF5 data file (PDEBench, LPSDA or amg_fast layout); default: generate "
                                     "into --cache-dir, reused across runs")
    field: str | None = setting(None, "the field to train on of a PDEBench CFD --data file with several (density, "
                                      "pressure, Vx, Vy, Vz); default: the file's only one")
    cache_dir: str = setting(help="where generated data sets are kept (default $AMG_FAST_CACHE or ~/.cache/amg_fast)",
                             default_factory=default_cache_dir)
    regenerate: bool = setting(False, "generate the data set again even when --cache-dir holds it, replacing the "
                                      "file (one that a reader refused, say); not with --data")
    n_train: int | None = setting(None, "training trajectories (quick 256, paper 2048; ns2d: quick 16, paper 1000)")
    n_test: int | None = setting(None, "test trajectories (quick 32, paper: KS 256, Burgers 1000; ns2d: "
                                       "quick 4, paper 200)")
    epochs: int | None = setting(None, "epochs (quick 40, paper 200; ns2d: quick 20, paper 200)")
    batch_size: int | None = setting(None, "global batch size (quick 16, paper 32 KS / 64 Burgers; ns2d: quick 8, "
                                           "paper 16)")
    lr: float = setting(1e-3, "Adam learning rate, cosine-annealed")
    weight_decay: float = setting(0.0, "weight decay except S4D A and dt")
    width: int | None = setting(None, "hidden channels H (quick 64, paper 128; ns2d: quick 24, paper 64)")
    modes: int | None = setting(None, "Fourier modes K (default f//2)")
    seed: int = setting(0, "seed for data, initialisation and data order, in [0, 2^32)")
    data_seed: int | None = setting(None, "seed of the generated data set instead of --seed (runs of several seeds on "
                                          "one data set), in [0, 2^32)")
    out: str | None = setting(None, "run directory (default runs/<model>_<pde>_nu<nu>_f<res>_seed<seed>)")
    device: str = setting("auto", "cpu, cuda, cuda:N or auto (cuda when available)")
    preset: str = setting("quick", "defaults for unset flags", choices=lambda: tuple(PRESETS))
    fast_kernels: bool = setting(False, "run the ops' Triton kernels (falls back, saying so, where they cannot run)")
    cuda_graph: bool = setting(False, "capture each training step (forward, backward, Adam) in a CUDA graph and "
                                      "replay it: one launch per step instead of hundreds (CUDA, one process)")
    precision: str = setting("fp32", "fp32: fp32 GEMMs and fp32-accurate Triton dots; tf32: TF32 tensor-core GEMMs "
                                     "and dots; bf16: forward and loss under bf16 autocast, fp32 master weights and "
                                     "Adam (evaluation in the same mode)", choices=lambda: PRECISIONS)
    resume: bool = setting(False, "continue the run in --out from its last checkpoint")
    eval_every: int = setting(5, "test nRMSE every N epochs")
    eval_batch_size: int | None = setting(None, "trajectories per evaluation rollout batch (default: the whole "
                                                "test split at once)")
    checkpoint_every: int | None = setting(None, "write checkpoint.pt every N epochs and after the last (default: "
                                                "the preset's, quick 1, paper 10); --resume restarts from the last one "
                                                "written")
    alpha: float | None = setting(None, "s4ffno: fixed memory weight for --fusion convex/additive")
    fusion: str = setting("residual", "s4ffno: memory fusion", choices=FUSIONS)
    no_freq_gate: bool = setting(False, "amgfno: drop the frequency-aware gate (ablation)")
    omega_mode: str = setting("fixed", "amgfno: omega_f fixed from the training set or per batch (ablation)",
                              choices=OMEGA_MODES)
    omega: float | None = setting(None, "amgfno: the fixed omega_f of the frequency gate instead of the training "
                                        "data's (e.g. the paper's value)")
    # Fidelity options (docs/fidelity.md). Model (FFNO family, off by default): fourierflow's shared
    # spectral weights, weight-normalised Linears, decoder input. Training (the output parametrisation,
    # the preset's: OUTPUT_DEFAULTS): per-channel input/output normalisation from the training split,
    # and predicting u_{t+1} - u_t.
    share_weights: bool = setting(False, "FFNO family: one spectral weight shared by all blocks (fourierflow "
                                         "share_weight)", group=FIDELITY)
    weight_norm: bool = setting(False, "FFNO family: weight-normalised encoder, feed-forward and decoder Linears "
                                       "(fourierflow ff_weight_norm)", group=FIDELITY)
    decoder_input: str = setting("stream", "FFNO family: decode the residual stream after the last block (stream) "
                                           "or the last block's feed-forward output alone (last_block, as "
                                           "fourierflow)", choices=DECODER_INPUTS, group=FIDELITY)
    normalize: bool | None = setting(None, "normalise inputs and outputs per channel with the training split's mean "
                                            "and std (default: the preset's, on for ks and burgers, off for ns2d; "
                                            "--no-normalize --no-increment: the raw parametrisation, the default "
                                            "before 2026-12-01)", group=FIDELITY)
    increment: bool | None = setting(None, "the network predicts u_{t+1} - u_t (added to u_t); the loss stays on "
                                           "u_{t+1} (default: the preset's, on for ks and burgers, off for ns2d)",
                                     group=FIDELITY)
    # The generated 2D Navier-Stokes data set (amg_fast.data.generate.NS2D_OPTIONS); --pde ns2d only.
    ns_grid: int | None = setting(None, "the solver's grid points per axis (quick 64, paper 256, FNO's); the data are "
                                        "stored at min(grid, 128) per axis", group=NS2D)
    ns_t_end: float | None = setting(None, "last frame time (default FNO's T: 50 at nu = 1e-3, 30 at nu = 1e-4)",
                                     group=NS2D)
    ns_frames: int | None = setting(None, "frames per trajectory, evenly spaced over [0, T] (quick 11; paper: one per "
                                          "time unit, FNO's)", group=NS2D)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> "TrainConfig":
        """A config from to_dict()'s output, also of an older version: retired settings are
        dropped, settings added since take their defaults (LEGACY_DEFAULTS: what they meant then);
        an unknown key is a ValueError."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(values) - names - RETIRED_SETTINGS
        if unknown:
            raise ValueError(f"unknown training settings {sorted(unknown)}; known: {sorted(names)}")
        return cls(**{**LEGACY_DEFAULTS, **{k: v for k, v in values.items() if k in names}})


# The quick preset fits the <= 5 minute CPU budget; the paper preset is the paper's protocol
# (appendix "Training Details"): 2048 trajectories, 200 epochs, Adam 1e-3 + cosine, batch 32 / 64; tested on
# KS's 256 trajectories and on Burgers' 1000: "10% of the full dataset", PDEBench's 10,000-trajectory file
# (as the test split of that file is, which --data reads; generated data's default is 10% of train + test,
# 228 for 2048, default_n_test). The paper
# preset checkpoints every 10 epochs: on the H200 (2026-11-27, results/headline) a checkpoint every epoch
# took 13.9 s of a 113 s run (70 ms each: model, Adam state, history), and a run stopped at a GPU session's
# budget loses at most 10 epochs (~4 s at f = 32 there) when it resumes.
#
# The output parametrisation (--normalize --increment) is on for the 1D PDEs since 2026-12-01: on KS nu = 0.1,
# f = 32 at the paper preset it lowered the mean rollout nRMSE of FFNO, S4FFNO and AMGFNO by 9%, 43% and 43%,
# each by more than the seed spread (issue 21's rule; results/headline, 3 seeds, H200). ns2d keeps it off
# (never compared there; results/cpu/ns2d trained without it).
OUTPUT_DEFAULTS = {"normalize": True, "increment": True}
PRESETS = {
    "quick": {"n_train": 256, "n_test": 32, "epochs": 40, "batch_size": 16, "width": 64, "checkpoint_every": 1,
              **OUTPUT_DEFAULTS},
    "paper": {"n_train": 2048, "n_test": {"ks": None, "burgers": 1000}, "epochs": 200,
              "batch_size": {"ks": 32, "burgers": 64}, "width": 128, "checkpoint_every": 10, **OUTPUT_DEFAULTS},
}
# What a PDE's presets set differently (and its own settings). ns2d quick: a 64 x 64 solver grid, 11
# frames, 16 small trajectories: about 5 minutes on a 2-core CPU at f = 32, 3.5 of them generating the
# data (once per cache; docs/training.md). ns2d
# paper: FNO's data (256 x 256 solver, one frame per time unit, 1000 train / 200 test) with a width
# whose 4H hidden at f = 64, T = 50 fits one GPU.
PDE_PRESETS = {
    "ns2d": {
        "quick": {"n_train": 16, "n_test": 4, "epochs": 20, "batch_size": 8, "width": 24, "ns_grid": 64,
                  "ns_frames": 11, **LEGACY_DEFAULTS},
        "paper": {"n_train": 1000, "n_test": 200, "epochs": 200, "batch_size": 16, "width": 64, "ns_grid": 256,
                  **LEGACY_DEFAULTS},
    },
}
DEFAULT_NU = {"ks": 0.1, "burgers": 0.001, "ns2d": 1e-3}


def output_parametrisation(cfg: TrainConfig) -> str:
    """A resolved config's output parametrisation in words, as its flags: "--normalize --increment", "raw
    (--no-normalize --no-increment)" or the one of them that is on."""
    flags = [f"--{k}" for k in OUTPUT_DEFAULTS if getattr(cfg, k)]
    return " ".join(flags) if flags else "raw (--no-normalize --no-increment)"


def output_default(pde: str, key: str) -> bool:
    """A PDE's default normalize or increment (the paper preset's, as every preset's): True on ks and burgers
    since 2026-12-01 (OUTPUT_DEFAULTS), False on ns2d."""
    return {**PRESETS["paper"], **PDE_PRESETS.get(pde, {}).get("paper", {})}[key]
NS2D_SETTINGS = ("ns_grid", "ns_t_end", "ns_frames")  # --pde ns2d only


def _positive(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ArgumentError(f"{name} must be an integer >= 1, got {value!r}", name)


def _finite(name: str, value, *, low: float, strict: bool) -> None:
    """Require a finite real number > low (strict) or >= low."""
    ok = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
    if not ok or value < low or (strict and value == low):
        raise ArgumentError(f"{name} must be a finite number {'>' if strict else '>='} {low:g}, got {value!r}", name)


def _check_model_fits_pde(model: str, pde: str) -> None:
    """A model on a 1D grid trains on 1D data (ks, burgers), a 2D model on ns2d: a ValueError naming both."""
    model_dims, pde_dims = MODELS[model].spatial_dims, SPATIAL_DIMS[pde]
    if model_dims != pde_dims:
        fitting = [name for name in available_models() if MODELS[name].spatial_dims == pde_dims]
        others = [name for name, dims in SPATIAL_DIMS.items() if dims == model_dims]
        raise ValueError(f"--model {model} is a {model_dims}D model ({'[B, T, S, C]' if model_dims == 1 else '[B, T, X, Y, C]'}) "
                         f"and --pde {pde} is {pde_dims}D data: train --pde {pde} with a {pde_dims}D model "
                         f"({', '.join(fitting)}), or --model {model} on --pde {' / '.join(others)}")


def resolve_config(cfg: TrainConfig) -> TrainConfig:
    """Fill preset values into the None fields and check every setting; returns a new config."""
    if cfg.preset not in PRESETS:
        raise ValueError(f"preset must be one of {tuple(PRESETS)}, got {cfg.preset!r}")
    if cfg.pde not in DEFAULT_NU:
        raise ValueError(f"pde must be one of {tuple(DEFAULT_NU)}, got {cfg.pde!r}")
    if cfg.model not in available_models():
        raise ValueError(f"unknown model {cfg.model!r}; available: {', '.join(available_models())}")
    _check_model_fits_pde(cfg.model, cfg.pde)
    if cfg.pde != "ns2d":
        given = [flag(k) for k in NS2D_SETTINGS if getattr(cfg, k) is not None]
        if given:
            raise ValueError(f"{', '.join(given)}: settings of the generated 2D Navier-Stokes data, for --pde ns2d "
                             f"only; got --pde {cfg.pde}")
    if cfg.data is not None:  # the generator's settings would be ignored: refused, and no preset fills them
        given = [(flag(k), getattr(cfg, k)) for k in NS2D_SETTINGS if getattr(cfg, k) is not None]
        if given:
            raise ValueError(f"{', '.join(f'{option} {value}' for option, value in given)}: "
                             f"{'a setting' if len(given) == 1 else 'settings'} of the generated 2D Navier-Stokes data "
                             f"set; --data {cfg.data} is used as it is (drop {', '.join(option for option, _ in given)}, or "
                             "drop --data to generate the data set)")
    values = cfg.to_dict()
    for key, value in {**PRESETS[cfg.preset], **PDE_PRESETS.get(cfg.pde, {}).get(cfg.preset, {})}.items():
        if cfg.data is not None and key in NS2D_SETTINGS:
            continue
        if values[key] is None:
            values[key] = value[cfg.pde] if isinstance(value, dict) else value
    values["nu"] = DEFAULT_NU[cfg.pde] if cfg.nu is None else cfg.nu
    _positive("res", values["res"])  # before the default modes are derived from it
    if getattr(MODELS[cfg.model], "uses_modes", True):
        if values["modes"] is None and values["res"] < 2:
            raise ValueError(f"--res {values['res']}: too coarse for --model {cfg.model}, whose default --modes "
                             f"res//2 = {values['res'] // 2} keeps no Fourier mode; allowed: --res >= 2")
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
    if out.modes is not None and out.modes > out.res // 2 + 1:
        raise ArgumentError(f"modes must be <= res//2 + 1 = {out.res // 2 + 1} (the rfft of --res {out.res} has that "
                            f"many), got {out.modes}", "modes")
    check_seed("seed", out.seed)
    if out.data_seed is not None:
        check_seed("data_seed", out.data_seed)
    if out.ns_grid is not None and (isinstance(out.ns_grid, bool) or not isinstance(out.ns_grid, int)
                                    or out.ns_grid < 8 or out.ns_grid % 2):
        raise ArgumentError(f"ns_grid (the 2D solver's points per axis) must be an even integer >= 8, "
                            f"got {out.ns_grid!r}", "ns_grid")
    if out.ns_frames is not None and (isinstance(out.ns_frames, bool) or not isinstance(out.ns_frames, int)
                                      or out.ns_frames < 2):
        raise ArgumentError(f"ns_frames must be an integer >= 2 (a state and the next one), got {out.ns_frames!r}",
                            "ns_frames")
    if out.ns_t_end is not None:
        _finite("ns_t_end", out.ns_t_end, low=0.0, strict=True)
    check_precision(out.precision)
    check_device(out.device)
    if out.field is not None and (out.data is None or not isinstance(out.field, str)):
        raise ValueError(f"--field {out.field!r}: picks a field of a PDEBench CFD --data file; "
                         + ("the generated data sets hold one field (drop --field, or pass --data)" if out.data is None
                            else "allowed: a field's name (density, pressure, Vx, Vy, Vz)"))
    if out.regenerate and out.data is not None:
        raise ValueError(f"--regenerate replaces a generated data set in --cache-dir; --data {out.data} names a file "
                         "of your own, which is never rewritten")
    if out.regenerate and out.resume:
        raise ValueError("--regenerate with --resume: a resumed run must keep the data it started on; regenerate "
                         "for a new run (another --out)")
    _finite("nu", out.nu, low=0.0, strict=True)
    _finite("lr", out.lr, low=0.0, strict=True)
    _finite("weight_decay", out.weight_decay, low=0.0, strict=False)
    if out.omega_mode not in OMEGA_MODES:
        raise ValueError(f"omega_mode must be one of {OMEGA_MODES}, got {out.omega_mode!r}")
    if out.fusion not in FUSIONS:
        raise ValueError(f"fusion must be one of {FUSIONS}, got {out.fusion!r}")
    model_specific = {"alpha": out.alpha is not None, "fusion": out.fusion != "residual"}
    for name, used in model_specific.items():
        if used and out.model not in S4FFNO_FAMILY:
            raise ValueError(f"{flag(name)} applies to --model {' / '.join(S4FFNO_FAMILY)} only, got --model {out.model}")
    if out.omega is not None:
        if out.model not in AMGFNO_FAMILY or out.omega_mode != "fixed" or out.no_freq_gate:
            raise ValueError(f"--omega (a fixed omega_f instead of the data's) applies to --model "
                             f"{' / '.join(AMGFNO_FAMILY)} with the "
                             f"frequency gate and --omega-mode fixed, got --model {out.model}"
                             + (" --omega-mode batch" if out.omega_mode != "fixed" else "")
                             + (" --no-freq-gate" if out.no_freq_gate else ""))
        if isinstance(out.omega, bool) or not isinstance(out.omega, (int, float)) or not 0 <= out.omega < float("inf"):
            raise ArgumentError(f"omega must be a finite number >= 0 (an unresolved-energy ratio), got {out.omega!r}",
                                "omega")
    if (out.no_freq_gate or out.omega_mode != "fixed") and out.model not in AMGFNO_FAMILY:
        raise ValueError(f"--no-freq-gate and --omega-mode apply to --model {' / '.join(AMGFNO_FAMILY)} only, got "
                         f"--model {out.model}")
    if out.decoder_input not in DECODER_INPUTS:
        raise ValueError(f"decoder_input must be one of {DECODER_INPUTS}, got {out.decoder_input!r}")
    backbone_settings = {"share_weights": out.share_weights, "weight_norm": out.weight_norm,
                         "decoder_input": out.decoder_input != "stream"}
    for name, used in backbone_settings.items():
        if used and out.model not in FFNO_FAMILY:
            raise ValueError(f"{flag(name)} applies to the FFNO family ({', '.join(FFNO_FAMILY)}), got --model {out.model}")
    if out.no_freq_gate and out.omega_mode != "fixed":
        raise ValueError("--omega-mode batch needs the frequency gate; it cannot be combined with --no-freq-gate")
    return out
