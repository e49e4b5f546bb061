"""Where the GPU time of a training step goes, kernel by kernel (issue 19): one torch.profiler run.

profile_step(step, device, steps) runs step() `steps` times under torch.profiler (warm it up first:
JIT and optimizer state would be profiled otherwise) and returns the time per step grouped by
(phase, op, kernel):

- phase: "backward" when a CPU range around the launch is an autograd node's
  ("autograd::engine::evaluate_function: <node>"), "optimizer" when one is the optimizer's
  ("Optimizer.step#Adam.step", "Optimizer.zero_grad#..."), else "forward"; "unattributed" for GPU
  work the profiler tied to no CPU op (its time still counts in the total);
- op: for backward the autograd node ("AddmmBackward0", "SpectralConv1dFnBackward"); else the
  outermost namespaced op around the launch ("aten::linear", "amg_fast::spectral_conv1d_fwd"; under
  the optimizer the outermost below its range, "aten::_fused_adam_");
- kernel: the kernel's name without "void " and its parameter list, cut to KERNEL_NAME_CHARS.

On a GPU ("time_kind": "cuda_device") the time is the device's own duration of every kernel, memcpy
and memset (what torch's "Self CUDA time total" sums); each is tied to the CPU op that launched it
through the op's FunctionEvent.kernels (the profiler's correlation ids; torch 2.11 and later). On a
CPU ("cpu_self"; a dry run, Triton's kernels in the interpreter) there are no kernels: the "kernels"
are the ops that would each launch one on a GPU (_kernel_count.launching_events: outermost non-composite
aten ops and the interpreter's "triton::<kernel>" launches) and their time is the op's self CPU time.
The grouping itself, aggregate(), is a pure function of Launch records.
"""
from __future__ import annotations

import collections
import re
from dataclasses import dataclass
from typing import Callable, Iterable

import torch
from torch.autograd import DeviceType

from _kernel_count import is_device_activity, launching_events, profiled_events

PHASES = ("forward", "backward", "optimizer", "unattributed")
BACKWARD_RANGE = "autograd::engine::evaluate_function: "
OPTIMIZER_RANGE = "Optimizer."
UNATTRIBUTED = "(no CPU op)"
KERNEL_NAME_CHARS = 80
TOP_KERNELS = 40
STEPS = 3
_NAMESPACED_OP = re.compile(r"[A-Za-z_]\w*::")


@dataclass(frozen=True)
class Launch:
    """One kernel run: its name, its time in microseconds, and the names of the CPU ranges around its
    launch, outermost first, the launching op last (empty when the profiler tied it to none)."""
    kernel: str
    us: float
    ancestors: tuple[str, ...]


def short_kernel_name(name: str, limit: int = KERNEL_NAME_CHARS) -> str:
    """A kernel's name for a table: without a leading "void " and a C++ signature's parameter list,
    cut to limit characters ("..." marks a cut)."""
    name = name.strip().removeprefix("void ")
    if name.endswith(")"):  # a C++ signature's "(params)", not a label's " (Device -> Device)"
        depth = 0
        for i in range(len(name) - 1, 0, -1):
            depth += {")": 1, "(": -1}.get(name[i], 0)
            if depth == 0:
                name = name if name[i - 1] == " " else name[:i]
                break
    return name if len(name) <= limit else name[:limit - 3] + "..."


def _outermost_op(names: Iterable[str]) -> str | None:
    return next((n for n in names if _NAMESPACED_OP.match(n) and not n.startswith("autograd::")), None)


def phase_and_op(ancestors: tuple[str, ...]) -> tuple[str, str]:
    """(phase, op) of a launch from the CPU ranges around it, outermost first (see the module docstring)."""
    if not ancestors:
        return "unattributed", UNATTRIBUTED
    for i, name in enumerate(ancestors):
        if name.startswith(BACKWARD_RANGE):
            return "backward", name.removeprefix(BACKWARD_RANGE)
        if name.startswith(OPTIMIZER_RANGE):
            return "optimizer", _outermost_op(ancestors[i + 1:]) or name
    return "forward", _outermost_op(ancestors) or ancestors[0]


def _ms(us: float, steps: int) -> float:
    return round(us / 1000.0 / steps, 5)


def _per_step(count: int, steps: int) -> int | float:
    return count // steps if count % steps == 0 else round(count / steps, 2)


def aggregate(launches: Iterable[Launch], steps: int, *, top_kernels: int = TOP_KERNELS) -> dict:
    """Launches of `steps` steps -> per step: {"steps", "device_ms_per_step" (all of it), "by_phase":
    {phase: ms} (every phase of PHASES), "by_op": every [{"phase", "op", "ms", "kernels" (launches)}],
    "by_kernel": the top_kernels [{"phase", "op", "kernel", "ms", "calls"}], "by_kernel_left_off":
    {"rows", "ms"} (the rest)}; rows sorted by ms, largest first."""
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    groups: dict[tuple[str, str, str], list] = collections.defaultdict(lambda: [0.0, 0])
    for launch in launches:
        cell = groups[(*phase_and_op(launch.ancestors), short_kernel_name(launch.kernel))]
        cell[0] += launch.us
        cell[1] += 1
    ops: dict[tuple[str, str], list] = collections.defaultdict(lambda: [0.0, 0])
    phases = dict.fromkeys(PHASES, 0.0)
    for (phase, op, _), (us, calls) in groups.items():
        ops[(phase, op)][0] += us
        ops[(phase, op)][1] += calls
        phases[phase] += us

    def ordered(table: dict) -> list:
        return sorted(table.items(), key=lambda item: (-item[1][0], item[0]))

    by_kernel = [{"phase": phase, "op": op, "kernel": kernel, "ms": _ms(us, steps), "calls": _per_step(calls, steps)}
                 for (phase, op, kernel), (us, calls) in ordered(groups)]
    left_off = by_kernel[top_kernels:]
    return {
        "steps": steps,
        "device_ms_per_step": _ms(sum(phases.values()), steps),
        "by_phase": {phase: _ms(us, steps) for phase, us in phases.items()},
        "by_op": [{"phase": phase, "op": op, "ms": _ms(us, steps), "kernels": _per_step(calls, steps)}
                  for (phase, op), (us, calls) in ordered(ops)],
        "by_kernel": by_kernel[:top_kernels],
        "by_kernel_left_off": {"rows": len(left_off), "ms": round(sum(r["ms"] for r in left_off), 5)},
    }


def _ancestors(event) -> tuple[str, ...]:
    names = []
    while event is not None:
        names.append(event.name)
        event = event.cpu_parent
    return tuple(reversed(names))


def device_launches(events) -> list[Launch]:
    """Every GPU activity (kernel, memcpy, memset) of a CUDA profile's events, each with the CPU ranges
    around the op that launched it (FunctionEvent.kernels), or none if no op claims it."""
    unclaimed = collections.Counter((e.name, e.time_range.elapsed_us()) for e in events if is_device_activity(e))
    launches = []
    for event in events:
        if event.device_type != DeviceType.CPU:
            continue
        for kernel in event.kernels:
            if unclaimed[(kernel.name, kernel.duration)] > 0:  # each GPU activity is claimed once
                unclaimed[(kernel.name, kernel.duration)] -= 1
                launches.append(Launch(kernel.name, kernel.duration, _ancestors(event)))
    launches += [Launch(name, us, ()) for (name, us), n in unclaimed.items() for _ in range(n)]
    return launches


def cpu_launches(events) -> list[Launch]:
    """The ops of a CPU profile that would each launch a GPU kernel, with their self CPU time."""
    return [Launch(e.name, e.self_cpu_time_total, _ancestors(e)) for e in launching_events(events)]


def profile_step(step: Callable[[], object], device: torch.device | str, steps: int = STEPS) -> dict:
    """step() run `steps` times under torch.profiler on device ("cuda" or "cpu") -> aggregate()'s
    record with "time_kind": "cuda_device" (kernel time on the GPU) or "cpu_self" (see the module docstring)."""
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    events = profiled_events(lambda: [step() for _ in range(steps)], device)
    on_gpu = torch.device(device).type == "cuda"
    launches = device_launches(events) if on_gpu else cpu_launches(events)
    return {"time_kind": "cuda_device" if on_gpu else "cpu_self", **aggregate(launches, steps)}
