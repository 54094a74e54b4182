#!/usr/bin/env bash
# Build rpfast._C with AddressSanitizer + UndefinedBehaviorSanitizer (CMake option
# RPFAST_SANITIZE) and run the kernel tests and the fuzz suite against it.
#
#   bash scripts/sanitize.sh                             # what .ci/run does
#   bash scripts/sanitize.sh tests/ops/test_permute.py -x    # arguments replace the default tests
#
# The build lives apart from the normal one: its own virtual environment (build/sanitize-venv,
# torch==2.13.0 and the test extras) and its own build directory (build/sanitize), so the
# main .venv and build/ are never touched. Python itself is not instrumented, so libasan
# is LD_PRELOADed into the test run only (not into pip or the compiler).
#
# Exits non-zero on any test failure and on any sanitizer report, including reports from
# subprocesses (the fuzz workers, CLI runs): every report is also written under
# build/sanitize/reports/, and the script fails if that directory is not empty.
#
# Environment: RPFAST_SANITIZE_VENV (default build/sanitize-venv), RPFAST_FUZZ_EXAMPLES (fuzz
# budget for this run; default: tests/fuzz's CI budget), PYTHON (interpreter that creates
# the venv; default python3), RPFAST_PYTHON (instead of a venv: an interpreter that already has
# torch, the test extras and the build tools, such as CI's test venv after its suites have run;
# the sanitizer build replaces its rpfast, installed with --no-deps).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
VENV=${RPFAST_SANITIZE_VENV:-build/sanitize-venv}
BUILD_DIR=build/sanitize
REPORTS=$ROOT/$BUILD_DIR/reports
start=$(date +%s)

# --- 1. environment and sanitizer build ---------------------------------------------
BUILD=(--quiet --disable-pip-version-check --no-build-isolation -Cbuild-dir="$BUILD_DIR"
       -Ccmake.define.RPFAST_SANITIZE=ON -Ccmake.define.RPFAST_AVX2=OFF -Ccmake.define.RPFAST_AVX512=OFF -Ccmake.build-type=RelWithDebInfo)
source scripts/install_rpfast.sh
install_rpfast "$VENV" torch==2.13.0
echo "sanitize.sh: build and install took $(( $(date +%s) - start )) s"

# --- 2. runtime options ---------------------------------------------------------------
LIBASAN=$(gcc -print-file-name=libasan.so)
# libstdc++ must be loaded when ASan starts, or its __cxa_throw interceptor has nothing to
# forward to (Python does not link libstdc++; it comes later with torch and _C).
LIBSTDCXX=$(gcc -print-file-name=libstdc++.so)
for lib in "$LIBASAN" "$LIBSTDCXX"; do
  if [ ! -e "$lib" ]; then
    echo "sanitize.sh: $lib not found (gcc -print-file-name); install gcc's libasan/libstdc++" >&2
    exit 2
  fi
done
rm -rf "$REPORTS"
mkdir -p "$REPORTS"
# detect_leaks=0: CPython and torch keep allocations alive until exit (leak noise).
# allocator_may_return_null=1: an impossible allocation fails as it would without ASan
#   (std::bad_alloc / MemoryError) instead of being reported; the fuzz suite judges it.
# max_allocation_size_mb: no single allocation above 8 GiB (the machine has 24 GiB).
# log_path: reports of every process (fuzz workers included) land in $REPORTS as well.
export ASAN_OPTIONS="detect_leaks=0:allocator_may_return_null=1:max_allocation_size_mb=8192:abort_on_error=0:exitcode=86:log_path=$REPORTS/asan"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:exitcode=87:log_path=$REPORTS/ubsan"
export RPFAST_SANITIZER=1   # tells the fuzz workers not to set RLIMIT_AS (ASan reserves terabytes)
export RPFAST_FUZZ_PROFILE=${RPFAST_FUZZ_PROFILE:-ci}   # derandomized, as in the main run

run_sanitized() { LD_PRELOAD="$LIBASAN $LIBSTDCXX" "$@"; }

# The extension in use must be the instrumented one.
so=$(run_sanitized "$PY" -c "import rpfast._C as c; print(c.__file__)")
# (ldd's output is captured first: with pipefail, `ldd | grep -q` fails when grep exits early
# and ldd dies of SIGPIPE, even though the library was found.)
deps=$(ldd "$so")
if ! grep -q libasan <<< "$deps"; then
  echo "sanitize.sh: $so is not linked against libasan; the sanitizer build did not take" >&2
  exit 2
fi
echo "sanitize.sh: testing $so"

# --- 3. kernel tests and the fuzz suite under the sanitizers ------------------------------
status=0
tests_start=$(date +%s)
if [ "$#" -gt 0 ]; then
  TESTS=("$@")
else
  TESTS=(tests/ops/test_permute.py tests/ops/test_random_permutations.py tests/nn/test_gin.py tests/ops/test_norm.py
         tests/ops/test_segment.py tests/ops/test_gin_layer.py
         tests/ops/test_subsets.py tests/ops/test_orient.py tests/data/test_graph_batch.py tests/nn/test_models.py
         tests/ops/test_thread_safety.py tests/fuzz)
fi
run_sanitized "$PY" -m pytest -q -p no:cacheprovider "${TESTS[@]}" || status=$?
echo "sanitize.sh: tests under ASan+UBSan took $(( $(date +%s) - tests_start )) s (exit $status)"

if [ -n "$(ls -A "$REPORTS")" ]; then
  echo "sanitize.sh: SANITIZER REPORTS:" >&2
  for f in "$REPORTS"/*; do
    echo "===== $f" >&2
    head -c 20000 "$f" >&2
  done
  status=1
fi
echo "sanitize.sh: total $(( $(date +%s) - start )) s"
if [ "$status" -ne 0 ]; then
  echo "sanitize.sh: FAILED (exit $status)" >&2
fi
exit "$status"
