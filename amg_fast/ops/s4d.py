"""Diagonal S4D scan over time: x_t = lam * x_{t-1} + u_t, y_t = 2 Re(c . x_t) + d u_t.

Complex parameters are stored as real [..., 2] (real, imag). The reference uses the equivalent
causal convolution y = K * u + d u with the time-invariant kernel K[h, l] = 2 Re(sum_n c lam^l)
(the state-spaces s4d.py formulation, FFT of length 2T); s4d_step is the recurrent form used for
rollout, one step costing O(1) in the history length.

The Triton backend (kernels/s4d_scan.py) has two forward methods, both parallel over (b, s, h):
"toeplitz" for short T (the causal depthwise Toeplitz product with K = s4d_conv_kernel built by a
kernel, whose backward kernel gives the lam and c gradients from dK) and "scan" for long T (a sequential
recurrence in registers whose backward recomputes the states, stable for any T). "auto" picks
toeplitz for T <= TOEPLITZ_MAX_T (kernels/limits.py, measured).
Reads top to bottom: validation -> reference -> autograd Functions over the Triton kernels
(torch.ops.amg_fast.s4d_*, registered in ops/_triton_ops.py) -> public ops.
"""
from __future__ import annotations

import torch

from amg_fast._checks import acc_dtype, check_nonempty, check_rank, check_real_float, check_same_device, check_shape
from amg_fast.kernels.limits import S4D_METHODS, s4d_method
from amg_fast.ops._backend import run_op, triton_ops

__all__ = ["s4d_scan", "s4d_zoh_scan", "s4d_step", "s4d_scan_ref", "s4d_step_ref", "s4d_conv_kernel",
           "s4d_discretize", "check_s4d_scan_args", "check_s4d_zoh_params", "S4DConvKernelFn",
           "S4DZohConvKernelFn", "S4DToeplitzFn", "S4DScanFn", "S4DStepFn"]

def _check_params(lam, c, d, H: int) -> None:
    for name, t in (("lam", lam), ("c", c), ("d", d)):
        check_real_float(name, t)
    check_rank("lam", lam, 3, "[H, N, 2]")
    N = lam.shape[1]
    if N < 1:
        raise ValueError(f"lam must hold N >= 1 poles ([H, N, 2]), got shape {tuple(lam.shape)}")
    check_shape("lam", lam, (H, N, 2), f"[H, N, 2] with H = {H}")
    check_shape("c", c, (H, N, 2), "[H, N, 2], like lam")
    check_shape("d", d, (H,), "[H]")


def check_s4d_scan_args(u, lam, c, d) -> None:
    """u [B, T, S, H]; lam, c [H, N, 2]; d [H]."""
    check_real_float("u", u)
    check_rank("u", u, 4, "[B, T, S, H], time is dim 1")
    check_nonempty("u", u, "[B, T, S, H], time is dim 1")
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
    dtype = acc_dtype(u, lam, c, d)
    u_, T = u.to(dtype), u.shape[1]
    kernel = s4d_conv_kernel(lam.to(dtype), c.to(dtype), T)  # [H, T]
    u_f = torch.fft.rfft(u_, n=2 * T, dim=1)  # [B, T+1, S, H]
    k_f = torch.fft.rfft(kernel, n=2 * T, dim=-1).transpose(0, 1)[:, None, :]  # [T+1, 1, H]
    y = torch.fft.irfft(u_f * k_f, n=2 * T, dim=1)[:, :T]
    return (y + d.to(dtype) * u_).to(u.dtype)


def s4d_step_ref(u_t, state, lam, c, d) -> tuple[torch.Tensor, torch.Tensor]:
    """One recurrent step. u_t [..., H]; state real [..., H, N, 2] (x_{t-1}) ->
    (y_t [..., H], new state [..., H, N, 2])."""
    dtype = acc_dtype(u_t, state, lam, c, d)
    x = torch.view_as_complex(state.to(dtype).contiguous())
    lam_c = torch.view_as_complex(lam.to(dtype).contiguous())
    c_c = torch.view_as_complex(c.to(dtype).contiguous())
    u_ = u_t.to(dtype)
    x = lam_c * x + u_[..., None]
    y = 2 * (x * c_c).sum(-1).real + d.to(dtype) * u_
    return y.to(u_t.dtype), torch.view_as_real(x).to(state.dtype)


def check_s4d_zoh_params(log_dt, log_A_real, A_imag, C, H: int) -> None:
    """log_dt [H]; log_A_real, A_imag [H, N]; C [H, N, 2] (the S4D layer's continuous parameters)."""
    for name, t in (("log_dt", log_dt), ("log_A_real", log_A_real), ("A_imag", A_imag), ("C", C)):
        check_real_float(name, t)
    check_rank("log_A_real", log_A_real, 2, "[H, N]")
    N = log_A_real.shape[1]
    check_shape("log_A_real", log_A_real, (H, N), f"[H, N] with H = {H}")
    check_shape("A_imag", A_imag, (H, N), "[H, N], like log_A_real")
    check_shape("C", C, (H, N, 2), "[H, N, 2]")
    check_shape("log_dt", log_dt, (H,), "[H]")


def s4d_discretize(log_dt, log_A_real, A_imag, C) -> tuple[torch.Tensor, torch.Tensor]:
    """ZOH discretisation (state-spaces' s4d.py): A = -exp(log_A_real) + i A_imag, dt = exp(log_dt),
    lam = exp(dt A), c = C (exp(dt A) - 1) / A. log_dt [H]; log_A_real, A_imag [H, N]; C real [H, N, 2]
    -> (lam, c) real [H, N, 2]."""
    A = torch.complex(-torch.exp(log_A_real), A_imag)
    lam = torch.exp(A * torch.exp(log_dt)[:, None])
    c = torch.view_as_complex(C.contiguous()) * (lam - 1.0) / A
    return torch.view_as_real(lam), torch.view_as_real(c)


# ----------------------------------------------------------------------------- autograd Functions


def _needed(ctx, *grads):
    """Each gradient, or None where its input does not require grad."""
    return tuple(g if need else None for g, need in zip(grads, ctx.needs_input_grad))


class S4DConvKernelFn(torch.autograd.Function):
    """K [H, T] = 2 Re(sum_n c lam^l) (s4d_conv_kernel) from lam, c [H, N, 2] in one kernel, and
    (dlam, dc) from dK in one kernel: two launches instead of ~20 small torch ops per step."""

    @staticmethod
    def forward(ctx, lam, c, T):
        ctx.save_for_backward(lam, c)
        return triton_ops().s4d_conv_kernel_fwd(lam, c, T)

    @staticmethod
    def backward(ctx, dkk):
        lam, c = ctx.saved_tensors
        dlam, dc = triton_ops().s4d_conv_kernel_bwd(dkk, lam, c)
        return _needed(ctx, dlam, dc, None)


class S4DZohConvKernelFn(torch.autograd.Function):
    """K [H, T] straight from the continuous parameters (log_dt [H], log_A_real, A_imag [H, N],
    C [H, N, 2]): the ZOH discretisation folded into the K kernel, forward and backward, so the ~9
    small complex ops of s4d_discretize and their backward cost no launches."""

    @staticmethod
    def forward(ctx, log_dt, log_A_real, A_imag, C, T):
        ctx.save_for_backward(log_dt, log_A_real, A_imag, C)
        return triton_ops().s4d_zoh_conv_kernel_fwd(log_dt, log_A_real, A_imag, C, T)

    @staticmethod
    def backward(ctx, dkk):
        return _needed(ctx, *triton_ops().s4d_zoh_conv_kernel_bwd(dkk, *ctx.saved_tensors), None)


class S4DToeplitzFn(torch.autograd.Function):
    """y = causal depthwise Toeplitz product (u [B, T, S, H], kk [H, T]) + d [H] * u, Triton kernels.

    Backward (one kernel): du by the anti-causal correlation with kk; dkk and dd from per-program
    partial sums reduced in torch (deterministic)."""

    @staticmethod
    def forward(ctx, u, kk, d):
        ctx.save_for_backward(u, kk, d)
        return triton_ops().s4d_toeplitz_fwd(u, kk, d)

    @staticmethod
    def backward(ctx, dy):
        u, kk, d = ctx.saved_tensors
        return _needed(ctx, *triton_ops().s4d_toeplitz_bwd(dy, u, kk, d))


class S4DScanFn(torch.autograd.Function):
    """y = S4D recurrence (u [B, T, S, H]; lam, c [H, N, 2]; d [H]), Triton kernels.

    The backward stores no states: one kernel recomputes them in a forward-time sweep (parameter
    gradients) and runs the adjoint recurrence in a reverse-time sweep (du)."""

    @staticmethod
    def forward(ctx, u, lam, c, d):
        ctx.save_for_backward(u, lam, c, d)
        return triton_ops().s4d_scan_fwd(u, lam, c, d)

    @staticmethod
    def backward(ctx, dy):
        u, lam, c, d = ctx.saved_tensors
        return _needed(ctx, *triton_ops().s4d_scan_bwd(dy, u, lam, c, d))


class S4DStepFn(torch.autograd.Function):
    """One recurrent step (u_t [..., H], state [..., H, N, 2]) -> (y_t, new state), Triton kernel.

    The forward is the kernel; the backward is plain PyTorch on real (re, im) pairs, with
    x' = lam x + u, y = 2 Re(sum_n c x') + d u and G = dL/dx' + 2 dy conj(c) (complex gradients as
    dL/dRe + i dL/dIm): du = Re(sum_n G) + d dy, dstate = conj(lam) G, dlam = sum G conj(x),
    dc = sum 2 dy conj(x'), dd = sum dy u (sums over the leading dims)."""

    @staticmethod
    def forward(ctx, u_t, state, lam, c, d):
        y, new_state = triton_ops().s4d_step_fwd(u_t, state, lam, c, d)
        ctx.save_for_backward(u_t, state, lam, c, d, new_state)
        return y, new_state

    @staticmethod
    def backward(ctx, dy, dstate_new):
        u_t, state, lam, c, d, new_state = ctx.saved_tensors
        dtype = acc_dtype(u_t, state, lam, c, d)
        u, x, x_new = u_t.to(dtype), state.to(dtype), new_state.to(dtype)
        lam_, c_, d_, dy = lam.to(dtype), c.to(dtype), d.to(dtype), dy.to(dtype)
        g = dstate_new.to(dtype) + 2 * dy[..., None, None] * c_ * c_.new_tensor([1.0, -1.0])  # [..., H, N, 2]
        gr, gi = g.unbind(-1)
        lr, li = lam_.unbind(-1)
        rows = tuple(range(u.dim() - 1))  # leading dims, summed for the parameter gradients

        def sum_rows(t):
            return t.sum(rows) if rows else t  # sum(()) would reduce every dim

        du = gr.sum(-1) + d_ * dy
        dstate = torch.stack([lr * gr + li * gi, lr * gi - li * gr], -1)
        xr, xi = x.unbind(-1)
        dlam = sum_rows(torch.stack([gr * xr + gi * xi, gi * xr - gr * xi], -1))
        dc = sum_rows(2 * dy[..., None, None] * x_new * x_new.new_tensor([1.0, -1.0]))
        dd = sum_rows(dy * u)
        return _needed(ctx, du.to(u_t.dtype), dstate.to(state.dtype), dlam.to(lam.dtype), dc.to(c.dtype),
                       dd.to(d.dtype))


def _s4d_triton(u, d, method: str, poles, conv_kernel) -> torch.Tensor:
    """The Triton forward chosen by method ("auto" | "toeplitz" | "scan", kernels.limits.s4d_method):
    the scan kernel on poles() = (lam, c), or the Toeplitz kernel on conv_kernel(T) = K [H, T]."""
    if s4d_method(method, u.shape[1]) == "scan":
        return S4DScanFn.apply(u, *poles(), d)
    return S4DToeplitzFn.apply(u, conv_kernel(u.shape[1]), d)


def _check_method(method: str) -> None:
    if method not in S4D_METHODS:
        raise ValueError(f"method must be one of {S4D_METHODS}, got {method!r}")


# ----------------------------------------------------------------------------- public ops


def s4d_scan(u, lam, c, d, *, backend: str = "auto", method: str = "auto") -> torch.Tensor:
    """Diagonal S4D recurrence over time for every (b, s, h), started from x_{-1} = 0.

    u: real [B, T, S, H]; lam, c: real [H, N, 2] (complex pole and folded readout);
    d: real [H]. Returns y [B, T, S, H] in u's dtype (under autocast with the Triton backend: the
    autocast dtype).
    method (Triton backend only; the reference ignores it): "auto" | "toeplitz" | "scan" forces the
    forward algorithm; "auto" = toeplitz for T <= TOEPLITZ_MAX_T (kernels/limits.py), else scan.
    Results agree to rounding.
    """
    check_s4d_scan_args(u, lam, c, d)
    _check_method(method)

    def conv_kernel(T):
        dtype = acc_dtype(u, lam, c, d)
        return S4DConvKernelFn.apply(lam.to(dtype), c.to(dtype), T)

    return run_op("s4d_scan", backend, u, lambda: s4d_scan_ref(u, lam, c, d),
                  lambda u_: _s4d_triton(u_, d, method, lambda: (lam, c), conv_kernel))


def s4d_zoh_scan(u, log_dt, log_A_real, A_imag, C, d, *, backend: str = "auto", method: str = "auto"
                 ) -> torch.Tensor:
    """The S4D layer's op from its continuous parameters: s4d_scan(u, *s4d_discretize(log_dt,
    log_A_real, A_imag, C), d, backend=backend, method=method).

    u: real [B, T, S, H]; log_dt [H]; log_A_real, A_imag [H, N]; C real [H, N, 2]; d [H]. Returns y
    [B, T, S, H] as s4d_scan does. With the Triton backend's Toeplitz method the discretisation runs
    inside the kernel that builds K (forward and backward: one launch each instead of ~25 small ops).
    """
    check_real_float("u", u)
    check_rank("u", u, 4, "[B, T, S, H], time is dim 1")
    H = u.shape[-1]
    check_s4d_zoh_params(log_dt, log_A_real, A_imag, C, H)
    check_real_float("d", d)
    check_shape("d", d, (H,), "[H]")
    check_same_device(u=u, log_dt=log_dt, log_A_real=log_A_real, A_imag=A_imag, C=C, d=d)
    _check_method(method)
    params = (log_dt, log_A_real, A_imag, C)

    def conv_kernel(T):
        dtype = acc_dtype(u, *params, d)
        return S4DZohConvKernelFn.apply(*(p.to(dtype) for p in params), T)

    return run_op("s4d_scan", backend, u, lambda: s4d_scan_ref(u, *s4d_discretize(*params), d),
                  lambda u_: _s4d_triton(u_, d, method, lambda: s4d_discretize(*params), conv_kernel))


def s4d_step(u_t, state, lam, c, d, *, backend: str = "auto") -> tuple[torch.Tensor, torch.Tensor]:
    """Advance the S4D state by one step (rollout). u_t real [..., H]; state real [..., H, N, 2]
    (zeros before the first step). Returns (y_t [..., H] in u_t's dtype, new state [..., H, N, 2]
    in state's dtype). With the Triton backend the step is one kernel; its backward is PyTorch."""
    check_real_float("u_t", u_t)
    check_rank("u_t", u_t, range(1, 16), "[..., H]")
    check_nonempty("u_t", u_t, "[..., H]")
    _check_params(lam, c, d, u_t.shape[-1])
    check_real_float("state", state)
    check_shape("state", state, tuple(u_t.shape) + (lam.shape[1], 2), "[..., H, N, 2]")
    check_same_device(u_t=u_t, state=state, lam=lam, c=c, d=d)
    return run_op("s4d_step", backend, u_t, lambda: s4d_step_ref(u_t, state, lam, c, d),
                  lambda u_: S4DStepFn.apply(u_, state, lam, c, d))
