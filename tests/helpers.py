"""Shared test helpers: tolerances per dtype, random inputs, readable ids, data files."""
from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

# Tests that run the Triton kernels on CPU tensors: Triton's interpreter, which conftest turns on only where there
# is no GPU (on a GPU machine such a test would hand a CPU pointer to a compiled kernel).
interpreter_only = pytest.mark.skipif(torch.cuda.is_available(), reason="runs the Triton kernels on CPU tensors "
                                      "(Triton's interpreter, which conftest turns on only without a GPU)")

# Relative (norm-wise) tolerances per dtype. fp32 values allow for TF32 accumulation on a GPU.
RTOL = {torch.float64: 1e-10, torch.float32: 2e-3}


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    """||a - b|| / ||b|| in float64 on the CPU (0 when both are 0); a and b may be on different devices."""
    a, b = (t.detach().cpu().to(torch.complex128 if t.is_complex() else torch.float64) for t in (a, b))
    denom = b.norm()
    return float((a - b).norm() / denom) if denom > 0 else float((a - b).norm())


def value_and_grads(fn, inputs, dy):
    """(fn(*inputs), the gradients of <fn(*inputs), dy> w.r.t. every input); inputs are leaves requiring grad."""
    y = fn(*inputs)
    return y, torch.autograd.grad(y, inputs, dy.to(y.dtype))


def gpu_tiling(monkeypatch, kernels, device: torch.device, **overrides) -> None:
    """Patch a row-streaming kernel module's LAUNCH_POLICY[device type] (kernels/_rows.py) to its GPU entry with
    overrides (e.g. a small row budget `elements` and a few `programs`), for the test's duration."""
    monkeypatch.setitem(kernels.LAUNCH_POLICY, device.type, dict(kernels.LAUNCH_POLICY["cuda"], **overrides))


def record_launches(module, launches: list, monkeypatch, with_args: bool = False) -> None:
    """Patch a kernel module's wrap_triton so that each launch appends (kernel name, grid, its keyword options)
    to launches (with_args: and its positional arguments, a 4th item), then runs, for the test's duration."""
    real_wrap = module.wrap_triton

    def spy(kernel):
        def grid(g):
            def launch(*args, **kwargs):
                launches.append((kernel.__name__, tuple(g), kwargs) + ((args,) if with_args else ()))
                return real_wrap(kernel)[g](*args, **kwargs)
            return launch
        return type("Launcher", (), {"__getitem__": lambda self, g: grid(g)})()

    monkeypatch.setattr(module, "wrap_triton", spy)


def assert_each_close(names, got, want, dtype: torch.dtype, tol: float) -> None:
    """For each named pair: got in dtype and want's shape, within tol of want (rel_err)."""
    for name, a, b in zip(names, got, want):
        assert a.dtype == dtype and a.shape == b.shape, name
        assert rel_err(a, b) <= tol, f"{name}: rel err {rel_err(a, b):.2e}"


def randn(*shape, dtype=torch.float64, generator=None, requires_grad=False) -> torch.Tensor:
    return torch.randn(*shape, dtype=dtype, generator=generator).requires_grad_(requires_grad)


def ids(**kw) -> str:
    return "-".join(f"{k}{v}" for k, v in kw.items())


def translating_waves(n: int, T: int = 6, N: int = 64, seed: int = 0) -> np.ndarray:
    """u[i, t, j] = sum_k a_k sin(2 pi k (x_j - t dx)) : each step shifts the state by one cell."""
    rng = np.random.default_rng(seed)
    x = np.arange(N) / N
    t = np.arange(T)[:, None]
    u = np.zeros((n, T, N))
    for k in (1, 2, 3):
        a, phase = rng.uniform(0.5, 1.0, (n, 1, 1)), rng.uniform(0, 2 * np.pi, (n, 1, 1))
        u += a * np.sin(2 * np.pi * k * (x - t / N) + phase)
    return u


def run_results(**fields):
    """A RunResults (what results.json holds) with made-up values; `fields` override them."""
    from amg_fast.train.rundir import RunResults

    made_up = dict(model="amgfno", pde="ks", nu=0.1, res=32, nrmse=0.5, nrmse_per_step=[0.1, 0.3, 0.5, 0.7, 0.9],
                   gate_mean=None, amplitude_per_step=[1.0, 1.1, 1.2, 1.3, 1.4], one_step_nrmse=0.05,
                   one_step_nrmse_per_step=[0.05] * 5, test_one_step_loss=2.0, train_one_step_loss=1.0,
                   train_one_step_nrmse=0.04, train_nrmse=0.4, train_eval_trajectories=12,
                   gate_mean_last20_epochs=None, params=1000, epochs=4, wall_time_s=10.0, train_time_s=8.0,
                   eval_time_s=1.0, checkpoint_time_s=0.5, precision="fp32", cuda_graph=False, fast_kernels=False,
                   device="cpu", world_size=1, ddp_ranks_agree=None)
    return RunResults(**{**made_up, **fields})


def load_bench(name: str, alias: str | None = None):
    """bench/<name>.py imported as a module named alias (default "bench_<name>"; bench/ is no package)."""
    path = Path(__file__).parents[1] / "bench" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(alias or f"bench_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
def dft_matrix_spectral_conv(x: torch.Tensor, weight: torch.Tensor, dim: int = -2) -> torch.Tensor:
    """The spectral conv's independent formula (complex128, differentiable): explicit forward DFT matrix,
    complex mixing, explicit real inverse, along dim of x [..., S, ..., H_in] (channels last).

    y[s] = 1/sqrt(S) * sum_{k<K} c_k Re(Y_k exp(2 pi i k s / S)), c_0 = 1, c_{S/2} = 1, else 2.
    """
    x = x.movedim(dim, -2)
    S, K = x.shape[-2], weight.shape[0]
    k = torch.arange(K, dtype=torch.float64, device=x.device)[:, None]
    s = torch.arange(S, dtype=torch.float64, device=x.device)[None, :]
    forward = torch.exp(-2j * math.pi * k * s / S) / math.sqrt(S)  # [K, S]
    X = forward @ x.to(torch.complex128)  # [..., K, H_in]
    W = torch.complex(weight[..., 0].double(), weight[..., 1].double())
    Y = torch.einsum("...ki,kio->...ko", X, W)
    c = torch.full((K,), 2.0, dtype=torch.float64, device=x.device)
    c[0] = 1.0
    if S % 2 == 0 and K == S // 2 + 1:
        c[-1] = 1.0
    inverse = c * torch.exp(2j * math.pi * s.T * k.T / S) / math.sqrt(S)  # [S, K]
    return (inverse @ Y).real.movedim(-2, dim)


def write_pdebench_cfd(path, fields: dict, x, y, T):
    """A file written as PDEBench's Data_Merge.py writes a 2D CFD set: one float32 [N, T, X, Y] dataset
    per field, cell-centre coordinates, t-coordinate with T + 1 entries, attributes eta, zeta, M."""
    with h5py.File(path, "w") as f:
        for name, values in fields.items():
            f.create_dataset(name, data=values)
        f.create_dataset("y-coordinate", data=y.astype(np.float32))
        f.create_dataset("x-coordinate", data=x.astype(np.float32))
        f.create_dataset("t-coordinate", data=(np.arange(T + 1) * 0.05).astype(np.float32))
        f.attrs.update({"eta": 0.01, "zeta": 0.01, "M": 0.1})


# Strided layouts that flatten to [rows, H] as a *view* (no copy): the kernels must not take them as
# row-major (the weight gradients once did, reading the wrong elements, past the storage for expand).
VIEW_LAYOUTS = {
    "channels-first": lambda x: x.movedim(-1, 0).contiguous().movedim(0, -1),  # channel stride = rows
    "row-slice": lambda x: torch.cat([x, x[..., :3]], dim=-1)[..., :x.shape[-1]],  # row stride H + 3
    "expanded": lambda x: x[:1].expand(x.shape),                                    # row stride 0
}


def strided_view(x, layout):
    """x's values (for "expanded": its first row's, repeated) in the given layout, as a leaf."""
    y = VIEW_LAYOUTS[layout](x.detach())
    H = y.shape[-1]
    assert not y.is_contiguous() and y.reshape(-1, H)._base is not None  # flattening keeps it a view
    return y.requires_grad_()
