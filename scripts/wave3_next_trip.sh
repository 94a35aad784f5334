#!/usr/bin/env bash
# The next device trip of wave 3, in one command (docs/gpu_verification.md, "The next trip"): run it from the
# repository root on the GPU box, with `.whl` carried (scripts/device_wheels.sh); results under $OUT.
#   1. the sandbox test with real Nsight Compute, alone (it never finished under the caps of session 4);
#   2. the bf16 harness test;
#   3. the seeds of the five suites waiting in benchmarks/results/wave3_pending/, in one gpu_side batch
#      (profiles ahead only when step 1 passed: a profiler that hangs in the sandbox would hold the batch).
# Every step gets what is left of DEADLINE seconds (default 560); the suites come back as five tars under $OUT
# (bench import them into their suite folders here), the logs as $OUT/trip.tar.gz.
set -o pipefail
T0=$(date +%s); DEADLINE=${DEADLINE:-560}; R=/tmp/res; P=benchmarks/results/wave3_pending
left() { echo $(( DEADLINE - ($(date +%s) - T0) )); }
mkdir -p $R
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
mkdir -p /tmp/pp && ln -sfn "$PWD" /tmp/pp/kernelskill
export PYTHONPATH=/tmp/site:/tmp/pp TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > $R/gpu.txt; cat $R/gpu.txt
trap 'tar czf $OUT/trip.tar.gz -C /tmp res' EXIT
timeout 240 python3 -m pytest -q -s -p no:cacheprovider -rA -m gpu tests/test_sandbox_gpu.py -k real_ncu > $R/ncu.log 2>&1
NCU_RC=$?; tail -15 $R/ncu.log; echo "real ncu test rc=$NCU_RC after $(( $(date +%s) - T0 ))s"
timeout 120 python3 -m pytest -q -p no:cacheprovider -rA -m gpu tests/test_harness_precision_gpu.py > $R/precision.log 2>&1
tail -8 $R/precision.log
AHEAD=""; [ "$NCU_RC" -eq 0 ] || AHEAD="--no-profile-ahead"
B=$(( $(left) - 40 )); echo "gpu_side budget ${B}s $AHEAD"
SUITES="abl-kb abl-none abl-profile level2 bf16"
DIRS=""; IN=""; BACK=""
for s in $SUITES; do DIRS="$DIRS /tmp/s/$s"; IN="$IN $P/$s-seeds-answered.tar"; BACK="$BACK $OUT/$s-back.tar"; done
timeout $(( B + 30 )) python3 -m kernelskill.pipeline.runs.gpu_side $DIRS --import $IN --export-to $BACK \
    --budget-s $B --build-jobs 14 $AHEAD 2>&1 | tee $R/gpu_side.log | tail -70
test -f $OUT/bf16-back.tar || python3 -m kernelskill.pipeline.runs.gpu_side $DIRS --dry-run --export-to $BACK > $R/dry.log 2>&1
echo "done at $(( $(date +%s) - T0 ))s"
