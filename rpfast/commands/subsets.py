"""``rpfast subsets``: enumerate or count the k-subsets of one graph, or of every molecule of a
molecule file, streaming the output; see :mod:`rpfast.experiments.subsets`."""
import argparse
from dataclasses import asdict

from rpfast._options import add_dataclass_options, config_from_args
from rpfast.experiments.subsets import SubsetsConfig, run_subsets

HELP = "enumerate or count the k-vertex subsets of a graph"


def add_parser(parser: argparse.ArgumentParser) -> None:
    parser.description = ("Enumerate the k-subsets of a graph's vertices (k-ary RP), optionally pruned, streaming "
                          "rows of original vertex labels to stdout, a .csv or a .npy file. For a molecule file "
                          "each row is 'molecule,atom_1,...,atom_k': the molecule's 0-based row in the file, "
                          "then atom indices in RDKit's parse order; SMILES RDKit cannot parse are skipped and "
                          "reported.")
    add_dataclass_options(parser, SubsetsConfig)


def run(args: argparse.Namespace) -> int:
    run_subsets(**asdict(config_from_args(SubsetsConfig, args)))
    return 0
