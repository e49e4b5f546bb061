"""kernels/relu_grad.py (the epilogue feed-forward's backward: the ReLU's mask and both bias gradients in one
pass) against threshold_backward and explicit loops; the whole feed-forward against the reference:
test_feed_forward.py."""
import pytest
import torch
from helpers import rel_err


@pytest.mark.parametrize("policy", ["gpu", "cpu"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["fp32", "fp64"])
def test_relu_backward_with_bias_grads(dtype, policy, gen, kdev, monkeypatch, poisoned):
    """dh equal to threshold_backward(g, h, 0) element for element (exact zeros where h <= 0, g's NaN and a NaN
    in h passing g as it does); db1, db2 the column sums of dh and dy against explicit fp64 loops over row
    blocks; on the GPU's policy (several programs striding over 16-row tiles, a ragged last tile, widths not
    powers of two) and the CPU's (one program)."""
    from amg_fast.kernels import relu_grad

    if policy == "gpu":
        monkeypatch.setitem(relu_grad.LAUNCH_POLICY, kdev.type, dict(relu_grad.LAUNCH_POLICY["cuda"], programs=5))
    M, F, H_out = 203, 300, 40

    def rand(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float64).to(kdev, dtype)

    g, h, dy = rand(M, F), rand(M, F), rand(M, H_out)
    h[3, :7], g[5, 11] = float("nan"), float("nan")
    dh, sums = relu_grad.relu_backward_with_bias_grads(g, h, dy)
    db1, db2 = sums.split((F, H_out))
    want = torch.ops.aten.threshold_backward(g, h, 0)
    assert dh.dtype == dtype and torch.equal(dh.isnan(), want.isnan())
    assert torch.equal(torch.nan_to_num(dh), torch.nan_to_num(want))
    assert db1.dtype == db2.dtype == dtype and db1[11].isnan() == bool(h[5, 11] > 0)
    dh64 = torch.where(h.double() <= 0, 0.0, g.double()).nan_to_num()
    tol = 1e-13 if dtype == torch.float64 else 1e-6
    for got, rows in ((db1, dh64), (db2, dy.double())):
        loop = sum(rows[i:i + 16].sum(0) for i in range(0, M, 16))  # the row blocks, in an explicit loop
        ok = ~got.isnan()
        assert rel_err(got[ok], loop[ok]) <= tol
    assert db2.isfinite().all() and db1.isnan().sum() <= 1


@pytest.mark.parametrize("f,h_out,max_width", [(16, 4096, 8192), (48, 40, 32)], ids=["dy-wider", "beyond-max-width"])
def test_relu_backward_with_bias_grads_at_other_widths(f, h_out, max_width, gen, kdev, monkeypatch, poisoned):
    """dy wider than the hidden gradient (the row tile sized from the wider: one sized from F alone would hold
    [512, 4096] of dy here, over Triton's 2^20 elements a tensor), and widths beyond MAX_WIDTH (the torch ops
    instead), on the GPU's policy."""
    from amg_fast.kernels import relu_grad

    monkeypatch.setitem(relu_grad.LAUNCH_POLICY, kdev.type, dict(relu_grad.LAUNCH_POLICY["cuda"], programs=3))
    monkeypatch.setattr(relu_grad, "MAX_WIDTH", max_width)
    M = 70
    g, h, dy = (torch.randn(M, n, generator=gen, dtype=torch.float64).to(kdev) for n in (f, f, h_out))
    dh, sums = relu_grad.relu_backward_with_bias_grads(g, h, dy)
    want = torch.where(h <= 0, 0.0, g)
    assert torch.equal(dh, want) and sums.shape == (f + h_out,)
    assert rel_err(sums, torch.cat([want.sum(0), dy.sum(0)])) <= 1e-13


def test_relu_backward_with_bias_grads_names_bad_arguments(kdev):
    from amg_fast.kernels.relu_grad import relu_backward_with_bias_grads

    g = torch.zeros(4, 8, device=kdev)
    with pytest.raises(ValueError, match=r"g, h must be \[M, F\] and dy \[M, H_out\], of one dtype, got \(4, 8\) "
                                         r"torch.float32, \(4, 8\) torch.float64 and \(4, 3\) torch.float32"):
        relu_backward_with_bias_grads(g, g.double(), g[:, :3])
    with pytest.raises(ValueError, match=r"got \(4, 8\) torch.float32, \(4, 8\) torch.float32 and \(3, 3\)"):
        relu_backward_with_bias_grads(g, g, g[:3, :3])
    dh, sums = relu_backward_with_bias_grads(g[:0], g[:0], g[:0, :3])
    assert dh.shape == (0, 8) and torch.equal(sums, torch.zeros(11, device=kdev))
