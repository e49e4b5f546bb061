"""Spectral convs along any axis: SpectralConv1d(dim=...) and the factorised
FactorizedSpectralConv of the 2D models, against an explicit DFT-matrix formula; fp64 gradcheck;
lazy modes per axis; weight sharing; bad input."""
import numpy as np
import pytest
import torch
from helpers import rel_err

from amg_fast.layers import FactorizedSpectralConv, FFNOBlock, SpectralConv1d
from amg_fast.ops import spectral_conv1d


def explicit_conv_along(x: np.ndarray, weight: np.ndarray, axis: int) -> np.ndarray:
    """y_j = N^(-1/2) sum_{k<K} c_k Re(Y_k e^{2 pi i j k / N}), Y_k = sum_i X_k,i W_k,i,o, X_k =
    N^(-1/2) sum_j x_j e^{-2 pi i j k / N} along `axis` of x [..., H] (c_k = 1 for k = 0 and k = N/2,
    else 2): the truncated ortho rfft -> mixing -> irfft written as DFT matrices."""
    xm = np.moveaxis(x, axis, -2)
    N, K = xm.shape[-2], weight.shape[0]
    phase = 2j * np.pi * np.outer(np.arange(K), np.arange(N)) / N  # [K, N]
    spectrum = np.einsum("kn,...nh->...kh", np.exp(-phase), xm) / np.sqrt(N)
    mixed = np.einsum("...ki,kio->...ko", spectrum, weight[..., 0] + 1j * weight[..., 1])
    c = np.where((np.arange(K) == 0) | (2 * np.arange(K) == N), 1.0, 2.0)
    y = np.einsum("k,kn,...ko->...no", c, np.exp(phase), mixed).real / np.sqrt(N)
    return np.moveaxis(y, -2, axis)


@pytest.mark.parametrize("shape,K0,K1", [((2, 3, 16, 12, 4), 5, 7), ((1, 10, 6, 3), 6, 4)],
                         ids=["X16-Y12-K5-7-Nyquist", "X10-Y6-K6-Nyquist-4"])
def test_factorized_conv_is_the_sum_of_per_axis_dft_convs(shape, K0, K1, gen):
    conv = FactorizedSpectralConv(shape[-1], 5, spatial_dims=2, backend="reference").double()
    with torch.no_grad():
        conv.axes[0].weight = torch.nn.Parameter(torch.randn(K0, shape[-1], 5, 2, dtype=torch.float64, generator=gen))
        conv.axes[1].weight = torch.nn.Parameter(torch.randn(K1, shape[-1], 5, 2, dtype=torch.float64, generator=gen))
    x = torch.randn(*shape, dtype=torch.float64, generator=gen)
    expected = sum(explicit_conv_along(x.numpy(), c.weight.detach().numpy(), axis)
                   for c, axis in zip(conv.axes, (-3, -2)))
    assert rel_err(conv(x), torch.from_numpy(expected)) <= 1e-12


def test_layer_along_x_is_the_op_along_x(gen):
    x = torch.randn(2, 8, 6, 4, dtype=torch.float64, generator=gen)
    conv = SpectralConv1d(4, 4, modes=3, dim=-3, backend="reference").double()
    along_x = conv(x)
    expected = spectral_conv1d(x.transpose(-3, -2), conv.weight, backend="reference").transpose(-3, -2)
    assert torch.equal(along_x, expected)
    x.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda a: conv(a), (x,))


def test_triton_path_along_x_equals_reference(kdev, gen, poisoned):
    x = torch.randn(2, 16, 12, 16, generator=gen).to(kdev).requires_grad_(True)
    w = (0.1 * torch.randn(5, 16, 16, 2, generator=gen)).to(kdev).requires_grad_(True)
    outs = [spectral_conv1d(x, w, dim=-3, backend=backend) for backend in ("reference", "triton")]
    grads = [torch.autograd.grad(out.square().sum(), (x, w)) for out in outs]
    assert rel_err(outs[1], outs[0]) <= 2e-3
    assert all(rel_err(g1, g0) <= 2e-3 for g0, g1 in zip(*grads))


def test_lazy_modes_per_axis_and_shared_weights():
    conv = FactorizedSpectralConv(4, 4, spatial_dims=2)
    conv(torch.randn(2, 20, 12, 4))
    assert [c.modes for c in conv.axes] == [10, 6] and conv.axes[0].weight.shape == (10, 4, 4, 2)
    a, b = (FFNOBlock(8, modes=3, spatial_dims=2) for _ in range(2))
    b.spectral.share_weight_of(a.spectral)
    assert all(mine.weight is theirs.weight for mine, theirs in zip(b.spectral.axes, a.spectral.axes))
    assert a(torch.randn(1, 8, 6, 8)).shape == (1, 8, 6, 8)


@pytest.mark.parametrize("dim", [-1, 0, 2, 1.5, True], ids=str)
def test_spectral_conv_dim_bad_input(dim):
    with pytest.raises(ValueError, match=rf"dim \(the spatial axis, counted from the end\) must be an int <= -2 "
                                         rf"\(-1 holds the channels\), got {dim!r}"):
        SpectralConv1d(4, 4, 2, dim=dim)
