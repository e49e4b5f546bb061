"""kernels/relu_grad.py (the epilogue feed-forward's backward: the ReLU's mask and db1 in one pass) against
threshold_backward and an explicit loop; the whole feed-forward against the reference: test_feed_forward.py."""
import pytest
import torch
from helpers import rel_err


@pytest.mark.parametrize("policy", ["gpu", "cpu"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["fp32", "fp64"])
def test_relu_backward_with_bias_grad(dtype, policy, gen, kdev, monkeypatch, poisoned):
    """The epilogue feed-forward's kernel (kernels/relu_grad.py): dh equal to threshold_backward(g, h, 0)
    element for element (exact zeros where h <= 0, g's NaN and a NaN in h passing g as it does), db the
    column sums of dh against an explicit fp64 loop over row blocks; on the GPU's policy (several programs
    striding over 16-row tiles, a ragged last tile, F not a power of two) and the CPU's (one program)."""
    from amg_fast.kernels import relu_grad

    if policy == "gpu":
        monkeypatch.setitem(relu_grad.LAUNCH_POLICY, kdev.type, dict(relu_grad.LAUNCH_POLICY["cuda"], programs=5))
    M, F = 203, 300
    g = torch.randn(M, F, generator=gen, dtype=torch.float64).to(kdev, dtype)
    h = torch.randn(M, F, generator=gen, dtype=torch.float64).to(kdev, dtype)
    h[3, :7], g[5, 11] = float("nan"), float("nan")
    dh, db = relu_grad.relu_backward_with_bias_grad(g, h)
    want = torch.ops.aten.threshold_backward(g, h, 0)
    assert dh.dtype == dtype and torch.equal(dh.isnan(), want.isnan())
    assert torch.equal(torch.nan_to_num(dh), torch.nan_to_num(want))
    assert db.dtype == dtype and db[11].isnan() == bool(h[5, 11] > 0)
    dh64 = torch.where(h.double() <= 0, 0.0, g.double()).nan_to_num()
    loop = sum(dh64[i:i + 16].sum(0) for i in range(0, M, 16))  # the row blocks, in an explicit loop
    ok = ~db.isnan()
    assert rel_err(db[ok], loop[ok]) <= (1e-13 if dtype == torch.float64 else 1e-6)


def test_relu_backward_with_bias_grad_names_bad_arguments(kdev):
    from amg_fast.kernels.relu_grad import relu_backward_with_bias_grad

    g = torch.zeros(4, 8, device=kdev)
    with pytest.raises(ValueError, match=r"g and h must be \[M, F\] of one dtype, got \(4, 8\) torch.float32 and "
                                         r"\(4, 8\) torch.float64"):
        relu_backward_with_bias_grad(g, g.double())
    dh, db = relu_backward_with_bias_grad(g[:0], g[:0])
    assert dh.shape == (0, 8) and torch.equal(db, torch.zeros(8, device=kdev))
