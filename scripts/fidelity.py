#!/usr/bin/env python
"""The fidelity study of docs/fidelity.md: train variants x models x seeds with scripts/train.py
and tabulate the diagnostics (rollout nRMSE, one-step error, rollout amplitude, train vs test).

  python scripts/fidelity.py run --out sweeps/fidelity --models ffno --variants base norm-inc \\
      --seeds 0 1 2 --data base=DATA.h5 [--workers 2] [-- EXTRA train.py FLAGS]
  python scripts/fidelity.py table --out sweeps/fidelity     # markdown to stdout, table.csv beside
  python scripts/fidelity.py omega [--n 128] [--nu 0.075 0.1 0.125]  # omega_f of each KS data reading

A variant is a named set of train.py flags (VARIANTS); `--data NAME=FILE` names data files, and
a variant `X@NAME` trains variant X on data NAME (default data: the first --data given). Each run
goes to OUT/<model>_<variant>_e<epochs>_seed<seed>/; a finished run (results.json) is skipped.
Workers run with OMP_NUM_THREADS = cores / workers.
"""
from __future__ import annotations

import argparse
import csv
import itertools
import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

TRAIN = str(Path(__file__).with_name("train.py"))
FOURIERFLOW = ["--share-weights", "--weight-norm", "--decoder-input", "last_block"]
VARIANTS = {
    "base": [],
    "share": ["--share-weights"],
    "wn": ["--weight-norm"],
    "lastblock": ["--decoder-input", "last_block"],
    "ff": FOURIERFLOW,
    "norm": ["--normalize"],
    "inc": ["--increment"],
    "norm-inc": ["--normalize", "--increment"],
    "ff-norm-inc": FOURIERFLOW + ["--normalize", "--increment"],
}


def parse_variant(name: str) -> tuple[str, str | None]:
    base, _, data = name.partition("@")
    if base not in VARIANTS:
        raise SystemExit(f"error: unknown variant {base!r}; known: {', '.join(VARIANTS)}")
    return base, data or None


def run(args: argparse.Namespace, extra: list[str]) -> int:
    data = dict(item.split("=", 1) for item in args.data)
    default_data = args.data[0].split("=", 1)[0] if args.data else None
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    threads = max(1, (os.cpu_count() or 1) // args.workers)
    jobs = []
    for model, variant, seed in itertools.product(args.models, args.variants, args.seeds):
        base, data_name = parse_variant(variant)
        data_name = data_name or default_data
        run_dir = out / f"{model}_{variant}_e{args.epochs}_seed{seed}"
        if (run_dir / "results.json").exists():
            continue
        cmd = [sys.executable, TRAIN, "--model", model, "--seed", str(seed), "--epochs", str(args.epochs),
               "--out", str(run_dir), *VARIANTS[base], *extra]
        if data_name is not None:
            cmd += ["--data", data[data_name]]
        jobs.append((run_dir, cmd, {"model": model, "variant": variant, "data": data_name, "seed": seed,
                                    "epochs": args.epochs}))
    print(f"{len(jobs)} runs, {args.workers} workers x {threads} thread(s)", flush=True)

    def one(job):
        run_dir, cmd, meta = job
        if run_dir.exists():  # a half-finished or failed run: start it again from scratch
            shutil.rmtree(run_dir)
        run_dir.mkdir(parents=True)
        (run_dir / "fidelity_job.json").write_text(json.dumps({**meta, "cmd": cmd}, indent=2) + "\n")
        t0 = time.time()
        with open(run_dir / "train.log", "w") as log:
            rc = subprocess.call(cmd, stdout=log, stderr=subprocess.STDOUT,
                                 env={**os.environ, "OMP_NUM_THREADS": str(threads)})
        print(f"{run_dir.name}: rc {rc}, {time.time() - t0:.0f} s", flush=True)
        return rc

    with ThreadPoolExecutor(args.workers) as pool:
        codes = list(pool.map(one, jobs))
    return int(any(codes))


def rows_of(out: Path) -> list[dict]:
    rows = []
    for job_file in sorted(out.glob("*/fidelity_job.json")):
        res_file = job_file.with_name("results.json")
        if not res_file.exists():
            continue
        meta, res = json.loads(job_file.read_text()), json.loads(res_file.read_text())
        steps = res["nrmse_per_step"]
        amp = res.get("amplitude_per_step") or [float("nan")] * len(steps)
        rows.append({**{k: meta[k] for k in ("model", "variant", "epochs", "seed")},
                     "nrmse": res["nrmse"], "one_step": res.get("one_step_nrmse"),
                     "step1": steps[0], "step5": steps[min(4, len(steps) - 1)], "step25": steps[-1],
                     "amp5": amp[min(4, len(amp) - 1)], "amp25": amp[-1],
                     "train_loss": res.get("train_one_step_loss"), "test_loss": res.get("test_one_step_loss"),
                     "train_nrmse": res.get("train_nrmse"), "gate": res.get("gate_mean"),
                     "time_s": res["wall_time_s"]})
    return rows


COLUMNS = ("nrmse", "one_step", "step1", "step5", "step25", "amp5", "amp25", "train_loss", "test_loss",
           "train_nrmse", "gate")


def table(args: argparse.Namespace) -> int:
    out = Path(args.out)
    rows = rows_of(out)
    if not rows:
        print(f"error: no finished runs in {out}", file=sys.stderr)
        return 2
    with open(out / "table.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        groups.setdefault((row["model"], row["variant"], row["epochs"]), []).append(row)
    print("| model | variant | epochs | n | " + " | ".join(COLUMNS) + " |")
    print("|---|---|---:|---:|" + "---:|" * len(COLUMNS))
    for (model, variant, epochs), group in sorted(groups.items()):
        cells = []
        for col in COLUMNS:
            values = np.array([r[col] for r in group if r[col] is not None], dtype=float)
            if values.size == 0:
                cells.append("-")
            elif values.size == 1:
                cells.append(f"{values[0]:.3g}")
            else:
                cells.append(f"{values.mean():.3g} ± {values.std(ddof=1):.2g}")
        print(f"| {model} | {variant} | {epochs} | {len(group)} | " + " | ".join(cells) + " |")
    return 0


# Readings of the paper's KS data (generator options of amg_fast.data.generate.KS_OPTIONS) whose
# omega_f the `omega` command measures; "s4ffno" = the S4FFNO authors' generator (their LPSDA fork):
# 10 sines, k_i = randint(1, 8) in {1..7}, its README's command saving t = 0..5 every 0.1.
S4FFNO_IC = {"ic_terms": 10, "ic_max_wavenumber": 7}
READINGS = {
    "paper [0, 2.5] (default)": {},
    "paper, IC amplitude x2": {"ic_amplitude": 1.0},
    "paper, burn-in 2.5": {"burn_in": 2.5},
    "paper [0, 5]": {"t_end": 5.0},
    "s4ffno IC [0, 2.5]": S4FFNO_IC,
    "s4ffno IC, burn-in 2.5": {**S4FFNO_IC, "burn_in": 2.5},
    "s4ffno IC [0, 5], dt 0.1 (51 frames)": {**S4FFNO_IC, "t_end": 5.0},
    "s4ffno IC [0, 5], dt 0.2 (26 frames)": {**S4FFNO_IC, "t_end": 5.0, "frame_dt": 0.2},
}


def omega(args: argparse.Namespace) -> int:
    from amg_fast.data import ks
    from amg_fast.data.generate import check_ks_options
    from amg_fast.data.spectral import unresolved_energy_ratio, unresolved_energy_ratio_per_state

    print(f"omega_f over all saved frames of {args.n} trajectories (seed {args.seed}); paper: 0.584 / 0.083 / 0.0003")
    print("| nu | reading | omega_32 | omega_64 | omega_128 | energy-weighted omega_32 |")
    print("|---|---|---:|---:|---:|---:|")
    for nu in args.nu:
        for name, options in READINGS.items():
            o = check_ks_options(options)
            u = ks.generate_ks(args.n, nu=nu, seed=args.seed, t=ks.ks_times(o["t_end"], o["frame_dt"]),
                               burn_in=o["burn_in"], ic_terms=o["ic_terms"], ic_max_wavenumber=o["ic_max_wavenumber"],
                               ic_amplitude=o["ic_amplitude"])
            values = [unresolved_energy_ratio(u, f) for f in (32, 64, 128)]
            energy = np.square(np.abs(np.fft.fft(u, axis=-1))).sum(-1)  # weight each state by its energy
            weighted = float((unresolved_energy_ratio_per_state(u, 32) * energy).sum() / energy.sum())
            print(f"| {nu:g} | {name} | {values[0]:.3f} | {values[1]:.4f} | {values[2]:.2e} | {weighted:.3f} |",
                  flush=True)
    return 0


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="train the runs that are not finished")
    r.add_argument("--out", required=True, help="sweep directory")
    r.add_argument("--models", nargs="+", default=["ffno"], help="models (default ffno)")
    r.add_argument("--variants", nargs="+", default=["base"], help=f"variants[@data]: {', '.join(VARIANTS)}")
    r.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2], help="seeds (default 0 1 2)")
    r.add_argument("--epochs", type=int, default=20, help="epochs per run (default 20)")
    r.add_argument("--data", nargs="*", default=[], help="NAME=FILE data sets; the first is the default")
    r.add_argument("--workers", type=int, default=2, help="runs at once (default 2)")
    t = sub.add_parser("table", help="markdown table (mean ± std over seeds) and table.csv")
    t.add_argument("--out", required=True, help="sweep directory")
    o = sub.add_parser("omega", help="omega_f of each reading of the paper's KS data (READINGS)")
    o.add_argument("--n", type=int, default=128, help="trajectories per reading (default 128)")
    o.add_argument("--nu", nargs="+", type=float, default=[0.075, 0.1, 0.125], help="viscosities")
    o.add_argument("--seed", type=int, default=1, help="initial-condition seed (default 1)")
    args = p.parse_args(argv)
    return {"run": lambda: run(args, extra), "table": lambda: table(args), "omega": lambda: omega(args)}[args.command]()


if __name__ == "__main__":
    sys.exit(main())
