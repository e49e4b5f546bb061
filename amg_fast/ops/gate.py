"""Adaptive memory gate fusion: g = sigmoid(z W_z^T + h W_h^T + b) * chi, out = g z + (1 - g) h.

Reads top to bottom: validation -> reference -> autograd Function over the Triton kernels
(torch.ops.amg_fast.gate_fusion_*, registered in ops/_triton_ops.py) -> public ops.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from amg_fast._checks import (acc_dtype, check_nonempty, check_rank, check_real_float, check_same_device, check_shape,
                              check_unit_interval)
from amg_fast.kernels.limits import GATE_MAX_H, gate_method, wgrad_method
from amg_fast.ops._backend import run_op, triton_ops

__all__ = ["gate_fusion", "gate_fusion_ref", "gate_fusion_freq", "frequency_gate", "check_gate_fusion_args",
           "check_frequency_gate_args", "GateFusionFn", "split_gate_grads", "chi_grads", "log_omega_unsupported"]


def check_gate_fusion_args(h, z, w_z, w_h, b, chi, chi_name: str = "chi", z_name: str = "z") -> None:
    """h, z [..., H] (no empty dimension); w_z, w_h [H, H]; b [H]; chi 0-dim, or [B] with one value per
    h.shape[0] (chi_name, z_name: what errors call them). A gate weight chi must also be finite and in
    [0, 1] (checked with one host sync, except while compiling or capturing); log_omega is not range-checked."""
    for name, t in (("h", h), (z_name, z), ("w_z", w_z), ("w_h", w_h), ("b", b), (chi_name, chi)):
        check_real_float(name, t)
    check_same_device(h=h, w_z=w_z, w_h=w_h, b=b, **{z_name: z, chi_name: chi})
    check_rank("h", h, range(1, 16), "[..., H]")
    check_nonempty("h", h, "[..., H]")
    if z.shape != h.shape:
        raise ValueError(f"{z_name} must have the shape of h {tuple(h.shape)}, got {tuple(z.shape)}")
    H = h.shape[-1]
    check_shape("w_z", w_z, (H, H), "[H, H], nn.Linear convention")
    check_shape("w_h", w_h, (H, H), "[H, H], nn.Linear convention")
    check_shape("b", b, (H,), "[H]")
    if chi.dim() == 1 and h.dim() >= 2:
        check_shape(chi_name, chi, (h.shape[0],), "0-dim, or [B] = one value per h.shape[0]")
    elif chi.dim() != 0:
        raise ValueError(
            f"{chi_name} must be a 0-dim tensor (or [B] with B = h.shape[0]), got shape {tuple(chi.shape)}"
        )
    if chi_name == "chi":
        check_unit_interval("chi", chi)  # a gate weight: g = sigmoid(.) * chi must stay in [0, 1]


def check_frequency_gate_args(h, w1, b_omega) -> None:
    """w1, b_omega: real 0-dim tensors on h's device (the frequency gate's learnable scalars)."""
    for name, t in (("w1", w1), ("b_omega", b_omega)):
        check_real_float(name, t)
        check_shape(name, t, (), "a 0-dim tensor")
    check_same_device(h=h, w1=w1, b_omega=b_omega)


def _broadcast_chi(chi: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """chi 0-dim or [B] -> a tensor broadcastable against h [B, ..., H]."""
    return chi.reshape(chi.shape + (1,) * (h.dim() - chi.dim()))


def frequency_gate(log_omega, w1, b_omega) -> torch.Tensor:
    """chi = sigmoid(w1 log_omega + b_omega): log_omega = log(omega_f + eps), 0-dim or [B]; w1, b_omega 0-dim."""
    return torch.sigmoid(w1 * log_omega + b_omega)


def gate_fusion_ref(h, z, w_z, w_h, b, chi) -> tuple[torch.Tensor, torch.Tensor]:
    """Pure-PyTorch reference. h, z [..., H] -> (out [..., H], g [..., H]) in h's dtype."""
    dtype = acc_dtype(h, z, w_z, w_h, b, chi)
    h32, z32 = h.to(dtype), z.to(dtype)
    logits = F.linear(z32, w_z.to(dtype)) + F.linear(h32, w_h.to(dtype), b.to(dtype))
    g = torch.sigmoid(logits) * _broadcast_chi(chi.to(dtype), h)
    out = g * z32 + (1 - g) * h32
    return out.to(h.dtype), g.to(h.dtype)


def split_gate_grads(grads: torch.Tensor, H: int, readout: bool = False) -> tuple[torch.Tensor, ...]:
    """The gate backward's flat gradients -> views (dW_z [H, H], dW_h [H, H], db [H], then with readout
    dW_out [2H, H], db_out [2H], and last the dchi values)."""
    sizes = [H * H, H * H, H] + ([2 * H * H, 2 * H] if readout else [])
    parts = grads.split(sizes + [grads.numel() - sum(sizes)])
    shapes = [(H, H), (H, H), (H,)] + ([(2 * H, H), (2 * H,)] if readout else [])
    return tuple(p.view(shape) for p, shape in zip(parts, shapes)) + (parts[-1],)


def chi_grads(dchi: torch.Tensor, ctx, chi, w1, b_omega, first: int) -> tuple:
    """(dchi, dw1, db_omega) for the Function's inputs chi (or log_omega), w1, b_omega at positions
    first, first + 1, first + 2: without w1, dchi (chi's shape); with w1 and b_omega, dchi holds
    (db_omega, dw1) and log_omega gets none."""
    need = ctx.needs_input_grad
    if w1 is None:
        return dchi.reshape(chi.shape).to(chi.dtype) if need[first] else None, None, None
    return None, dchi[1].to(w1.dtype) if need[first + 1] else None, dchi[0].to(b_omega.dtype) if need[first + 2] else None


class GateFusionFn(torch.autograd.Function):
    """Autograd over the Triton kernels. h, z [..., H] (one dtype); w_z, w_h [H, H]; b [H];
    chi 0-dim or [B] -> (out, g) [..., H] in h's dtype.

    Fused (kernels.limits.gate_method, the default): saves only the inputs, and the backward kernel recomputes
    the logits and writes dz, dh and dlogits. cuBLAS (fp32 / fp64 activations): the logits and the products of
    dlogits by torch GEMMs around one Triton pass each way; the logits are saved too. The weight gradients
    dlogits^T z, dlogits^T h (and db, dchi) come from a split-K Triton kernel over the rows, or cuBLAS
    (kernels.limits.wgrad_method: by default for fp32 activations), all in one flat tensor. Each gradient comes
    back in its input's dtype.

    With w1 and b_omega (0-dim) the frequency gate is folded in: chi holds log(omega + eps) (no
    gradient) and the kernels form chi = sigmoid(w1 chi + b_omega) and the w1, b_omega gradients.
    """

    @staticmethod
    def forward(ctx, h, z, w_z, w_h, b, chi, w1=None, b_omega=None):
        logits = None  # the cuBLAS method's, kept for its backward
        if gate_method("auto", h.dtype) == "cublas":
            out, g, logits = triton_ops().gate_cublas_fwd(h, z, w_z, w_h, b, chi, w1, b_omega)
        else:
            out, g = triton_ops().gate_fusion_fwd(h, z, w_z, w_h, b, chi, w1, b_omega)
        ctx.save_for_backward(h, z, w_z, w_h, b, chi, w1, b_omega, logits)
        ctx.cublas = wgrad_method("auto", h.dtype) == "cublas"
        ctx.set_materialize_grads(False)  # g unused (AMGFNO keeps its detached mean): dg None, not a zeros kernel
        return out, g

    @staticmethod
    def backward(ctx, dout, dg):
        h, z, w_z, w_h, b, chi, w1, b_omega, logits = ctx.saved_tensors
        dout = torch.zeros_like(h) if dout is None else dout
        if logits is not None:  # the forward's method, whatever the switch says now
            dz, dh, grads = triton_ops().gate_cublas_bwd(h, z, w_z, w_h, b, chi, logits, dout, dg, w1, b_omega,
                                                         ctx.cublas)
        else:
            dz, dh, grads = triton_ops().gate_fusion_bwd(h, z, w_z, w_h, b, chi, dout, dg, w1, b_omega, ctx.cublas)
        dw_z, dw_h, db, dchi = split_gate_grads(grads, h.shape[-1])
        need = ctx.needs_input_grad
        return (dh, dz, dw_z.to(w_z.dtype) if need[2] else None, dw_h.to(w_h.dtype) if need[3] else None,
                db.to(b.dtype) if need[4] else None, *chi_grads(dchi, ctx, chi, w1, b_omega, 5))


def gate_fusion(h, z, w_z, w_h, b, chi, *, backend: str = "auto") -> tuple[torch.Tensor, torch.Tensor]:
    """Fuse the memory output z with the Markovian state h through the adaptive gate.

    h, z: [..., H]; w_z, w_h: [H, H] (x @ W.T); b: [H]; chi: 0-dim frequency gate (or [B] with
    one value per leading index of h). Returns (out, g), both [..., H] in h's dtype.

    backend="triton" runs the fused kernels for H <= 256 (a ValueError above that; "auto" then
    uses the reference). Under autocast, h and z are cast to the autocast dtype (fp64 stays).
    The kernels accumulate in fp32 (fp64 for fp64 inputs); fp32 dots are fp32-accurate (tf32x3)
    unless TF32 matmuls are allowed (kernels._common.dot_precision).
    """
    check_gate_fusion_args(h, z, w_z, w_h, b, chi)
    return _dispatch(h, z, w_z, w_h, b, chi, None, backend)


def log_omega_unsupported(op: str, log_omega: torch.Tensor, freq) -> str | None:
    """Why op's Triton kernels cannot take this frequency-gate input, or None: they give log_omega (data,
    log(omega + eps)) no gradient, so one that requires grad is refused ("auto" runs the reference, which
    gives it one) rather than silently left without its gradient."""
    if freq is None or not (log_omega.requires_grad and torch.is_grad_enabled()):
        return None
    return (f"{op}'s Triton kernels give log_omega no gradient, got a log_omega that requires grad: "
            "pass log_omega.detach(), or use backend='reference'")


def _dispatch(h, z, w_z, w_h, b, chi, freq, backend: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The reference or the Triton Function for validated arguments; freq = (w1, b_omega) means chi
    holds log(omega + eps) and the frequency gate is still to be applied."""
    H = h.shape[-1]
    too_wide = (f"gate_fusion Triton kernels support H <= {GATE_MAX_H} (all H output columns of a row tile "
                f"live in one program), got H={H}; use backend='reference' for wider gates") if H > GATE_MAX_H else None
    return run_op("gate_fusion", backend, h,
                  lambda: gate_fusion_ref(h, z, w_z, w_h, b, chi if freq is None else frequency_gate(chi, *freq)),
                  lambda h_: GateFusionFn.apply(h_, z.to(h_.dtype), w_z, w_h, b, chi, *(freq or ())),
                  unsupported=too_wide or log_omega_unsupported("gate_fusion_freq", chi, freq))


def gate_fusion_freq(h, z, w_z, w_h, b, log_omega, w1, b_omega, *, backend: str = "auto"
                     ) -> tuple[torch.Tensor, torch.Tensor]:
    """gate_fusion(h, z, w_z, w_h, b, frequency_gate(log_omega, w1, b_omega)): AMGFNO's gate with its
    frequency gate chi = sigmoid(w1 log_omega + b_omega) folded into the Triton kernels (forward and
    backward; no separate launches for chi or its w1, b_omega gradients).

    log_omega: log(omega_f + eps), 0-dim (or [B], one per leading index of h), no gradient on Triton (one
    that requires grad: a ValueError with backend="triton", the reference with "auto"); w1, b_omega: 0-dim.
    Other arguments and the result as gate_fusion's.
    """
    check_gate_fusion_args(h, z, w_z, w_h, b, log_omega, chi_name="log_omega")
    check_frequency_gate_args(h, w1, b_omega)
    return _dispatch(h, z, w_z, w_h, b, log_omega, (w1, b_omega), backend)
