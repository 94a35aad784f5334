#!/usr/bin/env bash
# The next device trip of wave 3, in one command (docs/gpu_verification.md, "The next trip"): run it from the
# repository root on the GPU box, with `.whl` carried (scripts/device_wheels.sh); results under $OUT.
#   0. one CUDA candidate in the sandbox as uid 65534 (SMOKE_TEST=0 skips it); if it fails, the trip goes on
#      with the root mapping (KERNELSKILL_HARNESS_SANDBOX_ID=root);
#   0b. FIRST_TESTS="FILE:SECONDS ...": the GPU tests of each FILE, at most SECONDS each, before the suites
#      (for a trip that may be the session's only one: e.g. tests/test_sandbox_gpu.py:230);
#   0c. BLIND_S=SECONDS: the blind set's real profiles (tests/data/blind/capture.py, its deadline SECONDS),
#      back as $OUT/blind_profiles.tar and $OUT/capture_meta.json (untar into tests/data/blind/profiles/);
#   1. the pending GPU steps of the suites named in SUITES (default: the five of benchmarks/results/wave3_pending/),
#      read from BUNDLE_DIR/NAME-BUNDLE_SUFFIX (default: wave3_pending/NAME-seeds-answered.tar), in one gpu_side batch
#      with profiles ahead: those are real Nsight Compute runs inside the sandbox on real candidates;
#   2. with what is left: the sandbox test with real Nsight Compute (NCU_TEST=0 skips it), the bf16 harness
#      test (PRECISION_TEST=0 skips it), and the once-per-task torch.compile baseline's test (COMPILE_TEST=0).
# gpu_side gets DEADLINE (default 570) less RESERVE (default 150) seconds; the suites come back as NAME-back.tar
# under $OUT (bench import them into their suite folders here), the logs as $OUT/trip.tar.gz. A SUITES entry
# NAME=PATH reads that suite's bundle from PATH (relative to the repository root) instead.
# CONTINUE=1 (a second call while the box is warm): the suites already under /tmp/s go on, nothing imported.
# Device time buys about one evaluation per 10 s (docs/gpu_verification.md): name fewer suites rather than
# leave profiles behind, since a run whose parent has no profile costs a trip of its own.
set -o pipefail
T0=$(date +%s); DEADLINE=${DEADLINE:-570}; RESERVE=${RESERVE:-150}; R=/tmp/res
P=${BUNDLE_DIR:-benchmarks/results/wave3_pending}; SUFFIX=${BUNDLE_SUFFIX:-seeds-answered.tar}
SUITES=${SUITES:-"abl-kb abl-none abl-profile level2 bf16"}
left() { echo $(( DEADLINE - ($(date +%s) - T0) )); }
mkdir -p $R
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
mkdir -p /tmp/pp && ln -sfn "$PWD" /tmp/pp/kernelskill
export PYTHONPATH=/tmp/site:/tmp/pp TORCH_CUDA_ARCH_LIST=9.0 PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > $R/gpu.txt; cat $R/gpu.txt
trap 'tar czf $OUT/trip.tar.gz -C /tmp res' EXIT
# as root the sandbox is uid 65534 since session 5 (docs/SECURITY.md), not yet seen on a GPU box: one CUDA
# candidate (a load_inline build) first; if it does not pass, the rest of the trip keeps the root mapping
# (KERNELSKILL_HARNESS_SANDBOX_ID=root, named in every result) and the log says why
SMOKE='from kernelskill.pipeline.harness import EvalConfig, evaluate
r = evaluate("tests/harness_cases/tasks/add.py", "tests/harness_cases/gpu/good_add_fastpath.py", EvalConfig(time=False))
print("smoke:", r.status, "|", r.details.get("sandbox_identity"), "|", r.message[:300]); raise SystemExit(r.status != "ok")'
if [ "${SMOKE_TEST:-1}" = 1 ]; then
  timeout 120 python3 -c "$SMOKE" > $R/smoke.log 2>&1 || { cat $R/smoke.log; export KERNELSKILL_HARNESS_SANDBOX_ID=root;
    timeout 90 python3 -c "$SMOKE" >> $R/smoke.log 2>&1; }
  tail -3 $R/smoke.log
fi
for t in ${FIRST_TESTS:-}; do
  f=${t%%:*}; log=$R/$(basename "$f" .py).log
  timeout "${t##*:}" python3 -m pytest -q -p no:cacheprovider -rA -m gpu "$f" > "$log" 2>&1
  echo "$f rc=$? after $(( $(date +%s) - T0 ))s"; grep -E "^(PASSED|FAILED|ERROR|SKIPPED)|passed|failed" "$log" | tail -25
done
if [ -n "${BLIND_S:-}" ]; then
  timeout $(( BLIND_S + 40 )) python3 tests/data/blind/capture.py --out /tmp/blind --deadline-s "$BLIND_S" \
      > $R/blind_capture.log 2>&1
  echo "blind capture rc=$? after $(( $(date +%s) - T0 ))s"; tail -5 $R/blind_capture.log
  cp /tmp/blind/blind_profiles.tar /tmp/blind/capture_meta.json $OUT/ 2>/dev/null
fi
B=$(( $(left) - RESERVE )); echo "gpu_side budget ${B}s for: $SUITES"
DIRS=""; IN=""; BACK=""
for entry in $SUITES; do
  s=${entry%%=*}; bundle=$P/$s-$SUFFIX; [ "$s" != "$entry" ] && bundle=${entry#*=}
  DIRS="$DIRS /tmp/s/$s"; IN="$IN $bundle"; BACK="$BACK $OUT/$s-back.tar"
done
# CONTINUE=1: a second call on a box still warm goes on with the suites under /tmp/s (no import: that would
# replace what the first call measured)
[ "${CONTINUE:-0}" = 1 ] && IN="" || IN="--import $IN"
timeout $(( B + 40 )) python3 -m kernelskill.pipeline.runs.gpu_side $DIRS $IN --export-to $BACK \
    --budget-s $B --build-jobs 14 2>&1 | tee $R/gpu_side.log | tail -80
echo "gpu_side done at $(( $(date +%s) - T0 ))s"
if [ "${NCU_TEST:-1}" = 1 ] && [ "$(left)" -gt 60 ]; then
  timeout $(( $(left) - 15 )) python3 -m pytest -q -s -p no:cacheprovider -rA -m gpu tests/test_sandbox_gpu.py -k real_ncu > $R/ncu.log 2>&1
  echo "real ncu test rc=$? after $(( $(date +%s) - T0 ))s"; tail -15 $R/ncu.log
fi
if [ "${PRECISION_TEST:-1}" = 1 ] && [ "$(left)" -gt 40 ]; then
  timeout $(( $(left) - 10 )) python3 -m pytest -q -p no:cacheprovider -rA -m gpu tests/test_harness_precision_gpu.py > $R/precision.log 2>&1
  echo "precision test rc=$?"; tail -8 $R/precision.log
fi
if [ "${COMPILE_TEST:-1}" = 1 ] && [ "$(left)" -gt 60 ]; then
  timeout $(( $(left) - 10 )) python3 -m pytest -q -p no:cacheprovider -rA -m gpu tests/test_harness_compile_baseline.py \
      -k share_one_baseline > $R/compile_baseline.log 2>&1
  echo "compile baseline test rc=$?"; tail -6 $R/compile_baseline.log
fi
echo "done at $(( $(date +%s) - T0 ))s"
