"""Reading single graphs from edge-list files and SMILES strings."""
import re
from pathlib import Path
from typing import Tuple

import numpy as np
import torch

from rpfast.data.batch import GraphBatch

__all__ = ["read_edge_list", "graph_from_smiles", "batch_from_smiles"]


_LINE = re.compile(r"\s*([+-]?[0-9]+)(?:\s+([+-]?[0-9]+))?\s*", re.ASCII)
_INT64 = (-(1 << 63), (1 << 63) - 1)


def read_edge_list(path) -> Tuple[GraphBatch, np.ndarray]:
    """Read an undirected graph from a UTF-8 text file: one ``u v`` pair per line.

    Vertex ids are 64-bit integers; a line with a single id declares an isolated vertex;
    ``#`` starts a comment and blank lines are skipped. Any other line (a CSV row, a third
    token, a non-integer label) raises ``ValueError`` naming the file, the line number and
    the text. Returns the graph (vertices numbered 0..n-1 in increasing id order, both edge
    directions) and ``labels[n]`` (int64), the original id of every vertex.
    """
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"edge list {path} is a directory, not a file")
    if not path.exists():
        raise FileNotFoundError(f"edge list {path} does not exist")
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise ValueError(f"{path}:{line}: not UTF-8 text (byte {data[error.start]:#04x}); "
                         f"expected an edge list of integer 'u v' pairs") from None
    pairs, singles = [], []
    for number, line in enumerate(text.splitlines(), start=1):
        content = line.split("#", 1)[0]
        if not content.strip():
            continue
        match = _LINE.fullmatch(content)
        if match is None:
            shown = line.strip() if len(line.strip()) <= 80 else line.strip()[:77] + "..."
            raise ValueError(f"{path}:{number}: expected 'u v' (or one vertex) with integer vertex ids, "
                             f"got {shown!r}")
        ids = [int(t) for t in match.groups() if t is not None]
        for value in ids:
            if not _INT64[0] <= value <= _INT64[1]:
                raise ValueError(f"{path}:{number}: vertex id {value} is outside the 64-bit integer range")
        (pairs if len(ids) == 2 else singles).append(ids)
    values = np.array([v for pair in pairs for v in pair] + [v for (v,) in singles], dtype=np.int64)
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
    SMILES. Strings RDKit cannot parse raise ``ValueError`` naming the first one, or are
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
    from rdkit import RDLogger

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
    return GraphBatch.from_edge_lists(graphs), torch.tensor(kept, dtype=torch.int64)
