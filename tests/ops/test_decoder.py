"""composed_linear (the FFNO decoder's two Linears as one): the reference against the two Linears it
replaces, and the Triton kernels (kernels/composed_linear.py) against the reference in fp64: outputs and
every gradient, on the GPU's tiling (several programs, each over several row tiles, partial tiles)."""
import pytest
import torch
from helpers import assert_each_close, gpu_tiling, ids, rel_err, value_and_grads

from amg_fast.ops.decoder import (COMPOSED_MAX_C, COMPOSED_MAX_H, ComposedLinearFn, composed_linear,
                                         composed_linear_ref)

DTYPES = {"fp32": torch.float32, "fp64": torch.float64}


def make_inputs(lead, H, F, C, gen, dtype=torch.float64, device="cpu"):
    """x [*lead, H] and nn.Linear-scaled weights w1 [F, H], b1 [F], w2 [C, F], b2 [C], leaves requiring grad."""
    def rand(*shape, scale=1.0):
        return (scale * torch.randn(*shape, generator=gen, dtype=torch.float64)).to(device, dtype).requires_grad_()

    return (rand(*lead, H), rand(F, H, scale=H ** -0.5), rand(F, scale=0.1), rand(C, F, scale=F ** -0.5),
            rand(C, scale=0.1))


def test_reference_is_the_two_linears(gen):
    """The composition is exact: F.linear(F.linear(x, w1, b1), w2, b2) up to fp64 rounding."""
    x, w1, b1, w2, b2 = make_inputs((3, 5), 7, 12, 2, gen)
    want = torch.nn.functional.linear(torch.nn.functional.linear(x, w1, b1), w2, b2)
    assert rel_err(composed_linear_ref(x, w1, b1, w2, b2), want) <= 1e-14


def test_kernel_limits_match_the_op():
    from amg_fast.kernels import composed_linear as kernels

    assert (COMPOSED_MAX_C, COMPOSED_MAX_H) == (kernels.COMPOSED_MAX_C, kernels.COMPOSED_MAX_H)


# (lead, H, F, C): the decoder's H -> 128 -> 1 at the tests' widths, several outputs, widths that are not
# powers of two, the kernels' widest C and H, a single row.
CASES = [((2, 4, 20), 16, 128, 1), ((3, 33), 24, 40, 3), ((1,), 128, 128, 1), ((64,), 7, 9, 8), ((5, 2), 512, 50, 2)]


@pytest.mark.parametrize("tiling", ["device-policy", "small-tiles"])
@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
@pytest.mark.parametrize("lead,H,F,C", CASES, ids=[ids(lead=len(c[0]), H=c[1], F=c[2], C=c[3]) for c in CASES])
def test_triton_matches_reference(lead, H, F, C, dtype, tiling, gen, kdev, poisoned, monkeypatch):
    """The output and every gradient against the reference in fp64, every output element written
    (poisoned). Tilings: the device's launch policy (one program on CPU), and small tiles on the GPU's grid
    (a small row budget): several programs each loop over several row tiles (the last partial), and the
    backward sums several programs' partial sums."""
    from amg_fast.kernels import composed_linear as kernels

    if tiling == "small-tiles":
        gpu_tiling(monkeypatch, kernels, kdev, elements=256, programs=3)
    inputs = make_inputs(lead, H, F, C, gen, dtype, kdev)
    dy = torch.randn(*lead, C, generator=gen, dtype=torch.float64).to(kdev)
    y, grads = value_and_grads(lambda *a: composed_linear(*a, backend="triton"), inputs, dy)
    y_ref, grads_ref = value_and_grads(composed_linear_ref, [t.detach().double().requires_grad_() for t in inputs], dy)
    assert_each_close(("y", "dx", "dw1", "db1", "dw2", "db2"), (y, *grads), (y_ref, *grads_ref), dtype,
                      1e-12 if dtype == torch.float64 else 1e-5)


def test_gradcheck(gen, kdev, monkeypatch):
    from amg_fast.kernels import composed_linear as kernels

    # 2-row tiles: 5 rows are 3 tiles over 2 programs (the first loops over two)
    gpu_tiling(monkeypatch, kernels, kdev, elements=8, programs=2)
    x, *weights = make_inputs((5,), 3, 4, 2, gen, device=kdev)
    assert torch.autograd.gradcheck(ComposedLinearFn.apply, (x, *weights))


def test_gradients_for_weights_only(gen, kdev):
    """x without grad: the weights' gradients alone, equal to the reference's (no dx written)."""
    x, *weights = make_inputs((5, 3), 4, 8, 1, gen, device=kdev)
    x = x.detach()
    grads = torch.autograd.grad(composed_linear(x, *weights, backend="triton").square().sum(), weights)
    grads_ref = torch.autograd.grad(composed_linear_ref(x, *weights).square().sum(), weights)
    assert all(rel_err(a, b) <= 1e-12 for a, b in zip(grads, grads_ref))


def test_mixed_dtypes_read_and_written_as_the_op_says(gen, kdev):
    """fp32 x against fp64 weights: y and dx in x's dtype, each weight's gradient in its own, computed in
    fp64 (the accumulation dtype of any fp64 input)."""
    x, w1, b1, w2, b2 = make_inputs((9,), 6, 10, 2, gen, device=kdev)
    x32 = x.detach().float().requires_grad_()
    y = composed_linear(x32, w1, b1, w2, b2, backend="triton")
    grads = torch.autograd.grad(y.sum(), (x32, w1, b1, w2, b2))
    y_ref = composed_linear_ref(x32.detach().double().requires_grad_(), w1, b1, w2, b2)
    assert y.dtype == torch.float32 and rel_err(y, y_ref) <= 1e-6
    assert [g.dtype for g in grads] == [torch.float32] + [torch.float64] * 4


@pytest.mark.gpu
def test_bf16_autocast_follows_nn_linear(gen):
    """Under bf16 autocast (a GPU: the interpreter's bf16 arithmetic is wrong) the output is bf16 as
    nn.Linear's, the gradients keep the fp32 weights' dtype, both within bf16's rounding of the reference."""
    inputs = make_inputs((4, 16), 128, 128, 1, gen, torch.float32, "cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        y = composed_linear(*inputs, backend="triton")
    y_ref = composed_linear_ref(*inputs)
    assert y.dtype == torch.bfloat16 and rel_err(y.float(), y_ref) <= 2e-2
    grads = torch.autograd.grad(y.float().sum(), inputs)
    grads_ref = torch.autograd.grad(y_ref.sum(), inputs)
    assert [g.dtype for g in grads] == [torch.float32] * 5
    assert all(rel_err(a, b) <= 2e-2 for a, b in zip(grads, grads_ref))


def test_too_wide_is_refused_by_triton_and_run_by_auto(gen, kdev, monkeypatch):
    """C above the kernels' limit: "triton" names the limit and the argument; "auto", where it would pick
    Triton (as on CUDA: forced here), runs the reference, the kernels' Function never called."""
    from amg_fast.ops import _backend, decoder

    inputs = [t.detach() for t in make_inputs((3,), 4, 8, COMPOSED_MAX_C + 1, gen, device=kdev)]
    with pytest.raises(ValueError, match=r"C <= 8 outputs .* got C=9 \(w2.shape\[0\]\)"):
        composed_linear(*inputs, backend="triton")
    monkeypatch.setattr(_backend, "resolve_backend", lambda op, backend, device: "triton")
    monkeypatch.setattr(decoder.ComposedLinearFn, "apply", lambda *a: pytest.fail("the kernels ran"))
    assert rel_err(composed_linear(*inputs, backend="auto"), composed_linear_ref(*inputs)) <= 1e-14


@pytest.mark.parametrize("bad,match", [
    (lambda a: (a[0], a[1][:, :3], *a[2:]), r"w1 must have shape .*H = 4"),
    (lambda a: (*a[:2], a[2][:5], *a[3:]), r"b1 must have shape"),
    (lambda a: (*a[:3], a[3][:, :7], a[4]), r"w2 must have shape .*F = 8"),
    (lambda a: (*a[:4], a[4][:0]), r"b2 must have shape .*C = 2"),
    (lambda a: (a[0].to(torch.int64), *a[1:]), r"x must be a real floating-point tensor .* got dtype torch.int64"),
], ids=["w1", "b1", "w2", "b2", "x-int"])
def test_bad_arguments_are_named(bad, match, gen):
    inputs = [t.detach() for t in make_inputs((2,), 4, 8, 2, gen)]
    with pytest.raises((ValueError, TypeError), match=match):
        composed_linear(*bad(inputs))
