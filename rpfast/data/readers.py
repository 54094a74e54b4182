"""Reading graphs from edge-list files (SMILES and RDKit molecules: :mod:`rpfast.datasets.molecules`)."""
import re
from pathlib import Path
from typing import Tuple

import numpy as np
import torch

from rpfast._io import read_text
from rpfast.data.batch import GraphBatch

__all__ = ["read_edge_list"]


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
    text = read_text(path, "edge list", "an edge list of integer 'u v' pairs")
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
