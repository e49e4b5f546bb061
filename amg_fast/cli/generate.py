"""Generate the paper's data sets (KS or PDEBench-style Burgers) or 2D Navier-Stokes, and their omega_f.

Examples:
  python scripts/generate_data.py --pde ks --nu 0.1          # data/ks_nu0.1_train2048_test256_seed0.h5 (LPSDA)
  python scripts/generate_data.py --pde burgers              # data/1D_Burgers_Sols_Nu0.001_train2048_test228_seed0.hdf5
  python scripts/generate_data.py --pde ns2d --nu 1e-4 --n-train 1000 --device auto
                                                             # data/ns2d_nu0.0001_train1000_test200_seed0.h5 (PDEBench 2D)
The file is written to a temporary name and renamed when complete; running the same command
again skips a finished file. Sizes, seeds and the device are checked before any work: a data set
whose estimated memory exceeds what the machine has available, or whose solver would take more
than 5e7 time steps per trajectory, is refused with the estimate and the limit (docs/reliability.md).
"""
from __future__ import annotations

import argparse
import sys

from tqdm import tqdm

from amg_fast._checks import ArgumentError
from amg_fast._interrupt import command_line, run_interruptible
from amg_fast.data.generate import (KS_OPTIONS, NS2D_OMEGA_RESOLUTIONS, NS2D_OPTIONS, OMEGA_RESOLUTIONS, PDES,
                                    dataset_path, dataset_size, default_n_test, generate_dataset)

__all__ = ["parse_args", "ks_options_of", "ns2d_options_of", "generator_flags", "main"]

DEFAULT_NU = {"ks": 0.1, "burgers": 0.001, "ns2d": 1e-3}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pde", choices=PDES, required=True,
                   help="which PDE: ks (Kuramoto-Sivashinsky), burgers, or ns2d (2D Navier-Stokes vorticity, FNO's)")
    p.add_argument("--nu", type=float, default=None,
                   help="viscosity: KS nu (paper: 0.075, 0.1, 0.125; default 0.1); Burgers: the PDEBench file's "
                        "Nu (default 0.001; the PDE uses Nu/pi); ns2d: nu (FNO's 1e-3 or 1e-4; default 1e-3)")
    p.add_argument("--n-train", type=int, default=2048, help="training trajectories (default 2048)")
    p.add_argument("--n-test", type=int, default=None,
                   help="test trajectories (default: KS 256; Burgers 10%% of the total, 228 for 2048 train; ns2d "
                        "a sixth of the total, 200 for 1000 train)")
    p.add_argument("--seed", type=int, default=0,
                   help="seed in [0, 2^32); train and test get independent seeds from it (default 0)")
    p.add_argument("--out", default="data", help="output directory (default data/)")
    p.add_argument("--device", default="cpu", help="torch device for the solver: cpu, cuda, cuda:N or auto (default cpu)")
    p.add_argument("--method", choices=("etdrk4", "radau"), default="etdrk4",
                   help="KS solver: etdrk4 (default, batched) or radau (the paper's scipy pipeline, slow)")
    p.add_argument("--batch-size", type=int, default=None,
                   help="trajectories solved together (default 256; ns2d 16)")
    p.add_argument("--overwrite", action="store_true", help="replace an existing file made with other arguments")
    ks_group = p.add_argument_group("KS generator options (docs/fidelity.md; non-default values go into the file name)")
    ks_group.add_argument("--ks-ic-terms", type=int,
                          help=f"sines in the initial condition (default {KS_OPTIONS['ic_terms']}; "
                               "the S4FFNO authors' generator: 10)")
    ks_group.add_argument("--ks-ic-max-wavenumber", type=int,
                          help=f"largest wave number k_i of the sines (default {KS_OPTIONS['ic_max_wavenumber']}; "
                               "the S4FFNO authors' generator: 7)")
    ks_group.add_argument("--ks-ic-amplitude", type=float,
                          help=f"A_i ~ U[-a, a] with this a (default {KS_OPTIONS['ic_amplitude']})")
    ks_group.add_argument("--ks-burn-in", type=float, help="time integrated before the first saved frame (default 0)")
    ks_group.add_argument("--ks-t-end", type=float, help=f"last saved frame time after the burn-in "
                                                         f"(default {KS_OPTIONS['t_end']})")
    ks_group.add_argument("--ks-frame-dt", type=float,
                          help=f"time between saved frames (default {KS_OPTIONS['frame_dt']})")
    ns_group = p.add_argument_group("ns2d generator options (non-default values go into the file name)")
    ns_group.add_argument("--ns-grid", type=int, help=f"solver grid points per axis (default {NS2D_OPTIONS['grid']}, "
                                                      "FNO's); the file stores min(grid, 128) per axis")
    ns_group.add_argument("--ns-t-end", type=float,
                          help="last frame time (default FNO's T: 50 at nu = 1e-3, 30 at nu = 1e-4, else 50)")
    ns_group.add_argument("--ns-frames", type=int,
                          help="frames saved, evenly spaced over [0, t_end] (default one per time unit, FNO's)")
    ns_group.add_argument("--ns-dt", type=float, help="solver time step (default 2e-3 x 256 / grid)")
    return p.parse_args(argv)


def ns2d_options_of(args: argparse.Namespace) -> dict:
    """The --ns-* flags that were given, as generate_dataset's ns2d_options."""
    return {key: getattr(args, f"ns_{key}") for key in NS2D_OPTIONS if getattr(args, f"ns_{key}") is not None}


def ks_options_of(args: argparse.Namespace) -> dict:
    """The --ks-* flags that were given, as generate_dataset's ks_options."""
    return {key: getattr(args, f"ks_{key}") for key in KS_OPTIONS if getattr(args, f"ks_{key}") is not None}


def _option_flags(prefix: str, options: dict) -> dict[str, str]:
    """{option key: its flag}, e.g. {"frame_dt": "--ks-frame-dt"} for prefix "ks"."""
    return {key: f"--{prefix}-{key.replace('_', '-')}" for key in options}


def generator_flags(pde: str) -> dict[str, str]:
    """generate_dataset's keyword arguments and this PDE's generator options by the flags that set
    them, so that a refusal names what the user typed (ArgumentError.naming)."""
    options = {"ks": _option_flags("ks", KS_OPTIONS), "ns2d": _option_flags("ns", NS2D_OPTIONS)}.get(pde, {})
    return {"nu": "--nu", "method": "--method", "n_train": "--n-train", "n_test": "--n-test",
            "batch_size": "--batch-size", "seed": "--seed", "device": "--device", **options}


def _refusal(err: Exception, pde: str) -> int:
    """Print a refusal of the generator as one `error:` line naming the flags; exit status 2."""
    message = err.naming(generator_flags(pde)) if isinstance(err, ArgumentError) else str(err)
    print(f"error: {message}", file=sys.stderr)
    return 2


def main(argv=None) -> int:
    args = parse_args(argv)
    nu = args.nu if args.nu is not None else DEFAULT_NU[args.pde]
    n_test = args.n_test if args.n_test is not None else default_n_test(args.pde, args.n_train)
    return run_interruptible(lambda: _generate(args, nu, n_test), lambda: _kept(args, nu, n_test, argv))


def _kept(args, nu: float, n_test: int, argv) -> str:
    """After Ctrl-C: the data set's file is either complete (written whole, then renamed) or absent."""
    path = dataset_path(args.out, args.pde, nu, args.n_train, n_test, args.seed, ks_options_of(args) or None,
                        ns2d_options_of(args) or None)
    if path.exists() and args.overwrite:
        return f"{path} was not replaced (it keeps the earlier data set, whole); replace it with: {command_line(argv)}"
    if path.exists():
        return f"{path} is complete; a rerun skips it"
    return (f"{path} was not written (no partial file is left; the data sets already in {args.out} are complete "
            f"and a rerun skips them); generate it with: {command_line(argv)}")


def _generate(args, nu: float, n_test: int) -> int:
    ks_options, ns2d_options = ks_options_of(args) or None, ns2d_options_of(args) or None
    for pde, given, prefix, options in (("ks", ks_options, "ks", KS_OPTIONS),
                                        ("ns2d", ns2d_options, "ns", NS2D_OPTIONS)):
        if given and args.pde != pde:
            flags = _option_flags(prefix, options)
            print(f"error: {', '.join(flags[key] for key in given)}: generator options of --pde {pde} only; got "
                  f"--pde {args.pde}", file=sys.stderr)
            return 2
    try:
        if args.pde == "ns2d":  # the bar counts frames of trajectories (what the 2D solver reports)
            frames = dataset_size("ns2d", nu=nu, n_train=args.n_train, n_test=n_test, ns2d_options=ns2d_options).frames
            total, unit = (args.n_train + n_test) * (frames - 1), "frame"
        else:
            total, unit = args.n_train + n_test, "traj"
    except ValueError as err:
        return _refusal(err, args.pde)
    bars = []  # the progress bar, drawn once the arguments have passed generate_dataset's checks

    def start_bar(path):
        # tqdm counts in floats: a total past 2^53 (a t_end of 1e308, refused by generate_dataset) is not shown
        bars.append(tqdm(total=total if total < 2**53 else None, unit=unit, desc=f"{args.pde} nu={nu:g}"))

    refusal = None
    try:
        path, summary = generate_dataset(args.pde, nu=nu, n_train=args.n_train, n_test=n_test, seed=args.seed,
                                         out_dir=args.out, device=args.device, method=args.method,
                                         batch_size=args.batch_size, overwrite=args.overwrite,
                                         progress=lambda k: bars[0].update(k), ks_options=ks_options,
                                         ns2d_options=ns2d_options, on_start=start_bar)
    except (ValueError, FileExistsError, FloatingPointError, OSError) as err:
        refusal = err
    finally:
        for bar in bars:  # its last state before any message
            bar.close()
    if refusal is not None:
        return _refusal(refusal, args.pde)
    if summary["skipped"]:
        print(f"{path}: already complete with these arguments; skipped")
    else:
        print(f"{path}: {args.n_train} train + {n_test} test trajectories in {summary['wall_time_s']:.1f} s "
              f"({summary['trajectories_per_s']:.1f} trajectories/s)")
    resolutions = NS2D_OMEGA_RESOLUTIONS if args.pde == "ns2d" else OMEGA_RESOLUTIONS
    print("omega_f (training split, high resolution): " +
          ", ".join(f"f={f}: {summary[f'omega_f_{f}']:.4g}" for f in resolutions))
    return 0

