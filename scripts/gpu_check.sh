#!/usr/bin/env bash
# One-command check of amg_fast on a machine with an NVIDIA GPU (no network needed).
#
#   bash scripts/gpu_check.sh [OUT_DIR]        (default OUT_DIR: results/gpu/gpu_check-<UTC date>)
#
# Steps (each one's output goes to the console and to OUT_DIR/logs/<NN>-<step>.log; a failed step is
# recorded and the next one still runs):
#   env         nvidia-smi, python / torch / triton / CUDA versions, which optional modules are missing
#   install     pip install --no-deps --no-build-isolation --no-index -e . on the torch + triton already there
#   tests-ops   pytest tests/ops + whole-model equivalence (on a GPU the kernel tests run on CUDA, compiled)
#   tests-gpu   pytest -m gpu over the rest of tests/
#   bench       pytest bench/ --benchmark-only -> OUT_DIR/bench-<gpu>-<date>.json (KS data-generation
#               benchmarks left out: they time the CPU)
#   bench-table bench/bench_table.py on that JSON -> OUT_DIR/bench_table.md
#   data        KS quick data (256 train / 32 test trajectories, nu = 0.1), generated on the GPU into a temp dir
#   train-reference, train-fast, train-fast-graph
#               2-epoch AMGFNO training (quick preset) without and with --fast-kernels, and with
#               --fast-kernels --cuda-graph (the whole step replayed from a CUDA graph); results.json and
#               metrics.jsonl copied to OUT_DIR/train/<run>/
# It ends with a summary (pass/fail and seconds per step, training wall times and test nRMSE); the exit
# code is 0 only when every step passed (3 when there is no usable GPU).
#
# Environment:
#   PYTHON                  interpreter (default python3)
#   GPU_CHECK_SKIP          comma-separated steps to leave out, e.g. tests-ops,bench
#   GPU_CHECK_TEST_WORKERS  run tests/ops on N pytest-xdist workers where xdist is installed (default serial)
#   GPU_CHECK_T_TESTS, GPU_CHECK_T_BENCH, GPU_CHECK_T_TRAIN   per-step hang guards in seconds
#   GPU_CHECK_ALLOW_CPU=1   go on without a GPU (to try this script itself on a CPU machine; not a GPU check)
#   AMG_BENCH_*             the bench knobs of bench/_providers.py; here the compiled provider runs at S=128
#                           only unless AMG_BENCH_COMPILE_SIZES says otherwise (torch.compile dominates)
# Measured on one H200 (torch 2.11, triton 3.6): about 5 minutes, of which tests/ops about 2.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=${PYTHON:-python3}
STAMP=$(date -u +%Y%m%d-%H%M%S)
# Bench defaults sized for a few minutes (each can be set from outside): torch.compile at S=128 only,
# do_bench 10 ms warm-up + 50 ms of timed calls, 0.05 s of pytest-benchmark rounds per benchmark.
export AMG_BENCH_COMPILE_SIZES=${AMG_BENCH_COMPILE_SIZES:-128}
export AMG_BENCH_DO_BENCH_MS=${AMG_BENCH_DO_BENCH_MS:-10,50}
export AMG_BENCH_ROUND_BUDGET_S=${AMG_BENCH_ROUND_BUDGET_S:-0.05}
export PIP_ROOT_USER_ACTION=ignore PYTHONUNBUFFERED=1
# Hang guards per step (seconds), not budgets.
T_TESTS=${GPU_CHECK_T_TESTS:-420} T_BENCH=${GPU_CHECK_T_BENCH:-480} T_TRAIN=${GPU_CHECK_T_TRAIN:-300}

# -- guard: a usable NVIDIA GPU ----------------------------------------------------------------------
if ! command -v nvidia-smi >/dev/null 2>&1; then
    GPU_PROBLEM="nvidia-smi not found (no NVIDIA driver)"
elif ! "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; then
    GPU_PROBLEM="torch cannot use a CUDA GPU (torch.cuda.is_available() is False, or torch does not import with $PY)"
else
    GPU_PROBLEM=""
fi
DEVICE=cuda
if [[ -n $GPU_PROBLEM ]]; then
    echo "gpu_check: no usable NVIDIA GPU: $GPU_PROBLEM." >&2
    if [[ ${GPU_CHECK_ALLOW_CPU:-0} != 1 ]]; then
        echo "gpu_check: this script checks the Triton kernels on a GPU; on a CPU run 'python -m pytest tests' instead." >&2
        exit 3
    fi
    echo "gpu_check: GPU_CHECK_ALLOW_CPU=1: going on with the CPU -- a dry run of this script, not a GPU check." >&2
    DEVICE=cpu
fi

if [[ $DEVICE == cuda ]]; then GPU_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1); else GPU_NAME=cpu; fi
GPU_TAG=$(echo "$GPU_NAME" | tr '[:upper:]' '[:lower:]' | sed -e 's/^nvidia //' -e 's/[^a-z0-9]\+/-/g' -e 's/^-//' -e 's/-$//')
OUT_DIR=${1:-results/gpu/gpu_check-$STAMP}
mkdir -p "$OUT_DIR/logs"
OUT_DIR=$(cd "$OUT_DIR" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/amg_gpu_check.XXXXXX")  # data and run dirs (checkpoints): not results
trap 'rm -rf "$WORK"' EXIT
JSON=$OUT_DIR/bench-$GPU_TAG-$STAMP.json
exec > >(tee -a "$OUT_DIR/gpu_check.log") 2>&1
echo "gpu_check: $GPU_NAME; results in $OUT_DIR; scratch in $WORK"

# -- steps ---------------------------------------------------------------------------------------------
step_env() {
    if [[ $DEVICE == cuda ]]; then nvidia-smi; fi
    "$PY" - <<'EOF'
import importlib, platform, sys
import torch
print(f"python {platform.python_version()} ({sys.executable})")
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}")
if torch.cuda.is_available():
    print(f"GPU {torch.cuda.get_device_name(0)} (capability {'.'.join(map(str, torch.cuda.get_device_capability(0)))}, "
          f"{torch.cuda.device_count()} visible)")
missing = []
for name in ("triton", "numpy", "scipy", "h5py", "tqdm", "nvtx", "pytest", "pytest_benchmark", "xdist"):
    try:
        module = importlib.import_module(name)
        print(f"  {name} {getattr(module, '__version__', '(no __version__)')}")
    except ImportError as err:
        missing.append(name)
        print(f"  {name} MISSING ({err})")
required = {"triton", "numpy", "pytest", "pytest_benchmark"} & set(missing)
print("missing optional modules: " + (", ".join(sorted(set(missing) - required)) or "none")
      + " (scipy: Radau solver and tests; h5py: data sets; tqdm: progress; nvtx: profiler ranges; xdist: parallel tests)")
sys.exit(f"missing required modules: {', '.join(sorted(required))}" if required else 0)
EOF
}

step_install() {
    "$PY" -m pip install --no-deps --no-build-isolation --no-index -e .
    "$PY" -c 'import amg_fast, amg_fast.kernels, amg_fast.ops; print("amg_fast imports from", amg_fast.__file__)'
}

pytest_workers() {  # GPU_CHECK_TEST_WORKERS=N: N pytest-xdist workers where xdist is installed (default: serial)
    if [[ -n ${GPU_CHECK_TEST_WORKERS:-} ]] && "$PY" -c 'import xdist' >/dev/null 2>&1; then
        echo "-n $GPU_CHECK_TEST_WORKERS"
    fi
}

step_tests_ops() {
    # shellcheck disable=SC2046
    timeout -s INT -k 30 "$T_TESTS" "$PY" -m pytest tests/ops tests/models/test_triton_equivalence.py -q -p no:cacheprovider $(pytest_workers)
}

step_tests_gpu() {
    local rc=0
    timeout -s INT -k 30 "$T_TESTS" "$PY" -m pytest tests -m gpu --ignore=tests/ops -q -p no:cacheprovider || rc=$?
    if [[ $rc == 5 ]]; then echo "(no tests marked gpu outside tests/ops)"; rc=0; fi
    return $rc
}

step_bench() {
    echo "bench knobs: AMG_BENCH_SIZES=${AMG_BENCH_SIZES:-default} AMG_BENCH_PROVIDERS=${AMG_BENCH_PROVIDERS:-default}" \
         "AMG_BENCH_COMPILE_SIZES=$AMG_BENCH_COMPILE_SIZES AMG_BENCH_DO_BENCH_MS=$AMG_BENCH_DO_BENCH_MS" \
         "AMG_BENCH_ROUND_BUDGET_S=$AMG_BENCH_ROUND_BUDGET_S"
    timeout -s INT -k 30 "$T_BENCH" "$PY" -m pytest bench/ --ignore=bench/test_bench_ks.py --benchmark-only \
        --benchmark-json="$JSON" --benchmark-columns=median,iqr,rounds --durations=10 -q -p no:cacheprovider
}

step_bench_table() {
    [[ -f $JSON ]] || { echo "no benchmark JSON at $JSON (the bench step wrote none)"; return 1; }
    "$PY" bench/bench_table.py "$JSON" > "$OUT_DIR/bench_table.md"
    cat "$OUT_DIR/bench_table.md"
}

step_data() {
    "$PY" scripts/generate_data.py --pde ks --nu 0.1 --n-train 256 --n-test 32 --out "$WORK/data" --device "$DEVICE"
}

train_run() {  # train_run NAME [extra flags]: 2-epoch AMGFNO, quick preset, on the data of step_data
    local name=$1; shift
    timeout -s INT -k 30 "$T_TRAIN" "$PY" scripts/train.py --model amgfno --preset quick --epochs 2 --device "$DEVICE" \
        --cache-dir "$WORK/data" --out "$WORK/runs/$name" "$@"
    mkdir -p "$OUT_DIR/train/$name"
    cp "$WORK/runs/$name/results.json" "$WORK/runs/$name/metrics.jsonl" "$WORK/runs/$name/config.json" \
        "$OUT_DIR/train/$name/"
}
step_train_reference() { train_run reference; }
step_train_fast() { train_run fast --fast-kernels; }
step_train_fast_graph() { train_run fast-graph --fast-kernels --cuda-graph; }

# -- runner --------------------------------------------------------------------------------------------
STEPS=(env install tests-ops tests-gpu bench bench-table data train-reference train-fast train-fast-graph)
declare -a RESULTS=() SECONDS_TAKEN=()
N_FAILED=0
now_ms() { date +%s%3N; }

run_step() {
    local i=$1 name=$2 log rc start
    log=$OUT_DIR/logs/$(printf '%02d' "$i")-$name.log
    if [[ ,${GPU_CHECK_SKIP:-}, == *",$name,"* ]]; then
        RESULTS[i]=skipped; SECONDS_TAKEN[i]=0; echo "== [$name] skipped (GPU_CHECK_SKIP)"; return
    fi
    echo; echo "== [$name] $(date -u +%H:%M:%S) (log: $log)"
    start=$(now_ms)
    set +e
    (set -e; "step_${name//-/_}") 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    set -e
    SECONDS_TAKEN[i]=$(awk -v a="$start" -v b="$(now_ms)" 'BEGIN { printf "%.1f", (b - a) / 1000 }')
    if [[ $rc == 0 ]]; then RESULTS[i]=pass; else RESULTS[i]="FAIL (exit $rc)"; N_FAILED=$((N_FAILED + 1)); fi
    echo "== [$name] ${RESULTS[i]} in ${SECONDS_TAKEN[i]} s"
}

TOTAL_START=$(now_ms)
for i in "${!STEPS[@]}"; do run_step "$i" "${STEPS[i]}"; done

# -- summary -------------------------------------------------------------------------------------------
{
    echo
    echo "## gpu_check summary: $GPU_NAME, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo
    echo "| step | result | seconds |"
    echo "|---|---|---:|"
    for i in "${!STEPS[@]}"; do echo "| ${STEPS[i]} | ${RESULTS[i]} | ${SECONDS_TAKEN[i]} |"; done
    echo "| total | $([[ $N_FAILED == 0 ]] && echo pass || echo "$N_FAILED failed") | $(awk -v a="$TOTAL_START" -v b="$(now_ms)" 'BEGIN { printf "%.1f", (b - a) / 1000 }') |"
    echo
    "$PY" - "$OUT_DIR/train" <<'EOF' || true
import json, sys
from pathlib import Path
rows = []
for name in ("reference", "fast", "fast-graph"):
    run = Path(sys.argv[1]) / name
    if (run / "results.json").exists():
        r = json.loads((run / "results.json").read_text())
        epochs = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
        last = f"{epochs[-1]['time_s']:.2f}" if epochs else "-"
        rows.append(f"| {name} | {r['wall_time_s']:.1f} | {last} | {r['nrmse']:.4f} | {r['device']} |")
    else:
        rows.append(f"| {name} | - | - | - | (no results.json) |")
print("| AMGFNO 2 epochs, quick KS | trainer wall time (s) | last epoch (s) | test nRMSE | device |\n"
      "|---|---:|---:|---:|---|")
print("\n".join(rows))
print("(trainer wall time: data loading, model build, training and evaluation; for the fast run it includes the "
      "Triton JIT compiles, so the last epoch's time compares the kernels)")
EOF
    echo
    echo "Results: $OUT_DIR (bench JSON: $(basename "$JSON"), bench_table.md, logs/, train/)"
} | tee "$OUT_DIR/summary.md"
[[ $N_FAILED == 0 ]]
