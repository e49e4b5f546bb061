"""amg_fast: memory-augmented neural operators (AMGFNO and baselines) with fused Triton kernels.

The model classes are importable from here (`from amg_fast import AMGFNO1d, AMGFNO2d`) as from
amg_fast.models. Importing amg_fast never initialises CUDA (and does not import triton).
"""
__version__ = "0.1.0"

from amg_fast import metrics, ops  # noqa: E402,F401
from amg_fast.models import (  # noqa: E402,F401
    AMGFNO1d, AMGFNO2d, FFNO1d, FFNO2d, Factformer1d, GalerkinTransformer1d, MultiInputFFNO1d, Normalized, S4FFNO1d,
    S4FFNO2d, UNet1d, available_models, get_model)

__all__ = ["AMGFNO1d", "AMGFNO2d", "FFNO1d", "FFNO2d", "S4FFNO1d", "S4FFNO2d", "MultiInputFFNO1d", "Factformer1d",
           "GalerkinTransformer1d", "UNet1d", "Normalized", "get_model", "available_models", "metrics", "ops"]
