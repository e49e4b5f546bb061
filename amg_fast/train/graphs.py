"""A whole training step (zero_grad, forward, loss, backward, Adam step) as one CUDA graph, and an
evaluation batch's forward and rollout as another.

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

from typing import Callable, TypeVar

import torch

from amg_fast.train.evaluate import Predictor

__all__ = ["capture_training_state", "restore_training_state", "EagerTrainStep", "GraphedTrainStep",
           "GraphedEvaluation"]


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


T = TypeVar("T")

# loss_fn(model, u, w) -> (0-dim loss, 0-dim statistic or None), e.g. AMGFNO's mean gate.
LossFn = Callable[[torch.nn.Module, torch.Tensor, torch.Tensor], tuple[torch.Tensor, torch.Tensor | None]]


def _detached(t: torch.Tensor | None) -> torch.Tensor | None:
    return None if t is None else t.detach()


def _on_side_stream(fn: Callable[[], T], cuda: bool) -> T:
    """fn() on a fresh CUDA stream that first waits for the current one, which then waits for it: the capture
    recipe's warm-up (lazy initialisations happen off the stream a capture will use). Off CUDA, plainly fn()."""
    if not cuda:
        return fn()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        out = fn()
    torch.cuda.current_stream().wait_stream(side)
    return out


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
        def steps():
            for _ in range(self.warmup):
                self.eager_step(self.static_u, self.static_w)
        _on_side_stream(steps, self.static_u.is_cuda)

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


class GraphedEvaluation:
    """predictor(net, u, omega) for evaluate(): the work of train.evaluate.predict (teacher-forced forward, rollout,
    g-bar) on an evaluation batch, replayed from a CUDA graph captured for that batch tensor.

    The run's test batches are the same tensors at every evaluation; only the parameters change, in place, so a
    graph captured once per batch serves every later evaluation. A rollout step is one small forward whose launches
    Python issues one by one (a 256-trajectory batch of 25 steps took 0.17 s eagerly on the H200, 2026-11-30);
    replayed, its kernels run without the Python between them.
    A batch's first call runs predict eagerly (on a side stream: the recipe's warm-up, which also compiles the
    kernels), captures the graph, replays it once and keeps it only if the replay equals the eager result
    (relative L2 error at most `tolerance` in both predictions, g-bar too). A capture
    that fails or differs is logged and every later call runs eagerly: the evaluation never depends on the graph.
    Static outputs: a call's result is rewritten by the batch's next replay (evaluate() reads it at once).
    """

    def __init__(self, eager: Predictor, log=print, tolerance: float = 1e-4):
        self.eager, self.log, self.tolerance = eager, log, tolerance
        self.graphs: dict[tuple, tuple] = {}  # batch key -> (replay, static outputs, the inputs: kept alive)
        self.failed: str | None = None  # why graphs were given up, once they were

    @staticmethod
    def _key(u: torch.Tensor, omega: torch.Tensor | None) -> tuple:
        return tuple((t.data_ptr(), t.shape, t.dtype) if t is not None else None for t in (u, omega))

    def _record(self, fn: Callable[[], tuple]) -> tuple[Callable[[], None], tuple]:
        """Capture fn in a CUDA graph (nothing runs) -> (the graph's replay, fn's outputs: static tensors)."""
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = fn()
        return graph.replay, out

    def _differs(self, replayed: tuple, eager: tuple) -> str | None:
        for name, a, b in zip(("teacher-forced predictions", "rollout", "g-bar"), replayed, eager):
            if (a is None) != (b is None):
                return f"{name}: one of the two is missing"
            if a is not None:
                a, b = a.double(), b.double()
                err = float(torch.linalg.vector_norm(a - b) / torch.linalg.vector_norm(b).clamp_min(1e-300))
                if not err <= self.tolerance:  # NaN too
                    return f"{name} differ by {err:.3g} (relative L2; at most {self.tolerance:g} allowed)"
        return None

    def _give_up(self, why: str) -> None:
        self.failed, self.graphs = why, {}
        self.log(f"--cuda-graph: {why}; evaluating without a graph from now on")

    def __call__(self, net: torch.nn.Module, u: torch.Tensor, omega: torch.Tensor | None):
        if self.failed is not None:
            return self.eager(net, u, omega)
        key = self._key(u, omega)
        if key in self.graphs:
            replay, out, _ = self.graphs[key]
            replay()
            return out
        eager = _on_side_stream(lambda: self.eager(net, u, omega), u.is_cuda)
        eager = tuple(None if t is None else t.clone() for t in eager)  # not the model's own g-bar tensor
        try:
            replay, out = self._record(lambda: self.eager(net, u, omega))
            replay()
        except Exception as err:  # e.g. an op that reads a value on the host (the eager run just passed: the graph's)
            self._give_up(f"capturing the evaluation failed ({str(err).strip()[:300]})")
            return eager
        why = self._differs(out, eager)
        if why is not None:
            self._give_up(f"the graphed evaluation differs from the eager one ({why})")
            return eager
        self.graphs[key] = (replay, out, (u, omega))  # the graph reads u and omega where they lie
        return out
