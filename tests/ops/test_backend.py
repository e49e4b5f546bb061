"""Backend selection: reference runs, triton runs or says exactly why it cannot, unknown names are refused."""
import logging

import pytest
import torch

from amg_fast.ops import _backend, gate_fusion, s4d_scan, spectral_conv1d

OPS = {
    "spectral_conv1d": lambda backend: spectral_conv1d(torch.randn(8, 4), torch.randn(3, 4, 4, 2), backend=backend),
    "s4d_scan": lambda backend: s4d_scan(torch.randn(1, 3, 2, 4), torch.rand(4, 2, 2) / 2, torch.randn(4, 2, 2),
                                         torch.randn(4), backend=backend),
    "gate_fusion": lambda backend: gate_fusion(torch.randn(2, 4), torch.randn(2, 4), torch.randn(4, 4),
                                               torch.randn(4, 4), torch.randn(4), torch.tensor(0.5), backend=backend),
}


@pytest.mark.parametrize("op", OPS)
def test_triton_on_cpu_without_interpreter_raises(op, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(RuntimeError, match=f"backend='triton' for {op} cannot run: tensors are on cpu; the Triton "
                                           "kernels need CUDA tensors, or CPU tensors with TRITON_INTERPRET=1"):
        OPS[op]("triton")


@pytest.mark.parametrize("op", OPS)
def test_triton_without_triton_package_raises(op, monkeypatch):
    monkeypatch.setattr(_backend, "triton_importable", lambda: False)
    with pytest.raises(RuntimeError, match=f"backend='triton' for {op} cannot run: the triton package is not installed"):
        OPS[op]("triton")


def test_auto_on_cuda_picks_triton_and_on_cpu_reference(monkeypatch):
    monkeypatch.setattr(_backend, "_logged", set())
    assert _backend.resolve_backend("op", "auto", torch.device("cuda")) == "triton"
    assert _backend.resolve_backend("op", "auto", torch.device("cpu")) == "reference"  # interpreter or not
    monkeypatch.setattr(_backend, "triton_importable", lambda: False)
    assert _backend.resolve_backend("op", "auto", torch.device("cuda")) == "reference"


@pytest.mark.parametrize("op", OPS)
def test_unknown_backend_rejected(op):
    with pytest.raises(ValueError, match=r"backend must be one of \('auto', 'triton', 'reference'\), got 'cuda'"):
        OPS[op]("cuda")


@pytest.mark.parametrize("op", OPS)
def test_auto_equals_reference_on_cpu_and_logs_reason_once(op, caplog, monkeypatch):
    monkeypatch.setattr(_backend, "_logged", set())
    torch.manual_seed(0)
    with caplog.at_level(logging.INFO, logger="amg_fast.ops"):
        auto = OPS[op]("auto")
        OPS[op]("auto")
    messages = [r.getMessage() for r in caplog.records if op in r.getMessage()]
    assert len(messages) == 1 and "using the reference backend" in messages[0]
    torch.manual_seed(0)
    ref = OPS[op]("reference")
    auto, ref = (auto if isinstance(auto, tuple) else (auto,)), (ref if isinstance(ref, tuple) else (ref,))
    assert all(torch.equal(a, r) for a, r in zip(auto, ref))
