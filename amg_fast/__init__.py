"""amg_fast: memory-augmented neural operators (AMGFNO and baselines) with fused Triton kernels.

The model classes are importable from here (`from amg_fast import AMGFNO1d, AMGFNO2d`) as from
amg_fast.models. Importing amg_fast never initialises CUDA (and does not import triton). The names
below, and the subpackages (`amg_fast.ops`, `amg_fast.models`, ...), are imported on first use:
`import amg_fast` alone loads no torch, so the console scripts (amg_fast._entry) set up their
Ctrl-C handling before the seconds that importing torch takes.
"""
import importlib

__version__ = "0.1.0"

_FROM_MODELS = ("AMGFNO1d", "AMGFNO2d", "FFNO1d", "FFNO2d", "S4FFNO1d", "S4FFNO2d", "MultiInputFFNO1d", "Factformer1d",
                "GalerkinTransformer1d", "UNet1d", "Normalized", "get_model", "available_models")
__all__ = [*_FROM_MODELS, "metrics", "ops"]


def __getattr__(name: str):
    """amg_fast.<model class or function> from amg_fast.models, or the subpackage amg_fast.<name>."""
    if name in _FROM_MODELS:
        value = getattr(importlib.import_module("amg_fast.models"), name)
    elif not name.startswith("__"):
        try:
            value = importlib.import_module(f"amg_fast.{name}")
        except ModuleNotFoundError as err:
            if err.name != f"amg_fast.{name}":
                raise
            raise AttributeError(f"module 'amg_fast' has no attribute {name!r}") from None
    else:
        raise AttributeError(f"module 'amg_fast' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
