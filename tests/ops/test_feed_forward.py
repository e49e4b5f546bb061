"""feed_forward: the reference against an explicit formula, and the Triton backend's two paths (cuBLAS
GEMMs with the bias + ReLU epilogue; the row GEMMs of kernels/ffn_gemm.py) against the reference: outputs
and every gradient."""
import pytest
import torch
from helpers import RTOL, ids, record_launches, rel_err, value_and_grads

from amg_fast.ops.ffn import FeedForwardFn, GemmFeedForwardFn, feed_forward, feed_forward_ref

DTYPES = {"fp32": torch.float32, "fp64": torch.float64}


def make_inputs(lead, h_in, hidden, h_out, gen, dtype=torch.float64, device="cpu"):
    """x [*lead, h_in] and nn.Linear-scaled weights, leaves requiring grad (on device: the fused path
    runs on the kernel device, `kdev`)."""
    def rand(*shape, scale=1.0):
        return (scale * torch.randn(*shape, generator=gen, dtype=torch.float64)).to(device, dtype).requires_grad_()

    return (rand(*lead, h_in), rand(hidden, h_in, scale=h_in ** -0.5), rand(hidden, scale=0.1),
            rand(h_out, hidden, scale=hidden ** -0.5), rand(h_out, scale=0.1))


def test_reference_matches_explicit_formula(gen):
    x, w1, b1, w2, b2 = make_inputs((3, 5), 7, 12, 4, gen)
    hidden = torch.einsum("bsi,fi->bsf", x, w1) + b1
    want = torch.einsum("bsf,of->bso", torch.where(hidden > 0, hidden, torch.zeros_like(hidden)), w2) + b2
    assert rel_err(feed_forward_ref(x, w1, b1, w2, b2), want) <= 1e-14


CASES = [((2, 25, 32), 16, 64, 16), ((7,), 5, 20, 3), ((3, 1, 48), 128, 512, 128)]
METHODS = ["epilogue", "gemm"]
DH_VARIANT = pytest.mark.variant("ffn_dh_triton")  # AMG_FAST_FFN_DH=triton: off by default


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
@pytest.mark.parametrize("lead,h_in,hidden,h_out", CASES, ids=[ids(lead=len(c[0]), H=c[1], F=c[2]) for c in CASES])
def test_fused_matches_reference(lead, h_in, hidden, h_out, dtype, method, gen, kdev, poisoned):
    """The Triton-backend paths (cuBLASLt epilogue; row GEMMs, in
    fp32 with 3xTF32 dots: a dropped product term shows as ~3e-4) against the reference in fp64: the
    output and every gradient, every output element written (poisoned)."""
    inputs = make_inputs(lead, h_in, hidden, h_out, gen, dtype, kdev)
    dy = torch.randn(*lead, h_out, generator=gen, dtype=torch.float64).to(kdev)
    y, grads = value_and_grads(lambda *a: feed_forward(*a, backend="triton", method=method), inputs, dy)
    y_ref, grads_ref = value_and_grads(feed_forward_ref, [t.detach().double().requires_grad_() for t in inputs], dy)
    tol = RTOL[dtype] if dtype == torch.float64 else 1e-5
    for name, a, b in zip(("y", "dx", "dw1", "db1", "dw2", "db2"), (y, *grads), (y_ref, *grads_ref)):
        assert a.dtype == dtype and a.shape == b.shape, name
        assert rel_err(a, b) <= tol, f"{name}: rel err {rel_err(a, b):.2e}"


@pytest.mark.parametrize("function,wgrad", [(FeedForwardFn, None), pytest.param(FeedForwardFn, "dh", marks=DH_VARIANT),
                                            (GemmFeedForwardFn, "triton"), (GemmFeedForwardFn, "cublas")],
                         ids=["epilogue", "epilogue-dh", "gemm", "gemm-cublas"])
def test_fused_gradcheck(function, wgrad, gen, kdev, monkeypatch):
    """gradcheck in fp64; the epilogue path's dh also by the Triton row GEMM (AMG_FAST_FFN_DH=triton); the row
    GEMMs' weight gradients by the split-K kernel and by torch GEMMs (db1 then from the dh kernel's epilogue:
    AMG_FAST_WGRAD)."""
    if wgrad == "dh":
        monkeypatch.setenv("AMG_FAST_FFN_DH", "triton")
    elif wgrad is not None:
        monkeypatch.setenv("AMG_FAST_WGRAD", wgrad)
    inputs = [t.reshape(-1, t.shape[-1]) if t.dim() > 2 else t for t in make_inputs((4,), 3, 6, 2, gen, device=kdev)]
    assert torch.autograd.gradcheck(function.apply, inputs)
    if function is not FeedForwardFn:  # with the residual in the epilogue
        residual = torch.randn(4, 2, generator=gen, dtype=torch.float64).to(kdev).requires_grad_()
        assert torch.autograd.gradcheck(function.apply, (*inputs, residual))


@DH_VARIANT
@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
@pytest.mark.parametrize("lead,h_in,hidden,h_out", CASES, ids=[ids(lead=len(c[0]), H=c[1], F=c[2]) for c in CASES])
def test_epilogue_with_triton_dh_matches_reference(lead, h_in, hidden, h_out, dtype, gen, kdev, monkeypatch, poisoned):
    """The epilogue path with AMG_FAST_FFN_DH=triton: its backward forms dh = (dy W2) masked, db1 and db2 in one
    row GEMM (no relu_grad pass over a cuBLAS dy W2), and the output and every gradient match the reference in
    fp64 (fp32: 3xTF32 dots, 1e-5)."""
    from amg_fast.kernels import ffn_gemm, relu_grad

    monkeypatch.setenv("AMG_FAST_FFN_DH", "triton")
    launches = []
    record_launches(ffn_gemm, launches, monkeypatch)
    record_launches(relu_grad, launches, monkeypatch)
    inputs = make_inputs(lead, h_in, hidden, h_out, gen, dtype, kdev)
    dy = torch.randn(*lead, h_out, generator=gen, dtype=torch.float64).to(kdev)
    y, grads = value_and_grads(lambda *a: feed_forward(*a, backend="triton", method="epilogue"), inputs, dy)
    assert [name for name, *_ in launches] == ["_row_gemm_kernel"]
    y_ref, grads_ref = value_and_grads(feed_forward_ref, [t.detach().double().requires_grad_() for t in inputs], dy)
    tol = RTOL[dtype] if dtype == torch.float64 else 1e-5
    for name, a, b in zip(("y", "dx", "dw1", "db1", "dw2", "db2"), (y, *grads), (y_ref, *grads_ref)):
        assert a.dtype == dtype and a.shape == b.shape, name
        assert rel_err(a, b) <= tol, f"{name}: rel err {rel_err(a, b):.2e}"


@pytest.mark.parametrize("method", METHODS)
def test_fused_gradients_for_weights_only(method, gen, kdev):
    """x without grad (the first layer's input): only the weight gradients come back, equal to the
    reference's (the paths then launch no dx GEMM)."""
    x, *weights = make_inputs((5, 3), 4, 8, 4, gen, device=kdev)
    x = x.detach()
    grads = torch.autograd.grad(feed_forward(x, *weights, backend="triton", method=method).square().sum(), weights)
    grads_ref = torch.autograd.grad(feed_forward_ref(x, *weights).square().sum(), weights)
    assert all(rel_err(a, b) <= 1e-12 for a, b in zip(grads, grads_ref))


@pytest.mark.parametrize("residual", [False, True], ids=["plain", "residual"])
def test_fused_under_bf16_autocast_follows_nn_linear(residual, gen, kdev, monkeypatch):
    """Under autocast the output is bf16 (as nn.Linear gives; fp32 with an fp32 residual) and the gradients keep
    the fp32 leaves' dtypes (the epilogue path: the row GEMMs' bf16 values are checked only on a GPU, below). The
    four fp32 weights are cast to bf16 in one launch, and their gradients back in one, where autocast ran a cast
    kernel each way a parameter. Values: against the reference under autocast on the weights as that launch rounds
    them (torch's .to(bf16) bit for bit on a GPU: test_ffn_gemm.py; Triton's interpreter truncates instead), within
    bf16 rounding (the reference rounds its weight and bias gradients to bf16; these keep fp32 bias sums)."""
    from amg_fast.kernels import _tf32
    from amg_fast.kernels._common import flat_views

    inputs = make_inputs((4, 16), 16, 64, 16, gen, torch.float32, kdev)
    res = torch.randn(4, 16, 16, generator=gen).to(kdev).requires_grad_() if residual else None
    weights = inputs[1:]
    flat = _tf32.cast_weights(*(w.detach() for w in weights), dtype=torch.bfloat16)
    rounded = [w.requires_grad_() for w in flat_views(flat, weights)]
    launches = []
    record_launches(_tf32, launches, monkeypatch)
    with torch.autocast(kdev.type, dtype=torch.bfloat16):
        y = feed_forward(*inputs, residual=res, backend="triton", method="epilogue")
        y_ref = feed_forward_ref(inputs[0], *rounded, residual=res)
    assert y.dtype == y_ref.dtype == (torch.float32 if residual else torch.bfloat16)
    assert [name for name, *_ in launches] == ["_weight_planes_kernel"]
    assert rel_err(y.float(), y_ref.float()) <= 1e-2
    dy = torch.randn(y.shape, generator=gen).to(kdev)
    leaves = [*inputs] + [res] * residual
    grads = torch.autograd.grad(y.float(), leaves, dy)
    assert [name for name, *_ in launches] == ["_weight_planes_kernel"] * 2
    grads_ref = torch.autograd.grad(y_ref.float(), [inputs[0], *rounded] + [res] * residual, dy)
    assert [g.dtype for g in grads] == [torch.float32] * len(leaves)
    assert all(rel_err(g, r.float()) <= 1e-2 for g, r in zip(grads, grads_ref))


def test_module_runs_the_op_with_sequential_parameter_names(gen, kdev):
    from amg_fast.layers import FeedForward

    layer = FeedForward(8, backend="triton").to(kdev)
    assert list(layer.state_dict()) == ["0.weight", "0.bias", "2.weight", "2.bias"]  # checkpoints stay loadable
    x = torch.randn(2, 3, 8, generator=gen).to(kdev)
    assert rel_err(layer(x), torch.nn.Sequential.forward(layer, x)) <= 1e-6


@pytest.mark.parametrize("bad,match", [
    (lambda a: (a[0], a[1][:, :3], *a[2:]), r"w1 must have shape .*H_in = 4"),
    (lambda a: (*a[:2], a[2][:5], *a[3:]), r"b1 must have shape"),
    (lambda a: (*a[:3], a[3][:, :7], a[4]), r"w2 must have shape .*F = 8"),
    (lambda a: (a[0].to(torch.int64), *a[1:]), r"x"),
], ids=["w1", "b1", "w2", "x-int"])
def test_bad_arguments_are_named(bad, match, gen):
    inputs = [t.detach() for t in make_inputs((2,), 4, 8, 4, gen)]
    with pytest.raises((ValueError, TypeError), match=match):
        feed_forward(*bad(inputs))


def test_method_is_checked(gen, kdev):
    """method is checked by name; "fused" (the Triton MLP with the hidden on chip, removed 2026-11-29) included."""
    inputs = [t.detach() for t in make_inputs((2,), 4, 8, 4, gen, device=kdev)]
    for bad in ("bogus", "fused"):
        with pytest.raises(ValueError, match=r"method must be one of \('auto', 'epilogue', 'gemm'\), got '%s'" % bad):
            feed_forward(*inputs, backend="triton", method=bad)


@pytest.mark.gpu
@pytest.mark.parametrize("method,dh", [("gemm", "cublas"), pytest.param("epilogue", "triton", marks=DH_VARIANT)],
                         ids=["gemm", "epilogue-dh"])
@pytest.mark.parametrize("residual", [False, True], ids=["plain", "residual"])
def test_gemm_kernels_under_bf16_autocast_gpu(residual, method, dh, gen, kdev, monkeypatch):
    """The Triton row GEMMs (the gemm path's four; the epilogue path's dh with AMG_FAST_FFN_DH=triton) under bf16
    autocast on a GPU (the interpreter's bf16 arithmetic is not to
    be trusted): bf16 output (fp32 with the FFNO block's fp32 residual, whose fp32 dy the backward then takes)
    within bf16 rounding of the reference, gradients in the fp32 leaves' dtype and within bf16 rounding of the
    fp32 reference on the bf16-rounded inputs (autocast rounds x and the weights: against the unrounded ones a
    few ReLU masks flip, ~3.8e-2 off in dx, dW1, db1 by an emulation of the kernels' arithmetic, 2.4e-3 so)."""
    monkeypatch.setenv("AMG_FAST_FFN_DH", dh)
    inputs = make_inputs((4, 25, 32), 128, 512, 128, gen, torch.float32, kdev)
    res = torch.randn(4, 25, 32, 128, generator=gen).to(kdev).requires_grad_() if residual else None
    with torch.autocast(kdev.type, dtype=torch.bfloat16):
        y = feed_forward(*inputs, residual=res, backend="triton", method=method)
    assert y.dtype == (torch.float32 if residual else torch.bfloat16)
    assert rel_err(y.float(), feed_forward_ref(*inputs) + (res if residual else 0)) <= 2e-2
    leaves = [*inputs] + [res] * residual
    dy = torch.randn(y.shape, generator=gen).to(kdev)
    grads = torch.autograd.grad(y.float(), leaves, dy)
    rounded = [t.detach().bfloat16().float().requires_grad_() for t in inputs]
    grads_ref = torch.autograd.grad(feed_forward_ref(*rounded), rounded, dy)
    assert [g.dtype for g in grads] == [torch.float32] * len(leaves) and all(torch.isfinite(g).all() for g in grads)
    assert all(rel_err(g, r) <= 3e-2 for g, r in zip(grads, grads_ref))  # the residual's own gradient is dy


def test_gemm_method_under_bf16_autocast_casts_the_weights_in_one_launch_each_way(gen, kdev, monkeypatch):
    """The row GEMMs under bf16 autocast take the fp32 weights cast to bf16 in one launch (of kernels._tf32), and
    hand back fp32 gradients cast in one more. Dtypes and launches only: the interpreter's bf16 arithmetic is
    wrong (values: the GPU test above)."""
    from amg_fast.kernels import _tf32, ffn_gemm

    inputs = make_inputs((40,), 16, 64, 16, gen, torch.float32, kdev)
    launches, gemm_launches = [], []
    record_launches(_tf32, launches, monkeypatch)
    record_launches(ffn_gemm, gemm_launches, monkeypatch, with_args=True)
    with torch.autocast(kdev.type, dtype=torch.bfloat16):
        y = feed_forward(*inputs, backend="triton", method="gemm")
    assert y.dtype == torch.bfloat16 and [name for name, *_ in launches] == ["_weight_planes_kernel"]
    assert all(t.dtype == torch.bfloat16 for *_, args in gemm_launches for t in args[:2])  # a, b of each GEMM
    grads = torch.autograd.grad(y.float().sum(), inputs)
    assert [g.dtype for g in grads] == [torch.float32] * 5 and all(torch.isfinite(g).all() for g in grads)
    assert [name for name, *_ in launches] == ["_weight_planes_kernel"] * 2


def test_bf16_x_hands_the_backward_dots_a_bf16_dy(gen, kdev, monkeypatch):
    """Under bf16 autocast an fp32 dy (through an fp32 residual) meets bf16 x: the Triton backward casts it to
    bf16 before their kernels (fed fp32 operands with bf16 activations, a pipelined dot was miscompiled by
    triton 3.6 for sm_90: H200, 2026-11-27). Dtypes only: the interpreter's bf16 arithmetic is wrong (values:
    the GPU test above)."""
    from amg_fast.kernels import ffn_gemm

    inputs = make_inputs((40,), 16, 64, 16, gen, torch.float32, kdev)
    x, w1, b1, w2, b2 = (t.detach().to(torch.bfloat16) for t in inputs)
    dy = torch.randn(40, 16, generator=gen).to(kdev)
    launches = []
    y, h, _ = ffn_gemm.feed_forward_gemm_fwd(x, w1, b1, w2, b2)
    record_launches(ffn_gemm, launches, monkeypatch, with_args=True)
    ffn_gemm.feed_forward_gemm_bwd(dy, x, h, w1, w2)
    assert launches[0][3][0].dtype == torch.bfloat16  # dh = dy W2: the first row GEMM's a


def test_auto_method_follows_the_precision_table_and_the_environment(monkeypatch):
    """method="auto" (what the models call) takes FFN_AUTO_METHOD's path for the precision mode (fp32
    vs TF32 allowed, bf16, fp64) and whatever AMG_FAST_FFN_METHOD names; explicit methods win; a bad value
    is named."""
    from amg_fast.kernels import limits
    from amg_fast.kernels.limits import ffn_method, precision_mode

    monkeypatch.delenv("AMG_FAST_FFN_METHOD", raising=False)
    monkeypatch.setitem(limits.FFN_AUTO_METHOD, "fp32", "gemm")
    monkeypatch.setitem(limits.FFN_AUTO_METHOD, "tf32", "epilogue")
    matmul, allowed = torch.backends.cuda.matmul, torch.backends.cuda.matmul.allow_tf32
    try:
        matmul.allow_tf32 = False
        assert precision_mode(torch.float32) == "fp32" and ffn_method("auto", torch.float32) == "gemm"
        matmul.allow_tf32 = True
        assert precision_mode(torch.float32) == "tf32" and ffn_method("auto", torch.float32) == "epilogue"
    finally:
        matmul.allow_tf32 = allowed
    assert precision_mode(torch.bfloat16) == "bf16" and precision_mode(torch.float64) == "fp64"
    assert ffn_method("auto", torch.float64) == limits.FFN_AUTO_METHOD["fp64"] == "epilogue"
    assert ffn_method("gemm", torch.float64) == "gemm"
    monkeypatch.setenv("AMG_FAST_FFN_METHOD", "gemm")
    assert ffn_method("auto", torch.float64) == "gemm" and ffn_method("epilogue") == "epilogue"
    for bad in ("cublas", "fused"):
        monkeypatch.setenv("AMG_FAST_FFN_METHOD", bad)
        with pytest.raises(ValueError, match=r"AMG_FAST_FFN_METHOD must be one of \('epilogue', 'gemm'\), got '%s'" % bad):
            ffn_method("auto")


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
def test_residual_is_added(method, dtype, gen, kdev, poisoned):
    """residual + FeedForward(x) (the FFNO block's x + b; in the row GEMMs' epilogue): the output
    and every gradient, the residual's included, equal the reference's."""
    inputs = make_inputs((3, 7), 16, 64, 16, gen, dtype, kdev)
    residual = torch.randn(3, 7, 16, generator=gen, dtype=torch.float64).to(kdev, dtype).requires_grad_()
    dy = torch.randn(3, 7, 16, generator=gen, dtype=torch.float64).to(kdev)
    y, grads = value_and_grads(lambda *a: feed_forward(*a[:5], residual=a[5], backend="triton", method=method),
                               (*inputs, residual), dy)
    y_ref, grads_ref = value_and_grads(lambda *a: feed_forward_ref(*a[:5], a[5]),
                                       [t.detach().double().requires_grad_() for t in (*inputs, residual)], dy)
    tol = RTOL[dtype] if dtype == torch.float64 else 1e-5
    for name, a, b in zip(("y", "dx", "dw1", "db1", "dw2", "db2", "dresidual"), (y, *grads), (y_ref, *grads_ref)):
        assert a.dtype == dtype and rel_err(a, b) <= tol, f"{name}: rel err {rel_err(a, b):.2e}"
    assert rel_err(feed_forward_ref(*inputs, residual), residual + feed_forward_ref(*inputs)) == 0
    with pytest.raises(ValueError, match=r"residual must have shape \(3, 7, 16\)"):
        feed_forward(*inputs, residual=residual[:, :3])


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("x_dtype,res_dtype", [(torch.float64, torch.float32), (torch.float32, torch.float64)],
                         ids=["x64-res32", "x32-res64"])
def test_residual_of_another_dtype_promotes_as_the_reference(method, x_dtype, res_dtype, gen, kdev, poisoned):
    """x and a residual of different dtypes: y in their promoted dtype (fp64), as the reference's
    residual + y; the residual's digits kept (a large fp64 residual added to fp32 activations in fp64:
    y - residual is the feed-forward's output to fp32 accuracy); every gradient in its input's dtype."""
    inputs = make_inputs((3, 7), 16, 64, 16, gen, x_dtype, kdev)
    residual = (1e3 * torch.randn(3, 7, 16, generator=gen, dtype=torch.float64)).to(kdev, res_dtype).requires_grad_()
    dy = torch.randn(3, 7, 16, generator=gen, dtype=torch.float64).to(kdev)
    y, grads = value_and_grads(lambda *a: feed_forward(*a[:5], residual=a[5], backend="triton", method=method),
                               (*inputs, residual), dy)
    y_ref, grads_ref = value_and_grads(lambda *a: feed_forward_ref(*a[:5], a[5]), (*inputs, residual), dy)
    assert y.dtype == y_ref.dtype == torch.float64
    assert rel_err(y - residual, y_ref - residual) <= 1e-5
    for name, a, b, t in zip(("dx", "dw1", "db1", "dw2", "db2", "dresidual"), grads, grads_ref, (*inputs, residual)):
        assert a.dtype == t.dtype and rel_err(a, b) <= 1e-5, f"{name}: rel err {rel_err(a, b):.2e}"


def test_a_model_step_runs_the_kernels_when_asked(gen, kdev, monkeypatch):
    """AMGFNO on the Triton backend with AMG_FAST_FFN_METHOD=gemm: the same loss and gradients as with the
    epilogue path (the step a GPU session times with each)."""
    from amg_fast.kernels import ffn_gemm as kernels
    from amg_fast.models import get_model

    name = "feed_forward_gemm_fwd"
    launches = []
    monkeypatch.setattr(kernels, name, lambda *a, f=getattr(kernels, name): launches.append(1) or f(*a))
    u = torch.randn(2, 5, 16, 1, generator=gen).to(kdev)
    results = []
    for method in ("epilogue", "gemm"):
        monkeypatch.setenv("AMG_FAST_FFN_METHOD", method)
        torch.manual_seed(0)
        model = get_model("amgfno", width=16, modes=8, omega=0.1, backend="triton").to(kdev)
        loss = (model(u[:, :-1]) - u[:, 1:]).square().mean()
        results.append((loss, torch.autograd.grad(loss, list(model.parameters()))))
    (loss_a, grads_a), (loss_b, grads_b) = results
    assert len(launches) == 4  # the kernels' forward ran in each of the 4 blocks, in the second model only
    assert rel_err(loss_b, loss_a) <= 1e-5
    assert all(rel_err(b, a) <= 1e-4 for a, b in zip(grads_a, grads_b))


@pytest.mark.parametrize("method", METHODS)
def test_nan_in_an_input_row_stays_in_its_output_row(method, gen, kdev):
    """relu(NaN) is NaN, as in the reference: a diverging run must not be hidden (on a GPU, Triton's
    tl.maximum drops NaN unless told otherwise; the interpreter keeps it either way)."""
    x, *weights = [t.detach() for t in make_inputs((6,), 16, 64, 16, gen, torch.float32, kdev)]
    x[2, 3] = float("nan")
    y = feed_forward(x, *weights, backend="triton", method=method)
    assert torch.isnan(y[2]).all() and torch.isfinite(y[[0, 1, 3, 4, 5]]).all()


@pytest.mark.gpu
def test_gemm_method_traces_under_torch_compile_gpu(gen, kdev):
    """method="gemm" (its kernels behind the custom ops amg_fast::feed_forward_gemm_*) under a fullgraph
    compile, with the residual: the same output and gradients as eager, elementwise."""
    inputs = make_inputs((4, 25, 32), 128, 512, 128, gen, torch.float32, kdev)
    residual = torch.randn(4, 25, 32, 128, generator=gen).to(kdev).requires_grad_()

    def f(*a):
        return feed_forward(*a[:5], residual=a[5], backend="triton", method="gemm").sin()

    got, eager = torch.compile(f, fullgraph=True)(*inputs, residual), f(*inputs, residual)
    assert rel_err(got, eager) <= 1e-5
    dy = torch.randn(got.shape, generator=gen).to(kdev)
    wrt = (*inputs, residual)
    for g_c, g_e in zip(torch.autograd.grad(got, wrt, dy), torch.autograd.grad(eager, wrt, dy)):
        assert rel_err(g_c, g_e) <= 1e-5
