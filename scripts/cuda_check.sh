#!/usr/bin/env bash
# Build rpfast with its CUDA kernels (CMake option RPFAST_CUDA: rpfast._C_cuda from csrc/cuda/,
# nvcc for sm_80 and sm_90 plus PTX, the CUDA runtime linked statically) in its own virtual
# environment and build directory, check that it imports and reports its build, and run
# tests/ops/test_cuda.py against it.
#
#   bash scripts/cuda_check.sh            # what .ci/run does where nvcc exists (no GPU: the
#                                         # device tests skip; the module must say "no device")
#   bash scripts/cuda_check.sh -x -rs     # arguments go to pytest
#
# The build lives apart from the normal one (build/cuda-venv, build/cuda), so .venv and build/
# are never touched. Environment: RPFAST_CUDA_VENV (default build/cuda-venv), RPFAST_TORCH (the
# torch requirement; default torch==2.13.0, the CPU wheel here: a GPU machine needs a CUDA build
# of torch, see scripts/gpu_check.sh), PYTHON (interpreter that creates the venv; python3),
# RPFAST_PYTHON (instead of a venv: an interpreter that already has torch and the build and test
# tools, e.g. a GPU machine's CUDA PyTorch with no package index; rpfast is installed into it
# with --no-deps).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
VENV=${RPFAST_CUDA_VENV:-build/cuda-venv}
if ! command -v nvcc >/dev/null 2>&1; then
  echo "cuda_check.sh: nvcc not found: the CUDA extension cannot be built on this machine" >&2
  exit 1
fi
start=$(date +%s)
BUILD=(--quiet --disable-pip-version-check --no-build-isolation -Cbuild-dir=build/cuda
       -Ccmake.define.RPFAST_CUDA=ON -Ccmake.define.RPFAST_AVX2=OFF -Ccmake.define.RPFAST_AVX512=OFF)
source scripts/install_rpfast.sh
install_rpfast "$VENV" "${RPFAST_TORCH:-torch==2.13.0}"
echo "cuda_check.sh: build and install took $(( $(date +%s) - start )) s"
"$PY" -c "import rpfast._C_cuda, rpfast; rpfast.show_config()" | grep "CUDA kernels"
"$PY" -m pytest -q -p no:cacheprovider tests/ops/test_cuda.py \
  tests/experiments/test_pairs_stack.py::test_a_stack_trains_on_the_gpu_as_on_the_cpu "$@"
