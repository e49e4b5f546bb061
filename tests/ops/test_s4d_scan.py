"""s4d_scan / s4d_step reference vs an explicit complex128 loop, gradcheck, long T, bad input."""
import math

import pytest
import torch
from helpers import ids, randn, rel_err

from amg_fast.ops import s4d_scan, s4d_step


def loop_scan(u, lam, c, d):
    """Independent formula: x_t = lam x_{t-1} + u_t, y_t = 2 Re(sum_n c x_t) + d u_t, in complex128."""
    lam_c = torch.complex(lam[..., 0], lam[..., 1]).to(torch.complex128)  # [H, N]
    c_c = torch.complex(c[..., 0], c[..., 1]).to(torch.complex128)
    u64 = u.to(torch.float64)
    B, T, S, H = u.shape
    x = torch.zeros(B, S, H, lam.shape[1], dtype=torch.complex128)
    ys = []
    for t in range(T):
        x = lam_c * x + u64[:, t, :, :, None]
        ys.append(2 * (c_c * x).sum(-1).real + d.to(torch.float64) * u64[:, t])
    return torch.stack(ys, dim=1)


def random_params(H, N, gen, dtype=torch.float64, radius=(0.5, 0.999)):
    """Stable poles lam = r e^{i theta}, r in radius; c, d standard normal."""
    r = radius[0] + (radius[1] - radius[0]) * torch.rand(H, N, generator=gen, dtype=torch.float64)
    theta = 2 * math.pi * torch.rand(H, N, generator=gen, dtype=torch.float64)
    lam = torch.stack([r * torch.cos(theta), r * torch.sin(theta)], -1).to(dtype)
    return lam, randn(H, N, 2, generator=gen, dtype=dtype), randn(H, generator=gen, dtype=dtype)


CASES = [(B, T, S, H, N) for B in (1, 3) for T in (1, 25, 26) for (S, H) in ((32, 16), (5, 3))
         for N in (4,)] + [(2, 100, 3, 2, 32)]


@pytest.mark.parametrize("B,T,S,H,N", CASES, ids=[ids(B=b, T=t, S=s, H=h, N=n) for b, t, s, h, n in CASES])
def test_reference_matches_loop(B, T, S, H, N, gen):
    u = randn(B, T, S, H, generator=gen)
    lam, c, d = random_params(H, N, gen)
    y = s4d_scan(u, lam, c, d, backend="reference")
    assert y.shape == u.shape and y.dtype == torch.float64
    assert rel_err(y, loop_scan(u, lam, c, d)) <= 1e-10


def test_reference_takes_a_pole_at_zero(gen):
    """lam = 0 (a one-step memory) and a real pole: values and gradients as the loop's (lam^0 = 1)."""
    u = randn(2, 7, 3, 2, generator=gen)
    lam, c, d = random_params(2, 3, gen)
    lam[0, 0] = 0.0
    lam[1, 2, 1] = 0.0
    lam.requires_grad_()
    y = s4d_scan(u, lam, c, d, backend="reference")
    want = loop_scan(u, lam, c, d)
    assert torch.isfinite(y).all() and rel_err(y, want) <= 1e-10
    dy = randn(*y.shape, generator=gen)
    got, ref = (torch.autograd.grad((out * dy).sum(), lam)[0] for out in (y, want))
    assert rel_err(got, ref) <= 1e-10


def test_conv_kernel_lengths(gen):
    """s4d_conv_kernel(lam, c, T) is [H, T] for every T >= 0, its first column 2 Re(sum_n c)."""
    from amg_fast.ops.s4d import s4d_conv_kernel

    lam, c, _ = random_params(3, 2, gen)
    for T in (0, 1, 2, 5):
        kernel = s4d_conv_kernel(lam, c, T)
        assert kernel.shape == (3, T)
        if T:
            assert torch.allclose(kernel[:, 0], 2 * c[..., 0].sum(-1))


def test_loop_oracle_detects_a_shifted_kernel(gen):
    u = randn(1, 10, 2, 3, generator=gen)
    lam, c, d = random_params(3, 4, gen)
    shifted = torch.cat([torch.zeros_like(u[:, :1]), u[:, :-1]], dim=1)
    assert rel_err(s4d_scan(u, lam, c, d), loop_scan(shifted, lam, c, d)) > 1e-2


def test_step_matches_scan(gen):
    u = randn(2, 12, 4, 3, generator=gen)
    lam, c, d = random_params(3, 5, gen)
    state = torch.zeros(2, 4, 3, 5, 2, dtype=torch.float64)
    ys = []
    for t in range(u.shape[1]):
        y, state = s4d_step(u[:, t], state, lam, c, d)
        ys.append(y)
    assert rel_err(torch.stack(ys, 1), s4d_scan(u, lam, c, d)) <= 1e-10


def test_gradcheck_float64(gen):
    u = randn(2, 6, 2, 3, generator=gen, requires_grad=True)
    lam, c, d = (p.requires_grad_() for p in random_params(3, 2, gen))
    assert torch.autograd.gradcheck(lambda *a: s4d_scan(*a, backend="reference"), (u, lam, c, d))


def test_step_gradcheck_float64(gen):
    u = randn(2, 3, generator=gen, requires_grad=True)
    state = randn(2, 3, 2, 2, generator=gen, requires_grad=True)
    lam, c, d = (p.requires_grad_() for p in random_params(3, 2, gen))
    assert torch.autograd.gradcheck(lambda *a: s4d_step(*a, backend="reference"), (u, state, lam, c, d))


def test_long_sequence_4096_float32_stays_finite_and_accurate(gen):
    u = randn(1, 4096, 2, 4, generator=gen)
    lam, c, d = random_params(4, 8, gen, radius=(0.9, 0.9999))
    y = s4d_scan(u.float(), lam.float(), c.float(), d.float())
    assert torch.isfinite(y).all()
    assert rel_err(y, loop_scan(u, lam, c, d)) <= 1e-4


@pytest.mark.parametrize(
    "u_shape,lam_shape,c_shape,d_shape,match",
    [
        ((2, 3, 4), (4, 2, 2), (4, 2, 2), (4,), "u must have rank 4"),
        ((1, 2, 3, 4), (4, 2), (4, 2), (4,), "lam must have rank 3"),
        ((1, 2, 3, 4), (5, 2, 2), (5, 2, 2), (5,), r"lam must have shape \(4, 2, 2\)"),
        ((1, 2, 3, 4), (4, 2, 2), (4, 3, 2), (4,), "c must have shape"),
        ((1, 2, 3, 4), (4, 2, 2), (4, 2, 2), (3,), "d must have shape"),
    ],
    ids=["u-rank", "lam-rank", "lam-H", "c-N", "d-H"],
)
def test_bad_input_errors(u_shape, lam_shape, c_shape, d_shape, match):
    with pytest.raises(ValueError, match=match):
        s4d_scan(torch.zeros(u_shape), torch.zeros(lam_shape), torch.zeros(c_shape), torch.zeros(d_shape))


@pytest.mark.parametrize("dtype", [torch.int32, torch.complex64], ids=str)
def test_non_real_u_rejected(dtype):
    with pytest.raises(TypeError, match=f"u must be a real floating-point tensor.*{str(dtype)[6:]}"):
        s4d_scan(torch.zeros(1, 2, 3, 4, dtype=dtype), torch.zeros(4, 2, 2), torch.zeros(4, 2, 2), torch.zeros(4))


def test_step_state_shape_checked():
    with pytest.raises(ValueError, match="state must have shape"):
        s4d_step(torch.zeros(2, 4), torch.zeros(2, 4, 3, 2), torch.zeros(4, 2, 2), torch.zeros(4, 2, 2), torch.zeros(4))
