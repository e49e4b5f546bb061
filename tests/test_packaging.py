"""Install layout and import hygiene."""
import subprocess
import sys
from pathlib import Path

import pytest

import amg_fast


def run_python(code: str, cwd: Path) -> str:
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, check=True, capture_output=True, text=True).stdout


def test_kernels_is_a_subpackage_not_a_top_level_module(tmp_path):
    out = run_python("import importlib.util, amg_fast.kernels as k; "
                     "print(importlib.util.find_spec('kernels') is None, k.__name__)", tmp_path)
    assert out.split() == ["True", "amg_fast.kernels"]


def test_import_does_not_initialise_cuda(tmp_path):
    out = run_python("import torch, amg_fast, amg_fast.models, amg_fast.layers, amg_fast.kernels; "
                     "print(torch.cuda.is_initialized())", tmp_path)
    assert out.strip() == "False"


def test_top_level_model_classes_import_without_triton_or_cuda(tmp_path):
    out = run_python("import sys, torch; from amg_fast import AMGFNO1d, AMGFNO2d, FFNO2d, S4FFNO2d; "
                     "print('triton' in sys.modules, torch.cuda.is_initialized(), AMGFNO2d.__name__)", tmp_path)
    assert out.split() == ["False", "False", "AMGFNO2d"]


def test_version_matches_pyproject():
    pyproject = (Path(__file__).parents[1] / "pyproject.toml").read_text()
    assert f'version = "{amg_fast.__version__}"' in pyproject


def test_wheel_holds_only_the_amg_fast_package(tmp_path):
    """`pip install .` installs from this wheel: kernels/ must land as amg_fast/kernels/."""
    import zipfile

    root = Path(__file__).parents[1]
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(tmp_path), str(root)], check=True, capture_output=True, text=True)
    (wheel,) = tmp_path.glob("amg_fast-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert tops == {"amg_fast", f"amg_fast-{amg_fast.__version__}.dist-info"}, tops
    assert "amg_fast/kernels/__init__.py" in names and "amg_fast/ops/spectral_conv.py" in names


def test_gitignore_hides_the_data_cache_but_not_package_or_test_sources():
    """`data/` (the cache at the top) is ignored; amg_fast/data/ and tests/data/ are sources."""
    import shutil

    root = Path(__file__).parents[1]
    if shutil.which("git") is None or not (root / ".git").exists():
        pytest.skip("needs git and a git checkout")

    def ignored(path: str) -> bool:
        return subprocess.run(["git", "check-ignore", "-q", "--no-index", path], cwd=root).returncode == 0

    assert ignored("data/ks_nu0.1.h5")
    assert not ignored("amg_fast/data/new_solver.py")
    assert not ignored("tests/data/test_new_solver.py")


def test_every_public_module_lists_its_public_names_in_all():
    """Each public module of amg_fast (no leading underscore in its path) has an __all__ that holds
    every function and class it defines without a leading underscore, and only names it has."""
    import importlib
    import inspect
    import pkgutil

    problems = {}
    for info in pkgutil.walk_packages(amg_fast.__path__, "amg_fast."):
        if any(part.startswith("_") for part in info.name.split(".")[1:]):
            continue
        module = importlib.import_module(info.name)
        defined = [k for k, v in vars(module).items() if not k.startswith("_")
                   and (inspect.isfunction(v) or inspect.isclass(v)) and v.__module__ == info.name]
        listed = getattr(module, "__all__", None)
        if listed is None:
            if defined:
                problems[info.name] = f"no __all__ (defines {defined})"
            continue
        missing, unknown = [k for k in defined if k not in listed], [k for k in listed if not hasattr(module, k)]
        if missing or unknown:
            problems[info.name] = f"missing {missing}, unknown {unknown}"
    assert not problems, problems
