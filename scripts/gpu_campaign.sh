#!/usr/bin/env bash
# GPU campaign: time, verify and train on one GPU, writing results as it goes.
#
# Measured on an H200 (2026-11-26): env + install + data 35 s, bench 220 s, CUDA tests 75 s; the
# paper-preset runs at f = 32 take ~1.1 s an epoch each with three at once (~4 min for 200 epochs).
# Where one command may run only 10 minutes, split it: CAMPAIGN_SKIP=concurrent, then CAMPAIGN_SKIP=bench.
#
#   bash scripts/gpu_campaign.sh [RESULTS_DIR]      (default results/gpu/<UTC date>-<gpu>)
#
# Phases, most important first (each logs to RESULTS_DIR/logs/<NN>-<phase>.log; a failed phase is
# recorded and the next one still runs):
#   env        nvidia-smi, python / torch / triton / CUDA versions
#   install    pip install --no-deps --no-build-isolation --no-index -e . (on the torch + triton there)
#   data       KS nu = 0.1 data on the GPU: the paper's 2048 + 256 trajectories and the quick 256 + 32
#   bench      pytest bench/ on an idle GPU: each op (fwd, fwd+bwd) at S = 32, 128, 1024 (compiled at 128) and
#              the AMGFNO training step at S = 32, 64, 128 (eager / compiled at 32, 128 / triton / bf16, each
#              also replayed from
#              a CUDA graph, kernels per step) -> bench-{ops,step}.json, bench_table_*.md, summary.json; the
#              Triton step again with AMG_FAST_FFN_METHOD=fused -> bench-step-ffn-fused.json; then the probes
#              bench/probe_spectral_stages.py -> spectral_stages.json (the spectral conv stage by stage),
#              bench/probe_ffn.py -> ffn.json, bench/probe_spectral_accuracy.py -> spectral_accuracy.log
#   concurrent three things at once (the GPU is mostly idle under one eager process):
#              - fidelity: scripts/train.py --preset paper for each CAMPAIGN_FIDELITY run (default ffno,
#                s4ffno, amgfno at f = 32 and amgfno at f = 128), --fast-kernels --cuda-graph, in the
#                background; a run whose graph capture fails is re-run eagerly (say so in its log)
#              - tests: the CUDA test suite (tests/ops, whole-model equivalence, then -m gpu elsewhere), then
#                the spectral conv's opt-in reduced-precision paths as a diagnostic (tests-reduced-dots.log)
#              - precision: quick-preset AMGFNO in fp32 / tf32 / bf16 (seeds 0 and 1), graphed, in the
#                background
#              then waits for the training runs (each stopped at CAMPAIGN_T_RUNS seconds)
#   report     scripts/campaign_report.py -> fidelity.json, precision.json, report.md; phases.md
#
# Environment:
#   PYTHON               interpreter (default python3)
#   CAMPAIGN_EXPORT      a directory that receives campaign.tgz (RESULTS_DIR without checkpoints and
#                        rollouts) and campaign.log after every phase, each replaced atomically (for a
#                        machine whose results must be fetched, e.g. the device tool's $OUT)
#   CAMPAIGN_SKIP        comma-separated phases to leave out (env, install, data, bench, concurrent, report)
#   CAMPAIGN_FIDELITY    runs as MODEL:F[:VARIANT] words (default "ffno:32 s4ffno:32 amgfno:32 amgfno:128");
#                        VARIANT norminc adds --normalize --increment, s4data trains on the S4FFNO
#                        authors' KS reading (10 sines, k <= 7, t in [0, 5] at dt 0.2; docs/fidelity.md)
#   CAMPAIGN_BENCH_PARTS which bench parts run: ops, step, probe (default "ops,step,probe")
#   CAMPAIGN_PRECISION_SEEDS  seeds of the precision runs (default "0 1")
#   CAMPAIGN_EPOCHS      epochs of the fidelity runs (default: the paper preset's 200)
#   CAMPAIGN_N_TRAIN     training trajectories of the fidelity runs (default: the paper preset's 2048)
#   CAMPAIGN_TEST_WORKERS  pytest-xdist workers for the tests (default 6; 0 = serial)
#   CAMPAIGN_T_BENCH, CAMPAIGN_T_TESTS, CAMPAIGN_T_RUNS   per-phase / per-run limits in seconds
#                        (defaults 180, 240, 270)
#   CAMPAIGN_DRY_RUN=1   on a machine without a GPU: tiny sizes, eager training, no bench; tests only
#                        this script (not a GPU check)
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=${PYTHON:-python3}
export PIP_ROOT_USER_ACTION=ignore PYTHONUNBUFFERED=1
DRY=${CAMPAIGN_DRY_RUN:-0}
T_BENCH=${CAMPAIGN_T_BENCH:-180} T_TESTS=${CAMPAIGN_T_TESTS:-240} T_RUNS=${CAMPAIGN_T_RUNS:-270}
FIDELITY=${CAMPAIGN_FIDELITY:-ffno:32 s4ffno:32 amgfno:32 amgfno:128}
WORKERS=${CAMPAIGN_TEST_WORKERS:-6}
BENCH_PARTS=${CAMPAIGN_BENCH_PARTS:-ops,step,probe}
BENCH_FLAGS=(--benchmark-only --benchmark-columns=median,rounds -q -p no:cacheprovider)
S4DATA_FLAGS=(--ks-ic-terms 10 --ks-ic-max-wavenumber 7 --ks-t-end 5 --ks-frame-dt 0.2)

if "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; then
    DEVICE=cuda GPU_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
elif [[ $DRY == 1 ]]; then
    DEVICE=cpu GPU_NAME=cpu-dry-run
else
    echo "gpu_campaign: no usable CUDA GPU (torch.cuda.is_available() is False); CAMPAIGN_DRY_RUN=1 tries this" \
         "script on a CPU" >&2
    exit 3
fi
GPU_TAG=$(echo "$GPU_NAME" | tr '[:upper:]' '[:lower:]' | sed -e 's/^nvidia //' -e 's/[^a-z0-9]\+/-/g' -e 's/^-//' -e 's/-$//')
RESULTS=${1:-results/gpu/$(date -u +%Y%m%d)-$GPU_TAG}
mkdir -p "$RESULTS/logs" "$RESULTS/fidelity" "$RESULTS/precision"
RESULTS=$(cd "$RESULTS" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/amg_campaign.XXXXXX")  # data sets: not results
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$WORK"' EXIT
exec > >(tee -a "$RESULTS/campaign.log") 2>&1
echo "gpu_campaign: $GPU_NAME; results in $RESULTS; data in $WORK; $(date -u +%FT%TZ)"

if [[ $DRY == 1 ]]; then  # the smallest sizes that exercise every path
    PRESET_FLAGS=(--preset quick --n-train 16 --n-test 4 --epochs 2 --width 16 --eval-every 1)
    QUICK_FLAGS=(--preset quick --n-train 16 --n-test 4 --epochs 2 --width 16)
    TRAIN_FLAGS=(--device cpu) DATA_N=(16 4) QUICK_N=(16 4)
    FIDELITY="ffno:32 amgfno:32:norminc amgfno:32:s4data" PRECISION_SEEDS="0" TEST_PATHS=(tests/ops/test_backend.py)
else
    PRESET_FLAGS=(--preset paper ${CAMPAIGN_EPOCHS:+--epochs $CAMPAIGN_EPOCHS} ${CAMPAIGN_N_TRAIN:+--n-train $CAMPAIGN_N_TRAIN})
    QUICK_FLAGS=(--preset quick)
    TRAIN_FLAGS=(--device cuda --fast-kernels --cuda-graph) DATA_N=(${CAMPAIGN_N_TRAIN:-2048} 256) QUICK_N=(256 32)
    PRECISION_SEEDS=${CAMPAIGN_PRECISION_SEEDS:-0 1} TEST_PATHS=(tests/ops tests/models/test_triton_equivalence.py)
fi

export_results() {  # the results so far, for a machine whose files must be fetched
    [[ -n ${CAMPAIGN_EXPORT:-} ]] || return 0
    mkdir -p "$CAMPAIGN_EXPORT"
    tar -czf "$CAMPAIGN_EXPORT/.campaign.tgz" --exclude='*.pt' --exclude='rollout.npz' --exclude='*.tmp*' \
        -C "$(dirname "$RESULTS")" "$(basename "$RESULTS")" && mv "$CAMPAIGN_EXPORT/.campaign.tgz" "$CAMPAIGN_EXPORT/campaign.tgz"
    cp "$RESULTS/campaign.log" "$CAMPAIGN_EXPORT/.campaign.log" && mv "$CAMPAIGN_EXPORT/.campaign.log" "$CAMPAIGN_EXPORT/campaign.log"
}

# -- phases --------------------------------------------------------------------------------------
phase_env() {
    [[ $DEVICE == cuda ]] && nvidia-smi
    "$PY" - <<'PYTHON'
import platform, torch, triton
print(f"python {platform.python_version()}, torch {torch.__version__} (CUDA {torch.version.cuda}), triton {triton.__version__}")
if torch.cuda.is_available():
    print(torch.cuda.get_device_name(0), torch.cuda.get_device_properties(0))
PYTHON
}

phase_install() {
    "$PY" -m pip install -q --no-deps --no-build-isolation --no-index -e .
    "$PY" -c 'import amg_fast, amg_fast.kernels; print("amg_fast from", amg_fast.__file__)'
}

phase_data() {
    # all trajectories in one batch on a GPU (the solver is batch-parallel)
    "$PY" scripts/generate_data.py --pde ks --nu 0.1 --n-train "${DATA_N[0]}" --n-test "${DATA_N[1]}" --out "$WORK/data" --device "$DEVICE" \
        --batch-size $(( DATA_N[0] + DATA_N[1] ))
    "$PY" scripts/generate_data.py --pde ks --nu 0.1 --n-train "${QUICK_N[0]}" --n-test "${QUICK_N[1]}" --out "$WORK/data" --device "$DEVICE"
    if [[ " $FIDELITY " == *":s4data "* ]]; then  # the S4FFNO authors' reading, in a folder of its own
        "$PY" scripts/generate_data.py --pde ks --nu 0.1 --n-train "${DATA_N[0]}" --n-test "${DATA_N[1]}" --out "$WORK/s4data" \
            --device "$DEVICE" --batch-size $(( DATA_N[0] + DATA_N[1] )) "${S4DATA_FLAGS[@]}"
    fi
}

phase_bench() {
    [[ $DEVICE == cuda ]] || { echo "(no bench in a dry run: CPU timings mean nothing)"; return 0; }
    local part
    for part in ${BENCH_PARTS//,/ }; do
        [[ $part == ops || $part == step || $part == probe ]] || { echo "CAMPAIGN_BENCH_PARTS: unknown part '$part' (allowed: ops, step, probe)"; return 2; }
    done
    export AMG_BENCH_SIZES=32,128,1024 AMG_BENCH_STEP_SIZES=32,64,128 AMG_BENCH_COMPILE_SIZES=128 \
        AMG_BENCH_MODES=fwd,fwd+bwd AMG_BENCH_DO_BENCH_MS=10,40 AMG_BENCH_ROUND_BUDGET_S=0.05
    local rc=0 flags=("${BENCH_FLAGS[@]}")
    # the ops, then the training step in a process of its own (its kernel count runs the profiler)
    if [[ ,$BENCH_PARTS, == *,ops,* ]]; then
        timeout -s INT -k 20 "$T_BENCH" "$PY" -m pytest bench/ --ignore=bench/test_bench_ks.py \
            --ignore=bench/test_bench_train_step.py --benchmark-json="$RESULTS/bench-ops.json" "${flags[@]}" || rc=1
        [[ -f $RESULTS/bench-ops.json ]] && "$PY" bench/bench_table.py "$RESULTS/bench-ops.json" > "$RESULTS/bench_table_ops.md"
        export_results
    fi
    [[ ,$BENCH_PARTS, == *,step,* ]] && { bench_step || rc=1; }
    if [[ ,$BENCH_PARTS, == *,probe,* ]]; then
        # the spectral conv stage by stage at S = 128 and 1024 (why the Triton path trailed eager at 1024), and
        # the FFN's epilogue path against its reference and the fused-MLP floor (is a Triton MLP worth it?)
        timeout -s INT -k 10 90 "$PY" bench/probe_spectral_stages.py --json "$RESULTS/spectral_stages.json" || rc=1
        timeout -s INT -k 10 60 "$PY" bench/probe_ffn.py --json "$RESULTS/ffn.json" || rc=1
        # the spectral conv's error stage by stage (the cuFFT inverse-transform fix of 2026-11-26)
        timeout -s INT -k 10 90 "$PY" bench/probe_spectral_accuracy.py > "$RESULTS/spectral_accuracy.log" 2>&1 || rc=1
        tail -n 10 "$RESULTS/spectral_accuracy.log"
    fi
    cat "$RESULTS"/bench_table_*.md 2>/dev/null
    export_results
    return $rc
}

bench_step() {  # the training step, in a process of its own (its kernel count runs the profiler)
    # On the H200 (2026-11-26) this process exited non-zero after all its tests passed and its JSON was
    # written (the profiler behind the kernel count is the suspect): keep a written JSON, say the exit
    # code, and re-run without the count only when no JSON came out.
    local step_rc=0 rc=0 flags=("${BENCH_FLAGS[@]}")
    export AMG_BENCH_COMPILE_SIZES=32,128
    timeout -s INT -k 20 "$T_BENCH" "$PY" -m pytest bench/test_bench_train_step.py \
        --benchmark-json="$RESULTS/bench-step.json" "${flags[@]}" || step_rc=$?
    echo "train-step bench: exit $step_rc"
    if [[ $step_rc != 0 ]]; then
        rc=1
        [[ -f $RESULTS/bench-step.json ]] || AMG_BENCH_KERNEL_COUNT=0 timeout -s INT -k 20 "$T_BENCH" "$PY" -m pytest \
            bench/test_bench_train_step.py --benchmark-json="$RESULTS/bench-step.json" "${flags[@]}"
    fi
    [[ -f $RESULTS/bench-step.json ]] && "$PY" bench/bench_table.py "$RESULTS/bench-step.json" \
        --summary "$RESULTS/summary.json" > "$RESULTS/bench_table_step.md"
    export_results
    # the Triton step again with the fused feed-forward kernels (feed_forward method="fused"): which
    # path method="auto" should take (kernels/limits.py)
    AMG_FAST_FFN_METHOD=fused AMG_BENCH_PROVIDERS=triton AMG_BENCH_KERNEL_COUNT=1 timeout -s INT -k 20 "$T_BENCH" \
        "$PY" -m pytest bench/test_bench_train_step.py --benchmark-json="$RESULTS/bench-step-ffn-fused.json" "${flags[@]}" \
        || rc=1
    [[ -f $RESULTS/bench-step-ffn-fused.json ]] && "$PY" bench/bench_table.py "$RESULTS/bench-step-ffn-fused.json" \
        > "$RESULTS/bench_table_step_ffn_fused.md"
    export_results
    return $rc
}

train_run() {  # train_run DIR LOG FLAGS...: one training run; a failed graph capture is retried eagerly
    local dir=$1 log=$2; shift 2
    timeout -s INT -k 20 "$T_RUNS" "$PY" scripts/train.py --cache-dir "$WORK/data" --out "$dir" "$@" > "$log" 2>&1
    local rc=$?
    if [[ $rc != 0 ]] && grep -q -- "--cuda-graph: capturing" "$log"; then
        echo "[campaign] graph capture failed (above); re-running without --cuda-graph" >> "$log"
        rm -rf "$dir"
        local args=() a
        for a in "$@"; do [[ $a == --cuda-graph ]] || args+=("$a"); done
        timeout -s INT -k 20 "$T_RUNS" "$PY" scripts/train.py --cache-dir "$WORK/data" --out "$dir" "${args[@]}" >> "$log" 2>&1
        rc=$?
    fi
    echo "[campaign] exit $rc" >> "$log"
    return $rc
}

fidelity_runs() {  # all CAMPAIGN_FIDELITY runs at once; returns how many failed
    local pids=() run model res variant name extra failed=0 pid
    for run in $FIDELITY; do
        IFS=: read -r model res variant <<< "$run"
        name=$model-f$res${variant:+-$variant} extra=()
        case ${variant:-} in
            "") ;;
            norminc) extra=(--normalize --increment) ;;
            s4data) extra=(--data "$(ls "$WORK"/s4data/*train*.h5 | head -n 1)") ;;
            *) echo "CAMPAIGN_FIDELITY: unknown variant '$variant' in '$run' (allowed: norminc, s4data)"; failed=$((failed + 1)); continue ;;
        esac
        train_run "$RESULTS/fidelity/$name" "$RESULTS/fidelity/$name.log" --model "$model" --res "$res" \
            "${PRESET_FLAGS[@]}" "${TRAIN_FLAGS[@]}" "${extra[@]}" &
        pids+=($!)
    done
    for pid in "${pids[@]}"; do wait "$pid" || failed=$((failed + 1)); done
    return $failed
}

precision_runs() {  # quick-preset AMGFNO per precision mode and seed, three at a time
    local seed mode failed=0 pids=() pid
    for seed in $PRECISION_SEEDS; do
        pids=()
        for mode in fp32 tf32 bf16; do
            train_run "$RESULTS/precision/$mode-seed$seed" "$RESULTS/precision/$mode-seed$seed.log" --model amgfno \
                --n-train "${QUICK_N[0]}" --n-test "${QUICK_N[1]}" "${QUICK_FLAGS[@]}" "${TRAIN_FLAGS[@]}" \
                --precision "$mode" --seed "$seed" --checkpoint-every 1000 &
            pids+=($!)
        done
        for pid in "${pids[@]}"; do wait "$pid" || failed=$((failed + 1)); done
    done
    return $failed
}

tests_cuda() {
    local xdist=()
    [[ $WORKERS != 0 ]] && "$PY" -c 'import xdist' 2>/dev/null && xdist=(-n "$WORKERS")
    local rc=0
    timeout -s INT -k 20 "$T_TESTS" "$PY" -m pytest "${TEST_PATHS[@]}" -q -rf \
        -p no:cacheprovider "${xdist[@]}" > "$RESULTS/tests-ops.log" 2>&1 || rc=$?
    tail -n 25 "$RESULTS/tests-ops.log"
    local rc2=0
    timeout -s INT -k 20 "$T_TESTS" "$PY" -m pytest tests -m gpu --ignore=tests/ops -q -rf -p no:cacheprovider \
        > "$RESULTS/tests-gpu.log" 2>&1 || rc2=$?
    [[ $rc2 == 5 ]] && rc2=0  # no test selected
    tail -n 15 "$RESULTS/tests-gpu.log"
    # Diagnostic, not pass/fail: the spectral conv's reduced-precision MMA paths (plain TF32, bf16),
    # off by default since they failed on the H200 (kernels/spectral_conv.py: REDUCED_PRECISION_DOTS).
    AMG_FAST_SPECTRAL_REDUCED_DOTS=1 timeout -s INT -k 20 "$T_TESTS" "$PY" -m pytest tests/ops/test_spectral_conv_triton.py \
        -k "gpu or bf16" -q -rf -p no:cacheprovider > "$RESULTS/tests-reduced-dots.log" 2>&1
    echo "reduced-precision spectral paths (diagnostic): $(tail -n 1 "$RESULTS/tests-reduced-dots.log")"
    return $((rc || rc2))
}

phase_concurrent() {
    fidelity_runs > "$RESULTS/logs/fidelity.out" 2>&1 &
    local fidelity_pid=$! rc=0
    precision_runs > "$RESULTS/logs/precision.out" 2>&1 &
    local precision_pid=$!
    echo "fidelity runs started: $FIDELITY (logs in fidelity/*.log); precision runs started (precision/*.log)"
    tests_cuda || rc=1
    export_results
    echo "tests done $(date -u +%T); waiting for the training runs"
    wait "$precision_pid" || rc=1
    export_results
    wait "$fidelity_pid" || rc=1
    for f in "$RESULTS"/fidelity/*.log "$RESULTS"/precision/*.log; do echo "== $f"; tail -n 4 "$f"; done
    return $rc
}

phase_report() {
    "$PY" scripts/campaign_report.py "$RESULTS" > "$RESULTS/report.md"
    cat "$RESULTS/report.md"
}

# -- runner ----------------------------------------------------------------------------------------
PHASES=(env install data bench concurrent report)
declare -a STATUS=() SECS=()
for i in "${!PHASES[@]}"; do
    name=${PHASES[i]}
    if [[ ,${CAMPAIGN_SKIP:-}, == *",$name,"* ]]; then STATUS[i]=skipped SECS[i]=0; continue; fi
    echo; echo "== [$name] $(date -u +%T)"
    start=$(date +%s)
    "phase_$name" 2>&1 | tee "$RESULTS/logs/$(printf '%02d' "$i")-$name.log"
    rc=${PIPESTATUS[0]}
    SECS[i]=$(( $(date +%s) - start ))
    if [[ $rc == 0 ]]; then STATUS[i]=pass; else STATUS[i]="FAIL (exit $rc)"; fi
    echo "== [$name] ${STATUS[i]} in ${SECS[i]} s"
    {
        echo "| phase | result | seconds |"; echo "|---|---|---:|"
        for j in "${!PHASES[@]}"; do echo "| ${PHASES[j]} | ${STATUS[j]:-not run} | ${SECS[j]:-} |"; done
    } > "$RESULTS/phases.md"
    export_results
done
cat "$RESULTS/phases.md"
[[ $(grep -c FAIL "$RESULTS/phases.md") == 0 ]]
