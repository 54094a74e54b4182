"""``rpfast molecules``: ``train`` (the default) RP models on MoleculeNet data (paper Table 2),
``predict`` new molecules with their checkpoints; see :mod:`rpfast.experiments.molecules.train` and
:mod:`rpfast.experiments.molecules.predict`."""
import argparse

from rpfast._options import add_dataclass_options, config_from_args
from rpfast.experiments.molecules import predict as molecules_predict, train as molecules
from rpfast.experiments.molecules.paper import PAPER_PROTOCOL

HELP = "train Duvenaud, RP-Duvenaud, k-ary and DFS models on MoleculeNet data (paper Table 2); predict with them"
#: The subcommands; ``rpfast molecules [options]`` without one runs ``train``.
ACTIONS = ("train", "predict")
DEFAULT_ACTION = "train"


def add_parser(parser: argparse.ArgumentParser) -> None:
    parser.description = ("Train RP molecule models and score new molecules with them. Without a subcommand, "
                          "'rpfast molecules [options]' runs 'train'.")
    sub = parser.add_subparsers(dest="action", metavar="{train,predict}")
    sub.required = True
    train = sub.add_parser("train", help="train the models (default); writes tables, checkpoints, test predictions",
                           description="Train Duvenaud, RP-Duvenaud, k-ary Duvenaud, CNN-DFS and RNN-DFS on Tox21 "
                                       "(shipped) or any MoleculeNet-style CSV (classification or regression), and "
                                       "write a table of test metrics, CSV/JSON, figures, the splits, and per model "
                                       "and split the best checkpoint and its test predictions.")
    add_dataclass_options(train, molecules.MoleculesConfig)
    train.add_argument("--paper", action="store_true",
                       help=f"the paper's Table 2 protocol (an option given beside it with a non-default value wins): "
                            f"{PAPER_PROTOCOL['splits']} random splits of --model {PAPER_PROTOCOL['models']} and the "
                            f"k sweep (on {PAPER_PROTOCOL['sweep_splits']} split), up to {PAPER_PROTOCOL['epochs']} epochs, stopping "
                            f"early after {PAPER_PROTOCOL['patience']} epochs without a better validation metric "
                            f"(of {PAPER_PROTOCOL['valid_samples']} relabelings)")
    train.add_argument("--no-progress", action="store_true", help="hide the progress bars")
    predict = sub.add_parser("predict", help="score molecules with trained checkpoints (an ensemble averages them)",
                             description="Score the molecules of a CSV or .smi file with checkpoints of 'rpfast molecules "
                                         "train' (several are averaged) and write one row of predictions per "
                                         "input row; SMILES RDKit cannot parse and blank lines keep their row, "
                                         "empty. Each molecule is scored on its own: its prediction does not depend "
                                         "on the other rows, bit for bit on the same thread count (--threads; "
                                         "default: the training run's).")
    add_dataclass_options(predict, molecules_predict.PredictConfig)
    predict.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def run(args: argparse.Namespace) -> int:
    if args.action == "predict":
        molecules_predict.main(config_from_args(molecules_predict.PredictConfig, args), progress=not args.no_progress)
    else:
        config = config_from_args(molecules.MoleculesConfig, args, preset=PAPER_PROTOCOL if args.paper else None)
        molecules.main(config, progress=not args.no_progress)
    return 0
