#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: build rpfast with its CUDA kernels (scripts/cuda_check.sh),
# run tests/test_cuda.py with the kernels on (every CUDA kernel against the CPU kernels on the
# same inputs; the same permutations for one seed), then the GPU benchmark
# (benchmarks/bench_cuda.py: each kernel against its torch-composed form and PyG on the same
# device, and an RP-GIN training epoch), and print one table.
#
#   RPFAST_TORCH=/path/to/torch-2.13.0+cu130-...whl bash scripts/gpu_check.sh
#
# RPFAST_TORCH names a CUDA build of torch 2.13.0 (a wheel file or a requirement pip can reach):
# the default torch==2.13.0 is the CPU wheel on these machines, which sees no GPU. The script
# stops with one line if torch sees no CUDA device. Until it has passed on a GPU, the kernels
# stay off by default (RPFAST_CUDA_KERNELS=1 turns them on; see rpfast/_cuda.py).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
VENV=${RPFAST_CUDA_VENV:-build/cuda-venv}
RPFAST_CUDA_KERNELS=1 bash scripts/cuda_check.sh -rs
PY=$ROOT/$VENV/bin/python
if ! "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)"; then
  echo "gpu_check.sh: torch in $VENV sees no CUDA device: give RPFAST_TORCH a CUDA build of torch 2.13.0" >&2
  exit 1
fi
"$PY" -m pip install --quiet --disable-pip-version-check pytest-benchmark torch_geometric
mkdir -p build/cuda
RPFAST_CUDA_KERNELS=1 "$PY" -m pytest -q -p no:cacheprovider benchmarks/bench_cuda.py \
  --benchmark-json=build/cuda/bench_cuda.json
"$PY" benchmarks/report.py build/cuda/bench_cuda.json
