"""How many kernels one call of a function launches, counted with the torch profiler.

count_kernels(fn, device) runs fn() once under torch.profiler (warm it up first: JIT, autotuning
and lazy state creation would be counted otherwise) and returns {"kernels": n, "kernel_count_kind": kind}:

- "cuda_kernels" (device is a GPU): the device-side kernel events (Triton kernels included);
  memcpy and memset activities are not counted.
- "cpu_aten_kernel_ops" (device is the CPU): a proxy for the same number, the aten op calls that
  would each dispatch to a kernel on a GPU: the outermost calls that are neither composite (ops
  like linear, matmul, reshape or to, which only call other ops: CompositeImplicitAutograd) nor
  kernel-free (views, allocations, host scalar reads). What such an op calls in turn on CPU (addmm's
  bias copy, CPU bmm's per-matrix slices) is its CPU implementation, and is not counted; plain leaf
  aten ops would count those and the views, several times the ops a GPU runs. Triton kernels run
  by the interpreter (TRITON_INTERPRET=1) count one each: every launch is marked with a
  "triton::<kernel>" profiler range, and what the interpreter does inside it (its argument copies)
  is not counted; the torch ops a launcher runs around its kernel (casts, partial-sum reductions) are.

On CUDA >= 12.6 the count sets TEARDOWN_CUPTI=1 unless it is set: kineto otherwise leaves CUPTI
attached after profiling, which slows every later kernel launch (pytorch/pytorch#144455), and
torch itself deems the teardown safe alongside CUDA graphs from 12.6 on.
"""
from __future__ import annotations

import contextlib
import functools
import os
from typing import Callable

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile
from torch.torch_version import TorchVersion

# Kernel-free ops the schema does not mark as views: allocations, metadata, host-side scalars.
NO_KERNEL_OPS = frozenset({
    "aten::empty", "aten::empty_like", "aten::empty_strided", "aten::new_empty", "aten::new_empty_strided",
    "aten::resize_", "aten::resize_as_", "aten::as_strided_", "aten::_unsafe_view", "aten::set_",
    "aten::item", "aten::_local_scalar_dense", "aten::promote_types", "aten::result_type",
})


@functools.lru_cache(maxsize=None)
def _launches_nothing_itself(name: str) -> bool:
    """True for aten ops that never run a kernel of their own: views (every overload returns an
    alias of an input), composites (every overload but out= is CompositeImplicitAutograd) and
    NO_KERNEL_OPS. The profiler names ops without their overload, hence "every overload"."""
    if name in NO_KERNEL_OPS:
        return True
    packet = getattr(torch.ops.aten, name.removeprefix("aten::"), None)
    views, composites = [], []
    for overload in packet.overloads() if packet is not None else ():
        if overload == "out" or overload.endswith("_out"):  # out= variants: not what a model calls
            continue
        op = getattr(packet, overload)
        try:
            composites.append(op.has_kernel_for_dispatch_key(torch._C.DispatchKey.CompositeImplicitAutograd))
        except RuntimeError:  # a TorchScript-only overload (to.prim_Device): never dispatched
            continue
        views.append(any(r.alias_info is not None and not r.alias_info.is_write for r in op._schema.returns))
    return bool(views) and (all(views) or all(composites))


TRITON_LAUNCH_PREFIX = "triton::"


@contextlib.contextmanager
def _marked_interpreter_launches():
    """Within this block every kernel launch by Triton's interpreter runs inside a profiler range
    named "triton::<kernel name>" (the interpreter itself records none); a no-op without triton."""
    try:
        from triton.runtime.interpreter import GridExecutor
    except ImportError:
        yield
        return
    launch = GridExecutor.__call__

    def marked(self, *args, **kwargs):
        with torch.profiler.record_function(TRITON_LAUNCH_PREFIX + self.fn.__name__):
            return launch(self, *args, **kwargs)

    GridExecutor.__call__ = marked
    try:
        yield
    finally:
        GridExecutor.__call__ = launch


def _aten_kernels(event) -> int:
    """Kernel-launching calls in the subtree of event: itself if it launches one (an aten op that is
    not kernel-free, or a marked Triton launch), else its children's (the outermost call is the one
    a GPU dispatches to a kernel)."""
    if event.name.startswith(TRITON_LAUNCH_PREFIX):
        return 1
    if event.name.startswith("aten::") and not _launches_nothing_itself(event.name):
        return 1
    return sum(_aten_kernels(child) for child in event.cpu_children)


def _is_cuda_kernel(event) -> bool:
    if event.device_type != DeviceType.CUDA or getattr(event, "is_user_annotation", False):
        return False
    kind = getattr(event, "activity_type", None)  # "kernel", "gpu_memcpy", "gpu_memset" (newer torch)
    return kind == "kernel" if kind else not event.name.startswith(("Memcpy", "Memset"))


def count_kernels(fn: Callable[[], object], device: torch.device | str) -> dict:
    """{"kernels": n, "kernel_count_kind": "cuda_kernels" | "cpu_aten_kernel_ops"} of one fn() call
    that runs on device ("cuda" or "cpu")."""
    device_type = torch.device(device).type
    if device_type not in ("cuda", "cpu"):
        raise ValueError(f"device must be a cuda or cpu device, got {device!r}")
    on_gpu = device_type == "cuda"
    if on_gpu:
        if TorchVersion(torch.version.cuda or "0") >= "12.6":
            os.environ.setdefault("TEARDOWN_CUPTI", "1")
        torch.cuda.synchronize()
    marks = contextlib.nullcontext() if on_gpu else _marked_interpreter_launches()
    with marks, profile(activities=[ProfilerActivity.CPU] + [ProfilerActivity.CUDA] * on_gpu) as prof:
        fn()
        if on_gpu:
            torch.cuda.synchronize()
    events = prof.events()
    if on_gpu:
        return {"kernels": sum(map(_is_cuda_kernel, events)), "kernel_count_kind": "cuda_kernels"}
    roots = [e for e in events if e.cpu_parent is None]
    return {"kernels": sum(map(_aten_kernels, roots)), "kernel_count_kind": "cpu_aten_kernel_ops"}
