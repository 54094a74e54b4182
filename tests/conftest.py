import os

# The commands pick fewer threads on a loaded machine and say so on stderr: tests (and the
# commands they start in subprocesses) keep torch's default, whatever else the machine runs.
os.environ["RPFAST_LOAD_CHECK"] = "0"

import pytest

import rpfast

KERNELS_ONLY = ("the test checks the C++ kernels themselves (the fused GIN network and its bindings, bitwise "
                "results across thread counts); RPFAST_BACKEND=torch runs the composed ops instead")


BACKEND_NEUTRAL = ("the test drives a command or process plumbing (options, outputs, errors, signals, process "
                   "groups) whose behaviour does not depend on the backend; every layer those commands build "
                   "runs on the composed path in tests/ops/test_devices.py and tests/nn/test_input_forms.py")

PAPER_SCALE = ("the test runs one computation at the paper's scale (a minute on either path); the tests of the same "
               "layer at small scale cover its composed path")


def pytest_configure(config):
    config.addinivalue_line("markers", f"kernels: {KERNELS_ONLY}")
    config.addinivalue_line("markers", f"backend_neutral: {BACKEND_NEUTRAL}")
    config.addinivalue_line("markers", f"paper_scale: {PAPER_SCALE}")


def pytest_collection_modifyitems(config, items):
    """With ``RPFAST_BACKEND=torch`` (CI's second run) the tests marked ``kernels``,
    ``backend_neutral`` or ``paper_scale`` are skipped: the first run covers them."""
    if rpfast.backend() != "torch":
        return
    for item in items:
        for marker, reason in (("kernels", KERNELS_ONLY), ("backend_neutral", BACKEND_NEUTRAL),
                               ("paper_scale", PAPER_SCALE)):
            if marker in item.keywords:
                item.add_marker(pytest.mark.skip(reason=reason))
