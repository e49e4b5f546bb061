"""Launch helpers shared by the kernels: output allocation (NaN-poisoned in tests), the accumulation
dtype, dot precision, wrap_triton. Imports no triton at module level (the references use it too)."""
from __future__ import annotations

import contextlib
import functools

import torch

_POISON_OUTPUTS = False

# Elements a program of the flat elementwise kernels over weights (the TF32 splits, the spectral weights' planes and
# gradient), per device type: CPU (Triton's interpreter) 16x the GPU's, as a program there costs ~7 ms whatever its
# size (at K = 64, H = 128 the GPU's 1024 programs of one such launch took 4.4-7.3 s in the interpreter).
ELEMENTWISE_BLOCK = {"cuda": 1024, "cpu": 16384}


def for_device(policy: dict, device: torch.device):
    """policy's entry for device's type; a device type without one (meta: bench/compile_sm90.py) takes "cuda"'s."""
    return policy.get(device.type, policy["cuda"])


# Triton element types for the torch dtypes the kernels accept.
TORCH_TO_TL = {torch.float32: "fp32", torch.float64: "fp64", torch.bfloat16: "bf16", torch.float16: "fp16"}


def new_output(shape, *, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """torch.empty, filled with NaN while poisoned_outputs() is active (tests: every element written)."""
    out = torch.empty(shape, dtype=dtype, device=device)
    if _POISON_OUTPUTS:
        out.fill_(float("nan"))
    return out


@contextlib.contextmanager
def poisoned_outputs():
    """Within this block every kernel output buffer starts as NaN, so an unwritten element shows."""
    global _POISON_OUTPUTS
    previous, _POISON_OUTPUTS = _POISON_OUTPUTS, True
    try:
        yield
    finally:
        _POISON_OUTPUTS = previous


def acc_dtype(*tensors: torch.Tensor | torch.dtype) -> torch.dtype:
    """The accumulation (compute) dtype of an op over these tensors (or dtypes): fp64 when any is
    fp64, else fp32 (bf16 / fp16 inputs accumulate in fp32). The references compute in it, the
    kernels accumulate in it."""
    return torch.float64 if any(getattr(t, "dtype", t) == torch.float64 for t in tensors) else torch.float32


def dot_precision(dtype: torch.dtype, *, reduced: bool = True) -> str:
    """tl.dot input_precision for inputs of this dtype.

    fp64: "ieee". fp32: "tf32x3" (three TF32 products, fp32-accurate) unless the user allowed TF32
    matmuls (torch.backends.cuda.matmul.allow_tf32 / set_float32_matmul_precision("high")) and
    reduced is True, then "tf32" -- plain TF32 truncates inputs on Hopper, a biased ~5e-4 error per
    operand that adds up to ~3e-3 over the spectral conv's three chained GEMMs (measured on an
    H200). reduced=False keeps fp32 at "tf32x3" whatever the TF32 setting (the spectral conv with
    AMG_FAST_SPECTRAL_REDUCED_DOTS=0). bf16/fp16 run natively with fp32 accumulation (the argument is ignored for them).
    """
    if dtype == torch.float64:
        return "ieee"
    if dtype == torch.float32 and not (reduced and torch.backends.cuda.matmul.allow_tf32):
        return "tf32x3"
    return "tf32"  # fp32 with TF32 allowed; ignored by bf16/fp16 dots (the value the GPU run used)


def dot_operand(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """t (a weight, an upstream gradient) as a dot operand beside activations of dtype: contiguous, in dtype
    (under autocast fp32 master weights and fp32 gradients meet bf16 activations). Cast inside a kernel right
    before a pipelined dot, fp32 weights or dy with bf16 activations were miscompiled by triton 3.6 for sm_90
    (the fused feed-forward's dx kernel read out of bounds or returned garbage: H200, 2026-11-27,
    results/gpu/20261127-1354-h200/README.md), so the launchers hand each dot one dtype (a no-op when t is in it)."""
    return t.to(dtype).contiguous()


def flat_views(flat: torch.Tensor, like) -> tuple[torch.Tensor, ...]:
    """flat [sum of the numels] -> views of it shaped like each tensor of `like`, in order (what a launch that
    writes several tensors into one buffer, as _tf32.cast_weights, hands back)."""
    return tuple(part.view(t.shape) for part, t in zip(flat.split([t.numel() for t in like]), like))


def next_pow2(n: int, minimum: int = 16) -> int:
    """Smallest power of two >= max(n, minimum) (tl.arange needs powers of two, tl.dot dims >= 16).

    Plain integer arithmetic: triton.next_power_of_2 / triton.cdiv are constexpr-function wrappers
    in recent Triton, measurable host overhead on every launch."""
    n = max(int(n), minimum, 1)
    return 1 << (n - 1).bit_length()


def cdiv(a: int, b: int) -> int:
    """ceil(a / b) for positive integers (the grid size of a blocked axis)."""
    return -(-int(a) // int(b))


@functools.cache
def _interpreted_kernel_type() -> type:
    from triton.runtime.interpreter import InterpretedFunction
    return InterpretedFunction


def wrap_triton(kernel):
    """torch.library.wrap_triton(kernel): the launch torch.compile can trace. A kernel of Triton's
    interpreter (TRITON_INTERPRET=1) launches as it is, which is what torch >= 2.13 does itself;
    older torch (2.11, the GPU machines') refuses it ("wrap_triton only works on functions
    annotated with triton.jit"), so the interpreter tests would not run there. Under torch.compile the
    kernel always goes to torch.library.wrap_triton: Dynamo cannot trace the isinstance test on a Triton
    kernel ("builtin isinstance() cannot determine type of argument TritonKernelVariable", torch 2.11,
    H200, 2026-11-29), and under fake tensors (a custom op's fake run) the interpreter must not launch."""
    if not tracing() and isinstance(kernel, _interpreted_kernel_type()):
        _interpreter_without_nested_patches()
        return kernel
    return torch.library.wrap_triton(kernel)


@functools.cache
def _interpreter_without_nested_patches() -> None:
    """Once, at the first interpreted launch (not at import: the package imports no triton): the interpreter
    without its redundant re-patching (kernels/_interpreter.py)."""
    from amg_fast.kernels._interpreter import skip_nested_language_patches
    skip_nested_language_patches()


def merged_stride(sizes, strides) -> int | None:
    """The stride of axes (sizes, strides) viewed as one axis: the innermost non-singleton axis's stride (1 when
    all are singletons), or None when the axes do not merge (a stride is not its inner neighbour's stride
    times its size; singleton axes skipped, as torch.Tensor.view does)."""
    axes = [(n, s) for n, s in zip(sizes, strides) if n != 1]
    if any(outer != n * s for (_, outer), (n, s) in zip(axes, axes[1:])):
        return None
    return axes[-1][1] if axes else 1


def tracing() -> bool:
    """True under torch.compile / fake-tensor tracing, where tensors must not be cached (a cached
    real tensor inside a fake trace, or a cached fake one in eager, fails)."""
    return torch.compiler.is_compiling() or torch._guards.detect_fake_mode() is not None


@functools.cache
def fake_rfft_strides_match(device_type: str) -> bool:
    """Whether torch's fake (meta) rfft on device_type ("cpu", "cuda") reports the strides its kernel writes.
    torch 2.11 on CPU does not (fake: contiguous; the kernel: the modes innermost; right from 2.12 on), and
    a torch.compile'd graph holding an rfft then fails there at run time (inductor's own stride check, or a
    view traced on the fake layout); its CUDA meta function follows cuFFT's layout."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    x = torch.zeros(2, 8, 1, 4, device=device_type)
    with FakeTensorMode() as mode:
        fake = torch.fft.rfft(mode.from_tensor(x), dim=1).stride()
    return torch.fft.rfft(x, dim=1).stride() == fake


def _real_signal_mask(modes: int, n: int, trailing: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """[modes, 1 x trailing, 2] ones, 0 at the imaginary parts of mode 0 and (n even, present) n/2."""
    mask = torch.ones((modes,) + (1,) * trailing + (2,), dtype=dtype, device=device)
    mask[0, ..., 1] = 0.0
    if n % 2 == 0 and modes > n // 2:
        mask[n // 2, ..., 1] = 0.0
    return mask


_cached_real_signal_mask = functools.lru_cache(maxsize=32)(_real_signal_mask)


def irfft_ortho(spectrum: torch.Tensor, n: int, dim: int) -> torch.Tensor:
    """torch.fft.irfft(spectrum, n, dim, norm="ortho") with the imaginary parts a real signal cannot
    have (mode 0, and mode n/2 when present) set to zero first. irfft is documented to ignore them,
    but cuFFT's C2R transform does not for some sizes and batch counts (pytorch#154496; on an H100,
    2026-11-26: 2-6% error at S = 128 and 1024 with 100 rows, exact with 8). Zeroing them is what the
    explicit DFT synthesis basis does (sin(0) = sin(pi j) = 0), so every path agrees. One multiply by
    a mask (one kernel forward, one backward), cached in eager mode, built afresh under tracing."""
    dim = dim % spectrum.dim()
    make = _real_signal_mask if tracing() else _cached_real_signal_mask  # cached in eager only
    mask = make(spectrum.shape[dim], n, spectrum.dim() - 1 - dim, spectrum.real.dtype, spectrum.device)
    spectrum = torch.view_as_complex(torch.view_as_real(spectrum) * mask)
    return torch.fft.irfft(spectrum, n=n, dim=dim, norm="ortho")
