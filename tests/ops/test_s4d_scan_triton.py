"""Triton S4D kernels (kernels/s4d_scan.py) vs the PyTorch reference: forward and gradients of the
methods ("toeplitz": batched dots, "scan"; "toeplitz_loop" on fewer cases), the fused GELU, extra
spatial axes, gradcheck through each autograd Function, non-contiguous inputs, T = 4096 stability,
the one-step rollout kernel, the GPU tiling (run on CPU), clear errors.

Without a GPU the kernels run in Triton's interpreter on CPU tensors (fp32/fp64 only); tests
marked gpu (bf16, torch.compile with Inductor) run only where CUDA is present.
"""
import importlib
import math

import torch.nn.functional as F
import pytest
import torch
from helpers import RTOL, ids, rel_err

from amg_fast.kernels import limits
from amg_fast.kernels import s4d_scan as s4d_kernels
from amg_fast.ops import s4d_scan, s4d_scan_ref, s4d_step, s4d_step_ref
from amg_fast.ops.s4d import s4d_conv_kernel

s4d_mod = importlib.import_module("amg_fast.ops.s4d")

METHODS = ("toeplitz", "scan")
DTYPES = {"fp32": torch.float32, "fp64": torch.float64}


def make_inputs(B, T, S, H, N, gen, device, dtype=torch.float64, radius=(0.5, 0.999)):
    """u [B, T, S, H]; stable poles lam = r e^{i theta} with r in radius; c [H, N, 2]; d [H]."""
    u = torch.randn(B, T, S, H, generator=gen, dtype=torch.float64)
    r = radius[0] + (radius[1] - radius[0]) * torch.rand(H, N, generator=gen, dtype=torch.float64)
    theta = 2 * math.pi * torch.rand(H, N, generator=gen, dtype=torch.float64)
    lam = torch.stack([r * torch.cos(theta), r * torch.sin(theta)], -1)
    c = torch.randn(H, N, 2, generator=gen, dtype=torch.float64)
    d = torch.randn(H, generator=gen, dtype=torch.float64)
    return tuple(t.to(device=device, dtype=dtype) for t in (u, lam, c, d))


def value_and_grads(fn, inputs, dy):
    """fn(*inputs) and the gradients of <fn(*inputs), dy> w.r.t. every input (fresh leaves, same strides)."""
    leaves = [t.detach().requires_grad_() for t in inputs]
    y = fn(*leaves)
    return y, torch.autograd.grad(y, leaves, dy.to(y.dtype))


def reference_fp64(inputs, dy):
    """The reference's output and gradients, computed in fp64 on CPU from the same values."""
    return value_and_grads(s4d_scan_ref, [t.detach().cpu().double() for t in inputs], dy.cpu().double())


def assert_matches(got, want, tol, names=("y", "du", "dlam", "dc", "dd")):
    y, grads = got
    y_ref, grads_ref = want
    for name, a, b in zip(names, (y, *grads), (y_ref, *grads_ref)):
        assert torch.isfinite(a).all(), f"{name} has non-finite entries (unwritten output?)"
        assert rel_err(a.cpu(), b) <= tol, f"{name}: rel err {rel_err(a.cpu(), b):.2e} > {tol:.0e}"


# B, T, S, H, N: T in {1, 25, 26}, B in {1, 3}, H in {16, 128}, S in {32, 48}, N in {32 (paper), 5}.
CASES = [
    (1, 1, 32, 16, 32),
    (3, 25, 48, 16, 5),
    (1, 26, 32, 128, 32),
    (3, 26, 48, 16, 32),
    (1, 25, 32, 128, 5),
]


@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("B,T,S,H,N", CASES, ids=[ids(B=b, T=t, S=s, H=h, N=n) for b, t, s, h, n in CASES])
def test_forward_and_gradients_match_reference(B, T, S, H, N, method, dtype, kdev, poisoned, gen):
    inputs = make_inputs(B, T, S, H, N, gen, kdev, dtype)
    dy = torch.randn(B, T, S, H, generator=gen, dtype=torch.float64).to(kdev)
    got = value_and_grads(lambda *a: s4d_scan(*a, backend="triton", method=method), inputs, dy)
    assert got[0].shape == (B, T, S, H) and got[0].dtype == dtype
    assert all(g.dtype == dtype for g in got[1])
    assert_matches(got, reference_fp64(inputs, dy), RTOL[dtype])


LOOP_CASES = [(3, 25, 48, 16, 5), (1, 26, 32, 128, 32)]


@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
@pytest.mark.parametrize("B,T,S,H,N", LOOP_CASES, ids=[ids(B=b, T=t, S=s, H=h, N=n) for b, t, s, h, n in LOOP_CASES])
def test_toeplitz_loop_matches_reference(B, T, S, H, N, dtype, kdev, poisoned, gen):
    """The lag-loop kernels (kept to compare with the batched dots on a GPU)."""
    inputs = make_inputs(B, T, S, H, N, gen, kdev, dtype)
    dy = torch.randn(B, T, S, H, generator=gen, dtype=torch.float64).to(kdev)
    got = value_and_grads(lambda *a: s4d_scan(*a, backend="triton", method="toeplitz_loop"), inputs, dy)
    assert_matches(got, reference_fp64(inputs, dy), RTOL[dtype])


def gelu_reference_fp64(inputs, dy):
    return value_and_grads(lambda *a: F.gelu(s4d_scan_ref(*a)), [t.detach().cpu().double() for t in inputs],
                           dy.cpu().double())


@pytest.mark.parametrize("method", ("toeplitz", "toeplitz_loop", "scan"))
@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
def test_gelu_activation_matches_reference(method, dtype, kdev, poisoned, gen):
    """activation="gelu": in the Toeplitz kernel's epilogue (its derivative in the backward's
    prologue), a torch op after the other methods; all equal GELU of the reference."""
    inputs = make_inputs(3, 25, 7, 16, 6, gen, kdev, dtype)
    dy = torch.randn(3, 25, 7, 16, generator=gen, dtype=torch.float64).to(kdev)
    got = value_and_grads(lambda *a: s4d_scan(*a, backend="triton", method=method, activation="gelu"), inputs, dy)
    assert_matches(got, gelu_reference_fp64(inputs, dy), RTOL[dtype])
    ref = value_and_grads(lambda *a: s4d_scan(*a, backend="reference", activation="gelu"), inputs, dy)
    assert_matches(ref, gelu_reference_fp64(inputs, dy), RTOL[dtype])


def flag_settings(monkeypatch, policies: dict, key: str, switch: str):
    """Sets a launch policy's flag (its "cuda" entry) and the environment switch over it to each combination
    in turn, yielding the flag the switch should give: the environment's "1" / "0" when set, else the policy's."""
    for policy_says in (False, True):
        monkeypatch.setitem(policies, "cuda", dict(policies["cuda"], **{key: policy_says}))
        for env, want in (("1", True), ("0", False), (None, policy_says)):
            if env is None:
                monkeypatch.delenv(switch, raising=False)
            else:
                monkeypatch.setenv(switch, env)
            yield want


@pytest.mark.parametrize("activation", [None, "gelu"])
def test_toeplitz_tf32_dots_at_tf32_accuracy(activation, allow_tf32, kdev, poisoned, gen):
    """TF32 allowed: the batched-dot Toeplitz kernels run plain TF32 dots, whose operands the MMA truncates
    (a GPU's, or the interpreter's under tf32_mma), the skip d u included (it sits on L's diagonal): y and
    every gradient within 3e-3 of fp64 (7-10e-4 without GELU, 1.0-1.8e-3 with it, dd the largest, over a few
    seeds on 2-core CPU, 2026-11-29; the same before d moved onto the diagonal) and above 2e-4 (the dots are
    TF32: fp32 mode's tf32x3 is ~2e-7 here)."""
    allow_tf32(True)
    inputs = make_inputs(2, 25, 32, 16, 32, gen, kdev, torch.float32)
    dy = torch.randn(2, 25, 32, 16, generator=gen, dtype=torch.float64).to(kdev)
    got = value_and_grads(lambda *a: s4d_scan(*a, backend="triton", method="toeplitz", activation=activation),
                          inputs, dy)
    ref_fn = gelu_reference_fp64 if activation else reference_fp64
    y_ref, grads_ref = ref_fn(inputs, dy)
    for name, a, b in zip(("y", "du", "dlam", "dc", "dd"), (got[0], *got[1]), (y_ref, *grads_ref), strict=True):
        assert 2e-4 < rel_err(a.cpu(), b) <= 3e-3, f"{name}: rel err {rel_err(a.cpu(), b):.2e}"


@pytest.mark.parametrize("method", ("toeplitz", "scan"))
def test_extra_spatial_axes_fold_into_rows(method, kdev, poisoned, gen):
    """u [B, T, X, Y, H] (issue 22): every grid point scanned over time, as the 4-D op on [B, T, X*Y, H]."""
    B, T, X, Y, H, N = 2, 9, 3, 5, 16, 4
    u, lam, c, d = make_inputs(B, T, X * Y, H, N, gen, kdev)
    u5 = u.reshape(B, T, X, Y, H)
    dy = torch.randn(B, T, X, Y, H, generator=gen, dtype=torch.float64).to(kdev)
    got = value_and_grads(lambda *a: s4d_scan(*a, backend="triton", method=method, activation="gelu"),
                          (u5, lam, c, d), dy)
    assert got[0].shape == (B, T, X, Y, H) and got[1][0].shape == (B, T, X, Y, H)
    want = gelu_reference_fp64((u, lam, c, d), dy.reshape(B, T, X * Y, H))
    assert_matches((got[0].reshape(B, T, X * Y, H), (got[1][0].reshape(B, T, X * Y, H), *got[1][1:])), want,
                   RTOL[torch.float64])
    ref5 = s4d_scan(u5.cpu(), lam.cpu(), c.cpu(), d.cpu(), backend="reference")
    assert ref5.shape == u5.shape and rel_err(ref5.reshape(B, T, X * Y, H), s4d_scan_ref(u, lam, c, d)) < 1e-12


def test_auto_method_switches_at_toeplitz_max_t(kdev, gen, monkeypatch):
    calls = []
    for fn_name in ("S4DToeplitzFn", "S4DScanFn"):
        fn = getattr(s4d_mod, fn_name)
        monkeypatch.setattr(fn, "apply", (lambda f, name: lambda *a: calls.append(name) or f(*a))(fn.apply, fn_name))
    u, lam, c, d = make_inputs(1, 3, 2, 16, 2, gen, kdev)
    s4d_scan(u, lam, c, d, backend="triton")
    monkeypatch.setattr(limits, "TOEPLITZ_MAX_T", 2)
    s4d_scan(u, lam, c, d, backend="triton")
    assert calls == ["S4DToeplitzFn", "S4DScanFn"]
    calls.clear()
    monkeypatch.setenv("AMG_FAST_S4D_METHOD", "toeplitz")  # the environment overrides "auto" (GPU timing)
    s4d_scan(u, lam, c, d, backend="triton")
    monkeypatch.setenv("AMG_FAST_S4D_METHOD", "fft")
    with pytest.raises(ValueError, match=r"AMG_FAST_S4D_METHOD must be one of \('toeplitz', 'toeplitz_loop', "
                                         r"'scan'\), got 'fft'"):
        s4d_scan(u, lam, c, d, backend="triton")
    assert calls == ["S4DToeplitzFn"]


def test_mixed_dtypes_follow_u_and_parameters(kdev, poisoned, gen):
    """u fp32, parameters fp64: computed in fp64 (as the reference), y in u's dtype, grads in each input's."""
    u, lam, c, d = make_inputs(2, 5, 3, 16, 4, gen, kdev)
    inputs = (u.float(), lam, c, d)
    dy = torch.randn(2, 5, 3, 16, generator=gen, dtype=torch.float64).to(kdev)
    for method in METHODS:
        y, grads = value_and_grads(lambda *a: s4d_scan(*a, backend="triton", method=method), inputs, dy)
        assert y.dtype == torch.float32 and [g.dtype for g in grads] == [t.dtype for t in inputs]
        assert_matches((y, grads), reference_fp64(inputs, dy), RTOL[torch.float32])


# ----------------------------------------------------------------------------- gradcheck (fp64)


@pytest.mark.parametrize("kind", ("poles", "zoh"))
@pytest.mark.parametrize("gelu,loop", [(False, False), (True, False), (False, True)],
                         ids=["dots", "dots-gelu", "loop"])
def test_gradcheck_toeplitz_fn(kind, gelu, loop, kdev, poisoned, gen):
    """Through S4DToeplitzFn: u, d and every parameter (the K kernels' backward from partial sums)."""
    u, lam, c, d = make_inputs(2, 4, 3, 2, 3, gen, kdev)
    params = (lam, c) if kind == "poles" else make_continuous(2, 3, gen, kdev)
    inputs = tuple(t.requires_grad_() for t in (u, d, *params))
    assert torch.autograd.gradcheck(lambda u_, d_, *p: s4d_mod.S4DToeplitzFn.apply(u_, d_, kind, gelu, loop, *p),
                                    inputs, fast_mode=True)


def test_gradcheck_scan_fn(kdev, poisoned, gen):
    inputs = tuple(t.requires_grad_() for t in make_inputs(2, 4, 3, 2, 3, gen, kdev))
    assert torch.autograd.gradcheck(s4d_mod.S4DScanFn.apply, inputs, fast_mode=True)


def test_gradcheck_step_fn(kdev, poisoned, gen):
    u, lam, c, d = make_inputs(1, 1, 3, 2, 3, gen, kdev)
    state = torch.randn(3, 2, 3, 2, generator=gen, dtype=torch.float64).to(kdev)
    inputs = tuple(t.requires_grad_() for t in (u[0, 0], state, lam, c, d))
    assert torch.autograd.gradcheck(s4d_mod.S4DStepFn.apply, inputs, fast_mode=True)


@pytest.mark.parametrize("method", METHODS)
def test_gradcheck_public_op(method, kdev, poisoned, gen):
    """Through s4d_scan, so lam and c also reach the Toeplitz path's K kernels."""
    inputs = tuple(t.requires_grad_() for t in make_inputs(1, 4, 2, 2, 2, gen, kdev))
    assert torch.autograd.gradcheck(lambda *a: s4d_scan(*a, backend="triton", method=method), inputs, fast_mode=True)


# ----------------------------------------------------------------------------- layouts, stability


@pytest.mark.parametrize("method", METHODS)
def test_non_contiguous_inputs(method, kdev, poisoned, gen):
    B, T, S, H, N = 2, 7, 5, 16, 3
    u, lam, c, d = make_inputs(B, T, S, H, N, gen, kdev)
    u_t = u.transpose(1, 2).contiguous().transpose(1, 2)  # [B, T, S, H] view of a [B, S, T, H] buffer
    lam_s = torch.stack([lam, torch.zeros_like(lam)], 2).flatten(1, 2)[:, ::2]  # every other row
    d_s = torch.stack([d, d], -1)[:, 0]
    assert not (u_t.is_contiguous() or lam_s.is_contiguous() or d_s.is_contiguous())
    dy = torch.randn(B, S, T, H, generator=gen, dtype=torch.float64).to(kdev).transpose(1, 2)
    inputs = (u_t, lam_s, c, d_s)
    got = value_and_grads(lambda *a: s4d_scan(*a, backend="triton", method=method), inputs, dy)
    assert_matches(got, reference_fp64(inputs, dy), RTOL[torch.float64])


def test_scan_stable_at_T4096_float32(kdev, poisoned, gen):
    """fp32 scan over 4096 steps with poles near the unit circle (|lam| up to 0.9999) and small ones."""
    H, N = 4, 8
    u, lam, c, d = make_inputs(1, 4096, 2, H, N, gen, kdev, radius=(0.99, 0.9999))
    small = make_inputs(1, 1, 1, H, N, gen, kdev, radius=(0.01, 0.5))[1]
    lam = torch.cat([lam[:, : N // 2], small[:, N // 2:]], 1)
    inputs = tuple(t.float() for t in (u, lam, c, d))
    dy = torch.randn(u.shape, generator=gen, dtype=torch.float64).to(kdev)
    got = value_and_grads(lambda *a: s4d_scan(*a, backend="triton", method="scan"), inputs, dy)
    assert_matches(got, reference_fp64(inputs, dy), 3e-4)


# ----------------------------------------------------------------------------- step (rollout)

STEP_SHAPES = [((3, 7, 16), 32), ((16,), 5)]


@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
@pytest.mark.parametrize("lead,N", [(s[:-1], n) for s, n in STEP_SHAPES],
                         ids=["x".join(map(str, s)) + f"-N{n}" for s, n in STEP_SHAPES])
def test_step_matches_reference(lead, N, dtype, kdev, poisoned, gen):
    H = 16
    _, lam, c, d = make_inputs(1, 1, 1, H, N, gen, kdev, dtype)
    u_t = torch.randn(*lead, H, generator=gen, dtype=torch.float64).to(kdev, dtype)
    state = torch.randn(*lead, H, N, 2, generator=gen, dtype=torch.float64).to(kdev, dtype)
    dy = torch.randn(*lead, H, generator=gen, dtype=torch.float64).to(kdev)
    dstate = torch.randn(*lead, H, N, 2, generator=gen, dtype=torch.float64).to(kdev)
    inputs = (u_t, state, lam, c, d)

    def loss(fn, args):
        y, new_state = fn(*args)
        # the reference runs on CPU in fp64: bring the upstream gradients to y's device and dtype
        return y, new_state, (y * dy.to(y.device, y.dtype)).sum() + (new_state * dstate.to(y.device, y.dtype)).sum()

    leaves = [t.clone().requires_grad_() for t in inputs]
    y, new_state, total = loss(lambda *a: s4d_step(*a, backend="triton"), leaves)
    grads = torch.autograd.grad(total, leaves)
    ref_leaves = [t.detach().cpu().double().requires_grad_() for t in inputs]
    y_ref, state_ref, total_ref = loss(s4d_step_ref, ref_leaves)
    grads_ref = torch.autograd.grad(total_ref, ref_leaves)
    assert y.dtype == dtype and new_state.dtype == dtype
    assert_matches((y, (new_state, *grads)), (y_ref, (state_ref, *grads_ref)), RTOL[dtype],
                   names=("y", "state", "du", "dstate", "dlam", "dc", "dd"))


def test_rollout_of_steps_equals_scan(kdev, poisoned, gen):
    B, T, S, H, N = 2, 12, 5, 16, 5
    u, lam, c, d = make_inputs(B, T, S, H, N, gen, kdev)
    state = torch.zeros(B, S, H, N, 2, dtype=torch.float64, device=kdev)
    ys = []
    for t in range(T):
        y_t, state = s4d_step(u[:, t], state, lam, c, d, backend="triton")
        ys.append(y_t)
    rollout = torch.stack(ys, 1)
    assert rel_err(rollout, s4d_scan(u, lam, c, d, backend="triton", method="scan")) <= RTOL[torch.float64]
    assert rel_err(rollout.cpu(), s4d_scan_ref(u.cpu(), lam.cpu(), c.cpu(), d.cpu())) <= RTOL[torch.float64]


# ----------------------------------------------------------------------------- GPU tiling, on any device


@pytest.mark.variant("s4d_channels_first")
@pytest.mark.parametrize("activation", [None, "gelu"])
def test_batched_dots_with_channel_blocks_along_grid_axis_0(activation, kdev, poisoned, gen, monkeypatch):
    """TOEPLITZ_DOT_POLICY's "channels_first" grid (channel blocks on axis 0, column groups on axis 1): the same
    values and gradients, the backward's partial sums indexed by column group (2 uneven groups, 3 channel blocks)."""
    policy = dict(s4d_kernels.TOEPLITZ_DOT_POLICY["cuda"], programs=4, channels_first=True)
    monkeypatch.setitem(s4d_kernels.TOEPLITZ_DOT_POLICY, kdev.type, policy)
    B, T, S, H = 2, 26, 40, 10
    tiling = s4d_kernels._dot_tiling(B, T, S, H, kdev)
    assert tiling["CHANNELS_FIRST"] and tiling["grid"] == (-(-H // tiling["BH"]), tiling["groups"])
    assert tiling["grid"][0] >= 2 and tiling["groups"] == 2
    inputs = make_inputs(B, T, S, H, 8, gen, kdev)
    dy = torch.randn(B, T, S, H, generator=gen, dtype=torch.float64).to(kdev)
    act = F.gelu if activation else (lambda y: y)
    want = value_and_grads(lambda *a: act(s4d_scan_ref(*a)), [t.detach().cpu() for t in inputs], dy.cpu())
    got = value_and_grads(lambda *a: s4d_scan(*a, backend="triton", method="toeplitz", activation=activation),
                          inputs, dy)
    assert_matches(got, want, RTOL[torch.float64])


def test_channels_first_switch_overrides_the_policy(monkeypatch):
    """AMG_FAST_S4D_CHANNELS_FIRST=1 / 0 sets the batched-dot kernels' launch order whatever TOEPLITZ_DOT_POLICY
    says (the campaign's variant s4d_channels_first); unset, the policy's. The grid swaps its two axes."""
    for want in flag_settings(monkeypatch, s4d_kernels.TOEPLITZ_DOT_POLICY, "channels_first",
                              "AMG_FAST_S4D_CHANNELS_FIRST"):
        tiling = s4d_kernels._dot_tiling(32, 25, 128, 128, torch.device("cuda"))
        n_h = -(-128 // tiling["BH"])
        assert tiling["CHANNELS_FIRST"] is want
        assert tiling["grid"] == ((n_h, tiling["groups"]) if want else (tiling["groups"], n_h))


@pytest.mark.parametrize(
    "B,T,S,H,programs",
    [(3, 40, 5, 7, 1024), (3, 26, 3, 5, 2), (2, 26, 40, 5, 4)],
    ids=["several-column-and-time-blocks", "uneven-batch-groups", "uneven-column-groups"],
)
def test_gpu_launch_policy(B, T, S, H, programs, kdev, poisoned, gen, monkeypatch):
    """The CUDA block sizes (several column / time / channel blocks, partial last blocks), batch
    groups of unequal size (B = 3 in groups of 2) and, for the batched dots, column groups of unequal
    size (80 columns in two groups, the second shorter), whatever device runs the test."""
    monkeypatch.setitem(s4d_kernels.LAUNCH_POLICY, kdev.type, {"tile": 4096, "programs": programs})
    monkeypatch.setitem(s4d_kernels.TOEPLITZ_DOT_POLICY, kdev.type,
                        dict(s4d_kernels.TOEPLITZ_DOT_POLICY["cuda"], programs=programs))
    tiling = s4d_kernels._dot_tiling(B, T, S, H, kdev)
    if S == 40:  # the case's point: the batched dots' column groups are unequal
        assert tiling["grid"][0] == 2 and tiling["COLS_PER_GROUP"] not in (B * S, B * S // 2)
    inputs = make_inputs(B, T, S, H, 32, gen, kdev)
    dy = torch.randn(B, T, S, H, generator=gen, dtype=torch.float64).to(kdev)
    want = reference_fp64(inputs, dy)
    for method in ("toeplitz", "toeplitz_loop", "scan"):
        got = value_and_grads(lambda *a: s4d_scan(*a, backend="triton", method=method), inputs, dy)
        assert_matches(got, want, RTOL[torch.float64])
    u, lam, c, d = inputs
    state = torch.randn(B, S, H, 32, 2, generator=gen, dtype=torch.float64).to(kdev)
    y, new_state = s4d_step(u[:, 0], state, lam, c, d, backend="triton")
    y_ref, state_ref = s4d_step_ref(*(t.cpu() for t in (u[:, 0], state, lam, c, d)))
    assert rel_err(y.cpu(), y_ref) <= RTOL[torch.float64] and rel_err(new_state.cpu(), state_ref) <= RTOL[torch.float64]


def test_batch_groups_split():
    cpu = torch.device("cpu")
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(s4d_kernels.LAUNCH_POLICY, "cpu", {"tile": 4096, "programs": 2})
        assert s4d_kernels._batch_groups(3, 1, cpu) == (2, 2)
        assert s4d_kernels._batch_groups(3, 5, cpu) == (1, 3)
        assert s4d_kernels._batch_groups(1, 1, cpu) == (1, 1)


# ----------------------------------------------------------------------------- errors


def test_triton_backend_without_interpreter_on_cpu_raises(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    u, lam, c, d = torch.zeros(1, 2, 3, 4), torch.zeros(4, 2, 2), torch.zeros(4, 2, 2), torch.zeros(4)
    with pytest.raises(RuntimeError, match="backend='triton' for s4d_scan cannot run: tensors are on cpu"):
        s4d_scan(u, lam, c, d, backend="triton")
    with pytest.raises(RuntimeError, match="backend='triton' for s4d_step cannot run: tensors are on cpu"):
        s4d_step(u[:, 0], torch.zeros(1, 3, 4, 2, 2), lam, c, d, backend="triton")


def test_unknown_method_or_activation_rejected():
    args = (torch.zeros(1, 2, 3, 4), torch.zeros(4, 2, 2), torch.zeros(4, 2, 2), torch.zeros(4))
    with pytest.raises(ValueError, match=r"method must be one of \('auto', 'toeplitz', 'toeplitz_loop', 'scan'\), "
                                         r"got 'fft'"):
        s4d_scan(*args, method="fft")
    with pytest.raises(ValueError, match=r"activation must be one of \(None, 'gelu'\), got 'relu'"):
        s4d_scan(*args, activation="relu")
    with pytest.raises(ValueError, match=r"u must have rank 4 to 15 \(\[B, T, S, H\]"):
        s4d_scan(torch.zeros(2, 3, 4), *args[1:])


def test_batched_dots_refuse_long_sequences(kdev, gen):
    """method="toeplitz" holds [T, T] matrices on chip: T > TOEPLITZ_DOT_MAX_T is refused by name."""
    u, lam, c, d = make_inputs(1, limits.TOEPLITZ_DOT_MAX_T + 1, 1, 2, 2, gen, kdev)
    with pytest.raises(ValueError, match=r"method='toeplitz' \(batched dots\) takes T <= 64 .*got T=65; use "
                                         r"method='scan' or 'toeplitz_loop'"):
        s4d_scan(u, lam, c, d, backend="triton", method="toeplitz")


# ----------------------------------------------------------------------------- GPU only


@pytest.mark.gpu
@pytest.mark.parametrize("method", METHODS)
def test_bfloat16_close_to_fp32_reference(method, kdev, gen):
    inputs = make_inputs(4, 25, 64, 128, 32, gen, kdev, torch.float32)
    inputs = (inputs[0].bfloat16(), *inputs[1:])
    dy = torch.randn(4, 25, 64, 128, generator=gen, dtype=torch.float64).to(kdev)
    y, grads = value_and_grads(lambda *a: s4d_scan(*a, backend="triton", method=method), inputs, dy)
    assert y.dtype == torch.bfloat16 and grads[0].dtype == torch.bfloat16
    assert_matches((y, grads), reference_fp64(inputs, dy), 1e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("method", METHODS)
def test_autocast_bfloat16_output(method, kdev, gen):
    inputs = make_inputs(2, 25, 32, 128, 32, gen, kdev, torch.float32)
    with torch.autocast(kdev.type, dtype=torch.bfloat16):
        y = s4d_scan(*inputs, backend="triton", method=method)
    assert y.dtype == torch.bfloat16
    assert rel_err(y, s4d_scan_ref(*inputs)) <= 1e-2


@pytest.mark.gpu
@pytest.mark.parametrize("method", METHODS)
def test_torch_compile_matches_eager(method, kdev, gen):
    inputs = make_inputs(2, 25, 32, 128, 32, gen, kdev, torch.float32)
    dy = torch.randn(2, 25, 32, 128, generator=gen, device="cpu").to(kdev)

    def f(*a):
        return s4d_scan(*a, backend="triton", method=method)

    eager = value_and_grads(f, inputs, dy)
    compiled = value_and_grads(torch.compile(f), inputs, dy)
    assert_matches(compiled, (eager[0].cpu().double(), [g.cpu().double() for g in eager[1]]), 1e-5)
    # below the public op (validation, logging, nvtx): kernel launches and autograd trace in one graph
    def below_public_op(u, lam, c, d):
        return s4d_mod._s4d_triton(u, d, method, None, "poles", (lam, c), lambda: (lam, c))

    full = torch.compile(below_public_op, fullgraph=True)
    assert_matches(value_and_grads(full, inputs, dy), (eager[0].cpu().double(), [g.cpu().double() for g in eager[1]]),
                   1e-5)


# ----------------------------------------------------------------------------- the Toeplitz path's kernel K


def split_into_partials(dk: torch.Tensor, groups: int, gen) -> torch.Tensor:
    """dk [H, T] as `groups` random partial sums [G, H, T] that add up to it (what the Toeplitz
    backward hands the K kernels' backward)."""
    part = torch.randn((groups,) + tuple(dk.shape), generator=gen, dtype=torch.float64)
    part[-1] = dk - part[:-1].sum(0)
    return part


def kernel_op_grads(bwd, dk, params, groups, gen, device, dtype):
    """The K kernels' backward op on dk split into partial sums: (parameter grads..., dd)."""
    return bwd(split_into_partials(dk, groups, gen).to(device=device, dtype=dtype), *params)


@pytest.mark.parametrize("H,N,T,G", [(16, 32, 25, 3), (5, 3, 1, 1), (7, 5, 32, 70), (3, 2, 130, 2)],
                         ids=["H16-N32-T25-G3", "H5-N3-T1-G1", "H7-N5-T32-G70", "H3-N2-T130-G2"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["fp32", "fp64"])
def test_conv_kernel_ops_match_s4d_conv_kernel(H, N, T, G, dtype, kdev, poisoned, gen):
    """K = 2 Re(sum_n c lam^l) from its kernel; the lam, c gradients and dd = dK[:, 0] from the
    backward kernel, which sums G partial sums of dK itself, equal the torch formula's."""
    _, lam, c, _ = make_inputs(1, 1, 1, H, N, gen, kdev, dtype)
    ops = s4d_mod.triton_ops()
    kk = ops.s4d_conv_kernel_fwd(lam, c, T)
    lam_ref, c_ref = (t.detach().cpu().double().requires_grad_() for t in (lam, c))
    kk_ref = s4d_conv_kernel(lam_ref, c_ref, T)
    dk = torch.randn(H, T, generator=gen, dtype=torch.float64)
    dlam, dc, dd = kernel_op_grads(ops.s4d_conv_kernel_bwd, dk, (lam, c), G, gen, kdev, dtype)
    grads_ref = torch.autograd.grad(kk_ref, (lam_ref, c_ref), dk)
    tol = RTOL[dtype] if dtype == torch.float64 else 1e-5
    assert_matches((kk, (dlam, dc, dd)), (kk_ref, (*grads_ref, dk[:, 0])), tol, names=("K", "dlam", "dc", "dd"))


# ----------------------------------------------------------------------------- ZOH discretisation folded into K


def make_continuous(H, N, gen, device, dtype=torch.float64):
    """The S4D layer's continuous parameters near its S4D-Lin init (A_n = -1/2 + i pi n), perturbed:
    log_dt [H] in [log 1e-3, log 1e-1]; log_A_real, A_imag [H, N]; C [H, N, 2]."""
    log_dt = math.log(1e-3) + (math.log(1e-1) - math.log(1e-3)) * torch.rand(H, generator=gen, dtype=torch.float64)
    log_a_re = math.log(0.5) + 0.3 * torch.randn(H, N, generator=gen, dtype=torch.float64)
    a_im = math.pi * torch.arange(N, dtype=torch.float64) + 0.3 * torch.randn(H, N, generator=gen, dtype=torch.float64)
    big_c = torch.randn(H, N, 2, generator=gen, dtype=torch.float64)
    return tuple(t.to(device=device, dtype=dtype) for t in (log_dt, log_a_re, a_im, big_c))


def assert_zoh_matches(got, want, torch_fp32, dtype, names):
    """fp64: the usual tolerance. fp32: lam - 1 cancels for small dt (c ~ C dt A), so the bound is 4x
    the error of the same formula evaluated by torch in fp32 (torch_fp32), at least 2e-5."""
    if dtype == torch.float64:
        assert_matches(got, want, RTOL[dtype], names=names)
        return
    for name, a, a32, b in zip(names, (got[0], *got[1]), (torch_fp32[0], *torch_fp32[1]), (want[0], *want[1])):
        assert torch.isfinite(a).all(), f"{name} has non-finite entries (unwritten output?)"
        bound = max(2e-5, 4 * rel_err(a32, b))
        assert rel_err(a.cpu(), b) <= bound, f"{name}: rel err {rel_err(a.cpu(), b):.2e} > {bound:.1e}"


def test_s4d_discretize_matches_explicit_formula(gen):
    """The reference discretisation against a scalar loop with cmath: lam = e^{dt A}, c = C (lam - 1) / A."""
    import cmath

    log_dt, log_a_re, a_im, big_c = make_continuous(3, 4, gen, "cpu")
    lam, c = s4d_mod.s4d_discretize(log_dt, log_a_re, a_im, big_c)
    for h in range(3):
        for n in range(4):
            a = complex(-math.exp(log_a_re[h, n]), a_im[h, n])
            lam_hn = cmath.exp(math.exp(log_dt[h]) * a)
            c_hn = complex(big_c[h, n, 0], big_c[h, n, 1]) * (lam_hn - 1) / a
            assert abs(complex(*lam[h, n].tolist()) - lam_hn) < 1e-12
            assert abs(complex(*c[h, n].tolist()) - c_hn) < 1e-12


@pytest.mark.parametrize("H,N,T,G", [(16, 32, 25, 4), (5, 3, 1, 1), (7, 5, 32, 2)],
                         ids=["H16-N32-T25-G4", "H5-N3-T1-G1", "H7-N5-T32-G2"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["fp32", "fp64"])
def test_zoh_conv_kernel_ops_match_reference(H, N, T, G, dtype, kdev, poisoned, gen):
    """K from the continuous parameters in one kernel, and all four parameter gradients (and dd)
    from G partial sums of dK in one kernel, equal s4d_conv_kernel(*s4d_discretize(...)) in fp64."""
    params = make_continuous(H, N, gen, kdev, dtype)
    params_ref = [p.detach().cpu().double().requires_grad_() for p in params]
    ops = s4d_mod.triton_ops()
    kk = ops.s4d_zoh_conv_kernel_fwd(*params, T)
    kk_ref = s4d_conv_kernel(*s4d_mod.s4d_discretize(*params_ref), T)
    dk = torch.randn(H, T, generator=gen, dtype=torch.float64)
    *grads, dd = kernel_op_grads(ops.s4d_zoh_conv_kernel_bwd, dk, params, G, gen, kdev, dtype)
    grads_ref = torch.autograd.grad(kk_ref, params_ref, dk)
    torch_fp32 = value_and_grads(lambda *p: s4d_conv_kernel(*s4d_mod.s4d_discretize(*p), T),
                                 [p.detach().float() for p in params_ref], dk)
    assert_zoh_matches((kk, grads), (kk_ref, grads_ref), torch_fp32, dtype,
                       names=("K", "dlog_dt", "dlog_A_real", "dA_imag", "dC"))
    assert rel_err(dd, dk[:, 0]) <= (RTOL[dtype] if dtype == torch.float64 else 1e-6)


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["fp32", "fp64"])
def test_zoh_scan_matches_reference(method, dtype, kdev, poisoned, gen):
    """The layer's op (discretisation + scan) on Triton vs the reference: output and every gradient."""
    B, T, S, H, N = 2, 9, 16, 16, 4
    u = torch.randn(B, T, S, H, generator=gen, dtype=torch.float64)
    d = torch.randn(H, generator=gen, dtype=torch.float64)
    inputs = [t.to(device=kdev, dtype=dtype) for t in (u, *make_continuous(H, N, gen, "cpu"), d)]
    dy = torch.randn(B, T, S, H, generator=gen, dtype=torch.float64)
    got = value_and_grads(lambda *a: s4d_mod.s4d_zoh_scan(*a, backend="triton", method=method), inputs, dy.to(kdev))
    def reference(*a):
        return s4d_mod.s4d_zoh_scan(*a, backend="reference")

    want = value_and_grads(reference, [t.detach().cpu().double() for t in inputs], dy)
    torch_fp32 = value_and_grads(reference, [t.detach().cpu().float() for t in inputs], dy)
    assert_zoh_matches(got, want, torch_fp32, dtype, names=("y", "du", "dlog_dt", "dlog_A_real", "dA_imag", "dC", "dd"))


def test_zoh_scan_rejects_bad_parameters(gen):
    u = torch.randn(1, 3, 4, 5, generator=gen)
    log_dt, log_a_re, a_im, big_c = make_continuous(5, 2, gen, "cpu", torch.float32)
    d = torch.zeros(5)
    with pytest.raises(ValueError, match="A_imag"):
        s4d_mod.s4d_zoh_scan(u, log_dt, log_a_re, a_im[:, :1], big_c, d)
    with pytest.raises(ValueError, match="log_dt"):
        s4d_mod.s4d_zoh_scan(u, log_dt[:4], log_a_re, a_im, big_c, d)
    with pytest.raises(ValueError, match="method"):
        s4d_mod.s4d_zoh_scan(u, log_dt, log_a_re, a_im, big_c, d, method="fft")
