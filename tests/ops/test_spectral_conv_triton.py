"""spectral_conv1d Triton kernels vs the reference: forward, dx, dweight, both transform paths.

On CPU the kernels run in Triton's interpreter (TRITON_INTERPRET=1, set by conftest); on a GPU the
same tests run the compiled kernels. fp32 tolerances allow TF32 dots. Output buffers are poisoned
with NaN (`poisoned` fixture), so an element a kernel fails to write fails the comparison.
"""
import pytest
import torch
from helpers import RTOL, ids, rel_err

from amg_fast.ops import spectral_conv1d, spectral_conv1d_ref
from amg_fast.ops.spectral_conv import SpectralConv1dFn

# B: the kernels see R = 2 B rows; R = 2 and R = 6 both fill one partial (masked) row block of each
# kernel (BLOCK_R >= 16), so B = 1 beside B = 3 ran the same code path twice (dropped: 32 cases, ~50 s of CPU).
CASES = [(S, K, H, B) for S in (32, 48, 64, 128) for K in sorted({1, S // 4, S // 2, S // 2 + 1})
         for H in (16, 128) for B in (3,)]


def _inputs(lead, S, K, h_in, h_out, dtype, device, gen):
    x = torch.randn(*lead, S, h_in, dtype=dtype, generator=gen).to(device).requires_grad_()
    w = (torch.randn(K, h_in, h_out, 2, dtype=dtype, generator=gen) / h_in ** 0.5).to(device).requires_grad_()
    return x, w


def _check_against_reference(run, x, w, gen, rtol):
    """Compare run(x, w) and its dx, dweight with the reference under the same upstream gradient."""
    y = run(x, w)
    dy = torch.randn(y.shape, dtype=y.dtype, generator=gen).to(y.device)
    dx, dw = torch.autograd.grad(y, (x, w), dy)
    y_ref = spectral_conv1d_ref(x, w)
    dx_ref, dw_ref = torch.autograd.grad(y_ref, (x, w), dy)
    assert y.shape == y_ref.shape and y.dtype == x.dtype
    for name, got, want in (("y", y, y_ref), ("dx", dx, dx_ref), ("dweight", dw, dw_ref)):
        assert torch.isfinite(got).all(), f"{name} has NaN/inf (an unwritten element?)"
        assert rel_err(got, want) <= rtol, f"{name}: rel err {rel_err(got, want):.2e} > {rtol:.0e}"


@pytest.mark.parametrize("S,K,H,B", CASES, ids=[ids(B=B, S=S, K=K, H=H) for S, K, H, B in CASES])
def test_triton_matches_reference_fp32(S, K, H, B, kdev, gen, poisoned):
    x, w = _inputs((B, 2), S, K, H, H, torch.float32, kdev, gen)
    _check_against_reference(lambda a, b: spectral_conv1d(a, b, backend="triton"), x, w, gen, RTOL[torch.float32])


FFT_CASES = [(48, 13, 16), (64, 33, 24), (128, 1, 16)]


@pytest.mark.parametrize("S,K,H", FFT_CASES, ids=[ids(S=S, K=K, H=H) for S, K, H in FFT_CASES])
@pytest.mark.parametrize("transform", ["dft", "fft"])
def test_both_transform_paths_fp64(S, K, H, transform, kdev, gen, poisoned):
    """The basis-GEMM and the torch.fft transform paths give the reference to fp64 round-off."""
    x, w = _inputs((3,), S, K, H, H + 8, torch.float64, kdev, gen)
    _check_against_reference(lambda a, b: SpectralConv1dFn.apply(a, b, transform), x, w, gen, 1e-12)


@pytest.mark.parametrize("transform", ["dft", "fft"])
def test_large_S_1024(transform, kdev, gen, poisoned):
    x, w = _inputs((2,), 1024, 513, 16, 16, torch.float32, kdev, gen)
    _check_against_reference(lambda a, b: SpectralConv1dFn.apply(a, b, transform), x, w, gen, RTOL[torch.float32])


@pytest.mark.parametrize("S,K,transform", [(12, 7, "dft"), (9, 3, "dft"), (10, 4, "fft")],
                         ids=["S12-K7-dft", "S9-K3-dft", "S10-K4-fft"])
def test_gradcheck_fp64(S, K, transform, kdev, gen):
    x, w = _inputs((2,), S, K, 3, 2, torch.float64, kdev, gen)
    assert torch.autograd.gradcheck(lambda a, b: SpectralConv1dFn.apply(a, b, transform), (x, w), fast_mode=True)


def test_non_contiguous_inputs(kdev, gen, poisoned):
    """x as a transposed view and weight as a permuted view give the same result as contiguous ones."""
    x_t = torch.randn(2, 16, 64, dtype=torch.float64, generator=gen).to(kdev).transpose(1, 2).requires_grad_()
    w_p = torch.randn(16, 24, 16, 2, dtype=torch.float64, generator=gen).to(kdev).permute(1, 0, 2, 3)
    w_p.requires_grad_()
    assert not x_t.is_contiguous() and not w_p.is_contiguous()
    _check_against_reference(lambda a, b: spectral_conv1d(a, b, backend="triton"), x_t, w_p, gen, 1e-12)


def test_unsupported_dtype_is_refused(kdev):
    x, w = torch.randn(4, 16, 16, device=kdev).half(), torch.randn(8, 16, 16, 2, device=kdev)
    with pytest.raises(TypeError, match="backend='triton' takes float32, float64 or bfloat16"):
        spectral_conv1d(x, w, backend="triton")


def test_unknown_transform_is_refused(kdev):
    x, w = torch.randn(4, 16, 16, device=kdev), torch.randn(8, 16, 16, 2, device=kdev)
    with pytest.raises(ValueError, match=r"transform must be one of \('auto', 'dft', 'fft'\), got 'fast'"):
        SpectralConv1dFn.apply(x, w, "fast")


@pytest.fixture
def allow_tf32():
    """Set torch.backends.cuda.matmul.allow_tf32 inside the test; restored afterwards."""
    previous = torch.backends.cuda.matmul.allow_tf32

    def set_(value: bool):
        torch.backends.cuda.matmul.allow_tf32 = value
    yield set_
    torch.backends.cuda.matmul.allow_tf32 = previous


def test_fp32_dot_precision_follows_torch_tf32_setting(allow_tf32):
    """fp32 dots are fp32-accurate (tf32x3) unless the user allowed TF32 matmuls; fp64 is IEEE."""
    from amg_fast.kernels._common import dot_precision

    allow_tf32(False)
    assert [dot_precision(t) for t in (torch.float32, torch.float64, torch.bfloat16)] == ["tf32x3", "ieee", "tf32"]
    allow_tf32(True)
    assert dot_precision(torch.float32) == "tf32"


def _ref64(x, w):
    """The reference in fp64 (the GPU precision tests' yardstick: a TF32 or fp32 reference carries
    errors of its own)."""
    return spectral_conv1d_ref(x.detach().double(), w.detach().double())


def test_reduced_precision_dots_are_off_by_default(allow_tf32, monkeypatch):
    """Plain TF32 / bf16 MMAs failed on an H200 (kernels.spectral_conv.REDUCED_PRECISION_DOTS): by
    default the spectral conv keeps fp32 intermediates and tf32x3 dots whatever TF32 and the input
    dtype say; the opt-in restores the reduced paths."""
    from amg_fast.kernels import spectral_conv as k

    allow_tf32(True)
    assert not k.REDUCED_PRECISION_DOTS
    assert [k.work_dtype(t) for t in (torch.bfloat16, torch.float32, torch.float64)] == [torch.float32] * 2 + [
        torch.float64]
    assert [k._dots(t) for t in (torch.float32, torch.float64)] == ["tf32x3", "ieee"]
    monkeypatch.setattr(k, "REDUCED_PRECISION_DOTS", True)
    assert k.work_dtype(torch.bfloat16) == torch.bfloat16 and k._dots(torch.float32) == "tf32"
    allow_tf32(False)
    assert k._dots(torch.float32) == "tf32x3"


@pytest.mark.parametrize("S,K", [(128, 64), (1024, 512)], ids=["S128-dft", "S1024-fft"])
def test_bf16_inputs_run_the_fp32_path(S, K, kdev, gen, poisoned):
    """bf16 x and weight (the sizes that failed on the H200): bf16 out, within bf16 input rounding
    of the fp64 reference of the same bf16 values, gradients in bf16. On CPU the interpreter only
    converts bf16 to fp32 here (its bf16 arithmetic is broken, none runs on this path)."""
    x, w = _inputs((2,), S, K, 16, 16, torch.float32, "cpu", gen)
    xb, wb = x.detach().bfloat16().to(kdev).requires_grad_(), w.detach().bfloat16().to(kdev).requires_grad_()
    y = spectral_conv1d(xb, wb, backend="triton")
    assert y.dtype == torch.bfloat16 and torch.isfinite(y).all()
    assert rel_err(y, _ref64(xb, wb)) <= 1e-2
    dx, dw = torch.autograd.grad(y.float().square().sum(), (xb, wb))
    assert dx.dtype == dw.dtype == torch.bfloat16 and torch.isfinite(dx).all() and torch.isfinite(dw).all()


@pytest.mark.gpu
@pytest.mark.parametrize("S", [32, 48, 128, 1024], ids=lambda s: f"S{s}")
def test_tf32_allowed_stays_fp32_accurate_gpu(S, gen, allow_tf32):
    """With TF32 allowed the spectral conv still meets the fp32 tolerance against an fp64 reference
    (its plain-TF32 path was 3-9% off on an H200; see REDUCED_PRECISION_DOTS)."""
    allow_tf32(True)
    x, w = _inputs((4, 25), S, S // 2 + 1, 128, 128, torch.float32, "cuda", gen)
    y = SpectralConv1dFn.apply(x, w, "auto")
    assert rel_err(y, _ref64(x, w)) <= RTOL[torch.float32]


@pytest.mark.gpu
@pytest.mark.parametrize("S", [32, 128, 1024], ids=lambda s: f"S{s}")
def test_bf16_inputs_gpu(S, gen):
    """bf16 activations and weights: within bf16 rounding of the fp64 reference of the fp32 inputs."""
    x, w = _inputs((4, 25), S, S // 2, 128, 128, torch.float32, "cuda", gen)
    y = spectral_conv1d(x.detach().bfloat16(), w.detach().bfloat16(), backend="triton")
    assert y.dtype == torch.bfloat16
    assert rel_err(y, _ref64(x, w)) <= 2e-2


@pytest.mark.gpu
def test_autocast_bf16_gpu(gen):
    x, w = _inputs((4, 25), 64, 32, 128, 128, torch.float32, "cuda", gen)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        y = spectral_conv1d(x, w, backend="triton")
    assert y.dtype == torch.bfloat16
    y.float().square().sum().backward()
    assert w.grad.dtype == torch.float32 and x.grad.dtype == torch.float32
    assert rel_err(y, _ref64(x, w)) <= 2e-2


@pytest.mark.gpu
@pytest.mark.parametrize("transform", ["dft", "fft"])
def test_torch_compile_traces_the_triton_op_gpu(transform, gen):
    """fullgraph compile through the custom ops, both transforms (the fft path's inverse transform
    builds a mask, cached in eager only): the same outputs and gradients as eager, elementwise (a
    reduced scalar would only compare two summation orders)."""
    x, w = _inputs((4, 25), 64, 32, 128, 128, torch.float32, "cuda", gen)
    spectral_conv1d(x, w, backend="triton", transform=transform)  # eager first: the mask cache is filled
    compiled = torch.compile(lambda a, b: spectral_conv1d(a, b, backend="triton", transform=transform).sin(),
                             fullgraph=True)
    got, eager = compiled(x, w), spectral_conv1d(x, w, backend="triton", transform=transform).sin()
    assert rel_err(got, eager) <= 1e-5
    dy = torch.randn(got.shape, generator=gen).to("cuda")
    for g_c, g_e in zip(torch.autograd.grad(got, (x, w), dy), torch.autograd.grad(eager, (x, w), dy)):
        assert rel_err(g_c, g_e) <= 1e-5
