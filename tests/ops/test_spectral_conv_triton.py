"""spectral_conv1d Triton kernels vs the reference and the explicit DFT-matrix oracle: forward, dx,
dweight, every variant (transform dft / fft, mixing gauss / four / torch, dft GEMMs triton / torch), along any
axis.

On CPU the kernels run in Triton's interpreter (TRITON_INTERPRET=1, set by conftest); on a GPU the
same tests run the compiled kernels. fp32 results are compared with the fp64 reference of the same
inputs (an fp32 reference carries errors of its own: cuFFT's C2R on a GPU), at a tolerance that
allows TF32 dots. Output buffers are poisoned with NaN (`poisoned` fixture), so an element a kernel
fails to write fails the comparison.
"""
import contextlib
import os

import pytest
import torch
from helpers import RTOL, dft_matrix_spectral_conv, ids, record_launches, rel_err

from amg_fast.kernels import spectral_conv as kernels
from amg_fast.kernels._common import ELEMENTWISE_BLOCK, fake_rfft_strides_match
from amg_fast.kernels._tf32 import split_tf32
from amg_fast.ops import spectral_conv1d, spectral_conv1d_ref
from amg_fast.ops.spectral_conv import SpectralConv1dFn

# Every kernel variant a switch selects (docs/kernels.md); fft-gauss-wview / dft-torchgemm-four add nothing new.
VARIANTS = ["dft-gauss", "dft-four", "dft-gauss-wview", "dft-torchgemm", "fft-gauss", "fft-four-wview", "dft-torchmix",
            "dft-cublas", "fft-torchmix"]


@pytest.fixture
def variant():
    """Select a variant of kernels.VARIANTS by name (switches restored afterwards); returns its transform."""
    with contextlib.ExitStack() as stack:
        yield lambda name: stack.enter_context(kernels.use_variant(name))


def _inputs(lead, S, K, h_in, h_out, dtype, device, gen):
    x = torch.randn(*lead, S, h_in, dtype=dtype, generator=gen).to(device).requires_grad_()
    w = (torch.randn(K, h_in, h_out, 2, dtype=dtype, generator=gen) / h_in ** 0.5).to(device).requires_grad_()
    return x, w


def _check(run, x, w, gen, rtol, dim=-2, oracle=spectral_conv1d_ref):
    """run(x, w) and its dx, dweight against oracle(x, w, dim) computed in fp64 from the same values,
    under the same upstream gradient."""
    y = run(x, w)
    dy = torch.randn(y.shape, dtype=y.dtype, generator=gen).to(y.device)
    dx, dw = torch.autograd.grad(y, (x, w), dy)
    x64, w64 = (t.detach().double().requires_grad_() for t in (x, w))
    y_ref = oracle(x64, w64, dim)
    dx_ref, dw_ref = torch.autograd.grad(y_ref, (x64, w64), dy.double())
    assert y.shape == y_ref.shape and y.dtype == x.dtype and dx.dtype == x.dtype and dw.dtype == w.dtype
    for name, got, want in (("y", y, y_ref), ("dx", dx, dx_ref), ("dweight", dw, dw_ref)):
        assert torch.isfinite(got).all(), f"{name} has NaN/inf (an unwritten element?)"
        assert rel_err(got, want) <= rtol, f"{name}: rel err {rel_err(got, want):.2e} > {rtol:.0e}"


# The default variant over sizes: S non-power-of-two (48), K = 1 (the DC mode alone), K = S/2 and S/2+1
# (the Nyquist mode), H = 128 (several input-channel blocks per tile) and H = 16; B = 3 x 2 = 6 rows (one
# partial, masked row block). Reduced from 30 cases: the variants below cover the other code paths.
CASES = [(32, 1, 16), (32, 17, 128), (48, 12, 16), (48, 25, 128), (64, 33, 16), (128, 64, 128), (128, 65, 16)]


@pytest.mark.parametrize("S,K,H", CASES, ids=[ids(S=S, K=K, H=H) for S, K, H in CASES])
def test_triton_matches_reference_fp32(S, K, H, kdev, gen, poisoned):
    x, w = _inputs((3, 2), S, K, H, H, torch.float32, kdev, gen)
    _check(lambda a, b: spectral_conv1d(a, b, backend="triton"), x, w, gen, RTOL[torch.float32])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["fp32", "fp64"])
@pytest.mark.parametrize("name", VARIANTS)
def test_every_variant_matches_the_dft_oracle(name, dtype, variant, kdev, gen, poisoned):
    """Each variant against the explicit DFT matrix: S = 48 with the Nyquist mode, H_in = 24 and H_out = 40
    (masked channel tiles), fp32 and fp64."""
    transform = variant(name)
    x, w = _inputs((3,), 48, 25, 24, 40, dtype, kdev, gen)
    _check(lambda a, b: SpectralConv1dFn.apply(a, b, transform), x, w, gen,
           RTOL[dtype] if dtype == torch.float32 else 1e-12, oracle=dft_matrix_spectral_conv)


@pytest.mark.parametrize("name,x_left", [("dft-gauss", True), ("dft-gauss", False), ("fft-four-wview", True)],
                         ids=["dft-gauss-xleft", "dft-gauss-basisleft", "fft-four-wview"])
def test_several_tiles_and_row_splits(name, x_left, variant, monkeypatch, kdev, gen, poisoned):
    """Small blocks: several row, input- and output-channel tiles per kernel, and the dweight reduction
    split over 3 row ranges (partial sums added by torch), with K < S//2+1 (fft: zero-padded modes); the
    transform kernel in either orientation (X_LEFT: inp^T basis^T, else basis inp)."""
    transform = variant(name)
    monkeypatch.setitem(kernels.LAUNCH_POLICY, kdev.type, {
        "mix": {"default": dict(BLOCK_R=16, BLOCK_I=16, BLOCK_O=16, num_warps=4)},
        "dweight": {"default": dict(BLOCK_R=16, BLOCK_I=16, BLOCK_O=16, SPLIT_R=3, num_warps=4)},
        "transform": {"default": dict(BLOCK_M=16, BLOCK_J=16, BLOCK_N=16, num_warps=4, X_LEFT=x_left)}})
    x, w = _inputs((5, 9), 20, 7, 20, 36, torch.float64, kdev, gen)
    _check(lambda a, b: SpectralConv1dFn.apply(a, b, transform), x, w, gen, 1e-12)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["fp32", "fp64"])
@pytest.mark.parametrize("name", ["dft-gauss", "fft-gauss"])
def test_gpu_tiles(name, dtype, variant, allow_tf32, monkeypatch, kdev, gen, poisoned):
    """The GPU's launch policy (the CPU's tiles are larger): in fp32 mode the mixing on W's split planes ("x3split":
    128 rows, 64 output columns a program: H_out = 96 makes two output tiles a row tile, next to each other in
    the grid, the second masked) and the dweight's 16 rows a step ("x3": 70 rows, a masked last step); fp64
    takes the "default" entries (64 rows, one output tile, 32-row steps). Against the explicit DFT matrix."""
    transform = variant(name)
    allow_tf32(False)
    launches = []
    record_launches(kernels, launches, monkeypatch)
    monkeypatch.setitem(kernels.LAUNCH_POLICY, kdev.type, kernels.LAUNCH_POLICY["cuda"])
    x, w = _inputs((7, 10), 40, 20, 48, 96, dtype, kdev, gen)
    _check(lambda a, b: SpectralConv1dFn.apply(a, b, transform), x, w, gen,
           RTOL[dtype] if dtype == torch.float32 else 1e-12, oracle=dft_matrix_spectral_conv)
    out_tiles, row_tiles, dweight_rows = (2, 1, 16) if dtype == torch.float32 else (1, 2, 32)
    mixes = [(grid, kw["BLOCK_O"], kw["SPLIT"]) for kernel, grid, kw in launches
             if kernel == "_spectral_conv1d_mix_kernel"]
    modes = 20 if transform == "dft" else 21  # the fft path's mixing also zero-fills mode S/2 of irfft's input
    # forward (96 output channels), then the backward's (48: one tile of 64 either way)
    split = dtype == torch.float32
    assert mixes == [((modes * row_tiles * out_tiles,), 128 // out_tiles, split), ((modes * row_tiles,), 64, split)]
    assert {kw["BLOCK_R"] for kernel, _, kw in launches if kernel == "_spectral_conv1d_dweight_kernel"} == {
        dweight_rows}


def test_launch_policy_modes(monkeypatch):
    """Which LAUNCH_POLICY entry each dot mode takes: tf32x3 -> "x3", the split planes' products ("split") ->
    "x3split", plain TF32 and bf16 operands -> "default" unless the policy has their own, fp64 -> "default";
    every BLOCK capped by the size."""
    policy = {"mix": {"default": dict(BLOCK_R=64, BLOCK_I=32, BLOCK_O=128, num_warps=8),
                      "x3": dict(BLOCK_R=64, BLOCK_I=32, BLOCK_O=64, num_warps=8),
                      "x3split": dict(BLOCK_R=128, BLOCK_I=16, BLOCK_O=64, num_warps=8),
                      "bf16": dict(BLOCK_R=128, BLOCK_I=64, BLOCK_O=128, num_warps=4)}}
    monkeypatch.setitem(kernels.LAUNCH_POLICY, "cuda", policy)
    cuda = torch.device("cuda")
    tiles = {mode: kernels._tiles("mix", cuda, dots, dtype, R=1000, I=128, O=128)
             for mode, dots, dtype in (("x3", "tf32x3", torch.float32), ("x3split", "split", torch.float32),
                                       ("tf32", "tf32", torch.float32), ("bf16", "tf32", torch.bfloat16),
                                       ("fp64", "ieee", torch.float64))}
    assert tiles == {"x3": policy["mix"]["x3"], "x3split": policy["mix"]["x3split"], "tf32": policy["mix"]["default"],
                     "bf16": policy["mix"]["bf16"], "fp64": policy["mix"]["default"]}
    assert kernels._tiles("mix", cuda, "tf32x3", torch.float32, R=20, I=8, O=40) == dict(
        BLOCK_R=32, BLOCK_I=16, BLOCK_O=64, num_warps=8)


def _field(shape, dtype, device, gen, layout):
    """x of shape [B, X, Y, H] (or longer), contiguous or a non-contiguous view with those sizes."""
    if layout == "contiguous":
        return torch.randn(shape, dtype=dtype, generator=gen).to(device).requires_grad_()
    if layout == "transposed":  # X and Y swapped in memory
        base = torch.randn(shape[0], shape[2], shape[1], *shape[3:], dtype=dtype, generator=gen)
        return base.to(device).transpose(1, 2).requires_grad_()
    base = torch.randn(shape[-1], *shape[:-1], dtype=dtype, generator=gen)  # "channels-first": channel stride != 1
    return base.to(device).movedim(0, -1).requires_grad_()


DIMS = [((2, 12, 10, 16), 1, "dft", "contiguous"), ((2, 12, 10, 16), 2, "fft", "contiguous"),
        ((2, 12, 10, 16), 1, "fft", "transposed"), ((2, 12, 10, 16), -2, "dft", "transposed"),
        ((2, 10, 9, 16), -3, "dft", "channels-first"), ((2, 3, 9, 6, 16), 2, "dft", "contiguous")]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["fp32", "fp64"])
@pytest.mark.parametrize("shape,dim,transform,layout", DIMS,
                         ids=[f"{'x'.join(map(str, s))}-dim{d}-{t}-{lay}" for s, d, t, lay in DIMS])
def test_along_any_axis_matches_the_dft_oracle(shape, dim, transform, layout, dtype, kdev, gen, poisoned):
    """dim = 1, 2 (and from the end) of [B, X, Y, H] and of [B, T, X, Y, H], non-power-of-two sizes,
    non-contiguous x (axes swapped in memory, channels not innermost): forward and both gradients."""
    x = _field(shape, dtype, kdev, gen, layout)
    assert x.is_contiguous() == (layout == "contiguous")
    S = shape[dim]
    w = (torch.randn(S // 2 + 1, 16, 24, 2, dtype=dtype, generator=gen) / 4).to(kdev).requires_grad_()
    _check(lambda a, b: spectral_conv1d(a, b, dim=dim, backend="triton", transform=transform), x, w, gen,
           RTOL[dtype] if dtype == torch.float32 else 1e-12, dim=dim, oracle=dft_matrix_spectral_conv)


def test_axes_are_read_in_place(kdev):
    """The rows around the transformed axis are two strided groups: a view of x, never a copy, for any
    dim of a [B, X, Y, H] field in any memory order; longer shapes merge axes when their strides allow."""
    base = torch.randn(2, 10, 12, 16, device=kdev)
    for x in (base, base.transpose(1, 2), base.movedim(-1, 1).contiguous().movedim(1, -1)):
        for dim in (0, 1, 2):
            split = kernels.row_split(x, dim)
            rows = kernels.as_rows(x, dim, split)
            assert rows.data_ptr() == x.data_ptr() and rows._base is (x._base if x._base is not None else x)
            assert rows.shape[1] == x.shape[dim] and rows.shape[0] * rows.shape[2] == x.numel() // (x.shape[dim] * 16)
            back = kernels.from_rows(rows.contiguous(), x.shape, dim, split)
            assert back.shape == x.shape and torch.equal(back, x)
    assert kernels.row_split(base.transpose(1, 2), 2) == 1  # B | X: [B, X] do not merge when swapped
    y = torch.randn(2, 3, 9, 6, 16, device=kdev)
    assert kernels.as_rows(y, 2, kernels.row_split(y, 2)).shape == (6, 9, 6, 16)
    assert kernels.as_rows(y, 2, 2)._base is y


@pytest.mark.parametrize("mix", ["gauss", "torch"])
@pytest.mark.parametrize("K", [8, 11], ids=["K8", "K11"])
def test_fft_mixing_writes_the_irfft_input(K, mix, kdev, gen, poisoned, monkeypatch):
    """The mixing (kernel, or torch.bmm) on rfft's layout (interleaved re/im, read through view_as_real) against
    an explicit complex einsum, forward (W) and adjoint (W^H): modes < K mixed, modes >= K zero, imaginary
    parts of modes 0 and S/2 exactly zero (a real signal's spectrum: what irfft takes)."""
    monkeypatch.setattr(kernels, "MIX_METHOD", mix)
    S, h_in, h_out = 20, 16, 24
    x = torch.randn(3, S, 2, h_in, dtype=torch.float64, generator=gen).to(kdev)
    w = torch.randn(K, h_in, h_out, 2, dtype=torch.float64, generator=gen).to(kdev)
    spec = torch.view_as_real(torch.fft.rfft(x, dim=1, norm="ortho"))  # [3, 11, 2, 16, 2]
    out = torch.full((3, S // 2 + 1, 2, h_out, 2), float("nan"), dtype=torch.float64, device=kdev)
    wc = torch.view_as_complex(w)
    for adjoint in (False, True):  # adjoint: the planes of w^T, so that (w^T)^H = conj(w)
        kernels._mix(spec, kernels.weight_planes(w.transpose(1, 2) if adjoint else w, torch.float64), out, K, S,
                     adjoint, False)
        want = torch.einsum("bkqi,kio->bkqo", torch.view_as_complex(spec)[:, :K], wc.conj() if adjoint else wc)
        got = torch.view_as_complex(out)
        assert rel_err(got[:, 1:min(K, S // 2)], want[:, 1:S // 2]) <= 1e-13
        for real_mode in (0, S // 2) if K > S // 2 else (0,):
            assert rel_err(got[:, real_mode].real, want[:, real_mode].real) <= 1e-13
            assert torch.equal(got[:, real_mode].imag, torch.zeros_like(got[:, real_mode].imag))
        assert torch.equal(got[:, K:], torch.zeros_like(got[:, K:]))


LAYOUTS = [(False, False), (True, True), (False, True), (True, False)]


def _complex_rows(z: torch.Tensor, paired: bool) -> torch.Tensor:
    """Complex [..., C] -> real [..., 2C]: (re, im) per channel when paired, else all re, then all im (mode_rows)."""
    return torch.stack([z.real, z.imag], -1 if paired else -2).flatten(-2)


@pytest.mark.parametrize("impl", ["weight_blocks", "weight_blocks_ref"], ids=["kernel", "ref"])
@pytest.mark.parametrize("paired_in,paired_out", LAYOUTS)
@pytest.mark.parametrize("adjoint", [False, True], ids=["W", "W^H"])
def test_weight_blocks_act_on_rows_as_the_complex_product(paired_in, paired_out, adjoint, impl, kdev, gen):
    """A row of real and imaginary parts (paired: (re, im) per channel; else all re, then all im) times
    weight_blocks (the kernel, and its torch reference) equals the complex product x W (x W^H when adjoint)
    computed with complex tensors."""
    K, h_in, h_out, R = 3, 5, 4, 7
    x = torch.randn(K, R, h_in, dtype=torch.complex128, generator=gen).to(kdev)
    w = torch.randn(K, h_in, h_out, dtype=torch.complex128, generator=gen).to(kdev)
    planes = torch.stack([w.real, w.imag])  # [2, K, H_in, H_out]
    if adjoint:  # the adjoint mixing maps H_out channels to H_in: planes as the backward passes them
        x = torch.randn(K, R, h_out, dtype=torch.complex128, generator=gen).to(kdev)
    blocks = getattr(kernels, impl)(planes, adjoint, paired_in, paired_out, torch.float64)
    got = _complex_rows(x, paired_in) @ blocks
    want = _complex_rows(x @ (w.conj().transpose(1, 2) if adjoint else w), paired_out)
    assert rel_err(got, want) <= 1e-14


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, pytest.param(torch.bfloat16, marks=pytest.mark.gpu)],
                         ids=["fp32", "fp64", "bf16"])
@pytest.mark.parametrize("paired_in,paired_out", LAYOUTS)
@pytest.mark.parametrize("adjoint", [False, True], ids=["W", "W^H"])
def test_weight_blocks_kernel_equals_its_reference(paired_in, paired_out, adjoint, dtype, kdev, gen, monkeypatch):
    """The one-launch weight_blocks equals weight_blocks_ref element for element (entries are copies, negations
    and a cast), from planes that are a strided view of weight [K, H_in, H_out, 2], over more than one tile of
    a program (WEIGHT_TILE) along H_in and H_out, the last ones partial, in each output dtype (bf16 on a GPU: the
    interpreter's fp32 -> bf16 cast truncates where torch's rounds to nearest)."""
    monkeypatch.setitem(kernels.WEIGHT_TILE, kdev.type, kernels.WEIGHT_TILE["cuda"])  # the GPU's tiles on CPU too
    assert kernels.WEIGHT_TILE["cuda"] < 33 < 35 < 2 * kernels.WEIGHT_TILE["cuda"]
    weight = torch.randn(3, 35, 33, 2, dtype=torch.float32, generator=gen).to(kdev)  # 2 x 2 tiles a mode
    planes = weight.permute(3, 0, 1, 2)
    got = kernels.weight_blocks(planes, adjoint, paired_in, paired_out, dtype)
    want = kernels.weight_blocks_ref(planes, adjoint, paired_in, paired_out, dtype)
    assert got.dtype == dtype and got.is_contiguous() and torch.equal(got, want)


@pytest.mark.parametrize("paired", [False, True], ids=["planes", "paired"])
def test_adjoint_blocks_are_the_transpose_when_rows_and_outputs_share_a_layout(paired, kdev, gen):
    """W^H's real blocks equal W's transposed, bit for bit, when the rows and the outputs are laid out alike
    (what lets the cuBLAS mixing's backward reuse the forward's blocks): [[Wr, Wi], [-Wi, Wr]]^T is
    [[Wr^T, -Wi^T], [Wi^T, Wr^T]], W^H's real form."""
    planes = torch.randn(2, 3, 5, 4, dtype=torch.float64, generator=gen).to(kdev)
    forward = kernels.weight_blocks(planes, False, paired, paired, torch.float64)
    assert torch.equal(kernels.weight_blocks(planes, True, paired, paired, torch.float64), forward.transpose(1, 2))


@pytest.mark.parametrize("transform", ["dft", "fft"])
def test_cublas_mixing_backward_reuses_the_forward_blocks(transform, monkeypatch, kdev, gen, poisoned):
    """MIX_METHOD "torch": the "dft" path's forward keeps W's real blocks and its backward multiplies by their
    transpose (no second weight_blocks launch); the "fft" path (rfft's rows are not paired, the irfft buffer
    is) builds W^H's in the backward. Output and both gradients against the DFT matrix in fp64 either way."""
    monkeypatch.setattr(kernels, "MIX_METHOD", "torch")
    launches = []
    record_launches(kernels, launches, monkeypatch)
    x, w = _inputs((3,), 16, 8, 12, 20, torch.float64, kdev, gen)
    y = SpectralConv1dFn.apply(x, w, transform)
    saved_blocks = y.grad_fn.saved_tensors[4]
    assert saved_blocks.shape == ((8, 24, 40) if transform == "dft" else (0,))
    forward = [name for name, *_ in launches].count("_weight_blocks_kernel")
    y.backward(torch.randn(y.shape, dtype=torch.float64, generator=gen).to(kdev))
    assert (forward, [name for name, *_ in launches].count("_weight_blocks_kernel")) == (
        (1, 1) if transform == "dft" else (1, 2))
    x.grad = w.grad = None
    _check(lambda a, b: SpectralConv1dFn.apply(a, b, transform), x, w, gen, 1e-12, oracle=dft_matrix_spectral_conv)


@pytest.mark.parametrize("impl", ["dweight_parts", "dweight_parts_ref"], ids=["kernel", "ref"])
@pytest.mark.parametrize("paired_x,paired_dy", LAYOUTS)
@pytest.mark.parametrize("S,K", [(10, 6), (11, 6), (16, 5)], ids=["nyquist", "odd-S", "no-nyquist-mode"])
def test_dweight_parts_is_the_weight_gradient(paired_x, paired_dy, S, K, impl, kdev, gen, monkeypatch):
    """dweight_parts (the kernel, and its torch reference) of X^T dY over real rows gives a_k X^H dY, from complex
    tensors (a_k = 1 for modes 0 and S/2 when S is even and S/2 < K, else 2), as [K, H_in, H_out, 2]; the kernel
    equals the reference element for element, over several programs (the last one partial)."""
    monkeypatch.setitem(ELEMENTWISE_BLOCK, kdev.type, 16)
    R, h_in, h_out = 7, 5, 4
    x = torch.randn(K, R, h_in, dtype=torch.complex128, generator=gen).to(kdev)
    dy = torch.randn(K, R, h_out, dtype=torch.complex128, generator=gen).to(kdev)
    prod = _complex_rows(x, paired_x).transpose(1, 2) @ _complex_rows(dy, paired_dy)  # [K, 2 H_in, 2 H_out]
    a_k = torch.full((K, 1, 1), 2.0, dtype=torch.float64, device=kdev)
    a_k[0] = 1.0
    if S % 2 == 0 and S // 2 < K:
        a_k[S // 2] = 1.0
    got = getattr(kernels, impl)(prod, S, paired_x, paired_dy, torch.float32)
    want = torch.view_as_real(a_k * (x.conj().transpose(1, 2) @ dy))
    assert got.dtype == torch.float32 and got.shape == (K, h_in, h_out, 2)
    assert rel_err(got.double(), want) <= 1e-7
    assert torch.equal(kernels.dweight_parts(prod, S, paired_x, paired_dy, torch.float64),
                       kernels.dweight_parts_ref(prod, S, paired_x, paired_dy, torch.float64))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16], ids=["fp64", "fp32", "bf16"])
@pytest.mark.parametrize("S", [16, 15], ids=["even-S", "odd-S"])
def test_bases_are_exactly_zero_on_the_imaginary_parts_of_real_modes(S, dtype, kdev):
    """A = the ortho rFFT (against torch.fft.rfft), G = its inverse with every mode kept (G A = I), and both exactly
    0 on the imaginary parts of modes 0 and S/2 (a real signal's spectrum has none), in every form the kernels
    read (fp64; fp32, here fp32 mode's TF32 hi / lo planes; bf16): the "dft" path's cuBLAS mixing leaves those
    parts of its output as computed, for the synthesis to multiply by zeros."""
    K = S // 2 + 1
    A, G = kernels.spectral_bases(S, K, dtype, torch.device(kdev))
    if dtype == torch.float64:
        x = torch.randn(S, 3, dtype=torch.float64, device=kdev)
        want = torch.view_as_real(torch.fft.rfft(x, dim=0, norm="ortho")).permute(0, 2, 1).reshape(2 * K, 3)
        assert rel_err(A @ x, want) <= 1e-14 and rel_err(G @ (A @ x), x) <= 1e-14
    for plane_a, plane_g in zip(A.reshape(-1, 2 * K, S), G.reshape(-1, S, 2 * K)):  # hi, lo planes: each
        for mode in (0, S // 2) if S % 2 == 0 else (0,):
            assert not plane_a[2 * mode + 1].any() and not plane_g[:, 2 * mode + 1].any()


@pytest.mark.parametrize("transform", ["dft", "fft"])
def test_torch_mixing_reads_and_writes_the_spectrum_in_place(transform, monkeypatch, kdev):
    """MIX_METHOD "torch" on the 1D layouts (Q = 1): the mixed buffer is written through a view in both layouts,
    the "dft" spectrum's rows and a channels-innermost complex spectrum's (paired) are read as views. rfft's own
    output has the modes innermost (cuFFT and x86 CPU builds: ATen's _exec_fft orders the batch axes by stride,
    the transformed axis last), its channels 2 (S//2+1) values apart: read through a copy, as planes, whose
    values are checked. A 2D field's rows (Q > 1) are copied."""
    monkeypatch.setattr(kernels, "MIX_METHOD", "torch")
    S, K, H = 32, 16, 8
    A, _ = kernels.spectral_bases(S, K, torch.float64, torch.device(kdev))
    x4 = torch.randn(6, S, 1, H, dtype=torch.float64, device=kdev)
    if transform == "fft":
        c = torch.fft.rfft(x4, dim=1, norm="ortho")
        modes_inner = torch.view_as_real(c.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2))
        copied, paired = kernels.mode_rows(modes_inner, K)
        assert not paired and copied._base is None  # a copy: all real parts, then all imaginary parts
        want = torch.stack([c.real, c.imag], 2)[:, :K, :, 0].permute(1, 0, 2, 3)  # [K, 6, 2 (part), H]
        assert torch.equal(copied.view(K, 6, 2, H), want)
        spec = torch.view_as_real(c.contiguous())  # channels innermost
    else:
        spec = kernels._spectrum(x4, A, False)
    rows, paired = kernels.mode_rows(spec, K)
    assert paired == (transform == "fft") and rows.shape == (K, 6, 2 * H)
    assert rows.data_ptr() == spec.data_ptr() and rows._base is spec._base
    if transform == "fft":  # the buffers _mix_and_synthesize writes
        out = torch.empty(6, S // 2 + 1, 1, H, 2, dtype=torch.float64, device=kdev)
    else:
        out = kernels.dft_spectrum_parts(torch.empty(6, 2 * K, 1, H, dtype=torch.float64, device=kdev))
    target = out[:, :K].permute(1, 0, 2, 3, 4) if paired else out[:, :K].permute(1, 0, 2, 4, 3)
    assert kernels._flat_view(target, (K, 6, 2 * H)) is not None
    field = kernels._spectrum(torch.randn(2, S, 3, H, dtype=torch.float64, device=kdev), A, transform == "fft")
    rows2, _ = kernels.mode_rows(field, K)
    assert rows2.shape == (K, 6, 2 * H) and rows2._base is None  # a copy


@pytest.mark.parametrize("transform,layout", [("dft", "contiguous"), ("fft", "contiguous"), ("fft", "channels-first")])
def test_torch_mixing_along_a_2d_fields_axis(transform, layout, monkeypatch, kdev, gen, poisoned):
    """MIX_METHOD "torch" along X of [B, X, Y, H] (rows B | Y: Q > 1, the copy path), fp64, against the DFT matrix;
    channels-first x: rfft's output in yet another axis order."""
    monkeypatch.setattr(kernels, "MIX_METHOD", "torch")
    x = _field((2, 12, 10, 16), torch.float64, kdev, gen, layout)
    w = (torch.randn(7, 16, 24, 2, dtype=torch.float64, generator=gen) / 4).to(kdev).requires_grad_()
    _check(lambda a, b: spectral_conv1d(a, b, dim=1, backend="triton", transform=transform), x, w, gen, 1e-12,
           dim=1, oracle=dft_matrix_spectral_conv)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["fp32", "fp64"])
def test_fft_path_builds_no_bases(dtype, kdev, gen, poisoned, monkeypatch):
    """The fft path reads only the bases' dtype: it builds none (spectral_bases refused here) and saves two
    empty tensors of the work dtype for the backward; its output and gradients still match the DFT matrix."""
    def refuse(*args):
        raise AssertionError(f"spectral_bases{args} called on the fft path")

    monkeypatch.setattr(kernels, "spectral_bases", refuse)
    x = torch.randn(3, 16, 8, dtype=dtype, generator=gen).to(kdev).requires_grad_()
    w = (torch.randn(6, 8, 8, 2, dtype=dtype, generator=gen) / 4).to(kdev).requires_grad_()
    y = SpectralConv1dFn.apply(x, w, "fft")
    saved = y.grad_fn.saved_tensors
    assert [t.numel() for t in saved[2:4]] == [0, 0] and {t.dtype for t in saved[2:4]} == {dtype}
    _check(lambda a, b: SpectralConv1dFn.apply(a, b, "fft"), x, w, gen, RTOL[dtype], oracle=dft_matrix_spectral_conv)


@pytest.mark.parametrize("transform,S,K", [("fft", 15, 8), ("fft", 15, 5), ("dft", 15, 8)],
                         ids=["fft-S15-K8", "fft-S15-K5", "dft-S15-K8"])
def test_torch_mixing_odd_S_and_truncated_modes(transform, S, K, monkeypatch, kdev, gen, poisoned):
    """MIX_METHOD "torch" with an odd S (no Nyquist mode: only mode 0's imaginary part is dropped): every mode
    S//2+1 mixed, or K < S//2+1 (fft: the irfft buffer's modes >= K zeroed), H_in != H_out; fp64 against the
    DFT matrix, forward and both gradients."""
    monkeypatch.setattr(kernels, "MIX_METHOD", "torch")
    x, w = _inputs((3,), S, K, 12, 20, torch.float64, kdev, gen)
    _check(lambda a, b: SpectralConv1dFn.apply(a, b, transform), x, w, gen, 1e-12, oracle=dft_matrix_spectral_conv)


@pytest.mark.parametrize("S,K,transform", [(12, 7, "dft"), (9, 3, "dft"), (10, 4, "fft")],
                         ids=["S12-K7-dft", "S9-K3-dft", "S10-K4-fft"])
@pytest.mark.parametrize("mix", ["gauss", "four", "torch"])
def test_gradcheck_fp64(S, K, transform, mix, monkeypatch, kdev, gen):
    monkeypatch.setattr(kernels, "MIX_METHOD", mix)
    x, w = _inputs((2,), S, K, 3, 2, torch.float64, kdev, gen)
    assert torch.autograd.gradcheck(lambda a, b: SpectralConv1dFn.apply(a, b, transform), (x, w), fast_mode=True)


def test_gradcheck_along_dim_fp64(kdev, gen):
    x = torch.randn(2, 6, 3, 2, dtype=torch.float64, generator=gen).to(kdev).transpose(1, 2).requires_grad_()
    w = torch.randn(4, 2, 3, 2, dtype=torch.float64, generator=gen).to(kdev).requires_grad_()
    assert torch.autograd.gradcheck(lambda a, b: SpectralConv1dFn.apply(a, b, "fft", 2), (x, w), fast_mode=True)


@pytest.mark.parametrize("transform", [pytest.param("dft", marks=pytest.mark.gpu), "fft"])
def test_large_S_1024(transform, kdev, gen, poisoned):
    """S = 1024 with the Nyquist mode (the H200's failing size). The dft case (not auto's choice at this
    S; ~20 s in the interpreter, 1026 x 1024 bases) runs on a GPU only; S = 48..128 cover its code."""
    x, w = _inputs((2,), 1024, 513, 16, 16, torch.float32, kdev, gen)
    _check(lambda a, b: SpectralConv1dFn.apply(a, b, transform), x, w, gen, RTOL[torch.float32])


@pytest.mark.parametrize("name", ["dft-gauss", "dft-torchmix", "fft-torchmix"])
def test_non_contiguous_weight(name, variant, kdev, gen, poisoned):
    """weight as a permuted view gives the same result as a contiguous one: the default variant, and the cuBLAS
    mixing, whose variants read W's planes as a view of weight (weight_blocks from strided planes)."""
    transform = variant(name)
    x = torch.randn(2, 16, 64, dtype=torch.float64, generator=gen).to(kdev).transpose(1, 2).requires_grad_()
    w_p = torch.randn(16, 24, 20, 2, dtype=torch.float64, generator=gen).to(kdev).permute(1, 0, 2, 3)
    w_p.requires_grad_()
    assert not w_p.is_contiguous()
    _check(lambda a, b: spectral_conv1d(a, b, backend="triton", transform=transform), x, w_p, gen, 1e-12)


def test_unsupported_dtype_is_refused(kdev):
    x, w = torch.randn(4, 16, 16, device=kdev).half(), torch.randn(8, 16, 16, 2, device=kdev)
    with pytest.raises(TypeError, match="backend='triton' takes float32, float64 or bfloat16"):
        spectral_conv1d(x, w, backend="triton")


def test_unknown_transform_is_refused(kdev):
    x, w = torch.randn(4, 16, 16, device=kdev), torch.randn(8, 16, 16, 2, device=kdev)
    with pytest.raises(ValueError, match=r"transform must be one of \('auto', 'dft', 'fft'\), got 'fast'"):
        SpectralConv1dFn.apply(x, w, "fast")


@pytest.mark.parametrize("attr,value,match", [
    ("MIX_METHOD", "three", r"AMG_FAST_SPECTRAL_MIX \(kernels.spectral_conv.MIX_METHOD\) must be one of "
                            r"\('auto', 'gauss', 'four', 'torch'\), got 'three'"),
    ("DFT_GEMM", "cublas", r"AMG_FAST_SPECTRAL_DFT_GEMM \(kernels.spectral_conv.DFT_GEMM\) must be one of "
                           r"\('auto', 'triton', 'torch'\), got 'cublas'"),
    ("X3_METHOD", "both", r"AMG_FAST_SPECTRAL_X3 \(kernels.spectral_conv.X3_METHOD\) must be one of "
                          r"\('split', 'dot'\), got 'both'"),
])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["fp32", "fp64"])  # fp64: no fp32 mode
def test_bad_switch_values_are_refused(attr, value, match, dtype, monkeypatch, kdev):
    monkeypatch.setattr(kernels, attr, value)
    x, w = (torch.randn(4, 16, 16, device=kdev, dtype=dtype), torch.randn(8, 16, 16, 2, device=kdev, dtype=dtype))
    with pytest.raises(ValueError, match=match):
        SpectralConv1dFn.apply(x, w, "dft")


def test_auto_takes_cublas_mixing_for_fp32_work_on_cuda_only_and_our_transforms_everywhere(monkeypatch, allow_tf32):
    """MIX_METHOD "auto" (the default): cuBLAS for fp32 work on CUDA (fp32 and TF32 modes, as the H200 timed
    faster), our kernels for bf16 / fp16 work, fp64, the CPU and no device; not when REDUCED_PRECISION_DOTS is
    off under TF32 (cuBLAS would run TF32 where fp32 accuracy is asked). DFT_GEMM "auto": our transform kernel
    everywhere (since 2026-12-01: 1.02-1.06x the cuBLAS DFT GEMMs' step in fp32 and TF32 on the H200). Explicit
    values win. Decides nothing on the device: the tensors' device only names it."""
    assert (kernels.MIX_METHOD, kernels.DFT_GEMM) == ("auto", "auto")
    for work, device, want in ((torch.float32, "cuda", "torch"), (torch.float32, "cpu", None),
                               (torch.float32, None, None), (torch.bfloat16, "cuda", None),
                               (torch.float16, "cuda", None), (torch.float64, "cuda", None)):
        assert kernels._mix_method(work, device) == (want or "gauss"), (work, device)
        assert kernels._dft_gemm(work, device) == "triton", (work, device)
    allow_tf32(True)
    assert kernels._mix_method(torch.float32, "cuda") == "torch"
    monkeypatch.setattr(kernels, "REDUCED_PRECISION_DOTS", False)
    assert (kernels._mix_method(torch.float32, "cuda"), kernels._dft_gemm(torch.float32, "cuda")) == ("gauss", "triton")
    allow_tf32(False)
    assert kernels._mix_method(torch.float32, "cuda") == "torch"
    monkeypatch.setattr(kernels, "DFT_GEMM", "torch")
    assert kernels._dft_gemm(torch.float32, "cuda") == "torch"
    monkeypatch.setattr(kernels, "MIX_METHOD", "four")
    monkeypatch.setattr(kernels, "DFT_GEMM", "triton")
    assert (kernels._mix_method(torch.float32, "cuda"), kernels._dft_gemm(torch.float32, "cuda")) == ("four", "triton")
    assert kernels.split_mixing(torch.float32, "cuda")  # fp32 mode's split W planes with our mixing kernel


def test_auto_follows_the_planes_when_tf32_changes_between_forward_and_backward(monkeypatch, allow_tf32, gen,
                                                                                    kdev):
    """With REDUCED_PRECISION_DOTS off, a forward under TF32 runs our kernels on W's split planes (cuBLAS would
    run TF32) and a backward after TF32 was turned off resolves "auto" to cuBLAS: the saved split planes go to
    our kernel still (cuBLAS refused them), and the gradients are fp32-accurate. cublas_by_default as on CUDA."""
    monkeypatch.setattr(kernels, "cublas_by_default", lambda work, device: work == torch.float32 and (
        kernels.REDUCED_PRECISION_DOTS or not torch.backends.cuda.matmul.allow_tf32))
    monkeypatch.setattr(kernels, "REDUCED_PRECISION_DOTS", False)
    x, w = _inputs((3,), 32, 16, 16, 16, torch.float32, kdev, gen)
    allow_tf32(True)
    y = SpectralConv1dFn.apply(x, w, "dft")
    allow_tf32(False)
    dy = torch.randn(y.shape, generator=gen).to(kdev)
    got = torch.autograd.grad(y, (x, w), dy)
    x64, w64 = (t.detach().double().requires_grad_() for t in (x, w))
    want = torch.autograd.grad(spectral_conv1d_ref(x64, w64, -2), (x64, w64), dy.double())
    assert all(rel_err(a, b) <= 2e-5 for a, b in zip(got, want))


def test_transform_switch_overrides_auto(monkeypatch):
    """AMG_FAST_SPECTRAL_TRANSFORM (read at import into limits.SPECTRAL_TRANSFORM_AUTO) picks the path of
    transform="auto" (how a GPU session times the training step on either); explicit choices win."""
    from amg_fast.kernels import limits

    assert [limits.spectral_transform("auto", S) for S in (128, 512)] == ["dft", "fft"]
    monkeypatch.setattr(limits, "SPECTRAL_TRANSFORM_AUTO", "fft")
    assert limits.spectral_transform("auto", 32) == "fft" and limits.spectral_transform("dft", 32) == "dft"
    monkeypatch.setattr(limits, "SPECTRAL_TRANSFORM_AUTO", "fast")
    with pytest.raises(ValueError, match=r"AMG_FAST_SPECTRAL_TRANSFORM .* must be one of .*got 'fast'"):
        limits.spectral_transform("auto", 32)


def test_transform_crossover_per_precision_mode(monkeypatch, allow_tf32, gen, kdev):
    """TRANSFORM_FFT_MIN_S_BY_MODE: a precision mode listed takes its own crossover (fp32 mode apart from TF32,
    the TF32 setting read when the op runs), the others TRANSFORM_FFT_MIN_S; the public op follows it (its
    Function's forward saves the fft path's empty bases, the dft path's filled ones)."""
    from amg_fast.kernels import limits

    monkeypatch.setattr(limits, "TRANSFORM_FFT_MIN_S_BY_MODE", {"fp32": 32})
    allow_tf32(False)
    assert [limits.spectral_transform("auto", S, torch.float32) for S in (16, 32)] == ["dft", "fft"]
    assert limits.spectral_transform("auto", 32, torch.float64) == "dft"
    assert limits.spectral_transform("auto", 32) == "dft"  # no dtype: TRANSFORM_FFT_MIN_S
    assert limits.spectral_transform("dft", 32, torch.float32) == "dft"
    x = torch.randn(2, 32, 8, generator=gen, dtype=torch.float64).to(kdev)
    w = torch.randn(5, 8, 8, 2, generator=gen, dtype=torch.float64).to(kdev)
    for dtype, want_fft in ((torch.float32, True), (torch.float64, False)):
        y = spectral_conv1d(x.to(dtype).requires_grad_(), w.to(dtype), backend="triton")
        assert (y.grad_fn.saved_tensors[2].numel() == 0) == want_fft
        assert rel_err(y, spectral_conv1d_ref(x, w)) <= (1e-5 if dtype == torch.float32 else 1e-12)
    allow_tf32(True)
    assert limits.spectral_transform("auto", 32, torch.float32) == "dft"


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


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1",
                    reason="checks the kernels against the interpreter's TF32 emulation (tf32_mma); a GPU's own: "
                           "bench/probe_spectral_accuracy.py")
def test_plain_tf32_dots_read_operands_rounded_where_formed(allow_tf32, tf32_mma, gen):
    """TF32 allowed (the default reduced dots), the dots truncating their fp32 operands as a Hopper MMA
    (tf32_mma): the dft path's relative error (norm) against fp64 is the rounded algorithm's, 5.9-6.0e-4
    for 3 inputs (2-core CPU, 2026-11-30), since the transform kernel also rounds its input tile (X_LEFT; 7.6-7.8e-4
    when the MMA truncated it, 2026-11-27); truncating the bases, spectra and Gauss sums instead of rounding
    them where they are formed (round_to_tf32 and round_tf32 as truncations) gave 2.0e-3, the kernels' spectra
    and Gauss sums alone (round_tf32) 1.7e-3. Exact dots (the emulation idle) give 5.0e-4 (4.5e-4 with x
    unrounded): hence both bounds."""
    allow_tf32(True)
    errs = []
    for _ in range(3):
        x = torch.randn(8, 64, 32, generator=gen)
        w = torch.randn(32, 32, 32, 2, generator=gen) / 32
        ref = spectral_conv1d_ref(x.double(), w.double())
        errs.append(rel_err(spectral_conv1d(x, w, backend="triton", transform="dft"), ref))
    assert 5.4e-4 < sum(errs) / len(errs) <= 6.8e-4, errs  # above 5.4e-4: the emulation is live


def test_reduced_precision_dots_follow_the_mode_by_default(allow_tf32, monkeypatch):
    """By default (kernels.spectral_conv.REDUCED_PRECISION_DOTS) the spectral conv computes in the mode's
    precision: plain TF32 dots for fp32 inputs when TF32 is allowed, tf32x3 when it is not, bf16
    intermediates and bf16 MMAs for bf16 inputs; the opt-out (AMG_FAST_SPECTRAL_REDUCED_DOTS=0) keeps fp32
    intermediates and tf32x3 dots whatever TF32 and the input dtype say."""
    allow_tf32(True)
    assert kernels.REDUCED_PRECISION_DOTS
    assert kernels.work_dtype(torch.bfloat16) == torch.bfloat16 and kernels._dots(torch.float32) == "tf32"
    assert kernels._bf16_operands(torch.bfloat16) and not kernels._bf16_operands(torch.float32)
    allow_tf32(False)
    assert kernels._dots(torch.float32) == "tf32x3"
    allow_tf32(True)
    monkeypatch.setattr(kernels, "REDUCED_PRECISION_DOTS", False)
    assert [kernels.work_dtype(t) for t in (torch.bfloat16, torch.float32, torch.float64)] == [torch.float32] * 2 + [
        torch.float64]
    assert [kernels._dots(t) for t in (torch.float32, torch.float64)] == ["tf32x3", "ieee"]
    assert not kernels._bf16_operands(torch.bfloat16)


def _tf32_low_bits(t: torch.Tensor) -> torch.Tensor:
    """The 13 mantissa bits of fp32 t that a TF32 operand drops (0 where t is a TF32 value)."""
    return t.detach().float().contiguous().view(torch.int32) & 0x1FFF


def test_round_to_tf32_is_round_to_nearest_ties_away_on_ten_mantissa_bits(gen):
    """kernels.round_to_tf32 against an independent formula in fp64: the nearest multiple of TF32's ulp
    at t's binade (2^(e - 10), e = floor(log2 |t|)), ties away from zero; and its exact ties."""
    t = torch.randn(4096, generator=gen) * torch.logspace(-3, 3, 4096).float()
    ulp = torch.exp2(torch.floor(torch.log2(t.double().abs())) - 10)
    expected = torch.sign(t.double()) * torch.floor(t.double().abs() / ulp + 0.5) * ulp
    assert torch.equal(kernels.round_to_tf32(t).double(), expected)
    half = 2.0 ** -11  # half a TF32 ulp at 1
    ties = torch.tensor([1 + half, -(1 + half), 1 + half - 2 ** -23, 1 + 3 * half], dtype=torch.float32)
    assert kernels.round_to_tf32(ties).tolist() == [1 + 2 * half, -(1 + 2 * half), 1.0, 1 + 4 * half]
    assert not _tf32_low_bits(kernels.round_to_tf32(t)).any()


# NaN and inf as fp32 bits: a GPU's NaN (0x7FFFFFFF), its negative, NaNs with a low / high payload, +-inf
NAN_INF_BITS = (0x7FFFFFFF, -1, 0x7F800001, 0x7FFFF000, 0x7F800000, -0x800000)


def test_tf32_rounding_keeps_nan_and_inf(kdev):
    """The rounding adds half an ulp to the bits as an integer: a GPU's NaN (0x7FFFFFFF, not the CPU's
    0xFFC00000) would carry into -0.0 and a low-payload NaN into inf. On the host (round_to_tf32) and in the
    kernels (round_tf32, through split_tf32's planes) NaN stays NaN (lo NaN too) and inf stays inf."""
    t = torch.tensor(NAN_INF_BITS, dtype=torch.int32).view(torch.float32)
    inf = float("inf")
    hi_host = kernels.round_to_tf32(t)
    planes = split_tf32(t.to(kdev)).cpu()
    for hi in (hi_host, planes[:t.numel()]):
        assert hi[:4].isnan().all() and hi[4:].tolist() == [inf, -inf], hi
    assert planes[t.numel():][:4].isnan().all()


@pytest.mark.exact_dots  # the truncating emulation would turn 0x7FFFFFFF into 0x7FFFE000, which the bug spared
def test_plain_tf32_spectral_conv_propagates_a_gpu_nan(allow_tf32, kdev, gen):
    """With plain-TF32 dots the spectra and Gauss sums are rounded to TF32 where they are formed: a NaN in x
    with a GPU's bits (0x7FFFFFFF, what a GPU's arithmetic returns for any NaN) reaches y (it read as -0.0
    there, so a diverging run's spectral branch gave zeros), as in fp32 mode and in the reference."""
    x, w = _inputs((2,), 32, 16, 16, 8, torch.float32, kdev, gen)
    x = x.detach().clone()
    x.view(torch.int32)[0, 5, 3] = 0x7FFFFFFF
    for tf32 in (True, False):
        allow_tf32(tf32)
        y = spectral_conv1d(x, w.detach(), backend="triton", transform="dft")
        assert y[0].isnan().all() and not y[1].isnan().any(), tf32


def test_plain_tf32_rounds_what_its_dots_read_where_it_is_formed(allow_tf32, monkeypatch, kdev, gen, poisoned):
    """With TF32 allowed (plain-TF32 dots) the bases and the spectrum the analysis stores are TF32 values
    (rounded to nearest, not truncated by the MMA), y -- the op's output -- is not; the fp32-accurate path
    (TF32 off) stores nothing rounded (its bases are TF32 planes whose lo plane carries the low bits:
    test_fp32_mode_bases_are_tf32_planes). The result stays within TF32 error of the fp64 reference. Our
    kernels (on a GPU "auto" takes cuBLAS for fp32 work, which rounds nothing of its own)."""
    monkeypatch.setattr(kernels, "MIX_METHOD", "gauss")
    monkeypatch.setattr(kernels, "DFT_GEMM", "triton")
    x, w = _inputs((3,), 64, 32, 32, 32, torch.float32, kdev, gen)  # kdev: compiled kernels take no CPU tensor
    for tf32 in (True, False):
        allow_tf32(tf32)
        assert kernels.plain_tf32(torch.float32) is tf32 and not kernels.plain_tf32(torch.float64)
        A, G = kernels.spectral_bases(64, 32, torch.float32, x.device)
        planes = kernels.weight_planes(w.detach(), torch.float32)
        y, spec, _ = kernels.spectral_conv1d_fwd(x.detach(), planes, A, G, False, 1, kernels.row_split(x, 1))
        rounded = [not _tf32_low_bits(t).any() for t in (A, G, spec)]
        assert rounded == [tf32] * 3, (tf32, rounded)
        assert _tf32_low_bits(y).count_nonzero() > y.numel() // 2  # the output keeps fp32 precision
        assert rel_err(y, _ref64(x, w)) <= (2e-3 if tf32 else RTOL[torch.float32])


def test_fp32_mode_bases_are_tf32_planes(allow_tf32, tf32_mma, monkeypatch, kdev, gen, poisoned):
    """In fp32 mode (tf32x3 dots) spectral_bases gives each basis as its TF32 planes [2, rows, cols], what the
    transform kernel's split products read: hi a TF32 value, hi + lo the fp64 basis to ~2^-35 (lo rounded to
    fp32), and the op fp32-accurate through them (within 2e-5 of fp64: a kernel reading hi alone is ~1e-4
    off, which the suite's TF32-wide tolerance would pass; with the MMAs truncating their operands, a GPU's or
    the interpreter's under tf32_mma, so is an activation tile left unrounded before its split: checked by
    mutation, which exact interpreter dots would pass); under plain TF32 one rounded basis [rows, cols];
    with REDUCED_PRECISION_DOTS off the planes again whatever the TF32 setting; with the cuBLAS transform
    (DFT_GEMM "torch") one basis; fp64 one basis. Our kernels (on a GPU "auto" takes cuBLAS for fp32 work)."""
    monkeypatch.setattr(kernels, "MIX_METHOD", "gauss")
    monkeypatch.setattr(kernels, "DFT_GEMM", "triton")
    cpu = torch.device("cpu")
    allow_tf32(False)
    x, w = _inputs((3, 2), 48, 20, 32, 32, torch.float32, kdev, gen)
    _check(lambda a, b: SpectralConv1dFn.apply(a, b, "dft"), x, w, gen, 2e-5)
    for planes, exact in zip(kernels.spectral_bases(48, 20, torch.float32, cpu),
                             kernels.spectral_bases(48, 20, torch.float64, cpu)):
        assert planes.shape == (2, *exact.shape) and planes.dtype == torch.float32
        assert not _tf32_low_bits(planes[0]).any() and _tf32_low_bits(planes[1]).any()
        assert (planes[0].double() + planes[1].double() - exact).abs().max() <= 2.0 ** -34 * exact.abs().max()
    allow_tf32(True)
    assert [b.dim() for b in kernels.spectral_bases(48, 20, torch.float32, cpu)] == [2, 2]
    monkeypatch.setattr(kernels, "REDUCED_PRECISION_DOTS", False)
    assert [b.dim() for b in kernels.spectral_bases(48, 20, torch.float32, cpu)] == [3, 3]
    monkeypatch.setattr(kernels, "DFT_GEMM", "torch")
    assert [b.dim() for b in kernels.spectral_bases(48, 20, torch.float32, cpu)] == [2, 2]


@pytest.mark.parametrize("mix", ["gauss", "four"])
def test_split_weight_planes(mix, allow_tf32, monkeypatch, kdev, gen):
    """In fp32 mode weight_planes gives the mixing W's split planes in one launch: [2 P, K, H_in, H_out], the hi
    planes of (c, d - c, c + d) (Gauss) or (c, d) (four), rounded to TF32, then their lo planes, hi + lo equal to
    each value as fp32 forms it (exactly), from a weight read through its strides; weight_planes_for_forward also
    the same values stored transposed, in the same launch; the plain planes [2, K, H_in, H_out] in the other cases
    (TF32 allowed, fp64, bf16 operands, the "dot" path, cuBLAS's mixing), once."""
    monkeypatch.setattr(kernels, "MIX_METHOD", mix)
    allow_tf32(False)
    w = torch.randn(5, 6, 3, 2, generator=gen).to(kdev).transpose(1, 2)  # [K, H_in = 3, H_out = 6, 2], strided
    launches = []
    record_launches(kernels, launches, monkeypatch)
    planes = kernels.weight_planes(w, torch.float32)
    assert [name for name, _, _ in launches] == ["_mix_weight_planes_kernel"]
    c, d = w[..., 0], w[..., 1]
    values = [c, d - c, c + d] if mix == "gauss" else [c, d]
    n = len(values)
    assert planes.shape == (2 * n, 5, 3, 6) and planes.dtype == torch.float32 and planes.is_contiguous()
    assert not _tf32_low_bits(planes[:n]).any()
    assert torch.equal(planes[:n] + planes[n:], torch.stack(values))
    launches.clear()  # the forward's copy, stored [2 P, K, H_out, H_in] by the same launch: input channels contiguous
    again, forward = kernels.weight_planes_for_forward(w, torch.float32)
    assert [name for name, _, _ in launches] == ["_mix_weight_planes_kernel"]
    assert torch.equal(again, planes) and torch.equal(forward, planes) and forward.stride()[2:] == (1, 3)
    assert kernels.split_mixing(torch.float32)
    monkeypatch.setattr(kernels, "REDUCED_PRECISION_DOTS", False)  # bf16 inputs then take the fp32 path
    assert kernels.split_mixing(torch.bfloat16)
    monkeypatch.setattr(kernels, "REDUCED_PRECISION_DOTS", True)
    for setting, x_dtype in ((lambda: allow_tf32(True), torch.float32), (lambda: None, torch.float64),
                             (lambda: None, torch.bfloat16),  # bf16 operands
                             (lambda: monkeypatch.setattr(kernels, "X3_METHOD", "dot"), torch.float32),
                             (lambda: monkeypatch.setattr(kernels, "MIX_METHOD", "torch"), torch.float32)):
        allow_tf32(False)
        setting()
        assert not kernels.split_mixing(x_dtype)
        assert kernels.weight_planes(w, x_dtype).shape == (2, 5, 3, 6)
        plain, forward = kernels.weight_planes_for_forward(w, x_dtype)
        assert forward is plain  # no copy of the plain planes
    spec, out = torch.zeros(2, 5, 1, 3, 2, device=kdev), torch.zeros(2, 5, 1, 6, 2, device=kdev)
    with pytest.raises(ValueError, match=r"the cuBLAS mixing takes W's real and imaginary planes \[2, K, H_in, "
                                         r"H_out\], got \(%d, 5, 3, 6\): split planes" % (2 * n)):
        kernels._mix(spec, planes, out, 5, 10, False, False)  # MIX_METHOD "torch" (the last setting above)
    other = "four" if mix == "gauss" else "gauss"  # planes made for one product, read by the other's kernel
    monkeypatch.setattr(kernels, "MIX_METHOD", other)
    with pytest.raises(ValueError, match=r"planes \(%d, 5, 3, 6\) are split planes of another mixing than "
                                         r"MIX_METHOD '%s'" % (2 * n, other)):
        kernels._mix(spec, planes, out, 5, 10, False, False)
    monkeypatch.setattr(kernels, "X3_METHOD", "split")
    assert kernels.split_mixing(torch.float32)
    monkeypatch.setattr(kernels, "SPLIT_PLANES_LIMIT", 2 * (3 if other == "gauss" else 2) * 90)  # int32 offsets
    assert kernels.weight_planes(w, torch.float32).shape == (2, 5, 3, 6)  # 90 elements a plane: the plain ones


@pytest.mark.parametrize("x3,mix", [("split", "gauss"),
                                    pytest.param("split", "four", marks=pytest.mark.variant("spectral_four")),
                                    pytest.param("dot", "gauss", marks=pytest.mark.variant("spectral_x3dot"))])
def test_fp32_mode_mixing_is_fp32_accurate(mix, x3, allow_tf32, tf32_mma, monkeypatch, kdev, gen, poisoned):
    """fp32 mode's mixing on W's split planes (and on Triton's tf32x3 dot, X3_METHOD "dot"), forward and adjoint
    (the backward's conj(W)^T: the split planes swapped and negated), Gauss and four products: y, dx and dweight
    within 2e-5 of fp64 while the MMAs truncate their operands to TF32 (tf32_mma; a GPU does so itself) -- a lo
    plane left out, or a sign of the adjoint's planes wrong, is 1e-4 to O(1) off. H_in 24 != H_out 40 (masked
    tiles), the GPU tiles (128 rows, 16 input channels a step, 64 output channels) on 2 row tiles (135 rows)."""
    monkeypatch.setattr(kernels, "MIX_METHOD", mix)
    monkeypatch.setattr(kernels, "X3_METHOD", x3)
    monkeypatch.setitem(kernels.LAUNCH_POLICY, kdev.type, kernels.LAUNCH_POLICY["cuda"])
    allow_tf32(False)
    launches = []
    record_launches(kernels, launches, monkeypatch, with_args=True)
    x, w = _inputs((5, 27), 32, 12, 24, 40, torch.float32, kdev, gen)
    _check(lambda a, b: SpectralConv1dFn.apply(a, b, "dft"), x, w, gen, 2e-5, oracle=dft_matrix_spectral_conv)
    mixes = [(kw["SPLIT"], args[16:18]) for kernel, _, kw, args in launches if kernel == "_spectral_conv1d_mix_kernel"]
    # forward and backward; W's (in, out) strides: the split planes read input channels contiguous both ways (the
    # forward from weight_planes_for_forward's transposed copy), the "dot" path's plain planes only backward
    split = x3 == "split"
    assert mixes == [(split, (1, 24) if split else (40, 1)), (split, (1, 40))]


@pytest.mark.exact_dots
@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1",
                    reason="checks the rounding against exact dots (the interpreter's); a GPU's MMAs truncate their "
                           "operands: bench/probe_spectral_accuracy.py")
@pytest.mark.parametrize("mix", ["gauss", "four"])
def test_plain_tf32_mixing_rounds_its_sums_and_its_output(mix, allow_tf32, gen, monkeypatch):
    """The mixing kernel under plain TF32 equals the fp64 product of its operands as it rounds them: the
    Gauss sums (a + b, d - c, c + d) rounded to TF32 before the dots, the result rounded to TF32 at the
    store (the interpreter's fp32 dots are exact, so only those roundings remain); with the Gauss sums
    unrounded the result differs by more than the tolerance (the check can fail)."""
    monkeypatch.setattr(kernels, "MIX_METHOD", mix)
    allow_tf32(True)
    R, K, C = 24, 5, 32
    spec = torch.randn(R, K, 1, C, 2, generator=gen)
    planes = torch.randn(2, K, C, C, generator=gen) / C ** 0.5
    out = torch.full((R, K, 1, C, 2), float("nan"))
    kernels._mix(spec, planes, out, K, 2 * K + 2, False, False, round_out=True)
    a, b = (spec[:, :, 0, :, p].permute(1, 0, 2).double() for p in (0, 1))  # [K, R, C]
    c, d = planes[0].double(), planes[1].double()
    r = lambda t: kernels.round_to_tf32(t.float()).double()  # noqa: E731
    if mix == "gauss":
        k1, k2, k3 = r(a + b) @ c, a @ r(d - c), b @ r(c + d)
        re, im = k1 - k3, k1 + k2
        unrounded_sums = r((a + b) @ c - b @ (c + d))  # the real part, sums not rounded
    else:
        re, im = a @ c - b @ d, a @ d + b @ c
        unrounded_sums = None
    im[0] = 0  # mode 0's imaginary part (a real signal's); S = 2K + 2 has no Nyquist mode among K
    expected = torch.stack([r(re), r(im)], -1).permute(1, 0, 2, 3)[:, :, None]
    assert rel_err(out, expected) <= 5e-5  # fp32 accumulation can move a value across a rounding boundary
    assert not _tf32_low_bits(out).any()
    if unrounded_sums is not None:
        assert rel_err(out[:, :, 0, :, 0].permute(1, 0, 2), unrounded_sums) > 1e-4


@pytest.mark.parametrize("S,K,transform", [(128, 64, "dft"), (96, 48, "fft")], ids=["S128-dft", "S96-fft"])
def test_bf16_inputs_run_the_fp32_path(S, K, transform, kdev, gen, poisoned, monkeypatch):
    """bf16 x and weight with REDUCED_PRECISION_DOTS off (fp32 intermediates, tf32x3): bf16 out, within
    bf16 input rounding of the fp64 reference of the same bf16 values, gradients in bf16 (the default
    bf16 path, bf16 intermediates and MMAs: test_bf16_inputs_gpu). On CPU the interpreter only converts
    bf16 to fp32 here (its bf16 arithmetic is broken, none runs on this path)."""
    monkeypatch.setattr(kernels, "REDUCED_PRECISION_DOTS", False)
    x, w = _inputs((2,), S, K, 16, 16, torch.float32, "cpu", gen)
    xb, wb = x.detach().bfloat16().to(kdev).requires_grad_(), w.detach().bfloat16().to(kdev).requires_grad_()
    y = spectral_conv1d(xb, wb, backend="triton", transform=transform)
    assert y.dtype == torch.bfloat16 and torch.isfinite(y).all()
    assert rel_err(y, _ref64(xb, wb)) <= 1e-2
    dx, dw = torch.autograd.grad(y.float().square().sum(), (xb, wb))
    assert dx.dtype == dw.dtype == torch.bfloat16 and torch.isfinite(dx).all() and torch.isfinite(dw).all()


@pytest.mark.gpu
@pytest.mark.parametrize("S", [32, 48, 128, 1024], ids=lambda s: f"S{s}")
def test_tf32_allowed_stays_fp32_accurate_without_reduced_dots_gpu(S, gen, allow_tf32, monkeypatch):
    """With REDUCED_PRECISION_DOTS off (AMG_FAST_SPECTRAL_REDUCED_DOTS=0) and TF32 allowed, the spectral
    conv still meets the fp32 tolerance against an fp64 reference (tf32x3 dots)."""
    monkeypatch.setattr(kernels, "REDUCED_PRECISION_DOTS", False)
    allow_tf32(True)
    x, w = _inputs((4, 25), S, S // 2 + 1, 128, 128, torch.float32, "cuda", gen)
    y = SpectralConv1dFn.apply(x, w, "auto")
    assert rel_err(y, _ref64(x, w)) <= RTOL[torch.float32]


@pytest.mark.gpu
@pytest.mark.parametrize("S", [32, 128, 1024], ids=lambda s: f"S{s}")
@pytest.mark.parametrize("mix", ["gauss", "four", "torch"])
def test_reduced_precision_paths_gpu(S, mix, gen, allow_tf32, monkeypatch):
    """The default reduced paths (REDUCED_PRECISION_DOTS) against an fp64 reference, 100 rows: plain TF32
    (the CPU emulation of the algorithm, bench/spectral_precision.py, is ~9e-4 off on the dft path, 5.5e-4
    on the fft path, with what the kernels form rounded to TF32; the H200 measured 2.0e-3 at S = 128, 800
    rows, when every operand was truncated) and bf16 operands (~4-5e-3 for bf16 inputs, whose own
    rounding is ~2e-3), and the fp32 path when TF32 is not allowed (tf32x3)."""
    assert kernels.REDUCED_PRECISION_DOTS  # the default under test
    monkeypatch.setattr(kernels, "MIX_METHOD", mix)
    allow_tf32(True)
    x, w = _inputs((4, 25), S, S // 2 + 1, 128, 128, torch.float32, "cuda", gen)
    _check(lambda a, b: SpectralConv1dFn.apply(a, b, "auto"), x, w, gen, 1e-2)
    xb, wb = x.detach().bfloat16().requires_grad_(), w.detach().bfloat16().requires_grad_()
    y = spectral_conv1d(xb, wb, backend="triton")
    assert y.dtype == torch.bfloat16 and rel_err(y, _ref64(xb, wb)) <= 2e-2
    allow_tf32(False)
    assert rel_err(SpectralConv1dFn.apply(x, w, "auto"), _ref64(x, w)) <= RTOL[torch.float32]


@pytest.mark.gpu
@pytest.mark.parametrize("S", [32, 128, 1024], ids=lambda s: f"S{s}")
def test_bf16_inputs_gpu(S, gen):
    """bf16 activations and weights: within bf16 rounding of the fp64 reference of the fp32 inputs."""
    x, w = _inputs((4, 25), S, S // 2, 128, 128, torch.float32, "cuda", gen)
    y = spectral_conv1d(x.detach().bfloat16(), w.detach().bfloat16(), backend="triton")
    assert y.dtype == torch.bfloat16
    assert rel_err(y, _ref64(x, w)) <= 2e-2


@pytest.mark.parametrize("name", ["dft-cublas", "fft-torchmix", pytest.param("dft-torchmix", marks=pytest.mark.gpu)])
def test_torch_mixing_bf16_with_gradients(name, variant, kdev, gen, poisoned):
    """The cuBLAS mixing with bf16 activations and weights (bf16 spectra and bmm, written in place, on the dft
    path; dweight's bmm with an fp32 result: out_dtype on a GPU): y, dx and dweight within bf16 error of the
    fp64 reference of the same values (3.8e-3 dft, 1.7e-3 fft: CPU bf16 matmuls, 5 seeds). dft-cublas and
    fft-torchmix run their GEMMs by torch, so the CPU runs them in bf16 too; their small kernels (weight_blocks
    computes in W's dtype and casts at the stores, which the interpreter truncates where a GPU rounds;
    dweight_parts in fp32) stay within the bound; dft-torchmix holds the Triton transform kernel, whose bf16
    arithmetic the interpreter gets wrong."""
    transform = variant(name)
    x, w = _inputs((4, 25), 128, 64, 128, 128, torch.float32, kdev, gen)
    xb, wb = x.detach().bfloat16().requires_grad_(), w.detach().bfloat16().requires_grad_()
    _check(lambda a, b: SpectralConv1dFn.apply(a, b, transform), xb, wb, gen, 2e-2)


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
@pytest.mark.parametrize("transform,dim", [("dft", -2), ("fft", -2), ("dft", 1)])
def test_torch_compile_traces_the_triton_op_gpu(transform, dim, gen):
    """fullgraph compile through the custom ops, both transforms and a 2D field along X: the same outputs
    and gradients as eager, elementwise (a reduced scalar would only compare two summation orders)."""
    x, w = _inputs((4, 25), 64, 32, 128, 128, torch.float32, "cuda", gen)
    if dim == 1:
        x = x.detach().view(4, 25, 8, 8, 128)[:, 0].contiguous().requires_grad_()  # [B, X, Y, H] = [4, 8, 8, 128]
        w = w.detach()[:5].contiguous().requires_grad_()

    def f(a, b):
        return spectral_conv1d(a, b, dim=dim, backend="triton", transform=transform).sin()

    got, eager = torch.compile(f, fullgraph=True)(x, w), f(x, w)
    assert rel_err(got, eager) <= 1e-5
    dy = torch.randn(got.shape, generator=gen).to("cuda")
    for g_c, g_e in zip(torch.autograd.grad(got, (x, w), dy), torch.autograd.grad(eager, (x, w), dy)):
        assert rel_err(g_c, g_e) <= 1e-5


@pytest.mark.parametrize("name", ["dft-cublas", "fft-torchmix", pytest.param("dft-torchmix", marks=pytest.mark.gpu)])
def test_torch_mixing_traces_under_torch_compile(name, variant, kdev, gen, monkeypatch):
    """MIX_METHOD "torch" under a fullgraph compile (aot_eager: the traced graph run by eager torch, so the CPU
    checks the tracing; dft-torchmix holds a Triton kernel, which the interpreter cannot trace, and so do
    weight_blocks and dweight_parts: on CPU their torch references stand in): the same outputs and gradients as
    eager, elementwise. Traced, the mixing writes through a copy, not bmm's out=. Where torch's fake rfft reports
    other strides than its kernel writes (torch 2.11 on CPU), the fft path's traced graph fails on the real
    spectrum instead, loudly (a view the fake layout allowed)."""
    transform = variant(name)
    if kdev.type == "cpu":
        monkeypatch.setattr(kernels, "weight_blocks", kernels.weight_blocks_ref)
        monkeypatch.setattr(kernels, "dweight_parts", kernels.dweight_parts_ref)
    x, w = _inputs((4,), 32, 16, 16, 16, torch.float32, kdev, gen)

    def f(a, b):
        return SpectralConv1dFn.apply(a, b, transform).sin()

    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    if transform == "fft" and not fake_rfft_strides_match(kdev.type):
        with pytest.raises(RuntimeError, match="view size is not compatible"):
            compiled(x, w)
        return
    got, eager = compiled(x, w), f(x, w)
    assert rel_err(got, eager) <= 1e-6
    dy = torch.randn(got.shape, generator=gen).to(kdev)
    for g_c, g_e in zip(torch.autograd.grad(got, (x, w), dy), torch.autograd.grad(eager, (x, w), dy)):
        assert rel_err(g_c, g_e) <= 1e-6


def test_weight_planes_copy_only_for_the_kernels(monkeypatch):
    """WEIGHT_PLANES copies W into contiguous planes for the mixing kernel; with the cuBLAS mixing (whose
    weight_blocks copies W anyway) the planes stay a view of weight."""
    w = torch.randn(5, 4, 6, 2)
    monkeypatch.setattr(kernels, "WEIGHT_PLANES", True)
    monkeypatch.setattr(kernels, "MIX_METHOD", "gauss")
    monkeypatch.setattr(kernels, "X3_METHOD", "dot")  # fp32 mode's split planes: test_split_weight_planes
    assert kernels.weight_planes(w, torch.float32).is_contiguous()
    monkeypatch.setattr(kernels, "MIX_METHOD", "torch")
    planes = kernels.weight_planes(w, torch.float32)
    assert planes._base is w and torch.equal(planes, w.permute(3, 0, 1, 2))
