"""grid_linear (the grid encoder Linear([u, x/L])): the reference against the model's concatenation, and
the Triton kernels (kernels/grid_linear.py) against the reference in fp64: outputs and every gradient, on
the GPU's tiling (several programs, each over several row tiles, partial tiles)."""
import pytest
import torch
from helpers import assert_each_close, gpu_tiling, ids, rel_err, value_and_grads

from amg_fast.ops.encoder import (GRID_LINEAR_MAX_H, GRID_LINEAR_MAX_K, GridLinearFn, grid_linear,
                                      grid_linear_ref)

DTYPES = {"fp32": torch.float32, "fp64": torch.float64}


def make_inputs(lead, S, C, H, gen, dtype=torch.float64, device="cpu"):
    """(u [*lead, S, C], weight [H, C + 1], bias [H]) leaves requiring grad, and the grid s / S [S]."""
    def rand(*shape, scale=1.0):
        return (scale * torch.randn(*shape, generator=gen, dtype=torch.float64)).to(device, dtype).requires_grad_()

    grid = (torch.arange(S, dtype=torch.float64) / S).to(device, dtype)
    return (rand(*lead, S, C), rand(H, C + 1, scale=(C + 1) ** -0.5), rand(H, scale=0.1)), grid


def test_reference_is_the_models_concatenation(gen):
    """grid_linear_ref = nn.Linear over models.base.append_grid(u) (the encoder before this op)."""
    from amg_fast.models.base import append_grid, grid_coordinates

    (u, weight, bias), _ = make_inputs((2, 3), 10, 2, 8, gen)
    want = torch.nn.functional.linear(append_grid(u), weight, bias)
    assert rel_err(grid_linear_ref(u, grid_coordinates(10, u)[:, 0], weight, bias), want) == 0


def test_kernel_limits_match_the_op():
    from amg_fast.kernels import grid_linear as kernels

    assert (GRID_LINEAR_MAX_K, GRID_LINEAR_MAX_H) == (kernels.GRID_LINEAR_MAX_K, kernels.GRID_LINEAR_MAX_H)


# (lead, S, C, H): the KS encoder (C = 1) at the tests' width, several channels and widths that are not powers
# of two, the kernels' widest C + 1 = 32 and H = 512.
CASES = [((2, 4), 20, 1, 16), ((3,), 7, 3, 24), ((1,), 5, 31, 128), ((2,), 9, 2, 512)]


@pytest.mark.parametrize("tiling", ["device-policy", "small-tiles"])
@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
@pytest.mark.parametrize("lead,S,C,H", CASES, ids=[ids(lead=len(c[0]), S=c[1], C=c[2], H=c[3]) for c in CASES])
def test_triton_matches_reference(lead, S, C, H, dtype, tiling, gen, kdev, poisoned, monkeypatch):
    """The output and every gradient against the reference in fp64, every output element written
    (poisoned). Tilings: the device's launch policy (one program on CPU), and small tiles on the GPU's grid
    (a small row budget): several programs each loop over several row tiles (the last partial), and the
    backward sums several programs' partial sums."""
    from amg_fast.kernels import grid_linear as kernels

    if tiling == "small-tiles":
        gpu_tiling(monkeypatch, kernels, kdev, elements=256, programs=3)
    inputs, grid = make_inputs(lead, S, C, H, gen, dtype, kdev)
    dy = torch.randn(*lead, S, H, generator=gen, dtype=torch.float64).to(kdev)
    y, grads = value_and_grads(lambda u, w, b: grid_linear(u, grid, w, b, backend="triton"), inputs, dy)
    y_ref, grads_ref = value_and_grads(lambda u, w, b: grid_linear_ref(u, grid.double(), w, b),
                                       [t.detach().double().requires_grad_() for t in inputs], dy)
    assert_each_close(("y", "du", "dweight", "dbias"), (y, *grads), (y_ref, *grads_ref), dtype,
                      1e-12 if dtype == torch.float64 else 1e-5)


@pytest.mark.parametrize("layout", ["frames", "permuted", "channel-slice"])
def test_strided_inputs(layout, gen, kdev, monkeypatch):
    """frames: u = traj[:, :-1] (the trainer's input, frames sliced from a longer trajectory) is read in place
    as [B, T S, C] row groups (a view, no copy); permuted (leading axes no view can merge) and channel-slice
    (rows not C apart) are copied once. Each gives the reference's output and gradients, on the GPU's tiling
    (several programs)."""
    from amg_fast.kernels import grid_linear as kernels
    from amg_fast.ops.encoder import row_groups

    gpu_tiling(monkeypatch, kernels, kdev, elements=64, programs=3)
    (traj, weight, bias), grid = make_inputs((3, 5), 6, 2, 8, gen, device=kdev)
    wide = torch.randn(3, 5, 6, 3, generator=gen, dtype=torch.float64).to(kdev).requires_grad_()
    u = {"frames": traj[:, :-1], "permuted": traj.transpose(0, 1), "channel-slice": wide[..., :2]}[layout]
    groups = row_groups(u)
    assert (groups.data_ptr() == u.data_ptr()) == (layout == "frames")
    assert groups.shape == ((3, 4 * 6, 2) if layout == "frames" else (1, u.numel() // 2, 2))
    dy = torch.randn(*u.shape[:-1], 8, generator=gen, dtype=torch.float64).to(kdev)
    got = value_and_grads(lambda t, w, b: grid_linear(t, grid, w, b, backend="triton"), (u, weight, bias), dy)
    want = value_and_grads(lambda t, w, b: grid_linear_ref(t, grid, w, b), (u, weight, bias), dy)
    for a, b in zip((got[0], *got[1]), (want[0], *want[1])):
        assert rel_err(a, b) <= 1e-12


@pytest.mark.parametrize("layout", ["frames", "permuted", "channel-slice", "single-row"])
def test_row_groups_decides_from_strides_under_fake_tensors(layout):
    """torch.compile traces row_groups on fake tensors, whose failed view raises ValueError, not eager's
    RuntimeError (torch 2.11 on an H200, 2026-11-29: a compiled AMGFNO step failed on traj[:, :-1]): the split
    comes from the strides, fake or real, and equals a view's."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    from amg_fast.ops.encoder import row_groups

    traj = torch.zeros(3, 5, 6, 1)
    u = {"frames": traj[:, :-1], "permuted": traj.transpose(0, 1), "channel-slice": torch.zeros(3, 5, 6, 3)[..., :2],
         "single-row": traj[:1, :1, :1]}[layout]
    want = {"frames": (3, 24, 1), "permuted": (1, 90, 1), "channel-slice": (1, 90, 2), "single-row": (1, 1, 1)}[layout]
    with FakeTensorMode() as mode:
        fake = row_groups(mode.from_tensor(u))
    real = row_groups(u)
    assert tuple(fake.shape) == tuple(real.shape) == want
    assert [s for n, s in zip(fake.shape, fake.stride()) if n > 1] == [s for n, s in zip(real.shape, real.stride())
                                                                        if n > 1]
    assert (real.data_ptr() == u.data_ptr()) == (layout in ("frames", "single-row"))


def test_gradcheck(gen, kdev, monkeypatch):
    from amg_fast.kernels import grid_linear as kernels

    # 2-row tiles (H = 4): 7 rows are 4 tiles over 3 programs (the first loops over two)
    gpu_tiling(monkeypatch, kernels, kdev, elements=8, programs=3)
    (u, weight, bias), grid = make_inputs((1,), 7, 2, 4, gen, device=kdev)
    assert torch.autograd.gradcheck(lambda u, w, b: GridLinearFn.apply(u, grid, w, b), (u, weight, bias))


def test_gradients_for_weights_only(gen, kdev):
    """u without grad (the data, as in training): the weight and bias gradients alone, no du written."""
    (u, weight, bias), grid = make_inputs((3,), 6, 1, 8, gen, device=kdev)
    u = u.detach()
    grads = torch.autograd.grad(grid_linear(u, grid, weight, bias, backend="triton").square().sum(), (weight, bias))
    grads_ref = torch.autograd.grad(grid_linear_ref(u, grid, weight, bias).square().sum(), (weight, bias))
    assert all(rel_err(a, b) <= 1e-12 for a, b in zip(grads, grads_ref))


@pytest.mark.gpu
def test_bf16_autocast_follows_nn_linear(gen):
    """Under bf16 autocast (a GPU: the interpreter's bf16 arithmetic is wrong) the output is bf16 as
    nn.Linear's and the parameters' gradients stay fp32, within bf16's rounding of the reference."""
    (u, weight, bias), grid = make_inputs((4, 5), 32, 1, 128, gen, torch.float32, "cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        y = grid_linear(u, grid, weight, bias, backend="triton")
    y_ref = grid_linear_ref(u, grid, weight, bias)
    assert y.dtype == torch.bfloat16 and rel_err(y.float(), y_ref) <= 2e-2
    grads = torch.autograd.grad(y.float().sum(), (u, weight, bias))
    grads_ref = torch.autograd.grad(y_ref.sum(), (u, weight, bias))
    assert [g.dtype for g in grads] == [torch.float32] * 3
    assert all(rel_err(a, b) <= 2e-2 for a, b in zip(grads, grads_ref))


def test_what_the_kernels_cannot_take_is_refused_by_triton_and_run_by_auto(gen, kdev, monkeypatch):
    """Too many channels, or a grid that asks for a gradient: "triton" says which; "auto", where it would
    pick Triton (as on CUDA: forced here), runs the reference instead, the kernels' Function never called."""
    from amg_fast.ops import _backend, encoder

    wide, grid = make_inputs((2,), 5, GRID_LINEAR_MAX_K, 4, gen, device=kdev)
    narrow, _ = make_inputs((2,), 5, 1, 4, gen, device=kdev)
    cases = [(wide, grid, r"C \+ 1 <= 32 input columns .* got C = 32 \(u.shape\[-1\]\)"),
             (narrow, grid.clone().requires_grad_(), r"give the grid no gradient.*grid.detach\(\)")]
    for (u, weight, bias), g, match in cases:
        with pytest.raises(ValueError, match=match):
            grid_linear(u, g, weight, bias, backend="triton")
    monkeypatch.setattr(_backend, "resolve_backend", lambda op, backend, device: "triton")
    monkeypatch.setattr(encoder.GridLinearFn, "apply", lambda *a: pytest.fail("the kernels ran"))
    for (u, weight, bias), g, _ in cases:
        assert rel_err(grid_linear(u, g, weight, bias, backend="auto"), grid_linear_ref(u, g, weight, bias)) == 0


@pytest.mark.parametrize("bad,match", [
    (lambda u, g, w, b: (u, g[:4], w, b), r"grid must have shape .*S = 5"),
    (lambda u, g, w, b: (u, g, w[:, :2], b), r"weight must have shape .*C = 2"),
    (lambda u, g, w, b: (u, g, w, b[:3]), r"bias must have shape .*H = 4"),
    (lambda u, g, w, b: (u.to(torch.int64), g, w, b), r"u must be a real floating-point tensor .* got dtype torch.int64"),
], ids=["grid", "weight", "bias", "u-int"])
def test_bad_arguments_are_named(bad, match, gen):
    (u, weight, bias), grid = make_inputs((2,), 5, 2, 4, gen)
    with pytest.raises((ValueError, TypeError), match=match):
        grid_linear(*bad(u.detach(), grid, weight.detach(), bias.detach()))


@pytest.mark.gpu
def test_encoder_and_decoder_trace_under_torch_compile_gpu(gen):
    """grid_linear feeding composed_linear (a model's encode, then decode; their kernels behind the custom
    ops amg_fast::grid_linear_* and amg_fast::composed_linear_*) under a fullgraph compile: the same output
    and gradients as eager."""
    from amg_fast.ops.decoder import composed_linear

    (u, weight, bias), grid = make_inputs((4, 25), 32, 1, 128, gen, torch.float32, "cuda")
    head = [(torch.randn(*shape, generator=gen) * 0.1).cuda().requires_grad_() for shape in ((128, 128), (128,),
                                                                                               (1, 128), (1,))]

    def f(u, weight, bias, *head):
        return composed_linear(grid_linear(u, grid, weight, bias, backend="triton").relu(), *head, backend="triton")

    inputs = (u, weight, bias, *head)
    got, eager = torch.compile(f, fullgraph=True)(*inputs), f(*inputs)
    assert rel_err(got, eager) <= 1e-5
    dy = torch.randn(got.shape, generator=gen).cuda()
    for g_c, g_e in zip(torch.autograd.grad(got, inputs, dy), torch.autograd.grad(eager, inputs, dy)):
        assert rel_err(g_c, g_e) <= 1e-5


def test_mixed_dtypes_read_and_written_as_the_op_says(gen, kdev):
    """fp32 u and weight against an fp64 bias: y and du in u's dtype, each parameter's gradient in its own;
    the accumulation dtype is fp64 (any fp64 input) in the backward as in the forward, so dbias is the fp64
    sum of dy's rows."""
    (u, weight, bias), grid = make_inputs((4,), 50, 2, 16, gen, device=kdev)
    u32, w32 = (t.detach().float().requires_grad_() for t in (u, weight))
    y = grid_linear(u32, grid.float(), w32, bias, backend="triton")
    dy = (1e4 + torch.randn(y.shape, generator=gen, dtype=torch.float64)).float().to(kdev)
    du, dweight, dbias = torch.autograd.grad(y, (u32, w32, bias), dy)
    assert (y.dtype, du.dtype, dweight.dtype, dbias.dtype) == (torch.float32,) * 3 + (torch.float64,)
    assert rel_err(dbias, dy.double().sum(dim=(0, 1))) <= 1e-12
