"""Diagonal S4D scan over time: x_t = lam * x_{t-1} + u_t, y_t = 2 Re(c . x_t) + d u_t.

Complex parameters are stored as real [..., 2] (real, imag). The reference uses the equivalent
causal convolution y = K * u + d u with the time-invariant kernel K[h, l] = 2 Re(sum_n c lam^l)
(the state-spaces s4d.py formulation, FFT of length 2T); s4d_step is the recurrent form used for
rollout, one step costing O(1) in the history length.

The Triton backend (kernels/s4d_scan.py) has three methods, all parallel over (b, s, h):
"toeplitz" for short T (per channel the causal Toeplitz matrix of K = s4d_conv_kernel applied as
batched tl.dots; K built by a kernel, whose backward kernel gives the lam and c gradients, and dd,
from the partial sums of dK), "toeplitz_loop" (the same product as a loop over the lag: the earlier
kernels, kept to compare) and "scan" for long T (a sequential recurrence in registers whose backward
recomputes the states, stable for any T). "auto" picks toeplitz for T <= TOEPLITZ_MAX_T
(kernels/limits.py), or what $AMG_FAST_S4D_METHOD names. activation="gelu" returns GELU(y): on the
toeplitz method the GELU runs in the kernel's epilogue (and its derivative in the backward's
prologue), elsewhere as a torch op after.
u may carry extra spatial axes, [B, T, X, Y, ..., H]: they are folded into S (the scan runs over
time at every grid point).
Reads top to bottom: validation -> reference -> autograd Functions over the Triton kernels
(torch.ops.amg_fast.s4d_*, registered in ops/_triton_ops.py) -> public ops.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from amg_fast._checks import acc_dtype, check_nonempty, check_rank, check_real_float, check_same_device, check_shape
from amg_fast.kernels.limits import S4D_METHODS, s4d_method
from amg_fast.ops._backend import run_op, triton_ops

__all__ = ["s4d_scan", "s4d_zoh_scan", "s4d_step", "s4d_scan_ref", "s4d_step_ref", "s4d_conv_kernel",
           "s4d_discretize", "check_s4d_scan_args", "check_s4d_zoh_params", "S4DToeplitzFn", "S4DScanFn",
           "S4DStepFn", "ACTIVATIONS"]

ACTIVATIONS = (None, "gelu")

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


U_LAYOUT = "[B, T, S, H] or [B, T, X, Y, ..., H], time is dim 1"


def _check_u(u) -> None:
    check_real_float("u", u)
    check_rank("u", u, range(4, 16), U_LAYOUT)
    check_nonempty("u", u, U_LAYOUT)


def check_s4d_scan_args(u, lam, c, d) -> None:
    """u [B, T, S, H] (or [B, T, X, Y, ..., H]); lam, c [H, N, 2]; d [H]."""
    _check_u(u)
    _check_params(lam, c, d, u.shape[-1])
    check_same_device(u=u, lam=lam, c=c, d=d)


def _check_activation(activation) -> None:
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")


def _spatial_folded(u: torch.Tensor) -> torch.Tensor:
    """u [B, T, X, Y, ..., H] -> [B, T, X*Y*..., H] (a view when it can be)."""
    return u if u.dim() == 4 else u.reshape(u.shape[0], u.shape[1], -1, u.shape[-1])


class _Powers(torch.autograd.Function):
    """lam^0, lam^1, ..., lam^(T-1) [..., T] of complex lam [...] as a running product (cumprod; lam^0 = 1
    exactly, a pole lam = 0 included: exp(l log lam) was NaN at l = 0 there). Its own backward, from the saved
    powers: dL/dlam = sum_{l >= 1} g_l conj(l lam^(l-1)) -- cumprod's asks the host whether lam holds a zero
    (.item()), which CUDA-graph capture refuses (a graphed reference-kernel step of every model with S4D memory
    failed to capture)."""

    @staticmethod
    def forward(ctx, lam_c: torch.Tensor, T: int) -> torch.Tensor:
        factors = torch.cat([torch.ones_like(lam_c)[..., None], lam_c[..., None].expand(*lam_c.shape, max(T - 1, 0))],
                            dim=-1)
        powers = factors.cumprod(dim=-1)[..., :T]  # [..., T] (T = 0: empty)
        ctx.save_for_backward(powers)
        return powers

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (powers,) = ctx.saved_tensors
        T = powers.shape[-1]
        if T < 2:  # lam^0 = 1 alone: no dependence on lam
            return grad.new_zeros(powers.shape[:-1]), None
        exponents = torch.arange(1, T, device=powers.device, dtype=powers.real.dtype)
        return (grad[..., 1:] * exponents * powers[..., :-1].conj()).sum(-1), None


def s4d_conv_kernel(lam: torch.Tensor, c: torch.Tensor, T: int) -> torch.Tensor:
    """K[h, l] = 2 Re(sum_n c[h, n] lam[h, n]^l) for l < T. lam, c real [H, N, 2] -> [H, T].

    lam^l as a running product (_Powers; a pole lam = 0 included), as accurate in fp32 over 4096 steps as
    exp(l log lam) (tests/ops/test_s4d_scan.py); its backward reads nothing on the host (CUDA graphs)."""
    lam_c, c_c = torch.view_as_complex(lam.contiguous()), torch.view_as_complex(c.contiguous())
    return 2 * torch.einsum("hn,hnl->hl", c_c, _Powers.apply(lam_c, T)).real  # powers [H, N, T]


def s4d_scan_ref(u, lam, c, d) -> torch.Tensor:
    """Pure-PyTorch reference. u [B, T, S, H] (or [B, T, X, Y, ..., H]) -> y of u's shape and dtype
    (computes in >= fp32)."""
    if u.dim() > 4:
        return s4d_scan_ref(_spatial_folded(u), lam, c, d).reshape(u.shape)
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


class S4DToeplitzFn(torch.autograd.Function):
    """y = Kk * u + d u (GELU(...) with gelu), the causal Toeplitz form, with Kk [H, T] built in a
    kernel from the S4D parameters. u [B, T, S, H]; d [H]; kind "poles": params = (lam, c) [H, N, 2];
    kind "zoh": params = (log_dt [H], log_A_real, A_imag [H, N], C [H, N, 2]) (the ZOH discretisation
    folded into the Kk kernel, forward and backward). loop: the lag-loop kernels (no GELU).

    Forward: Kk (one kernel), the product (one kernel). Backward: du and per-group partial sums of
    dKk (one kernel); every parameter gradient and dd from those partials (one kernel). Four
    launches for the layer's whole S4D, discretisation and D skip included."""

    @staticmethod
    def forward(ctx, u, d, kind, gelu, loop, *params):
        ops = triton_ops()
        build = ops.s4d_conv_kernel_fwd if kind == "poles" else ops.s4d_zoh_conv_kernel_fwd
        kk = build(*params, u.shape[1])
        ctx.save_for_backward(u, d, kk, *params)
        ctx.kind, ctx.gelu, ctx.loop = kind, gelu, loop
        return ops.s4d_toeplitz_fwd(u, kk, d, gelu, loop)

    @staticmethod
    def backward(ctx, dy):
        u, d, kk, *params = ctx.saved_tensors
        ops = triton_ops()
        du, part = ops.s4d_toeplitz_bwd(dy, u, kk, d, ctx.gelu, ctx.loop)
        grads = (ops.s4d_conv_kernel_bwd if ctx.kind == "poles" else ops.s4d_zoh_conv_kernel_bwd)(part, *params)
        *dparams, dd = grads
        return _needed(ctx, du, dd.to(d.dtype), None, None, None, *dparams)


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


def _s4d_triton(u, d, method: str, activation, kind: str, params: tuple, poles) -> torch.Tensor:
    """The Triton path for u [B, T, S, H] by method (kernels.limits.s4d_method): the Toeplitz kernels
    on Kk built from params (kind "poles" or "zoh"; GELU in the epilogue on "toeplitz"), or the scan
    kernel on poles() = (lam, c), with GELU after it."""
    chosen = s4d_method(method, u.shape[1])
    if chosen == "toeplitz":
        return S4DToeplitzFn.apply(u, d, kind, activation == "gelu", False, *params)
    if chosen == "toeplitz_loop":
        y = S4DToeplitzFn.apply(u, d, kind, False, True, *params)
    else:
        y = S4DScanFn.apply(u, *poles(), d)
    return F.gelu(y) if activation == "gelu" else y


def _check_method(method: str) -> None:
    if method not in S4D_METHODS:
        raise ValueError(f"method must be one of {S4D_METHODS}, got {method!r}")


def _run_s4d(u, d, backend: str, method: str, activation, kind: str, params: tuple, reference, poles
             ) -> torch.Tensor:
    """run_op for both public scans: extra spatial axes folded into S, the parameters cast to the
    accumulation dtype on the Triton path, the result back in u's shape."""
    folded = _spatial_folded(u)

    def triton(u_):
        dtype = acc_dtype(u_, d, *params)
        return _s4d_triton(u_, d, method, activation, kind, tuple(p.to(dtype) for p in params), poles)

    def ref():
        y = reference(folded)
        return F.gelu(y) if activation == "gelu" else y

    return run_op("s4d_scan", backend, folded, ref, triton).reshape(u.shape)


# ----------------------------------------------------------------------------- public ops


def s4d_scan(u, lam, c, d, *, backend: str = "auto", method: str = "auto", activation: str | None = None
             ) -> torch.Tensor:
    """Diagonal S4D recurrence over time for every (b, s, h), started from x_{-1} = 0.

    u: real [B, T, S, H] (or [B, T, X, Y, ..., H]: every grid point is scanned over time); lam, c:
    real [H, N, 2] (complex pole and folded readout); d: real [H]. Returns y of u's shape in u's
    dtype (under autocast with the Triton backend: the autocast dtype); activation="gelu" returns
    GELU(y) (fused into the Toeplitz kernels).
    method (Triton backend only; the reference ignores it): "auto" | "toeplitz" | "toeplitz_loop" |
    "scan" forces the algorithm; "auto" = $AMG_FAST_S4D_METHOD if set, else toeplitz for T <=
    TOEPLITZ_MAX_T (kernels/limits.py), else scan. Results agree to rounding.
    """
    check_s4d_scan_args(u, lam, c, d)
    _check_method(method)
    _check_activation(activation)
    return _run_s4d(u, d, backend, method, activation, "poles", (lam, c),
                    lambda u4: s4d_scan_ref(u4, lam, c, d), lambda: (lam, c))


def s4d_zoh_scan(u, log_dt, log_A_real, A_imag, C, d, *, backend: str = "auto", method: str = "auto",
                 activation: str | None = None) -> torch.Tensor:
    """The S4D layer's op from its continuous parameters: s4d_scan(u, *s4d_discretize(log_dt,
    log_A_real, A_imag, C), d, backend=backend, method=method, activation=activation).

    u: real [B, T, S, H] (or [B, T, X, Y, ..., H]); log_dt [H]; log_A_real, A_imag [H, N]; C real
    [H, N, 2]; d [H]. Returns y as s4d_scan does. With the Triton backend's Toeplitz methods the
    discretisation runs inside the kernel that builds K (forward and backward: one launch each
    instead of ~25 small ops), and the D skip's gradient comes out of the same backward kernel.
    """
    _check_u(u)
    H = u.shape[-1]
    check_s4d_zoh_params(log_dt, log_A_real, A_imag, C, H)
    check_real_float("d", d)
    check_shape("d", d, (H,), "[H]")
    check_same_device(u=u, log_dt=log_dt, log_A_real=log_A_real, A_imag=A_imag, C=C, d=d)
    _check_method(method)
    _check_activation(activation)
    params = (log_dt, log_A_real, A_imag, C)
    return _run_s4d(u, d, backend, method, activation, "zoh", params,
                    lambda u4: s4d_scan_ref(u4, *s4d_discretize(*params), d), lambda: s4d_discretize(*params))


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
