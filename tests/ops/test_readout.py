"""linear_glu (the S4D memory's readout GLU(Linear(x))): the reference against an explicit formula, the Triton
backward pass (kernels/glu_grad.py) against glu_backward and explicit loops, and the op's Triton path against the
reference: output and every gradient."""
import pytest
import torch
from helpers import RTOL, gpu_tiling, record_launches, rel_err, value_and_grads

from amg_fast.ops.readout import LinearGluFn, linear_glu, linear_glu_ref

DTYPES = {"fp32": torch.float32, "fp64": torch.float64}


def make_inputs(lead, h, h_out, gen, dtype=torch.float64, device="cpu"):
    """x [*lead, h], weight [2 h_out, h] (nn.Linear-scaled), bias [2 h_out]: leaves requiring grad."""
    def rand(*shape, scale=1.0):
        return (scale * torch.randn(*shape, generator=gen, dtype=torch.float64)).to(device, dtype).requires_grad_()

    return rand(*lead, h), rand(2 * h_out, h, scale=h ** -0.5), rand(2 * h_out, scale=0.5)


def test_reference_matches_explicit_formula(gen):
    x, w, b = make_inputs((3, 5), 7, 6, gen)
    pre = torch.einsum("bsi,oi->bso", x, w) + b
    want = pre[..., :6] / (1 + torch.exp(-pre[..., 6:]))
    assert rel_err(linear_glu_ref(x, w, b), want) <= 1e-14


@pytest.mark.parametrize("policy", ["gpu", "cpu"])
@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
def test_glu_backward_with_bias_grads(dtype, policy, gen, kdev, monkeypatch, poisoned):
    """dpre equal to aten's glu_backward (to rounding), dbias the column sums of dpre against an explicit fp64 loop
    over row blocks; on the GPU's policy (several programs striding over row tiles, a ragged last tile, a width not
    a power of two) and the CPU's (one program); large |b| saturating the sigmoid both ways."""
    from amg_fast.kernels import glu_grad

    if policy == "gpu":
        gpu_tiling(monkeypatch, glu_grad, kdev, programs=5)
    M, H = 203, 100

    def rand(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float64).to(kdev, dtype)

    dz, pre = rand(M, H), rand(M, 2 * H)
    pre[7, H:H + 3] = torch.tensor([80.0, -80.0, 0.0], dtype=dtype)
    dpre, dbias = glu_grad.glu_backward_with_bias_grads(dz, pre)
    want = torch.ops.aten.glu_backward(dz.double(), pre.double(), -1)
    tol = 1e-14 if dtype == torch.float64 else 1e-6
    assert dpre.dtype == dtype and dpre.isfinite().all() and rel_err(dpre, want) <= tol
    assert dbias.dtype == dtype and dbias.shape == (2 * H,)
    loop = sum(want[i:i + 16].sum(0) for i in range(0, M, 16))  # the row blocks, in an explicit loop
    assert rel_err(dbias, loop) <= tol


def test_glu_backward_with_bias_grads_names_bad_arguments(kdev):
    from amg_fast.kernels.glu_grad import glu_backward_with_bias_grads

    dz = torch.zeros(4, 3, device=kdev)
    for pre, what in ((torch.zeros(4, 5, device=kdev), r"\(4, 5\) torch.float32"),
                      (torch.zeros(4, 6, dtype=torch.float64, device=kdev), r"\(4, 6\) torch.float64")):
        with pytest.raises(ValueError, match=r"dz must be \[M, H\] and pre \[M, 2H\], of one dtype, got \(4, 3\) "
                                             r"torch.float32 and " + what):
            glu_backward_with_bias_grads(dz, pre)


CASES = [((2, 25, 16), 16, 16), ((7,), 5, 3), ((3, 1, 40), 128, 128)]


@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
@pytest.mark.parametrize("lead,h,h_out", CASES, ids=["paper-like", "odd", "H128"])
def test_fused_matches_reference(lead, h, h_out, dtype, gen, kdev, monkeypatch, poisoned):
    """The Triton backend (cuBLAS forward, the one-pass GLU and bias backward on the GPU's row tiling) against the
    reference in fp64: the output and every gradient, every output element written (poisoned)."""
    from amg_fast.kernels import glu_grad

    gpu_tiling(monkeypatch, glu_grad, kdev, programs=3)
    launches = []
    record_launches(glu_grad, launches, monkeypatch)
    inputs = make_inputs(lead, h, h_out, gen, dtype, kdev)
    dz = torch.randn(*lead, h_out, generator=gen, dtype=torch.float64).to(kdev)
    z, grads = value_and_grads(lambda *a: linear_glu(*a, backend="triton"), inputs, dz)
    assert [name for name, *_ in launches] == ["_glu_grad_kernel"]
    z_ref, grads_ref = value_and_grads(linear_glu_ref, [t.detach().double().requires_grad_() for t in inputs], dz)
    tol = RTOL[dtype] if dtype == torch.float64 else 1e-5
    for name, a, b in zip(("z", "dx", "dweight", "dbias"), (z, *grads), (z_ref, *grads_ref)):
        assert a.dtype == dtype and a.shape == b.shape, name
        assert rel_err(a, b) <= tol, f"{name}: rel err {rel_err(a, b):.2e}"


@pytest.mark.variant("readout_gemm")
@pytest.mark.parametrize("lead,h,h_out", CASES, ids=["paper-like", "odd", "H128"])
def test_fp32_mode_row_gemms_match_reference(lead, h, h_out, gen, kdev, monkeypatch, allow_tf32, poisoned, tf32_mma):
    """$AMG_FAST_READOUT_GEMM=1 in fp32 mode: W's and W^T's TF32 planes split in one launch, the forward and dx as
    row GEMMs of 3xTF32 products on the GPU's tiles (the interpreter's MMAs truncating their operands as Hopper's:
    tf32_mma, where an unsplit operand or a dropped product is ~1e-4 off), dW by torch; the output and every
    gradient within 1e-5 of the fp64 reference."""
    from amg_fast.kernels import _tf32, ffn_gemm, glu_grad

    monkeypatch.setenv("AMG_FAST_READOUT_GEMM", "1")
    monkeypatch.setitem(ffn_gemm.LAUNCH_POLICY, kdev.type, ffn_gemm.LAUNCH_POLICY["cuda"])
    allow_tf32(False)
    launches = []
    for module in (_tf32, ffn_gemm, glu_grad):
        record_launches(module, launches, monkeypatch)
    inputs = make_inputs(lead, h, h_out, gen, torch.float32, kdev)
    dz = torch.randn(*lead, h_out, generator=gen, dtype=torch.float64).to(kdev)
    z, grads = value_and_grads(lambda *a: linear_glu(*a, backend="triton"), inputs, dz)
    assert [name for name, *_ in launches] == ["_weight_planes_kernel", "_row_gemm_kernel", "_glu_grad_kernel",
                                               "_row_gemm_kernel"]
    assert [kw["SPLIT"] and kw["BIAS"] for name, _, kw in launches if name == "_row_gemm_kernel"] == [True, False]
    z_ref, grads_ref = value_and_grads(linear_glu_ref, [t.detach().double().requires_grad_() for t in inputs], dz)
    for name, a, b in zip(("z", "dx", "dweight", "dbias"), (z, *grads), (z_ref, *grads_ref)):
        assert a.dtype == torch.float32 and a.shape == b.shape, name
        assert rel_err(a, b) <= 1e-5, f"{name}: rel err {rel_err(a, b):.2e}"


@pytest.mark.parametrize("setting", ["switch-off", "tf32", "fp64"])
def test_the_row_gemms_are_fp32_modes_alone(setting, gen, kdev, monkeypatch, allow_tf32):
    """Without the switch, under TF32 (cuBLAS's TF32 GEMMs) and for fp64 activations the readout keeps its cuBLAS
    GEMMs: no row GEMM, no weight split; and linear_split_fwd refuses another mode by name."""
    from amg_fast.kernels import _tf32, ffn_gemm

    monkeypatch.setenv("AMG_FAST_READOUT_GEMM", "0" if setting == "switch-off" else "1")
    allow_tf32(setting == "tf32")
    launches = []
    for module in (_tf32, ffn_gemm):
        record_launches(module, launches, monkeypatch)
    x, w, b = make_inputs((6,), 8, 4, gen, torch.float64 if setting == "fp64" else torch.float32, kdev)
    linear_glu(x, w, b, backend="triton").sum().backward()
    assert launches == []
    if setting != "switch-off":
        with pytest.raises(ValueError, match=r"linear_split_fwd is fp32 mode's path \(float32 x and weight, TF32 "
                                             r"off: 3xTF32 dots\), got x torch.float(32|64), weight torch.float"):
            ffn_gemm.linear_split_fwd(x.detach(), w.detach(), b.detach())


def test_fused_gradcheck(gen, kdev):
    """gradcheck in fp64 of LinearGluFn, and with x not requiring grad (no dx GEMM: the first argument's None)."""
    x, w, b = make_inputs((5,), 4, 3, gen, device=kdev)
    assert torch.autograd.gradcheck(LinearGluFn.apply, (x, w, b))
    grads = torch.autograd.grad(linear_glu(x.detach(), w, b, backend="triton").sum(), (w, b))
    grads_ref = torch.autograd.grad(linear_glu_ref(x.detach(), w, b).sum(), (w, b))
    assert all(rel_err(a, c) <= 1e-12 for a, c in zip(grads, grads_ref))


def test_fused_under_bf16_autocast_follows_nn_linear(gen, kdev):
    """Under autocast the output is bf16 (as nn.Linear and F.glu give) and the gradients keep the fp32 leaves'
    dtype."""
    inputs = make_inputs((4, 8), 16, 16, gen, torch.float32, kdev)
    with torch.autocast(kdev.type, dtype=torch.bfloat16):
        z = linear_glu(*inputs, backend="triton")
        z_ref = linear_glu_ref(*inputs)
    assert z.dtype == z_ref.dtype == torch.bfloat16
    assert rel_err(z.float(), z_ref.float()) <= 2e-2
    grads = torch.autograd.grad(z.float().sum(), inputs)
    assert [g.dtype for g in grads] == [torch.float32] * 3


@pytest.mark.parametrize("bad,match", [
    (lambda a: (a[0], a[1][:, :3], a[2]), r"weight must have shape \(12, 4\) .*H = 4"),
    (lambda a: (a[0], a[1][:11], a[2][:11]), r"weight must have an even number of rows .*got 11"),
    (lambda a: (a[0], a[1], a[2][:5]), r"bias must have shape \(12,\)"),
    (lambda a: (a[0].to(torch.int64), *a[1:]), r"x"),
], ids=["weight", "odd", "bias", "x-int"])
def test_bad_arguments_are_named(bad, match, gen):
    inputs = [t.detach() for t in make_inputs((2,), 4, 6, gen)]
    with pytest.raises((ValueError, TypeError), match=match):
        linear_glu(*bad(inputs))


def test_memory_readout_runs_the_op(gen, kdev):
    """The S4D memory's readout is linear_glu over its Linear's parameters (state_dict names unchanged), equal to
    the former F.glu(output_linear(a))."""
    from amg_fast.layers.s4d_memory import S4DMemory

    memory = S4DMemory(8, backend="triton").to(kdev).double()
    assert "output_linear.weight" in memory.state_dict()
    a = torch.randn(2, 3, 8, generator=gen, dtype=torch.float64).to(kdev)
    want = torch.nn.functional.glu(memory.output_linear(a), dim=-1)
    assert rel_err(memory.readout(a), want) <= 1e-14
