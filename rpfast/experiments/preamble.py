"""The one preamble of an experiment (``rpfast csl``, ``molecules``, ``pairs``): what is checked
and set once, before any work, in this order, so that a bad option or output is reported alone
and before the load check's line:

1. the options: ``config.validate()``;
2. the output, by the experiment's output policy: an atomic directory (written whole at the
   end; :func:`check_atomic_directory`) or streamed rows (``rpfast pairs``: a new directory, or
   the one ``--resume`` continues), checked by the process that writes it;
3. the thread budget: ``config.threads`` becomes the cores other processes leave free
   (:func:`~rpfast.experiments.threads.free_threads`) unless given.

Under ``torchrun`` the launcher chose the processes and threads, so step 3 is skipped and only
rank 0, which writes, checks the output.
"""
from typing import Any, Callable

import torch

from rpfast._io import check_output_dir
from rpfast.experiments import distributed
from rpfast.experiments.threads import free_threads

__all__ = ["prepare", "check_atomic_directory"]


def check_atomic_directory(config) -> None:
    """The atomic-directory policy's check: ``config.out_dir`` can be written whole (a non-empty
    one only with ``config.force``; :func:`rpfast._io.check_output_dir`)."""
    check_output_dir(config.out_dir, getattr(config, "force", False))


def prepare(config, command: str, check_output: Callable[[Any], None] = check_atomic_directory) -> None:
    """Run the preamble (see the module docstring) on ``config``, in place; ``command`` names the
    command in the load check's line."""
    config.validate()
    if distributed.main_process():
        check_output(config)
    if not distributed.under_launcher():
        config.threads = free_threads(config.threads, torch.get_num_threads(), command)
