"""The one shape of an experiment behind a command: config -> runs -> rows -> report.

``rpfast csl``, ``molecules`` and ``pairs`` are each an :class:`Experiment`: its ``main`` runs
the preamble once (:func:`~rpfast.experiments.preamble.prepare`: options, output, threads), then
the runs, which train through :func:`~rpfast.experiments.training.fit` and give the rows, then
the report (the table printed, the outputs written by the output policy, a closing line). Two
output policies: an atomic directory, written whole and renamed into place at the end
(:func:`~rpfast.experiments.report.write_outputs`, csl and molecules), and streamed rows, each
appended and flushed as its run finishes so ``--resume`` continues an interrupted campaign
(pairs). A command module only turns its arguments into the config and calls ``main``.
"""
from dataclasses import dataclass
from typing import Any, Callable, Dict

from rpfast.experiments import distributed
from rpfast.experiments.preamble import check_atomic_directory, prepare

__all__ = ["Experiment"]


@dataclass(frozen=True)
class Experiment:
    """One experiment (see the module docstring).

    * ``command``: its name in the load check's line ("rpfast csl").
    * ``run(config, progress)``: the runs, returning the results that hold the rows; with
      ``in_process_group`` it runs in ``config.nproc`` processes or the group ``torchrun`` made
      (:func:`~rpfast.experiments.distributed.run_experiment`), else in this process.
    * ``report(results, config)``: prints the table and writes the outputs; called in the one
      process that writes.
    * ``check_output(config)``: the output policy's check, in the preamble.
    """

    command: str
    run: Callable[[Any, bool], Dict]
    report: Callable[[Dict, Any], None]
    check_output: Callable[[Any], None] = check_atomic_directory
    in_process_group: bool = True

    def main(self, config, progress: bool = True) -> Dict:
        """Preamble, runs, report; returns the results (this process's under a launcher)."""
        prepare(config, self.command, self.check_output)
        if self.in_process_group:
            results, writes = distributed.run_experiment(self.run, config, progress)
        else:
            results, writes = self.run(config, progress), True
        if writes:
            self.report(results, config)
        return results
