"""The ``rpfast`` command: the paper's experiments and utilities.

Every error is one line on stderr, ``rpfast <command>: error: ...``, with exit status 2
(bad options, bad input, ``OSError`` such as a missing file, no permission or a full
disk); Ctrl-C prints ``rpfast <command>: interrupted`` and exits 130. When the reader of
stdout goes away (``rpfast subsets ... | head``) the command stops quietly with exit
status 141 (128 + SIGPIPE), as a shell reports for a program killed by a broken pipe.
"""
import argparse
import os
import sys
from typing import List, Optional

EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141


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


def main(argv: Optional[List[str]] = None) -> int:
    """Run the command line; returns the exit status (errors exit through ``SystemExit``)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    prog = f"rpfast {args.command}"
    try:
        status = args.handler(args)
        sys.stdout.flush()
        return status
    except BrokenPipeError:
        _discard_stdout()
        return EXIT_BROKEN_PIPE
    except KeyboardInterrupt:
        parser.exit(EXIT_INTERRUPTED, f"{prog}: interrupted\n")
    except (ValueError, TypeError, IndexError, OverflowError, MemoryError, ImportError, OSError) as error:
        if isinstance(error, OSError):
            _discard_stdout()
        parser.exit(2, f"{prog}: error: {_one_line(error)}\n")


if __name__ == "__main__":
    sys.exit(main())
