"""Runs the malformed-input workers (``python -m tests.fuzz.malformed GROUP``), one subprocess per op group.

The workers start in a background thread as soon as pytest has collected the malformed
tests (which it moves to the end of the session), so they use the second core while the
rest of the suite runs. A crash or hang kills a worker: the op and the input it was
running are read from its ``--last`` file, recorded as that op's failure, and a fresh
worker goes on with the group's remaining ops.
"""
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Dict, List, Optional

from tests.fuzz import fuzzing

ROOT = Path(__file__).resolve().parents[2]  # the worker runs as a module of the tests package from here
WORKER = "tests.fuzz.malformed"

EXIT_MEANINGS = {
    1: "a hang (more than RPFAST_FUZZ_CALL_TIMEOUT CPU seconds, or 10x that in wall time: the watchdog "
       "stopped it) or a fatal Python error",
    86: "an AddressSanitizer report",
    87: "an UndefinedBehaviorSanitizer report",
}


def _signal_name(code) -> str:
    if isinstance(code, int) and code < 0:
        try:
            return f", {signal.Signals(-code).name}"
        except ValueError:
            return ""
    return ""


class GroupRunner:
    """Runs the requested groups in ``RPFAST_FUZZ_WORKERS`` (default 2) background threads,
    each driving one worker process at a time."""

    def __init__(self, groups: Dict[str, List[str]], timeouts: Dict[str, float]):
        self.groups, self.timeouts = groups, timeouts
        self.results: Dict[str, Dict[str, dict]] = {}
        self.done = {g: threading.Event() for g in groups}
        self._tmp = tempfile.TemporaryDirectory(prefix="rpfast-fuzz-")
        self._procs: Dict[str, subprocess.Popen] = {}
        self._queue = list(groups)
        self._lock = threading.Lock()
        self._stopped = False
        self._env = dict(os.environ)  # snapshot in the main thread; see _run_group
        workers = max(1, int(os.environ.get("RPFAST_FUZZ_WORKERS", "2")))
        self._threads = [threading.Thread(target=self._run_all, name=f"rpfast-fuzz-{i}", daemon=True)
                         for i in range(min(workers, len(groups)))]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stopped = True
        for proc in list(self._procs.values()):
            if proc.poll() is None:
                proc.kill()
        for thread in self._threads:
            thread.join(timeout=30)
        self._tmp.cleanup()

    def result(self, group: str, op: str) -> dict:
        self.done[group].wait()
        return self.results[group][op]

    # ------------------------------------------------------------------------------
    def _next_group(self) -> Optional[str]:
        with self._lock:
            return self._queue.pop(0) if self._queue and not self._stopped else None

    def _run_all(self) -> None:
        while True:
            group = self._next_group()
            if group is None:
                return
            try:
                self.results[group] = self._run_group(group)
            except BaseException as error:  # noqa: B902 - report, never hang the waiting test
                self.results[group] = {op: {"op": op, "count": 0, "seconds": None,
                                            "failure": f"runner error: {error!r}"} for op in self.groups[group]}
            for op, entry in self.results[group].items():
                fuzzing.count(op, "malformed", entry["count"])
                if entry.get("seconds") is not None:
                    fuzzing.add_seconds(op, "malformed", entry["seconds"])
            self.done[group].set()

    def _run_group(self, group: str) -> Dict[str, dict]:
        ops = self.groups[group]
        tmp = Path(self._tmp.name)
        results: Dict[str, dict] = {}
        result_file, last_file = tmp / f"{group}.jsonl", tmp / f"{group}.last"
        deadline = time.monotonic() + self.timeouts[group]
        while not self._stopped:
            pending = [op for op in ops if op not in results]
            if not pending:
                break
            result_file.write_text("")
            last_file.write_text("")
            cmd = [sys.executable, "-m", WORKER, group, "--result", str(result_file), "--last", str(last_file),
                   "--only", ",".join(pending)]
            remaining = max(deadline - time.monotonic(), 10.0)
            # An explicit environment: with env=None the child execs with the C `environ`, which
            # pytest rewrites (PYTEST_CURRENT_TEST) in the main thread while this thread spawns;
            # under vfork that race made execve fail with EFAULT (seen in CI under ASan).
            proc = self._procs[group] = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                                         cwd=str(ROOT), env=self._env)
            try:
                stdout, stderr = proc.communicate(timeout=remaining)
                code = proc.returncode
            except subprocess.TimeoutExpired:
                proc.kill()
                stdout, stderr = proc.communicate()
                code = "timeout"
            stdout, stderr = stdout.decode(errors="replace"), stderr.decode(errors="replace")
            for line in result_file.read_text().splitlines():
                entry = json.loads(line)
                results[entry["op"]] = entry
            if code == 0 or self._stopped:
                continue
            last = last_file.read_text().split("\n", 2)
            if len(last) == 3 and last[0] in pending and last[0] not in results:
                op, tried, desc = last[0], int(last[1]), last[2].strip()
                how = ("the group's time limit" if code == "timeout" else
                       EXIT_MEANINGS.get(code, f"a crash (exit status {code}{_signal_name(code)})"))
                results[op] = {"op": op, "count": tried, "seconds": None, "failure": (
                    f"{op}: the worker died of {how} on input #{tried}:\n  {desc}\n"
                    f"--- worker stderr (tail) ---\n{stderr[-5000:]}{_sanitizer_reports(proc.pid)}")}
            else:
                for op in pending:
                    results.setdefault(op, {"op": op, "count": 0, "seconds": None, "failure": (
                        f"the worker for group {group!r} failed outside any op (exit {code}):\n"
                        f"{stdout[-2000:]}\n{stderr[-5000:]}")})
        return results


def _sanitizer_reports(pid: int) -> str:
    """The sanitizer reports a worker wrote (ASan/UBSan ``log_path=...`` write PATH.PID)."""
    text = ""
    for variable in ("ASAN_OPTIONS", "UBSAN_OPTIONS"):
        for option in os.environ.get(variable, "").split(":"):
            if option.startswith("log_path="):
                path = Path(f"{option[len('log_path='):]}.{pid}")
                if path.is_file():
                    text += f"\n--- {path} ---\n" + path.read_text(errors="replace")[:6000]
    return text


def timeout_for(ci_counts: List[int]) -> float:
    """Wall-clock limit of a group: generous; a single hung call is caught much sooner."""
    slow = 3 if os.environ.get("RPFAST_SANITIZER") else 1
    return 300 + 0.5 * sum(ci_counts) * fuzzing.SCALE * slow
