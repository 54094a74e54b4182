"""The processes a command under test starts (Linux /proc): its spawned workers, and whether one still runs."""
import signal
import subprocess
from pathlib import Path


def start_command(command, **kwargs) -> subprocess.Popen:
    """``command`` started as from a terminal, with pipes for its output: SIGHUP at its default
    disposition even where the tests run under ``nohup``, whose ignored SIGHUP a child would
    inherit (and rpfast, as it should, keeps ignoring)."""
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_DFL), **kwargs)


def children(pid: int):
    """The worker processes (multiprocessing spawn children) of process ``pid``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (entry / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == pid and b"spawn_main" in cmdline:
            found.append(int(entry.name))
    return sorted(found)


def alive(pid: int) -> bool:
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
