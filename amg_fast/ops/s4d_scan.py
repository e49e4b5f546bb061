"""Diagonal S4D scan over time: x_t = lam * x_{t-1} + u_t, y_t = 2 Re(c . x_t) + d u_t.

Complex parameters are stored as real [..., 2] (real, imag). The reference uses the equivalent
causal convolution y = K * u + d u with the time-invariant kernel K[h, l] = 2 Re(sum_n c lam^l)
(the state-spaces s4d.py formulation, FFT of length 2T); s4d_step is the recurrent form used for
rollout, one step costing O(1) in the history length.
Reads top to bottom: validation -> reference -> public ops.
"""
from __future__ import annotations

import torch

from amg_fast._checks import check_rank, check_real_float, check_same_device, check_shape, compute_dtype
from amg_fast.ops._backend import resolve_backend

__all__ = ["s4d_scan", "s4d_step", "s4d_scan_ref", "s4d_step_ref", "s4d_conv_kernel"]


def _check_params(lam, c, d, H: int) -> None:
    for name, t in (("lam", lam), ("c", c), ("d", d)):
        check_real_float(name, t)
    check_rank("lam", lam, 3, "[H, N, 2]")
    N = lam.shape[1]
    check_shape("lam", lam, (H, N, 2), f"[H, N, 2] with H = {H}")
    check_shape("c", c, (H, N, 2), "[H, N, 2], like lam")
    check_shape("d", d, (H,), "[H]")


def check_s4d_scan_args(u, lam, c, d) -> None:
    """u [B, T, S, H]; lam, c [H, N, 2]; d [H]."""
    check_real_float("u", u)
    check_rank("u", u, 4, "[B, T, S, H], time is dim 1")
    _check_params(lam, c, d, u.shape[-1])
    check_same_device(u=u, lam=lam, c=c, d=d)


def s4d_conv_kernel(lam: torch.Tensor, c: torch.Tensor, T: int) -> torch.Tensor:
    """K[h, l] = 2 Re(sum_n c[h, n] lam[h, n]^l) for l < T. lam, c real [H, N, 2] -> [H, T]."""
    lam_c, c_c = torch.view_as_complex(lam.contiguous()), torch.view_as_complex(c.contiguous())
    steps = torch.arange(T, device=lam.device, dtype=lam.dtype)
    powers = torch.exp(torch.log(lam_c)[..., None] * steps)  # lam^l, [H, N, T]
    return 2 * torch.einsum("hn,hnl->hl", c_c, powers).real


def s4d_scan_ref(u, lam, c, d) -> torch.Tensor:
    """Pure-PyTorch reference. u [B, T, S, H] -> y [B, T, S, H] in u's dtype (computes in >= fp32)."""
    dtype = compute_dtype(u, lam, c, d)
    u_, T = u.to(dtype), u.shape[1]
    kernel = s4d_conv_kernel(lam.to(dtype), c.to(dtype), T)  # [H, T]
    u_f = torch.fft.rfft(u_, n=2 * T, dim=1)  # [B, T+1, S, H]
    k_f = torch.fft.rfft(kernel, n=2 * T, dim=-1).transpose(0, 1)[:, None, :]  # [T+1, 1, H]
    y = torch.fft.irfft(u_f * k_f, n=2 * T, dim=1)[:, :T]
    return (y + d.to(dtype) * u_).to(u.dtype)


def s4d_step_ref(u_t, state, lam, c, d) -> tuple[torch.Tensor, torch.Tensor]:
    """One recurrent step. u_t [..., H]; state real [..., H, N, 2] (x_{t-1}) ->
    (y_t [..., H], new state [..., H, N, 2])."""
    dtype = compute_dtype(u_t, state, lam, c, d)
    x = torch.view_as_complex(state.to(dtype).contiguous())
    lam_c = torch.view_as_complex(lam.to(dtype).contiguous())
    c_c = torch.view_as_complex(c.to(dtype).contiguous())
    u_ = u_t.to(dtype)
    x = lam_c * x + u_[..., None]
    y = 2 * (x * c_c).sum(-1).real + d.to(dtype) * u_
    return y.to(u_t.dtype), torch.view_as_real(x).to(state.dtype)


def s4d_scan(u, lam, c, d, *, backend: str = "auto") -> torch.Tensor:
    """Diagonal S4D recurrence over time for every (b, s, h), started from x_{-1} = 0.

    u: real [B, T, S, H]; lam, c: real [H, N, 2] (complex pole and folded readout);
    d: real [H]. Returns y [B, T, S, H] in u's dtype.
    """
    check_s4d_scan_args(u, lam, c, d)
    resolve_backend("s4d_scan", backend, u.device)
    return s4d_scan_ref(u, lam, c, d)


def s4d_step(u_t, state, lam, c, d, *, backend: str = "auto") -> tuple[torch.Tensor, torch.Tensor]:
    """Advance the S4D state by one step (rollout). u_t real [..., H]; state real [..., H, N, 2]
    (zeros before the first step). Returns (y_t [..., H], new state [..., H, N, 2])."""
    check_real_float("u_t", u_t)
    check_rank("u_t", u_t, range(1, 16), "[..., H]")
    _check_params(lam, c, d, u_t.shape[-1])
    check_real_float("state", state)
    check_shape("state", state, tuple(u_t.shape) + (lam.shape[1], 2), "[..., H, N, 2]")
    check_same_device(u_t=u_t, state=state, lam=lam, c=c, d=d)
    resolve_backend("s4d_step", backend, u_t.device)
    return s4d_step_ref(u_t, state, lam, c, d)
