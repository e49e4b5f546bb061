"""CUDA-graph training step and evaluation: the state restore they rely on (CPU), the capture/replay control flow
against eager runs with a stand-in graph (CPU), the host reads a capture refuses, the refusals and fallbacks, and
(GPU) graphed runs and evaluations that follow the eager ones."""
import functools
import json

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from amg_fast import _checks as checks_module
from amg_fast.layers import memory_fusion
from amg_fast.models import get_model
from amg_fast.train import trainer
from amg_fast.train.trainer import train
from amg_fast.train.config import TrainConfig
from amg_fast.models.normalized import Normalized
from amg_fast.train.evaluate import evaluate, predict
from amg_fast.train.graphs import GraphedEvaluation, capture_training_state, restore_training_state

TINY = dict(res=32, n_train=12, n_test=4, batch_size=4, width=16, modes=8, eval_every=100)


def _adam_steps(model, optimizer, n, gen):
    for _ in range(n):
        optimizer.zero_grad()
        model(torch.randn(2, 3, 32, 1, generator=gen)).square().mean().backward()
        optimizer.step()


@pytest.mark.parametrize("steps_before", [0, 2], ids=["fresh", "after-2-steps"])
def test_restore_returns_model_and_optimizer_to_the_snapshot(steps_before, gen):
    """Warm-up steps after the snapshot are undone in place; lazily created Adam state is zeroed."""
    torch.manual_seed(0)
    model = get_model("amgfno", width=8, modes=4, omega=0.2)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    _adam_steps(model, optimizer, steps_before, gen)
    params_before = [p.detach().clone() for p in model.parameters()]
    state_before = {k: v.clone() for k, v in optimizer.state[next(model.parameters())].items()}
    saved = capture_training_state(model, optimizer)
    live = [p for p in model.parameters()]
    _adam_steps(model, optimizer, 3, gen)
    assert any(not torch.equal(p, q) for p, q in zip(model.parameters(), params_before))
    restore_training_state(model, optimizer, saved)
    assert all(p is q for p, q in zip(model.parameters(), live))  # same tensors, values written back
    assert all(torch.equal(p, q) for p, q in zip(model.parameters(), params_before))
    state = optimizer.state[next(model.parameters())]
    for key, value in state.items():
        expected = state_before[key] if key in state_before else torch.zeros_like(value)
        assert torch.equal(value, expected), key


def stand_in_record(self, fn):
    """GraphedTrainStep._record on CPU, modelling what a CUDA graph does and does not do.

    Capture runs fn once (a real capture binds its outputs; the warm-up state restore that follows
    undoes the step). A replay then runs no Python: it recomputes the step, but only in place --
    each tensor that an attribute of the step or of a model module held at capture time receives
    the new value, and every attribute keeps the binding it had before the replay (an attribute
    that eager code rebound in between stays rebound, and stale)."""
    owners = [self, *self.model.modules()]
    fn()
    captured = [dict(vars(o)) for o in owners]

    def replay():
        before = [dict(vars(o)) for o in owners]
        self.optimizer.zero_grad(set_to_none=True)  # the graph's backward writes fresh gradients
        fn()
        for owner, at_capture, bindings in zip(owners, captured, before):
            for name, value in vars(owner).items():
                old = at_capture.get(name)
                if torch.is_tensor(value) and torch.is_tensor(old) and value is not old and value.shape == old.shape:
                    with torch.no_grad():
                        old.copy_(value)
            vars(owner).clear()
            vars(owner).update(bindings)
    return replay


def test_graphed_step_logic_follows_eager_training(monkeypatch, gen):
    """The capture/replay control flow on CPU, with the CUDA graph replaced by the stand-in above:
    warm-up undone, first replay = first step, static buffers refreshed, a short batch run eagerly.
    After the same batches the parameters and the returned losses and gate means equal plain
    eager training's."""
    from amg_fast.train.graphs import EagerTrainStep, GraphedTrainStep

    monkeypatch.setattr(GraphedTrainStep, "_record", stand_in_record)
    batches = [torch.randn(b, 4, 16, 1, generator=gen) for b in (3, 3, 2, 3)]  # a short batch in between

    def loss_fn(model, u, w):
        return (model(u[:, :-1]) - u[:, 1:]).square().mean() * w.mean(), model.last_gate_mean

    models, stats = [], []
    for step_class in (EagerTrainStep, GraphedTrainStep):
        torch.manual_seed(0)
        model = get_model("amgfno", width=8, modes=4, omega=0.2)
        with torch.no_grad():  # a gate that moves (the zero-initialised content gate stays at 1/2 for a step)
            model.gate.w_z.normal_(0, 0.5)
        optimizer = torch.optim.Adam(model.parameters(), lr=torch.tensor(1e-2), fused=True, capturable=True)
        step = step_class(model, optimizer, loss_fn)
        stats.append([])
        for u in batches:
            loss, gate = step(u, torch.ones(u.shape[0]))
            stats[-1] += [float(loss), float(gate)]
            model.rollout(u[:, 0], 2)  # eager work in between (an evaluation) rebinds model.last_gate_mean
        models.append(model)
    for (name, p_eager), p_graph in zip(models[0].named_parameters(), models[1].parameters()):
        assert torch.allclose(p_graph, p_eager, rtol=1e-5, atol=1e-7), name
    assert stats[1] == pytest.approx(stats[0], rel=1e-5)
    assert len(set(stats[0][1::2])) == len(batches)  # the gate statistic changes from step to step


HOST_READS = {"aten::item", "aten::_local_scalar_dense"}  # .item(), bool(t), a value check: what capture refuses


@pytest.mark.parametrize("backend", ["reference", "triton"])
@pytest.mark.parametrize("name", ["amgfno", "s4ffno", "ffno"])
def test_the_captured_step_reads_no_value_on_the_host(name, backend, monkeypatch, gen):
    """What CUDA-graph capture refuses ("operation not permitted when stream is capturing"), found on CPU with the
    profiler: the forward, loss and backward of the headline models' training step read no tensor on the host,
    with the value checks skipped as they are while capturing (_traced). cumprod's backward did (the reference
    S4D's powers: every graphed reference-kernel run of a model with S4D memory failed to capture). The optimizer
    step is left out: on CPU fused Adam reads its CPU lr with .item(), on a GPU capturable Adam keeps it there.
    (A dispatch mode would not do: with one active, cumprod's backward takes its slow path, which reads nothing.)"""
    monkeypatch.setattr(checks_module, "_traced", lambda: True)
    monkeypatch.setattr(memory_fusion, "_traced", lambda: True)
    torch.manual_seed(0)
    model = get_model(name, width=8, modes=4, backend=backend, **({"omega": 0.2} if name == "amgfno" else {}))
    u = torch.randn(2, 5, 16, 1, generator=gen)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        (model(u[:, :-1]) - u[:, 1:]).square().mean().backward()
    reads = [e.name for e in prof.events() if e.name in HOST_READS]
    assert not reads, f"{len(reads)} host reads in the step a CUDA graph captures"
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)


@pytest.mark.parametrize("name,backend,normalized", [
    ("amgfno", "reference", False), ("s4ffno", "reference", True), ("ffno", "reference", False),
    ("amgfno", "triton", True), ("s4ffno", "triton", False), ("ffno", "triton", True)])
def test_the_captured_evaluation_reads_no_value_on_the_host(name, backend, normalized, monkeypatch, gen):
    """As the training step's test above, for what a graphed evaluation captures (evaluate.predict: the teacher-forced
    forward and the rollout, under no_grad): the headline models, plain and inside Normalized (the +increment+normalize
    runs), AMGFNO with a per-batch omega (omega_mode "batch")."""
    monkeypatch.setattr(checks_module, "_traced", lambda: True)
    monkeypatch.setattr(memory_fusion, "_traced", lambda: True)
    torch.manual_seed(0)
    net = get_model(name, width=8, modes=4, backend=backend, **({"omega": 0.2} if name == "amgfno" else {}))
    if normalized:
        net = Normalized(net, in_mean=0.1, in_std=2.0, out_std=0.5, increment=True)
    u = torch.randn(2, 3, 16, 1, generator=gen)
    omega = torch.rand(2, generator=gen) if name == "amgfno" else None
    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU]) as prof:
        forced, pred, gate = predict(net.eval(), u, omega)
    reads = [e.name for e in prof.events() if e.name in HOST_READS]
    assert not reads, f"{len(reads)} host reads in the evaluation a CUDA graph captures"
    assert forced.shape == pred.shape == (2, 2, 16, 1) and (gate is not None) == (name == "amgfno")


class StandInEvaluationGraph:
    """GraphedEvaluation._record on CPU, modelling a CUDA graph: capture runs fn once and binds its outputs; a
    replay runs no Python, so it recomputes fn but only writes the new values into the tensors bound at capture
    (every attribute of the model, the module fn runs, keeps the binding it had before the replay). `perturb`
    adds to the first output at each replay: a graph that computes something else."""

    def __init__(self, perturb: float = 0.0):
        self.perturb, self.captures, self.replays = perturb, 0, 0

    def record(self, fn):
        self.captures += 1
        outputs = fn()
        [net] = [c.cell_contents for c in fn.__closure__ if isinstance(c.cell_contents, torch.nn.Module)]
        modules = list(net.modules())

        def replay():
            self.replays += 1
            bindings = [dict(vars(m)) for m in modules]
            for old, new in zip(outputs, fn()):
                if old is not None:
                    old.copy_(new)
            outputs[0].add_(self.perturb)
            for module, before in zip(modules, bindings):
                vars(module).clear()
                vars(module).update(before)
        return replay, outputs


def _evaluation_case(gen, backend="reference", device="cpu"):
    torch.manual_seed(0)
    net = get_model("amgfno", width=8, modes=4, omega=0.2, backend=backend)
    with torch.no_grad():
        net.gate.w_z.normal_(0, 0.5, generator=gen)  # a gate that differs from one weight to the next
    loader = [(torch.randn(3, 4, 16, 1, generator=gen).to(device), torch.rand(3, generator=gen).to(device))
              for _ in range(2)]
    return net.to(device), loader


def _results(result) -> list:
    return [result.nrmse, result.one_step_nrmse, result.one_step_loss, result.gate_mean, *result.pred.ravel()]


def _graphed_evaluations_follow_eager_ones(net, loader, gen, device, precision="fp32", rel=1e-6) -> None:
    """Three evaluations of two batches with the parameters changed in place in between (as training does), both
    omega modes at the first: each graphed one equals evaluate's own (eager) result; nothing logged."""
    logs = []
    graphed = GraphedEvaluation(functools.partial(predict, precision=precision), log=logs.append)
    for i in range(3):
        for mode in ("batch",) if i else ("batch", "fixed"):
            eager = evaluate(net, loader, device, omega_mode=mode, precision=precision)
            got = evaluate(net, loader, device, omega_mode=mode, precision=precision, predictor=graphed)
            assert _results(got) == pytest.approx(_results(eager), rel=rel), (i, mode)
        with torch.no_grad():
            for p in net.parameters():
                p.add_(0.05 * torch.randn(p.shape, generator=gen).to(p.device))
    assert logs == [] and graphed.failed is None and len(graphed.graphs) == 4


def test_graphed_evaluation_replays_each_batch_and_equals_the_eager_one(monkeypatch, gen):
    """The control flow on CPU with the stand-in graph: one capture a batch and omega mode, then replays only, each
    evaluation equal to the eager one."""
    net, loader = _evaluation_case(gen)
    stand_in = StandInEvaluationGraph()
    monkeypatch.setattr(GraphedEvaluation, "_record", stand_in.record)
    _graphed_evaluations_follow_eager_ones(net, loader, gen, "cpu")
    assert stand_in.captures == 4 and stand_in.replays == 4 + 2 * 2, (stand_in.captures, stand_in.replays)


@pytest.mark.gpu
@pytest.mark.parametrize("backend,precision", [("reference", "fp32"), ("triton", "fp32"), ("triton", "bf16")])
def test_graphed_evaluation_equals_the_eager_one_gpu(backend, precision, gen):
    """The same with real CUDA graphs: the capture succeeds, its replay check passes, and every later replay sees
    the parameters of the moment (the eager evaluation runs the same kernels: equal to float rounding)."""
    net, loader = _evaluation_case(gen, backend, "cuda")
    _graphed_evaluations_follow_eager_ones(net, loader, gen, "cuda", precision, rel=1e-5)


@pytest.mark.parametrize("how", ["capture fails", "replay differs"])
def test_a_graph_that_fails_or_differs_leaves_the_evaluation_eager(how, monkeypatch, gen):
    """A capture that raises, or a replay that does not reproduce the eager result: logged once, that evaluation's
    result is the eager one, and later ones run eagerly (no further capture)."""
    net, loader = _evaluation_case(gen)
    stand_in = StandInEvaluationGraph(perturb=1e-3)

    def failing(evaluation, fn):
        stand_in.captures += 1
        raise RuntimeError("operation not permitted when stream is capturing")
    monkeypatch.setattr(GraphedEvaluation, "_record", failing if how == "capture fails" else stand_in.record)
    logs = []
    graphed = GraphedEvaluation(predict, log=logs.append)
    for _ in range(2):
        got = evaluate(net, loader, "cpu", predictor=graphed)
        assert _results(got) == pytest.approx(_results(evaluate(net, loader, "cpu")), rel=1e-6)
    assert stand_in.captures == 1 and len(logs) == 1, (stand_in.captures, logs)
    expected = ("capturing the evaluation failed (operation not permitted when stream is capturing)"
                if how == "capture fails" else
                "the graphed evaluation differs from the eager one (teacher-forced predictions differ by ")
    assert logs[0].startswith(f"--cuda-graph: {expected}") and logs[0].endswith("evaluating without a graph from "
                                                                                "now on"), logs[0]


def test_graphed_training_records_each_epochs_gate_mean(monkeypatch, tiny_data, tmp_path):
    """--cuda-graph through train() with an evaluation every epoch: each epoch's g-bar (Table 3's
    statistic) is the training step's, as in eager training -- not the last evaluation's rollout
    gate that the model attribute holds after an evaluation."""
    from amg_fast.train import trainer
    from amg_fast.train.graphs import GraphedTrainStep

    monkeypatch.setattr(GraphedTrainStep, "_record", stand_in_record)
    monkeypatch.setattr(trainer, "_check_cuda_graph", lambda device, world: None)
    stand_in = StandInEvaluationGraph()
    monkeypatch.setattr(GraphedEvaluation, "_record", stand_in.record)
    # no frequency gate: the tiny data's omega_f is ~0, which would hold every gate at ~0
    kw = dict(data=str(tiny_data), epochs=4, device="cpu", no_freq_gate=True, lr=3e-2, **{**TINY, "eval_every": 1})
    rows = []
    for graphed in (False, True):
        out = tmp_path / f"graph{graphed}"
        train(TrainConfig(out=str(out), cuda_graph=graphed, **kw), log=lambda *a: None)
        rows.append([json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()])
    for key in ("train_loss", "gate_mean", "test_nrmse", "test_one_step_nrmse"):
        assert [r[key] for r in rows[1]] == pytest.approx([r[key] for r in rows[0]], rel=1e-4), key
    assert len({r["gate_mean"] for r in rows[0]}) == len(rows[0])  # g-bar moves from epoch to epoch
    assert stand_in.captures == 1 and stand_in.replays == 4  # the test split's evaluations: graphed, every epoch


def test_failed_capture_says_so(monkeypatch):
    from amg_fast.train.graphs import GraphedTrainStep

    def failing_record(self, fn):
        raise RuntimeError("operation not permitted when stream is capturing")

    monkeypatch.setattr(GraphedTrainStep, "_record", failing_record)
    model = get_model("ffno", width=8, modes=4)
    step = GraphedTrainStep(model, torch.optim.Adam(model.parameters()), lambda m, u, w: (m(u).square().mean(), None))
    with pytest.raises(RuntimeError, match=r"--cuda-graph: capturing the training step failed \(operation not "
                                           r"permitted when stream is capturing\); train without --cuda-graph"):
        step(torch.randn(2, 3, 16, 1), torch.ones(2))


def test_tensor_lr_follows_the_cosine_schedule_of_a_float_lr():
    """--cuda-graph gives Adam a tensor lr (so a captured step sees the scheduler's updates): the
    scheduler must update it in place along the same schedule, and the steps must match."""
    p, q = torch.nn.Parameter(torch.randn(5)), None
    q = torch.nn.Parameter(p.detach().clone())
    opt_t = torch.optim.Adam([p], lr=torch.tensor(1e-3), foreach=False)
    opt_f = torch.optim.Adam([q], lr=1e-3)
    lr_tensor = opt_t.param_groups[0]["lr"]
    scheds = [torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=4) for o in (opt_t, opt_f)]
    for _ in range(5):
        assert float(opt_t.param_groups[0]["lr"]) == pytest.approx(opt_f.param_groups[0]["lr"], rel=1e-6)
        assert opt_t.param_groups[0]["lr"] is lr_tensor  # updated in place
        for opt, x in ((opt_t, p), (opt_f, q)):
            opt.zero_grad()
            x.square().sum().backward()
            opt.step()
        for sched in scheds:
            sched.step()
    assert torch.allclose(p, q, rtol=1e-6)


def test_a_resumed_tensor_lr_is_moved_to_the_parameters_device():
    """A checkpoint is loaded on the CPU (map_location) and Optimizer.load_state_dict puts its CPU lr (and the
    scheduler's initial_lr) into the groups: on a GPU fused Adam then reads that lr on the host, and the step
    captured after a resume kept the resume epoch's lr for good. The trainer moves them to the parameters'
    device (here "meta", a device other than the CPU's)."""
    from amg_fast.train.trainer import hyperparameters_to_params_device

    saved = torch.optim.Adam([torch.nn.Parameter(torch.randn(5))], lr=torch.tensor(1e-3), foreach=False)
    torch.optim.lr_scheduler.CosineAnnealingLR(saved, T_max=4)  # sets the groups' initial_lr
    p = torch.nn.Parameter(torch.empty(5, device="meta"))
    optimizer = torch.optim.Adam([p], lr=1e-3, foreach=False)  # (Adam reads a tensor lr's value: not on meta)
    optimizer.load_state_dict(saved.state_dict())
    group = optimizer.param_groups[0]
    assert group["lr"].device.type == "cpu" and group["initial_lr"].device.type == "cpu"  # what loading leaves
    hyperparameters_to_params_device(optimizer)
    assert group["lr"].device.type == "meta" and group["initial_lr"].device.type == "meta"
    assert group["params"] == [p] and not isinstance(group["betas"][0], torch.Tensor)


def test_cuda_graph_needs_cuda(tiny_data, tmp_path):
    with pytest.raises(ValueError, match="--cuda-graph captures the training step in a CUDA graph and needs a "
                                         "CUDA device, got device cpu"):
        train(TrainConfig(data=str(tiny_data), out=str(tmp_path / "g"), epochs=1, device="cpu", cuda_graph=True,
                          **TINY), log=lambda *a: None)


@pytest.mark.gpu
@pytest.mark.parametrize("fast_kernels", [False, True], ids=["reference", "triton"])
def test_graphed_run_follows_the_eager_run_gpu(tiny_data, tmp_path, fast_kernels):
    """Same data, seed and steps (including a short last batch, run eagerly): same losses and nRMSE."""
    kw = dict(data=str(tiny_data), epochs=3, device="cuda", fast_kernels=fast_kernels,
              **{**TINY, "n_train": 10})
    eager = train(TrainConfig(out=str(tmp_path / "eager"), **kw), log=lambda *a: None)
    graphed = train(TrainConfig(out=str(tmp_path / "graph"), cuda_graph=True, **kw), log=lambda *a: None)
    rows = [[json.loads(line)["train_loss"] for line in (tmp_path / d / "metrics.jsonl").read_text().splitlines()]
            for d in ("eager", "graph")]
    assert rows[1] == pytest.approx(rows[0], rel=1e-3)
    assert graphed["nrmse"] == pytest.approx(eager["nrmse"], rel=1e-3)


@pytest.mark.gpu
def test_a_graphed_epoch_queues_its_steps_without_waiting_for_the_gpu_gpu(tiny_data, tmp_path, monkeypatch):
    """After the first epoch (the graph's capture synchronizes), an epoch's steps read nothing on the host and copy
    nothing from it: torch's sync debug mode raises on any synchronizing call (a per-step upload of the batch's
    indices was one until 2026-11-30), so the host queues a step while the GPU runs the one before."""
    queue, calls = trainer._queue_steps, []

    def strict(run, order):
        calls.append(len(order))
        if len(calls) == 1:
            return queue(run, order)
        torch.cuda.set_sync_debug_mode("error")
        try:
            return queue(run, order)
        finally:
            torch.cuda.set_sync_debug_mode("default")

    monkeypatch.setattr(trainer, "_queue_steps", strict)
    train(TrainConfig(out=str(tmp_path / "r"), data=str(tiny_data), epochs=3, device="cuda", cuda_graph=True,
                      fast_kernels=True, **TINY), log=lambda *a: None)  # 12 trajectories: 3 full batches of 4
    assert calls == [TINY["n_train"]] * 3
