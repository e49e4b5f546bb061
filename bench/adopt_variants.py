#!/usr/bin/env python
"""The kernel switches a GPU session's runs adopt from its bench: the variants that beat the default
Triton step in every cell the bench timed them in (scripts/gpu_campaign.sh calls this after the bench).

Usage:
  python bench/adopt_variants.py SUMMARY.json [--min-gain 0.03] [--min-cells 2] [--modes fp32,tf32,bf16]
      [--env-out FILE] [--markdown-out FILE] [--verdict kernels_verdict.json [--retest-out FILE]]

SUMMARY.json is bench/gpu_summary.py's: "train_step_ms"[mode]["triton_graph"][S] is the default step,
"variants"[name] the same step under a variant's switches (--variant NAME:ENV=VAL,...). A variant wins
when its run finished (exit 0, no errors), every check of its step against the float64 reference passed,
it was timed in at least --min-cells (mode, S) cells that the default was timed in too (of --modes, default
every mode; fewer only when every run that takes the switches trains in those modes), and in each of
them the default's time over the variant's is at least 1 + --min-gain (a margin over the noise of two
timings of one step). The winners are taken by their geometric-mean speedup, best first, each
unless an earlier one switches the same op (SWITCH_OPS: spectral_cublas and spectral_mixtorch both act on
the spectral conv, so only the faster of them is taken): the switches adopted together act on different
ops, each measured as a whole on its own. A variant that changes nothing in some mode (spectral_x3dot and
gate_x3dot outside fp32, spectral_wview in fp32) cannot win there by the margin, so under every-mode judging
it is timed, not adopted: its modes' defaults are set by hand. With --verdict (the CUDA tests' kernels_verdict.json),
a variant whose tests failed on the GPU (its "variant_failures", tests/variant_report.py) is not adopted either,
nor one whose tests did not all run there ("variant_unrun": the tests phase cut off before them).
--retest-out FILE (with --verdict) judges nothing: it writes the node ids of the tests that did not run of the
variants that would be adopted if they had, then of the winners their ops could still fall to
(unrun_winner_tests; none after a failed verdict: the runs then take the reference kernels), for
scripts/gpu_campaign.sh to run them after the bench (they run last in the tests phase, so its time limit falls on
them) and then judge with the updated verdict (bench/cuda_verdict.py update).
Only AMG_FAST_* switches with plain values are adopted, never one
of NEVER_ADOPTED (a switch that changes the precision a mode computes at, not only its speed), and nothing
from a dry run's summary (CPU times).

--env-out FILE: one line per adopted variant, "NAME KEY=VALUE [KEY=VALUE ...]" (empty: none won), written
atomically -- unless no variant was timed in any cell, when the file is left as it was (a bench without
variants says nothing about them); scripts/gpu_campaign.sh exports a variant's switches together or, when
one of them is set already, none of them. --markdown-out FILE: the verdict per variant, also printed.
Exit status 0 (adopting nothing included), 2 for a missing or unreadable summary.
"""
from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from amg_fast._files import atomic_write_text  # noqa: E402
from amg_fast.train.precision import PRECISIONS as MODES  # noqa: E402

DEFAULT_MIN_GAIN = 0.03
DEFAULT_MIN_CELLS = 2
# The op a switch acts on, by its name's prefix (docs/kernels.md); any other switch is an op of its own.
SWITCH_OPS = {"AMG_FAST_SPECTRAL_": "spectral_conv", "AMG_FAST_FFN_": "feed_forward", "AMG_FAST_S4D_": "s4d",
              "AMG_FAST_GATE_": "gate", "AMG_FAST_MEMORY_": "gate"}
# Switches whose value changes what a precision mode computes (its dots' precision, its intermediates' dtype):
# a variant setting one is timed, never adopted for runs, whose precision must be the mode's own.
NEVER_ADOPTED = {"AMG_FAST_SPECTRAL_REDUCED_DOTS": "it changes the precision a mode computes at, not only its speed"}
SWITCH = re.compile(r"AMG_FAST_[A-Z0-9_]+")
VALUE = re.compile(r"[A-Za-z0-9_.-]+")


def switch_op(name: str) -> str:
    """The op the switch `name` acts on (SWITCH_OPS), else the name itself."""
    return next((op for prefix, op in SWITCH_OPS.items() if name.startswith(prefix)), name)


def speedups(summary: dict, name: str, modes=None) -> dict[tuple[str, str], float]:
    """{(mode, S): default ms / variant ms} over the cells (of `modes`, None: all) where both the default
    Triton step and variant `name` have a finite, positive time."""
    default, timed = summary["train_step_ms"], summary["variants"][name]["train_step_ms"]
    out = {}
    for mode, by_size in timed.items():
        if modes is not None and mode not in modes:
            continue
        for size, ms in by_size.items():
            base = default.get(mode, {}).get("triton_graph", {}).get(size)
            if all(isinstance(v, (int, float)) and math.isfinite(v) and v > 0 for v in (ms, base)):
                out[(mode, size)] = base / ms
    return out


def verdict(summary: dict, name: str, min_gain: float, min_cells: int, modes=None,
            failed_tests: list[str] = (), unrun_tests: list[str] = ()) -> tuple[bool, str, dict]:
    """(wins, why, speedups) for variant `name` of summary, judged on the cells of `modes` (None: all);
    failed_tests / unrun_tests: its tests that failed on the GPU / did not run there (the CUDA tests' verdict:
    variant_failures / variant_unrun)."""
    entry = summary["variants"][name]
    cells = speedups(summary, name, modes)
    bad = [f"{k}={v}" for k, v in entry["env"].items() if not (SWITCH.fullmatch(k) and VALUE.fullmatch(str(v)))]
    failed = [c["what"] for c in entry.get("checks", []) if not c.get("ok")]
    if bad:
        return False, f"sets {', '.join(bad)}: only AMG_FAST_* switches with plain values are adopted", cells
    never = [f"{k} ({NEVER_ADOPTED[k]})" for k in entry["env"] if k in NEVER_ADOPTED]
    if never:
        return False, f"never adopted: {'; '.join(never)}", cells
    if summary.get("dry_run"):
        return False, "a dry run's summary (CPU times): nothing is adopted from it", cells
    if failed_tests:
        return False, f"its CUDA tests failed ({len(failed_tests)}: {', '.join(failed_tests)})", cells
    if unrun_tests:
        return False, (f"{len(unrun_tests)} of its CUDA tests did not run (the tests phase's time limit): "
                       f"{', '.join(unrun_tests)}"), cells
    if summary.get("warm_up"):
        return False, "a warm-up's summary (gpu_summary.py --warm-up: nothing timed)", cells
    if entry.get("exit_code") is None and not cells:
        return False, "not run (the bench's budget ended before it)", cells
    if entry.get("exit_code") != 0 or entry.get("errors"):
        return False, f"its run did not finish cleanly (exit {entry.get('exit_code')}, {len(entry.get('errors') or [])} errors)", cells
    if failed:
        return False, f"missed its check against float64: {', '.join(failed)}", cells
    if len(cells) < min_cells:
        return False, f"timed in {len(cells)} cells beside the default, fewer than {min_cells}", cells
    slow = [f"{mode} S={size}: {ratio:.3f}x" for (mode, size), ratio in cells.items() if ratio < 1 + min_gain]
    if slow:
        return False, f"not {1 + min_gain:.2f}x the default everywhere ({'; '.join(slow)})", cells
    return True, f"{geomean(cells):.3f}x the default (geometric mean of {len(cells)} cells)", cells


def geomean(cells: dict) -> float:
    return math.exp(sum(math.log(v) for v in cells.values()) / len(cells)) if cells else 0.0


def adopt(summary: dict, min_gain: float = DEFAULT_MIN_GAIN, min_cells: int = DEFAULT_MIN_CELLS, modes=None,
          failed: dict[str, list[str]] | None = None,
          unrun: dict[str, list[str]] | None = None) -> tuple[dict[str, str], list[dict]]:
    """(switches to adopt {name: value}, one row per variant: name, env, cells, speedup, adopted, why), the
    variants judged on the cells of `modes` (None: every mode); failed / unrun: {variant: its CUDA tests that
    failed / did not run}."""
    rows = []
    for name in summary.get("variants", {}):
        wins, why, cells = verdict(summary, name, min_gain, min_cells, modes, (failed or {}).get(name, ()),
                                   (unrun or {}).get(name, ()))
        rows.append({"name": name, "env": summary["variants"][name]["env"], "cells": len(cells),
                     "speedup": geomean(cells), "wins": wins, "adopted": False, "why": why})
    switches, taken_ops = {}, {}
    for row in sorted((r for r in rows if r["wins"]), key=lambda r: -r["speedup"]):
        ops = {switch_op(k) for k in row["env"]}
        clash = sorted(op for op in ops if op in taken_ops)
        if clash:
            row["why"] += f"; not adopted: {taken_ops[clash[0]]} (faster) switches the {clash[0]} already"
            continue
        row["adopted"] = True
        switches.update({k: str(v) for k, v in row["env"].items()})
        taken_ops.update({op: row["name"] for op in ops})
    return switches, rows


def unrun_winner_tests(summary: dict, min_gain: float = DEFAULT_MIN_GAIN, min_cells: int = DEFAULT_MIN_CELLS,
                       modes=None, failed: dict[str, list[str]] | None = None,
                       unrun: dict[str, list[str]] | None = None) -> list[str]:
    """The node ids of the CUDA tests that did not run (unrun: {variant: node ids}) of the variants that would be
    adopted if they had (adopt with every test run: their failed tests still count), then of the other winners
    that one of those could still leave their op to (it has tests unrun, which may fail); the faster variant's
    first in each group, each id once: what must still run for those variants to be adopted."""
    unrun = unrun or {}
    _, rows = adopt(summary, min_gain, min_cells, modes, failed, unrun=None)
    ops = {row["name"]: {switch_op(k) for k in row["env"]} for row in rows}
    settled = set().union(*(ops[r["name"]] for r in rows if r["adopted"] and not unrun.get(r["name"])))
    chosen = [r for r in rows if r["wins"] and unrun.get(r["name"]) and not ops[r["name"]] & settled]
    chosen.sort(key=lambda r: (not r["adopted"], -r["speedup"]))
    return list(dict.fromkeys(node for r in chosen for node in unrun[r["name"]]))


def env_lines(rows: list[dict]) -> str:
    """--env-out's text: "NAME KEY=VALUE ..." for each adopted variant of rows."""
    return "".join(f"{r['name']} {' '.join(f'{k}={v}' for k, v in r['env'].items())}\n" for r in rows if r["adopted"])


def render_markdown(rows: list[dict], switches: dict, min_gain: float, modes=None) -> str:
    judged = "every mode" if modes is None else ", ".join(modes)
    lines = [f"# Kernel switches adopted for the runs (bench/adopt_variants.py: min gain {min_gain:.0%}, {judged})", "",
             "Adopted: " + (", ".join(f"`{k}={v}`" for k, v in switches.items()) if switches else "none"), "",
             "| variant | environment | cells | speedup (geomean) | adopted | why |", "|---|---|---:|---:|---|---|"]
    for r in rows:
        env = ",".join(f"{k}={v}" for k, v in r["env"].items())
        speed = f"{r['speedup']:.3f}x" if r["cells"] else "-"
        lines.append(f"| {r['name']} | `{env}` | {r['cells']} | {speed} | {'yes' if r['adopted'] else 'no'} | {r['why']} |")
    return "\n".join(lines) + "\n"


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("summary", type=Path, help="bench/gpu_summary.py's summary.json")
    p.add_argument("--min-gain", type=float, default=DEFAULT_MIN_GAIN,
                   help=f"the least speedup over the default in every cell, minus 1 (default {DEFAULT_MIN_GAIN})")
    p.add_argument("--min-cells", type=int, default=DEFAULT_MIN_CELLS,
                   help=f"the fewest (mode, S) cells a winner was timed in (default {DEFAULT_MIN_CELLS})")
    p.add_argument("--modes", type=lambda text: tuple(m for m in text.split(",") if m), default=None,
                   help="judge the variants on these precision modes' cells only (comma-separated; default all)")
    p.add_argument("--env-out", type=Path, help='the adopted variants, one a line: "NAME KEY=VALUE [KEY=VALUE ...]"')
    p.add_argument("--markdown-out", type=Path, help="the verdict per variant, as markdown")
    p.add_argument("--verdict", type=Path, help="the CUDA tests' kernels_verdict.json (bench/cuda_verdict.py): the "
                                                "variants whose tests failed in it (variant_failures) or did not run "
                                                "(variant_unrun) are not adopted")
    p.add_argument("--retest-out", type=Path, metavar="FILE",
                   help="with --verdict: instead of judging, write the node ids (one a line; none: empty) of the "
                        "tests that did not run of the variants that would be adopted if they had "
                        "(unrun_winner_tests), for the campaign to run them before the verdict is updated and the "
                        "variants judged")
    args = p.parse_args(argv)
    if not (0 <= args.min_gain < 1):
        p.error(f"--min-gain must be in [0, 1), got {args.min_gain}")
    if args.min_cells < 1:
        p.error(f"--min-cells must be >= 1, got {args.min_cells}")
    if args.retest_out is not None and args.verdict is None:
        p.error("--retest-out needs --verdict (the CUDA tests' record of which tests did not run)")
    if args.modes is not None and (not args.modes or set(args.modes) - set(MODES)):
        p.error(f"--modes must name some of {', '.join(MODES)}, got {','.join(args.modes) or 'none'}")
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        summary = json.loads(args.summary.read_text())
    except (OSError, ValueError) as err:
        print(f"adopt_variants: cannot read the bench summary {args.summary}: {err}", file=sys.stderr)
        return 2
    if not (isinstance(summary, dict) and isinstance(summary.get("train_step_ms"), dict)
            and isinstance(summary.get("variants", {}), dict)):
        print(f"adopt_variants: {args.summary} is not a bench/gpu_summary.py summary (train_step_ms, variants)",
              file=sys.stderr)
        return 2
    failed = unrun = record = None
    if args.verdict is not None:
        try:
            record = json.loads(args.verdict.read_text())
            failed, unrun = record.get("variant_failures") or {}, record.get("variant_unrun") or {}
        except (OSError, ValueError, AttributeError) as err:
            print(f"adopt_variants: cannot read the CUDA tests' verdict {args.verdict}: {err}", file=sys.stderr)
            return 2
    if args.retest_out is not None:
        # the default kernels failed their CUDA tests: the runs take the reference kernels, and no switch
        nodes = [] if record.get("verdict") == "fail" else \
            unrun_winner_tests(summary, args.min_gain, args.min_cells, args.modes, failed, unrun)
        atomic_write_text(args.retest_out, "".join(f"{node}\n" for node in nodes))
        print(f"{len(nodes)} tests of the winning variants did not run: {args.retest_out}")
        return 0
    switches, rows = adopt(summary, args.min_gain, args.min_cells, args.modes, failed, unrun)
    text = render_markdown(rows, switches, args.min_gain, args.modes)
    print(text, end="")
    if args.markdown_out:
        atomic_write_text(args.markdown_out, text)
    if args.env_out:
        timed = any(speedups(summary, name) for name in summary.get("variants", {}))  # in any mode, judged or not
        if timed or summary.get("dry_run"):
            atomic_write_text(args.env_out, env_lines(rows))
        else:
            print(f"no variant was timed: {args.env_out} left as it was")
    return 0


if __name__ == "__main__":
    sys.exit(main())
