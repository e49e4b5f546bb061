"""What a GPU compiles that Triton's interpreter does not check.

- Every tl.dot names its out_dtype and input_precision: triton 3.6 (the GPU machines') defaults
  out_dtype to float32 and asserts that an accumulator passed to tl.dot has that dtype, so an fp64
  dot without it fails to compile there (the spectral kernels did, 2026-11-27), while triton 3.9 and
  its interpreter infer it from the accumulator. Without input_precision a GPU rounds fp32 dots to
  TF32 where the interpreter multiplies exactly.
"""
import ast
from pathlib import Path

ROOT = Path(__file__).parents[1]
KERNELS = sorted((ROOT / "kernels").glob("*.py"))


def _dot_calls(path: Path):
    """(line, keyword names) of every tl.dot(...) call in a kernels/ file."""
    for node in ast.walk(ast.parse(path.read_text())):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "dot"
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "tl"):
            yield node.lineno, {kw.arg for kw in node.keywords}


def test_every_dot_names_its_out_dtype_and_input_precision():
    calls = [(path.name, line, kws) for path in KERNELS for line, kws in _dot_calls(path)]
    assert len(calls) >= 20  # the scan finds the kernels' dots
    missing = [f"{name}:{line} lacks {sorted({'out_dtype', 'input_precision'} - kws)}"
               for name, line, kws in calls if not {"out_dtype", "input_precision"} <= kws]
    assert not missing, "\n".join(missing)
