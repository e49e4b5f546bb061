"""amg_fast._provenance: the code that trains a run or times a benchmark (commit, versions, kernel switches)."""
import subprocess

import pytest
import torch

from amg_fast import _provenance


def _git(repo, *args):
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def test_code_version_is_the_checkouts_head_and_whether_tracked_files_changed(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / "a.py").write_text("x = 1\n")
    _git(repo, "add", "a.py")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-q", "-m", "first")
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    (repo / "untracked.txt").write_text("not counted")
    assert _provenance.code_version(repo) == {"commit": head, "commit_dirty": False}
    (repo / "a.py").write_text("x = 2\n")
    assert _provenance.code_version(repo) == {"commit": head, "commit_dirty": True}
    outside = tmp_path / "plain"
    outside.mkdir()
    assert _provenance.code_version(outside) == {"commit": None, "commit_dirty": None}


def test_kernel_switches_are_the_amg_fast_variables_set():
    environ = {"AMG_FAST_SPECTRAL_MIX": "torch", "AMG_FAST_FFN_METHOD": "", "AMG_BENCH_PROVIDERS": "triton",
               "PATH": "/bin", "AMG_FAST_S4D_METHOD": "scan"}
    assert _provenance.kernel_switches(environ) == {"AMG_FAST_S4D_METHOD": "scan", "AMG_FAST_SPECTRAL_MIX": "torch"}


def test_software_names_versions_commit_and_switches(monkeypatch):
    monkeypatch.setenv("AMG_FAST_SPECTRAL_MIX", "torch")
    record = _provenance.software()
    assert set(record) == {"torch", "cuda", "triton", "commit", "commit_dirty", "kernel_switches"}
    assert record["torch"] == torch.__version__ and record["cuda"] == torch.version.cuda
    assert record["kernel_switches"]["AMG_FAST_SPECTRAL_MIX"] == "torch"
    triton = pytest.importorskip("triton")
    assert record["triton"] == triton.__version__
