"""Reference (eager PyTorch) timings of the ops and an AMGFNO training step.

Run: pytest bench/ --benchmark-only. On CPU the sizes are small (CPU timings only compare
providers on one machine); the Triton and torch.compile providers and the paper's GPU shapes
arrive with the kernel issue.
"""
import pytest
import torch

from amg_fast.models import get_model
from amg_fast.ops import gate_fusion, s4d_scan, spectral_conv1d

B, T, H = 4, 25, 32
SIZES = [32, 64]


def forward_backward(fn, *inputs):
    def run():
        out = fn(*inputs)
        out = out[0] if isinstance(out, tuple) else out
        out.sum().backward()
    return run


@pytest.mark.parametrize("S", SIZES, ids=lambda s: f"S{s}")
@pytest.mark.parametrize("mode", ["fwd", "fwd+bwd"])
def test_spectral_conv1d(benchmark, S, mode):
    x = torch.randn(B * T, S, H, requires_grad=mode != "fwd")
    w = torch.randn(S // 2, H, H, 2, requires_grad=mode != "fwd")
    fn = lambda: spectral_conv1d(x, w, backend="reference")  # noqa: E731
    benchmark.group = f"spectral_conv1d-{mode}"
    benchmark(fn if mode == "fwd" else forward_backward(spectral_conv1d, x, w))


@pytest.mark.parametrize("S", SIZES, ids=lambda s: f"S{s}")
@pytest.mark.parametrize("mode", ["fwd", "fwd+bwd"])
def test_s4d_scan(benchmark, S, mode):
    grad = mode != "fwd"
    u = torch.randn(B, T, S, H, requires_grad=grad)
    lam = (0.9 * torch.rand(H, 32, 2)).requires_grad_(grad)
    c, d = torch.randn(H, 32, 2, requires_grad=grad), torch.randn(H, requires_grad=grad)
    benchmark.group = f"s4d_scan-{mode}"
    benchmark(forward_backward(s4d_scan, u, lam, c, d) if grad else (lambda: s4d_scan(u, lam, c, d)))


@pytest.mark.parametrize("S", SIZES, ids=lambda s: f"S{s}")
@pytest.mark.parametrize("mode", ["fwd", "fwd+bwd"])
def test_gate_fusion(benchmark, S, mode):
    grad = mode != "fwd"
    args = [torch.randn(B, T, S, H, requires_grad=grad), torch.randn(B, T, S, H, requires_grad=grad),
            torch.randn(H, H, requires_grad=grad), torch.randn(H, H, requires_grad=grad),
            torch.randn(H, requires_grad=grad), torch.tensor(0.7)]
    benchmark.group = f"gate_fusion-{mode}"
    benchmark(forward_backward(gate_fusion, *args) if grad else (lambda: gate_fusion(*args)))


@pytest.mark.parametrize("S", SIZES, ids=lambda s: f"S{s}")
def test_amgfno_training_step(benchmark, S):
    torch.manual_seed(0)
    model = get_model("amgfno", width=H, modes=S // 2, omega=0.1)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    u = torch.randn(B, T + 1, S, 1)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = (model(u[:, :-1]) - u[:, 1:]).square().mean()
        loss.backward()
        opt.step()

    benchmark.group = "amgfno-train-step"
    benchmark(step)
