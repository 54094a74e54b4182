"""The ``rpfast`` command: the paper's experiments and utilities.

Every error is one line on stderr, ``rpfast <command>: error: ...``, with exit status 2
(bad options, bad input, ``OSError`` such as a missing file, no permission or a full
disk, a process of ``--nproc`` that died: ``rank 1 was killed by SIGKILL``); Ctrl-C prints
``rpfast <command>: interrupted`` and exits 130; SIGTERM and SIGHUP are handled like Ctrl-C
(temporary outputs removed, worker processes stopped): ``rpfast <command>: terminated by
SIGTERM``, exit status 128 + the signal's number (143, 129). When the reader of stdout goes
away (``rpfast subsets ... | head``) the command stops quietly with exit status 141
(128 + SIGPIPE), as a shell reports for a program killed by a broken pipe.
"""
import argparse
import contextlib
import os
import signal
import sys
import threading
from typing import Iterator, List, Optional

EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141


class Terminated(SystemExit):
    """Raised in the main thread when SIGTERM or SIGHUP arrives during a command, so that every
    ``finally`` and cleanup (temporary files and directories, worker processes) runs as for
    Ctrl-C; ``code`` is 128 + the signal's number. A SystemExit, not an Exception: no
    ``except Exception`` on the way swallows it."""

    def __init__(self, signum: int):
        super().__init__(128 + signum)
        self.signum = signum


TERMINATING_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


@contextlib.contextmanager
def _terminating_signals_raise() -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP raise :class:`Terminated` (once; a repeated signal
    is ignored while the cleanup runs); the previous handlers are restored after it. Only in
    the main thread, the one where Python runs signal handlers."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    raised = []

    def handler(signum, frame):
        if not raised:
            raised.append(signum)
            raise Terminated(signum)

    previous = {}
    try:
        for signum in TERMINATING_SIGNALS:
            if signal.getsignal(signum) is signal.SIG_IGN:
                continue  # started under nohup (SIGHUP ignored) or told to ignore it: keep that
            previous[signum] = signal.signal(signum, handler)
        yield
    finally:
        for signum, old in previous.items():
            signal.signal(signum, old)


class _Parser(argparse.ArgumentParser):
    """ArgumentParser whose usage errors are one line: ``PROG: error: MESSAGE``."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def build_parser() -> argparse.ArgumentParser:
    """The ``rpfast`` parser: one subcommand per entry of :data:`rpfast.commands.COMMANDS`."""
    from rpfast import __version__
    from rpfast.commands import COMMANDS

    parser = _Parser(prog="rpfast", description="Fast Relational Pooling for graph neural networks.")
    parser.add_argument("--version", action="version", version=f"rpfast {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="command")
    sub.required = True
    for name, command in COMMANDS.items():
        command_parser = sub.add_parser(name, help=command.HELP)
        command.add_parser(command_parser)
        command_parser.set_defaults(handler=command.run)
    return parser


def _one_line(error: BaseException) -> str:
    """The error as one line; an OSError from the system as 'strerror: filename'."""
    if isinstance(error, OSError) and error.strerror:
        names = [str(f) for f in (error.filename, error.filename2) if f is not None]
        text = f"{error.strerror}: {' -> '.join(names)}" if names else error.strerror
    else:
        text = str(error) or type(error).__name__
    return " ".join(line.strip() for line in text.splitlines() if line.strip())


def _discard_stdout() -> None:
    """Point stdout at /dev/null if it cannot be flushed (closed pipe, full disk).

    Otherwise Python's own flush at exit fails again and prints a second error.
    """
    try:
        sys.stdout.flush()
    except (OSError, ValueError):
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass


def _with_default_action(argv: List[str]) -> List[str]:
    """``argv`` with the command's ``DEFAULT_ACTION`` inserted when the command has subcommands
    (``ACTIONS``) and none is named (``rpfast molecules --epochs 3`` is ``rpfast molecules train
    --epochs 3``); ``--help`` alone still shows the command's own help."""
    from rpfast.commands import COMMANDS

    command = COMMANDS.get(argv[0]) if argv else None
    default = getattr(command, "DEFAULT_ACTION", None)
    if default is None:
        return argv
    rest = argv[1:]
    if rest and (rest[0] in command.ACTIONS or rest[0] in ("-h", "--help")):
        return argv
    return [argv[0], default] + rest


def main(argv: Optional[List[str]] = None) -> int:
    """Run the command line; returns the exit status (errors exit through ``SystemExit``)."""
    parser = build_parser()
    args = parser.parse_args(_with_default_action(list(sys.argv[1:] if argv is None else argv)))
    prog = f"rpfast {args.command}"
    try:
        with _terminating_signals_raise():
            status = args.handler(args)
            sys.stdout.flush()
        return status
    except BrokenPipeError:
        _discard_stdout()
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        parser.exit(EXIT_INTERRUPTED, f"{prog}: interrupted\n")
    except Terminated as stop:
        _discard_stdout()
        parser.exit(stop.code, f"{prog}: terminated by {signal.Signals(stop.signum).name}\n")
    except (ValueError, TypeError, IndexError, OverflowError, MemoryError, ImportError, OSError) as error:
        if isinstance(error, OSError):
            _discard_stdout()
        parser.exit(2, f"{prog}: error: {_one_line(error)}\n")


if __name__ == "__main__":
    sys.exit(main())
