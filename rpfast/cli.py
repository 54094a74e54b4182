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

INT64_MAX = (1 << 63) - 1
EXIT_INTERRUPTED = 130
EXIT_BROKEN_PIPE = 141


class _Parser(argparse.ArgumentParser):
    """ArgumentParser whose usage errors are one line: ``PROG: error: MESSAGE``."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def _int_range(minimum: int, maximum: int = INT64_MAX):
    """argparse ``type=``: an integer in [minimum, maximum] (default: 64-bit signed max)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        if value > maximum:
            raise argparse.ArgumentTypeError(f"must be <= {maximum}, got {value}")
        return value

    return parse


def _add_csl(sub) -> None:
    from rpfast.experiments.csl import CSLConfig

    d = CSLConfig()
    p = sub.add_parser("csl", help="RP-GIN vs GIN on the CSL graphs (paper Table 1)",
                       description="Cross-validate GIN and RP-GIN on the 150 CSL graphs (41 vertices, "
                                   "10 skip lengths) and write a table, CSV/JSON and a figure.")
    p.add_argument("--epochs", type=int, default=d.epochs, help=f"training epochs per run (default {d.epochs})")
    p.add_argument("--folds", type=int, default=d.folds, help=f"cross-validation folds (default {d.folds})")
    p.add_argument("--seeds", type=int, default=d.seeds, help=f"random initialisations per fold (default {d.seeds})")
    p.add_argument("--id-dim", type=int, default=d.id_dim, help=f"one-hot ID width m, IDs = position mod m (default {d.id_dim})")
    p.add_argument("--hidden", type=int, default=d.hidden, help=f"GIN width (default {d.hidden})")
    p.add_argument("--layers", type=int, default=d.num_layers, help=f"GIN layers (default {d.num_layers})")
    p.add_argument("--lr", type=float, default=d.lr, help=f"Adam learning rate, cosine-annealed (default {d.lr})")
    p.add_argument("--batch-size", type=int, default=d.batch_size, help=f"graphs per step (default {d.batch_size})")
    p.add_argument("--inference-perms", type=int, default=d.inference_perms,
                   help=f"permutations averaged at validation (default {d.inference_perms})")
    p.add_argument("--data-seed", type=int, default=d.data_seed, help="seed of the relabelings and folds")
    p.add_argument("--out", default=d.out_dir, help=f"output directory (default {d.out_dir})")
    p.add_argument("--threads", type=int, default=None, help="kernel/torch threads (default: torch's)")
    p.add_argument("--paper", action="store_true", help="the paper's full protocol: 1000 epochs, 5 initialisations per fold")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.set_defaults(handler=_run_csl)


def _run_csl(args) -> int:
    from rpfast.experiments.csl import CSLConfig, main

    config = CSLConfig(
        epochs=1000 if args.paper else args.epochs, folds=args.folds, seeds=5 if args.paper else args.seeds,
        id_dim=args.id_dim, hidden=args.hidden, num_layers=args.layers, lr=args.lr,
        batch_size=args.batch_size, inference_perms=args.inference_perms, data_seed=args.data_seed,
        out_dir=args.out, threads=args.threads,
    )
    main(config, progress=not args.no_progress)
    return 0


def _add_subsets(sub) -> None:
    p = sub.add_parser("subsets", help="enumerate or count the k-vertex subsets of a graph",
                       description="Enumerate the k-subsets of a graph's vertices (k-ary RP), optionally pruned, "
                                   "streaming rows of original vertex labels to stdout, a .csv or a .npy file.")
    p.add_argument("graph", help="edge-list file ('u v' per line, '#' comments) or, with --smiles, a SMILES string")
    p.add_argument("--k", type=_int_range(1), required=True, help="subset size")
    p.add_argument("--prune", default="none", choices=["none", "edgeless", "isolated", "connected"],
                   help="drop subsets without an edge / with an isolated vertex / keep connected ones")
    p.add_argument("--smiles", action="store_true", help="GRAPH is a SMILES string (needs RDKit)")
    p.add_argument("--count", action="store_true", help="only print the number of subsets")
    p.add_argument("--out", default="-", help="'-' (stdout, default), FILE.csv or FILE.npy "
                                               "(written under a temporary name, renamed when complete)")
    p.add_argument("--force", action="store_true", help="overwrite an existing --out file")
    p.add_argument("--chunk-size", type=_int_range(1), default=1 << 20, help="rows per streamed chunk")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    p.set_defaults(handler=_run_subsets)


def _run_subsets(args) -> int:
    from rpfast.tools.subsets import run_subsets

    run_subsets(args.graph, args.k, args.prune, smiles=args.smiles, count=args.count, out=args.out,
                chunk_size=args.chunk_size, progress=not args.no_progress, force=args.force)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="rpfast", description="Fast Relational Pooling for graph neural networks.")
    sub = parser.add_subparsers(dest="command", metavar="command")
    sub.required = True
    _add_csl(sub)
    _add_subsets(sub)
    info = sub.add_parser("info", help="print how rpfast was built")
    info.set_defaults(handler=lambda args: (__import__("rpfast").show_config(), 0)[1])
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
