"""Model registry: get_model(name, **kwargs), available_models(), build_model(options).

Memory models: "ffno", "multi_input_ffno" (window of 4 states), "s4ffno", "amgfno". Markovian
baselines of the paper's main table: "factformer", "gkt" (Galerkin Transformer), "unet".
On a 2D grid (u [B, T, X, Y, C]; class attribute spatial_dims = 2): "ffno2d", "s4ffno2d", "amgfno2d".

Common keyword arguments: in_channels, out_channels, width (H), modes (K; None = S//2 of the
first input); AMGFNO also takes omega, freq_gate; S4FFNO fusion, alpha; memory models state_dim;
all take backend ("auto" | "triton" | "reference") for their ops. The FFNO family (ffno,
multi_input_ffno, s4ffno, amgfno) also takes the fourierflow options share_weights, weight_norm,
decoder_input (FFNOBackbone). Normalized(model, ...) wraps any model with input/output
normalisation and increment prediction. Factformer and UNet have no
Fourier layer: they take modes=None only (class attribute uses_modes = False); UNet needs S % 16 == 0.
build_model(options) builds the model of a run's settings (a TrainConfig): each registered class
reads its own settings in its `options_kwargs` classmethod, so a new model needs no trainer edit.
parameter_table_markdown() gives the parameter counts at the paper's sizes (docs/models.md).
"""
from __future__ import annotations

from torch import nn

from amg_fast.models.base import SequenceModel
from amg_fast.models.factformer import Factformer1d
from amg_fast.models.ffno import FFNO1d, FFNO2d, MultiInputFFNO1d
from amg_fast.models.gkt import GalerkinTransformer1d
from amg_fast.models.markovian import MarkovianModel
from amg_fast.models.memory import AMGFNO1d, AMGFNO2d, S4FFNO1d, S4FFNO2d
from amg_fast.models.normalized import Normalized
from amg_fast.models.unet import UNet1d

MODELS: dict[str, type[SequenceModel]] = {
    "ffno": FFNO1d,
    "multi_input_ffno": MultiInputFFNO1d,
    "s4ffno": S4FFNO1d,
    "amgfno": AMGFNO1d,
    "factformer": Factformer1d,
    "gkt": GalerkinTransformer1d,
    "unet": UNet1d,
    "ffno2d": FFNO2d,
    "s4ffno2d": S4FFNO2d,
    "amgfno2d": AMGFNO2d,
}


def available_models() -> list[str]:
    """Names accepted by get_model."""
    return sorted(MODELS)


def get_model(name: str, **kwargs) -> nn.Module:
    """Build the model registered as `name` with keyword arguments for its constructor."""
    if name not in MODELS:
        raise ValueError(f"unknown model name {name!r}; available: {', '.join(available_models())}")
    return MODELS[name](**kwargs)


def build_model(options, omega=None, backend: str = "auto", stats: dict | None = None) -> nn.Module:
    """The model a TrainConfig-like `options` describes (attributes model, width, modes and the
    model's own settings: each registered class reads its own in from_options), wrapped in
    Normalized when options.normalize or options.increment is set (stats: its in_mean, in_std,
    out_mean, out_std; none: the identity statistics). omega: the data's omega_f (AMGFNO's gate)."""
    if options.model not in MODELS:
        raise ValueError(f"unknown model name {options.model!r}; available: {', '.join(available_models())}")
    model = MODELS[options.model].from_options(options, omega=omega, backend=backend)
    if getattr(options, "normalize", False) or getattr(options, "increment", False):
        model = Normalized(model, increment=bool(getattr(options, "increment", False)), **(stats or {}))
    return model


def count_parameters(model: nn.Module) -> int:
    """Number of trainable scalars. A model built with modes=None creates its spectral weights at the first
    forward: counting before that is refused with a ValueError that says so."""
    params = [p for p in model.parameters() if p.requires_grad]
    if any(isinstance(p, nn.parameter.UninitializedParameter) for p in params):
        raise ValueError(f"{type(model).__name__} was built with modes=None, so its spectral weights are created "
                         "at the first forward and cannot be counted yet: run one forward first, or build it with "
                         "modes=f//2")
    return sum(p.numel() for p in params)


from amg_fast.models.param_table import parameter_table_markdown  # noqa: E402 (uses the registry above)


__all__ = ["get_model", "build_model", "available_models", "count_parameters", "parameter_table_markdown",
           "SequenceModel", "MarkovianModel",
           "FFNO1d", "MultiInputFFNO1d", "S4FFNO1d", "AMGFNO1d",
           "Factformer1d", "GalerkinTransformer1d", "UNet1d", "FFNO2d", "S4FFNO2d", "AMGFNO2d", "MODELS",
           "Normalized"]
