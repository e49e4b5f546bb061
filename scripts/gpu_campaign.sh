#!/usr/bin/env bash
# One GPU session, within a budget: the CUDA tests, the benchmarks, then the missing runs of the
# sweeps it is given, in priority order, exported so that the next session continues them.
# A thin script over pytest, bench/gpu_summary.py and scripts/reproduce.py run/export/report.
#
#   bash scripts/gpu_campaign.sh [RESULTS_DIR]      (default results/gpu/<UTC date>-<gpu>)
#
# Phases (each logs to RESULTS_DIR/logs/<phase>.log; a failed phase is recorded, the next still runs):
#   install  pip install --no-deps --no-build-isolation --no-index -e . (the machine's torch + triton)
#   tests    the CUDA tests (12 workers): tests/ops and the whole-model equivalence (kernels compiled on the GPU), then
#            `-m gpu` over the rest of tests/ (each also in logs/tests_kernels.log, tests_gpu.log: the verdict judges
#            each run); with the bench phase to come, beside them
#            `bench/gpu_summary.py --warm-up` compiles the bench's kernels into Triton's cache (stopped with the tests)
#   bench    bench/gpu_summary.py (every precision mode, per-op floors, kernels per step, the kernel
#            switches as variants) -> RESULTS_DIR/bench/summary.{json,md}; then the probes of CAMPAIGN_PROBES
#            (bench/probe_spectral_stages.py at S = 128 and 32, bench/probe_spectral_accuracy.py,
#            bench/probe_ffn.py) -> RESULTS_DIR/probes/; the variants that beat the default step in every cell they
#            were timed in (bench/adopt_variants.py -> RESULTS_DIR/bench/adopted.md) are kept in CAMPAIGN_WORK for the
#            runs; before they are judged, the tests of those winners that the tests phase's limit cut off (variant
#            tests run last) run within CAMPAIGN_T_RETESTS (logs/tests_retest.log) and the verdict records them
#            (bench/cuda_verdict.py update): a winner is adopted only when all its tests ran and passed
#   runs     for each sweep of CAMPAIGN_SWEEPS, in order: a copy of its committed tree (results/<NAME>: the
#            runs earlier sessions finished) in CAMPAIGN_WORK, or the sweep an earlier call on this machine
#            left there (its finished runs are not trained again, a run it stopped resumes from its
#            checkpoint); `reproduce.py run` with what is left of the budget (it starts no run it cannot
#            finish), `export` of the finished runs to RESULTS_DIR/sweeps/<NAME>, `report`. With
#            --fast-kernels, unless a test of the tests phase failed in this call: then the reference
#            kernels (a kernel that fails its CUDA tests must not train the sweep; CUDA graphs still on), also in
#            a later call without the tests phase on this machine (the verdict is kept in CAMPAIGN_WORK). The
#            tests phase records its verdict (pass; incomplete: cut off by its time limit with tests passed and none
#            failed; else fail, also when pytest could not start, collect or finish; failed tests marked `variant`
#            -- kernel paths off by default -- alone fail no kernel the runs take: their variants are named,
#            recorded and not adopted) on the kernel sources in
#            RESULTS_DIR/kernels_verdict.json (bench/cuda_verdict.py); a call without the tests phase
#            and no failure on this machine keeps --fast-kernels only where a verdict on the same sources, torch,
#            triton and compute capability passed -- this machine's, or one committed under CAMPAIGN_TREES/gpu/
#            (with the switches that session's bench adopted, on a fresh machine) -- else the reference kernels,
#            unless CAMPAIGN_TRUST_KERNELS=1. With the
#            kernel switches the latest bench on this machine adopted (unless CAMPAIGN_ADOPT=0; a variant whole or
#            not at all: not when one of its switches is set already); when they are two or more variants, their
#            step together is timed first (bench/gpu_summary.py --parts triton,profile at S = 32 and 128 in the
#            adopted modes -> RESULTS_DIR/bench-adopted/, its budget CAMPAIGN_T_ADOPTED; not again on this machine
#            once complete for the same sources, modes and switches): the bench timed each alone, the runs train
#            with all of them, which a failure there (a step's float64 check missed, a step failed, no summary)
#            drops in this and later calls here (parts skipped or a profile failed: they stay, timed again later)
# After every phase RESULTS_DIR (no checkpoints, rollouts or data) is packed into
# $CAMPAIGN_EXPORT/campaign.tgz, with campaign.log beside it.
#
# Back on the development machine, with the fetched campaign.tgz unpacked into FETCHED/:
#   python scripts/reproduce.py export FETCHED/<run>/sweeps/headline --to results/headline
#   python scripts/reproduce.py report headline --out results/headline     # then commit results/
#
# Environment:
#   CAMPAIGN_BUDGET_S   seconds for the whole script (default 540: one device call of at most 10 minutes)
#   CAMPAIGN_PHASES     which phases run, comma-separated (default install,tests,bench,runs)
#   CAMPAIGN_T_TESTS, CAMPAIGN_T_BENCH, CAMPAIGN_T_PROBES   caps in seconds (default 150, 240, 120; T_PROBES
#                       for each of the three probes)
#   CAMPAIGN_T_RETESTS  cap in seconds for the winning variants' unrun tests after the bench (default 45; under 15,
#                       or under 15 s of the budget left: not started, those variants not adopted)
#   CAMPAIGN_T_ADOPTED  gpu_summary.py's budget for the adopted switches' step before the runs (default 45; its
#                       imports and a 15-s grace come on top; under 30, or under 30 s of the budget left: not timed)
#   CAMPAIGN_SWEEPS     sweeps in priority order, words NAME:EXPERIMENT:PRESET:SEEDS[:KEY=VALUE,...]
#                       (SEEDS comma-separated; the KEY=VALUE pairs go to --set); default
#                       "precision:precision:quick:0,1,2 headline:headline:paper:0,1,2" (issue 19's nRMSE per
#                       precision mode first, seed by seed: it decides the paper preset's precision, so the
#                       mode the headline's remaining runs train in; then issue 21's headline sweep)
#   CAMPAIGN_VARIANTS   --variant words for gpu_summary.py (default: the kernel switches of docs/kernels.md)
#   CAMPAIGN_BENCH_ARGS more arguments for gpu_summary.py, e.g. "--parts triton,profile,variants --sizes 32,128"
#                       (a short bench: the steps, where their time goes, the switch variants)
#   CAMPAIGN_PROBES     which probes the bench phase runs after gpu_summary.py, in order: words among stages,
#                       accuracy, ffn (default all three; empty: none; in a dry run none unless named: they need
#                       CUDA). They take what the bench leaves (it runs ~15 s past CAMPAIGN_T_BENCH: imports,
#                       adoption; and the winners' retest, up to CAMPAIGN_T_RETESTS + 15 s); a probe with under 10 s
#                       left is skipped, one stopped at its limit keeps its rows
#   CAMPAIGN_TREES      where the committed sweep trees are (default results: results/<NAME>; in a dry run none,
#                       unless set: its smoke preset cannot continue a committed paper or quick sweep)
#   CAMPAIGN_WORK       where the sweeps train, with checkpoints and data; kept after the script, so that a
#                       second call on the same machine continues them (default /tmp/amg_campaign_work on a
#                       GPU; in a dry run a temporary folder, removed at the end, unless set)
#   CAMPAIGN_TESTS      the tests phase's test paths (default tests/models/test_triton_equivalence.py tests/ops: the
#                       whole model on the default kernels first, so that a phase cut short by its time has run it;
#                       set: the verdict names them, and its pass or incomplete keeps no later call's Triton kernels)
#   CAMPAIGN_RUN_FLAGS  the flags of the sweeps' runs (default --fast-kernels --cuda-graph; dry run --device cpu)
#   CAMPAIGN_EXPORT     a folder that receives campaign.tgz and campaign.log (e.g. the device tool's $OUT)
#   CAMPAIGN_RESERVE_S  seconds kept for export and packing at the end (default 30)
#   CAMPAIGN_ADOPT      1 (default): the runs take the switches of the variants the bench found faster everywhere
#                       (each run records them: machine.json's software.kernel_switches); 0: the code's defaults
#   CAMPAIGN_TRUST_KERNELS  1: a call without the tests phase keeps --fast-kernels where no CUDA-test verdict on
#                       these kernel sources is found (default 0: the reference kernels then; a failed one always wins)
#   CAMPAIGN_ADOPT_MODES  the precision modes a variant must win in to be adopted (comma-separated; default every
#                       mode the bench timed; fp32 only when every run of this machine trains in fp32: the adopted
#                       switches act on every run)
#   CAMPAIGN_DRY_RUN=1  on a machine without a GPU: the smoke preset, bench --dry-run, one small test file
#                       (tests this script; CI runs it)
#   PYTHON              interpreter (default python3)
# Exit status: 0 when every phase passed; 1 otherwise (the sweeps' exit 3 -- runs left for the next
# session -- and 4 -- only diverged runs left, which later sessions leave too -- count as passed).
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY=${PYTHON:-python3}
export PIP_ROOT_USER_ACTION=ignore PYTHONUNBUFFERED=1
START=$(date +%s)
BUDGET=${CAMPAIGN_BUDGET_S:-540} RESERVE=${CAMPAIGN_RESERVE_S:-30}
PHASES=${CAMPAIGN_PHASES:-install,tests,bench,runs}
T_TESTS=${CAMPAIGN_T_TESTS:-150} T_BENCH=${CAMPAIGN_T_BENCH:-240} T_PROBES=${CAMPAIGN_T_PROBES:-120}
T_RETESTS=${CAMPAIGN_T_RETESTS:-45} T_ADOPTED=${CAMPAIGN_T_ADOPTED:-45}
SWEEPS=${CAMPAIGN_SWEEPS:-precision:precision:quick:0,1,2 headline:headline:paper:0,1,2}
# the variants, the most informative first (a bench budget that ends early drops the last). The H200 of
# 2026-11-30 (results/gpu/20261130-0050-h200/bench) timed eight against the defaults of 2026-11-29; one won
# where it counts: the feed-forward's row GEMMs in fp32 (1.12x / 1.14x), fp32 mode's default since. These time
# that default against the epilogue it replaced (fp32 only), then the row GEMMs as persistent programs (new,
# fp32 only: the other modes run the epilogue), the epilogue path's dh by one Triton row GEMM with the ReLU mask
# and bias sums (new; TF32 and bf16 only),
# the S4D Toeplitz product on the CUDA cores (new, every mode), the S4D memory readout's forward and dx as
# 3xTF32 row GEMMs (new, fp32 only: cuBLAS's fp32 GEMMs run them on the CUDA cores), the Triton weight gradients (the row GEMMs' now too), the spectral conv's DFT GEMMs in Triton (1.02x / 1.05x
# at S = 32, slower at 128; the transform kernel's input tile the register operand since), the plain gate on
# cuBLAS (1.02x / 1.01x in fp32, 0.98x in TF32 at 128) and the spectral conv's torch.fft transforms at S < 512
# (never timed in fp32 mode, where cuBLAS runs the DFT GEMMs on the CUDA cores: ~2 of the ~4 ms it takes there),
# those transforms with our Gauss mixing (new: in fp32 mode the mixing's 3xTF32 dots on tensor cores, where
# cuBLAS's fp32 mixing runs 6.7 GFLOP a layer forward on the CUDA cores; 3 + 4 launches a layer against 7 + 11),
# the plain gate's backward on 64-row wgmma tiles (new; fp32 and TF32: its 32-row tiles run mma.sync), and again
# the spectral conv on our kernels (0.74-0.94x on 2026-11-30; since, the transform's input tile is its MMA's
# register operand and fp32 mode's forward mixing reads W's split planes K-major).
# Dropped, slower or even in every cell on 2026-11-29 and 2026-11-30: the fused readout (0.86-0.92x), the gate's split weights (1.00x), the S4D kernels' channel blocks
# first (1.00x); before: the fused feed-forward, the mixing's four products, W read in place, its plain tf32x3
# and x3 dots, the S4D lag loop. Removed after the H200 of 2026-11-30 (results/gpu/20261130-2354-h200): the row
# GEMMs' weight gradients by a 3xTF32 planes kernel (0.87x in fp32; its CUDA test failed). The same session's
# spectral_dfttriton (1.02-1.06x in fp32 and TF32, 1.00x in bf16) is the default since 2026-12-01: the old
# default, cuBLAS's DFT GEMMs, is timed as spectral_dftcublas. Dropped then, slower in every cell of two
# sessions: s4d_fma (0.65-0.91x) and spectral_fftgauss (0.34-0.71x); spectral_fftgauss's switches stay, s4d_fma's
# kernels and its switch AMG_FAST_S4D_FMA were removed since.
VARIANTS=${CAMPAIGN_VARIANTS:-ffn_epilogue:AMG_FAST_FFN_METHOD=epilogue ffn_persistent:AMG_FAST_FFN_PERSISTENT=1 \
ffn_dh_triton:AMG_FAST_FFN_DH=triton \
readout_gemm:AMG_FAST_READOUT_GEMM=1 \
wgrad_triton:AMG_FAST_WGRAD=triton \
spectral_dftcublas:AMG_FAST_SPECTRAL_DFT_GEMM=torch gate_cublas:AMG_FAST_GATE_METHOD=cublas \
spectral_fft:AMG_FAST_SPECTRAL_TRANSFORM=fft gate_bwd_wgmma:AMG_FAST_GATE_BWD_WGMMA=1 \
spectral_triton:AMG_FAST_SPECTRAL_MIX=gauss}
DRY=${CAMPAIGN_DRY_RUN:-0} TREES=${CAMPAIGN_TREES:-results} ADOPT=${CAMPAIGN_ADOPT:-1} ADOPT_MODES=${CAMPAIGN_ADOPT_MODES:-}
TRUST=${CAMPAIGN_TRUST_KERNELS:-0}
PROBES=${CAMPAIGN_PROBES-stages accuracy ffn}
read -r -a BENCH_ARGS <<< "${CAMPAIGN_BENCH_ARGS:-}"

for word in ${PHASES//,/ }; do
    [[ ,install,tests,bench,runs, == *",$word,"* ]] || { echo "CAMPAIGN_PHASES: unknown phase '$word' (allowed: install, tests, bench, runs)" >&2; exit 2; }
done
for word in $PROBES; do
    [[ " stages accuracy ffn " == *" $word "* ]] || { echo "CAMPAIGN_PROBES: unknown probe '$word' (allowed: stages, accuracy, ffn)" >&2; exit 2; }
done
[[ $ADOPT == 0 || $ADOPT == 1 ]] || { echo "CAMPAIGN_ADOPT: '$ADOPT' is not 0 or 1" >&2; exit 2; }
[[ $TRUST == 0 || $TRUST == 1 ]] || { echo "CAMPAIGN_TRUST_KERNELS: '$TRUST' is not 0 or 1" >&2; exit 2; }
[[ -z $ADOPT_MODES || $ADOPT_MODES =~ ^(fp32|tf32|bf16)(,(fp32|tf32|bf16))*$ ]] \
    || { echo "CAMPAIGN_ADOPT_MODES: '$ADOPT_MODES' is not a comma-separated list of fp32, tf32, bf16" >&2; exit 2; }
for n in "$BUDGET" "$RESERVE" "$T_TESTS" "$T_BENCH" "$T_PROBES" "$T_RETESTS" "$T_ADOPTED"; do
    [[ $n =~ ^[0-9]+$ ]] || { echo "CAMPAIGN_*_S / CAMPAIGN_T_*: '$n' is not a whole number of seconds" >&2; exit 2; }
done
if "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; then
    GPU_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1) RUN_FLAGS=(--fast-kernels --cuda-graph)
    # 16 cores: 12 workers and the bench's warm-up (2026-11-30: 8 workers ran 697 of 731 tests in 105 s; now 831)
    TEST_PATHS=(tests/models/test_triton_equivalence.py tests/ops) BENCH_FLAGS=() TEST_WORKERS=12
elif [[ $DRY == 1 ]]; then
    GPU_NAME=cpu-dry-run RUN_FLAGS=(--device cpu) TEST_PATHS=(tests/ops/test_backend.py) BENCH_FLAGS=(--dry-run) TEST_WORKERS=0
    PROBES=${CAMPAIGN_PROBES-}  # they need CUDA: none unless named (a test's stand-in interpreter runs them)
    VARIANTS=${CAMPAIGN_VARIANTS:-ffn_epilogue:AMG_FAST_FFN_METHOD=epilogue}  # one: CPU time
    TREES=${CAMPAIGN_TREES:-}  # the committed trees are paper / quick sweeps: a smoke run cannot continue them
else
    echo "gpu_campaign: no usable CUDA GPU (torch.cuda.is_available() is False); CAMPAIGN_DRY_RUN=1 tries this script on a CPU" >&2
    exit 3
fi
[[ -n ${CAMPAIGN_TESTS:-} ]] && read -r -a TEST_PATHS <<< "$CAMPAIGN_TESTS"
(( ${#TEST_PATHS[@]} )) || { echo "CAMPAIGN_TESTS: '${CAMPAIGN_TESTS:-}' names no test path" >&2; exit 2; }
[[ -n ${CAMPAIGN_RUN_FLAGS:-} ]] && read -r -a RUN_FLAGS <<< "$CAMPAIGN_RUN_FLAGS"
GPU_TAG=$(echo "$GPU_NAME" | tr '[:upper:]' '[:lower:]' | sed -e 's/^nvidia //' -e 's/[^a-z0-9]\+/-/g' -e 's/^-//' -e 's/-$//')
RESULTS=${1:-results/gpu/$(date -u +%Y%m%d-%H%M)-$GPU_TAG}
mkdir -p "$RESULTS/logs" && RESULTS=$(cd "$RESULTS" && pwd)
DRY_WORK=  # the dry run's temporary WORK, removed at the exit
if [[ -n ${CAMPAIGN_WORK:-} || $DRY != 1 ]]; then  # sweeps with checkpoints and data: not results
    WORK=${CAMPAIGN_WORK:-${TMPDIR:-/tmp}/amg_campaign_work}; mkdir -p "$WORK"
else
    WORK=$(mktemp -d "${TMPDIR:-/tmp}/amg_campaign.XXXXXX"); DRY_WORK=$WORK
fi
WARM_PID=  # the bench's warm-up, while it runs beside the tests
stop_warm_up() {  # TERM (a background job ignores INT), KILL after 20 s (a kernel compiling in ptxas)
    [[ -n $WARM_PID ]] || return 0
    kill -TERM "$WARM_PID" 2>/dev/null
    for _ in $(seq 40); do kill -0 "$WARM_PID" 2>/dev/null || break; sleep 0.5; done
    kill -KILL "$WARM_PID" 2>/dev/null; wait "$WARM_PID" 2>/dev/null
    WARM_PID=
}
trap 'stop_warm_up; [[ -n ${DRY_WORK:-} ]] && rm -rf "$DRY_WORK"' EXIT
exec > >(tee -a "$RESULTS/campaign.log") 2>&1
echo "gpu_campaign: $GPU_NAME; budget ${BUDGET} s; results in $RESULTS; $(date -u +%FT%TZ)"

left() { echo $(( START + BUDGET - $(date +%s) )); }            # seconds of the budget left
# a phase's limit: LIMIT or what the budget leaves after RESERVE, at least 1 (`timeout 0` would mean no limit, a
# negative one is an error)
cap() { local l; l=$(( $(left) - RESERVE )); l=$(( $1 < l ? $1 : l )); echo $(( l > 1 ? l : 1 )); }

pack() {  # RESULTS (without checkpoints, rollouts or data) -> $CAMPAIGN_EXPORT/campaign.tgz, atomically
    [[ -n ${CAMPAIGN_EXPORT:-} ]] || return 0
    mkdir -p "$CAMPAIGN_EXPORT"
    tar -czf "$CAMPAIGN_EXPORT/.campaign.tgz" --exclude='*.pt' --exclude='rollout.npz' --exclude='*.h5' \
        --exclude='*.tmp*' -C "$(dirname "$RESULTS")" "$(basename "$RESULTS")" \
        && mv "$CAMPAIGN_EXPORT/.campaign.tgz" "$CAMPAIGN_EXPORT/campaign.tgz"
    cp "$RESULTS/campaign.log" "$CAMPAIGN_EXPORT/.campaign.log" && mv "$CAMPAIGN_EXPORT/.campaign.log" "$CAMPAIGN_EXPORT/campaign.log"
}

phase_install() {
    if [[ $DRY == 1 ]]; then echo "(dry run: the package is installed already)"; else
        "$PY" -m pip install -q --no-deps --no-build-isolation --no-index -e . || return 1; fi
    "$PY" -c 'import platform, torch, triton, amg_fast
print(f"python {platform.python_version()}, torch {torch.__version__} (CUDA {torch.version.cuda}), triton {triton.__version__}, amg_fast from {amg_fast.__file__}")'
}

VARIANT_ARGS=()
for word in $VARIANTS; do VARIANT_ARGS+=(--variant "$word"); done

TESTS_RUNS=()  # phase_tests' pytest runs for the verdict, "--run RC LOG" each: a cut-off told from a crash by them
COLLECTED=$RESULTS/logs/variant_tests.json  # the kernels' tests marked `variant`, {variant: [node ids]}
phase_tests() {  # the kernels' tests get 3/4 of T_TESTS, the -m gpu tests the rest (at least 20 s)
    local t0 rc=0 rc2=0 rest log=$RESULTS/logs/tests_kernels.log log2=$RESULTS/logs/tests_gpu.log
    t0=$(date +%s)
    if [[ ,$PHASES, == *,bench,* ]]; then  # the bench's kernels compiled beside the tests (16 cores, 12 workers)
        # stopped with the tests (stop_warm_up); a budget of its own would skip every part after a slow first one
        "$PY" bench/gpu_summary.py --warm-up --out "$RESULTS/bench-warm-up" --budget-s 3600 "${VARIANT_ARGS[@]}" \
            "${BENCH_FLAGS[@]}" "${BENCH_ARGS[@]}" > "$RESULTS/logs/warm-up.log" 2>&1 &
        WARM_PID=$!
    fi
    # each run's output in its own log, then in the phase's: the verdict judges each (the kernels' run, cut off,
    # must show a test passed; the -m gpu rest gets what time is left, at least 20 s, and may end before its first
    # test). A file, not a pipe through tee: a process the run left behind holding the pipe would hang the phase
    # --durations: which tests the time limit falls on (2026-11-30: 30 of 731 were cut off after 105 s)
    # $AMG_TESTS_VARIANT_COLLECTION: the variant tests collected, the verdict's record of those cut off (never adopted)
    rm -f "$COLLECTED"
    AMG_TESTS_VARIANT_COLLECTION=$COLLECTED timeout -s INT -k 15 "$(cap $(( T_TESTS * 3 / 4 )))" "$PY" -m pytest \
        "${TEST_PATHS[@]}" -q -rfE -p no:cacheprovider -n "$TEST_WORKERS" --durations=25 > "$log" 2>&1 || rc=$?
    cat "$log"; TESTS_RUNS=(--run "$rc" "$log")
    [[ -f $COLLECTED ]] && TESTS_RUNS+=(--variant-tests "$COLLECTED")
    rest=$(( T_TESTS - $(date +%s) + t0 )); (( rest < 20 )) && rest=20
    if [[ $DRY != 1 ]]; then
        timeout -s INT -k 15 "$(cap "$rest")" "$PY" -m pytest tests -m gpu --ignore=tests/ops -q -rfE \
            -p no:cacheprovider > "$log2" 2>&1 || rc2=$?
        cat "$log2"
        [[ $rc2 == 5 ]] && rc2=0  # no test selected
        TESTS_RUNS+=(--run "$rc2" "$log2")
    fi
    if [[ -n $WARM_PID ]]; then  # stopped with the tests (what it compiled stays cached): the bench times alone
        stop_warm_up
        echo "bench warm-up (kernels compiled beside the tests): $(tail -n 1 "$RESULTS/logs/warm-up.log")"
    fi
    return $(( rc || rc2 ))
}

phase_bench() {
    local rc=0 t; t=$(cap "$T_BENCH")  # the bench first: the probes take what it and the retest leave (imports: ~15 s)
    # its own --budget-s starts no part it cannot finish; the timeout (SIGINT: it keeps what finished) stops a
    # part that hangs, e.g. a kernel compiling for the first time, 30 s past it
    timeout -s INT -k 15 "$(( t + 30 ))" "$PY" bench/gpu_summary.py --out "$RESULTS/bench" --budget-s "$t" "${VARIANT_ARGS[@]}" \
        "${BENCH_FLAGS[@]}" "${BENCH_ARGS[@]}" || rc=1
    if [[ -f $RESULTS/bench/summary.json ]]; then  # the switches this machine's runs take (kept in WORK)
        # a variant whose CUDA tests failed on this machine (the tests' verdict: variant_failures) is not adopted,
        # nor one whose tests did not all run (variant_unrun): the winners' run now, if time allows
        local verdict_args=(); [[ -f $WORK/$VERDICT_FILE ]] && verdict_args=(--verdict "$WORK/$VERDICT_FILE")
        [[ $ADOPT == 1 && ${#verdict_args[@]} -gt 0 ]] && { retest_winners || rc=1; }  # CAMPAIGN_ADOPT=0: no use
        "$PY" bench/adopt_variants.py "$RESULTS/bench/summary.json" --env-out "$ADOPTED" \
            --markdown-out "$RESULTS/bench/adopted.md" ${ADOPT_MODES:+--modes "$ADOPT_MODES"} "${verdict_args[@]}" \
            || { rc=1; [[ -f $ADOPTED ]] && echo "no verdict: the switches an earlier bench adopted are dropped"
                 rm -f "$ADOPTED"; }
        # beside the results too: a later call on a fresh machine takes them with the tests' verdict (take_verdict)
        [[ -f $ADOPTED ]] && cp "$ADOPTED" "$RESULTS/bench/${ADOPTED##*/}"
    fi
    pack
    [[ -n $PROBES ]] || { [[ $DRY == 1 ]] && echo "(dry run: no probes, they need CUDA)"; return $rc; }
    mkdir -p "$RESULTS/probes"
    # the spectral conv's variants op by op at the paper's S (the defaults they choose: mixing, transform, W's
    # layout), then its accuracy (S = 128: the TF32 rounding of what the kernels form, new since the H200's
    # 2026-11-27 probe; S = 1024: the fft transform's, never probed; the Gauss product with each transform),
    # then the feed-forward's paths
    local probe name args limit prc
    for probe in $PROBES; do
        case $probe in
            stages) name=spectral_stages args=(bench/probe_spectral_stages.py --sizes 128 32) ;;
            accuracy) name=spectral_accuracy
                      args=(bench/probe_spectral_accuracy.py --sizes 128 1024 --rows 800 --variants fft-gauss dft-gauss) ;;
            ffn) name=ffn args=(bench/probe_ffn.py) ;;
        esac
        if (( $(left) - RESERVE < 10 )); then  # less than its imports and CUDA's start take
            echo "probe $name skipped: $(( $(left) - RESERVE )) s of the budget left"; continue
        fi
        limit=$(cap "$T_PROBES")
        prc=0
        timeout -s INT -k 10 "$limit" "$PY" "${args[@]}" --json "$RESULTS/probes/$name.json" \
            > "$RESULTS/probes/$name.log" 2>&1 || prc=$?
        tail -n 12 "$RESULTS/probes/$name.log"
        # stopped at its time (timeout's 124; 137 when it had to kill), a probe keeps the rows it wrote (one by one)
        if [[ $prc == 124 || $prc == 137 ]]; then echo "probe $name: stopped at its ${limit} s, kept what it measured"
        elif [[ $prc != 0 ]]; then rc=1; fi
    done
    return $rc
}

RETESTS_MIN_S=15  # fewer seconds left: the winners' unrun tests are not started (pytest's start, a first compile)
retest_winners() {  # the tests the tests phase's limit cut off of the variants the bench found faster, then the verdict
    local nodes=$RESULTS/logs/retest_tests.txt log=$RESULTS/logs/tests_retest.log limit prc=0 ids=() copy=() workers
    # a verdict on other sources (an earlier call's, the code changed since) is not this code's: no test for it
    "$PY" bench/cuda_verdict.py digest --matches "$WORK/$VERDICT_FILE" > /dev/null || return 0
    "$PY" bench/adopt_variants.py "$RESULTS/bench/summary.json" --verdict "$WORK/$VERDICT_FILE" \
        ${ADOPT_MODES:+--modes "$ADOPT_MODES"} --retest-out "$nodes" || return 1
    [[ -s $nodes ]] || return 0
    limit=$(cap "$T_RETESTS")
    if (( T_RETESTS < RETESTS_MIN_S )); then
        echo "the winning variants' unrun tests not started: CAMPAIGN_T_RETESTS=$T_RETESTS is under $RETESTS_MIN_S s" \
             "(those variants are not adopted)"; return 0
    elif (( limit < RETESTS_MIN_S )); then
        echo "the winning variants' unrun tests not started: ${limit} s of the budget left (those variants are not" \
             "adopted)"; return 0
    fi
    mapfile -t ids < "$nodes"
    workers=$(( ${#ids[@]} < TEST_WORKERS ? ${#ids[@]} : TEST_WORKERS ))  # no more workers than tests
    echo "the winning variants' ${#ids[@]} unrun tests, within ${limit} s ($log)"
    # the PASSED / SKIPPED lines the verdict reads print only with a collection file (tests/variant_report.py)
    AMG_TESTS_VARIANT_COLLECTION=$RESULTS/logs/variant_retests.json timeout -s INT -k 15 "$limit" "$PY" -m pytest \
        "${ids[@]}" -q -rfE -p no:cacheprovider -n "$workers" > "$log" 2>&1 || prc=$?
    tail -n 5 "$log"
    [[ -f $RESULTS/$VERDICT_FILE ]] && copy=(--copy-to "$RESULTS/$VERDICT_FILE")  # this call's tests phase wrote it
    "$PY" bench/cuda_verdict.py update "$WORK/$VERDICT_FILE" --log "$log" "${copy[@]}" || return 1
    # a failure among them only keeps its variant out; pytest that could not run them (no test ran) is a failure
    [[ $prc == 0 || $prc == 1 || $prc == 124 || $prc == 137 ]]
}

run_sweep() {  # run_sweep NAME EXPERIMENT PRESET SEEDS [SETTINGS]
    local name=$1 exp=$2 preset=$3 seeds=(${4//,/ }) set=() rc=0
    [[ -n ${5:-} ]] && set=(--set ${5//,/ })
    if [[ -f $WORK/$name/sweep.json ]]; then
        echo "sweep $name: continuing the one an earlier call left in $WORK/$name"
    elif [[ -n $TREES && -d $TREES/$name ]]; then
        cp -r "$TREES/$name" "$WORK/$name"  # the runs earlier sessions finished
    fi
    # --budget-s starts no run it cannot finish by its estimate; the timeout (SIGINT: each run keeps its
    # checkpoint, exit 130) stops one that outlasts it, so export and pack still happen in time
    local limit; limit=$(cap "$(left)")
    timeout -s INT -k 20 "$limit" "$PY" scripts/reproduce.py run "$exp" --preset "$preset" --seeds "${seeds[@]}" \
        "${set[@]}" --out "$WORK/$name" "${RUN_FLAGS[@]}" --budget-s "$limit" || rc=$?
    local meaning
    case $rc in
        0) meaning="all done" ;;
        3) meaning="runs left for the next session" ;;
        4) meaning="diverged runs left (see its lines above; trained again only with --retry-diverged)" ;;
        124|130) meaning="stopped at the budget" ;;
        *) meaning="failed" ;;
    esac
    echo "reproduce.py run $exp: exit $rc ($meaning)"
    [[ $rc == 3 || $rc == 4 || $rc == 124 || $rc == 130 ]] && rc=0
    if [[ -f $WORK/$name/sweep.json ]]; then
        "$PY" scripts/reproduce.py export "$WORK/$name" --to "$RESULTS/sweeps/$name" || rc=1
        [[ -d $RESULTS/sweeps/$name ]] && { "$PY" scripts/reproduce.py report "$exp" --out "$RESULTS/sweeps/$name" "${set[@]}" || true; }
    fi
    return $rc
}

adopt_switches() {  # export the switches the latest bench on this machine adopted, for this call's runs
    local words pair key why taken=() skipped=()
    [[ $ADOPT == 1 && -s $ADOPTED ]] || return 0
    [[ " ${RUN_FLAGS[*]} " == *" --fast-kernels "* ]] || { echo "(the reference kernels: no switch adopted)"; return 0; }
    while read -r -a words; do  # one variant a line: NAME KEY=VALUE [KEY=VALUE ...], taken whole or not at all
        (( ${#words[@]} > 1 )) && why="" || why="no switches"
        for pair in "${words[@]:1}"; do
            [[ $pair =~ ^(AMG_FAST_[A-Z0-9_]+)=[A-Za-z0-9_.-]+$ ]] || { why="'$pair' is not a switch"; break; }
            key=${BASH_REMATCH[1]}
            [[ -z ${!key:-} ]] || { why="$key=${!key} is set already"; break; }
        done
        if [[ -n $why ]]; then skipped+=("variant ${words[0]:-?} not adopted: $why"); continue; fi
        for pair in "${words[@]:1}"; do export "$pair"; taken+=("$pair"); done
        ADOPTED_VARIANTS=$(( ADOPTED_VARIANTS + 1 ))
    done < "$ADOPTED"
    ADOPTED_PAIRS=("${taken[@]}")
    (( ${#taken[@]} + ${#skipped[@]} )) || return 0
    ADOPTED_NOTE="the runs adopt the kernel switches the bench found faster in every cell it judged: ${taken[*]:-none}"
    (( ${#skipped[@]} )) && ADOPTED_NOTE+=$(printf '; %s' "${skipped[@]}")
    ADOPTED_NOTE+=" (bench/adopted.md)"
    echo "gpu_campaign: $ADOPTED_NOTE"
}

ADOPTED_MIN_S=30  # fewer seconds left: the adopted switches' step is not timed (its first cell: ~25 s by the prior)
adopted_step_key() {  # adopted_step_key MODES: what a timing of the adopted switches' step holds for
    local digest; digest=$("$PY" bench/cuda_verdict.py digest 2>/dev/null) || digest=unknown
    printf 'sources %s; modes %s; switches %s\n' "$digest" "$1" "$(printf '%s\n' "${ADOPTED_PAIRS[@]}" | sort | xargs)"
}
adopted_step_outcome() {  # adopted_step_outcome SUMMARY_JSON: "failed WHY", "partial WHY" or "complete"
    "$PY" - "$1" << 'EOF'
import json, sys
try:
    summary = json.load(open(sys.argv[1]))
except (OSError, ValueError) as err:
    sys.exit(print(f"failed no summary ({err})"))
skipped, errors = summary.get("skipped", []), summary.get("errors", [])
missed = [f"{c.get('what')} missed its float64 check" for c in summary.get("checks", []) if not c.get("ok")]
broken = [f"{e.get('part')} failed" for e in errors if str(e.get("part")).startswith("triton_graph")]
if missed or broken:
    print("failed " + "; ".join(missed + broken))
elif skipped or errors:
    print(f"partial {len(skipped)} parts skipped, {len(errors)} failed (none of them a step)")
else:
    print("complete")
EOF
}
time_adopted_step() {  # the graphed Triton step with all the adopted switches at once, before the runs train with it
    local timed=$WORK/adopted_step_timed.key failed=$WORK/adopted_step_failed.key limit rc=0 key outcome
    local modes=${ADOPT_MODES:-fp32,tf32,bf16} log=$RESULTS/logs/bench_adopted.log out=$RESULTS/bench-adopted
    (( ADOPTED_VARIANTS > 1 )) || return 0  # one variant's step the bench timed itself
    # a timing holds for these sources, modes and switches (an earlier call on this machine may have had others)
    key=$(adopted_step_key "$modes")
    if [[ -f $failed && $(< "$failed") == "$key" ]]; then
        drop_adopted "their step failed in an earlier call on this machine ($failed)"; return 0
    fi
    [[ -f $timed && $(< "$timed") == "$key" ]] && return 0
    limit=$(cap "$T_ADOPTED")
    if (( T_ADOPTED < ADOPTED_MIN_S )); then
        echo "the adopted switches' step not timed: CAMPAIGN_T_ADOPTED=$T_ADOPTED is under $ADOPTED_MIN_S s"; return 0
    elif (( limit < ADOPTED_MIN_S )); then
        echo "the adopted switches' step not timed: ${limit} s of the budget left"; return 0
    fi
    echo "the adopted switches' step at S = 32 and 128 in ${modes//,/ }, with its profile, within ${limit} s ($out)"
    # the switches are this process's environment (adopt_switches): the summary records them (kernel_switches), and
    # checks each step against the float64 reference: the bench checked each variant alone, this their combination
    timeout -s INT -k 15 "$(( limit + 15 ))" "$PY" bench/gpu_summary.py --out "$out" \
        --budget-s "$limit" --parts triton,profile --sizes 32,128 --modes "$modes" "${BENCH_FLAGS[@]}" > "$log" 2>&1 \
        || rc=$?
    tail -n 3 "$log"
    outcome=$(adopted_step_outcome "$out/summary.json")
    mkdir -p "$out" && echo "$key" > "$out/adopted_step.key"  # what it timed, beside the summary
    case $outcome in
        complete) echo "$key" > "$timed" ;;
        partial*) echo "the adopted switches' step (exit $rc): ${outcome#partial }; the switches stay, and a later" \
                       "call on this machine times them again" ;;
        *) echo "$key" > "$failed"; drop_adopted "their step failed (exit $rc: ${outcome#failed }; $log)"; return 1 ;;
    esac
}
drop_adopted() {  # drop_adopted WHY: this call's runs take the code's defaults, not the adopted switches
    local pair
    for pair in "${ADOPTED_PAIRS[@]}"; do unset "${pair%%=*}"; done
    ADOPTED_PAIRS=()
    ADOPTED_NOTE+="; dropped, the runs take the code's defaults: $1"
    echo "gpu_campaign: the adopted switches are dropped, the runs take the code's defaults: $1"
}

phase_runs() {
    local word rc=0 name exp preset seeds settings
    adopt_switches
    time_adopted_step || rc=1  # its failure is the runs phase's, and the runs still train
    for word in $SWEEPS; do
        IFS=: read -r name exp preset seeds settings <<< "$word"
        [[ -n $name && -n $exp && -n $preset && -n $seeds ]] || { echo "CAMPAIGN_SWEEPS: '$word' is not NAME:EXPERIMENT:PRESET:SEEDS[:KEY=VALUE,...]"; rc=1; continue; }
        (( $(left) > RESERVE + 60 )) || { echo "no budget left for sweep $name (next session)"; continue; }
        [[ $DRY == 1 ]] && preset=smoke
        echo "sweep $name: $exp, preset $preset, seeds $seeds, run flags: ${RUN_FLAGS[*]}"
        run_sweep "$name" "$exp" "$preset" "$seeds" "$settings" || rc=1
        pack
    done
    return $rc
}

declare -A STATUS=()
FALLBACK="" KERNELS_FAILED=$WORK/cuda_tests_failed.txt  # kept in WORK: a later call without the tests phase reads it
ADOPTED=$WORK/adopted_switches.env ADOPTED_NOTE=""  # "NAME KEY=VALUE ..." lines: the latest bench's winners here
ADOPTED_VARIANTS=0 ADOPTED_PAIRS=()  # the variants (and their KEY=VALUE) this call's runs take (adopt_switches)
VERDICT_FILE=kernels_verdict.json VERDICT_NOTE=""  # the tests phase's verdict (bench/cuda_verdict.py), here and in RESULTS
reference_kernels() {  # reference_kernels WHY: the runs of this call drop --fast-kernels
    [[ " ${RUN_FLAGS[*]} " == *" --fast-kernels "* ]] || return 0
    RUN_FLAGS=("${RUN_FLAGS[@]/--fast-kernels}"); read -r -a RUN_FLAGS <<< "${RUN_FLAGS[*]}"
    FALLBACK="$1: this call's runs use the reference kernels ($(printf '%s ' "${RUN_FLAGS[@]}")without --fast-kernels)"
    echo "gpu_campaign: $FALLBACK"
}
take_verdict() {  # a call without the tests phase: the CUDA tests' verdict on these kernel sources decides
    local found rc=0 committed
    found=$("$PY" bench/cuda_verdict.py find "$WORK/$VERDICT_FILE" ${TREES:+"$TREES"/gpu/*/$VERDICT_FILE}) || rc=$?
    if [[ $rc == 1 && $found == fail\ * ]]; then reference_kernels "the CUDA tests failed on these kernel sources ($found)"
    elif [[ $rc != 0 && $rc != 2 ]]; then reference_kernels "bench/cuda_verdict.py could not read the verdicts (exit $rc)"
    elif [[ $rc == 0 ]]; then
        [[ $found == pass\ * ]] && VERDICT_NOTE="the CUDA tests passed" \
            || VERDICT_NOTE="the CUDA tests, cut off by their time limit, found no failure"
        VERDICT_NOTE+=" on these kernel sources ($found): the runs keep the Triton kernels"
        read -r _ committed _ <<< "$found"; committed=$(dirname "$committed")/bench  # that session's bench
        if [[ ! -f $ADOPTED && -f $committed/${ADOPTED##*/} ]]; then  # a fresh machine: take its switches
            cp "$committed/${ADOPTED##*/}" "$ADOPTED"
            VERDICT_NOTE+=", with the switches its bench adopted ($committed/adopted.md)"
        fi
        echo "gpu_campaign: $VERDICT_NOTE"
    elif [[ $TRUST == 1 ]]; then
        VERDICT_NOTE="no CUDA-test verdict on these kernel sources; the runs keep the Triton kernels (CAMPAIGN_TRUST_KERNELS=1)"
        echo "gpu_campaign: $VERDICT_NOTE"
    else reference_kernels "no CUDA-test verdict on these kernel sources (run the tests phase first, or unpack its session's results into $TREES/gpu/)"
    fi
}
# a call without the tests phase (the session's second, or a later session's runs alone) keeps the verdict of an
# earlier call's tests on this machine, or takes the one recorded on these kernel sources (bench/cuda_verdict.py)
if [[ ,$PHASES, != *",tests,"* && ,$PHASES, == *",runs,"* ]]; then
    if [[ -f $KERNELS_FAILED ]]; then reference_kernels "$(cat "$KERNELS_FAILED")"
    elif [[ " ${RUN_FLAGS[*]} " == *" --fast-kernels "* ]]; then take_verdict; fi
fi
for phase in install tests bench runs; do
    [[ ,$PHASES, == *",$phase,"* ]] || { STATUS[$phase]=skipped; continue; }
    echo; echo "== [$phase] $(date -u +%T), $(left) s of the budget left"
    t0=$(date +%s)
    "phase_$phase" > >(tee "$RESULTS/logs/$phase.log") 2>&1
    rc=$?
    # a test that failed, or tests that did not run to the end, keep the Triton kernels out of the runs; tests cut
    # off by the phase's time limit with tests passed and none failed do not, unless the tests failed on these
    # sources before (in an earlier call here, or a committed verdict: a cut-off may not have reached that test).
    # The verdict is kept with the results (a later session's calls without the tests phase read it) and on this
    # machine, with the test paths when they were not the whole set (CAMPAIGN_TESTS: no later call trusts its pass)
    if [[ $phase == tests ]]; then
        before=""  # why the tests failed on these sources before
        if [[ -f $KERNELS_FAILED ]]; then before=$(cat "$KERNELS_FAILED")
        elif [[ -n $TREES ]] && compgen -G "$TREES/gpu/*/$VERDICT_FILE" > /dev/null; then  # (torch's start: seconds)
            committed=$("$PY" bench/cuda_verdict.py find "$TREES"/gpu/*/$VERDICT_FILE 2>/dev/null)
            [[ $committed == fail\ * ]] && before="the CUDA tests failed on these kernel sources ($committed)"
        fi
        judged=$("$PY" bench/cuda_verdict.py write "$RESULTS" "${TESTS_RUNS[@]}" --copy-to "$WORK/$VERDICT_FILE" \
                 ${CAMPAIGN_TESTS:+--tests "${TEST_PATHS[@]}"} ${before:+--failed-before}) \
            || judged="fail the CUDA tests' verdict could not be judged (bench/cuda_verdict.py failed)"
        [[ $judged == *$'\n'* ]] && echo "${judged%$'\n'*}"  # the variants whose tests failed (not adopted)
        read -r verdict why <<< "${judged##*$'\n'}"  # its last line
        if [[ $verdict == pass ]]; then rm -f "$KERNELS_FAILED"
        elif [[ $verdict == incomplete ]]; then :
        elif [[ -n $why ]]; then
            echo "$why in an earlier call on this machine ($(date -u +%T))" > "$KERNELS_FAILED"
            reference_kernels "$why"
        else reference_kernels "$before"  # a cut-off, or a subset's pass, that the earlier failure makes one
        fi
    fi
    STATUS[$phase]="$([[ $rc == 0 ]] && echo pass || echo "FAIL (exit $rc)") in $(( $(date +%s) - t0 )) s"
    echo "== [$phase] ${STATUS[$phase]}"
    pack
done
{ echo "| phase | result |"; echo "|---|---|"
  for phase in install tests bench runs; do echo "| $phase | ${STATUS[$phase]} |"; done
  [[ -n $FALLBACK ]] && printf '\n%s\n' "$FALLBACK"
  [[ -n $VERDICT_NOTE ]] && printf '\n%s\n' "$VERDICT_NOTE"
  [[ -n $ADOPTED_NOTE ]] && printf '\n%s\n' "$ADOPTED_NOTE"; } > "$RESULTS/phases.md"
cat "$RESULTS/phases.md"
echo "gpu_campaign: done in $(( $(date +%s) - START )) s of ${BUDGET}"
pack
! grep -q FAIL "$RESULTS/phases.md"
