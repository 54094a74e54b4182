"""Molecules: everything that touches RDKit lives in this module.

Heavy-atom graphs of SMILES strings or RDKit ``Mol`` objects (vertices are atoms in the
order RDKit parsed them, edges are bonds in both directions) and RDKit's canonical atom
order. RDKit is imported on first use, so the rest of rpfast works without it.
"""
from typing import Sequence, Tuple, Union

import numpy as np
import torch
from torch import Tensor

from rpfast.data.batch import GraphBatch

__all__ = ["graph_from_smiles", "batch_from_smiles", "canonical_order_from_mol"]


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
    return GraphBatch(edge_index, num_nodes=n), np.arange(n)


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

    graphs, kept = [], []
    if not isinstance(skip_invalid, bool):
        raise TypeError(f"skip_invalid must be a bool, got {type(skip_invalid).__name__} {skip_invalid!r}")
    if skip_invalid:
        RDLogger.DisableLog("rdApp.error")
    try:
        for i, smiles in enumerate(smiles_list):
            mol = Chem.MolFromSmiles(smiles)
            if mol is None:
                if skip_invalid:
                    continue
                raise ValueError(f"RDKit could not parse SMILES #{i}: {smiles!r}")
            kept.append(i)
            graphs.append(_mol_graph(mol))
    finally:
        if skip_invalid:
            RDLogger.EnableLog("rdApp.error")
    batch = GraphBatch.from_edge_lists(graphs)
    batch.extras["smiles"] = [smiles_list[i] for i in kept]  # for Oriented("rdkit") and to_pyg()
    return batch, torch.tensor(kept, dtype=torch.int64)


def canonical_order_from_mol(mols: Union[str, object, Sequence]) -> Tensor:
    """RDKit's canonical atom order for one molecule or a list (``Mol`` objects or SMILES).

    ``order[b, 0, i]`` is the atom with canonical rank i (``Chem.CanonicalRankAtoms`` with
    ``breakTies=True``), atoms numbered as RDKit parsed them (the order
    :func:`rpfast.data.batch_from_smiles` uses). Returns LongTensor ``[B, 1, n_max]``, -1
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
