"""``rpfast molecules``: RP models on MoleculeNet classification (paper Table 2); see
:mod:`rpfast.experiments.molecules`."""
import argparse

from rpfast._options import add_dataclass_options, config_from_args
from rpfast.experiments.molecules import MoleculesConfig, main

HELP = "Duvenaud, RP-Duvenaud, k-ary and DFS models on MoleculeNet data (paper Table 2)"
PAPER = {"splits": 3, "epochs": 50}


def add_parser(parser: argparse.ArgumentParser) -> None:
    parser.description = ("Train Duvenaud, RP-Duvenaud, k-ary Duvenaud, CNN-DFS and RNN-DFS on Tox21 (shipped) or any "
                          "MoleculeNet-style CSV, and write a table of test ROC-AUC, CSV/JSON and figures.")
    add_dataclass_options(parser, MoleculesConfig)
    parser.add_argument("--paper", action="store_true",
                        help=f"the paper's protocol: {PAPER['splits']} random splits, {PAPER['epochs']} epochs")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bars")


def run(args: argparse.Namespace) -> int:
    main(config_from_args(MoleculesConfig, args, **(PAPER if args.paper else {})), progress=not args.no_progress)
    return 0
