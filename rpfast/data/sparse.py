"""PyTorch Geometric's sparse adjacency ``adj_t`` read as an ``edge_index``.

PyG's ``T.ToSparseTensor()`` replaces ``data.edge_index`` by ``data.adj_t``, the *transposed*
adjacency: a stored entry ``adj_t[i, j]`` is the edge ``j -> i`` (row = target, column =
source), so that ``adj_t @ x`` sums the messages into each target. :func:`edge_index_from_adj_t`
turns it back into ``edge_index = (col, row)``; rpfast's graph layers call it when they are
given a sparse matrix in ``edge_index``'s place, as PyG's layers accept one.
"""
from typing import Optional

import torch
from torch import Tensor

__all__ = ["is_sparse_adjacency", "edge_index_from_adj_t"]

_TORCH_SPARSE = (torch.sparse_coo, torch.sparse_csr)


def is_sparse_adjacency(value) -> bool:
    """True for a ``torch.sparse`` COO or CSR tensor, or a ``torch_sparse.SparseTensor``."""
    if isinstance(value, Tensor):
        return value.layout in _TORCH_SPARSE
    return type(value).__name__ == "SparseTensor" and hasattr(value, "coo") and hasattr(value, "sparse_sizes")


def edge_index_from_adj_t(adj_t, num_nodes: Optional[int] = None) -> Tensor:
    """``edge_index [2, E]`` (int64, on ``adj_t``'s device) of PyG's transposed adjacency ``adj_t``.

    Every stored entry ``adj_t[i, j]`` becomes the edge ``j -> i``, in the order of the stored
    entries (row by row for CSR and for a coalesced COO tensor: the order ``T.ToSparseTensor``
    gives ``data.edge_attr``); an uncoalesced COO tensor's repeated entries stay repeated edges,
    which are summed as PyG's sparse product sums them.

    Args:
        adj_t: a square ``torch.sparse_coo`` or ``torch.sparse_csr`` tensor ``[N, N]`` without
            dense dimensions, or a ``torch_sparse.SparseTensor``. Its values (if any) must all
            be 1: rpfast's layers sum unweighted messages, so edge weights are refused rather
            than dropped.
        num_nodes: if given, the ``N`` the graph must have (the rows of ``x``).

    Raises ``TypeError`` for another kind of object and ``ValueError`` for a non-square or
    batched matrix, dense value dimensions, values other than 1, or a size other than
    ``num_nodes``.
    """
    if not is_sparse_adjacency(adj_t):
        raise TypeError(f"adj_t must be a torch.sparse COO/CSR tensor or a torch_sparse SparseTensor, "
                        f"got {type(adj_t).__name__}" + (f" ({adj_t.layout})" if isinstance(adj_t, Tensor) else ""))
    if isinstance(adj_t, Tensor):
        if adj_t.sparse_dim() != 2 or adj_t.dense_dim() != 0:
            raise ValueError(f"adj_t must be a sparse matrix [N, N] (2 sparse dimensions, no dense ones), got shape "
                             f"{list(adj_t.shape)} with {adj_t.sparse_dim()} sparse and {adj_t.dense_dim()} dense "
                             "dimension(s); pass edge features as edge_attr")
        shape = tuple(adj_t.shape)
        if adj_t.layout == torch.sparse_csr:
            crow, col, values = adj_t.crow_indices(), adj_t.col_indices(), adj_t.values()
            counts = crow.diff()
            if crow.numel() != shape[0] + 1 or int(crow[0]) != 0 or bool((counts < 0).any()) \
                    or int(crow[-1]) != col.numel():
                raise ValueError("adj_t's crow_indices are not a valid CSR row pointer")
            row = torch.repeat_interleave(torch.arange(shape[0], device=col.device), counts)
        else:
            (row, col), values = adj_t._indices(), adj_t._values()
    else:  # torch_sparse.SparseTensor
        row, col, values = adj_t.coo()
        shape = tuple(adj_t.sparse_sizes())
    if shape[0] != shape[1]:
        raise ValueError(f"adj_t must be square [N, N] (rpfast's layers take one node set), got {list(shape)}")
    if num_nodes is not None and shape[0] != num_nodes:
        raise ValueError(f"adj_t is {list(shape)} but x has {num_nodes} nodes")
    if values is not None and values.numel():
        unweighted = values.dtype == torch.bool or bool((values == 1).all())
        if values.dim() != 1 or not unweighted:
            raise ValueError("adj_t holds edge weights (values other than 1); rpfast's layers sum unweighted "
                             "messages: pass an unweighted adj_t (T.ToSparseTensor(attr=None)) or edge_index")
    return torch.stack([col.to(torch.int64), row.to(torch.int64)])
