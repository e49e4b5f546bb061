"""The AMGFNO training step the benchmarks time, shared by test_bench_train_step.py and gpu_summary.py;
with a 2D shape (Shape.spatial_dims = 2) the same step of AMGFNO2d on an S x S grid, u [B, T+1, S, S, 1].

One step = the trainer's: zero_grad, teacher-forced forward + loss (the trainer's loss: sum of
squares over space and channels, mean over trajectories and steps, taken in fp32; under bf16 the
forward runs in the trainer's autocast), backward, Adam step. The optimizer is the trainer's fused
Adam with a tensor lr, capturable on a GPU so that amg_fast.train.graphs.GraphedTrainStep (the
trainer's --cuda-graph) can replay the step from a CUDA graph. u [B, T+1, S, 1] is random (timing
does not depend on the values); the model is AMGFNO of width H, K = S/2 modes, omega_f = 0.1.

Backends: "reference" (eager PyTorch), "triton" (the Triton kernels), or the reference with its
forward + loss under torch.compile (compile_backend="inductor"; backward through AOTAutograd, the
Adam step eager, as in the trainer). reference_step64 gives the float64 result a step's first call
is checked against (step_result: the loss and every parameter's gradient).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from _providers import Compiled, Shape, generator, randn
from amg_fast.models import get_model
from amg_fast.train.evaluate import one_step_loss
from amg_fast.train.precision import autocast

OMEGA = 0.1
LR = 1e-3


def step_loss(model: torch.nn.Module, u: torch.Tensor) -> torch.Tensor:
    """The trainer's loss of one teacher-forced batch u [B, T+1, S, C] (2D: [B, T+1, S, S, C];
    amg_fast.train.trainer._loss)."""
    return one_step_loss(model(u[:, :-1]).to(u.dtype), u[:, 1:])


def _model(shape: Shape, backend: str) -> torch.nn.Module:
    """AMGFNO (AMGFNO2d for a 2D shape) of width H, K modes (per axis), 2N state dims, omega_f = OMEGA."""
    name = "amgfno2d" if shape.spatial_dims == 2 else "amgfno"
    return get_model(name, width=shape.H, modes=shape.K, omega=OMEGA, state_dim=2 * shape.N, backend=backend)


@dataclass
class StepCase:
    """A model, its optimizer, a batch u (and the per-trajectory omega w the trainer's step takes,
    unused with a fixed omega) and loss_fn(model, u, w) -> (loss, None) in the trainer's signature
    (amg_fast.train.graphs), all on u's device. compiled: the Compiled forward + loss, if any."""
    model: torch.nn.Module
    optimizer: torch.optim.Optimizer
    u: torch.Tensor
    w: torch.Tensor
    loss_fn: object
    compiled: Compiled | None = None


def build_step(shape: Shape, backend: str, precision: str, device: torch.device,
               compile_backend: str | None = None) -> StepCase:
    """The step of AMGFNO at shape on device with backend ("reference" or "triton") in precision
    (fp32, tf32, bf16: autocast for bf16; the caller sets the matmul precision, e.g. with
    amg_fast.train.precision.precision_scope); compile_backend: also torch.compile forward + loss."""
    torch.manual_seed(0)
    model = _model(shape, backend).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=torch.tensor(LR, device=device), fused=True,
                                 capturable=device.type == "cuda")
    u = randn(shape.B, shape.T + 1, *(shape.S,) * shape.spatial_dims, 1, gen=generator(0), grad=False).to(device)
    w = torch.full((shape.B,), OMEGA, device=device)

    def loss_in_precision(u_):
        with autocast(precision, u_.device):
            return step_loss(model, u_)

    compiled = Compiled(loss_in_precision, backend=compile_backend) if compile_backend else None
    forward = compiled or loss_in_precision

    def loss_fn(model_, u_, w_):
        return forward(u_), None

    return StepCase(model, optimizer, u, w, loss_fn, compiled)


def step_result(case: StepCase, loss: torch.Tensor) -> tuple:
    """(loss, every parameter's gradient) after a step: what reference_step64 computes."""
    return (loss.detach(),) + tuple(p.grad for p in case.model.parameters())


def reference_step64(case: StepCase, shape: Shape) -> tuple:
    """(loss, gradients) of the first step of case's model, by the eager reference in float64 from the
    model's current parameters (call it before the first step)."""
    reference = _model(shape, "reference").to(case.u.device, torch.float64)
    reference.load_state_dict(case.model.state_dict())
    loss = step_loss(reference, case.u.double())
    grads = torch.autograd.grad(loss, list(reference.parameters()), allow_unused=True)
    return (loss.detach(),) + tuple(grads)
