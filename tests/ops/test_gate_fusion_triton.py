"""gate_fusion backend="triton" (fused Triton kernels) against the PyTorch reference.

On a machine without a GPU the kernels run in Triton's interpreter on CPU tensors (fp32/fp64
only: bf16 arithmetic is wrong there); the tests marked gpu need CUDA. Every kernel output
buffer starts as NaN (fixture `poisoned`), so an element the kernels fail to write shows.
"""
import importlib

import pytest
import torch
from helpers import RTOL, VIEW_LAYOUTS, ids, rel_err, strided_view

from amg_fast.layers.memory_fusion import AdaptiveMemoryGate
from amg_fast.ops import gate_fusion, gate_fusion_ref

# The op module, for monkeypatching.
gate_fusion_mod = importlib.import_module("amg_fast.ops.gate")
GRAD_NAMES = ("h", "z", "w_z", "w_h", "b", "chi")


def make_args(shape, chi_shape, dtype, gen, device, *, w_dtype=None):
    """Random (h, z, w_z, w_h, b, chi) with logits of order one; chi in (0, 1), leaves requiring grad."""
    H = shape[-1]
    w_dtype = w_dtype or dtype

    def rand(*s, scale=1.0, dt=dtype):
        return (torch.randn(*s, generator=gen, dtype=torch.float64) * scale).to(device=device, dtype=dt)

    args = (rand(*shape), rand(*shape), rand(H, H, scale=H ** -0.5, dt=w_dtype), rand(H, H, scale=H ** -0.5, dt=w_dtype),
            rand(H, scale=0.5, dt=w_dtype), torch.rand(chi_shape, generator=gen, dtype=torch.float64).to(device, w_dtype))
    return [a.requires_grad_() for a in args]


def forward_and_grads(args, backend, gen):
    """(out, g) and the gradients of a loss that uses both outputs, w.r.t. all six inputs.

    The weights of g in the loss are positive, so that dchi (a sum over a whole batch) does not
    cancel down to a small number whose relative error TF32 would inflate.
    """
    out, g = gate_fusion(*args, backend=backend)
    w_out = torch.randn(out.shape, generator=gen, dtype=torch.float64).to(out)
    w_g = torch.rand(g.shape, generator=gen, dtype=torch.float64).to(g)
    loss = (out * w_out).sum() + (g * w_g).sum()
    return out, g, torch.autograd.grad(loss, args)


def reference_in_float64(args, gen_seed):
    """Reference outputs and grads computed in float64 from the same input values."""
    args64 = [a.detach().double().requires_grad_() for a in args]
    return forward_and_grads(args64, "reference", torch.Generator().manual_seed(gen_seed))


@pytest.fixture(params=["fused", pytest.param("cublas", marks=pytest.mark.variant("gate_cublas"))])
def method(request, monkeypatch):
    """The gate's form (kernels.limits.gate_method, by its switch): the fused kernels, or cuBLAS GEMMs around one
    Triton pass each way (fp32 / fp64 activations)."""
    monkeypatch.setenv("AMG_FAST_GATE_METHOD", request.param)
    return request.param


# (B, T, S, H) leading shapes with chi 0-dim or one per batch; H not a power of two included.
CASES = [
    ((1, 25, 32, 16), ()),
    ((3, 26, 48, 48), (3,)),
    ((3, 1, 32, 128), (3,)),
    ((3, 1, 32, 48), ()),
    ((1, 26, 8, 128), (1,)),
    ((2, 1, 16, 256), ()),
]
CASE_IDS = [ids(B=s[0], T=s[1], S=s[2], H=s[3]) + ("-chiB" if c else "-chi0") for s, c in CASES]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["fp32", "fp64"])
@pytest.mark.parametrize("shape,chi_shape", CASES, ids=CASE_IDS)
def test_forward_and_all_grads_match_reference(shape, chi_shape, dtype, kdev, poisoned, gen, method):
    args = make_args(shape, chi_shape, dtype, gen, kdev)
    seed = int(torch.randint(0, 2**31, (1,), generator=gen))
    out, g, grads = forward_and_grads(args, "triton", torch.Generator().manual_seed(seed))
    out_ref, g_ref, grads_ref = reference_in_float64(args, seed)
    assert out.dtype == g.dtype == dtype and out.shape == g.shape == shape
    tol = RTOL[dtype]  # fp32: allows TF32 tl.dot on a GPU
    assert rel_err(out, out_ref) <= tol and rel_err(g, g_ref) <= tol
    for name, grad, ref in zip(GRAD_NAMES, grads, grads_ref):
        assert grad.dtype == dtype and grad.shape == ref.shape, name
        assert rel_err(grad, ref) <= tol, f"d{name}: rel err {rel_err(grad, ref):.2e}"


@pytest.mark.parametrize("chi_shape", [(), (2,)], ids=["chi0", "chiB"])
def test_gradcheck_float64(chi_shape, kdev, gen, method):
    args = make_args((2, 1, 16), chi_shape, torch.float64, gen, kdev)
    fn = lambda *a: gate_fusion(*a, backend="triton")  # noqa: E731
    # Full Jacobians w.r.t. h, z and chi (the weights' have 2 * 256 columns: too slow in the
    # interpreter); random directional checks (fast_mode) through all six inputs.
    h, z, w_z, w_h, b, chi = args
    assert torch.autograd.gradcheck(lambda h_, z_, chi_: fn(h_, z_, w_z, w_h, b, chi_), (h, z, chi))
    assert torch.autograd.gradcheck(fn, args, fast_mode=True)


@pytest.mark.variant("gate_cublas")
def test_cublas_method_keeps_the_logits_and_its_backward_follows_the_forward(kdev, poisoned, gen, monkeypatch):
    """AMG_FAST_GATE_METHOD=cublas: the forward keeps logits = z w_z^T + h w_h^T + b [M, H] for its backward, which
    runs the cuBLAS form even after the switch changed (and a fused forward's the fused form: the other form's
    launcher raises here); gradients match the fp64 reference either way. bf16 activations take the fused kernels
    (their GEMMs would round the logits)."""
    from amg_fast.kernels import gate_fusion as gate_kernels
    from amg_fast.kernels.limits import gate_method

    def refuse(*args, **kwargs):
        raise AssertionError("the backward ran the other method's launcher")

    args = make_args((2, 5, 6, 24), (2,), torch.float64, gen, kdev)
    seed = int(torch.randint(0, 2**31, (1,), generator=gen))
    _, _, grads_ref = reference_in_float64(args, seed)
    h, z, w_z, w_h, b = (a.detach() for a in args[:5])
    for forward_method, backward_method in (("cublas", "fused"), ("fused", "cublas")):
        monkeypatch.setenv("AMG_FAST_GATE_METHOD", forward_method)
        out, g = gate_fusion(*args, backend="triton")
        logits = out.grad_fn.saved_tensors[-1]
        if forward_method == "cublas":
            want = (z @ w_z.T + h @ w_h.T + b).reshape(-1, 24)
            assert logits.shape == want.shape and rel_err(logits, want) <= 1e-14
        else:
            assert logits is None
        monkeypatch.setenv("AMG_FAST_GATE_METHOD", backward_method)
        loss_gen = torch.Generator().manual_seed(seed)  # the loss weights forward_and_grads draws
        w_out = torch.randn(out.shape, generator=loss_gen, dtype=torch.float64).to(out)
        w_g = torch.rand(g.shape, generator=loss_gen, dtype=torch.float64).to(g)
        with monkeypatch.context() as patch:
            patch.setattr(gate_kernels, "gate_grads" if forward_method == "cublas" else "gate_cublas_grads", refuse)
            grads = torch.autograd.grad((out * w_out).sum() + (g * w_g).sum(), args)
        for name, got, ref in zip(GRAD_NAMES, grads, grads_ref):
            assert rel_err(got, ref) <= 1e-12, f"{forward_method} forward, d{name}: rel err {rel_err(got, ref):.1e}"
    assert [gate_method("auto", dt) for dt in (torch.float32, torch.float64, torch.bfloat16, torch.float16)] == [
        "cublas", "cublas", "fused", "fused"]


def test_launcher_bwd_without_g_grad_matches_autograd(kdev, poisoned, gen):
    """gate_grads(dg=None) treats the grad of g as zeros; its flat gradients split into dW_z, dW_h, db, dchi."""
    from amg_fast.kernels.gate_fusion import gate_grads

    args = make_args((3, 5, 48), (3,), torch.float64, gen, kdev)
    dout = torch.randn(3, 5, 48, generator=gen, dtype=torch.float64).to(kdev)
    dz, dh, grads = gate_grads(*[a.detach() for a in args], dout, None)
    dw_z, dw_h, db, dchi = gate_fusion_mod.split_gate_grads(grads, 48)
    out, _ = gate_fusion_ref(*args)
    dh_ref, dz_ref, dw_z_ref, dw_h_ref, db_ref, dchi_ref = torch.autograd.grad((out * dout).sum(), args)
    for name, got, want in (("dz", dz, dz_ref), ("dh", dh, dh_ref), ("dw_z", dw_z, dw_z_ref), ("dw_h", dw_h, dw_h_ref),
                            ("db", db, db_ref), ("dchi", dchi, dchi_ref)):
        assert rel_err(got, want) <= 1e-12, name


@pytest.mark.parametrize("chi_shape,freq", [((), False), ((3,), False), ((3,), True)], ids=["chi0", "chiB", "freq"])
@pytest.mark.parametrize("wgrad", ["cublas", "triton-gpu-tiling"])
def test_weight_gradient_paths(chi_shape, freq, wgrad, kdev, poisoned, gen, monkeypatch, method):
    """AMG_FAST_WGRAD=cublas (torch GEMMs for dW_z, dW_h) and the split-K Triton kernel with the
    CUDA tiling (several row groups, output tiles and a ragged last group), against the reference."""
    from amg_fast.kernels import gate_fusion as gate_kernels

    if wgrad == "cublas":
        monkeypatch.setenv("AMG_FAST_WGRAD", "cublas")
    else:
        monkeypatch.setitem(gate_kernels.WGRAD_POLICY, kdev.type, dict(gate_kernels.WGRAD_POLICY["cuda"], programs=16))
    if freq:
        args = freq_args((3, 7, 10, 80), chi_shape, torch.float64, gen, kdev)
        seed = int(torch.randint(0, 2**31, (1,), generator=gen))
        got = freq_forward_and_grads(args, "triton", seed)
        want = freq_forward_and_grads([a.detach().requires_grad_(a.requires_grad) for a in args], "reference", seed)
        pairs = zip((got[0], got[1], *got[2]), (want[0], want[1], *want[2]))
    else:
        args = make_args((3, 7, 10, 80), chi_shape, torch.float64, gen, kdev)
        seed = int(torch.randint(0, 2**31, (1,), generator=gen))
        out, g, grads = forward_and_grads(args, "triton", torch.Generator().manual_seed(seed))
        out_ref, g_ref, grads_ref = reference_in_float64(args, seed)
        pairs = zip((out, g, *grads), (out_ref, g_ref, *grads_ref))
    for i, (a, b) in enumerate(pairs):
        assert rel_err(a.cpu(), b.cpu()) <= 1e-10, f"output/gradient {i}: rel err {rel_err(a.cpu(), b.cpu()):.1e}"


def test_extra_spatial_axes(kdev, poisoned, gen):
    """h, z [B, T, X, Y, H] with chi [B] (issue 22: the gate is pointwise over any grid)."""
    args = make_args((2, 3, 4, 5, 16), (2,), torch.float64, gen, kdev)
    seed = int(torch.randint(0, 2**31, (1,), generator=gen))
    out, g, grads = forward_and_grads(args, "triton", torch.Generator().manual_seed(seed))
    out_ref, g_ref, grads_ref = reference_in_float64(args, seed)
    assert out.shape == (2, 3, 4, 5, 16)
    for a, b in zip((out, g, *grads), (out_ref, g_ref, *grads_ref)):
        assert rel_err(a, b) <= 1e-10


def triton_matches_float64_reference(args, gen):
    """Outputs and all six gradients of fp64 args on Triton within 1e-10 of the reference's."""
    seed = int(torch.randint(0, 2**31, (1,), generator=gen))
    out, g, grads = forward_and_grads(args, "triton", torch.Generator().manual_seed(seed))
    out_ref, g_ref, grads_ref = reference_in_float64(args, seed)
    assert rel_err(out, out_ref) <= 1e-10 and rel_err(g, g_ref) <= 1e-10
    for name, grad, ref in zip(GRAD_NAMES, grads, grads_ref):
        assert rel_err(grad, ref) <= 1e-10, name


def test_non_contiguous_inputs(kdev, poisoned, gen):
    H = 48
    base = torch.randn(3, 2 * H, 10, generator=gen, dtype=torch.float64).to(kdev)
    h = base[:, ::2, :].transpose(1, 2).requires_grad_()           # [3, 10, H], strided
    z = base[:, 1::2, :].transpose(1, 2).requires_grad_()
    w = torch.randn(2, H, H, generator=gen, dtype=torch.float64).to(kdev) / H ** 0.5
    w_z, w_h = w[0].T.requires_grad_(), w[1].T.requires_grad_()      # transposed views
    b = torch.randn(2 * H, generator=gen, dtype=torch.float64).to(kdev)[::2].requires_grad_()
    chi = torch.rand(3, generator=gen, dtype=torch.float64).to(kdev).requires_grad_()
    args = [h, z, w_z, w_h, b, chi]
    assert not any(a.is_contiguous() for a in args[:5])
    triton_matches_float64_reference(args, gen)


@pytest.mark.parametrize("layout", list(VIEW_LAYOUTS))
def test_inputs_that_flatten_to_strided_views(layout, kdev, poisoned, gen):
    h, z, w_z, w_h, b, chi = make_args((12, 24), (), torch.float64, gen, kdev)
    args = [strided_view(h, layout), strided_view(z, layout), w_z, w_h, b, chi]
    triton_matches_float64_reference(args, gen)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["fp32", "fp64"])
def test_chi_zero_returns_h_and_finite_grads(dtype, kdev, poisoned, gen, method):
    h, z, w_z, w_h, b, _ = make_args((2, 7, 48), (), dtype, gen, kdev)
    chi = torch.zeros((), dtype=dtype, device=kdev, requires_grad=True)
    out, g = gate_fusion(h, z, w_z, w_h, b, chi, backend="triton")
    assert torch.equal(out, h) and torch.equal(g, torch.zeros_like(g))
    grads = torch.autograd.grad(out.sum() + g.sum(), (h, z, w_z, w_h, b, chi))
    assert all(torch.isfinite(gr).all() for gr in grads)
    assert torch.equal(grads[0], torch.ones_like(h)) and torch.equal(grads[1], torch.zeros_like(z))
    assert all(torch.equal(gr, torch.zeros_like(gr)) for gr in grads[2:5])  # dlogits = 0 when chi = 0
    assert float(grads[5]) != 0.0


def test_layer_with_triton_backend_matches_reference(kdev, gen):
    """AdaptiveMemoryGate learns w1, b_omega through chi: their grads match the reference backend."""
    torch.manual_seed(int(torch.randint(0, 2**31, (1,), generator=gen)))
    layers = {be: AdaptiveMemoryGate(16, omega=0.05, backend=be).double().to(kdev) for be in ("triton", "reference")}
    with torch.no_grad():
        for p in layers["triton"].parameters():
            p.add_(0.1 * torch.randn_like(p))
    layers["reference"].load_state_dict(layers["triton"].state_dict())
    h, z = (torch.randn(2, 3, 8, 16, generator=gen, dtype=torch.float64).to(kdev) for _ in range(2))
    results = {}
    for be, layer in layers.items():
        out, g = layer(h, z)
        (out.square().sum() + g.sum()).backward()
        results[be] = [out] + [p.grad for p in layer.parameters()]
    for got, ref in zip(results["triton"], results["reference"]):
        assert rel_err(got, ref) <= 1e-10


def test_width_over_limit_is_refused_by_triton_and_auto_falls_back(kdev, gen, monkeypatch):
    H = 272
    args = make_args((2, 3, H), (), torch.float64, gen, kdev)
    with pytest.raises(ValueError, match=r"H <= 256 .*got H=272"):
        gate_fusion(*args, backend="triton")
    # Where "auto" would pick Triton (tensors on CUDA), a too-wide gate runs the reference instead.
    monkeypatch.setattr(importlib.import_module("amg_fast.ops._backend"), "resolve_backend",
                        lambda op, backend, device: "triton")
    out, g = gate_fusion(*args, backend="auto")
    out_ref, g_ref = gate_fusion_ref(*args)
    assert torch.equal(out, out_ref) and torch.equal(g, g_ref)


# ----------------------------------------------------------------------------- GPU only


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=["bf16", "fp16"])
@pytest.mark.parametrize("shape,chi_shape", CASES[:3], ids=CASE_IDS[:3])
def test_half_inputs_match_float32_reference(shape, chi_shape, dtype, kdev, poisoned, gen):
    """Half-precision activations with fp32 weights (the autocast layout), fp32 accumulation."""
    args = make_args(shape, chi_shape, dtype, gen, kdev, w_dtype=torch.float32)
    seed = int(torch.randint(0, 2**31, (1,), generator=gen))
    out, g, grads = forward_and_grads(args, "triton", torch.Generator().manual_seed(seed))
    out_ref, g_ref, grads_ref = reference_in_float64(args, seed)
    assert out.dtype == g.dtype == dtype
    assert rel_err(out, out_ref) <= 1e-2 and rel_err(g, g_ref) <= 1e-2
    for name, grad, ref, arg in zip(GRAD_NAMES, grads, grads_ref, args):
        assert grad.dtype == arg.dtype, name
        assert rel_err(grad, ref) <= 2e-2, f"d{name}: rel err {rel_err(grad, ref):.2e}"


@pytest.mark.gpu
def test_autocast_runs_bf16_and_returns_fp32_grads(kdev, gen):
    args = make_args((2, 25, 32, 128), (2,), torch.float32, gen, kdev)
    with torch.autocast(kdev.type, dtype=torch.bfloat16):
        out, g = gate_fusion(*args, backend="triton")
    assert out.dtype == g.dtype == torch.bfloat16
    grads = torch.autograd.grad(out.float().sum() + g.float().sum(), args)
    assert all(gr.dtype == torch.float32 for gr in grads)
    out_ref, _ = gate_fusion_ref(*[a.detach() for a in args])
    assert rel_err(out, out_ref) <= 1e-2


@pytest.mark.gpu
def test_torch_compile_matches_eager(kdev, gen, method):
    args = make_args((2, 25, 32, 128), (2,), torch.float32, gen, kdev)

    def step(*a):
        out, g = gate_fusion(*a, backend="triton")
        return out.square().mean() + g.mean()

    eager_loss = step(*args)
    eager_grads = torch.autograd.grad(eager_loss, args)
    compiled_loss = torch.compile(step)(*args)
    compiled_grads = torch.autograd.grad(compiled_loss, args)
    assert rel_err(compiled_loss, eager_loss) <= 1e-5
    for name, got, ref in zip(GRAD_NAMES, compiled_grads, eager_grads):
        assert rel_err(got, ref) <= 1e-5, name


# ----------------------------------------------------------------------------- frequency gate folded in


def freq_args(shape, omega_shape, dtype, gen, device):
    """(h, z, w_z, w_h, b) as make_args, log_omega = log(omega + eps) for omega in [1e-4, 0.7]
    (no grad), w1 ~ 2 and b_omega ~ 3.8 (the paper's init, perturbed) requiring grad."""
    h, z, w_z, w_h, b, _ = make_args(shape, (), dtype, gen, device)
    omega = 1e-4 + 0.7 * torch.rand(omega_shape, generator=gen, dtype=torch.float64)
    log_omega = torch.log(omega + 1e-8).to(device=device, dtype=dtype)
    w1, b_omega = (torch.tensor(v, dtype=torch.float64) + 0.3 * torch.randn((), generator=gen, dtype=torch.float64)
                   for v in (2.0, 3.8))
    return [h, z, w_z, w_h, b, log_omega, w1.to(device, dtype).requires_grad_(), b_omega.to(device, dtype).requires_grad_()]


FREQ_GRAD_NAMES = ("h", "z", "w_z", "w_h", "b", "w1", "b_omega")


def freq_forward_and_grads(args, backend, seed):
    out, g = gate_fusion_mod.gate_fusion_freq(*args, backend=backend)
    gen = torch.Generator().manual_seed(seed)
    loss = (out * torch.randn(out.shape, generator=gen, dtype=torch.float64).to(out)).sum() \
        + (g * torch.rand(g.shape, generator=gen, dtype=torch.float64).to(g)).sum()
    leaves = [a for i, a in enumerate(args) if i != 5]  # log_omega takes no gradient
    return out, g, torch.autograd.grad(loss, leaves)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["fp32", "fp64"])
@pytest.mark.parametrize("shape,omega_shape", [((2, 5, 16, 48), ()), ((3, 4, 8, 16), (3,))], ids=["omega0", "omegaB"])
def test_freq_gate_folded_matches_reference(shape, omega_shape, dtype, kdev, poisoned, gen, method):
    """gate_fusion_freq on Triton (chi and its w1, b_omega gradients formed in the kernels) vs the
    reference gate_fusion(..., sigmoid(w1 log_omega + b_omega)) in fp64."""
    args = freq_args(shape, omega_shape, dtype, gen, kdev)
    seed = int(torch.randint(0, 2**31, (1,), generator=gen))
    got = freq_forward_and_grads(args, "triton", seed)
    args64 = [a.detach().cpu().double().requires_grad_(a.requires_grad) for a in args]
    out_ref, g_ref = gate_fusion_ref(*args64[:5], torch.sigmoid(args64[6] * args64[5] + args64[7]))
    want = freq_forward_and_grads(args64, "reference", seed)
    assert rel_err(want[0], out_ref) <= 1e-14 and rel_err(want[1], g_ref) <= 1e-14  # the op's reference is that formula
    tol = RTOL[dtype]
    for name, a, b in zip(("out", "g") + FREQ_GRAD_NAMES, (got[0], got[1], *got[2]), (want[0], want[1], *want[2])):
        assert a.dtype == dtype and torch.isfinite(a).all(), name
        assert rel_err(a.cpu(), b) <= tol, f"{name}: rel err {rel_err(a.cpu(), b):.2e}"


def test_freq_gate_folded_gradcheck(kdev, gen, method):
    h, z, w_z, w_h, b, log_omega, w1, b_omega = freq_args((2, 1, 16), (2,), torch.float64, gen, kdev)

    def fn(h_, w1_, b_omega_):
        return gate_fusion_mod.gate_fusion_freq(h_, z, w_z, w_h, b, log_omega, w1_, b_omega_, backend="triton")

    assert torch.autograd.gradcheck(fn, (h, w1, b_omega))


def test_freq_gate_errors_name_log_omega_and_w1(gen):
    h, z, w_z, w_h, b, log_omega, w1, b_omega = freq_args((2, 3, 16), (), torch.float32, gen, "cpu")
    with pytest.raises(ValueError, match="log_omega"):
        gate_fusion_mod.gate_fusion_freq(h, z, w_z, w_h, b, log_omega.expand(5), w1, b_omega)
    with pytest.raises(ValueError, match="w1"):
        gate_fusion_mod.gate_fusion_freq(h, z, w_z, w_h, b, log_omega, w1.reshape(1), b_omega)


@pytest.mark.parametrize("op", ["gate_fusion_freq", "memory_gate_freq"])
def test_log_omega_requiring_grad_is_refused_by_triton_and_auto_gives_its_gradient(op, kdev, gen, monkeypatch):
    """The kernels give log_omega no gradient: one that requires it is refused by name on Triton (not left
    silently without one), and "auto" runs the reference, whose gradient matches the formula's."""
    from amg_fast.ops import readout_gate

    h, z, w_z, w_h, b, log_omega, w1, b_omega = freq_args((2, 3, 16), (2,), torch.float64, gen, kdev)
    log_omega.requires_grad_()
    fn = getattr(readout_gate if op.startswith("memory") else gate_fusion_mod, op)
    extra = (torch.randn(32, 16, generator=gen, dtype=torch.float64).to(kdev), torch.zeros(32, dtype=torch.float64,
                                                                                              device=kdev))
    args = (h, z, *extra, w_z, w_h, b) if op.startswith("memory") else (h, z, w_z, w_h, b)
    with pytest.raises(ValueError, match=f"{op}'s Triton kernels give log_omega no gradient.*log_omega.detach"):
        fn(*args, log_omega, w1, b_omega, backend="triton")
    with torch.no_grad():  # nothing to differentiate: the kernels take it
        fn(*args, log_omega, w1, b_omega, backend="triton")
    monkeypatch.setattr(importlib.import_module("amg_fast.ops._backend"), "resolve_backend",
                        lambda op_, backend, device: "triton")
    got = torch.autograd.grad(fn(*args, log_omega, w1, b_omega, backend="auto")[0].sum(), log_omega)[0]
    want = torch.autograd.grad(fn(*args, log_omega, w1, b_omega, backend="reference")[0].sum(), log_omega)[0]
    assert got.abs().max() > 0 and torch.equal(got, want)


def test_layer_log_omega_follows_omega_dtype_and_state_dict(kdev):
    """The cached log(omega + eps) is rebuilt by set_omega, .double() and load_state_dict (not saved)."""
    layer = AdaptiveMemoryGate(16, omega=0.05).to(kdev)
    assert "log_omega" not in layer.state_dict()
    layer.double()
    assert layer.log_omega.dtype == torch.float64
    assert float(layer.log_omega) == torch.log(layer.omega + 1e-8).item()  # in fp64, from the fp64 omega
    other = AdaptiveMemoryGate(16).to(kdev)
    other.load_state_dict(AdaptiveMemoryGate(16, omega=0.3).state_dict())
    assert float(other.log_omega) == pytest.approx(torch.log(torch.tensor(0.3 + 1e-8)).item(), rel=1e-6)


@pytest.mark.gpu
def test_freq_gate_under_bf16_autocast_gpu(kdev, gen):
    """AMGFNO's gate under --precision bf16: autocast hands the kernels bf16 activations (and log omega);
    chi is formed in fp32 inside the kernel (tl.exp takes no bf16: the H100 run of 2026-11-26 failed to
    compile here). Within bf16 rounding of the fp64 reference; gradients keep the fp32 leaves' dtype."""
    args = freq_args((2, 25, 32, 128), (), torch.float32, gen, kdev)
    with torch.autocast(kdev.type, dtype=torch.bfloat16):
        out, g = gate_fusion_mod.gate_fusion_freq(*args, backend="triton")
    assert out.dtype == g.dtype == torch.bfloat16
    leaves = [a for i, a in enumerate(args) if i != 5]
    grads = torch.autograd.grad(out.float().sum() + g.float().sum(), leaves)
    assert all(gr.dtype == torch.float32 and torch.isfinite(gr).all() for gr in grads)
    args64 = [a.detach().double() for a in args]
    out_ref, _ = gate_fusion_ref(*args64[:5], torch.sigmoid(args64[6] * args64[5] + args64[7]))
    assert rel_err(out, out_ref) <= 1e-2
