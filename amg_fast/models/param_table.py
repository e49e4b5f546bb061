"""Parameter counts of the registered models at the paper's sizes, as the Markdown tables of
docs/models.md (printed by scripts/param_table.py; tests/test_docs.py checks the docs against it).

Core models (FFNO backbone) at width 128, the Markovian baselines at their default widths; one input
and one output channel; modes K = f//2 where the model has Fourier layers (`uses_modes`; per axis
for the 2D models).
"""
from __future__ import annotations

from amg_fast.models import MODELS, count_parameters, get_model
from amg_fast.models.markovian import MarkovianModel

RESOLUTIONS = (32, 64, 128)
CORE_WIDTH = 128


def is_baseline(name: str) -> bool:
    """A Markovian baseline (each prediction from the current state only), not a core model."""
    return issubclass(MODELS[name], MarkovianModel)


def parameter_counts(name: str, resolutions=RESOLUTIONS) -> list[int]:
    """Trainable parameters of model `name` at each resolution f: width 128 for the core models,
    the default width for the baselines; modes f//2 where the model takes modes."""
    kwargs = {} if is_baseline(name) else {"width": CORE_WIDTH}
    uses_modes = getattr(MODELS[name], "uses_modes", True)
    return [count_parameters(get_model(name, **kwargs, **({"modes": f // 2} if uses_modes else {})))
            for f in resolutions]


def _table(names: list[str], header: list[str]) -> list[str]:
    lines = ["| model | " + " | ".join(header) + " |", "|---|" + "---|" * len(header)]
    for name in names:
        lines.append(f"| `{name}` | " + " | ".join(f"{n:,}" for n in parameter_counts(name)) + " |")
    return lines


def parameter_table_markdown() -> str:
    """The two parameter tables (core models, then baselines) as Markdown, ending in a newline."""
    core = [n for n in MODELS if not is_baseline(n)]
    baselines = [n for n in MODELS if is_baseline(n)]
    lines = [f"Core models, width {CORE_WIDTH}, modes K = f//2 (per axis for the 2D models, on an f x f grid):", ""]
    lines += _table(core, [f"f = {f} (K = {f // 2})" for f in RESOLUTIONS])
    lines += ["", "Baselines, default widths (modes f//2 where the model has Fourier layers):", ""]
    lines += _table(baselines, [f"f = {f}" for f in RESOLUTIONS])
    return "\n".join(lines) + "\n"


__all__ = ["parameter_table_markdown", "parameter_counts", "is_baseline", "RESOLUTIONS", "CORE_WIDTH"]
