"""bench/ffn_accuracy.py: the CPU emulation of TF32 / tf32x3 / bf16 operands that states the
feed-forward's expected error per path and precision mode (the interpreter computes exact fp32)."""
import json
from pathlib import Path

import torch
from helpers import load_bench, rel_err

ROOT = Path(__file__).parents[1]


def load():
    return load_bench("ffn_accuracy")


def test_tf32_rounding_and_truncation_bit_patterns():
    fa = load()
    one = torch.tensor(1.0)
    # TF32 keeps 10 mantissa bits: 1 + 2^-10 is representable, 1 + 2^-11 is the tie between 1 and it
    x = torch.tensor([1 + 2**-11, 1 + 2**-12, -(1 + 2**-11), 1 + 2**-10 - 2**-23, float("inf"), 3.0])
    assert fa.tf32_round(x).tolist()[:4] == [1 + 2**-10, 1.0, -(1 + 2**-10), 1 + 2**-10]  # ties away from zero
    assert fa.tf32_truncate(x).tolist()[:4] == [1.0, 1.0, -1.0, 1.0]
    assert fa.tf32_round(x)[4] == float("inf") and fa.tf32_round(x)[5] == 3.0
    assert torch.isnan(fa.tf32_round(torch.tensor([float("nan")]))).all()
    y = torch.randn(1000, generator=torch.Generator().manual_seed(0))
    assert torch.equal(fa.bf16_round(y), y.to(torch.bfloat16).float())
    assert float(((fa.tf32_round(y) - y) / y).abs().max()) <= 2**-11 and float(fa.tf32_round(one)) == 1.0


def test_emulated_gemms_order_by_precision():
    """tf32x3 is as accurate as fp32 (within a few times its rounding); TF32 and bf16 are not."""
    fa = load()
    gen = torch.Generator().manual_seed(1)
    a, b = torch.randn(64, 256, generator=gen), torch.randn(256, 48, generator=gen)
    ref = a.double() @ b.double()
    err = {name: fa.rel_errors(mm(a, b), ref)[1] for name, mm in (
        ("fp32", fa._mm_fp32), ("tf32x3", fa._mm_tf32x3), ("tf32", fa._mm_rounded(fa.tf32_round)),
        ("tf32_trunc", fa._mm_rounded(fa.tf32_truncate)), ("bf16", fa._mm_rounded(fa.bf16_round)))}
    assert err["tf32x3"] <= 3 * err["fp32"] < 1e-6
    assert 1e-5 < err["tf32"] < err["tf32_trunc"] < err["bf16"] < 1e-2


def test_emulation_at_fp32_equals_the_row_gemm_kernels(kdev):
    """The emulated forward/backward with exact fp32 GEMMs is what the Triton row GEMMs compute (the
    interpreter's dots are exact fp32; fp32 mode's 3xTF32 drops only a ~2^-22 term): same ReLU, bias and
    gradient conventions."""
    from amg_fast.ops.ffn import feed_forward

    fa = load()
    x, w1, b1, w2, b2, dy = fa.inputs(96, 16, seed=2)
    want = fa.ffn_forward_backward(x, w1, b1, w2, b2, dy)
    leaves = [t.to(kdev).requires_grad_() for t in (x, w1, w2)]
    y = feed_forward(leaves[0], leaves[1], b1.to(kdev), leaves[2], b2.to(kdev), backend="triton", method="gemm")
    grads = torch.autograd.grad(y, leaves, dy.to(kdev))
    for name, got in zip(("y", "dx", "dw1", "dw2"), (y, *grads)):
        assert rel_err(got, want[name]) <= 1e-5, name


def test_table_and_cli(tmp_path, capsys):
    fa = load()
    out = tmp_path / "acc.json"
    assert fa.main(["--rows", "256", "--width", "16", "--json", str(out)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 1 + len(fa.PATHS) and printed[0].split()[:3] == ["path", "mode", "y.max_rel"]
    table = {(row["path"], row["mode"]): row for row in json.loads(out.read_text())["table"]}
    assert set(table) == set(fa.PATHS)
    fp32, x3 = table["epilogue", "fp32"], table["gemm", "tf32x3"]
    assert x3["y.mean_rel"] < 3 * fp32["y.mean_rel"] < 1e-6
    assert table["epilogue", "tf32"]["y.mean_rel"] > 100 * fp32["y.mean_rel"]
    assert table["either", "bf16"]["y.mean_rel"] > table["epilogue", "tf32"]["y.mean_rel"]
    assert all(row["grads_rounding.mean_rel"] <= row["grads.mean_rel"] * 1.01 for row in table.values())


def test_gpu_probe_accuracy_part_runs_here(kdev, monkeypatch):
    """bench/probe_ffn.py's error columns (the part that needs no timer), on the kernel device at a
    small shape: every path within fp32 rounding of fp64 (exact fp32 dots in the interpreter)."""
    import sys

    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    monkeypatch.delitem(sys.modules, "ffn_accuracy", raising=False)
    probe = load_bench("probe_ffn")
    torch.manual_seed(0)
    params, dy = probe.make_inputs(64, 16, kdev)
    errs = probe.accuracy(params, dy)
    assert set(errs) == {f"{p}.{t}.{m}" for p in probe.PATHS for t in ("y", "grads") for m in ("max_rel", "mean_rel")}
    assert all(0 <= v < 1e-5 for v in errs.values()), errs
