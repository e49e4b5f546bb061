"""memory_gate / memory_gate_freq (the S4D readout GLU(Linear(a)) folded into the gate kernels) on
Triton against the reference, and the reference against the formula written out.

Without a GPU the kernels run in Triton's interpreter on CPU tensors (fp32 / fp64). Every kernel
output buffer starts as NaN (fixture `poisoned`).
"""
import importlib

import pytest
import torch
from helpers import RTOL, VIEW_LAYOUTS, record_launches, rel_err, strided_view

from amg_fast.kernels import _tf32 as tf32_kernels
from amg_fast.kernels import gate_fusion as gate_kernels
from amg_fast.ops import gate_fusion_freq, memory_gate, memory_gate_freq, memory_gate_ref

NAMES = ("h", "a", "w_out", "b_out", "w_z", "w_h", "b")


def make_args(shape, dtype, gen, device):
    """(h, a, w_out [2H, H], b_out [2H], w_z, w_h [H, H], b [H]) with pre-activations of order one,
    leaves requiring grad."""
    H = shape[-1]

    def rand(*s, scale=1.0):
        return (torch.randn(*s, generator=gen, dtype=torch.float64) * scale).to(device, dtype).requires_grad_()

    return [rand(*shape), rand(*shape), rand(2 * H, H, scale=H ** -0.5), rand(2 * H, scale=0.3),
            rand(H, H, scale=H ** -0.5), rand(H, H, scale=H ** -0.5), rand(H, scale=0.5)]


def chi_args(kind, B, dtype, gen, device):
    """The gate-weight arguments: ("chi0" | "chiB", chi) or ("freq0" | "freqB", log_omega, w1, b_omega)."""
    shape = () if kind.endswith("0") else (B,)
    if kind.startswith("chi"):
        return [torch.rand(shape, generator=gen, dtype=torch.float64).to(device, dtype).requires_grad_()]
    omega = 1e-4 + 0.7 * torch.rand(shape, generator=gen, dtype=torch.float64)
    w1, b_omega = (torch.tensor(v + 0.3 * float(torch.randn((), generator=gen)), dtype=dtype, device=device)
                   for v in (2.0, 3.8))
    return [torch.log(omega + 1e-8).to(device, dtype), w1.requires_grad_(), b_omega.requires_grad_()]


def run(args, gate, backend, dout):
    """(out, g_mean) and the gradients of <out, dout> w.r.t. every input that requires grad."""
    op = memory_gate if len(gate) == 1 else memory_gate_freq
    out, g_mean = op(*args, *gate, backend=backend)
    leaves = [t for t in args + gate if t.requires_grad]
    return out, g_mean, torch.autograd.grad((out * dout.to(out)).sum(), leaves)


def in_float64(tensors):
    return [t.detach().cpu().double().requires_grad_(t.requires_grad) for t in tensors]


def test_reference_equals_formula_written_out(gen):
    """z = (a W1^T + b1) sigmoid(a W2^T + b2); g = sigmoid(z w_z^T + h w_h^T + b) chi; out = g z + (1 - g) h."""
    h, a, w_out, b_out, w_z, w_h, b = (t.detach() for t in make_args((2, 3, 16), torch.float64, gen, "cpu"))
    chi = torch.tensor([0.3, 0.8], dtype=torch.float64)
    z = (a @ w_out[:16].T + b_out[:16]) * torch.sigmoid(a @ w_out[16:].T + b_out[16:])
    g = torch.sigmoid(z @ w_z.T + h @ w_h.T + b) * chi[:, None, None]
    out, g_mean = memory_gate_ref(h, a, w_out, b_out, w_z, w_h, b, chi)
    assert rel_err(out, g * z + (1 - g) * h) <= 1e-14 and abs(float(g_mean) - float(g.mean())) <= 1e-15


CASES = [((1, 25, 8, 16), "chi0"), ((3, 4, 10, 48), "chiB"), ((2, 3, 8, 128), "freq0"), ((3, 2, 7, 48), "freqB")]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["fp32", "fp64"])
@pytest.mark.parametrize("shape,kind", CASES, ids=[f"H{s[-1]}-{k}" for s, k in CASES])
def test_forward_and_all_grads_match_reference(shape, kind, dtype, kdev, poisoned, gen):
    args = make_args(shape, dtype, gen, kdev)
    gate = chi_args(kind, shape[0], dtype, gen, kdev)
    dout = torch.randn(shape, generator=gen, dtype=torch.float64)
    out, g_mean, grads = run(args, gate, "triton", dout.to(kdev))
    out_ref, g_mean_ref, grads_ref = run(in_float64(args), in_float64(gate), "reference", dout)
    assert out.dtype == dtype and out.shape == shape and not g_mean.requires_grad
    assert g_mean.shape == () and g_mean.dtype == (torch.float64 if dtype == torch.float64 else torch.float32)
    tol = RTOL[dtype]
    assert rel_err(out, out_ref) <= tol and rel_err(g_mean, g_mean_ref) <= tol
    names = NAMES + (("chi",) if kind.startswith("chi") else ("w1", "b_omega"))
    for name, grad, ref, leaf in zip(names, grads, grads_ref, [t for t in args + gate if t.requires_grad]):
        assert grad.dtype == leaf.dtype and torch.isfinite(grad).all(), name
        assert rel_err(grad, ref) <= tol, f"d{name}: rel err {rel_err(grad, ref):.2e}"


@pytest.mark.parametrize("layout", list(VIEW_LAYOUTS))
def test_inputs_that_flatten_to_strided_views(layout, kdev, poisoned, gen):
    """h and a as strided views that flatten to [rows, H] without a copy (tests/helpers.py's
    VIEW_LAYOUTS): every gradient, dW_h and dW_out included, as for contiguous inputs."""
    h, a, *weights = make_args((12, 24), torch.float64, gen, kdev)
    args = [strided_view(h, layout), strided_view(a, layout), *weights]
    gate = chi_args("freq0", 12, torch.float64, gen, kdev)
    dout = torch.randn(12, 24, generator=gen, dtype=torch.float64)
    got = run(args, gate, "triton", dout.to(kdev))
    want = run(in_float64(args), in_float64(gate), "reference", dout)
    for name, x, y in zip(("out", "g_mean") + NAMES + ("w1", "b_omega"), (got[0], got[1], *got[2]),
                          (want[0], want[1], *want[2])):
        assert rel_err(x, y) <= 1e-10, name


def test_gpu_tiling_of_the_weight_gradients(kdev, poisoned, gen, monkeypatch):
    """The CUDA tiling of the split-K weight-gradient kernel (several row groups, a ragged last one,
    two output row blocks of the [2H, H] readout weight), whatever device runs the test."""
    monkeypatch.setitem(gate_kernels.WGRAD_POLICY, kdev.type, dict(gate_kernels.WGRAD_POLICY["cuda"], programs=24))
    args = make_args((3, 5, 9, 48), torch.float64, gen, kdev)
    gate = chi_args("freqB", 3, torch.float64, gen, kdev)
    dout = torch.randn(3, 5, 9, 48, generator=gen, dtype=torch.float64)
    got = run(args, gate, "triton", dout.to(kdev))
    want = run(in_float64(args), in_float64(gate), "reference", dout)
    for a, b in zip((got[0], got[1], *got[2]), (want[0], want[1], *want[2])):
        assert rel_err(a, b) <= 1e-10


GPU_TILE_CASES = [(readout, mode, H, False) for readout in (True, False)
                  for mode, H in (("fp32", 128), ("fp32-dot", 128), ("tf32", 128), ("fp32", 48))] + [
    (False, "fp32-dot", 128, True), (False, "tf32", 128, True)]  # the plain backward's 64-row ("wgmma") tiles


def _gpu_tile_case(readout: bool, mode: str, H: int, bwd_wgmma: bool):
    """The case as a pytest.param, marked with the variants it runs (off by default): fp32 mode's split weights
    ("fp32": AMG_FAST_GATE_X3=split; Triton's tf32x3 dot is the default), the 64-row backward tiles."""
    variants = ["gate_x3split"] * (mode == "fp32") + ["gate_bwd_wgmma"] * bwd_wgmma
    name = f"{'memory_gate' if readout else 'gate_fusion'}-{mode}-H{H}{'-bwd_wgmma' if bwd_wgmma else ''}"
    return pytest.param(readout, mode, H, bwd_wgmma, marks=[pytest.mark.variant(*variants)] if variants else [],
                        id=name)


@pytest.mark.parametrize("readout,mode,H,bwd_wgmma", [_gpu_tile_case(*case) for case in GPU_TILE_CASES])
def test_gpu_tiles(mode, H, readout, bwd_wgmma, kdev, poisoned, gen, monkeypatch, allow_tf32, tf32_mma):
    """The GPU's tiles (on CPU the kernels take one z chunk and up to 256 rows) at H = 128
    (kernels.gate_fusion.TILE_POLICY in the mode: several row programs and a ragged last one; with the readout
    z formed 16-32 (forward) / 16-64 (backward) columns at a time through the out / saved-z buffers) and at
    H = 48 (a second, partial chunk), whatever device runs the test, against the fp64 reference; the plain
    gate's tiles too. fp32 mode's tf32x3 dots are fp32-accurate, on the weights' TF32 planes (split once per
    call: one more launch each way) or, with AMG_FAST_GATE_X3=dot ("fp32-dot"), Triton's tf32x3 dot; TF32
    rounds (tf32_mma: the interpreter truncates the operands as a GPU does), and must: its dots are "tf32".
    bwd_wgmma: the plain gate's backward on TILE_POLICY["bwd"]["wgmma"] ($AMG_FAST_GATE_BWD_WGMMA=1)."""
    monkeypatch.setattr(gate_kernels, "_on_cpu", lambda config, *args: config)
    monkeypatch.setenv("AMG_FAST_GATE_BWD_WGMMA", "1" if bwd_wgmma else "0")
    backward_rows = []
    record_launches(gate_kernels, backward_rows, monkeypatch)
    if mode.startswith("fp32"):  # "fp32": the weights' TF32 planes; "fp32-dot": Triton's tf32x3 dot (the default)
        monkeypatch.setenv("AMG_FAST_GATE_X3", "dot" if mode == "fp32-dot" else "split")
    launches = []
    record_launches(tf32_kernels, launches, monkeypatch)
    allow_tf32(mode == "tf32")
    shape = (2, 3, 25, H)  # 150 rows: 32- and 64-row tiles leave a ragged last one; H = 48: a partial chunk
    args = make_args(shape, torch.float32, gen, kdev)
    gate = chi_args("freqB", 2, torch.float32, gen, kdev)
    dout = torch.randn(shape, generator=gen, dtype=torch.float64)
    if readout:
        got, want = run(args, gate, "triton", dout.to(kdev)), run(in_float64(args), in_float64(gate), "reference", dout)
    else:  # gate_fusion_freq(h, z = a, w_z, w_h, b, ...)
        plain = [args[0], args[1], *args[4:]]
        got, want = (_plain_run(plain, gate, "triton", dout.to(kdev)),
                     _plain_run(in_float64(plain), in_float64(gate), "reference", dout))
    assert len(launches) == (2 if mode == "fp32" else 0)  # the weights split, forward and backward
    rows = {kw["BLOCK_M"] for name, _, kw in backward_rows if name == "_gate_fusion_bwd_kernel"}
    assert rows == {64 if bwd_wgmma or readout and mode.startswith("fp32") else 32}
    tol = 2e-5 if mode.startswith("fp32") else RTOL[torch.float32]
    names = ("out", "g", *(NAMES if readout else ("h", "z", "w_z", "w_h", "b")), "w1", "b_omega")
    for name, a, b in zip(names, (got[0], got[1], *got[2]), (want[0], want[1], *want[2]), strict=True):
        # w1, b_omega: scalars summed over every row from terms of both signs (dout is random), whose
        # cancellation inflates TF32's relative error (up to ~1e-2 seen)
        limit = 3e-2 if mode == "tf32" and name in ("w1", "b_omega") else tol
        assert rel_err(a, b) <= limit, f"{name}: rel err {rel_err(a, b):.2e}"
    assert mode != "tf32" or rel_err(got[0], want[0]) > 1e-5  # TF32's rounding shows (tf32_mma on CPU)


def _plain_run(args, gate, backend, dout):
    """(out, g's mean, gradients of <out, dout> w.r.t. every input that requires grad) of gate_fusion_freq."""
    out, g = gate_fusion_freq(*args, *gate, backend=backend)
    leaves = [t for t in args + gate if t.requires_grad]
    return out, g.mean(), torch.autograd.grad((out * dout.to(out)).sum(), leaves)


@pytest.mark.parametrize("kind", ["chi0", "freqB"])
def test_gradcheck_float64(kind, kdev, gen):
    """fp64 gradcheck through MemoryGateFn (random directions over every input)."""
    args = make_args((2, 1, 16), torch.float64, gen, kdev)
    gate = chi_args(kind, 2, torch.float64, gen, kdev)
    op = memory_gate if kind.startswith("chi") else memory_gate_freq
    fixed = {i: t for i, t in enumerate(args + gate) if not t.requires_grad}  # log_omega takes no gradient
    leaves = [t for t in args + gate if t.requires_grad]

    def fn(*xs):
        it = iter(xs)
        return op(*[fixed[i] if i in fixed else next(it) for i in range(len(args + gate))], backend="triton")[0]

    assert torch.autograd.gradcheck(fn, leaves, fast_mode=True)


def test_width_over_limit_is_refused_by_triton_and_auto_falls_back(kdev, gen, monkeypatch):
    args = [t.detach() for t in make_args((2, 3, 144), torch.float64, gen, kdev)]
    chi = torch.tensor(0.5, dtype=torch.float64, device=kdev)
    with pytest.raises(ValueError, match=r"memory_gate Triton kernels support H <= 128 .*got H=144"):
        memory_gate(*args, chi, backend="triton")
    monkeypatch.setattr(importlib.import_module("amg_fast.ops._backend"), "resolve_backend",
                        lambda op, backend, device: "triton")
    out, g_mean = memory_gate(*args, chi, backend="auto")
    out_ref, g_mean_ref = memory_gate_ref(*args, chi)
    assert torch.equal(out, out_ref) and torch.equal(g_mean, g_mean_ref)


def test_bad_arguments_are_named(gen):
    h, a, w_out, b_out, w_z, w_h, b = (t.detach() for t in make_args((2, 3, 16), torch.float32, gen, "cpu"))
    chi = torch.tensor(0.5)
    with pytest.raises(ValueError, match=r"a must have the shape of h \(2, 3, 16\), got \(2, 3, 8\)"):
        memory_gate(h, a[..., :8], w_out, b_out, w_z, w_h, b, chi)
    with pytest.raises(ValueError, match=r"w_out must have shape \(32, 16\)"):
        memory_gate(h, a, w_out[:16], b_out, w_z, w_h, b, chi)
    with pytest.raises(ValueError, match=r"b_out must have shape \(32,\)"):
        memory_gate(h, a, w_out, b_out[:16], w_z, w_h, b, chi)
    with pytest.raises(ValueError, match="w1"):
        memory_gate_freq(h, a, w_out, b_out, w_z, w_h, b, chi, torch.ones(1), torch.ones(()))


@pytest.mark.gpu
def test_bf16_autocast_close_to_fp64_reference(kdev, gen):
    """Under bf16 autocast: bf16 activations, fp32 weights cast to bf16 for the kernels' dots, chi in fp32;
    gradients in the leaves' dtype, within bf16 rounding of the fp64 reference."""
    args = make_args((2, 25, 32, 128), torch.float32, gen, kdev)
    gate = chi_args("freq0", 2, torch.float32, gen, kdev)
    dout = torch.randn(2, 25, 32, 128, generator=gen, dtype=torch.float64)
    with torch.autocast(kdev.type, dtype=torch.bfloat16):
        out, g_mean, grads = run(args, gate, "triton", dout.to(kdev))
    assert out.dtype == torch.bfloat16 and g_mean.dtype == torch.float32
    out_ref, g_mean_ref, grads_ref = run(in_float64(args), in_float64(gate), "reference", dout)
    assert rel_err(out, out_ref) <= 1e-2 and rel_err(g_mean, g_mean_ref) <= 1e-2
    for grad, ref in zip(grads, grads_ref):
        assert grad.dtype == torch.float32 and rel_err(grad, ref) <= 3e-2


@pytest.mark.parametrize("readout", [True, False], ids=["memory_gate", "gate_fusion"])
def test_bf16_activations_hand_the_kernels_bf16_weights(readout, kdev, gen, monkeypatch):
    """bf16 activations with fp32 weights (autocast's master weights): the gate kernels' dots read w_z, w_h
    (and W_o) in bf16, cast before the launch, forward and backward (fed fp32 weights with bf16 activations, a
    pipelined dot was miscompiled by triton 3.6 for sm_90 in the fused feed-forward: H200, 2026-11-27); the
    biases stay fp32. Dtypes only: the interpreter's bf16 arithmetic is wrong (values: the GPU test above)."""
    H, M = 32, 40
    launches = []
    record_launches(gate_kernels, launches, monkeypatch, with_args=True)
    h, a, dout = (torch.randn(M, H, generator=gen).to(kdev, torch.bfloat16) for _ in range(3))
    w_z, w_h, b = (torch.randn(*s, generator=gen).to(kdev) / H ** 0.5 for s in ((H, H), (H, H), (H,)))
    extra = (tuple(torch.randn(*s, generator=gen).to(kdev) / H ** 0.5 for s in ((2 * H, H), (2 * H,))) if readout
             else None)
    chi = torch.tensor(0.7, device=kdev)
    gate_kernels.gate_fusion_fwd(h, a, w_z, w_h, b, chi, None, extra, g_mean=readout)
    gate_kernels.gate_fusion_bwd(h, a, w_z, w_h, b, chi, dout, None, None, extra)
    bf16, fp32 = torch.bfloat16, torch.float32
    w_o, b_o = (bf16, fp32) if readout else (fp32, fp32)  # without the readout chi stands in for both
    # each kernel's weight arguments: w_z, w_h, b, then (after chi, w1, b_omega) W_o, b_o
    weights = {name: [args[i].dtype for i in (2, 3, 4, 8, 9)] for name, _, _, args in launches if "gate_fusion" in name}
    assert weights == {name: [bf16, bf16, fp32, w_o, b_o] for name in ("_gate_fusion_fwd_kernel",
                                                                       "_gate_fusion_bwd_kernel")}


@pytest.mark.gpu
def test_torch_compile_matches_eager(kdev, gen):
    """torch.compile traces MemoryGateFn and its custom ops (the CUDA-graph / compiled step's path): the compiled
    and the eager op each equal the fp64 reference to fp32 mode's tolerance (tf32x3 dots), values and gradients,
    so a failure names the path that is off (compiled vs eager differed by 5.4e-3 in a loss in one run and 6.1e-5
    in the next, H200, 2026-11-29)."""
    shape = (2, 25, 32, 128)
    args = make_args(shape, torch.float32, gen, kdev)
    gate = chi_args("freq0", 2, torch.float32, gen, kdev)
    dout = torch.randn(shape, generator=gen, dtype=torch.float64)
    compiled_gate = torch.compile(lambda *a: memory_gate_freq(*a, backend="triton"))
    out, g_mean = compiled_gate(*args, *gate)
    compiled = out, g_mean, torch.autograd.grad((out * dout.to(out)).sum(), [t for t in args + gate if t.requires_grad])
    want = run(in_float64(args), in_float64(gate), "reference", dout)
    names = ("out", "g_mean", *NAMES, "w1", "b_omega")
    for path, got in (("eager", run(args, gate, "triton", dout.to(kdev))), ("compiled", compiled)):
        for name, a, b in zip(names, (got[0], got[1], *got[2]), (want[0], want[1], *want[2]), strict=True):
            assert rel_err(a, b) <= 2e-5, f"{path} {name}: rel err {rel_err(a, b):.2e} against fp64"


@pytest.mark.gpu
def test_amgfno_compiled_step_matches_eager_gpu(kdev, gen):
    """A whole AMGFNO forward + backward on the Triton backend, compiled (what the graphed and the
    compiled training steps run: the cuBLASLt feed-forward, S4D with its GELU, the readout and the gate) equals
    eager."""
    from amg_fast.models import get_model

    torch.manual_seed(0)
    model = get_model("amgfno", width=128, modes=16, omega=0.2, backend="triton").to(kdev)
    u = torch.randn(2, 6, 32, 1, generator=gen).to(kdev)

    def loss(m):
        return (m(u[:, :-1]) - u[:, 1:]).square().mean()

    eager = loss(model)
    grads = torch.autograd.grad(eager, list(model.parameters()))
    compiled = loss(torch.compile(model))
    grads_c = torch.autograd.grad(compiled, list(model.parameters()))
    assert rel_err(compiled, eager) <= 1e-4
    assert all(rel_err(a, b) <= 1e-3 for a, b in zip(grads_c, grads))


@pytest.mark.parametrize("wdtype", [torch.float64, torch.bfloat16], ids=["fp64", "bf16"])
@pytest.mark.parametrize("readout", [True, False], ids=["memory_gate", "gate_fusion"])
def test_fp32_activations_with_weights_of_another_dtype(wdtype, readout, kdev, gen, monkeypatch, allow_tf32):
    """fp32 activations with weights of another dtype in fp32 mode: the split takes the weights' fp32 values
    (the launchers cast the weights to the activations' dtype), forward and backward, and agrees with
    Triton's tf32x3 dots on the same inputs (AMG_FAST_GATE_X3=dot) to fp32 accuracy."""
    allow_tf32(False)
    H, M = 48, 70

    def rand(*shape, dtype=torch.float32):
        return (torch.randn(*shape, generator=gen, dtype=torch.float64) / H ** 0.5).to(dtype).to(kdev)

    h, a, dout = rand(M, H), rand(M, H), rand(M, H)
    w_z, w_h, b = rand(H, H, dtype=wdtype), rand(H, H, dtype=wdtype), rand(H, dtype=wdtype)
    extra = (rand(2 * H, H, dtype=wdtype), rand(2 * H, dtype=wdtype)) if readout else None
    chi = torch.tensor(0.7, device=kdev)
    results = {}
    for x3 in ("split", "dot"):
        monkeypatch.setenv("AMG_FAST_GATE_X3", x3)
        out, g = gate_kernels.gate_fusion_fwd(h, a, w_z, w_h, b, chi, None, extra, g_mean=readout)
        results[x3] = (out, g, *gate_kernels.gate_grads(h, a, w_z, w_h, b, chi, dout, None, None, extra))
    for name, got, want in zip(("out", "g", "dz", "dh", "grads"), results["split"], results["dot"], strict=True):
        assert torch.isfinite(got).all() and rel_err(got, want) <= 1e-5, f"{name}: {rel_err(got, want):.2e}"
