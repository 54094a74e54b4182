# Sourced by scripts/sanitize.sh and scripts/cuda_check.sh (run from the repository root, with
# ROOT set to it and the array BUILD holding their pip build options).
#
# install_rpfast VENV TORCH: install rpfast, built with BUILD, and set PY to the interpreter
# that has it. With RPFAST_PYTHON set: into that interpreter, which already has torch, the test
# extras and the build tools (--no-deps; CI's test venv after its suites, or a GPU machine's
# CUDA PyTorch with no package index). Otherwise into the venv VENV (created with PYTHON,
# default python3, if missing) with TORCH (a pinned requirement: an unpinned one pulls a
# multi-GB CUDA wheel), the build tools and the test extras.
install_rpfast() {
  local venv=$1 torch=$2
  if [ -n "${RPFAST_PYTHON:-}" ]; then
    PY=$(command -v "$RPFAST_PYTHON")
    "$PY" -m pip install "${BUILD[@]}" --no-deps -e .
    return
  fi
  if [ ! -x "$venv/bin/python" ]; then
    "${PYTHON:-python3}" -m venv "$venv"
  fi
  PY=$ROOT/$venv/bin/python
  "$PY" -m pip install --quiet --disable-pip-version-check "$torch" \
    "scikit-build-core>=0.10" "pybind11>=2.12" cmake ninja
  "$PY" -m pip install "${BUILD[@]}" -e ".[test]"
}
