"""What users write without rpfast: itertools / torch.combinations + filtering, rustworkx."""
import itertools

import numpy as np
import torch


def adjacency_matrices(edge_lists):
    """Dense boolean adjacency per graph from [(edge_index [2, E] local, n), ...]."""
    mats = []
    for edge_index, n in edge_lists:
        A = np.zeros((n, n), dtype=bool)
        A[edge_index[0], edge_index[1]] = True
        np.fill_diagonal(A, False)
        mats.append(A | A.T)
    return mats


def _has_edge(A, combos):
    k = combos.shape[1]
    found = np.zeros(len(combos), dtype=bool)
    for i, j in itertools.combinations(range(k), 2):
        found |= A[combos[:, i], combos[:, j]]
    return found


def itertools_edgeless(mats, k):
    """k-subsets with at least one edge: itertools.combinations, then a NumPy filter."""
    out = []
    for A in mats:
        n = len(A)
        combos = np.array(list(itertools.combinations(range(n), k)), dtype=np.int64).reshape(-1, k)
        out.append(combos[_has_edge(A, combos)] if len(combos) else combos)
    return out


def torch_combinations_edgeless(mats, k):
    """The same with torch.combinations and tensor indexing."""
    out = []
    for A in mats:
        n = len(A)
        if n < k:
            out.append(torch.zeros(0, k, dtype=torch.int64))
            continue
        At = torch.from_numpy(A)
        combos = torch.combinations(torch.arange(n), k)
        found = torch.zeros(len(combos), dtype=torch.bool)
        for i, j in itertools.combinations(range(k), 2):
            found |= At[combos[:, i], combos[:, j]]
        out.append(combos[found])
    return out


def rustworkx_graphs(edge_lists):
    import rustworkx as rx

    graphs = []
    for edge_index, n in edge_lists:
        g = rx.PyGraph(multigraph=False)
        g.add_nodes_from(range(n))
        g.add_edges_from_no_data([(u, v) for u, v in edge_index.t().tolist() if u < v])
        graphs.append(g)
    return graphs


def rustworkx_connected(graphs, k):
    """rustworkx refuses k >= n, so those graphs are answered directly (none, or all n if connected)."""
    import rustworkx as rx

    out = []
    for g in graphs:
        n = g.num_nodes()
        if n > k:
            out.append(rx.connected_subgraphs(g, k))
        else:
            out.append([list(range(n))] if n == k and rx.is_connected(g) else [])
    return out
