#!/usr/bin/env python
"""Train a model of amg_fast on KS or Burgers and evaluate its rollout nRMSE.

With no flags: the quick default (KS nu=0.1 at f=32, 256 generated training trajectories, AMGFNO
of width 64, 40 epochs), about 2 minutes on a 2-core CPU. --preset paper: the paper's protocol (2048 trajectories, 200 epochs,
Adam 1e-3 + cosine, batch 32 KS / 64 Burgers, width 128, modes f//2).
Multi-GPU: torchrun --nproc_per_node=N scripts/train.py ... (data-parallel DDP; --batch-size is global).
"""
from __future__ import annotations

import argparse
import sys

from amg_fast.layers import FUSIONS
from amg_fast.models import available_models
from amg_fast.models.base import DECODER_INPUTS
from amg_fast.train.config import PRESETS, TrainConfig, default_cache_dir
from amg_fast.train.precision import PRECISIONS
from amg_fast.train.trainer import RunDirError, TrainingDiverged, train


def parse_args(argv=None) -> TrainConfig:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="amgfno", choices=available_models(), help="model to train (default amgfno)")
    p.add_argument("--pde", default="ks", choices=("ks", "burgers"), help="data set (default ks)")
    p.add_argument("--nu", type=float, help="viscosity: KS 0.075/0.1/0.125 (default 0.1); Burgers file Nu (default 0.001)")
    p.add_argument("--res", type=int, default=32, help="observation resolution f (default 32)")
    p.add_argument("--data", help="an HDF5 data file (PDEBench, LPSDA or amg_fast layout); default: generate "
                                  "into --cache-dir, reused across runs")
    p.add_argument("--cache-dir", default=default_cache_dir(), help="where generated data sets are kept "
                                                                    "(default $AMG_FAST_CACHE or ~/.cache/amg_fast)")
    p.add_argument("--n-train", type=int, help="training trajectories (quick 256, paper 2048)")
    p.add_argument("--n-test", type=int, help="test trajectories (quick 32, paper: KS 256, Burgers 10%% of the total)")
    p.add_argument("--epochs", type=int, help="epochs (quick 40, paper 200)")
    p.add_argument("--batch-size", type=int, help="global batch size (quick 16, paper 32 KS / 64 Burgers)")
    p.add_argument("--lr", type=float, default=1e-3, help="Adam learning rate, cosine-annealed (default 1e-3)")
    p.add_argument("--weight-decay", type=float, default=0.0, help="weight decay except S4D A and dt (default 0)")
    p.add_argument("--width", type=int, help="hidden channels H (quick 64, paper 128)")
    p.add_argument("--modes", type=int, help="Fourier modes K (default f//2)")
    p.add_argument("--seed", type=int, default=0, help="seed for data, initialisation and data order (default 0)")
    p.add_argument("--out", help="run directory (default runs/<model>_<pde>_nu<nu>_f<res>_seed<seed>)")
    p.add_argument("--device", default="auto", help="cpu, cuda or auto (default: cuda when available)")
    p.add_argument("--preset", default="quick", choices=tuple(PRESETS), help="defaults for unset flags (default quick)")
    p.add_argument("--fast-kernels", action="store_true", help="run the ops' Triton kernels (falls back, saying so, "
                                                               "where they cannot run)")
    p.add_argument("--cuda-graph", action="store_true",
                   help="capture each training step (forward, backward, Adam) in a CUDA graph and replay it: "
                        "one launch per step instead of hundreds (CUDA, one process)")
    p.add_argument("--precision", default="fp32", choices=PRECISIONS,
                   help="fp32 (default): fp32 GEMMs and fp32-accurate Triton dots; tf32: TF32 tensor-core GEMMs and "
                        "dots; bf16: forward and loss under bf16 autocast, fp32 master weights and Adam "
                        "(evaluation in the same mode)")
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    p.add_argument("--eval-every", type=int, default=5, help="test nRMSE every N epochs (default 5)")
    p.add_argument("--eval-batch-size", type=int,
                   help="trajectories per evaluation rollout batch (default: the whole test split at once)")
    p.add_argument("--checkpoint-every", type=int, default=1,
                   help="write checkpoint.pt every N epochs and after the last (default 1); --resume restarts "
                        "from the last one written")
    p.add_argument("--alpha", type=float, help="s4ffno: fixed memory weight for --fusion convex/additive")
    p.add_argument("--fusion", default="residual", choices=FUSIONS, help="s4ffno: memory fusion (default residual)")
    p.add_argument("--no-freq-gate", action="store_true", help="amgfno: drop the frequency-aware gate (ablation)")
    p.add_argument("--omega-mode", default="fixed", choices=("fixed", "batch"),
                   help="amgfno: omega_f fixed from the training set (default) or per batch (ablation)")
    p.add_argument("--omega", type=float, help="amgfno: the fixed omega_f of the frequency gate instead of the "
                                               "training data's (e.g. the paper's value)")
    fid = p.add_argument_group("fidelity options (docs/fidelity.md; all off by default)")
    fid.add_argument("--share-weights", action="store_true",
                     help="FFNO family: one spectral weight shared by all blocks (fourierflow share_weight)")
    fid.add_argument("--weight-norm", action="store_true",
                     help="FFNO family: weight-normalised encoder, feed-forward and decoder Linears (fourierflow "
                          "ff_weight_norm)")
    fid.add_argument("--decoder-input", default="stream", choices=DECODER_INPUTS,
                     help="FFNO family: decode the residual stream after the last block (stream, default) or the "
                          "last block's feed-forward output alone (last_block, as fourierflow)")
    fid.add_argument("--normalize", action="store_true",
                     help="normalise inputs and outputs per channel with the training split's mean and std")
    fid.add_argument("--increment", action="store_true",
                     help="the network predicts u_{t+1} - u_t (added to u_t); the loss stays on u_{t+1}")
    args = p.parse_args(argv)
    return TrainConfig(**{k: v for k, v in vars(args).items()})


def main(argv=None) -> int:
    cfg = parse_args(argv)
    try:
        results = train(cfg)
    except (ValueError, RunDirError, TrainingDiverged, FileExistsError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if results:
        gate = "-" if results["gate_mean"] is None else f"{results['gate_mean']:.4f}"
        print(f"\n| model | pde | nu | f | params | test nRMSE | g-bar | wall time |\n|---|---|---|---|---|---|---|---|\n"
              f"| {results['model']} | {results['pde']} | {results['nu']:g} | {results['res']} | {results['params']:,} "
              f"| {results['nrmse']:.4f} | {gate} | {results['wall_time_s']:.0f} s |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
