"""Commands use the cores other processes leave free (issue 28: a default Tox21 epoch ran
15-56x slower beside busy neighbours)."""
import subprocess
import sys
import time

import pytest

from rpfast.experiments import threads

pytestmark = pytest.mark.backend_neutral


@pytest.mark.skipif(threads.busy_cores(0.05) is None, reason="no /proc/stat on this system")
def test_a_spinning_neighbour_is_seen_as_a_busy_core():
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.3)
        assert threads.busy_cores() >= 0.7
    finally:
        spinner.kill()
        spinner.wait()


@pytest.mark.parametrize("busy, expected, says", [
    (0.1, None, False),  # an idle machine: torch's default
    (0.4, None, False),  # background noise rounds away
    (1.0, 1, True),
    (3.0, 1, True),  # never below one thread
])
def test_the_default_shrinks_to_the_free_cores(busy, expected, says, monkeypatch, capsys):
    monkeypatch.setenv("RPFAST_LOAD_CHECK", "1")  # conftest turns it off for the other tests
    monkeypatch.setattr(threads.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(threads, "busy_cores", lambda seconds=0.25: busy)
    assert threads.free_threads(None, 2, "rpfast test") == expected
    err = capsys.readouterr().err
    assert (err == f"rpfast test: other processes keep {busy:.1f} of 2 cores busy: using 1 thread instead of 2 "
                   "(--threads N to choose)\n") if says else err == ""


def test_an_explicit_thread_count_is_obeyed(monkeypatch):
    monkeypatch.setattr(threads, "busy_cores", lambda seconds=0.25: 8.0)
    assert threads.free_threads(3, 2, "rpfast test") == 3


def test_without_cpu_counters_the_default_stays(monkeypatch):
    monkeypatch.setenv("RPFAST_LOAD_CHECK", "1")
    monkeypatch.setattr(threads, "_cpu_counters", lambda: None)
    assert threads.busy_cores(0.01) is None and threads.free_threads(None, 2, "rpfast test") is None


def test_the_check_can_be_turned_off(monkeypatch):
    monkeypatch.setenv("RPFAST_LOAD_CHECK", "0")
    monkeypatch.setattr(threads, "busy_cores", lambda seconds=0.25: 2.0)
    assert threads.free_threads(None, 2, "rpfast test") is None
