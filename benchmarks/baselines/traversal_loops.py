"""Per-graph, per-start DFS/BFS loops with SciPy and networkx, with rank tie-breaking.

SciPy visits neighbours in CSR order, so to honour a tiebreak ranking the graph is first
relabelled by rank (vertex v becomes rank[v], CSR rows sorted), searched, and the visited
ranks are mapped back to vertices.
"""
import networkx as nx
import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import breadth_first_order, depth_first_order


def per_graph_csr(rowptr, col, ptr):
    """SciPy CSR matrices of every graph from the batch's undirected CSR (local ids)."""
    mats = []
    for b in range(len(ptr) - 1):
        lo, hi = ptr[b], ptr[b + 1]
        indptr = rowptr[lo:hi + 1] - rowptr[lo]
        mats.append(sp.csr_matrix((np.ones(len(col[rowptr[lo]:rowptr[hi]])), col[rowptr[lo]:rowptr[hi]], indptr),
                                  shape=(hi - lo, hi - lo)))
    return mats


def scipy_orders(mats, starts, ranks, depth_first):
    """starts[b]: start vertices of graph b; ranks[b]: its rank array (or None)."""
    search = depth_first_order if depth_first else breadth_first_order
    out = []
    for A, graph_starts, rank in zip(mats, starts, ranks):
        if rank is not None:  # relabel v -> rank[v] so CSR order is rank order
            inverse = np.argsort(rank)
            A = A[inverse][:, inverse].tocsr()
            A.sort_indices()
        for s in graph_starts:
            order = search(A, rank[s] if rank is not None else s, directed=False, return_predecessors=False)
            out.append(inverse[order] if rank is not None else order)
    return out


def networkx_orders(graphs, starts, depth_first):
    out = []
    for G, graph_starts in zip(graphs, starts):
        for s in graph_starts:
            if depth_first:
                out.append(list(nx.dfs_preorder_nodes(G, s)))
            else:
                out.append([s] + [v for _, v in nx.bfs_edges(G, s)])
    return out
