"""How close generate_dataset's memory estimate (amg_fast.data.generate.dataset_size) is to the
peak it really takes: one data set per fresh process, its peak RSS growth (ru_maxrss after a
1 + 1 trajectory warm-up that loads the libraries and FFT plans) against the estimate.

    python bench/probe_generate_memory.py                    # the cases of docs/reliability.md
    python bench/probe_generate_memory.py --case ks 256 32 '{"frame_dt": 0.01}' 256
    python bench/probe_generate_memory.py --case ns2d 16 4 '{"grid": 256, "t_end": 0.2, "frames": 6}' 16
(OPTIONS: the KS generator options for ks, the ns2d options for ns2d.)
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile

CASES = [("ks", 256, 32, {"frame_dt": 0.01}, 256), ("ks", 512, 64, {}, 256), ("burgers", 40, 8, {}, 256),
         ("ns2d", 16, 4, {"grid": 256, "t_end": 0.2, "frames": 6}, 16),
         ("ns2d", 16, 4, {"grid": 128, "t_end": 0.2, "frames": 11}, 16)]


def measure(pde: str, n_train: int, n_test: int, options: dict, batch: int) -> tuple[int, int]:
    """(measured peak RSS growth, estimate) in bytes, in this process."""
    from amg_fast.data.generate import dataset_size, generate_dataset

    nu = 0.1 if pde == "ks" else 0.001
    kind = {"ns2d_options" if pde == "ns2d" else "ks_options": options or None}
    with tempfile.TemporaryDirectory() as out:
        generate_dataset(pde, nu=nu, n_train=1, n_test=1, out_dir=f"{out}/warm", **kind)
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        generate_dataset(pde, nu=nu, n_train=n_train, n_test=n_test, out_dir=out, batch_size=batch, **kind)
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    size = dataset_size(pde, nu=nu, n_train=n_train, n_test=n_test, batch_size=batch, **kind)
    return peak - base, size.memory_bytes


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--case", nargs=5, metavar=("PDE", "N_TRAIN", "N_TEST", "OPTIONS_JSON", "BATCH"),
                   help="measure one case in this process (default: each of the built-in cases in its own process)")
    args = p.parse_args(argv)
    if args.case:
        pde, n_train, n_test, options, batch = args.case
        grown, estimate = measure(pde, int(n_train), int(n_test), json.loads(options), int(batch))
        print(f"| {pde} | {n_train} + {n_test} | {options} | {batch} | {grown / 2**20:.0f} MiB | "
              f"{estimate / 2**20:.0f} MiB | {estimate / grown:.2f} |")
        return 0
    print("| pde | trajectories | options | batch | measured peak growth | estimate | estimate / measured |\n"
          "|---|---|---|---|---|---|---|", flush=True)
    for pde, n_train, n_test, options, batch in CASES:
        subprocess.run([sys.executable, __file__, "--case", pde, str(n_train), str(n_test), json.dumps(options),
                        str(batch)], check=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
