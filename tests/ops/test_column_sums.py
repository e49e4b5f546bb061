"""kernels/_rows.py column_sums (the gate's bias and chi gradients on its cuBLAS weight-gradient path) against
explicit fp64 loops over row blocks."""
import pytest
import torch
from helpers import rel_err

from amg_fast.kernels import _rows


@pytest.mark.parametrize("with_b", [False, True], ids=["a", "a+b"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=["fp32", "fp64"])
def test_column_sums_match_a_loop(dtype, with_b, gen, kdev, monkeypatch, poisoned):
    """[a's column sums | b's], in the accumulation dtype, on the GPU's policy with 5 programs striding over row
    tiles (a ragged last tile, widths not powers of two, b one column wide as the gate's dchi)."""
    monkeypatch.setitem(_rows.COLUMN_SUMS_POLICY, kdev.type, dict(_rows.COLUMN_SUMS_POLICY["cuda"], programs=5))
    M = 300
    a = torch.randn(M, 100, generator=gen, dtype=torch.float64).to(kdev, dtype)
    b = torch.randn(M, 1, generator=gen, dtype=torch.float64).to(kdev, dtype) if with_b else None
    got = _rows.column_sums(a, b)
    rows = a.double() if b is None else torch.cat([a.double(), b.double()], 1)
    loop = sum(rows[i:i + 7].sum(0) for i in range(0, M, 7))  # the row blocks, in an explicit loop
    assert got.dtype == dtype and got.shape == (rows.shape[1],)
    assert rel_err(got, loop) <= (1e-13 if dtype == torch.float64 else 1e-6)


def test_column_sums_of_no_rows_and_bad_arguments(kdev):
    assert torch.equal(_rows.column_sums(torch.zeros(0, 3, device=kdev)), torch.zeros(3, device=kdev))
    with pytest.raises(ValueError, match=r"a must be \[M, NA\] and b \[M, NB\] or None, got \(4, 3\) and \(5, 1\)"):
        _rows.column_sums(torch.zeros(4, 3, device=kdev), torch.zeros(5, 1, device=kdev))
