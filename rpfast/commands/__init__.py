"""The ``rpfast`` commands, one module each, registered in :data:`COMMANDS`.

A command module has ``HELP`` (one line for ``rpfast --help``), ``add_parser(parser)``
(adds its options, mostly derived from its config dataclass by :mod:`rpfast._options`)
and ``run(args) -> int`` (the exit status). :mod:`rpfast.cli` builds the parser from this
table and dispatches; it knows no command option.
"""
from rpfast.commands import csl, info, molecules, pairs, subsets

COMMANDS = {"csl": csl, "molecules": molecules, "subsets": subsets, "pairs": pairs, "info": info}

__all__ = ["COMMANDS"]
