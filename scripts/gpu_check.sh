#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: build rpfast with its CUDA kernels (scripts/cuda_check.sh),
# run tests/ops/test_cuda.py with the kernels on (every CUDA kernel against the CPU kernels on the
# same inputs; the same permutations for one seed; every layer's training step on the GPU, with
# the kernels and with the torch-composed ops, against the CPU; a stack of `rpfast pairs`
# replicas trained on the GPU against the CPU), then the GPU benchmark
# (benchmarks/bench_cuda.py: each kernel against its torch-composed form and PyG on the same
# device, an RP-GIN training epoch, and BFS orders beside the GPU step they feed), and print one
# table. The benchmark runs even when a test fails (a lent GPU is scarce); the exit status is
# the tests'.
#
#   RPFAST_PYTHON=python3 bash scripts/gpu_check.sh     # an interpreter whose torch sees the GPU
#   RPFAST_TORCH=/path/to/torch-2.13.0+cu130-...whl bash scripts/gpu_check.sh   # or a fresh venv
#
# With RPFAST_PYTHON, rpfast is built and installed into that interpreter (no package index
# needed: it must already have torch, scikit-build-core, pybind11, pytest, pytest-benchmark and
# torch_geometric). Otherwise RPFAST_TORCH names a CUDA build of torch for the venv
# build/cuda-venv (the default torch==2.13.0 is the CPU wheel on these machines, which sees no
# GPU). The script stops with one line if torch sees no CUDA device. RPFAST_GPU_REPORT names the
# benchmark's JSON (default build/cuda/bench_cuda.json).
set -euo pipefail
export RPFAST_CUDA_KERNELS=1  # the check is of the kernels, whatever the caller's environment says
cd "$(dirname "$0")/.."
ROOT=$(pwd)
VENV=${RPFAST_CUDA_VENV:-build/cuda-venv}
REPORT=${RPFAST_GPU_REPORT:-build/cuda/bench_cuda.json}
if [ -n "${RPFAST_PYTHON:-}" ]; then
  PY=$(command -v "$RPFAST_PYTHON")
else
  PY=$ROOT/$VENV/bin/python
fi
tests=0
bash scripts/cuda_check.sh -rs || tests=$?
if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  echo "gpu_check.sh: the torch of $PY sees no CUDA device: give RPFAST_TORCH a CUDA build of torch" >&2
  exit 1
fi
"$PY" -c "import torch; print('gpu_check.sh: torch', torch.__version__, 'on', torch.cuda.get_device_name())"
if [ -z "${RPFAST_PYTHON:-}" ]; then
  "$PY" -m pip install --quiet --disable-pip-version-check pytest-benchmark torch_geometric
fi
mkdir -p "$(dirname "$REPORT")"
"$PY" -m pytest -q -p no:cacheprovider benchmarks/bench_cuda.py --benchmark-json="$REPORT"
"$PY" benchmarks/report.py "$REPORT"
exit "$tests"
