"""``rpfast info``: how rpfast was built (compiler, flags, OpenMP, threads, CUDA)."""
import argparse

HELP = "print how rpfast was built"


def add_parser(parser: argparse.ArgumentParser) -> None:
    parser.description = "Print the compiler, flags, OpenMP and thread settings of this rpfast build."


def run(args: argparse.Namespace) -> int:
    from rpfast import show_config

    show_config()
    return 0
