"""spectral_conv1d reference vs an explicit DFT matrix (float64), gradcheck, dtypes, bad input."""
import math

import pytest
import torch
from helpers import RTOL, dft_matrix_spectral_conv, ids, randn, rel_err

from amg_fast.ops import spectral_conv1d, spectral_conv1d_ref


CASES = [(S, K, h_in, h_out) for S in (32, 48, 64, 128) for K in sorted({1, S // 4, S // 2, S // 2 + 1})
         for h_in, h_out in ((16, 16), (3, 5))] + [(7, 4, 4, 2), (2, 2, 1, 1), (1, 1, 2, 2)]


@pytest.mark.parametrize("S,K,h_in,h_out", CASES, ids=[ids(S=S, K=K, Hi=a, Ho=b) for S, K, a, b in CASES])
def test_reference_matches_dft_matrix(S, K, h_in, h_out, gen):
    x = randn(2, 3, S, h_in, generator=gen)
    w = randn(K, h_in, h_out, 2, generator=gen)
    y = spectral_conv1d(x, w, backend="reference")
    assert y.shape == (2, 3, S, h_out) and y.dtype == torch.float64
    assert rel_err(y, dft_matrix_spectral_conv(x, w)) <= 1e-10


DIM_CASES = [((2, 12, 10, 5), 1), ((2, 12, 10, 5), 2), ((2, 12, 10, 5), -3), ((3, 2, 9, 7, 4), 2), ((9, 4), 0)]


@pytest.mark.parametrize("shape,dim", DIM_CASES, ids=[f"{'x'.join(map(str, s))}-dim{d}" for s, d in DIM_CASES])
def test_reference_along_dim_matches_dft_matrix(shape, dim, gen):
    """dim selects the transformed axis of x [..., S, ..., H] (channels last), from either end."""
    x = randn(*shape, generator=gen)
    S = shape[dim]
    w = randn(S // 2 + 1, shape[-1], 3, 2, generator=gen)
    y = spectral_conv1d(x, w, dim=dim, backend="reference")
    assert y.shape == (*shape[:-1], 3)
    assert rel_err(y, dft_matrix_spectral_conv(x, w, dim)) <= 1e-10
    assert rel_err(y, spectral_conv1d(x.movedim(dim, -2), w).movedim(-2, dim)) <= 1e-12


def test_gradcheck_along_dim_float64(gen):
    x = randn(2, 6, 3, 2, generator=gen, requires_grad=True)
    w = randn(4, 2, 3, 2, generator=gen, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: spectral_conv1d(a, b, dim=1, backend="reference"), (x, w))


@pytest.mark.parametrize("dim", [-1, 2, 3, -4, True, 1.0, None], ids=str)
def test_bad_dim_is_refused(dim):
    """dim must be an int naming an axis of x other than the channel axis (the last)."""
    with pytest.raises(ValueError, match=r"dim must be an axis of x other than the last \(the channel axis\): "
                                         r"an int in -3..-2 or 0..1 for x of shape \(2, 8, 4\), got"):
        spectral_conv1d(torch.zeros(2, 8, 4), torch.zeros(3, 4, 4, 2), dim=dim)


def test_dft_oracle_is_not_trivially_equal(gen):
    """The oracle distinguishes the Nyquist weighting: dropping it changes the result."""
    x, w = randn(16, 3, generator=gen), randn(9, 3, 3, 2, generator=gen)
    assert rel_err(spectral_conv1d_ref(x, w), dft_matrix_spectral_conv(x, w)) <= 1e-10
    assert rel_err(spectral_conv1d_ref(x, w), dft_matrix_spectral_conv(x, w[:8])) > 1e-3


@pytest.mark.parametrize("S,K", [(8, 5), (9, 3), (6, 1)], ids=["S8-K5", "S9-K3", "S6-K1"])
def test_gradcheck_float64(S, K, gen):
    x = randn(2, S, 3, generator=gen, requires_grad=True)
    w = randn(K, 3, 2, 2, generator=gen, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: spectral_conv1d(a, b, backend="reference"), (x, w))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_low_precision_inputs_keep_dtype(dtype, gen):
    x, w = randn(4, 32, 16, generator=gen), randn(16, 16, 8, 2, generator=gen)
    y = spectral_conv1d(x.to(dtype), w.float())
    assert y.dtype == dtype
    tol = {torch.float32: RTOL[torch.float32], torch.bfloat16: 2e-2, torch.float16: 5e-3}[dtype]
    assert rel_err(y, dft_matrix_spectral_conv(x.to(dtype).double(), w.float().double())) <= tol


def test_linear_in_x_and_in_weight(gen):
    x1, x2 = randn(5, 32, 4, generator=gen), randn(5, 32, 4, generator=gen)
    w = randn(10, 4, 4, 2, generator=gen)
    assert rel_err(spectral_conv1d(x1 + 2 * x2, w), spectral_conv1d(x1, w) + 2 * spectral_conv1d(x2, w)) < 1e-12


@pytest.mark.parametrize(
    "x_shape,w_shape,dtype,match",
    [
        ((32,), (4, 1, 1, 2), torch.float32, "x must have rank"),
        ((32, 4), (4, 3, 4, 2), torch.float32, r"weight.shape\[1\] \(H_in\) must equal x.shape\[-1\] = 4"),
        ((32, 4), (4, 4, 4), torch.float32, "weight must have rank 4"),
        ((32, 4), (4, 4, 4, 3), torch.float32, "last dimension of 2"),
        ((32, 4), (0, 4, 4, 2), torch.float32, r"1..S//2\+1 = 1..17 for S = 32, got 0"),
        ((32, 4), (18, 4, 4, 2), torch.float32, r"1..S//2\+1 = 1..17 for S = 32, got 18"),
        ((32, 4), (4, 4, 4, 2), torch.int64, "x must be a real floating-point tensor.*int64"),
        ((32, 4), (4, 4, 4, 2), torch.complex64, "x must be a real floating-point tensor.*complex64"),
    ],
    ids=["rank1", "h_in-mismatch", "weight-rank", "weight-last-dim", "K0", "K-too-big", "int", "complex"],
)
def test_bad_input_errors(x_shape, w_shape, dtype, match):
    x = torch.zeros(x_shape, dtype=dtype)
    with pytest.raises((ValueError, TypeError), match=match):
        spectral_conv1d(x, torch.zeros(w_shape))


def test_weight_dtype_checked():
    with pytest.raises(TypeError, match="weight must be a real floating-point"):
        spectral_conv1d(torch.zeros(8, 2), torch.zeros(2, 2, 2, 2, dtype=torch.int32))


IRFFT_CASES = [(n, modes) for n in (7, 8, 128, 1024) for modes in (n // 4 + 1, n // 2 + 1)]


@pytest.mark.parametrize("n,modes", IRFFT_CASES, ids=[ids(n=n, K=m) for n, m in IRFFT_CASES])
def test_irfft_ortho_ignores_the_imaginary_parts_a_real_signal_cannot_have(n, modes, gen, kdev):
    """irfft_ortho on a spectrum with nonzero imaginary DC and Nyquist parts (the spectral conv's mixed
    spectrum has them) equals the explicit real inverse sum, on the kernel device too: cuFFT's C2R
    did not ignore them on an H100 (100 rows, S = 128 / 1024), torch.fft.irfft on CPU does."""
    from amg_fast.kernels._common import irfft_ortho

    spectrum = torch.complex(randn(100, modes, 3, generator=gen), randn(100, modes, 3, generator=gen))
    k = torch.arange(modes, dtype=torch.float64)[:, None]
    s = torch.arange(n, dtype=torch.float64)[None, :]
    c = torch.full((modes,), 2.0, dtype=torch.float64)
    c[0] = 1.0
    if n % 2 == 0 and modes == n // 2 + 1:
        c[-1] = 1.0
    inverse = c * torch.exp(2j * math.pi * s.T * k.T / n) / math.sqrt(n)  # [n, modes]
    want = torch.einsum("sk,rkc->rsc", inverse, spectrum).real
    for dtype in (torch.complex64, torch.complex128):
        got = irfft_ortho(spectrum.to(kdev, dtype), n, dim=1)
        assert got.shape == (100, n, 3)
        assert rel_err(got.cpu().double(), want) <= (1e-5 if dtype == torch.complex64 else 1e-12)


def test_fake_rfft_strides_are_compared_with_the_kernel_output():
    """fake_rfft_strides_match (which tests and benchmarks consult before compiling an rfft on CPU) sees
    torch 2.11's CPU fake rfft report contiguous strides its kernel does not write, and later torch agree."""
    from torch.torch_version import TorchVersion

    from amg_fast.kernels._common import fake_rfft_strides_match

    assert fake_rfft_strides_match("cpu") == (TorchVersion(torch.__version__) >= (2, 12))


def test_irfft_ortho_mask_cache_survives_tracing(gen):
    """The mask is cached in eager mode only: a fake-tensor trace (torch.compile's) after an eager
    call, and an eager call after a trace, both work and agree (a cached real mask inside a fake
    trace, or a cached fake one in eager, would fail)."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from amg_fast.kernels._common import irfft_ortho

    spectrum = torch.complex(randn(3, 9, 2, generator=gen), randn(3, 9, 2, generator=gen))
    eager = irfft_ortho(spectrum, 16, dim=1)
    with FakeTensorMode() as mode:
        fake = irfft_ortho(mode.from_tensor(spectrum), 16, dim=1)
    assert fake.shape == eager.shape
    assert torch.equal(irfft_ortho(spectrum, 16, dim=1), eager)
    x, w = randn(2, 16, 3, generator=gen), randn(9, 3, 3, 2, generator=gen)
    compiled = torch.compile(spectral_conv1d_ref, backend="aot_eager", fullgraph=True)
    assert rel_err(compiled(x, w), spectral_conv1d_ref(x, w)) <= 1e-12
