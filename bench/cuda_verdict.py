#!/usr/bin/env python
"""The CUDA tests' verdict on the code the runs train with, kept beside a GPU session's results so that a
later call -- on a fresh machine, in a later session -- knows whether the Triton kernels may train its runs
without running the tests again (scripts/gpu_campaign.sh writes it after its tests phase and reads it in a
call without one).

Usage:
  python bench/cuda_verdict.py write RESULTS_DIR (--verdict pass|fail|incomplete [--log LOG] | --run RC LOG...)
                                  [--failed-before] [--copy-to FILE] [--tests PATH...] [--variant-tests FILE]
  python bench/cuda_verdict.py update VERDICT_FILE --log LOG... [--copy-to FILE]
  python bench/cuda_verdict.py find FILE_OR_DIR... [--any-machine]
  python bench/cuda_verdict.py digest [--matches VERDICT_FILE]

write: RESULTS_DIR/kernels_verdict.json (atomically; --copy-to: the same file elsewhere too, e.g. the
machine's work folder) = {"verdict", "sources_sha256" (sources_digest: the files the CUDA tests check),
"sources_files", "torch", "triton", "capability" (the GPU's compute capability, "9.0"; null without CUDA),
"gpu", "date" (UTC, ISO), "summary" (pytest's result lines from the logs), "tests" (--tests: the test paths
when they were not the campaign's whole set, else null), "variant_failures" ({variant: [node ids]}: the failed
tests marked `variant`, tests/variant_report.py), "variant_unrun" (with --variant-tests FILE, the collection's
{variant: [node ids]} that tests/variant_report.py wrote: {variant: [its tests with no VARIANT PASSED, SKIPPED or
FAILED line]}, cut off before they ran, which bench/adopt_variants.py --verdict does not adopt either; else
null)}. With --run (each pytest run of the tests phase: its
exit status and its log) the verdict is judged (judge): "pass" when every run exited 0; "fail" when a test
failed (pytest's FAILED / ERROR lines, or F / E among the progress characters of a pytest killed before its
summary), or a run did not run to the end (an exit but 0 and timeout's 124 / 137, or the first run -- the
kernels' tests -- cut off before a test passed: stuck in start-up, collection or a first compile); else
"incomplete" (cut off by the time limit with none failed: the same call's runs keep the Triton kernels then too;
a later run -- the `-m gpu` rest, given what time is left -- may end before its first test). Failures of tests
marked `variant` alone (kernel paths off by default: tests/variant_report.py's VARIANT FAILED lines) count as
none: the Triton kernels the runs take passed; the failed variants are listed above the verdict line, recorded,
and bench/adopt_variants.py --verdict does not adopt them.
--failed-before (the tests failed on these sources before: on this machine, or a committed verdict) makes an
"incomplete", and a pass of --tests' subset, "fail". Prints "VERDICT[ WHY]", WHY saying what failed in this call.

update: VERDICT_FILE (and --copy-to) with what a later pytest run of some of its variant tests found (the --log
files' VARIANT lines): scripts/gpu_campaign.sh runs the winning variants' tests that the tests phase's time limit
cut off after the bench (bench/adopt_variants.py --retest-out), so that they can be adopted. A test that ran leaves
variant_unrun, one that failed joins variant_failures; the verdict, its date and machine stay; pytest's result
lines join its summary. Prints a line per variant that had tests unrun; exit 2 when VERDICT_FILE is not a verdict
on this checkout's sources.

find: of the verdict files given (a folder: its kernels_verdict.json), those that apply here: written on the same
sources (digest) with the same torch, triton and compute capability (--any-machine: the sources and a GPU's
record, any GPU, e.g. to check on the development machine whether results/gpu/ holds a verdict for the checkout;
a dry run's CPU record is none), a pass or incomplete only on the whole set of tests (a failure on any subset
counts). Of those: the newest failure, unless a pass is newer (the tests ran again and passed: a later
"incomplete" does not clear it); with no failure, the newest. Prints "VERDICT PATH DATE" and exits 0 for pass /
incomplete, 1 for fail, 2 when none applies (prints nothing).

digest: prints the sha256 of the sources and their number; --matches VERDICT_FILE instead says whether that
verdict was written on these sources (exit 0) or not (1; also an unreadable file): scripts/gpu_campaign.sh runs no
variant test for a verdict on other sources.

The sources (VERDICT_SOURCES): what the CUDA tests run -- the kernels, their autograd wrappers and dispatch, the
layers and models that call them, the trainer (precision scopes, CUDA graphs), the package's shared modules
(amg_fast/*.py: argument checks, NVTX ranges). A change to any of them, or to torch or triton, asks for the tests
again; docs, reports, data, the experiment engine and the tests themselves do not.
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from amg_fast._files import atomic_write_text  # noqa: E402
from amg_fast._provenance import software  # noqa: E402

VERDICT_FILE = "kernels_verdict.json"
VERDICTS = ("pass", "fail", "incomplete")
VERDICT_SOURCES = ("kernels/**/*.py", "amg_fast/*.py", "amg_fast/ops/**/*.py", "amg_fast/layers/**/*.py",
                   "amg_fast/models/**/*.py", "amg_fast/train/**/*.py")  # glob patterns under the checkout
MACHINE_KEYS = ("torch", "triton", "capability")
SUMMARY_LINE = re.compile(r"\b\d+ (passed|failed|errors?)\b|no tests ran")
# pytest's short summary of a failure, or a line of -q progress characters holding one (e.g. "..F.s [ 40%]")
FAILURE_LINE = re.compile(r"^(FAILED|ERROR) |^[.sxX]*[FE][.sxXFE]*( +\[ *\d+%\])?$", re.MULTILINE)
# its result line with passes, or a line of progress characters holding one (a pytest killed before its summary)
PASSED = re.compile(r"\b\d+ passed\b|^[sxXFE]*\.[.sxXFE]*( +\[ *\d+%\])?$", re.MULTILINE)
CUT_OFF = (124, 137)  # timeout's exit statuses: stopped at the limit (137: killed after its grace period)
# the short summary's failed tests, a progress line's failure marks, and tests/variant_report.py's lines
SUMMARY_FAILURE = re.compile(r"^(?:FAILED|ERROR) (.+?)(?: - .*)?$", re.MULTILINE)
PROGRESS_LINE = re.compile(r"^([.sxXFE]+)(?: +\[ *\d+%\])?$", re.MULTILINE)
VARIANT_FAILURE = re.compile(r"^VARIANT FAILED (\S+) (.+)$", re.MULTILINE)
VARIANT_RAN = re.compile(r"^VARIANT (?:PASSED|SKIPPED|FAILED) \S+ (.+)$", re.MULTILINE)


def source_files(root: Path = ROOT) -> list[Path]:
    """The files VERDICT_SOURCES match under root (relative to it), sorted."""
    return sorted({p.relative_to(root) for pattern in VERDICT_SOURCES for p in root.glob(pattern)})


def sources_digest(root: Path = ROOT) -> tuple[str, int]:
    """(sha256 hex of every source file's relative path and bytes, in order; the number of files)."""
    files = source_files(root)
    h = hashlib.sha256()
    for rel in files:
        data = (root / rel).read_bytes()
        h.update(f"{rel.as_posix()}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest(), len(files)


def machine() -> dict:
    """{"torch", "triton", "capability" ("9.0", None without CUDA), "gpu" (its name, None without CUDA)}."""
    import torch

    versions = software()  # the versions runs record in machine.json
    cuda = torch.cuda.is_available()
    capability = ".".join(map(str, torch.cuda.get_device_capability())) if cuda else None
    return {"torch": versions["torch"], "triton": versions["triton"], "capability": capability,
            "gpu": torch.cuda.get_device_name() if cuda else None}


def read_log(log: Path | None) -> str:
    """The log's text ("" when there is none: a run that printed nothing)."""
    return log.read_text(errors="replace") if log is not None and log.is_file() else ""


def pytest_summary(logs: list[Path]) -> list[str]:
    """pytest's result lines ("12 passed, 1 failed in 3.0s") in the logs, in order."""
    return [line.strip().strip("=").strip() for log in logs for line in read_log(log).splitlines()
            if SUMMARY_LINE.search(line) and " in " in line]


def variant_failures(texts: list[str]) -> dict[str, list[str]]:
    """{variant: [the node ids of its tests that failed]} from tests/variant_report.py's lines in the logs."""
    out: dict[str, list[str]] = {}
    for text in texts:
        for names, node in VARIANT_FAILURE.findall(text):
            for name in names.split(","):
                out.setdefault(name, []).append(node.strip())
    return {name: sorted(set(nodes)) for name, nodes in sorted(out.items())}


def variant_unrun(texts: list[str], collected: dict[str, list[str]]) -> dict[str, list[str]]:
    """{variant: [the node ids of its collected tests that did not run]}: collected is the collection's
    {variant: [node ids]} (tests/variant_report.py, $AMG_TESTS_VARIANT_COLLECTION), a test ran when a log has its
    VARIANT PASSED, SKIPPED or FAILED line; variants whose tests all ran are left out."""
    ran = {node.strip() for text in texts for node in VARIANT_RAN.findall(text)}
    out = {name: sorted(set(nodes) - ran) for name, nodes in sorted(collected.items())}
    return {name: nodes for name, nodes in out.items() if nodes}


def read_collected(path: Path) -> dict[str, list[str]]:
    """The collection's {variant: [node ids]} that tests/variant_report.py wrote to path; ValueError naming the
    file when it is missing or not that."""
    try:
        collected = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise ValueError(f"--variant-tests {path}: cannot read the collected variant tests ({err})") from None
    if not (isinstance(collected, dict) and all(isinstance(v, list) and all(isinstance(n, str) for n in v)
                                                 for v in collected.values())):
        raise ValueError(f"--variant-tests {path}: not tests/variant_report.py's {{variant: [node ids]}}")
    return collected


def only_variants_failed(text: str) -> bool:
    """Whether every failure in a pytest log is one of a `variant` test (an opt-in kernel path): each failed test
    of the short summary has a VARIANT FAILED line, and there are as many such lines as failure marks (F, E)
    in the progress lines (a log cut before its summary has only those)."""
    variant = VARIANT_FAILURE.findall(text)
    nodes = {node.strip() for _, node in variant}
    marks = sum(line.count("F") + line.count("E") for line in PROGRESS_LINE.findall(text))
    return bool(variant) and set(SUMMARY_FAILURE.findall(text)) <= nodes and marks <= len(variant)


def judge(runs: list[tuple[int, str]], failed_before: bool = False, subset: bool = False) -> tuple[str, str]:
    """(verdict, why) of a tests phase from its pytest runs, (exit status, log text) each (the module's doc); why
    is empty for a pass, a cut-off, and what failed_before makes a failure. Failures of `variant` tests only
    (only_variants_failed: kernel paths off by default) judge as none: their variants are recorded instead
    (variant_failures), and bench/adopt_variants.py does not adopt them."""
    if not runs:
        raise ValueError("judge needs the tests phase's pytest runs, got none")
    failed = [rc != 0 and bool(FAILURE_LINE.search(text)) for rc, text in runs]  # (pytest's 0: all passed)
    if any(f and not only_variants_failed(text) for f, (_, text) in zip(failed, runs)):
        return "fail", "the CUDA tests failed"
    runs = [(0 if f and rc == 1 else rc, text) for f, (rc, text) in zip(failed, runs)]  # 1: tests failed
    if all(rc == 0 for rc, _ in runs):  # pytest's own word: every test selected passed
        return ("fail" if failed_before and subset else "pass"), ""
    (first_rc, first_text), exits = runs[0], [rc for rc, _ in runs]
    if any(rc not in (0, *CUT_OFF) for rc in exits) or (first_rc in CUT_OFF and not PASSED.search(first_text)):
        return "fail", f"the CUDA tests did not run to the end (pytest exits: {' '.join(map(str, exits))})"
    return ("fail" if failed_before else "incomplete"), ""


def write(results: Path, verdict: str, logs: list[Path] = (), copy_to: Path | None = None,
          tests: list[str] | None = None, root: Path = ROOT, collected: dict[str, list[str]] | None = None) -> dict:
    """Record verdict on the sources under root and this machine (the module's doc; tests: the test paths when
    not the campaign's whole set; collected: the variant tests collected, whose unrun ones are recorded);
    returns the record."""
    if verdict not in VERDICTS:
        raise ValueError(f"verdict must be one of {VERDICTS}, got {verdict!r}")
    digest, n = sources_digest(root)
    texts = [read_log(log) for log in logs]
    record = {"verdict": verdict, "sources_sha256": digest, "sources_files": n, **machine(),
              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "summary": pytest_summary(list(logs)), "tests": tests, "variant_failures": variant_failures(texts),
              "variant_unrun": None if collected is None else variant_unrun(texts, collected)}
    _store(record, [results / VERDICT_FILE] + ([copy_to] if copy_to else []))
    return record


def _store(record: dict, paths: list[Path]) -> None:
    """The record as JSON in each of paths (atomically, their folders made)."""
    text = json.dumps(record, indent=2) + "\n"
    for path in paths:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, text)


def update(path: Path, logs: list[Path], copy_to: Path | None = None, root: Path = ROOT) -> tuple[dict, dict]:
    """Record in the verdict at path (and copy_to) what a later pytest run of some of its variant tests found (the
    logs, with tests/variant_report.py's lines): each test that ran leaves variant_unrun, each that failed joins
    variant_failures; the verdict itself stays (these tests check opt-in kernel paths, not the runs' kernels).
    Returns (the record, {variant: [its node ids that ran now]} over the variants that had unrun tests).
    ValueError naming the file when it holds no verdict, or one on other sources than those under root."""
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise ValueError(f"{path}: cannot read the CUDA tests' verdict ({err})") from None
    if not isinstance(record, dict) or record.get("verdict") not in VERDICTS:
        raise ValueError(f"{path}: not a bench/cuda_verdict.py verdict")
    if record.get("sources_sha256") != sources_digest(root)[0]:
        raise ValueError(f"{path}: a verdict on other sources than this checkout's (bench/cuda_verdict.py digest)")
    texts = [read_log(log) for log in logs]
    unrun = record.get("variant_unrun") or {}
    still = variant_unrun(texts, unrun)  # the same reading of the VARIANT lines as the tests phase's
    ran_now = {name: [node for node in nodes if node not in still.get(name, ())] for name, nodes in unrun.items()}
    if record.get("variant_unrun") is not None:
        record["variant_unrun"] = still
    failures = record.get("variant_failures") or {}
    for name, nodes in variant_failures(texts).items():
        failures[name] = sorted(set(failures.get(name, [])) | set(nodes))
    record["variant_failures"] = dict(sorted(failures.items()))
    record["summary"] = list(record.get("summary") or []) + pytest_summary(list(logs))
    _store(record, [path] + ([copy_to] if copy_to else []))
    return record, ran_now


def find(paths: list[Path], any_machine: bool = False, root: Path = ROOT) -> tuple[dict, Path] | None:
    """(record, path) of the verdict among paths that decides for the sources under root on this machine (the
    module's doc: the newest failure unless a pass is newer, else the newest), or None."""
    digest, _ = sources_digest(root)
    here = {} if any_machine else {k: v for k, v in machine().items() if k in MACHINE_KEYS}
    found = []
    for path in paths:
        path = path / VERDICT_FILE if path.is_dir() else path
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(record, dict) or record.get("verdict") not in VERDICTS:
            continue
        if record.get("sources_sha256") != digest or not all(record.get(k) == v for k, v in here.items()):
            continue
        if any_machine and record.get("capability") is None:  # a dry run on a CPU: no CUDA test ran
            continue
        if record["verdict"] != "fail" and record.get("tests") is not None:  # some tests passed: not all
            continue
        found.append((str(record.get("date", "")), record, path))
    newest = {verdict: max((item for item in found if item[1]["verdict"] == verdict), default=None,
                           key=lambda item: item[0]) for verdict in VERDICTS}
    if newest["fail"] is not None:
        passed = newest["pass"] is not None and newest["pass"][0] > newest["fail"][0]
        _, record, path = newest["pass"] if passed else newest["fail"]
    elif found:
        _, record, path = max(found, key=lambda item: item[0])
    else:
        return None
    return record, path


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    w = sub.add_parser("write", help="record the tests phase's verdict")
    w.add_argument("results", type=Path, help="the session's results folder")
    given = w.add_mutually_exclusive_group(required=True)
    given.add_argument("--verdict", choices=VERDICTS)
    given.add_argument("--run", nargs=2, action="append", metavar=("RC", "LOG"),
                       help="a pytest run of the tests phase, its exit status and log (one --run each): the verdict "
                            "is judged from them")
    w.add_argument("--failed-before", action="store_true",
                   help="the tests failed on these sources before: a cut-off, or a pass of --tests, is a failure")
    w.add_argument("--log", type=Path, help="with --verdict: the tests' log (its pytest result lines are kept)")
    w.add_argument("--copy-to", type=Path, help="write the same record to this file too")
    w.add_argument("--variant-tests", type=Path, metavar="FILE",
                   help="the variant tests collected ($AMG_TESTS_VARIANT_COLLECTION's file): those that did not "
                        "run are recorded (variant_unrun), and their variants are not adopted")
    w.add_argument("--tests", nargs="+", metavar="PATH",
                   help="the test paths, when not the campaign's whole set (its pass then applies to no later call)")
    u = sub.add_parser("update", help="record a later run of some variant tests in a verdict")
    u.add_argument("verdict_file", type=Path, help="the verdict to update (kernels_verdict.json)")
    u.add_argument("--log", type=Path, action="append", required=True, help="that run's pytest log (one --log each)")
    u.add_argument("--copy-to", type=Path, help="write the updated record to this file too")
    f = sub.add_parser("find", help="the newest verdict that applies to this code and machine")
    f.add_argument("paths", type=Path, nargs="*", help="verdict files, or folders holding one")
    f.add_argument("--any-machine", action="store_true", help="match the sources only")
    d = sub.add_parser("digest", help="print the sources' digest and file count")
    d.add_argument("--matches", type=Path, metavar="VERDICT_FILE",
                   help="instead, exit 0 when that verdict was written on these sources, 1 when not (or unreadable)")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.command == "write":
        verdict, why, logs = args.verdict, "", [args.log] if args.log is not None else []
        if args.run is not None:
            bad = [rc for rc, _ in args.run if not rc.isdigit()]
            if bad:
                print(f"cuda_verdict.py write: --run RC LOG: RC must be an exit status (0-255), got {bad[0]!r}",
                      file=sys.stderr)
                return 2
            logs = [Path(log) for _, log in args.run]
            verdict, why = judge([(int(rc), read_log(log)) for (rc, _), log in zip(args.run, logs)],
                                 args.failed_before, args.tests is not None)
        try:
            collected = None if args.variant_tests is None else read_collected(args.variant_tests)
        except ValueError as err:
            print(f"cuda_verdict.py write: {err}", file=sys.stderr)
            return 2
        record = write(args.results, verdict, logs, args.copy_to, args.tests, collected=collected)
        for name, nodes in record["variant_failures"].items():
            print(f"variant {name}: {len(nodes)} of its tests failed (not adopted): {' '.join(nodes)}")
        for name, nodes in (record["variant_unrun"] or {}).items():
            print(f"variant {name}: {len(nodes)} of its {len(collected[name])} tests did not run (not adopted)")
        print(f"{verdict} {why}".strip())
        return 0
    if args.command == "update":
        try:
            record, ran_now = update(args.verdict_file, args.log, args.copy_to)
        except ValueError as err:
            print(f"cuda_verdict.py update: {err}", file=sys.stderr)
            return 2
        for name, nodes in ran_now.items():
            failed = set(nodes) & set(record["variant_failures"].get(name, []))
            still = (record["variant_unrun"] or {}).get(name, [])
            print(f"variant {name}: {len(nodes)} of its tests that had not run ran now, {len(failed)} failed"
                  + (f"; {len(still)} still did not run" if still else "")
                  + (" (not adopted)" if failed or still else ""))
        return 0
    if args.command == "digest":
        digest, n = sources_digest()
        if args.matches is None:
            print(digest, n)
            return 0
        try:
            recorded = json.loads(args.matches.read_text()).get("sources_sha256")
        except (OSError, ValueError, AttributeError):
            recorded = None
        print(f"{args.matches}: {'on these sources' if recorded == digest else 'not on these sources'} "
              f"({recorded or 'no digest'}; the checkout's {digest})")
        return 0 if recorded == digest else 1
    hit = find(args.paths, args.any_machine)
    if hit is None:
        return 2
    record, path = hit
    print(record["verdict"], path, record.get("date", "-"))
    return 1 if record["verdict"] == "fail" else 0


if __name__ == "__main__":
    sys.exit(main())
