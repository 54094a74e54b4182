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

from rpfast.data.batch import GraphBatch
from rpfast.data.segments import offsets, ranges

__all__ = ["graph_from_smiles", "batch_from_smiles", "parse_smiles_quietly", "canonical_order_from_mol", "featurize_smiles", "MoleculeGraphs",
           "scaffold_groups", "featurizer_settings", "atom_count_bounds", "ELEMENTS", "ATOM_FEATURES",
           "BOND_FEATURES", "FEATURE_DTYPE"]


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
#: DeepChem ConvMol's element list (the paper's atom features); the last entry catches the rest.
ELEMENTS = ("C", "N", "O", "S", "F", "Si", "P", "Cl", "Br", "Mg", "Na", "Ca", "Fe", "As", "Al", "I", "B", "V",
            "K", "Tl", "Yb", "Sb", "Sn", "Ag", "Pd", "Co", "Se", "Ti", "Zn", "H", "Li", "Ge", "Cu", "Au", "Ni",
            "Cd", "In", "Mn", "Zr", "Cr", "Pt", "Hg", "Pb", "Unknown")
#: Widths of the one-hot blocks of the 75 atom features, in order (``ATOM_FEATURES`` names them).
_DEGREES, _VALENCES, _HYBRIDS, _HCOUNTS = 11, 7, 5, 5
#: The width of the atom features (DeepChem's ConvMol: element, degree, valence, charge, ...).
ATOM_FEATURES = 75
#: bond type (single, double, triple, aromatic), conjugated, in ring, stereo (none, any, Z, E)
BOND_FEATURES = 10
FEATURIZER_VERSION = "convmol-75/bond-10/v1"
#: The dtype of the atom and bond features, whatever ``torch.get_default_dtype()`` is: the
#: featurisation cache stores them so and the kernels read float32; cast with ``.to()`` to train
#: in another precision.
FEATURE_DTYPE = torch.float32


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


class MoleculeGraphs:
    """Featurised molecules, concatenated: what every epoch reads instead of re-running RDKit.

    Atom features ``x [N, 75]`` (DeepChem ConvMol, as the paper): element one-hot (44, last =
    other), degree one-hot (0..10), implicit valence one-hot (0..6), formal charge, radical
    electrons, hybridisation one-hot (SP, SP2, SP3, SP3D, SP3D2), aromatic, total H count
    one-hot (0..4). Bond features ``edge_attr [E, 10]`` (each bond twice, both directions):
    bond type one-hot (single, double, triple, aromatic), conjugated, in ring, stereo one-hot
    (none, any, Z, E) - DeepChem's bond features with stereo. The paper counts 14 edge
    features without listing them; these 10 are the ones DeepChem defines. ``x`` and ``edge_attr``
    are float32 (:data:`FEATURE_DTYPE`) whatever ``torch.get_default_dtype()`` is; the index
    tensors are int64.

    ``element [N]`` is each atom's index in :data:`ELEMENTS`; ``atom_ptr [M+1]`` and
    ``edge_ptr [M+1]`` delimit molecule ``m``; ``rows [M]`` are the molecules' rows in the
    input and ``invalid`` the rows RDKit could not parse.
    """

    def __init__(self, x: Tensor, element: Tensor, edge_index: Tensor, edge_attr: Tensor, atom_ptr: Tensor,
                 edge_ptr: Tensor, rows: Tensor, invalid: Sequence[int], smiles: Sequence[str]):
        self.x, self.element, self.edge_index, self.edge_attr = x, element, edge_index, edge_attr
        self.atom_ptr, self.edge_ptr, self.rows, self.invalid = atom_ptr, edge_ptr, rows, list(invalid)
        self.smiles = list(smiles)

    def __len__(self) -> int:
        return self.rows.numel()

    #: The constructor's arguments, the entries of :meth:`state`.
    STATE = ("x", "element", "edge_index", "edge_attr", "atom_ptr", "edge_ptr", "rows", "invalid", "smiles")

    def state(self) -> dict:
        """The constructor's arguments by name (what the featurisation cache stores)."""
        return {k: getattr(self, k) for k in self.STATE}

    def batch(self, molecules) -> GraphBatch:
        """A :class:`GraphBatch` of molecules ``molecules`` (positions in this set, not input
        rows) with ``x``, ``edge_attr`` and ``element`` / ``smiles`` extras."""
        index = torch.as_tensor(molecules, dtype=torch.int64).reshape(-1)
        if index.numel() and (int(index.min()) < 0 or int(index.max()) >= len(self)):
            raise IndexError(f"molecule positions must lie in [0, {len(self)}), got {int(index.min())}..{int(index.max())}")
        atoms = self.atom_ptr[index + 1] - self.atom_ptr[index]
        bonds = self.edge_ptr[index + 1] - self.edge_ptr[index]
        atom_rows = ranges(self.atom_ptr[index], atoms)
        edge_rows = ranges(self.edge_ptr[index], bonds)
        new_start = offsets(atoms)
        shift = (new_start[:-1] - self.atom_ptr[index]).repeat_interleave(bonds)
        graph = GraphBatch(self.edge_index[:, edge_rows] + shift, x=self.x[atom_rows], edge_attr=self.edge_attr[edge_rows],
                           ptr=new_start)
        graph.extras["element"] = self.element[atom_rows]
        graph.extras["smiles"] = [self.smiles[i] for i in index.tolist()]
        return graph


def _read_molecules(smiles_list: Sequence[str], first_row: int = 0) -> dict:
    """RDKit's per-atom and per-bond properties of ``smiles_list`` as small integers (the part of
    featurisation that needs RDKit; runs in worker processes for large inputs)."""
    Chem = _chem("featurising molecules")
    from rdkit import RDLogger

    hybrid_code = {Chem.HybridizationType.SP: 0, Chem.HybridizationType.SP2: 1, Chem.HybridizationType.SP3: 2,
                   Chem.HybridizationType.SP3D: 3, Chem.HybridizationType.SP3D2: 4}
    bond_code = {Chem.BondType.SINGLE: 0, Chem.BondType.DOUBLE: 1, Chem.BondType.TRIPLE: 2, Chem.BondType.AROMATIC: 3}
    stereo_code = {Chem.BondStereo.STEREONONE: 0, Chem.BondStereo.STEREOANY: 1, Chem.BondStereo.STEREOZ: 2,
                   Chem.BondStereo.STEREOE: 3, Chem.BondStereo.STEREOCIS: 2, Chem.BondStereo.STEREOTRANS: 3}
    element_code = {symbol: i for i, symbol in enumerate(ELEMENTS[:-1])}
    other = len(ELEMENTS) - 1
    atom_props, bond_props, bond_pairs, atom_counts, bond_counts, rows, invalid, kept = [], [], [], [], [], [], [], []
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
            kept.append(smiles)
    finally:
        RDLogger.EnableLog("rdApp.*")
    return {"atoms": np.array(atom_props, dtype=np.int64).reshape(-1, 8),
            "bonds": np.array(bond_props, dtype=np.int64).reshape(-1, 4),
            "pairs": np.array(bond_pairs, dtype=np.int64).reshape(-1, 2), "atom_counts": atom_counts,
            "bond_counts": bond_counts, "rows": rows, "invalid": invalid, "kept": kept}


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
    """:func:`_read_molecules` over chunks (in ``workers`` forked processes when > 1), merged in
    order, with a progress bar per chunk."""
    import contextlib
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    size = max(256, -(-len(smiles_list) // (8 * workers)))
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
    merged = {key: np.concatenate([p[key] for p in parts]) for key in ("atoms", "bonds", "pairs")}
    for key in ("atom_counts", "bond_counts", "rows", "invalid", "kept"):
        merged[key] = [v for p in parts for v in p[key]]
    return merged


def featurize_smiles(smiles_list: Sequence[str], progress: bool = False, workers: Optional[int] = None
                     ) -> MoleculeGraphs:
    """Featurise SMILES strings (see :class:`MoleculeGraphs`); unparsable ones are skipped and
    listed in ``invalid`` by position. The per-atom RDKit properties are read as small integers
    (in ``workers`` forked processes for 4,096 molecules or more: RDKit's calls are the whole
    cost; default: one per core) and one-hot encoded for all atoms at once."""
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
    read = _read_in_chunks(smiles_list, workers, progress) if progress or workers > 1 else _read_molecules(smiles_list)
    atoms, bonds = read["atoms"], read["bonds"]
    atom_counts, bond_counts, rows, invalid, kept = (read[k] for k in ("atom_counts", "bond_counts", "rows",
                                                                         "invalid", "kept"))
    x = np.zeros((len(atoms), ATOM_FEATURES), dtype=np.float32)  # FEATURE_DTYPE
    column, at = 0, np.arange(len(atoms), dtype=np.int64)
    for width, values in ((len(ELEMENTS), atoms[:, 0]), (_DEGREES, atoms[:, 1]), (_VALENCES, atoms[:, 2])):
        inside = (values >= 0) & (values < width)
        x[at[inside], column + values[inside]] = 1.0
        column += width
    x[:, column], x[:, column + 1] = atoms[:, 3], atoms[:, 4]
    column += 2
    inside = atoms[:, 5] >= 0
    x[at[inside], column + atoms[inside, 5]] = 1.0
    column += _HYBRIDS
    x[:, column] = atoms[:, 6]
    column += 1
    inside = atoms[:, 7] < _HCOUNTS
    x[at[inside], column + atoms[inside, 7]] = 1.0
    assert column + _HCOUNTS == ATOM_FEATURES

    attr = np.zeros((len(bonds), BOND_FEATURES), dtype=np.float32)  # FEATURE_DTYPE
    b_at = np.arange(len(bonds), dtype=np.int64)
    typed = bonds[:, 0] >= 0
    attr[b_at[typed], bonds[typed, 0]] = 1.0
    attr[:, 4], attr[:, 5] = bonds[:, 1], bonds[:, 2]
    attr[b_at, 6 + bonds[:, 3]] = 1.0

    atom_counts_t = torch.tensor(atom_counts, dtype=torch.int64)
    bond_counts_t = torch.tensor(bond_counts, dtype=torch.int64)
    atom_ptr = torch.cat([torch.zeros(1, dtype=torch.int64), atom_counts_t.cumsum(0)])
    pairs = torch.from_numpy(read["pairs"])
    pairs = pairs + atom_ptr[:-1].repeat_interleave(bond_counts_t).unsqueeze(1)  # global atom ids
    # each bond in both directions, grouped by molecule: [bonds of m forward, the same bonds backward]
    bond_ptr = torch.cat([torch.zeros(1, dtype=torch.int64), bond_counts_t.cumsum(0)])
    edge_index = torch.empty(2, 2 * len(pairs), dtype=torch.int64)
    edge_attr = torch.empty(2 * len(pairs), BOND_FEATURES, dtype=FEATURE_DTYPE)  # not the default dtype
    slot = torch.arange(len(pairs), dtype=torch.int64) + bond_ptr[:-1].repeat_interleave(bond_counts_t)  # forward: 2 start_m + j
    edge_index[:, slot] = pairs.t()
    edge_index[:, slot + bond_counts_t.repeat_interleave(bond_counts_t)] = pairs.t().flip(0)
    attr_t = torch.from_numpy(attr)
    edge_attr[slot] = attr_t
    edge_attr[slot + bond_counts_t.repeat_interleave(bond_counts_t)] = attr_t
    return MoleculeGraphs(torch.from_numpy(x), torch.from_numpy(atoms[:, 0].copy()), edge_index, edge_attr, atom_ptr,
                          2 * bond_ptr, torch.tensor(rows, dtype=torch.int64), invalid, kept)


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
