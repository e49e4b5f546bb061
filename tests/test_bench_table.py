"""bench/bench_table.py formats a results JSON, and bench/_roofline.py matches the performance
model of docs/benchmarks.md ("Floors").

The JSON files here are fabricated (pytest-benchmark's schema, made-up times) to check the
formatting only; they are not results.
"""
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
SHAPE = {"B": 32, "T": 25, "S": 128, "H": 128, "N": 32, "K": 64}


def load_roofline():
    spec = importlib.util.spec_from_file_location("bench_roofline", ROOT / "bench" / "_roofline.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def entry(provider, *, op="spectral_conv1d", mode="fwd", do_bench_ms=None, median_s=None, flops=1e9, nbytes=33.5e6):
    info = {"op": op, "mode": mode, "provider": provider, "shape_id": "B32-T25-S128-H128", "shape": SHAPE,
            "flops": flops, "bytes": nbytes}
    if do_bench_ms is not None:
        info["do_bench_ms"] = do_bench_ms
    name = f"test_{op}[S128-{provider}-{mode}]"
    return {"name": name, "fullname": f"bench/x.py::{name}", "group": f"{op} {mode} B32-T25-S128-H128",
            "extra_info": info, "stats": {"median": median_s if median_s is not None else 1.0, "rounds": 5}}


def results(gpu, benchmarks):
    return {"machine_info": {"gpu": gpu, "versions": {"torch": "2.11.0", "triton": "3.6.0", "cuda": "12.8"},
                             "date": "2026-01-01T00:00:00+00:00", "commit": "0123456789abcdef", "commit_dirty": False},
            "commit_info": {"id": "0123456789abcdef"}, "benchmarks": benchmarks, "datetime": "2026-01-01"}


def run_table(tmp_path, data, *flags):
    path = tmp_path / "results.json"
    path.write_text(json.dumps(data))
    return subprocess.run([sys.executable, str(ROOT / "bench" / "bench_table.py"), str(path), *flags],
                          capture_output=True, text=True)


def row_of(out, prefix):
    rows = [line for line in out.splitlines() if line.startswith(prefix)]
    assert len(rows) == 1, out
    return [cell.strip() for cell in rows[0].strip("|").split("|")]


def test_gpu_json_gives_speedups_and_floor(tmp_path):
    data = results("NVIDIA H100 80GB HBM3", [entry("reference", do_bench_ms=0.1), entry("compiled", do_bench_ms=0.05),
                                             entry("triton", do_bench_ms=0.025)])
    proc = run_table(tmp_path, data)
    assert proc.returncode == 0, proc.stderr
    assert "H100 SXM figures" in proc.stdout and "3.35 TB/s" in proc.stdout and "495 TFLOP/s" in proc.stdout
    assert "do_bench medians" in proc.stdout and "commit 0123456789ab" in proc.stdout
    cells = row_of(proc.stdout, "| spectral_conv1d | fwd |")
    # 33.5 MB / 3.35 TB/s = 10 us beats 1 GFLOP / 495 TFLOP/s = 2 us: HBM-bound floor.
    assert cells[2:] == ["B32-T25-S128-H128", "100.0", "50.0", "25.0", "4.00x", "2.00x", "10.0 (HBM)", "2.50x"]


def test_h200_defaults_and_flag_overrides(tmp_path):
    data = results("NVIDIA H200", [entry("triton", do_bench_ms=0.025, flops=49.5e9)])
    proc = run_table(tmp_path, data)
    assert proc.returncode == 0 and "H200 SXM figures" in proc.stdout and "4.8 TB/s" in proc.stdout
    assert row_of(proc.stdout, "| spectral_conv1d |")[8:] == ["100.0 (compute)", "0.25x"]  # 49.5 GFLOP at 495
    proc = run_table(tmp_path, data, "--peak-tflops", "990", "--hbm-tbs", "1")
    assert "from --peak-tflops, --hbm-tbs" in proc.stdout
    assert row_of(proc.stdout, "| spectral_conv1d |")[8] == "50.0 (compute)"


def test_cpu_json_uses_pytest_benchmark_medians_and_lists_other_benchmarks(tmp_path):
    ks = {"name": "test_etdrk4_batched[B64]", "fullname": "bench/test_bench_ks.py::test_etdrk4_batched[B64]",
          "extra_info": {"method": "etdrk4"}, "stats": {"median": 0.5}}
    data = results(None, [entry("reference", mode="bwd", median_s=2e-3), entry("reference", median_s=1e-3), ks])
    proc = run_table(tmp_path, data)
    assert proc.returncode == 0, proc.stderr
    assert "CPU (no GPU)" in proc.stdout and "pytest-benchmark medians" in proc.stdout
    assert "floors do not apply" in proc.stdout
    out = proc.stdout
    assert out.index("| spectral_conv1d | fwd |") < out.index("| spectral_conv1d | bwd |")  # mode order
    assert row_of(out, "| spectral_conv1d | bwd |")[3:6] == ["2,000", "-", "-"]
    assert row_of(out, "| bench/test_bench_ks.py::test_etdrk4_batched[B64] |")[1] == "500,000"


@pytest.mark.parametrize("content", ["not json", json.dumps({"benchmarks": "x"})])
def test_rejects_files_that_are_not_benchmark_results(tmp_path, content):
    path = tmp_path / "bad.json"
    path.write_text(content)
    proc = subprocess.run([sys.executable, str(ROOT / "bench" / "bench_table.py"), str(path)],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and "error:" in proc.stderr


def test_rejects_non_positive_peak(tmp_path):
    proc = run_table(tmp_path, results(None, []), "--hbm-tbs", "0")
    assert proc.returncode == 2 and "--hbm-tbs must be > 0" in proc.stderr


def test_roofline_matches_performance_model():
    roofline = load_roofline()
    flops, nbytes = roofline.flops_and_bytes("spectral_conv1d", "fwd", SHAPE)
    # mixing 6.7 GFLOP + two real FFTs (the DFT-as-GEMM count would add 6.7 instead of 0.5)
    assert flops == pytest.approx(6.7e9 + 2 * 800 * 128 * 2.5 * 128 * 7, rel=0.01)
    assert nbytes == pytest.approx(113e6, rel=0.01)
    assert roofline.transform_flops(128, 64) < 4 * 128 * 64  # the FFT is the cheaper count
    assert roofline.transform_flops(8, 1) == 4 * 8 * 1  # one kept mode: the DFT is the cheaper count
    flops, nbytes = roofline.flops_and_bytes("s4d_scan", "fwd", SHAPE)
    assert flops == pytest.approx(0.33e9, rel=0.15) and nbytes == pytest.approx(104.9e6, rel=0.01)
    flops, nbytes = roofline.flops_and_bytes("gate_fusion", "fwd", SHAPE)
    assert flops == pytest.approx(6.7e9, rel=0.02) and nbytes == pytest.approx(4 * 52.4e6, rel=0.01)
    fwd, bwd, both = (roofline.flops_and_bytes("gate_fusion", m, SHAPE) for m in ("fwd", "bwd", "fwd+bwd"))
    assert both == (fwd[0] + bwd[0], fwd[1] + bwd[1]) and bwd[0] == 2 * fwd[0]
    flops, nbytes = roofline.flops_and_bytes("amgfno_train_step", "step", SHAPE)
    assert flops == pytest.approx(0.5e12, rel=0.15) and nbytes == pytest.approx(5e9, rel=0.15)
    with pytest.raises(ValueError, match="op must be one of"):
        roofline.flops_and_bytes("conv2d", "fwd", SHAPE)
    with pytest.raises(ValueError, match="mode must be one of"):
        roofline.flops_and_bytes("s4d_scan", "step", SHAPE)


def test_roofline_feed_forward_and_floors_per_precision():
    """The feed-forward's count (two GEMMs H -> 4H -> H: 27 GFLOP forward at S = 128) and the floor of
    each precision mode: HBM bytes over bandwidth or FLOPs over the mode's peak, whichever is larger."""
    roofline = load_roofline()
    rows, H, F = 32 * 25 * 128, 128, 512
    flops, nbytes = roofline.flops_and_bytes("feed_forward", "fwd", SHAPE)
    assert flops == 2 * 2 * rows * H * F + rows * F and flops == pytest.approx(27e9, rel=0.02)
    assert nbytes == 4 * (2 * rows * H + 2 * H * F + F + H)  # x in, y out, weights; the hidden stays on chip
    h100, matched = roofline.gpu_spec("NVIDIA H100 80GB HBM3")
    assert matched and h100.label == "H100 SXM" and roofline.gpu_spec("NVIDIA H200")[0].hbm_tb_s == 4.8
    assert roofline.gpu_spec("NVIDIA H100 PCIe")[0].label == "H100 PCIe"
    assert roofline.gpu_spec(None) == (roofline.DEFAULT_GPU_SPEC, False)
    assert h100.peak_tflops("fp32") == pytest.approx(495 / 3)  # tf32x3 beats the 67 TFLOP/s SIMT units
    a100 = roofline.gpu_spec("NVIDIA A100-SXM4-80GB")[0]
    assert a100.peak_tflops("fp32") == 156 / 3 and a100.peak_tflops("bf16") == 312
    fb_flops = roofline.flops_and_bytes("feed_forward", "fwd+bwd", SHAPE)[0]
    floor, bound = roofline.floor_ms("feed_forward", "fwd+bwd", SHAPE, "fp32", h100)
    assert bound == "compute" and floor == pytest.approx(1e3 * fb_flops / (495e12 / 3))
    floor, bound = roofline.floor_ms("s4d_scan", "fwd+bwd", SHAPE, "tf32", h100)
    assert bound == "HBM" and floor == pytest.approx(1e3 * roofline.flops_and_bytes("s4d_scan", "fwd+bwd", SHAPE)[1] / 3.35e12)
    bf16, _ = roofline.floor_ms("s4d_scan", "fwd+bwd", SHAPE, "bf16", h100)
    assert bf16 == pytest.approx(floor / 2)  # 2-byte activations
    with pytest.raises(ValueError, match="precision must be one of"):
        roofline.floor_ms("s4d_scan", "fwd", SHAPE, "fp16", h100)
    with pytest.raises(ValueError, match="precision must be one of"):
        h100.peak_tflops("fp8")


def test_roofline_parameter_count_is_the_models():
    from amg_fast.models import get_model

    shape = {"B": 1, "T": 1, "S": 32, "H": 16, "N": 32, "K": 16}
    model = get_model("amgfno", width=16, modes=16, omega=0.1)
    assert load_roofline().amgfno_parameters(shape) == sum(p.numel() for p in model.parameters())


def test_cuda_graph_replays_get_their_own_table(tmp_path):
    """Entries with graph_ms add a second table of replay times; without them there is none."""
    benches = [entry(p, do_bench_ms=ms) for p, ms in (("reference", 1.0), ("compiled", 1.2), ("triton", 0.8))]
    for bench, graph_ms in zip(benches, (0.4, 0.3, 0.1)):
        bench["extra_info"]["graph_ms"] = graph_ms
    out = run_table(tmp_path, results("NVIDIA H200", benches)).stdout
    assert "captured in a CUDA graph and replayed" in out
    rows = [line for line in out.splitlines() if line.startswith("| spectral_conv1d | fwd |")]
    assert [r.split("|")[4:7] for r in rows] == [[" 1,000 ", " 1,200 ", " 800.0 "], [" 400.0 ", " 300.0 ", " 100.0 "]]
    assert rows[1].split("|")[7].strip() == "4.00x"
    for bench in benches:
        del bench["extra_info"]["graph_ms"]
    assert "CUDA graph" not in run_table(tmp_path, results("NVIDIA H200", benches)).stdout


def step_entry(provider, S, do_bench_ms, *, precision=None, graph_ms=None, kernels=None):
    """A fabricated amgfno_train_step entry at B32-T25-S{S}-H128 (fp32 when precision is None)."""
    bench = entry(provider, op="amgfno_train_step", mode="step", do_bench_ms=do_bench_ms)
    info = bench["extra_info"]
    info.update(shape_id=f"B32-T25-S{S}-H128", shape={**SHAPE, "S": S, "K": S // 2})
    extra = {"precision": precision, "graph_ms": graph_ms, "kernels": kernels,
             "kernel_count_kind": "cuda_kernels" if kernels is not None else None}
    info.update({k: v for k, v in extra.items() if v is not None})
    return bench


def train_step_results():
    """At S = 32 and 128: reference, compiled (S = 128 only) and triton in fp32, reference and
    triton in bf16, with graph replays and kernel counts (none for the compiled provider)."""
    benches = []
    for S, scale in ((32, 1.0), (128, 2.0)):
        benches += [step_entry("reference", S, 10 * scale, graph_ms=5 * scale, kernels=1000 + S),
                    step_entry("triton", S, 8 * scale, graph_ms=2 * scale, kernels=400 + S),
                    step_entry("reference", S, 9 * scale, precision="bf16", kernels=1200 + S),
                    step_entry("triton", S, 5 * scale, precision="bf16", graph_ms=1 * scale, kernels=500 + S)]
    benches.append(step_entry("compiled", 128, 16.0))
    return results("NVIDIA H200", benches)


def test_train_step_table_gives_kernels_and_speedups_over_eager(tmp_path):
    proc = run_table(tmp_path, train_step_results())
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "Training step" in out and "kernels of one eager step: CUDA kernels" in out
    # shape | provider | precision | kernels | eager ms | speed-up | graph ms | graph speed-up
    assert row_of(out, "| B32-T25-S32-H128 | reference | fp32 |")[3:] == ["1032", "10.0", "1.00x", "5.0", "2.00x"]
    assert row_of(out, "| B32-T25-S32-H128 | triton | fp32 |")[3:] == ["432", "8.0", "1.25x", "2.0", "5.00x"]
    assert row_of(out, "| B32-T25-S32-H128 | triton | bf16 |")[3:] == ["532", "5.0", "2.00x", "1.0", "10.00x"]
    assert row_of(out, "| B32-T25-S32-H128 | reference | bf16 |")[3:] == ["1232", "9.0", "1.11x", "-", "-"]
    assert row_of(out, "| B32-T25-S128-H128 | compiled | fp32 |")[3:] == ["-", "16.0", "1.25x", "-", "-"]
    # bf16 gets rows of its own in the op table and in the CUDA-graph replay table
    ops = [line for line in out.splitlines() if line.startswith("| amgfno_train_step | step (bf16) | B32-T25-S32-")]
    assert [r.split("|")[4:7] for r in ops] == [[" 9,000 ", " - ", " 5,000 "], [" - ", " - ", " 1,000 "]]
    fp32 = [line for line in out.splitlines() if line.startswith("| amgfno_train_step | step | B32-T25-S32-")]
    assert [r.split("|")[4:7] for r in fp32] == [[" 10,000 ", " - ", " 8,000 "], [" 5,000 ", " - ", " 2,000 "]]


def test_summary_json(tmp_path):
    path = tmp_path / "out" / "summary.json"
    proc = run_table(tmp_path, train_step_results(), "--summary", str(path))
    assert proc.returncode == 0, proc.stderr
    assert "| amgfno_train_step |" in proc.stdout  # the markdown still goes to stdout
    summary = json.loads(path.read_text())
    assert summary["gpu"] == "NVIDIA H200" and summary["torch"] == "2.11.0" and summary["triton"] == "3.6.0"
    assert summary["date"] == "2026-01-01T00:00:00+00:00"
    assert summary["train_step_ms"] == {
        "eager": {"32": 10.0, "128": 20.0}, "compiled": {"128": 16.0}, "triton": {"32": 8.0, "128": 16.0},
        "graph": {"32": 2.0, "128": 4.0}, "graph_eager_ref": {"32": 5.0, "128": 10.0},
        "bf16": {"32": 5.0, "128": 10.0}, "graph_bf16": {"32": 1.0, "128": 2.0}}
    assert summary["kernels_per_step"] == {"reference": 1032, "triton": 432, "reference_bf16": 1232,
                                           "triton_bf16": 532}
    assert summary["kernels_per_step_by_S"]["128"]["triton_bf16"] == 628
    assert [p.name for p in path.parent.iterdir()] == ["summary.json"]  # no temp file left behind


def test_summary_leaves_out_modes_without_data(tmp_path):
    """A CPU run: pytest-benchmark medians, no graph replays, no triton, no kernel counts."""
    data = results(None, [step_entry("reference", 32, None), entry("reference")])
    data["benchmarks"][0]["stats"]["median"] = 0.5
    path = tmp_path / "summary.json"
    assert run_table(tmp_path, data, "--summary", str(path)).returncode == 0
    summary = json.loads(path.read_text())
    assert summary["gpu"] is None and summary["train_step_ms"] == {"eager": {"32": 500.0}}
    assert summary["kernels_per_step"] == {} and summary["kernels_per_step_by_S"] == {}


def test_roofline_encoder_and_decoder_counts():
    """grid_linear (y = [u, x/L] W^T + b, C = 1 -> H) and composed_linear (H -> 128 -> 1 as one Linear):
    forward 2 rows (C + 1) H and 2 rows H C + the weight-side W2 W1; the encoder's backward is dW over the
    C + 1 columns plus du over the C channels only (the grid takes no gradient), the decoder's dx and dW."""
    roofline = load_roofline()
    rows, H, F = 32 * 25 * 128, 128, roofline.DECODER_HIDDEN
    fwd, bwd = (roofline.flops_and_bytes("grid_linear", m, SHAPE) for m in ("fwd", "bwd"))
    assert fwd == (2 * rows * 2 * H, 4 * (rows + rows * H + 3 * H))
    assert bwd == (2 * rows * 2 * H + 2 * rows * H, 4 * (rows * H + 2 * rows + 2 * 3 * H))
    fwd, bwd = (roofline.flops_and_bytes("composed_linear", m, SHAPE) for m in ("fwd", "bwd"))
    weights = F * H + F + F + 1
    assert fwd == (2 * rows * H + 2 * F * H, 4 * (rows * H + rows + weights))
    assert bwd == (2 * fwd[0], 4 * (2 * rows * H + rows + 2 * weights))
