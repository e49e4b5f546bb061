"""The S4D memory's readout fused with the adaptive memory gate (what AMGFNO runs at its memory position):

    z        = GLU(a W_out^T + b_out)               a [..., H]: the memory's activations GELU(S4D(h));
                                                    W_out [2H, H], b_out [2H] (S4DMemory.output_linear)
    out, g   = gate_fusion(h, z, w_z, w_h, b, chi)  (memory_gate_freq: chi = sigmoid(w1 log_omega + b_omega))
    returns (out, mean(g))                          the mean gate without gradient: all AMGFNO keeps of g

Reads top to bottom: validation -> reference -> autograd Function -> public ops.

On the Triton backend (kernels/gate_fusion.py with READOUT) z is formed inside the gate kernels and
never written, g is reduced to its mean in the same kernel: forward, one kernel writing out (plus a
small sum for the mean) instead of Linear, GLU, gate and mean over the activations; backward, one
kernel for da and dh (recomputing z and the logits) and the split-K weight-gradient kernel for W_z,
W_h, b, W_out, b_out and chi (or w1, b_omega), reduced by one sum. H <= READOUT_MAX_H (kernels/limits.py);
beyond that "auto" runs the reference and "triton" refuses.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from amg_fast._checks import check_real_float, check_same_device, check_shape
from amg_fast.kernels.limits import READOUT_MAX_H
from amg_fast.ops._backend import run_op, triton_ops
from amg_fast.ops.gate import (check_frequency_gate_args, check_gate_fusion_args, chi_grads, frequency_gate,
                              gate_fusion_ref, log_omega_unsupported, split_gate_grads)

__all__ = ["memory_gate", "memory_gate_freq", "memory_gate_ref", "MemoryGateFn"]


def _check_readout(h, a, w_out, b_out) -> None:
    """w_out [2H, H], b_out [2H] (the readout Linear H -> 2H, nn.Linear convention)."""
    H = h.shape[-1]
    for name, t in (("w_out", w_out), ("b_out", b_out)):
        check_real_float(name, t)
    check_shape("w_out", w_out, (2 * H, H), "[2H, H], the readout Linear's weight")
    check_shape("b_out", b_out, (2 * H,), "[2H], the readout Linear's bias")
    check_same_device(h=h, a=a, w_out=w_out, b_out=b_out)


def memory_gate_ref(h, a, w_out, b_out, w_z, w_h, b, chi) -> tuple[torch.Tensor, torch.Tensor]:
    """Pure PyTorch: z = F.glu(F.linear(a, w_out, b_out)), (out, g) = gate_fusion_ref(h, z, ...);
    returns (out [..., H] in h's dtype, g's mean: 0-dim, fp32 or fp64, detached)."""
    z = F.glu(F.linear(a, w_out, b_out), dim=-1)
    out, g = gate_fusion_ref(h, z, w_z, w_h, b, chi)
    return out, g.detach().mean(dtype=torch.promote_types(g.dtype, torch.float32))


class MemoryGateFn(torch.autograd.Function):
    """Autograd over the READOUT gate kernels. h, a [..., H] (one dtype); w_out [2H, H], b_out [2H];
    w_z, w_h [H, H]; b [H]; chi 0-dim or [B] (or, with w1 and b_omega, log(omega + eps)) -> (out
    [..., H] in h's dtype, mean gate 0-dim, not differentiable). Saves only the inputs."""

    @staticmethod
    def forward(ctx, h, a, w_out, b_out, w_z, w_h, b, chi, w1=None, b_omega=None):
        out, g_mean = triton_ops().memory_gate_fwd(h, a, w_out, b_out, w_z, w_h, b, chi, w1, b_omega)
        ctx.save_for_backward(h, a, w_out, b_out, w_z, w_h, b, chi, w1, b_omega)
        ctx.mark_non_differentiable(g_mean)
        ctx.set_materialize_grads(False)  # no zeros kernel for g_mean's (absent) gradient
        return out, g_mean

    @staticmethod
    def backward(ctx, dout, _):
        h, a, w_out, b_out, w_z, w_h, b, chi, w1, b_omega = ctx.saved_tensors
        dout = torch.zeros_like(h) if dout is None else dout
        da, dh, grads = triton_ops().memory_gate_bwd(h, a, w_out, b_out, w_z, w_h, b, chi, dout, w1, b_omega)
        dw_z, dw_h, db, dw_out, db_out, dchi = split_gate_grads(grads, h.shape[-1], readout=True)
        need = ctx.needs_input_grad
        weights = ((w_out, dw_out), (b_out, db_out), (w_z, dw_z), (w_h, dw_h), (b, db))
        return (dh, da, *(g.to(w.dtype) if need[i] else None for i, (w, g) in enumerate(weights, 2)),
                *chi_grads(dchi, ctx, chi, w1, b_omega, 7))


def _dispatch(h, a, w_out, b_out, w_z, w_h, b, chi, freq, backend: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The reference or the Triton Function for validated arguments; freq = (w1, b_omega) means chi
    holds log(omega + eps) and the frequency gate is still to be applied."""
    H = h.shape[-1]
    too_wide = (f"memory_gate Triton kernels support H <= {READOUT_MAX_H} (every product is one full-width dot), "
                f"got H={H}; use backend='reference' (or gate_fusion after the readout)") if H > READOUT_MAX_H else None
    return run_op("memory_gate", backend, h,
                  lambda: memory_gate_ref(h, a, w_out, b_out, w_z, w_h, b,
                                          chi if freq is None else frequency_gate(chi, *freq)),
                  lambda h_: MemoryGateFn.apply(h_, a.to(h_.dtype), w_out, b_out, w_z, w_h, b, chi, *(freq or ())),
                  unsupported=too_wide or log_omega_unsupported("memory_gate_freq", chi, freq))


def memory_gate(h, a, w_out, b_out, w_z, w_h, b, chi, *, backend: str = "auto") -> tuple[torch.Tensor, torch.Tensor]:
    """gate_fusion(h, GLU(a w_out^T + b_out), w_z, w_h, b, chi), returning (out, mean gate).

    h, a: [..., H]; w_out [2H, H], b_out [2H]; w_z, w_h: [H, H] (x @ W.T); b: [H]; chi: 0-dim (or [B],
    one value per leading index of h). Returns (out [..., H] in h's dtype, g's mean: a 0-dim fp32
    (fp64 for fp64 inputs) tensor without gradient). Under autocast h and a take the autocast dtype.
    """
    check_gate_fusion_args(h, a, w_z, w_h, b, chi, z_name="a")
    _check_readout(h, a, w_out, b_out)
    return _dispatch(h, a, w_out, b_out, w_z, w_h, b, chi, None, backend)


def memory_gate_freq(h, a, w_out, b_out, w_z, w_h, b, log_omega, w1, b_omega, *, backend: str = "auto"
                     ) -> tuple[torch.Tensor, torch.Tensor]:
    """memory_gate with AMGFNO's frequency gate chi = sigmoid(w1 log_omega + b_omega) folded into the
    kernels (as gate_fusion_freq): log_omega = log(omega_f + eps), 0-dim or [B], no gradient (as there); w1,
    b_omega 0-dim. Other arguments and the result as memory_gate's."""
    check_gate_fusion_args(h, a, w_z, w_h, b, log_omega, chi_name="log_omega", z_name="a")
    _check_readout(h, a, w_out, b_out)
    check_frequency_gate_args(h, w1, b_omega)
    return _dispatch(h, a, w_out, b_out, w_z, w_h, b, log_omega, (w1, b_omega), backend)
