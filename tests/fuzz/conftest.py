"""The fuzz suite's session plumbing.

* The malformed-input tests move to the end of the session and their worker processes
  start in the background right after collection, so they overlap with the other tests.
* At the end, a table reports how many inputs every op received (and the workers' time).
"""
import pytest

from tests.fuzz import fuzzing

MALFORMED = "test_fuzz_malformed.py::"


@pytest.hookimpl(trylast=True)  # after -k/-m deselection: start workers only for selected ops
def pytest_collection_modifyitems(session, config, items):
    malformed = [item for item in items if MALFORMED in item.nodeid and hasattr(item, "callspec")]
    if not malformed:
        return
    items[:] = [item for item in items if item not in malformed] + malformed
    from tests.fuzz.malformed import GROUPS
    from tests.fuzz.runner import GroupRunner, timeout_for

    wanted = {}
    for item in malformed:
        group, op = item.callspec.params["group"], item.callspec.params["op"]
        wanted.setdefault(group, []).append(op)
    timeouts = {g: timeout_for([GROUPS[g][op][1] for op in ops]) for g, ops in wanted.items()}
    runner = GroupRunner(wanted, timeouts)
    config._rpfast_fuzz_runner = runner
    runner.start()


def pytest_unconfigure(config):
    runner = getattr(config, "_rpfast_fuzz_runner", None)
    if runner is not None:
        runner.stop()


def pytest_terminal_summary(terminalreporter):
    lines = fuzzing.summary_lines()
    if not lines:
        return
    terminalreporter.section("fuzz inputs per op")
    for line in lines:
        terminalreporter.write_line(line)
