"""Reading single graphs from edge-list files and SMILES strings."""
from pathlib import Path
from typing import Tuple

import numpy as np
import torch

from rpfast.data.batch import GraphBatch

__all__ = ["read_edge_list", "graph_from_smiles", "batch_from_smiles"]


def read_edge_list(path) -> Tuple[GraphBatch, np.ndarray]:
    """Read an undirected graph: one ``u v`` pair per line, ``#`` starts a comment.

    A line with a single vertex declares an isolated vertex. Vertex labels may be any
    tokens; integer labels are ordered numerically, others as strings. Returns the graph
    (vertices numbered 0..n-1 in label order, both edge directions) and ``labels[n]``, the
    original label of every vertex.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"edge list {path} does not exist")
    pairs, singles = [], []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        tokens = line.split("#", 1)[0].split()
        if not tokens:
            continue
        if len(tokens) == 1:
            singles.append(tokens[0])
        elif len(tokens) == 2:
            pairs.append(tokens)
        else:
            raise ValueError(f"{path}:{number}: expected 'u v' (or one vertex), got {line.strip()!r}")
    tokens = np.array([t for pair in pairs for t in pair] + singles, dtype=object)
    try:
        values = np.array([int(t) for t in tokens], dtype=np.int64)
    except ValueError:
        values = tokens.astype(str)
    labels, index = np.unique(values, return_inverse=True)
    edges = torch.as_tensor(index[: 2 * len(pairs)].reshape(-1, 2).T.astype(np.int64))
    edge_index = torch.cat([edges, edges.flip(0)], dim=1)
    return GraphBatch(edge_index, num_nodes=len(labels)), labels


def _chem():
    try:
        from rdkit import Chem
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError("reading SMILES needs RDKit: pip install rdkit") from error
    return Chem


def _mol_graph(mol) -> Tuple[torch.Tensor, int]:
    """(edge_index [2, 2 * bonds] in both directions, atoms) of an RDKit molecule."""
    bonds = np.array([[b.GetBeginAtomIdx(), b.GetEndAtomIdx()] for b in mol.GetBonds()], dtype=np.int64)
    edges = torch.as_tensor(bonds.reshape(-1, 2).T.copy())
    return torch.cat([edges, edges.flip(0)], dim=1), mol.GetNumAtoms()


def graph_from_smiles(smiles: str) -> Tuple[GraphBatch, np.ndarray]:
    """Heavy-atom graph of a molecule (RDKit): vertices are atoms in SMILES order, edges bonds.

    Returns the graph and the atom indices as labels.
    """
    mol = _chem().MolFromSmiles(smiles)
    if mol is None:
        raise ValueError(f"RDKit could not parse the SMILES string {smiles!r}")
    edge_index, n = _mol_graph(mol)
    return GraphBatch(edge_index, num_nodes=n), np.arange(n)


def batch_from_smiles(smiles_list, skip_invalid: bool = False) -> Tuple[GraphBatch, torch.Tensor]:
    """Heavy-atom graphs of many molecules as one GraphBatch (atoms in SMILES order).

    Returns ``(batch, kept)`` with ``kept`` the indices of the parsed SMILES. Strings RDKit
    cannot parse raise ``ValueError`` naming the first one, or are dropped (silently, with
    RDKit's parse messages muted) with ``skip_invalid=True`` (Tox21 has a few, e.g.
    hypervalent aluminium).
    """
    Chem = _chem()
    from rdkit import RDLogger

    graphs, kept = [], []
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
    return GraphBatch.from_edge_lists(graphs), torch.tensor(kept, dtype=torch.int64)
