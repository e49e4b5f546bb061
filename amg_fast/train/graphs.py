"""A whole training step (zero_grad, forward, loss, backward, Adam step) as one CUDA graph.

At the paper's sizes every op call is launch-bound (measured on an H200: the eager spectral conv
takes about as long at S = 32 as at S = 128); replaying the captured step issues all its kernels
with one launch. Follows PyTorch's whole-network capture recipe: warm-up steps on a side stream
(they compile the Triton kernels and create the optimizer state), capture, then per batch copy the
inputs into static buffers and replay. The warm-up steps change the model and optimizer; their
state from before the warm-up is restored in place, so the first replay is the run's first step
and a graphed run follows the eager one. Needs: CUDA, one process, a fixed batch shape (other
shapes run eagerly), an optimizer built with capturable=True and a tensor lr.

A replay runs no Python: every per-step statistic must be an output of the captured step (a
tensor bound at capture and rewritten in place by each replay), never a model attribute read
afterwards -- an eager call (an evaluation) rebinds such an attribute and it would go stale.
"""
from __future__ import annotations

from typing import Callable

import torch

__all__ = ["capture_training_state", "restore_training_state", "EagerTrainStep", "GraphedTrainStep"]


def capture_training_state(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict:
    """Copies of the model's parameters and buffers and of the optimizer's per-parameter state."""
    return {"model": [t.detach().clone() for t in model.state_dict().values()],
            "optimizer": {p: {k: v.clone() for k, v in optimizer.state[p].items() if torch.is_tensor(v)}
                          for group in optimizer.param_groups for p in group["params"] if p in optimizer.state}}


def restore_training_state(model: torch.nn.Module, optimizer: torch.optim.Optimizer, saved: dict) -> None:
    """Write `saved` back into the same tensors (a captured graph holds their addresses). Optimizer
    state created after the capture of `saved` (lazily, by the first step) is reset to zeros, as
    a fresh optimizer would start."""
    with torch.no_grad():
        for live, old in zip(model.state_dict().values(), saved["model"]):
            live.copy_(old)
        for group in optimizer.param_groups:
            for p in group["params"]:
                before = saved["optimizer"].get(p)
                for key, value in optimizer.state.get(p, {}).items():
                    if not torch.is_tensor(value):
                        continue
                    if before is not None and key in before:
                        value.copy_(before[key])
                    else:
                        value.zero_()


# loss_fn(model, u, w) -> (0-dim loss, 0-dim statistic or None), e.g. AMGFNO's mean gate.
LossFn = Callable[[torch.nn.Module, torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor | None]]


def _detached(t: torch.Tensor | None) -> torch.Tensor | None:
    return None if t is None else t.detach()


class EagerTrainStep:
    """(loss, stat) = step(u, w): one optimizer step on the batch (u, w), run eagerly.

    loss_fn(model, u, w) -> (loss, stat): stat is a per-step statistic (a detached 0-dim tensor,
    e.g. AMGFNO's mean gate) or None. Both come back detached.
    """

    def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, loss_fn: LossFn):
        self.model, self.optimizer, self.loss_fn = model, optimizer, loss_fn

    def eager_step(self, u: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        self.optimizer.zero_grad(set_to_none=True)
        loss, stat = self.loss_fn(self.model, u, w)
        loss.backward()
        self.optimizer.step()
        return loss.detach(), _detached(stat)

    def __call__(self, u: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        return self.eager_step(u, w)


class GraphedTrainStep(EagerTrainStep):
    """(loss, stat) = step(u, w), replayed from a CUDA graph; loss and stat are the graph's static
    outputs (rewritten by the next replay: use or copy them before the next call).

    Built lazily from the first batch it sees; later batches of that shape replay the graph, other
    shapes (a short last batch) run the same step eagerly.
    """

    def __init__(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, loss_fn: LossFn, warmup: int = 3):
        super().__init__(model, optimizer, loss_fn)
        self.warmup = warmup
        self.graph: torch.cuda.CUDAGraph | None = None
        self.replay: Callable[[], None] | None = None
        self.static_u = self.static_w = self.static_loss = self.static_stat = None

    def _warm_up(self) -> None:
        """Warm-up steps on the static batch, on a side stream for CUDA tensors (as the recipe asks)."""
        if not self.static_u.is_cuda:
            for _ in range(self.warmup):
                self.eager_step(self.static_u, self.static_w)
            return
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(self.warmup):
                self.eager_step(self.static_u, self.static_w)
        torch.cuda.current_stream().wait_stream(side)

    def _static_step(self) -> None:
        """The captured work: forward, loss, backward, optimizer step on the static buffers."""
        self.static_loss, self.static_stat = self.loss_fn(self.model, self.static_u, self.static_w)
        self.static_loss.backward()
        self.optimizer.step()

    def _record(self, fn: Callable[[], None]) -> Callable[[], None]:
        """Capture fn in a CUDA graph (nothing runs) and return the graph's replay."""
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            fn()
        return self.graph.replay

    def _capture(self, u: torch.Tensor, w: torch.Tensor) -> None:
        saved = capture_training_state(self.model, self.optimizer)
        self.static_u, self.static_w = u.clone(), w.clone()
        self._warm_up()
        self.optimizer.zero_grad(set_to_none=True)  # grads are then allocated inside the graph
        try:
            self.replay = self._record(self._static_step)
        except RuntimeError as err:  # e.g. an op that syncs with the host: say so, do not run on eagerly
            raise RuntimeError(f"--cuda-graph: capturing the training step failed ({str(err).strip()[:300]}); "
                               "train without --cuda-graph") from err
        restore_training_state(self.model, self.optimizer, saved)

    def __call__(self, u: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        if self.replay is None:
            self._capture(u, w)
        elif u.shape != self.static_u.shape or w.shape != self.static_w.shape:
            return self.eager_step(u, w)
        self.static_u.copy_(u)
        self.static_w.copy_(w)
        self.replay()
        return self.static_loss.detach(), _detached(self.static_stat)
