"""bench/_profile_step.py: a step's profile grouped by (phase, op, kernel), per step, largest first.

The grouping is checked on hand-made launch records (what a GPU profile gives: kernel names,
durations, the CPU ranges around each launch), and the profiler path on a tiny CPU step, whose
"kernels" are the ops that would launch one (bench/_kernel_count.py).
"""
import importlib
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).parents[1]
EVAL = "autograd::engine::evaluate_function: "
ADAM = "Optimizer.step#Adam.step"
GEMM = ("void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_16x4_nn_align4>"
        "(cutlass_80_tensorop_s1688gemm_128x128_16x4_nn_align4::Params)")


@pytest.fixture
def profiling(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "bench"))  # bench/ is no package; _profile_step imports _kernel_count
    return importlib.import_module("_profile_step")


def launches(module):
    """Two steps' launches: a forward linear (its addmm's GEMM), a Triton kernel inside a custom op, the
    addmm's backward (two GEMMs), a custom Function's backward, fused Adam, one unclaimed memset."""
    L = module.Launch
    step = [
        L(GEMM, 30.0, ("aten::linear", "aten::addmm")),
        L("_spectral_mix_kernel", 50.0, ("amg_fast::spectral_conv1d_fwd",)),
        L(GEMM, 25.0, (EVAL + "AddmmBackward0", "AddmmBackward0", "aten::mm")),
        L(GEMM, 15.0, (EVAL + "AddmmBackward0", "AddmmBackward0", "aten::mm")),
        L("_spectral_mix_kernel", 70.0, (EVAL + "SpectralConv1dFnBackward", "SpectralConv1dFnBackward",
                                        "amg_fast::spectral_conv1d_bwd")),
        L("void at::native::multi_tensor_apply_kernel<Adam>(Params)", 8.0, (ADAM, "aten::_fused_adam_")),
        L("Memset (Device)", 2.0, ()),
    ]
    return step + [L(launch.kernel, 2 * launch.us, launch.ancestors) for launch in step]  # a slower second step


def test_groups_by_phase_op_and_kernel_per_step(profiling):
    record = profiling.aggregate(launches(profiling), steps=2)
    assert record["steps"] == 2
    # per step: the mean of 1x and 2x each duration = 1.5x, in ms
    assert record["device_ms_per_step"] == pytest.approx(1.5 * 200 / 1000)
    assert record["by_phase"] == pytest.approx({"forward": 0.12, "backward": 0.165, "optimizer": 0.012,
                                                "unattributed": 0.003})
    assert [(r["phase"], r["op"], r["ms"], r["kernels"]) for r in record["by_op"]] == [
        ("backward", "SpectralConv1dFnBackward", pytest.approx(0.105), 1),
        ("forward", "amg_fast::spectral_conv1d_fwd", pytest.approx(0.075), 1),
        ("backward", "AddmmBackward0", pytest.approx(0.06), 2),
        ("forward", "aten::linear", pytest.approx(0.045), 1),
        ("optimizer", "aten::_fused_adam_", pytest.approx(0.012), 1),
        ("unattributed", profiling.UNATTRIBUTED, pytest.approx(0.003), 1),
    ]
    gemm = "cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_16x4_nn_align4>"
    rows = {(r["phase"], r["op"], r["kernel"]): (r["ms"], r["calls"]) for r in record["by_kernel"]}
    assert rows[("backward", "AddmmBackward0", gemm)] == (pytest.approx(0.06), 2)  # two launches, one row
    assert rows[("forward", "aten::linear", gemm)] == (pytest.approx(0.045), 1)
    assert ("optimizer", "aten::_fused_adam_", "at::native::multi_tensor_apply_kernel<Adam>") in rows
    assert len(rows) == 6 and record["by_kernel_left_off"] == {"rows": 0, "ms": 0.0}
    for key in ("by_op", "by_kernel"):
        assert sum(r["ms"] for r in record[key]) == pytest.approx(record["device_ms_per_step"])
        assert [r["ms"] for r in record[key]] == sorted((r["ms"] for r in record[key]), reverse=True)


def test_keeps_the_top_kernels_and_tallies_the_rest(profiling):
    L = profiling.Launch
    many = [L(f"k{i}", float(i), ("aten::mul",)) for i in range(1, 11)]
    record = profiling.aggregate(many, steps=1, top_kernels=3)
    assert [r["kernel"] for r in record["by_kernel"]] == ["k10", "k9", "k8"]
    assert record["by_kernel_left_off"] == {"rows": 7, "ms": pytest.approx(0.028)}
    assert record["by_op"] == [{"phase": "forward", "op": "aten::mul", "ms": pytest.approx(0.055), "kernels": 10}]


def test_uneven_launch_counts_per_step_are_fractions(profiling):
    L = profiling.Launch
    record = profiling.aggregate([L("k", 1.0, ("aten::add",))] * 4, steps=3)
    assert record["by_op"][0]["kernels"] == pytest.approx(1.33) and record["by_kernel"][0]["calls"] == 1.33


@pytest.mark.parametrize("ancestors, phase, op", [
    (("aten::linear", "aten::addmm"), "forward", "aten::linear"),
    (("my range", "amg_fast::gate_fusion_fwd", "triton::_gate_kernel"), "forward", "amg_fast::gate_fusion_fwd"),
    (("my range",), "forward", "my range"),  # no op: the outermost range
    ((EVAL + "torch::autograd::AccumulateGrad", "aten::add_"), "backward", "torch::autograd::AccumulateGrad"),
    (("Optimizer.zero_grad#Adam.zero_grad", "aten::zero_"), "optimizer", "aten::zero_"),
    ((ADAM,), "optimizer", ADAM),
    ((), "unattributed", "(no CPU op)"),
])
def test_phase_and_op_come_from_the_ranges_around_the_launch(profiling, ancestors, phase, op):
    assert profiling.phase_and_op(ancestors) == (phase, op)


@pytest.mark.parametrize("name, short", [
    ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
     "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)",
     "at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, ..."),
    ("void at::native::(anonymous namespace)::fill_kernel(float*, int)",
     "at::native::(anonymous namespace)::fill_kernel"),
    ("Memcpy DtoD (Device -> Device)", "Memcpy DtoD (Device -> Device)"),  # a label, not a signature
    ("_spectral_conv1d_mix_kernel", "_spectral_conv1d_mix_kernel"),
])
def test_kernel_names_are_shortened(profiling, name, short):
    assert profiling.short_kernel_name(name) == short and len(short) <= profiling.KERNEL_NAME_CHARS


def test_rejects_no_steps(profiling):
    with pytest.raises(ValueError, match="steps must be >= 1, got 0"):
        profiling.aggregate([], steps=0)
    with pytest.raises(ValueError, match="steps must be >= 1, got 0"):
        profiling.profile_step(lambda: None, "cpu", steps=0)


def test_profiles_a_cpu_step_by_the_ops_that_would_launch_kernels(profiling):
    """A linear layer's training step on CPU: the forward's addmm, its backward's GEMMs, fused Adam;
    the kernel-free views and composites are not rows, and every launch of two steps is counted."""
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 4)
    optimizer = torch.optim.Adam(model.parameters(), lr=torch.tensor(1e-3), fused=True)
    x = torch.randn(16, 8)

    def step():
        optimizer.zero_grad(set_to_none=True)
        model(x).square().sum().backward()
        optimizer.step()

    step()
    record = profiling.profile_step(step, "cpu", steps=2)
    assert record["time_kind"] == "cpu_self" and record["steps"] == 2
    ops = {(r["phase"], r["op"]): r["kernels"] for r in record["by_op"]}
    assert ops[("forward", "aten::linear")] == 1  # addmm; linear itself and the transpose launch nothing
    assert ops[("backward", "AddmmBackward0")] == 2  # the weight's gradient (mm) and the bias's (sum)
    assert ops[("optimizer", "aten::_fused_adam_")] == 1
    kernels = {r["kernel"] for r in record["by_kernel"]}
    assert "aten::addmm" in kernels and not kernels & {"aten::t", "aten::linear", "aten::empty"}
    assert record["by_phase"]["unattributed"] == 0.0
    assert sum(r["ms"] for r in record["by_op"]) == pytest.approx(record["device_ms_per_step"], abs=1e-4)
    assert record["device_ms_per_step"] > 0


def test_gpu_kernels_are_tied_to_the_ops_that_launched_them(profiling):
    """A CUDA profile's events (torch's own FunctionEvent): a kernel counts once, under the CPU op whose
    FunctionEvent.kernels holds it; the GPU copy of a record_function range is no kernel; a kernel no
    op claims still counts, unattributed; an op's kernel entry with no GPU activity behind it does not."""
    from torch.autograd import DeviceType
    from torch.autograd.profiler_util import FunctionEvent

    def cpu(name, start, end, parent=None, kernels=()):
        event = FunctionEvent(id=start, name=name, thread=1, start_us=start, end_us=end)
        if parent is not None:
            event.set_cpu_parent(parent)
            parent.append_cpu_child(event)
        for kernel_name, us in kernels:
            event.append_kernel(kernel_name, 0, us)
        return event

    def gpu(name, start, end, annotation=False):
        return FunctionEvent(id=start, name=name, thread=7, start_us=start, end_us=end, device_type=DeviceType.CUDA,
                             is_user_annotation=annotation)

    linear = cpu("aten::linear", 0, 100)
    addmm = cpu("aten::addmm", 10, 90, linear, kernels=[(GEMM, 30.0)])
    node = cpu(EVAL + "AddmmBackward0", 200, 300)
    backward = cpu("AddmmBackward0", 201, 299, node)
    mm = cpu("aten::mm", 210, 290, backward, kernels=[(GEMM, 25.0), ("ghost", 5.0)])
    events = [linear, addmm, node, backward, mm, gpu(GEMM, 20, 50), gpu(GEMM, 220, 245),
              gpu("my range", 0, 400, annotation=True), gpu("Memset (Device)", 300, 302)]
    found = sorted(profiling.device_launches(events), key=lambda launch: launch.us)
    assert found == [profiling.Launch("Memset (Device)", 2.0, ()),
                     profiling.Launch(GEMM, 25.0, (EVAL + "AddmmBackward0", "AddmmBackward0", "aten::mm")),
                     profiling.Launch(GEMM, 30.0, ("aten::linear", "aten::addmm"))]
    record = profiling.aggregate(found, steps=1)
    assert record["by_phase"] == pytest.approx({"forward": 0.03, "backward": 0.025, "optimizer": 0.0,
                                                "unattributed": 0.002})
