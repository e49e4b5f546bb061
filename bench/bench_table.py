#!/usr/bin/env python
"""Markdown table of a benchmark results JSON (pytest bench/ --benchmark-only --benchmark-json=PATH).

One row per op, mode and shape: the median time of each provider (reference = eager PyTorch,
compiled = the reference under torch.compile, triton = the Triton kernels) in microseconds, the
speed-up of triton over the other two, and the roofline floor max(bytes / HBM bandwidth,
FLOPs / peak) from the FLOPs and bytes each benchmark recorded (bench/_roofline.py), with the
bound that sets it (HBM or compute) and how far above it triton is.

Times are triton.testing.do_bench medians (CUDA runs, L2 flushed) where recorded, else
pytest-benchmark medians. The peak and bandwidth default to the GPU named in the JSON (dense TF32
tensor-core peak; e.g. H100 SXM 3.35 TB/s and 495 TFLOP/s, H200 4.8 TB/s and 495 TFLOP/s); the
note under the title says which figures were used. Entries run in another precision than fp32
(the bf16 training step) get rows of their own, mode "step (bf16)"; their floor is fp32's.

Where the calls were also replayed from a CUDA graph, a second table gives the replay times. The
training step gets a third: per provider and precision its time in ms eager and as a graph
replay, each as a speed-up over the eager fp32 reference, and its kernel count (one eager step,
torch profiler: CUDA kernels, or on a CPU run the aten ops that would launch them).

--summary PATH also writes the training step's figures as JSON: {"gpu", "torch", "triton", "date",
"train_step_ms": {mode: {S: ms}}, "kernels_per_step": {provider: n} (at the smallest S),
"kernels_per_step_by_S": {S: {provider: n}}}, modes eager / compiled / triton (fp32, eager),
graph (triton, CUDA-graph replay), graph_eager_ref (reference, replay), bf16 and graph_bf16
(triton in bf16, eager and replay); a mode with no data is left out. Kernel keys are the
providers, with _bf16 for the bf16 step (triton_bf16).

Example: python bench/bench_table.py results/gpu/20261126-h100/bench-step.json > table.md
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import _roofline  # noqa: E402

PROVIDERS = ("reference", "compiled", "triton")
TRAIN_STEP = "amgfno_train_step"
TRAIN_STEPS = (TRAIN_STEP, _roofline.TRAIN_STEP_2D)  # the training-step table's rows: 1D, then 2D (shape S32x32)
OP_ORDER = ("spectral_conv1d", "s4d_scan", "gate_fusion", *TRAIN_STEPS)
MODE_ORDER = ("fwd", "bwd", "fwd+bwd", "step")
PRECISION_ORDER = ("fp32", "tf32", "bf16")
# summary.json's train_step_ms modes: (provider, precision, times key of the row).
SUMMARY_MODES = {
    "eager": ("reference", "fp32", "times"), "compiled": ("compiled", "fp32", "times"),
    "triton": ("triton", "fp32", "times"), "graph": ("triton", "fp32", "graph_times"),
    "graph_eager_ref": ("reference", "fp32", "graph_times"), "bf16": ("triton", "bf16", "times"),
    "graph_bf16": ("triton", "bf16", "graph_times"),
}
KERNEL_COUNT_KINDS = {"cuda_kernels": "CUDA kernels",
                      "cpu_aten_kernel_ops": "aten ops that would launch a kernel on a GPU (a CPU run)"}
# (substring of the GPU name, label, HBM TB/s, dense TF32 TFLOP/s); first match wins (bench/_roofline.py).
GPU_SPECS = tuple((spec.match, spec.label, spec.hbm_tb_s, spec.tf32_tflops) for spec in _roofline.GPU_SPECS)
DEFAULT_SPEC = GPU_SPECS[4]


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", type=Path, help="results JSON written by pytest-benchmark (--benchmark-json)")
    p.add_argument("--peak-tflops", type=float, help="compute peak in TFLOP/s (default: from the GPU name; "
                                                     "H100 SXM / H200: 495, dense TF32)")
    p.add_argument("--hbm-tbs", type=float, help="HBM bandwidth in TB/s (default: from the GPU name; "
                                                 "H100 SXM 3.35, H200 4.8)")
    p.add_argument("--summary", type=Path, metavar="PATH", help="also write the training step's times and "
                                                                "kernel counts to PATH as JSON (see above)")
    args = p.parse_args(argv)
    for name in ("peak_tflops", "hbm_tbs"):
        value = getattr(args, name)
        if value is not None and not value > 0:
            p.error(f"--{name.replace('_', '-')} must be > 0, got {value}")
    return args


def hardware(gpu: str | None, peak: float | None, bw: float | None) -> tuple[float, float, str]:
    """(peak TFLOP/s, HBM TB/s, a note saying where they came from)."""
    match = next((spec for spec in GPU_SPECS if gpu and spec[0].lower() in gpu.lower()), None)
    label, spec_bw, spec_peak = (match or DEFAULT_SPEC)[1:]
    if match is None:
        source = (f"GPU {gpu!r} not in the table" if gpu else "no GPU in the results (a CPU run: the floors do "
                  "not apply to these times)") + f"; {label} figures used"
    else:
        source = f"{label} figures for GPU {gpu!r}"
    peak_v, bw_v = peak or spec_peak, bw or spec_bw
    given = [f"--{n}" for n, v in (("peak-tflops", peak), ("hbm-tbs", bw)) if v is not None]
    note = (f"Roofline floor = max(bytes / {bw_v:g} TB/s, FLOPs / {peak_v:g} TFLOP/s) "
            f"({'from ' + ', '.join(given) + '; otherwise ' if given else ''}{source}).")
    return peak_v, bw_v, note


def median_us(bench: dict) -> tuple[float | None, str | None]:
    """(median time in us, its source) of one benchmark entry."""
    info = bench.get("extra_info") or {}
    if info.get("do_bench_ms") is not None:
        return 1e3 * float(info["do_bench_ms"]), "do_bench"
    stats = bench.get("stats")
    if stats and stats.get("median") is not None:
        return 1e6 * float(stats["median"]), "pytest-benchmark"
    return None, None


def fmt_time(t: float | None) -> str:
    if t is None:
        return "-"
    return f"{t:,.1f}" if t < 1000 else f"{t:,.0f}"


def ms(us: float | None) -> float | None:
    return None if us is None else 1e-3 * us


def fmt_ratio(num: float | None, den: float | None) -> str:
    return "-" if num is None or den is None or den <= 0 else f"{num / den:.2f}x"


def _order(seq: tuple, value) -> int:
    return seq.index(value) if value in seq else len(seq)


def collect(benchmarks: list[dict]) -> tuple[dict, list[dict], set[str]]:
    """Group op benchmarks by (op, mode, precision, shape id); other entries (e.g. KS generation)
    aside. A row holds per provider its time in us ("times", "graph_times") and kernel count."""
    rows: dict[tuple, dict] = {}
    others, sources = [], set()
    for bench in benchmarks:
        info = bench.get("extra_info") or {}
        time_us, source = median_us(bench)
        if not {"op", "mode", "provider", "shape_id"} <= info.keys():
            others.append({"name": bench.get("fullname") or bench.get("name", "?"), "time_us": time_us})
            continue
        if source:
            sources.add(source)
        precision = info.get("precision", "fp32")
        key = (info["op"], info["mode"], precision, info["shape_id"])
        row = rows.setdefault(key, {"op": info["op"], "mode": info["mode"], "precision": precision,
                                    "shape_id": info["shape_id"], "S": (info.get("shape") or {}).get("S", 0),
                                    "flops": info.get("flops"), "bytes": info.get("bytes"), "times": {},
                                    "graph_times": {}, "kernels": {}, "kernel_kinds": set()})
        row["times"][info["provider"]] = time_us
        if info.get("graph_ms") is not None:
            row["graph_times"][info["provider"]] = 1e3 * float(info["graph_ms"])
        if info.get("kernels") is not None:
            row["kernels"][info["provider"]] = int(info["kernels"])
            row["kernel_kinds"].add(info.get("kernel_count_kind", "?"))
    return rows, others, sources


def mode_label(row: dict) -> str:
    return row["mode"] if row["precision"] == "fp32" else f"{row['mode']} ({row['precision']})"


def sorted_rows(rows: dict) -> list[dict]:
    return sorted(rows.values(), key=lambda r: (_order(OP_ORDER, r["op"]), r["op"], _order(MODE_ORDER, r["mode"]),
                                                r["S"], r["shape_id"], _order(PRECISION_ORDER, r["precision"])))


def floor_us(row: dict, peak_tflops: float, hbm_tbs: float) -> tuple[float | None, str]:
    if row["flops"] is None or row["bytes"] is None:
        return None, ""
    memory, compute = row["bytes"] / (hbm_tbs * 1e12), row["flops"] / (peak_tflops * 1e12)
    return 1e6 * max(memory, compute), "HBM" if memory >= compute else "compute"


def _table(rows: list[dict], times_key: str, peak_v: float, bw_v: float) -> list[str]:
    """Markdown rows: per-provider times from row[times_key], speed-ups and the roofline floor."""
    lines = ["| op | mode | shape | reference (us) | compiled (us) | triton (us) | triton vs reference "
             "| triton vs compiled | floor (us) | triton / floor |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        ref, comp, tri = (row[times_key].get(p) for p in PROVIDERS)
        floor, bound = floor_us(row, peak_v, bw_v)
        lines.append(f"| {row['op']} | {mode_label(row)} | {row['shape_id']} | {fmt_time(ref)} | {fmt_time(comp)} "
                     f"| {fmt_time(tri)} | {fmt_ratio(ref, tri)} | {fmt_ratio(comp, tri)} "
                     f"| {fmt_time(floor)}{' (' + bound + ')' if bound else ''} | {fmt_ratio(tri, floor)} |")
    return lines


def _train_step_table(rows: dict) -> list[str]:
    """One line per training-step shape, provider and precision: eager and graph-replay times in
    ms, speed-ups over the eager fp32 reference and the kernel count."""
    steps = [r for r in sorted_rows(rows) if r["op"] in TRAIN_STEPS]
    kinds = sorted(set().union(*(r["kernel_kinds"] for r in steps)))
    counted = ", ".join(KERNEL_COUNT_KINDS.get(k, k) for k in kinds) or "not counted"
    lines = ["", "Training step (forward + loss + backward + Adam), ms; speed-ups over the eager fp32 reference; "
             f"kernels of one eager step: {counted}.", "",
             "| shape | provider | precision | kernels | eager (ms) | eager speed-up | graph replay (ms) "
             "| graph speed-up |", "|---|---|---|---:|---:|---:|---:|---:|"]
    for row in steps:
        eager_fp32 = rows.get((row["op"], row["mode"], "fp32", row["shape_id"]))
        base = eager_fp32["times"].get("reference") if eager_fp32 else None
        for provider in sorted(row["times"], key=lambda p: _order(PROVIDERS, p)):
            eager, graph = row["times"][provider], row["graph_times"].get(provider)
            kernels = row["kernels"].get(provider, "-")
            lines.append(f"| {row['shape_id']} | {provider} | {row['precision']} | {kernels} "
                         f"| {fmt_time(ms(eager))} | {fmt_ratio(base, eager)} | {fmt_time(ms(graph))} "
                         f"| {fmt_ratio(base, graph)} |")
    return lines


def summary(results: dict) -> dict:
    """The training step's figures for summary.json (see the module docstring)."""
    info = results.get("machine_info") or {}
    versions = info.get("versions") or {}
    steps = [r for r in sorted_rows(collect(results.get("benchmarks") or [])[0]) if r["op"] == TRAIN_STEP]
    step_ms = {}
    for mode, (provider, precision, times) in SUMMARY_MODES.items():
        by_S = {str(r["S"]): ms(r[times][provider]) for r in steps
                if r["precision"] == precision and r[times].get(provider) is not None}
        if by_S:
            step_ms[mode] = by_S
    kernels_by_S: dict[str, dict] = {}
    for r in steps:
        suffix = "" if r["precision"] == "fp32" else f"_{r['precision']}"
        kernels_by_S.setdefault(str(r["S"]), {}).update({p + suffix: n for p, n in r["kernels"].items()})
    kernels_by_S = {S: k for S, k in kernels_by_S.items() if k}
    smallest = min(kernels_by_S, key=int, default=None)
    return {"gpu": info.get("gpu"), "torch": versions.get("torch"), "triton": versions.get("triton"),
            "date": info.get("date") or results.get("datetime"), "train_step_ms": step_ms,
            "kernels_per_step": kernels_by_S.get(smallest, {}), "kernels_per_step_by_S": kernels_by_S}


def write_json_atomic(path: Path, data: dict) -> None:
    """json.dump(data) to path via a temp file in the same directory and os.replace."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=2)
            f.write("\n")
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)


def render(results: dict, peak: float | None = None, bw: float | None = None) -> str:
    info = results.get("machine_info") or {}
    versions = info.get("versions") or {}
    peak_v, bw_v, note = hardware(info.get("gpu"), peak, bw)
    rows, others, sources = collect(results.get("benchmarks") or [])
    commit = info.get("commit") or (results.get("commit_info") or {}).get("id") or "unknown"
    dirty = " (uncommitted changes)" if info.get("commit_dirty") else ""
    lines = [f"## Benchmarks on {info.get('gpu') or 'CPU (no GPU)'}", "",
             f"torch {versions.get('torch', '?')}, triton {versions.get('triton', '?')}, "
             f"CUDA {versions.get('cuda') or '-'}; {info.get('date') or results.get('datetime', '?')}; "
             f"commit {commit[:12]}{dirty}.",
             "Times: median in us, "
             + (" and ".join(f"{s} medians" for s in sorted(sources)) if sources else "none recorded")
             + ("" if sources <= {"do_bench"} else " (do_bench medians appear only for CUDA runs)") + ".",
             note, ""]
    if rows:
        ordered = sorted_rows(rows)
        lines += _table(ordered, "times", peak_v, bw_v)
        if any(row["graph_times"] for row in ordered):
            lines += ["", "The same calls captured in a CUDA graph and replayed (do_bench medians, us): the GPU "
                      "time without the per-launch host cost.", ""]
            lines += _table([r for r in ordered if r["graph_times"]], "graph_times", peak_v, bw_v)
        if any(row["op"] == TRAIN_STEP for row in ordered):
            lines += _train_step_table(rows)
    else:
        lines.append("No op benchmarks with timings in this file (was it run with --benchmark-disable?).")
    if others:
        lines += ["", "| other benchmark | median (us) |", "|---|---:|"]
        lines += [f"| {o['name']} | {fmt_time(o['time_us'])} |" for o in others]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        results = json.loads(args.results.read_text())
    except (OSError, json.JSONDecodeError) as err:
        print(f"error: cannot read results JSON {args.results}: {err}", file=sys.stderr)
        return 2
    if not isinstance(results, dict) or not isinstance(results.get("benchmarks"), list):
        print(f"error: {args.results} is not a pytest-benchmark JSON (no 'benchmarks' list)", file=sys.stderr)
        return 2
    sys.stdout.write(render(results, args.peak_tflops, args.hbm_tbs))
    if args.summary is not None:
        try:
            write_json_atomic(args.summary, summary(results))
        except OSError as err:
            print(f"error: cannot write --summary {args.summary}: {err}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
