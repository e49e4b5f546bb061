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

On a GPU, count_kernels(..., names=True) also returns {"kernel_names": {name: count}}, to see which
library kernels a step launches (what the CPU estimate below models).

estimate_cuda_kernels(fn, rows=R, tensor_lists=n): what the same step would launch on a GPU, from a
CPU run (the kernels in the interpreter): the CPU count above plus the kernels that CUDA libraries
launch beyond one per aten op, as modelled here:
- cuBLAS split-K: a GEMM (aten::mm / addmm) whose reduction runs over all R activation rows -- a
  weight gradient dW = dY^T X -- has a small output and a long reduction, and cuBLAS adds a second,
  reduction kernel: +1 each (pass rows=R of the step, so that no other product is taken for one);
- multi_tensor_apply: fused Adam (aten::_fused_adam_, 4 lists: params, grads, exp_avg, exp_avg_sq)
  launches one kernel per 36 tensors, the foreach ops on the step counts one per 110: +ceil(n/36)-1
  and +ceil(n/110)-1 for n = tensor_lists (the optimizer's parameter tensors);
- reducing losses: aten::mse_loss with a reduction (the trainer's loss, reduction "sum") runs its
  elementwise kernel, then a sum or mean over its output: +1 each.
Checked against the H100's profile (2026-11-26, bench/results/20261126-h100): at the code it ran (commit
ed6e4ea's Triton path) the CPU count of tests/test_kernel_count.py's step is 126, the model adds 13
split-K reductions (the feed-forward's 8 weight gradients, the gate's 2, the readout Linear's, the
encoder's and the decoder's) and 1 Adam launch (38 parameter tensors): 140, the H100's count at
S = 32, 64 and 128. That reproduces one total; which library kernels make up the 14 is this model's
reading (a gemv-shaped GEMM may skip split-K, an addmm or addmv with a bias it cannot fuse copies it
first): a GPU run with names=True settles it.
"""
from __future__ import annotations

import collections
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


def is_device_activity(event) -> bool:
    """True for a profiler event that is GPU work (a kernel, memcpy or memset), not a CPU op nor the
    GPU-side copy of a record_function range (a user annotation)."""
    return event.device_type == DeviceType.CUDA and not getattr(event, "is_user_annotation", False)


def _is_cuda_kernel(event) -> bool:
    if not is_device_activity(event):
        return False
    kind = getattr(event, "activity_type", None)  # "kernel", "gpu_memcpy", "gpu_memset" (newer torch)
    return kind == "kernel" if kind else not event.name.startswith(("Memcpy", "Memset"))


def count_kernels(fn: Callable[[], object], device: torch.device | str, *, names: bool = False) -> dict:
    """{"kernels": n, "kernel_count_kind": "cuda_kernels" | "cpu_aten_kernel_ops"} of one fn() call
    that runs on device ("cuda" or "cpu"); names=True adds {"kernel_names": {name: count}} (the CUDA
    kernels' names on a GPU, the counted ops' on CPU)."""
    counted = _profile(fn, device, record_shapes=False)
    result = {"kernels": sum(counted.values()), "kernel_count_kind": counted.kind}
    if names:
        result["kernel_names"] = dict(counted.most_common())
    return result


class _Counted(collections.Counter):
    """Counter of the counted kernels (or ops) by name, with kind and, on CPU, the ops' input shapes."""
    kind: str = ""
    shapes: list


def profiled_events(fn: Callable[[], object], device: torch.device | str, *, record_shapes: bool = False):
    """Run fn() once under torch.profiler (CPU activity, and CUDA's when device is a GPU; on CPU each
    interpreted Triton launch in a "triton::<kernel>" range) -> its events (a torch EventList)."""
    device_type = torch.device(device).type
    if device_type not in ("cuda", "cpu"):
        raise ValueError(f"device must be a cuda or cpu device, got {device!r}")
    on_gpu = device_type == "cuda"
    if on_gpu:
        if TorchVersion(torch.version.cuda or "0") >= "12.6":
            os.environ.setdefault("TEARDOWN_CUPTI", "1")
        torch.cuda.synchronize()
    marks = contextlib.nullcontext() if on_gpu else _marked_interpreter_launches()
    with marks, profile(activities=[ProfilerActivity.CPU] + [ProfilerActivity.CUDA] * on_gpu,
                        record_shapes=record_shapes) as prof:
        fn()
        if on_gpu:
            torch.cuda.synchronize()
    return prof.events()


def launching_events(events) -> list:
    """The CPU events of a CPU profile that would each launch a GPU kernel (see the module docstring:
    the outermost aten ops that are neither composite nor kernel-free, and the marked Triton launches)."""
    launching = []
    for root in (e for e in events if e.cpu_parent is None):
        _collect_launching(root, launching)
    return launching


def _profile(fn: Callable[[], object], device: torch.device | str, *, record_shapes: bool) -> _Counted:
    """Run fn() once under the profiler and count what it launches (see the module docstring)."""
    events = profiled_events(fn, device, record_shapes=record_shapes)
    counted = _Counted()
    counted.shapes = []
    if torch.device(device).type == "cuda":
        counted.kind = "cuda_kernels"
        counted.update(e.name for e in events if _is_cuda_kernel(e))
        return counted
    counted.kind = "cpu_aten_kernel_ops"
    launching = launching_events(events)
    counted.update(e.name for e in launching)
    counted.shapes = [(e.name, e.input_shapes) for e in launching]
    return counted


def _collect_launching(event, out: list) -> None:
    """Append the kernel-launching calls in event's subtree to out: event itself if it launches one (an
    aten op that is not kernel-free, or a marked Triton launch), else its children's (the outermost
    call is the one a GPU dispatches to a kernel)."""
    if event.name.startswith(TRITON_LAUNCH_PREFIX) or (
            event.name.startswith("aten::") and not _launches_nothing_itself(event.name)):
        out.append(event)
        return
    for child in event.cpu_children:
        _collect_launching(child, out)


GEMMS = ("aten::mm", "aten::addmm")
REDUCING_LOSSES = ("aten::mse_loss",)  # an elementwise kernel, then the reduction (sum / mean) over its output
MTA_MAX_TENSORS = {"aten::_fused_adam_": 36, "aten::_fused_adamw_": 36, "aten::_foreach_add_": 110}


def _reduction_length(name: str, shapes) -> int | None:
    """The contraction length K of a GEMM's recorded input shapes (mm: A [M, K], B [K, N]; addmm: bias, A, B)."""
    operands = shapes[1:3] if name == "aten::addmm" else shapes[:2]
    if len(operands) == 2 and all(len(s) == 2 for s in operands):
        return operands[0][1]
    return None


def estimate_cuda_kernels(fn: Callable[[], object], *, rows: int, tensor_lists: int) -> dict:
    """The CUDA kernels one fn() call (a training step run on CPU, Triton kernels in the interpreter)
    would launch on a GPU: {"kernels": the CPU count, "cuda_estimate": it plus the modelled library
    kernels, "cublas_split_k": GEMMs reducing over the rows activation rows, "multi_tensor_apply":
    the extra launches for tensor_lists tensors, "loss_reductions": the reductions inside the losses} (see
    the module docstring)."""
    counted = _profile(fn, "cpu", record_shapes=True)
    split_k = sum(1 for name, shapes in counted.shapes
                  if name in GEMMS and _reduction_length(name, shapes) == rows)
    mta = sum(counted[name] * (_cdiv(tensor_lists, per_launch) - 1) for name, per_launch in MTA_MAX_TENSORS.items())
    losses = sum(counted[name] for name in REDUCING_LOSSES)
    total = sum(counted.values())
    return {"kernels": total, "cuda_estimate": total + split_k + mta + losses, "cublas_split_k": split_k,
            "multi_tensor_apply": mta, "loss_reductions": losses, "kernel_count_kind": "cuda_estimate_from_cpu"}


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)
