"""Molecules: everything that touches RDKit lives in this module.

Heavy-atom graphs of SMILES strings or RDKit ``Mol`` objects (vertices are atoms in the
order RDKit parsed them, edges are bonds in both directions) and RDKit's canonical atom
order. RDKit is imported on first use, so the rest of rpfast works without it.
"""
import contextlib
import logging
import os
from typing import Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np
import torch
from torch import Tensor

from rpfast._memory import release_free_memory
from rpfast.data.batch import GraphBatch
from rpfast.datasets.molecule_graphs import (_DEGREES, _HCOUNTS, _HYBRIDS, _VALENCES, ATOM_FEATURES, BOND_FEATURES,
                                             CODE_NUMPY_DTYPE, ELEMENTS, FEATURE_DTYPE, MoleculeGraphs)

# MoleculeGraphs and the feature layout (ELEMENTS, ATOM_FEATURES, ...) are imported from molecule_graphs,
# which documents them; they stay importable from here.
__all__ = ["graph_from_smiles", "batch_from_smiles", "parse_smiles_quietly", "canonical_order_from_mol",
           "featurize_smiles", "scaffold_groups", "featurizer_settings", "atom_count_bounds", "CHUNK_MOLECULES"]


def _chem(what: str = "reading SMILES"):
    """RDKit's ``Chem`` module, imported on first use (RDKit is optional for the rest of rpfast)."""
    try:
        from rdkit import Chem
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError(f"{what} needs RDKit: pip install rdkit") from error
    return Chem


def _mol_graph(mol) -> Tuple[torch.Tensor, int]:
    """(edge_index [2, 2 * bonds] in both directions, atoms) of an RDKit molecule."""
    bonds = np.array([[b.GetBeginAtomIdx(), b.GetEndAtomIdx()] for b in mol.GetBonds()], dtype=np.int64)
    edges = torch.as_tensor(bonds.reshape(-1, 2).T.copy())
    return torch.cat([edges, edges.flip(0)], dim=1), mol.GetNumAtoms()


def _check_smiles(smiles, name: str) -> None:
    """TypeError naming ``name`` and the type unless ``smiles`` is a ``str`` (RDKit's own is cryptic)."""
    if not isinstance(smiles, str):
        raise TypeError(f"{name} must be a SMILES string, got {type(smiles).__name__}")


def graph_from_smiles(smiles: str) -> Tuple[GraphBatch, np.ndarray]:
    """Heavy-atom graph of a molecule (RDKit): vertices are atoms in SMILES order, edges bonds.

    Returns the graph and the atom indices as labels. A non-string raises ``TypeError``.
    """
    _check_smiles(smiles, "smiles")
    mol = _chem().MolFromSmiles(smiles)
    if mol is None:
        raise ValueError(f"RDKit could not parse the SMILES string {smiles!r}")
    edge_index, n = _mol_graph(mol)
    return GraphBatch(edge_index, num_nodes=n), np.arange(n, dtype=np.int64)


def batch_from_smiles(smiles_list, skip_invalid: bool = False) -> Tuple[GraphBatch, torch.Tensor]:
    """Heavy-atom graphs of many molecules as one GraphBatch (atoms in SMILES order).

    ``smiles_list`` is an iterable of SMILES strings; a bare ``str`` is ONE molecule (not
    one per character). An entry that is not a ``str`` raises ``TypeError`` naming its
    index and type. Returns ``(batch, kept)`` with ``kept`` the indices of the parsed
    SMILES; ``batch.smiles`` lists the kept SMILES. Strings RDKit cannot parse raise ``ValueError`` naming the first one, or are
    dropped (silently, with RDKit's parse messages muted) with ``skip_invalid=True`` (Tox21
    has a few, e.g. hypervalent aluminium).
    """
    if isinstance(smiles_list, str):
        smiles_list = [smiles_list]
    try:
        smiles_list = list(smiles_list)
    except TypeError:
        raise TypeError("smiles_list must be a SMILES string or an iterable of them, "
                        f"got {type(smiles_list).__name__}") from None
    for i, smiles in enumerate(smiles_list):
        _check_smiles(smiles, f"smiles_list[{i}]")
    Chem = _chem()
    from rdkit import RDLogger  # noqa: E402 - after _chem(), which explains a missing RDKit

    if not isinstance(skip_invalid, bool):
        raise TypeError(f"skip_invalid must be a bool, got {type(skip_invalid).__name__} {skip_invalid!r}")
    if skip_invalid:
        RDLogger.DisableLog("rdApp.error")
    try:
        graphs, kept = _parse_graphs(Chem, smiles_list, skip_invalid)
    finally:
        if skip_invalid:
            RDLogger.EnableLog("rdApp.error")
    return _smiles_batch(smiles_list, graphs, kept), torch.tensor(kept, dtype=torch.int64)


def parse_smiles_quietly(smiles_list: Sequence[str]) -> Tuple[GraphBatch, torch.Tensor, List[int]]:
    """:func:`batch_from_smiles` with ``skip_invalid=True`` and all of RDKit's log silenced:
    ``(batch, kept, warned)``, ``warned`` the indices of the kept molecules for which RDKit
    logged a message (a warning such as "not removing hydrogen atom without neighbors").

    While it runs, RDKit's log goes to the ``rdkit`` Python logger, whose handlers are set
    aside; afterwards RDKit logs to its C++ streams again (its default) and the handlers are
    restored. Entries must be ``str`` (``TypeError`` naming the index otherwise)."""
    if isinstance(smiles_list, str):
        smiles_list = [smiles_list]
    smiles_list = list(smiles_list)
    for i, smiles in enumerate(smiles_list):
        _check_smiles(smiles, f"smiles_list[{i}]")
    Chem = _chem()
    with _rdkit_log_counted() as counter:
        graphs, kept, warned = _parse_graphs(Chem, smiles_list, True, counter)
    return _smiles_batch(smiles_list, graphs, kept), torch.tensor(kept, dtype=torch.int64), warned


def _parse_graphs(Chem, smiles_list: Sequence[str], skip_invalid: bool, counter=None):
    """``(graphs, kept)`` of the SMILES RDKit parses, in order (and, with a message ``counter``,
    the kept indices during whose parse RDKit logged: ``(graphs, kept, warned)``)."""
    graphs, kept, warned = [], [], []
    for i, smiles in enumerate(smiles_list):
        logged = counter.count if counter is not None else 0
        mol = Chem.MolFromSmiles(smiles)
        if mol is None:
            if skip_invalid:
                continue
            raise ValueError(f"RDKit could not parse SMILES #{i}: {smiles!r}")
        kept.append(i)
        graphs.append(_mol_graph(mol))
        if counter is not None and counter.count > logged:
            warned.append(i)
    return (graphs, kept) if counter is None else (graphs, kept, warned)


def _smiles_batch(smiles_list: Sequence[str], graphs, kept: List[int]) -> GraphBatch:
    batch = GraphBatch.from_edge_lists(graphs)
    batch.extras["smiles"] = [smiles_list[i] for i in kept]  # for Oriented("rdkit") and to_pyg()
    return batch


class _Counter(logging.Handler):
    """A logging handler that counts the records it receives and shows none."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1


@contextlib.contextmanager
def _rdkit_log_counted() -> Iterator[_Counter]:
    """RDKit's log routed to a counter instead of stderr for the block (see :func:`parse_smiles_quietly`)."""
    from rdkit import rdBase

    logger = logging.getLogger("rdkit")
    saved = logger.handlers[:], logger.propagate
    counter = _Counter()
    logger.handlers, logger.propagate = [counter], False
    rdBase.LogToPythonLogger()
    try:
        yield counter
    finally:
        rdBase.LogToCppStreams()
        logger.handlers, logger.propagate = saved


def canonical_order_from_mol(mols: Union[str, object, Sequence]) -> Tensor:
    """RDKit's canonical atom order for one molecule or a list (``Mol`` objects or SMILES).

    ``order[b, 0, i]`` is the atom with canonical rank i (``Chem.CanonicalRankAtoms`` with
    ``breakTies=True``), atoms numbered as RDKit parsed them (the order
    :func:`rpfast.datasets.batch_from_smiles` uses). Returns LongTensor ``[B, 1, n_max]``, -1
    padded, ready for :func:`permute_adjacency`.
    """
    Chem = _chem("canonical_order_from_mol")
    single = isinstance(mols, str) or not isinstance(mols, (list, tuple))
    items = [mols] if single else list(mols)
    orders = []
    for i, item in enumerate(items):
        mol = Chem.MolFromSmiles(item) if isinstance(item, str) else item
        if mol is None or not isinstance(mol, Chem.Mol):
            raise ValueError(f"molecule #{i} is not a valid RDKit Mol or SMILES: {item!r}")
        ranks = np.array(list(Chem.CanonicalRankAtoms(mol, breakTies=True)), dtype=np.int64)
        orders.append(np.argsort(ranks, kind="stable"))
    n_max = max((len(o) for o in orders), default=0)
    out = torch.full((len(orders), 1, n_max), -1, dtype=torch.int64)
    for b, order in enumerate(orders):
        out[b, 0, :len(order)] = torch.from_numpy(order)
    return out


# ------------------------------------------------------------------------------ featurisation
FEATURIZER_VERSION = "convmol-75/bond-10/v1"
#: Molecules one featurisation task reads (in a worker process, or in this one): what RDKit's
#: properties of a task's molecules take as Python tuples before they become codes stays small
#: (about 2 MB for 4,096 molecules of Tox21's size).
CHUNK_MOLECULES = 4096


def featurizer_settings() -> dict:
    """Everything that decides the features :func:`featurize_smiles` computes: the featuriser's
    version, its widths, element list and dtype, and the RDKit release (its perception of
    aromaticity, valences and stereo can change between releases). The featurisation cache keeps
    it and recomputes when it differs."""
    _chem("featurising molecules")
    import rdkit

    return {"version": FEATURIZER_VERSION, "atom_features": ATOM_FEATURES, "bond_features": BOND_FEATURES,
            "elements": list(ELEMENTS), "blocks": [_DEGREES, _VALENCES, _HYBRIDS, _HCOUNTS],
            "dtype": str(FEATURE_DTYPE), "rdkit": str(rdkit.__version__)}


def _read_molecules(smiles_list: Sequence[str], first_row: int = 0) -> dict:
    """RDKit's per-atom and per-bond properties of ``smiles_list`` as codes
    (:class:`~rpfast.datasets.molecule_graphs.MoleculeGraphs`' ``atoms``, ``bonds``, ``pairs``),
    the molecules' atom and bond counts and rows (from ``first_row``), and the rows that do not
    parse: the part of featurisation that needs RDKit (run in worker processes for large inputs)."""
    Chem = _chem("featurising molecules")
    from rdkit import RDLogger

    hybrid_code = {Chem.HybridizationType.SP: 0, Chem.HybridizationType.SP2: 1, Chem.HybridizationType.SP3: 2,
                   Chem.HybridizationType.SP3D: 3, Chem.HybridizationType.SP3D2: 4}
    bond_code = {Chem.BondType.SINGLE: 0, Chem.BondType.DOUBLE: 1, Chem.BondType.TRIPLE: 2, Chem.BondType.AROMATIC: 3}
    stereo_code = {Chem.BondStereo.STEREONONE: 0, Chem.BondStereo.STEREOANY: 1, Chem.BondStereo.STEREOZ: 2,
                   Chem.BondStereo.STEREOE: 3, Chem.BondStereo.STEREOCIS: 2, Chem.BondStereo.STEREOTRANS: 3}
    element_code = {symbol: i for i, symbol in enumerate(ELEMENTS[:-1])}
    other = len(ELEMENTS) - 1
    atom_props, bond_props, bond_pairs, atom_counts, bond_counts, rows, invalid = [], [], [], [], [], [], []
    RDLogger.DisableLog("rdApp.*")
    try:
        for i, smiles in enumerate(smiles_list, start=first_row):
            mol = Chem.MolFromSmiles(smiles) if smiles.strip() else None  # RDKit parses "" as no atoms
            if mol is None:
                invalid.append(i)
                continue
            for atom in mol.GetAtoms():
                atom_props.append((element_code.get(atom.GetSymbol(), other), atom.GetDegree(),
                                   atom.GetImplicitValence(), atom.GetFormalCharge(), atom.GetNumRadicalElectrons(),
                                   hybrid_code.get(atom.GetHybridization(), -1), atom.GetIsAromatic(),
                                   atom.GetTotalNumHs()))
            for bond in mol.GetBonds():
                bond_pairs.append((bond.GetBeginAtomIdx(), bond.GetEndAtomIdx()))
                bond_props.append((bond_code.get(bond.GetBondType(), -1), bond.GetIsConjugated(), bond.IsInRing(),
                                   stereo_code.get(bond.GetStereo(), 0)))
            atom_counts.append(mol.GetNumAtoms())
            bond_counts.append(mol.GetNumBonds())
            rows.append(i)
    finally:
        RDLogger.EnableLog("rdApp.*")
    codes = CODE_NUMPY_DTYPE
    return {"atoms": np.array(atom_props, dtype=codes).reshape(-1, 8),
            "bonds": np.array(bond_props, dtype=codes).reshape(-1, 4),
            "pairs": np.array(bond_pairs, dtype=np.int32).reshape(-1, 2),
            "atom_counts": np.array(atom_counts, dtype=np.int64), "bond_counts": np.array(bond_counts, dtype=np.int64),
            "rows": np.array(rows, dtype=np.int64), "invalid": invalid}


def atom_count_bounds(smiles_list: Sequence[str]) -> Tuple[np.ndarray, np.ndarray]:
    """``(low, high)``, int64 ``[len(smiles_list)]``: bounds on the number of atoms
    :func:`featurize_smiles` keeps for each SMILES, from RDKit's parse without sanitisation (a
    tenth of featurisation's cost). ``high`` counts every atom written, ``low`` those heavier than
    hydrogen: sanitising and removing hydrogens, which featurisation does, adds no atom and removes
    only hydrogens. Both are -1 where the string does not parse at all (featurisation then skips
    it too); a string that parses here may still fail sanitisation and be skipped there."""
    Chem = _chem("featurising molecules")
    from rdkit import RDLogger

    low = np.full(len(smiles_list), -1, dtype=np.int64)
    high = np.full(len(smiles_list), -1, dtype=np.int64)
    RDLogger.DisableLog("rdApp.*")
    try:
        for i, smiles in enumerate(smiles_list):
            mol = Chem.MolFromSmiles(smiles, sanitize=False) if smiles.strip() else None
            if mol is not None:
                high[i], low[i] = mol.GetNumAtoms(), mol.GetNumHeavyAtoms()
    finally:
        RDLogger.EnableLog("rdApp.*")
    return low, high


def _read_in_chunks(smiles_list: List[str], workers: int, progress: bool) -> dict:
    """:func:`_read_molecules` over chunks of at most :data:`CHUNK_MOLECULES` (in ``workers``
    forked processes when > 1), merged in order, with a progress bar per chunk."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    size = max(1, min(CHUNK_MOLECULES, -(-len(smiles_list) // (8 * workers))))
    starts = list(range(0, len(smiles_list), size))
    parts = []
    bar = None
    if progress:
        from tqdm import tqdm
        bar = tqdm(total=len(smiles_list), desc="featurising molecules", unit="mol", leave=False)
    pool = (ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) if workers > 1
            else contextlib.nullcontext())
    with pool:
        mapper = pool.map if workers > 1 else map
        for start, part in zip(starts, mapper(_read_molecules, [smiles_list[s:s + size] for s in starts], starts)):
            parts.append(part)
            if bar is not None:
                bar.update(min(size, len(smiles_list) - start))
    if bar is not None:
        bar.close()
    if not parts:
        return _read_molecules([])
    merged = {"invalid": [i for p in parts for i in p["invalid"]]}
    for key in ("atoms", "bonds", "pairs", "atom_counts", "bond_counts", "rows"):
        merged[key] = _concatenate_freeing([p.pop(key) for p in parts])
    return merged


def _concatenate_freeing(arrays: List[np.ndarray]) -> np.ndarray:
    """``np.concatenate(arrays)``, emptying ``arrays`` as it copies: the result's pages are
    touched only as each part is copied in and that part is then freed, so the peak stays near one
    copy of the data, not two. glibc keeps freed parts below its mmap threshold in the heap, so
    the heap is trimmed after each part (:func:`~rpfast._memory.release_free_memory`; at 100,000
    molecules featurisation then holds 65 MB, not 135 MB). A million molecules' codes are
    about 0.6 GB."""
    out = np.empty((sum(len(a) for a in arrays), *arrays[0].shape[1:]), dtype=arrays[0].dtype)
    start = 0
    arrays.reverse()  # pop from the end: the parts go in order
    while arrays:
        part = arrays.pop()
        out[start:start + len(part)] = part
        start += len(part)
        del part
        release_free_memory()
    return out


def featurize_smiles(smiles_list: Sequence[str], progress: bool = False, workers: Optional[int] = None
                     ) -> MoleculeGraphs:
    """Featurise SMILES strings (see :class:`MoleculeGraphs`); unparsable ones are skipped and
    listed in ``invalid`` by position. RDKit's per-atom and per-bond properties are read as codes
    in chunks of :data:`CHUNK_MOLECULES` (in ``workers`` forked processes for 4,096 molecules or
    more: RDKit's calls are the whole cost; default: one per core); batches expand them to
    features."""
    smiles_list = list(smiles_list)
    for i, smiles in enumerate(smiles_list):
        _check_smiles(smiles, f"smiles_list[{i}]")
    _chem("featurising molecules")
    if workers is None:
        workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise ValueError(f"workers must be a positive int, got {workers!r}")
    import multiprocessing

    if len(smiles_list) < 4096 or "fork" not in multiprocessing.get_all_start_methods():
        workers = 1
    read = _read_in_chunks(smiles_list, workers, progress)
    rows = torch.from_numpy(read["rows"])
    return MoleculeGraphs(torch.from_numpy(read["atoms"]), torch.from_numpy(read["bonds"]),
                          torch.from_numpy(read["pairs"]), _offsets(read["atom_counts"]), _offsets(read["bond_counts"]),
                          rows, read["invalid"], [smiles_list[i] for i in rows.tolist()])


def _offsets(counts: np.ndarray) -> Tensor:
    """``[len + 1]`` int64 exclusive prefix sums of ``counts``."""
    return torch.from_numpy(np.concatenate([np.zeros(1, dtype=np.int64), np.cumsum(counts, dtype=np.int64)]))


def scaffold_groups(smiles_list: Sequence[str]) -> List[str]:
    """The Bemis-Murcko scaffold SMILES of each molecule (RDKit; ``""`` for acyclic molecules,
    ``"?"`` + the SMILES for one RDKit cannot parse), for scaffold splits."""
    _chem("scaffold splits")
    from rdkit import RDLogger
    from rdkit.Chem.Scaffolds import MurckoScaffold

    out = []
    RDLogger.DisableLog("rdApp.*")
    try:
        for smiles in smiles_list:
            try:
                out.append(MurckoScaffold.MurckoScaffoldSmiles(smiles=smiles, includeChirality=False))
            except (ValueError, RuntimeError):
                out.append("?" + smiles)
    finally:
        RDLogger.EnableLog("rdApp.*")
    return out
