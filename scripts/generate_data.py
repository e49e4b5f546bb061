#!/usr/bin/env python
"""Generate the paper's data sets (KS or PDEBench-style Burgers) and their omega_f.

Examples:
  python scripts/generate_data.py --pde ks --nu 0.1          # data/ks_nu0.1.h5 (LPSDA layout)
  python scripts/generate_data.py --pde burgers              # data/1D_Burgers_Sols_Nu0.001.hdf5
The file is written to a temporary name and renamed when complete; running the same command
again skips a finished file.
"""
from __future__ import annotations

import argparse
import sys

from tqdm import tqdm

from amg_fast.data.generate import OMEGA_RESOLUTIONS, PDES, default_n_test, generate_dataset


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pde", choices=PDES, required=True, help="which PDE: ks (Kuramoto-Sivashinsky) or burgers")
    p.add_argument("--nu", type=float, default=None,
                   help="viscosity: KS nu (paper: 0.075, 0.1, 0.125; default 0.1); Burgers: the PDEBench file's "
                        "Nu (default 0.001; the PDE uses Nu/pi)")
    p.add_argument("--n-train", type=int, default=2048, help="training trajectories (default 2048)")
    p.add_argument("--n-test", type=int, default=None,
                   help="test trajectories (default: KS 256; Burgers 10%% of the total, 228 for 2048 train)")
    p.add_argument("--seed", type=int, default=0, help="seed; train and test get independent seeds from it (default 0)")
    p.add_argument("--out", default="data", help="output directory (default data/)")
    p.add_argument("--device", default="cpu", help="torch device for the solver: cpu or cuda (default cpu)")
    p.add_argument("--method", choices=("etdrk4", "radau"), default="etdrk4",
                   help="KS solver: etdrk4 (default, batched) or radau (the paper's scipy pipeline, slow)")
    p.add_argument("--batch-size", type=int, default=256, help="trajectories solved together (default 256)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing file made with other arguments")
    return p.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    nu = args.nu if args.nu is not None else (0.1 if args.pde == "ks" else 0.001)
    n_test = args.n_test if args.n_test is not None else default_n_test(args.pde, args.n_train)
    with tqdm(total=args.n_train + n_test, unit="traj", desc=f"{args.pde} nu={nu:g}") as bar:
        try:
            path, summary = generate_dataset(args.pde, nu=nu, n_train=args.n_train, n_test=n_test, seed=args.seed,
                                             out_dir=args.out, device=args.device, method=args.method,
                                             batch_size=args.batch_size, overwrite=args.overwrite,
                                             progress=bar.update)
        except (ValueError, FileExistsError, FloatingPointError, OSError) as err:
            bar.close()
            print(f"error: {err}", file=sys.stderr)
            return 2
    if summary["skipped"]:
        print(f"{path}: already complete with these arguments; skipped")
    else:
        print(f"{path}: {args.n_train} train + {n_test} test trajectories in {summary['wall_time_s']:.1f} s "
              f"({summary['trajectories_per_s']:.1f} trajectories/s)")
    print("omega_f (training split, high resolution): " +
          ", ".join(f"f={f}: {summary[f'omega_f_{f}']:.4g}" for f in OMEGA_RESOLUTIONS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
