"""GraphBatch's constructor arguments, checked and resolved: the graph sizes from ``num_nodes``,
``batch`` or ``ptr`` (:func:`resolve_ptr`), the edges (:func:`check_edges`) and per-graph
feature lists (:func:`stack_rows`). Every error names the argument at fault."""
from typing import Optional, Sequence

import numpy as np
import torch
from torch import Tensor

from rpfast._validation import check_int, check_memory, check_sizes, float_tensor, index_tensor

__all__ = ["sizes_to_ptr", "count_graphs", "resolve_ptr", "check_edges", "feature_rows", "stack_rows"]


def sizes_to_ptr(num_nodes, batch, ptr, total_nodes):
    """Turn ``num_nodes`` (vertices per graph) into ``(batch, ptr, total_nodes)``: an int is
    one graph of that size, a ``[B]`` sequence is the ptr's differences."""
    if total_nodes is not None:
        raise ValueError("give num_nodes (vertices per graph) or total_nodes, not both")
    sequence = isinstance(num_nodes, (list, tuple, np.ndarray)) or (
        isinstance(num_nodes, Tensor) and num_nodes.dim() > 0)
    if not sequence:
        n = check_int(num_nodes, "num_nodes")
        described = None if ptr is None and batch is None else "ptr" if ptr is not None else "batch"
        if described is not None:
            graphs = count_graphs(batch, ptr)
            if graphs != 1:
                raise ValueError(f"num_nodes = {n} is one graph's size, but {described} describes {graphs} "
                                 f"graphs; pass num_nodes as the [{graphs}] graph sizes, or total_nodes={n}")
        return batch, ptr, n
    sizes = index_tensor(num_nodes, "num_nodes", ndim=1)
    check_sizes(sizes, "num_nodes")
    sizes_ptr = torch.cat([torch.zeros(1, dtype=torch.int64), sizes.cumsum(0)])
    if ptr is not None:
        agree = torch.equal(index_tensor(ptr, "ptr", ndim=1), sizes_ptr)
    elif batch is not None:
        ids = index_tensor(batch, "batch", ndim=1)
        agree = torch.equal(torch.bincount(ids.clamp(min=0), minlength=sizes.numel()), sizes)
    else:
        agree = True
    if not agree:
        raise ValueError(f"num_nodes = {sizes.tolist()[:8]} disagrees with the graph sizes that "
                         f"{'ptr' if ptr is not None else 'batch'} describes")
    return None, sizes_ptr, None  # ptr alone now describes the batch

def count_graphs(batch, ptr) -> int:
    """How many graphs ``ptr`` (or else ``batch``) describes."""
    if ptr is not None:
        return max(index_tensor(ptr, "ptr").numel() - 1, 0)
    batch = index_tensor(batch, "batch")
    return int(batch.max()) + 1 if batch.numel() else 0

def resolve_ptr(edge_index: Tensor, x: Optional[Tensor], batch, ptr, total_nodes, num_graphs) -> Tensor:
    """The checked ``ptr [B + 1]`` that ``batch`` or ``ptr`` (or else ``x``'s rows, ``total_nodes``
    or the largest node id in ``edge_index``, as one graph) describe, agreeing with every count given."""
    if batch is not None and ptr is not None:
        raise ValueError("give either batch or ptr, not both")
    n_from_x = None if x is None else x.shape[0]
    if ptr is not None:
        ptr = index_tensor(ptr, "ptr")
        if ptr.dim() != 1 or ptr.numel() < 1 or int(ptr[0]) != 0:
            raise ValueError(f"ptr must be 1-D, start at 0 and have B + 1 entries, got {ptr.tolist()[:8]}")
        check_sizes(ptr.diff(), "ptr.diff() (graph sizes)")
        total = int(ptr[-1])
    elif batch is not None:
        batch = index_tensor(batch, "batch")
        if batch.dim() != 1:
            raise ValueError(f"batch must be 1-D [N], got shape {tuple(batch.shape)}")
        if batch.numel() and int(batch.min()) < 0:
            raise ValueError(f"batch holds a negative graph id {int(batch.min())}")
        if batch.numel() > 1 and bool((batch[1:] < batch[:-1]).any()):
            i = int(torch.nonzero(batch[1:] < batch[:-1])[0, 0]) + 1
            raise ValueError(
                f"batch must be non-decreasing (nodes grouped by graph); batch[{i}] = "
                f"{int(batch[i])} follows {int(batch[i - 1])}"
            )
        found = int(batch.max()) + 1 if batch.numel() else 0
        B = found if num_graphs is None else num_graphs
        if B < found:
            raise ValueError(f"num_graphs = {B} but batch refers to graph {found - 1}")
        counts = torch.bincount(batch, minlength=B)
        ptr = torch.cat([torch.zeros(1, dtype=torch.int64), counts.cumsum(0)])
        total = batch.numel()
    else:
        if n_from_x is not None:
            total = n_from_x
        elif total_nodes is not None:
            total = total_nodes
        else:
            total = int(edge_index.max()) + 1 if edge_index.numel() else 0
        ptr = torch.tensor([0, total], dtype=torch.int64)
    if n_from_x is not None and n_from_x != total:
        raise ValueError(f"x has {n_from_x} rows but batch/ptr describe {total} nodes")
    if total_nodes is not None and total_nodes != total:
        raise ValueError(f"{total_nodes} nodes were given (num_nodes/total_nodes) but batch/ptr/x describe "
                         f"{total} nodes")
    if num_graphs is not None and num_graphs != ptr.numel() - 1:
        raise ValueError(f"num_graphs = {num_graphs} but batch/ptr describe {ptr.numel() - 1} graphs")
    # The cached per-node views (batch, local index, CSR offsets) take ~4 int64 per node.
    check_memory(32 * total, f"a GraphBatch of {total} nodes")
    return ptr

def check_edges(ei: Tensor, node_graph: Tensor) -> None:
    """IndexError for an edge whose end is not a node, ValueError for one joining two graphs;
    ``node_graph [N]`` is every node's graph (``GraphBatch.batch``)."""
    if ei.numel() == 0:
        return
    N = node_graph.numel()
    lo, hi = int(ei.min()), int(ei.max())
    if lo < 0 or hi >= N:
        bad = torch.nonzero((ei < 0) | (ei >= N))[0]
        raise IndexError(
            f"edge_index[{int(bad[0])}, {int(bad[1])}] = {int(ei[bad[0], bad[1]])} is out of "
            f"range for a batch of {N} nodes"
        )
    graph_of = node_graph[ei]
    crossing = graph_of[0] != graph_of[1]
    if bool(crossing.any()):
        e = int(torch.nonzero(crossing)[0, 0])
        raise ValueError(
            f"edge {e} ({int(ei[0, e])} -> {int(ei[1, e])}) connects graph "
            f"{int(graph_of[0, e])} to graph {int(graph_of[1, e])}; edges may not cross graphs"
        )


def feature_rows(value, count: int, name: str) -> Tensor:
    """``value`` as a ``[count, D]`` float tensor (1-D input becomes one column)."""
    t = float_tensor(value, name)
    t = t.unsqueeze(-1) if t.dim() == 1 else t
    if t.dim() != 2 or t.shape[0] != count:
        raise ValueError(f"{name} must have {count} rows, got shape {tuple(t.shape)}")
    return t


def stack_rows(values, counts: Sequence[int], name: str) -> Tensor:
    """One ``[counts[i], D]`` entry per graph -> ``[sum(counts), D]``; entries with 0 rows
    take the common width ``D`` (0 graphs give ``[0, 0]``)."""
    if not isinstance(values, (list, tuple)):
        raise TypeError(f"{name} must be a list with one tensor per graph, got {type(values).__name__}")
    if len(values) != len(counts):
        raise ValueError(f"{name} has {len(values)} entries but there are {len(counts)} graphs")
    rows = [feature_rows(v, c, f"{name}[{i}]") for i, (v, c) in enumerate(zip(values, counts))]
    if not rows:
        return torch.zeros(0, 0)
    width = next((t.shape[1] for t in rows if t.shape[0]), rows[0].shape[1])
    for i, t in enumerate(rows):
        if t.shape[0] and t.shape[1] != width:
            raise ValueError(f"{name}[{i}] has {t.shape[1]} columns but earlier entries have {width}")
    return torch.cat([t if t.shape[0] else t.new_zeros(0, width) for t in rows])
