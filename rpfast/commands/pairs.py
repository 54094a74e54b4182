"""``rpfast pairs``: RP on pairs of 1-WL-equivalent graphs under the RPC protocol (BREC); see
:mod:`rpfast.experiments.pairs.protocol` and :mod:`rpfast.experiments.pairs.run`."""
import argparse

from rpfast._options import add_dataclass_options, config_from_args
from rpfast.experiments.pairs.run import PairsConfig, main

HELP = "RP models on pairs of 1-WL-equivalent graphs under BREC's RPC protocol"


def add_parser(parser: argparse.ArgumentParser) -> None:
    parser.description = ("For each pair of graphs, train a fresh model to tell them apart and test the "
                          "difference of their embeddings with Hotelling's T2 (BREC's RPC protocol); print the "
                          "score per category beside published ones and write per-pair CSV, JSON and a figure.")
    add_dataclass_options(parser, PairsConfig)
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def run(args: argparse.Namespace) -> int:
    main(config_from_args(PairsConfig, args), progress=not args.no_progress)
    return 0
