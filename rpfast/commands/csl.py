"""``rpfast csl``: RP-GIN vs GIN on the CSL graphs (paper Table 1); see :mod:`rpfast.experiments.csl.experiment`."""
import argparse

from rpfast._options import add_dataclass_options, config_from_args
from rpfast.experiments.csl.experiment import CSLConfig, main

HELP = "RP-GIN vs GIN on the CSL graphs (paper Table 1)"
PAPER_EPOCHS, PAPER_SEEDS, PAPER_BATCH = 1000, 5, 0  # batch 0: the whole fold, as the paper's code trains


def add_parser(parser: argparse.ArgumentParser) -> None:
    parser.description = ("Cross-validate GIN and RP-GIN on the 150 CSL graphs (41 vertices, 10 skip lengths) "
                          "and write a table, CSV/JSON and a figure.")
    add_dataclass_options(parser, CSLConfig)
    parser.add_argument("--paper", action="store_true",
                        help=f"the paper's full protocol (an option given beside it with a non-default value wins): "
                             f"{PAPER_EPOCHS} epochs, {PAPER_SEEDS} initialisations per fold, "
                             "full-batch training (one step per epoch on the whole training fold)")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def run(args: argparse.Namespace) -> int:
    paper = {"epochs": PAPER_EPOCHS, "seeds": PAPER_SEEDS, "batch_size": PAPER_BATCH} if args.paper else None
    main(config_from_args(CSLConfig, args, preset=paper), progress=not args.no_progress)
    return 0
