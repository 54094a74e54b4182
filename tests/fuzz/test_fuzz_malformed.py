"""Malformed inputs to every public op, GraphBatch, the nn modules and the CLI, in subprocesses.

Each op is one test, so a failure names the op; the inputs themselves run in worker
processes (``malformed.py``, one per op group, started in the background by conftest.py),
so a segfault, an abort, a sanitizer report or a hang fails the op's test instead of
killing pytest. The failure message holds the minimal input hypothesis found (or, for a
crash, the input that was running).
"""
import pytest

from tests.fuzz.malformed import GROUPS

OPS = [(group, op) for group, targets in GROUPS.items() for op in targets]


@pytest.mark.parametrize("group, op", OPS, ids=[op.replace(" ", "_") for _, op in OPS])
def test_malformed_inputs_raise_clean_errors(group, op, request):
    runner = request.config._rpfast_fuzz_runner
    entry = runner.result(group, op)
    if entry["failure"]:
        pytest.fail(f"{op}: {entry['count']} inputs tried; failure:\n{entry['failure']}", pytrace=False)
    assert entry["count"] > 0


# Public names of rpfast.ops that are not ops taking tensors (a result type, the budget's getter and setter).
NOT_OPS = {"WLOrder", "get_memory_budget", "set_memory_budget"}


def test_every_public_op_is_fuzzed():
    from rpfast import ops

    fuzzed = {op for _, op in OPS}
    missing = sorted(set(ops.__all__) - NOT_OPS - fuzzed)
    assert not missing, f"public ops without a malformed-input target in malformed.GROUPS: {missing}"
