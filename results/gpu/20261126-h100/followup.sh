#!/usr/bin/env bash
# Second H100 call of 2026-11-26, after fixing what the campaign (first call) found: the CUDA tests
# again, the bf16 precision run, the spectral S = 1024 diagnostic, and the training-step bench of the
# reference and Triton providers (fp32 + bf16; the Triton bf16 step failed to compile in call 1).
# (the spectral probe ran as bench/diag_spectral_s1024.py, since renamed.)
# Usage: OUT=dir bash bench/results/20261126-h100/followup.sh
set -uo pipefail
cd "$(dirname "$0")/../../.."
export PYTHONUNBUFFERED=1 PIP_ROOT_USER_ACTION=ignore
R=$OUT; mkdir -p "$R/precision"
python3 -m pip install -q --no-deps --no-build-isolation --no-index -e . || exit 1
W=$(mktemp -d)
python3 scripts/generate_data.py --pde ks --nu 0.1 --n-train 256 --n-test 32 --out "$W" --device cuda > "$R/data.log" 2>&1
( timeout 200 python3 scripts/train.py --cache-dir "$W" --out "$R/precision/bf16-seed0" --model amgfno --n-train 256 \
    --n-test 32 --preset quick --device cuda --fast-kernels --cuda-graph --precision bf16 --seed 0 --checkpoint-every 1000 \
    > "$R/precision/bf16-seed0.log" 2>&1; echo "exit $?" >> "$R/precision/bf16-seed0.log" ) &
timeout 170 python3 -m pytest tests/ops tests/models/test_triton_equivalence.py -q -rf -p no:cacheprovider -n 6 \
    > "$R/tests-ops.log" 2>&1; echo "tests-ops exit $?"; tail -n 15 "$R/tests-ops.log"
wait
tail -n 4 "$R/precision/bf16-seed0.log"
timeout 80 python3 bench/probe_spectral_accuracy.py > "$R/diag_spectral_s1024.log" 2>&1; echo "diag exit $?"; cat "$R/diag_spectral_s1024.log" | tail -n 12
AMG_BENCH_PROVIDERS=reference,triton AMG_BENCH_STEP_SIZES=32,64,128 AMG_BENCH_DO_BENCH_MS=10,40 AMG_BENCH_ROUND_BUDGET_S=0.05 \
    timeout -s INT -k 10 130 python3 -m pytest bench/test_bench_train_step.py --benchmark-only -q -p no:cacheprovider \
    --benchmark-columns=median,rounds --benchmark-json="$R/bench-step2.json" > "$R/bench-step2.log" 2>&1; echo "bench exit $?"
[[ -f $R/bench-step2.json ]] && python3 scripts/bench_table.py "$R/bench-step2.json" > "$R/bench_table_step2.md" && tail -n 16 "$R/bench_table_step2.md"
