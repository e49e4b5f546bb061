#!/usr/bin/env python
"""Time every precision mode of the AMGFNO training step and its ops on a GPU, within a time budget,
and write DIR/summary.json and DIR/summary.md (issue 19's summary; the schema: docs/benchmarks.md).

Usage:
  python bench/gpu_summary.py --out DIR [--budget-s 240] [--sizes 32,64,128] [--modes fp32,tf32,bf16]
      [--variant NAME:ENV=VAL[,ENV=VAL...]]... [--parts triton,eager,ops,kernels,profile,compiled,variants]
      [--profile-variants NAME[,NAME...]] [--op-size 128] [--dry-run] [--resume]

At B = 32, T = 25, H = 128, K = S/2, N = 32 (bench/_step.py's step, bench/_ops.py's ops), in each
precision mode of amg_fast.train.precision (fp32: matmul precision "highest"; tf32: "high"; bf16:
autocast with fp32 master weights), these parts, the most needed first (the paper's fp32: its steps, ops,
kernels and profile; then the other modes' steps, ops, kernels and profiles; variants; compiled; compiled
at the other sizes):
  triton    the Triton step replayed from a CUDA graph (train_step_ms[mode]["triton_graph"]; the same
            step run eagerly goes to train_step_other_ms[mode]["triton_eager"]), every mode and S;
  eager     the eager reference step (train_step_ms[mode]["eager"]; replayed from a CUDA graph:
            train_step_other_ms[mode]["reference_graph"]), interleaved with the triton part;
  ops       spectral conv, feed-forward, S4D, gate, fwd + bwd, Triton and reference, each replayed from
            a CUDA graph at S = --op-size, beside its floor (bench/_roofline.py); op_ms holds fp32's;
  kernels   CUDA kernels of one eager step, reference and Triton (bench/_kernel_count.py), per mode;
  profile   where the GPU time of the Triton step goes: torch.profiler over 3 eager steps (after 2 warm-up
            steps) at S = --op-size, kernel time per step by phase (forward, backward, optimizer), op
            and kernel (bench/_profile_step.py; profile[mode]), per mode, after its kernels part;
  variants  per --variant, the Triton step again (graph replay, checked) with the variant's environment
            variables set, e.g. ffn_gemm:AMG_FAST_FFN_METHOD=gemm, at the target sizes (S = 32 and 128)
            among --sizes (all of them when none is), which the defaults are chosen at: in this process
            when it sets kernel switches only (kernels.limits.KERNEL_SWITCHES, read again by
            reread_switches: no second interpreter, torch import and CUDA context, ~11 s a variant on the
            H200), else in a subprocess of this script (a variable read at the start of a process);
            --profile-variants NAME,...: those (in-process) variants' profiles too, per mode at --op-size
            with their switches set (variants[NAME]["profile"][mode]), after the variants (with both the
            profile and variants parts): where a variant's step time goes beside the default's;
  compiled  the reference's forward + loss under torch.compile, the step replayed from a CUDA graph
            (train_step_ms[mode]["compiled_graph"]): S = 32 and 128 first (the targets need them),
            and last the other sizes.
--warm-up: compile only: each Triton step the parts above would time (every mode at --sizes, and at
--op-size for ops / profile), then each in-process variant's at its sizes, run once eagerly, untimed and
unchecked, so that Triton's disk cache holds their kernels (scripts/gpu_campaign.sh runs it beside the
CUDA tests; the bench's first cell compiled for 45 s on the H200, 2026-11-27); the summary records the
seconds each took (budget.parts) and nothing else.

Each part's first call is checked against the float64 reference (summary "checks"; a miss is an error).
A part that would overrun --budget-s (its estimate: the last part of its kind, else an H100 figure)
is skipped and listed in "skipped"; a part that fails is listed in "errors" and the rest still runs.
Both files are rewritten atomically after every part, so a killed run keeps what finished. A part
that leaves the CUDA context broken (a kernel faulted: every later CUDA call of the process would
fail, as the H200's bf16 step did on 2026-11-27) is recorded with that error, and the script restarts
itself with --resume: the remaining parts run in a fresh process, within the same budget.

--dry-run: on the CPU (GPUs hidden), tiny shapes (B = 2, T = 4, H = 16), no CUDA graphs (the graph
providers run eagerly), torch.compile with backend "eager" (tracing only); the Triton provider runs
only under TRITON_INTERPRET=1 (Triton's interpreter; never in bf16), else its cells stay null. It
exercises the same code and writes a schema-valid summary; its times mean nothing (the profile part
records the CPU self time of the ops that would launch kernels, over 2 steps after 1 warm-up).

Exit status: 0 when every part that ran succeeded, 1 when a part failed or a check missed, 2 for bad
arguments, 3 without a GPU (and no --dry-run), 130 when interrupted (SIGINT / SIGTERM).
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import itertools
import json
import math
import os
import re
import shlex
import signal
import subprocess
import sys
import time
import traceback
from unittest import mock
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

if __name__ == "__main__" and "--dry-run" in sys.argv[1:]:
    os.environ["CUDA_VISIBLE_DEVICES"] = ""  # a dry run is a CPU run even on a GPU machine (before torch)

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import torch  # noqa: E402

import _providers as P  # noqa: E402
from _kernel_count import count_kernels  # noqa: E402
from _ops import OP_CASES  # noqa: E402
from _profile_step import STEPS as PROFILE_STEPS, profile_step  # noqa: E402
from _roofline import PRECISIONS, TRAIN_STEP, floor_ms, gpu_spec  # noqa: E402
from _step import build_step, reference_step64, step_result  # noqa: E402
from amg_fast._files import atomic_write_text  # noqa: E402
from amg_fast.kernels.limits import KERNEL_SWITCHES, reread_switches  # noqa: E402
from amg_fast.ops._backend import triton_unavailable_reason  # noqa: E402
from amg_fast.train.graphs import EagerTrainStep, GraphedTrainStep  # noqa: E402
from amg_fast.train.precision import precision_scope  # noqa: E402

STEP_PROVIDERS = ("eager", "compiled_graph", "triton_graph")
OTHER_STEP_PROVIDERS = ("triton_eager", "reference_graph")
STANDARD_SIZES = (32, 64, 128)
TARGET_SIZES = (32, 128)
OPS = {"spectral_conv": "spectral_conv1d", "feed_forward": "feed_forward", "s4d": "s4d_scan", "gate": "gate_fusion"}
OP_PROVIDERS = ("triton", "reference")
OP_PRECISION = "fp32"  # the mode of op_ms and kernels_per_step: the paper preset's (--precision fp32)
PARTS = ("triton", "eager", "ops", "kernels", "profile", "compiled", "variants")
DEFAULT_BUDGET_S = 240.0
# Seconds a part is expected to take on an H100 until one of its kind has run (then: the last one's).
# From the 2026-11-26 H100 session (its bench log, in git history at ed6e4ea;
# results/gpu/20261126-h100/followup/): a step case ~2 s warm; Triton's JIT
# ~10-20 s per precision mode on a cold cache; compiling the step 15-25 s per mode and size.
PRIOR_S = {"triton/first": 25.0, "triton": 4.0, "eager": 4.0, "ops": 5.0, "kernels": 6.0, "profile": 10.0,
           "compiled": 35.0, "variant": 15.0, "variant/subprocess": 30.0, "warm": 20.0}  # profile: an estimate (5 eager steps, the profiler's parse);
# variant: in this process, 6 cells at ~1-2 s and the kernels its switches change compiled (in a subprocess
# 28 s on the H200, 2026-11-27: 11 s of them the process's start)
# Issue 19 item 5.
STEP_TARGETS_MS = (("tf32", 128, 7.0), ("fp32", 128, 9.0), ("bf16", 128, 5.0), ("tf32", 32, 2.0))
SPEEDUP_OVER_COMPILED = 1.5
OP_FLOOR_FACTOR = 3.0
PROFILE_TABLE_ROWS = 15  # by_op rows per mode in summary.md (summary.json holds them all)
NEXT_BY_OP = {
    "spectral_conv": "python bench/probe_spectral_stages.py (each stage: analysis, mixing, synthesis, ours and "
                     "cuBLAS), --variant spectral_cublas:AMG_FAST_SPECTRAL_DFT_GEMM=torch,AMG_FAST_SPECTRAL_MIX=torch "
                     "and python bench/kernel_sweep.py --only configs (the three kernels' tiles)",
    "feed_forward": "python bench/probe_ffn.py (reference, cuBLASLt epilogue, Triton row GEMMs), "
                    "--variant ffn_gemm:AMG_FAST_FFN_METHOD=gemm (row GEMMs; fp32 mode 3xTF32 on split weights) "
                    "and python bench/kernel_sweep.py --only ffn (their tiles)",
    "s4d": "pytest bench/test_bench_s4d_scan.py --benchmark-only (fwd and bwd apart) and "
           "python bench/kernel_sweep.py --only s4d",
    "gate": "pytest bench/test_bench_gate_fusion.py --benchmark-only (fwd and bwd apart) and "
            "python bench/kernel_sweep.py --only gate (the four kernels' tiles, 1 or 2 stages)",
}
VARIANT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


# -- arguments -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Variant:
    name: str
    env: dict


def parse_variant(text: str) -> Variant:
    """NAME:ENV=VAL[,ENV=VAL...] -> Variant (argparse type)."""
    name, sep, assignments = text.partition(":")
    if not sep or not VARIANT_NAME.fullmatch(name):
        raise argparse.ArgumentTypeError(f"--variant {text!r}: expected NAME:ENV=VAL[,ENV=VAL...] with NAME of "
                                         "letters, digits, '_', '.', '-'")
    env = {}
    for item in assignments.split(","):
        key, eq, value = item.partition("=")
        if not eq or not ENV_NAME.fullmatch(key):
            raise argparse.ArgumentTypeError(f"--variant {text!r}: {item!r} is not ENV=VAL (ENV a variable name)")
        env[key] = value
    return Variant(name, env)


def _csv(flag: str, allowed: tuple | None = None, cast=str) -> Callable[[str], tuple]:
    def parse(text: str) -> tuple:
        values = []
        for item in (v.strip() for v in text.split(",")):
            try:
                value = cast(item)
            except ValueError:
                value = None
            if value is None or (allowed is not None and value not in allowed):
                what = f"one of {', '.join(map(str, allowed))}" if allowed else "even integers >= 2"
                raise argparse.ArgumentTypeError(f"{flag} {text!r}: {item!r} is not allowed; give {what}, "
                                                 "comma-separated")
            if value not in values:
                values.append(value)
        return tuple(values)
    return parse


def _even_size(text: str) -> int | None:
    value = int(text)
    return value if value >= 2 and value % 2 == 0 else None


def _budget(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"--budget-s {text!r}: give seconds >= 0")
    return value


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, required=True, help="results folder (created); summary.json and "
                                                           "summary.md are written there, variants in variants/")
    p.add_argument("--budget-s", type=_budget, default=DEFAULT_BUDGET_S,
                   help=f"wall-clock seconds from the start; parts that would overrun are skipped "
                        f"(default {DEFAULT_BUDGET_S:g})")
    p.add_argument("--sizes", type=_csv("--sizes", cast=_even_size), default=STANDARD_SIZES,
                   help="S values of the training step, comma-separated (default 32,64,128)")
    p.add_argument("--modes", type=_csv("--modes", PRECISIONS), default=PRECISIONS,
                   help="precision modes, comma-separated, in this order (default fp32,tf32,bf16)")
    p.add_argument("--variant", type=parse_variant, action="append", default=[], metavar="NAME:ENV=VAL[,ENV=VAL...]",
                   help="also time the Triton step with these environment variables set (repeatable), e.g. "
                        "ffn_gemm:AMG_FAST_FFN_METHOD=gemm: in this process when they are all kernel switches, "
                        "else in a subprocess")
    p.add_argument("--profile-variants", type=_csv("--profile-variants"), default=(), metavar="NAME[,NAME...]",
                   help="also profile these --variant names (switch variants, run in this process) in each mode, "
                        "as the profile part profiles the default step")
    p.add_argument("--parts", type=_csv("--parts", PARTS), default=PARTS,
                   help=f"which parts run, comma-separated (default all: {','.join(PARTS)})")
    p.add_argument("--op-size", type=_csv("--op-size", cast=_even_size), default=(128,),
                   help="S of the per-op table (default 128)")
    p.add_argument("--warm-up", action="store_true",
                   help="compile only: run each Triton step the parts would time once, untimed (Triton's disk "
                        "cache then holds their kernels)")
    p.add_argument("--dry-run", action="store_true",
                   help="CPU, tiny shapes, no CUDA graphs: checks the script and the schema, not the GPU")
    p.add_argument("--resume", action="store_true",
                   help="continue the summary.json in --out: the parts it records are not run again and the "
                        "budget counts on from its elapsed time (the script restarts itself so after a CUDA "
                        "fault, which breaks a process's CUDA context for good)")
    args = p.parse_args(argv)
    if len(args.op_size) != 1:
        p.error(f"--op-size takes one S, got {','.join(map(str, args.op_size))}")
    args.op_size = args.op_size[0]
    names = [v.name for v in args.variant]
    if len(set(names)) != len(names):
        p.error(f"--variant names must differ, got {', '.join(names)}")
    in_this_process = [v.name for v in args.variant if in_process(v)]
    for name in args.profile_variants:
        if name not in in_this_process:
            p.error(f"--profile-variants: {name!r} is not a --variant of kernel switches (those run in this "
                    f"process: {', '.join(in_this_process) or 'none'})")
    return args


# -- the summary -------------------------------------------------------------------------------------
def variant_sizes(sizes) -> list[int]:
    """The sizes a variant's step is timed at: the target sizes among sizes (a variant chooses a default,
    judged where the targets are; a third less GPU time than S = 32, 64, 128), else all of sizes."""
    return [S for S in sizes if S in TARGET_SIZES] or list(sizes)


def _sizes(sizes) -> list[str]:
    return [str(S) for S in sorted(set(STANDARD_SIZES) | set(sizes))]


def new_summary(args: argparse.Namespace, info: dict, device: torch.device, argv: list[str]) -> dict:
    """Every key of the schema, each cell null until measured (floors: computed from the model)."""
    sizes, op_sizes = _sizes(args.sizes), sorted({"128", str(args.op_size)}, key=int)
    spec, matched = gpu_spec(info["gpu"])
    shape = P.shape_for(args.op_size, tiny=args.dry_run, paper=True)
    op_table = {}
    for mode in PRECISIONS:
        op_table[mode] = {}
        for key, name in OPS.items():
            op_table[mode][key] = {}
            for S in op_sizes:
                floor, bound = floor_ms(name, "fwd+bwd", P.shape_for(int(S), tiny=args.dry_run, paper=True), mode, spec)
                op_table[mode][key][S] = {"triton": None, "reference": None, "floor": floor, "floor_bound": bound}
    versions = info["versions"]
    return {
        "gpu": info["gpu"], "torch": versions["torch"], "triton": versions["triton"], "cuda": versions["cuda"],
        "date": info["date"], "commit": info["commit"], "commit_dirty": info["commit_dirty"],
        "kernel_switches": info["kernel_switches"], "device": str(device), "dry_run": args.dry_run,
        "warm_up": args.warm_up,
        "command": shlex.join(argv),
        "budget": {"budget_s": args.budget_s, "elapsed_s": 0.0, "parts": []},
        "shape": {"B": shape.B, "T": shape.T, "H": shape.H, "N": shape.N, "K": "S/2", "op_S": args.op_size},
        "gpu_spec": {**spec.as_dict(), "matched": matched,
                     "note": "floors use these vendor figures" + ("" if matched else
                                                                 f" (GPU {info['gpu']!r} not in the table)")},
        "train_step_ms": {m: {p: {S: None for S in sizes} for p in STEP_PROVIDERS} for m in PRECISIONS},
        "train_step_other_ms": {m: {p: {S: None for S in sizes} for p in OTHER_STEP_PROVIDERS} for m in PRECISIONS},
        "train_step_floor_ms": {m: {S: floor_ms(TRAIN_STEP, "step", P.shape_for(int(S), tiny=args.dry_run, paper=True), m, spec)[0]
                                    for S in sizes} for m in PRECISIONS},
        "op_precision": OP_PRECISION,
        "op_ms": op_table[OP_PRECISION],
        "op_ms_by_precision": op_table,
        "kernels_per_step": {"reference": None, "triton": None},
        "kernels_per_step_by_precision": {m: {"reference": None, "triton": None} for m in PRECISIONS},
        "kernel_count_kind": None,
        "profile": {m: None for m in PRECISIONS},
        "variants": {v.name: {"env": v.env, "train_step_ms": {m: {S: None for S in sizes} for m in PRECISIONS},
                              "out": None if in_process(v) else f"variants/{v.name}", "exit_code": None,
                              "errors": [], "skipped": [], "checks": [],
                              **({"profile": {m: None for m in PRECISIONS}} if v.name in args.profile_variants else {})}
                     for v in args.variant},
        "targets": [],
        "checks": [],
        "errors": [],
        "skipped": [],
    }


def _target(name: str, kind: str, measured, target: float, comparison: str, unit: str, check_failed: bool,
            next_hint: str | None, **where) -> dict:
    entry = {"name": name, "kind": kind, **where, "measured": measured, "target": target, "comparison": comparison,
             "unit": unit, "met": None, "missed_by": None, "next": None}
    if measured is None:
        entry["note"] = "not measured"
        return entry
    within = measured <= target if comparison == "<=" else measured >= target
    entry["met"] = bool(within and not check_failed)
    if not within:
        entry["missed_by"] = measured / target if comparison == "<=" else (target / measured if measured > 0 else None)
    if check_failed:
        entry["note"] = "the timed result is off the float64 reference (see checks)"
    if not entry["met"]:
        entry["next"] = next_hint
    return entry


def _worst_op(summary: dict, mode: str) -> str:
    """The next measurement for a missed step target: the op furthest above its floor in mode."""
    ratios = {op: cells["triton"] / cells["floor"] for op, by_S in summary["op_ms_by_precision"][mode].items()
              for cells in by_S.values() if cells["triton"] is not None and cells["floor"]}
    if not ratios:
        return f"the per-op table in {mode} (--parts ops --modes {mode}) to see which op holds the step back"
    op = max(ratios, key=ratios.get)
    return f"{op} is {ratios[op]:.1f}x its floor in {mode}: {NEXT_BY_OP[op]}"


def targets(summary: dict) -> list[dict]:
    """Issue 19 item 5's targets against what summary holds: measured, met, missed_by (a factor > 1)."""
    failed = {c["what"] for c in summary["checks"] if not c["ok"]}
    step = summary["train_step_ms"]
    out = []
    for mode, S, limit in STEP_TARGETS_MS:
        out.append(_target(f"Triton step at S = {S}, {mode}", "step_ms", step[mode]["triton_graph"].get(str(S)),
                           limit, "<=", "ms", f"train_step {mode} triton_graph S={S}" in failed,
                           _worst_op(summary, mode), precision=mode, S=S))
    for mode in PRECISIONS:
        for S in TARGET_SIZES:
            tri, comp = step[mode]["triton_graph"].get(str(S)), step[mode]["compiled_graph"].get(str(S))
            out.append(_target(f"Triton step over graphed torch.compile at S = {S}, {mode}", "speedup_vs_compiled",
                               comp / tri if tri and comp is not None else None, SPEEDUP_OVER_COMPILED, ">=", "x",
                               f"train_step {mode} triton_graph S={S}" in failed or
                               f"train_step {mode} compiled_graph S={S}" in failed,
                               _worst_op(summary, mode), precision=mode, S=S))
    for mode in PRECISIONS:
        for op, by_S in summary["op_ms_by_precision"][mode].items():
            for S, cells in by_S.items():
                ratio = cells["triton"] / cells["floor"] if cells["triton"] is not None and cells["floor"] else None
                out.append(_target(f"{op} fwd+bwd within {OP_FLOOR_FACTOR:g}x its floor at S = {S}, {mode}",
                                   "op_vs_floor", ratio, OP_FLOOR_FACTOR, "<=", "x floor",
                                   f"op {mode} {op} triton S={S}" in failed, NEXT_BY_OP[op],
                                   precision=mode, S=int(S), op=op))
    return out


def _finite(value):
    """JSON has no NaN / Infinity: non-finite floats become null."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def _ms(value) -> str:
    if value is None:
        return "-"
    return f"{value:.3g}" if value < 100 else f"{value:,.0f}"


def _ratio(num, den) -> str:
    return "-" if num is None or not den else f"{num / den:.2f}x"


def render_markdown(summary: dict) -> str:
    """summary.md: the per-mode step table, the per-op table beside floors, kernels, variants, targets."""
    spec = summary["gpu_spec"]
    peaks = ", ".join(f"{m} {v:g}" for m, v in spec["peak_tflops"].items())
    lines = [f"# GPU summary{' of a warm-up (compile only: nothing timed)' if summary.get('warm_up') else ''}: "
             f"{summary['gpu'] or 'CPU (dry run: the times mean nothing)'}", "",
             f"torch {summary['torch']}, triton {summary['triton']}, CUDA {summary['cuda'] or '-'}; {summary['date']}; "
             f"commit {(summary['commit'] or 'unknown')[:12]}{' (uncommitted changes)' if summary['commit_dirty'] else ''}.",
             f"Command: `{summary['command']}`; budget {summary['budget']['budget_s']:g} s, "
             f"used {summary['budget']['elapsed_s']:.0f} s.",
             f"Shapes: B = {summary['shape']['B']}, T = {summary['shape']['T']}, H = {summary['shape']['H']}, "
             f"K = S/2, N = {summary['shape']['N']}. Floors = max(HBM bytes / {spec['hbm_tb_s']:g} TB/s, FLOPs / peak) "
             f"with the {spec['label']} peaks in TFLOP/s ({peaks}; bench/_roofline.py)"
             + ("" if spec["matched"] else ", this GPU not being in the table") + ".", "",
             "## Training step (ms; graph = replayed from a CUDA graph; do_bench medians"
             + ("; a dry run: CPU wall-clock medians, no graphs)" if summary["dry_run"] else ")"), "",
             "| mode | S | eager | compiled graph | triton graph | triton vs compiled | triton eager "
             "| reference graph | floor | triton / floor |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for mode in PRECISIONS:
        step, other = summary["train_step_ms"][mode], summary["train_step_other_ms"][mode]
        for S in step["eager"]:
            tri, comp, floor = step["triton_graph"][S], step["compiled_graph"][S], summary["train_step_floor_ms"][mode][S]
            lines.append(f"| {mode} | {S} | {_ms(step['eager'][S])} | {_ms(comp)} | {_ms(tri)} | {_ratio(comp, tri)} "
                         f"| {_ms(other['triton_eager'][S])} | {_ms(other['reference_graph'][S])} | {_ms(floor)} "
                         f"| {_ratio(tri, floor)} |")
    lines += ["", f"## Per op, fwd + bwd, replayed from a CUDA graph (ms; S = {summary['shape']['op_S']}"
              + ("; a dry run: eager CPU calls)" if summary["dry_run"] else ")"), "",
              "| mode | op | reference | triton | triton vs reference | floor | triton / floor |",
              "|---|---|---:|---:|---:|---:|---:|"]
    for mode in PRECISIONS:
        for op, by_S in summary["op_ms_by_precision"][mode].items():
            for S, c in by_S.items():
                if S != str(summary["shape"]["op_S"]):
                    continue
                lines.append(f"| {mode} | {op} | {_ms(c['reference'])} | {_ms(c['triton'])} "
                             f"| {_ratio(c['reference'], c['triton'])} | {_ms(c['floor'])} ({c['floor_bound']}) "
                             f"| {_ratio(c['triton'], c['floor'])} |")
    lines += ["", f"## Kernels per step ({summary['kernel_count_kind'] or 'not counted'})", "",
              "| mode | reference | triton |", "|---|---:|---:|"]
    for mode, counts in summary["kernels_per_step_by_precision"].items():
        lines.append(f"| {mode} | {counts['reference'] if counts['reference'] is not None else '-'} "
                     f"| {counts['triton'] if counts['triton'] is not None else '-'} |")
    lines += _profile_markdown(summary["profile"])
    for name, entry in summary["variants"].items():
        lines += _profile_markdown(entry.get("profile") or {}, variant=name)
    if summary["variants"]:
        lines += ["", "## Variants: the Triton step, graph replay (ms)", "",
                  "| variant | environment | mode | S | ms | vs default triton graph |", "|---|---|---|---:|---:|---:|"]
        for name, v in summary["variants"].items():
            env = " ".join(f"{k}={val}" for k, val in v["env"].items())
            for mode, by_S in v["train_step_ms"].items():
                for S, value in by_S.items():
                    base = summary["train_step_ms"][mode]["triton_graph"][S]
                    lines.append(f"| {name} | `{env}` | {mode} | {S} | {_ms(value)} | {_ratio(base, value)} |")
    lines += ["", "## Targets (issue 19 item 5)", "", "| target | measured | target | met | missed by | next |",
              "|---|---:|---:|---|---:|---|"]
    for t in summary["targets"]:
        met = "-" if t["met"] is None else ("yes" if t["met"] else "**no**")
        missed = f"{t['missed_by']:.2f}x" if t["missed_by"] else "-"
        measured = "-" if t["measured"] is None else f"{t['measured']:.3g} {t['unit']}"
        lines.append(f"| {t['name']} | {measured} | {t['comparison']} {t['target']:g} {t['unit']} | {met} | {missed} "
                     f"| {t['next'] or ''} |")
    failed_checks = [c for c in summary["checks"] if not c["ok"]]
    lines += ["", f"Checks against the float64 reference: {len(summary['checks']) - len(failed_checks)} of "
              f"{len(summary['checks'])} within tolerance."]
    for title, key, field in (("Errors", "errors", "message"), ("Skipped", "skipped", "reason")):
        if summary[key]:
            lines += ["", f"## {title}", ""] + [f"- {e['part']}: {e[field]}" for e in summary[key]]
    return "\n".join(lines) + "\n"


def _profile_markdown(profile: dict, top: int = PROFILE_TABLE_ROWS, variant: str | None = None) -> list[str]:
    """The profile part's table: per mode the time per step by phase, and the top ops with their share (of
    the default step, or of variant's)."""
    done = {mode: p for mode, p in profile.items() if p is not None}
    if not done:
        return []
    kind = next(iter(done.values()))["time_kind"]
    step = "the Triton step's" if variant is None else f"variant {variant}'s step's"
    lines = ["", f"## Where {step} time goes (torch.profiler, eager steps; ms per step"
             + ("; a dry run: CPU self time of the ops that would launch kernels)" if kind == "cpu_self"
                else ": kernel time on the GPU)"), ""]
    for mode, p in done.items():
        phases = ", ".join(f"{phase} {_ms(ms)}" for phase, ms in p["by_phase"].items() if ms)
        lines.append(f"- {mode}, S = {p['S']}: {_ms(p['device_ms_per_step'])} ms per step over {p['steps']} "
                     f"steps ({phases}); {len(p['by_op'])} ops, the top {min(top, len(p['by_op']))} below")
    lines += ["", "| mode | phase | op | ms | % of step | kernels |", "|---|---|---|---:|---:|---:|"]
    for mode, p in done.items():
        for row in p["by_op"][:top]:
            share = f"{100 * row['ms'] / p['device_ms_per_step']:.1f}" if p["device_ms_per_step"] else "-"
            lines.append(f"| {mode} | {row['phase']} | `{row['op']}` | {_ms(row['ms'])} | {share} | {row['kernels']} |")
    return lines


# -- the parts ---------------------------------------------------------------------------------------
class Interrupted(BaseException):
    """SIGTERM (e.g. from `timeout`): a BaseException, so that no part's error handling swallows it."""


class PartSkipped(Exception):
    """Raised by a part that cannot run here (e.g. Triton without a GPU): skipped, not an error."""


@dataclass
class Part:
    name: str
    cost_key: str
    run: Callable[[], str | None]  # returns a note for the budget record, or None


class Session:
    """One run of the command: the summary, the clock, and the parts."""

    def __init__(self, args: argparse.Namespace, argv: list[str]):
        self.args, self.dry, self.argv = args, args.dry_run, argv
        self.start = time.monotonic()
        self.device = torch.device("cpu" if self.dry else "cuda")
        self.out = args.out
        command = ["python", str(Path(__file__).resolve().relative_to(HERE.parent)), *argv]
        self.summary = new_summary(args, P.machine_info(), self.device, command)
        self.recorded: set[str] = set()  # parts an earlier process of this run recorded (--resume)
        self.last_s: dict[str, float] = {}
        self.part = "setup"
        if args.resume and (self.out / "summary.json").exists():
            self.resume(json.loads((self.out / "summary.json").read_text()))

    def resume(self, earlier: dict) -> None:
        """Continue an earlier process's summary: its cells, checks and errors stay, the parts it
        recorded are not run again, the clock goes on from its elapsed time; the parts it listed as
        skipped without recording them (interrupted) are planned again."""
        self.summary = earlier
        self.recorded = {p["part"] for p in earlier["budget"]["parts"]}
        earlier["skipped"] = [s for s in earlier["skipped"] if s["part"] in self.recorded]
        self.start -= earlier["budget"]["elapsed_s"]
        earlier["budget"]["processes"] = earlier["budget"].get("processes", 1) + 1

    def restart(self) -> None:
        """Run the remaining parts in a fresh process (os.execv: the same PID, so a timeout's signal still
        reaches it) that resumes this summary: a CUDA fault leaves this process's context unusable."""
        argv = [a for a in self.argv if a != "--resume"] + ["--resume"]
        print(f"[{self.elapsed():6.1f} s] the CUDA context is broken (a fault is sticky): the remaining parts "
              f"run in a fresh process", flush=True)
        sys.stderr.flush()
        os.execv(sys.executable, [sys.executable, str(Path(__file__).resolve()), *argv])

    # bookkeeping
    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def estimate(self, key: str) -> float:
        """The last part of kind key's seconds, else PRIOR_S's; a variant at least PRIOR_S's (one of the cuBLAS
        variants compiles nothing: the next may compile its kernels in every mode, and overrun the budget)."""
        last = self.last_s.get(key, PRIOR_S[key])
        return max(last, PRIOR_S[key]) if key.startswith("variant") else last

    def error(self, message: str, record: dict | None = None) -> None:
        """An error of the current part in record's "errors" (default: the summary's)."""
        (self.summary if record is None else record)["errors"].append({"part": self.part, "message": message})

    def write(self) -> None:
        self.summary["budget"]["elapsed_s"] = round(self.elapsed(), 1)
        self.summary["targets"] = targets(self.summary)
        summary = _finite(self.summary)
        self.out.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.out / "summary.json", json.dumps(summary, indent=1) + "\n")
        atomic_write_text(self.out / "summary.md", render_markdown(summary))

    def check(self, what: str, got, expected, mode: str, record: dict | None = None) -> None:
        """Record the check of got against the float64 result in record's "checks" (default: the summary's);
        a miss is an error there too."""
        record = self.summary if record is None else record
        check = {"what": what, **P.check_close(got, expected, mode)}
        record["checks"].append(check)
        if not check["ok"]:
            self.error(f"{what}: the result is off the float64 reference by {check['rel_err']:.3g} "
                       f"(relative; allowed {check['tol']:g} in {mode})", record)

    def triton_skip_reason(self, mode: str) -> str | None:
        reason = triton_unavailable_reason(self.device)
        if reason is None and self.device.type == "cpu" and mode == "bf16":
            return "Triton's interpreter computes bf16 wrongly: no bf16 Triton run on a CPU"
        return reason

    def shape(self, S: int) -> P.Shape:
        return P.shape_for(S, tiny=self.dry, paper=True)

    # the training step
    def run_step(self, provider: str, mode: str, S: int, variant: dict | None = None) -> str | None:
        """Time provider's step in mode at S into the summary's cells, or (variant: a summary["variants"]
        entry, provider "triton_graph") into the variant's, its check into the variant's checks."""
        if provider == "triton_graph" and (reason := self.triton_skip_reason(mode)):
            raise PartSkipped(reason)
        shape, graphed = self.shape(S), not self.dry
        backend = "triton" if provider == "triton_graph" else "reference"
        compile_backend = ("eager" if self.dry else "inductor") if provider == "compiled_graph" else None
        if variant is None:
            cells, other = self.summary["train_step_ms"][mode][provider], self.summary["train_step_other_ms"][mode]
            check = self.check
        else:  # the graph replay alone: what the variant is judged by
            cells, other, check = variant["train_step_ms"][mode], None, lambda *a: self.check(*a, record=variant)
        with precision_scope(mode):
            if compile_backend:
                torch._dynamo.reset()
            case = build_step(shape, backend, mode, self.device, compile_backend)
            expected = reference_step64(case, shape)
            if compile_backend:  # compile forward and backward outside the capture, parameters unchanged
                case.loss_fn(case.model, case.u, case.w)[0].backward()
                case.optimizer.zero_grad(set_to_none=True)
            first_graphed = graphed and provider != "eager"
            step = (GraphedTrainStep if first_graphed else EagerTrainStep)(case.model, case.optimizer, case.loss_fn)
            loss, _ = step(case.u, case.w)  # a graph: captured, then replayed once from the initial state
            check(f"train_step {mode} {provider} S={S}", step_result(case, loss), expected, mode)
            del expected, loss
            cells[str(S)] = P.time_ms(step.replay if first_graphed else lambda: step(case.u, case.w))
            if provider == "triton_graph" and graphed and other is not None:
                other["triton_eager"][str(S)] = P.time_ms(lambda: step.eager_step(case.u, case.w))
            if provider == "eager" and graphed:
                replayed = GraphedTrainStep(case.model, case.optimizer, case.loss_fn)
                replayed(case.u, case.w)
                other["reference_graph"][str(S)] = P.time_ms(replayed.replay)
        if case.compiled is not None and not case.compiled.fullgraph:
            return f"torch.compile with graph breaks: {case.compiled.break_reason}"
        return None

    # the per-op table
    def run_op(self, mode: str, key: str) -> str | None:
        name, S = OPS[key], self.args.op_size
        shape, case = self.shape(S), OP_CASES[name]
        cell = self.summary["op_ms_by_precision"][mode][key][str(S)]
        notes = []
        for provider in OP_PROVIDERS:
            if provider == "triton" and (reason := self.triton_skip_reason(mode)):
                notes.append(f"triton skipped: {reason}")
                continue
            try:
                with precision_scope(mode):
                    call = P.op_call(case.op, name, case.make_inputs(shape), "fwd+bwd", provider, shape, mode)
                    self.check(f"op {mode} {key} {provider} S={S}", call.fn(), call.expected(), mode)
                    if self.dry:
                        cell[provider] = P.time_ms(call.fn)
                    else:
                        replay = P.graph_replay(call.fn)
                        if replay["graph_ms"] is None:
                            raise RuntimeError(f"graph capture failed: {replay['graph_error']}")
                        cell[provider] = replay["graph_ms"]
            except Exception as err:  # the other provider still runs
                self.error(f"{provider}: {_message(err)}")
            finally:
                _release()
        return "; ".join(notes) or None

    # kernels per step
    def kernels_size(self) -> int:
        return 32 if 32 in self.args.sizes else min(self.args.sizes)

    def run_kernels(self, mode: str) -> str | None:
        S = self.kernels_size()
        counts = self.summary["kernels_per_step_by_precision"][mode]
        notes = []
        for provider in ("reference", "triton"):
            if provider == "triton" and (reason := self.triton_skip_reason(mode)):
                notes.append(f"triton skipped: {reason}")
                continue
            with precision_scope(mode):
                case = build_step(self.shape(S), provider, mode, self.device)
                step = EagerTrainStep(case.model, case.optimizer, case.loss_fn)
                step(case.u, case.w)  # warm-up: JIT, optimizer state
                counted = count_kernels(lambda: step(case.u, case.w), self.device)
            counts[provider] = counted["kernels"]
            self.summary["kernel_count_kind"] = counted["kernel_count_kind"]
        if mode == OP_PRECISION:
            self.summary["kernels_per_step"] = counts
        return "; ".join(notes + [f"S = {S}"])

    # where the Triton step's time goes
    def run_profile(self, mode: str, variant: Variant | None = None) -> str | None:
        if reason := self.triton_skip_reason(mode):
            raise PartSkipped(reason)
        S = self.args.op_size
        warm_up, steps = (1, 2) if self.dry else (2, PROFILE_STEPS)  # the interpreter: ~1 s a step
        entry = self.summary if variant is None else self.summary["variants"][variant.name]
        with precision_scope(mode), (switches_set(variant.env) if variant else contextlib.nullcontext()):
            case = build_step(self.shape(S), "triton", mode, self.device)
            expected = reference_step64(case, self.shape(S))
            step = EagerTrainStep(case.model, case.optimizer, case.loss_fn)
            loss, _ = step(case.u, case.w)  # the first warm-up step (JIT, optimizer state), checked
            self.check(f"profile {mode} triton S={S}", step_result(case, loss), expected, mode,
                       None if variant is None else entry)
            del expected, loss
            for _ in range(warm_up - 1):
                step(case.u, case.w)
            record = profile_step(lambda: step(case.u, case.w), self.device, steps)
        entry["profile"][mode] = {"S": S, **record}
        return f"S = {S}, {steps} eager steps"

    # variants
    def run_variant(self, variant: Variant) -> str | None:
        if not in_process(variant):
            return self.run_variant_subprocess(variant)
        entry = self.summary["variants"][variant.name]
        entry["in_process"] = True
        try:
            self._variant_cells(variant, entry)
        except Exception as err:  # a bad switch value (refused by name when read): the variant did not finish
            entry["errors"].append({"part": f"variant {variant.name}", "message": _message(err)})
            entry["exit_code"] = 1
            raise
        except BaseException:  # interrupted (SIGINT / SIGTERM): unfinished, never adopted; --resume runs it again
            entry["exit_code"] = None
            raise
        entry["exit_code"] = 1 if entry["errors"] else 0
        if entry["errors"]:
            first = entry["errors"][0]
            raise RuntimeError(f"{len(entry['errors'])} errors in the variant's cells, the first: {first['part']}: "
                               f"{first['message']}; what it finished is kept")
        return "in this process"

    def _variant_cells(self, variant: Variant, entry: dict) -> None:
        """The variant's Triton step in each mode at its sizes, its switches set; a cell's error goes to the
        entry, and a broken CUDA context ends the cells (run() then restarts the script)."""
        with switches_set(variant.env):
            for mode, S in self.variant_cells():
                cell = f"triton_graph {mode} S={S}"
                try:
                    self.run_step("triton_graph", mode, S, variant=entry)
                except PartSkipped as why:
                    entry["skipped"].append({"part": cell, "reason": str(why)})
                except Exception as err:
                    entry["errors"].append({"part": cell, "message": _message(err)})
                    traceback.print_exc()
                if not _release():  # every later CUDA call of this process fails: run() restarts it
                    entry["errors"].append({"part": cell, "message": "the CUDA context broke (a CUDA fault)"})
                    break

    def variant_cells(self) -> list[tuple[str, int]]:
        """(mode, S) of each cell a variant is timed (or warmed) in, in order."""
        return list(itertools.product(self.args.modes, variant_sizes(self.args.sizes)))

    def run_variant_subprocess(self, variant: Variant) -> str | None:
        """The variant in a subprocess of this script (its variables may be read at a process's start)."""
        entry = self.summary["variants"][variant.name]
        out = self.out / entry["out"]
        out.mkdir(parents=True, exist_ok=True)
        remaining = self.args.budget_s - self.elapsed()
        cmd = [sys.executable, str(Path(__file__).resolve()), "--out", str(out), "--parts", "triton",
               "--modes", ",".join(self.args.modes), "--sizes", ",".join(map(str, variant_sizes(self.args.sizes))),
               "--budget-s", f"{max(remaining - 5.0, 0.0):.0f}"] + (["--dry-run"] if self.dry else [])
        log = out / "log.txt"
        try:
            with open(log, "w") as fh:
                proc = subprocess.run(cmd, env={**os.environ, **variant.env}, stdout=fh, stderr=subprocess.STDOUT,
                                      timeout=max(remaining, 0.0) + 30.0)
            entry["exit_code"] = proc.returncode
        except subprocess.TimeoutExpired:
            entry["exit_code"] = "timeout"
        child_path = out / "summary.json"
        if child_path.exists():
            child = json.loads(child_path.read_text())
            for mode, by_S in entry["train_step_ms"].items():
                for S in by_S:
                    by_S[S] = child["train_step_ms"][mode]["triton_graph"].get(S)
            for key in ("errors", "skipped", "checks"):
                entry[key] = child[key]
        if entry["exit_code"] != 0:
            raise RuntimeError(f"the variant's run ended with exit {entry['exit_code']} (its log: {log}); "
                               f"what it finished is kept")
        return None

    # the warm-up (--warm-up)
    def warm_step(self, mode: str, S: int) -> str | None:
        """Run the Triton step in mode at S once, eagerly: its kernels compiled into Triton's disk cache."""
        if reason := self.triton_skip_reason(mode):
            raise PartSkipped(reason)
        with precision_scope(mode):
            case = build_step(self.shape(S), "triton", mode, self.device)
            EagerTrainStep(case.model, case.optimizer, case.loss_fn)(case.u, case.w)
        return None

    def warm_variant(self, variant: Variant) -> str | None:
        with switches_set(variant.env):
            for mode, S in self.variant_cells():
                with contextlib.suppress(PartSkipped):
                    self.warm_step(mode, S)
        return None

    def warm_up_plan(self) -> list[Part]:
        """--warm-up's parts: the Triton step of each mode at each size the parts time, then each variant of
        kernel switches (the others run in a subprocess, which compiles for itself)."""
        args = self.args
        sizes = list(args.sizes) if "triton" in args.parts else []
        if "kernels" in args.parts:
            sizes.append(self.kernels_size())
        if {"ops", "profile"} & set(args.parts):
            sizes.append(args.op_size)
        sizes = list(dict.fromkeys(sizes))
        parts = [Part(f"warm {mode} S={S}", "warm", lambda m=mode, s=S: self.warm_step(m, s))
                 for mode in args.modes for S in sizes]
        if "variants" in args.parts:
            parts += [Part(f"warm variant {v.name}", "warm", lambda v=v: self.warm_variant(v))
                      for v in args.variant if in_process(v)]
        return parts

    # the plan
    def plan(self) -> list[Part]:
        """The parts, the most needed first: the paper's mode (fp32: the step at every S, then its ops
        and kernel count, the issue's per-op table, and its profile), the other modes' steps, their ops and
        kernels, the variants (which choose the defaults), the other modes' profiles, torch.compile at the
        target sizes, then at the others. The profiler's CUPTI is set up and torn down between CUDA graphs
        once per profile or kernel count: once in a process was tried on a GPU (the H200's kernel count,
        2026-11-27, CUDA graphs after it), again and again was not, so those cycles come after the variants."""
        if self.args.warm_up:
            return self.warm_up_plan()
        parts, args = [], self.args
        steps, ops_kernels, profiles = {}, {}, {}
        for mode in args.modes:
            steps[mode] = []
            for i, S in enumerate(args.sizes):
                if "triton" in args.parts:
                    steps[mode].append(Part(f"triton_graph {mode} S={S}", "triton/first" if i == 0 else "triton",
                                            lambda m=mode, s=S: self.run_step("triton_graph", m, s)))
                if "eager" in args.parts:
                    steps[mode].append(Part(f"eager {mode} S={S}", "eager",
                                            lambda m=mode, s=S: self.run_step("eager", m, s)))
            ops_kernels[mode] = [Part(f"ops {mode} {key}", "ops", lambda m=mode, k=key: self.run_op(m, k))
                                 for key in OPS] if "ops" in args.parts else []
            if "kernels" in args.parts:
                ops_kernels[mode].append(Part(f"kernels {mode}", "kernels", lambda m=mode: self.run_kernels(m)))
            profiles[mode] = ([Part(f"profile {mode}", "profile", lambda m=mode: self.run_profile(m))]
                              if "profile" in args.parts else [])
        first = OP_PRECISION if OP_PRECISION in args.modes else args.modes[0]
        others = [mode for mode in args.modes if mode != first]
        parts += steps[first] + ops_kernels[first] + profiles[first]
        parts += [p for mode in others for p in steps[mode]] + [p for mode in others for p in ops_kernels[mode]]
        compiled = [Part(f"compiled_graph {mode} S={S}", "compiled",
                         lambda m=mode, s=S: self.run_step("compiled_graph", m, s))
                    for mode in args.modes for S in args.sizes] if "compiled" in args.parts else []
        if "variants" in args.parts:  # before compiled: they choose defaults, compiled is a comparison
            parts += [Part(f"variant {v.name}", "variant" if in_process(v) else "variant/subprocess",
                           lambda v=v: self.run_variant(v)) for v in args.variant]
            if "profile" in args.parts:
                parts += [Part(f"profile variant {v.name} {mode}", "profile", lambda v=v, m=mode: self.run_profile(m, v))
                          for v in args.variant if v.name in args.profile_variants for mode in args.modes]
        parts += [p for mode in others for p in profiles[mode]]
        parts += [p for p in compiled if int(p.name.rsplit("=", 1)[1]) in TARGET_SIZES]
        parts += [p for p in compiled if int(p.name.rsplit("=", 1)[1]) not in TARGET_SIZES]
        return parts

    def run(self) -> int:
        self.write()
        parts = self.plan()
        for i, part in enumerate(parts):
            if part.name in self.recorded:
                continue
            self.part = part.name
            remaining, estimate = self.args.budget_s - self.elapsed(), self.estimate(part.cost_key)
            record = {"part": part.name, "estimate_s": round(estimate, 1)}
            if estimate > remaining:
                reason = f"needs ~{estimate:.0f} s, {max(remaining, 0):.0f} s of the budget left"
                self.summary["skipped"].append({"part": part.name, "reason": reason})
                self.summary["budget"]["parts"].append({**record, "status": "skipped", "reason": reason})
                continue
            errors_before, t0 = len(self.summary["errors"]), time.monotonic()
            status, note = "done", None
            print(f"[{self.elapsed():6.1f} s] {part.name} (estimate {estimate:.0f} s)", flush=True)
            try:
                note = part.run()
            except PartSkipped as why:
                status, note = "skipped", str(why)
                self.summary["skipped"].append({"part": part.name, "reason": str(why)})
            except (Interrupted, KeyboardInterrupt) as err:
                self.error(f"interrupted ({err or 'SIGINT'}); the parts after it did not run")
                for later in parts[i:]:
                    self.summary["skipped"].append({"part": later.name, "reason": "interrupted"})
                self.write()
                return 130
            except Exception as err:
                self.error(_message(err))
                traceback.print_exc()
            finally:
                usable = _release()
            seconds, restart = time.monotonic() - t0, not usable and i + 1 < len(parts)
            if not usable:
                self.error("the CUDA context broke in this part (a CUDA fault)"
                           + ("; the parts after it ran in a fresh process" if restart else ""))
            if status == "done":
                status = "failed" if len(self.summary["errors"]) > errors_before else "done"
                self.last_s[part.cost_key] = seconds
            self.summary["budget"]["parts"].append({**record, "status": status, "seconds": round(seconds, 1),
                                                    **({"note": note} if note else {})})
            self.write()
            if restart:
                self.restart()
        self.part = "end"
        self.write()
        return 1 if self.summary["errors"] else 0


def in_process(variant: Variant) -> bool:
    """Whether the variant's step can be timed in this process: it sets kernel switches only, each read when
    an op runs or again by kernels.limits.reread_switches."""
    return all(key in KERNEL_SWITCHES for key in variant.env)


@contextlib.contextmanager
def switches_set(env: dict):
    """Within the block, os.environ with env's kernel switches set and the switches read again
    (reread_switches); afterwards the environment and the switches as before."""
    try:
        with mock.patch.dict(os.environ, env):
            reread_switches()
            yield
    finally:
        reread_switches()


def _message(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0][:300] if text else ''}"


def _release() -> bool:
    """Free what a part left (models, graphs, their memory pools) before the next one; False when the
    CUDA context is broken (a kernel faulted: every later CUDA call of this process fails)."""
    gc.collect()
    if torch.cuda.is_available():
        try:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
        except RuntimeError:  # torch.AcceleratorError too
            return False
    return True


def _on_signal(signum, frame):
    raise Interrupted(signal.Signals(signum).name)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    if not args.dry_run and not torch.cuda.is_available():
        print("error: gpu_summary.py times CUDA kernels and needs a GPU; --dry-run checks it on a CPU",
              file=sys.stderr)
        return 3
    P.raise_recompile_limits()
    signal.signal(signal.SIGTERM, _on_signal)
    session = Session(args, argv)
    try:
        code = session.run()
    except (Interrupted, KeyboardInterrupt) as err:  # between parts: what finished is written already
        session.error(f"interrupted ({err or 'SIGINT'})")
        session.write()
        code = 130
    print(f"wrote {args.out / 'summary.json'} and summary.md ({len(session.summary['errors'])} errors, "
          f"{len(session.summary['skipped'])} skipped, {session.elapsed():.0f} s)", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
