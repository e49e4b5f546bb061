"""Runs as data: RunSpec (one training run, before a preset fills in its scale) and the presets.

A RunSpec names what a run is (model, PDE, viscosity, resolution, seed, the model-specific
settings, a KS data reading and any other TrainConfig setting as an override); a preset says how
large it is (trajectories, epochs, width). Two experiments that need the same run produce equal
RunSpecs, which share one run directory (`RunSpec.name`). A spec is canonical: additive fusion
with alpha = 1 is the residual S4FFNO (h + 1 * z) and an override equal to TrainConfig's default
is no override, so each distinct run has one spec and one name.
"""
from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass

from amg_fast.train.config import TrainConfig

__all__ = ["RunSpec", "PRESETS", "PDE_PRESETS", "FILTER_KEYS", "OVERRIDABLE", "SEED_LIMIT", "check_preset", "check_seed",
           "check_overrides", "parse_setting"]

# Scale of a sweep. "paper" is train.py's paper preset and "quick" its quick preset; "cpu" keeps the
# headline experiments, filtered to a few settings, well under an hour on a 2-core CPU; "smoke" is
# seconds per run.
PRESETS = {
    "paper": {"preset": "paper"},
    "quick": {"preset": "quick"},
    "cpu": {"preset": "quick", "n_train": 128, "n_test": 32, "epochs": 20, "width": 32, "batch_size": 16,
            "eval_every": 5},
    "smoke": {"preset": "quick", "n_train": 8, "n_test": 4, "epochs": 2, "width": 8, "batch_size": 4,
              "eval_every": 1},
}
# What a preset sets differently for a PDE, on top of PRESETS (paper and quick: train.py's own per-PDE
# presets, amg_fast.train.config.PDE_PRESETS). ns2d cpu: 16 trajectories of 11 frames solved on a
# 128 x 128 grid (so that f = 64 misses some energy), width 24: 1-4 minutes a run on the 2-core
# development CPU (f = 32 / 64), one data set per viscosity shared by the seeds (data_seed 0: the
# solver takes ~25 s a trajectory there). ns2d smoke: seconds.
PDE_PRESETS = {
    "ns2d": {
        "cpu": {"n_train": 16, "n_test": 4, "epochs": 20, "width": 24, "batch_size": 8, "ns_grid": 128,
                "ns_frames": 11, "data_seed": 0},
        "smoke": {"n_train": 4, "n_test": 2, "epochs": 2, "width": 8, "batch_size": 2, "ns_grid": 64, "ns_t_end": 2.0,
                  "ns_frames": 3, "data_seed": 0},
    },
}

# The RunSpec's own fields (a run's identity), and the TrainConfig settings a sweep sets for all its
# runs (paths, device, kernels: how a run is trained, not what it is; a sweep generates its data, so
# no --data file and no field of one). Every other TrainConfig
# setting can be a run's override.
SPEC_SETTINGS = ("model", "pde", "nu", "res", "seed", "fusion", "alpha", "no_freq_gate", "omega_mode", "omega")
SWEEP_SETTINGS = ("out", "cache_dir", "data", "field", "regenerate", "device", "preset", "fast_kernels", "cuda_graph",
                  "resume")
_FIELDS = {f.name: f for f in dataclasses.fields(TrainConfig)}
OVERRIDABLE = tuple(name for name in _FIELDS if name not in SPEC_SETTINGS + SWEEP_SETTINGS)

# RunSpec fields a sweep can be filtered on (reproduce.py --where KEY=V1,V2), besides the overrides.
FILTER_KEYS = ("model", "pde", "nu", "res", "alpha", "fusion", "seed", "variant", "reading")
VARIANTS = (None, "no-freq-gate", "omega-batch")
SEED_LIMIT = 2 ** 32  # numpy's and torch's seeds: [0, 2^32)
_NAME_SAFE = re.compile(r"^[A-Za-z0-9._-]+$")  # a string value as it enters a run's directory name


def check_preset(preset: str) -> str:
    if preset not in PRESETS:
        raise ValueError(f"preset must be one of {tuple(PRESETS)}, got {preset!r}")
    return preset


def check_seed(seed, what: str = "seed") -> int:
    """A seed is an integer in [0, 2^32) (what numpy and torch take)."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < SEED_LIMIT:
        raise ValueError(f"{what} must be an integer in [0, 2**32), got {seed!r}")
    return seed


def _kind(name: str) -> type:
    """The Python type of a TrainConfig field: bool, int, float or str (None allowed aside)."""
    annotation = str(_FIELDS[name].type)
    return next(t for t in (bool, int, float, str) if t.__name__ in annotation.split(" | "))


def _choices(name: str) -> tuple | None:
    choices = _FIELDS[name].metadata.get("choices")
    return tuple(choices() if callable(choices) else choices) if choices is not None else None


def _check_override(key: str, value):
    """The override's value in its field's type, or a ValueError naming key, value and what is allowed."""
    if key not in _FIELDS:
        raise ValueError(f"unknown training setting {key!r}; settings a run can override: {', '.join(OVERRIDABLE)}")
    if key not in OVERRIDABLE:
        where = ("a field of the run itself (give it as such, e.g. --grid model=...)" if key in SPEC_SETTINGS
                 else "set for the whole sweep by reproduce.py (its own flags)")
        raise ValueError(f"training setting {key!r} cannot be a run's override: it is {where}; "
                         f"overridable: {', '.join(OVERRIDABLE)}")
    kind, choices = _kind(key), _choices(key)
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if type(value) is not kind or (kind is float and not math.isfinite(value)):
        raise ValueError(f"override {key}={value!r}: {key} takes a{'n' if kind is int else ''} "
                         f"{'finite ' if kind is float else ''}{kind.__name__}")
    if choices is not None and value not in choices:
        raise ValueError(f"override {key}={value!r}: allowed values {', '.join(map(str, choices))}")
    if kind is str and not _NAME_SAFE.match(value):
        raise ValueError(f"override {key}={value!r}: a text value may hold letters, digits and . _ - only")
    return value


# Settings a sweep preset sets itself (smoke's eval_every = 1): an override of one of these is kept even
# when it equals TrainConfig's default, since dropping it would leave the preset's value in force.
PRESET_SETTINGS = frozenset(key for values in PRESETS.values() for key in values if key != "preset")


def check_overrides(overrides) -> tuple[tuple[str, object], ...]:
    """dict or (key, value) pairs -> the canonical sorted pairs (values checked against TrainConfig's
    fields; an override equal to TrainConfig's default is dropped: it is no override, unless a
    sweep preset sets that setting)."""
    items = overrides.items() if isinstance(overrides, dict) else overrides
    out = {}
    for key, value in items:
        value = _check_override(key, value)
        if key in out and out[key] != value:
            raise ValueError(f"override {key} given twice, {out[key]!r} and {value!r}")
        out[key] = value
    return tuple(sorted((k, v) for k, v in out.items() if v != _FIELDS[k].default or k in PRESET_SETTINGS))


def parse_setting(key: str, text: str):
    """A command-line value for a TrainConfig setting in its field's type: bool from
    true/false/1/0/yes/no/on/off, int, float or str (checked by _check_override)."""
    kind = _kind(key) if key in _FIELDS else str
    if kind is bool:
        words = {"true": True, "1": True, "yes": True, "on": True, "false": False, "0": False, "no": False,
                 "off": False}
        if text.lower() not in words:
            raise ValueError(f"{key}={text!r}: {key} takes true or false")
        return words[text.lower()]
    if kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            raise ValueError(f"{key}={text!r}: {key} takes a{'n' if kind is int else ''} {kind.__name__}") from None
    return text


def _token(key: str, value) -> str:
    """One override in a run's name: the key for True, key=value otherwise (floats by repr: exact)."""
    if value is True:
        return key
    return f"{key}={str(value).lower() if isinstance(value, bool) else repr(value) if isinstance(value, float) else value}"


def _number(value: float) -> str:
    """A run field (nu, alpha, omega) in its name: short (0.1, 1e-05) where that is exact, else repr,
    so that two different values never share a name (0.1000001 is not 0.1)."""
    short = f"{value:g}"
    return short if float(short) == value else repr(value)


@dataclass(frozen=True)
class RunSpec:
    """One run: the settings that define it. variant: None (the model as is), "no-freq-gate" or
    "omega-batch" (AMGFNO ablations). omega: a fixed omega_f instead of the data's (None: data).
    reading: a named KS data reading (amg_fast.experiments.readings; None: the default data).
    overrides: other TrainConfig settings, {key: value} or pairs (stored canonical, sorted)."""

    model: str
    pde: str
    nu: float
    res: int
    seed: int = 0
    fusion: str = "residual"
    alpha: float | None = None
    variant: str | None = None
    omega: float | None = None
    reading: str | None = None
    overrides: tuple = ()

    def __post_init__(self):
        check_seed(self.seed)
        if self.variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}, got {self.variant!r}")
        if self.fusion == "additive" and self.alpha == 1:  # h + 1 * z is the residual S4FFNO: one run
            object.__setattr__(self, "fusion", "residual")
            object.__setattr__(self, "alpha", None)
        self._check_fusion()
        if self.reading is not None:
            from amg_fast.experiments.readings import check_reading

            check_reading(self.reading, self.pde)
        object.__setattr__(self, "overrides", check_overrides(self.overrides))

    def _check_fusion(self) -> None:
        """fusion residual takes no alpha (it would not enter the name: two runs, one directory);
        convex and additive need one (amg_fast.layers.FixedFusion checks its range)."""
        from amg_fast.layers import FUSIONS, FixedFusion

        if self.fusion not in FUSIONS:
            raise ValueError(f"fusion must be one of {', '.join(FUSIONS)}, got {self.fusion!r}")
        if self.fusion != "residual" and self.alpha is None:
            raise ValueError(f"fusion {self.fusion!r} needs alpha, its fixed memory weight (e.g. --grid fusion="
                             f"{self.fusion} alpha=0.25,0.5); got none")
        if isinstance(self.alpha, bool) or not isinstance(self.alpha, (int, float, type(None))):
            raise ValueError(f"alpha must be a number, got {self.alpha!r}")
        FixedFusion(self.fusion, self.alpha)  # residual with an alpha, convex outside [0, 1], non-finite

    @property
    def name(self) -> str:
        """Readable and unique: amgfno_ks_nu0.1_f32_seed0, s4ffno-convex-a0.25_ks_...,
        amgfno_ks_nu0.1_f32+increment+normalize_seed0, ffno_ks_nu0.1_f32+lr=0.0003+reading=s4ffno-t5_seed1."""
        model = self.model
        if self.fusion != "residual":
            model += f"-{self.fusion}-a{_number(self.alpha)}"
        if self.variant:
            model += f"-{self.variant}"
        if self.omega is not None:
            model += f"-omega{_number(self.omega)}"
        extras = sorted(self.overrides + ((("reading", self.reading),) if self.reading else ()))
        tokens = "".join(f"+{_token(k, v)}" for k, v in extras)
        return f"{model}_{self.pde}_nu{_number(self.nu)}_f{self.res}{tokens}_seed{self.seed}"

    def get(self, key: str):
        """The value of a filter key (None where the run has no such setting); an override key
        gives the run's override, else TrainConfig's default (None: the preset's value); variant and
        reading are "none" for the model as is and the default data."""
        if key in OVERRIDABLE:
            return dict(self.overrides).get(key, _FIELDS[key].default)
        value = getattr(self, key)
        if key in ("variant", "reading"):
            return value or "none"
        return None if key == "alpha" and self.fusion == "residual" else value

    def train_config(self, preset: str, out: str, cache_dir: str, device: str = "auto",
                     fast_kernels: bool = False, cuda_graph: bool = False) -> TrainConfig:
        """The TrainConfig of this run at a sweep preset (resolve_config fills the rest); the
        overrides replace the preset's values (PRESETS, and PDE_PRESETS for the run's PDE)."""
        extra = {**PRESETS[check_preset(preset)], **PDE_PRESETS.get(self.pde, {}).get(preset, {}), **dict(self.overrides)}
        return TrainConfig(model=self.model, pde=self.pde, nu=self.nu, res=self.res, seed=self.seed,
                           fusion=self.fusion, alpha=self.alpha, no_freq_gate=self.variant == "no-freq-gate",
                           omega_mode="batch" if self.variant == "omega-batch" else "fixed", omega=self.omega,
                           out=out, cache_dir=cache_dir, device=device, fast_kernels=fast_kernels,
                           cuda_graph=cuda_graph, **extra)

    def to_dict(self) -> dict:
        """JSON-ready: the overrides as a {key: value} dict."""
        return {**{f.name: getattr(self, f.name) for f in dataclasses.fields(self)}, "overrides": dict(self.overrides)}

    @classmethod
    def from_dict(cls, values: dict) -> "RunSpec":
        """A spec from to_dict()'s output (also of an older version, without reading / overrides)."""
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(values) - names
        if unknown:
            raise ValueError(f"unknown run-spec fields {sorted(unknown)}; known: {sorted(names)}")
        return cls(**values)

    def with_seed(self, seed: int) -> "RunSpec":
        return dataclasses.replace(self, seed=seed)
