#!/usr/bin/env python
"""Collect the training runs of scripts/gpu_campaign.sh into fidelity.json, precision.json and a
markdown report.

RESULTS/fidelity/<run>/results.json (paper-preset runs) -> RESULTS/fidelity.json, a list of
{"model", "pde", "nu", "res", "nrmse", "gate_mean", "gate_mean_last20_epochs", "paper_nrmse",
"paper_gate_mean", "ratio_to_paper", "wall_time_s", "train_time_s", "eval_time_s",
"checkpoint_time_s", "epochs", "epochs_done", "cuda_graph", "fast_kernels", "precision", "status"};
a run that did not finish is listed from its metrics.jsonl with status "unfinished" (nrmse = its
last test nRMSE, times summed over its epochs). RESULTS/precision/<mode>/results.json -> RESULTS/precision.json with each mode's
nRMSE against fp32's. The markdown goes to stdout.

The paper's values are Table 2 (nRMSE) and Table 3 (g-bar, mean of the last 20 training epochs),
from amg_fast.experiments.paper.

Example: python scripts/campaign_report.py results/gpu/20261126-h200
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from amg_fast.experiments.paper import paper_value
from amg_fast.train.rundir import RunDir, epoch_seconds, gate_mean_last_epochs


def _write_json(path: Path, obj) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2) + "\n")
    os.replace(tmp, path)


def fidelity_row(run: Path) -> dict | None:
    """One run directory -> a fidelity row (None when it holds no config.json)."""
    files = RunDir(run)
    cfg = files.read_config()
    if cfg is None:
        return None
    history, results = files.read_metrics(), files.read_results()
    setting = {"pde": cfg.pde, "nu": cfg.nu, "res": cfg.res}
    row = {"run": run.name, "model": cfg.model, **setting,
           "paper_nrmse": paper_value("nrmse", model=cfg.model, **setting),
           "paper_gate_mean": paper_value("gate", **setting) if cfg.model == "amgfno" else None,
           "epochs": cfg.epochs, "epochs_done": len(history), "cuda_graph": cfg.cuda_graph,
           "fast_kernels": cfg.fast_kernels, "precision": cfg.precision}
    if results is not None:
        row.update({k: results.get(k) for k in ("nrmse", "gate_mean", "gate_mean_last20_epochs", "wall_time_s",
                                                "train_time_s", "eval_time_s", "checkpoint_time_s")}, status="finished")
    else:
        tested = [h for h in history if "test_nrmse" in h]
        row.update(nrmse=tested[-1]["test_nrmse"] if tested else None, gate_mean=None,
                   gate_mean_last20_epochs=gate_mean_last_epochs(history), wall_time_s=None, **epoch_seconds(history),
                   status="unfinished")
    row["ratio_to_paper"] = row["nrmse"] / row["paper_nrmse"] if row["nrmse"] and row["paper_nrmse"] else None
    row["per_epoch_test_nrmse"] = {h["epoch"]: h["test_nrmse"] for h in history if "test_nrmse" in h}
    return row


def _fmt(value, spec: str = ".4f") -> str:
    return "-" if value is None else format(value, spec)


def report(results: Path) -> str:
    fidelity = [r for r in (fidelity_row(d) for d in sorted((results / "fidelity").glob("*"))) if r]
    precision = [r for r in (fidelity_row(d) for d in sorted((results / "precision").glob("*"))) if r]
    fp32 = next((r["nrmse"] for r in precision if r["precision"] == "fp32" and r["nrmse"]), None)
    for r in precision:
        r["nrmse_vs_fp32"] = r["nrmse"] / fp32 if r["nrmse"] and fp32 else None
    _write_json(results / "fidelity.json", fidelity)
    _write_json(results / "precision.json", precision)
    lines = ["| run | model | f | epochs | test nRMSE | paper | ratio | g-bar (last 20 ep.) | paper g-bar "
             "| rollout g-bar | wall (s) | train / eval / ckpt (s) | graph | status |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|"]
    for r in fidelity:
        split = "/".join(_fmt(r.get(k), ".0f") for k in ("train_time_s", "eval_time_s", "checkpoint_time_s"))
        lines.append(f"| {r['run']} | {r['model']} | {r['res']} | {r['epochs_done']}/{r['epochs']} | {_fmt(r['nrmse'])} "
                     f"| {_fmt(r['paper_nrmse'], '.3f')} | {_fmt(r['ratio_to_paper'], '.2f')} "
                     f"| {_fmt(r['gate_mean_last20_epochs'])} | {_fmt(r['paper_gate_mean'])} | {_fmt(r['gate_mean'])} "
                     f"| {_fmt(r['wall_time_s'], '.0f')} | {split} | {r['cuda_graph']} | {r['status']} |")
    if precision:
        lines += ["", "| precision | model | epochs | test nRMSE | vs fp32 | g-bar (last 20 ep.) | train (s) | status |",
                  "|---|---|---:|---:|---:|---:|---:|---|"]
        lines += [f"| {r['precision']} | {r['model']} | {r['epochs_done']}/{r['epochs']} | {_fmt(r['nrmse'])} "
                  f"| {_fmt(r['nrmse_vs_fp32'], '.3f')} | {_fmt(r['gate_mean_last20_epochs'])} "
                  f"| {_fmt(r['train_time_s'], '.1f')} | {r['status']} |" for r in precision]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("results", type=Path, help="the campaign's results directory (holds fidelity/ and precision/)")
    args = p.parse_args(argv)
    if not args.results.is_dir():
        print(f"error: results directory {args.results} does not exist", file=sys.stderr)
        return 2
    sys.stdout.write(report(args.results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
