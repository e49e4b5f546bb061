"""amg_fast: memory-augmented neural operators (AMGFNO and baselines) with fused Triton kernels.

Importing amg_fast never initialises CUDA.
"""
__version__ = "0.1.0"

from amg_fast import metrics, ops  # noqa: E402,F401
from amg_fast.models import available_models, get_model  # noqa: E402,F401
