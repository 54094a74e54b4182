"""Featurising a data set once for a process group: each process reads RDKit's properties for its
share of the molecules, and the codes are gathered so that every process holds all of them.

One process (or a featurisation cache every process finds valid) featurises as
:func:`~rpfast.datasets.molecule_cache.featurize_dataset` does. In a group of ``W`` processes
process ``r`` featurises the contiguous share ``[r n / W, (r + 1) n / W)`` of the ``n`` SMILES
with its own threads' worth of worker processes, the codes are gathered in rank order (which is
the data set's order, so the result is the one-process featurisation bit for bit), and rank 0
writes the cache. The group decides together whether to use the cache: a file one process cannot
use (another node's cache folder, a damaged copy) makes every process featurise.
"""
import warnings
from typing import List

import torch

from rpfast.data.segments import offsets
from rpfast.datasets.molecule_cache import cached_graphs, featurize_dataset, store_graphs
from rpfast.datasets.molecules import MoleculeGraphs, featurize_smiles
from rpfast.datasets.moleculenet import MoleculeDataset
from rpfast.experiments.distributed import Context

__all__ = ["featurize_for_group", "share"]


def share(count: int, rank: int, world_size: int) -> range:
    """Rank ``rank``'s contiguous share of ``range(count)`` among ``world_size`` processes (the
    shares differ by at most one and cover the range in rank order)."""
    for name, value in (("count", count), ("rank", rank), ("world_size", world_size)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{name} must be a non-negative int, got {value!r}")
    if not 0 <= rank < world_size:
        raise ValueError(f"rank must lie in [0, world_size={world_size}), got {rank}")
    return range(rank * count // world_size, (rank + 1) * count // world_size)


def featurize_for_group(dataset: MoleculeDataset, context: Context, progress: bool = False) -> MoleculeGraphs:
    """``dataset``'s :class:`MoleculeGraphs` in every process of ``context``'s group, each process
    featurising its :func:`share` (see the module docstring); a progress bar on rank 0 only."""
    if not context.distributed:
        return featurize_dataset(dataset, progress=progress)
    with warnings.catch_warnings():
        if not context.main:  # one warning about a bad cache file, not one per process
            warnings.simplefilter("ignore")
        cached = cached_graphs(dataset)
    usable = context.all_reduce_sum(torch.tensor([float(cached is not None)]))
    if int(usable[0]) == context.world_size:
        return cached
    del cached
    mine = share(len(dataset), context.rank, context.world_size)
    part = featurize_smiles(dataset.smiles[mine.start:mine.stop], progress=progress and context.main,
                            workers=max(1, torch.get_num_threads()))
    graphs = _gathered(part, mine.start, dataset.smiles, context)
    if context.main:
        store_graphs(graphs, dataset)
    return graphs


def _gathered(part: MoleculeGraphs, start: int, smiles: List[str], context: Context) -> MoleculeGraphs:
    """Every process's ``part`` (its share's molecules, rows counted from ``start``) as one
    :class:`MoleculeGraphs` of the whole data set. Bond pairs are local to their molecule, so
    codes concatenate as they are; offsets are rebuilt from the gathered counts."""
    gather = context.all_gather_rows
    atoms, bonds, pairs = gather(part.atoms), gather(part.bonds), gather(part.pairs)
    atom_counts, bond_counts = gather(part.atom_ptr.diff()), gather(part.bond_ptr.diff())
    rows = gather(part.rows + start)
    invalid = gather(torch.tensor(part.invalid, dtype=torch.int64) + start).tolist()
    return MoleculeGraphs(atoms, bonds, pairs, offsets(atom_counts), offsets(bond_counts), rows, invalid,
                          [smiles[i] for i in rows.tolist()])
