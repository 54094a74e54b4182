"""Small, obviously-correct references the fast kernels are compared against."""
import itertools

import networkx as nx
import torch
import torch.nn.functional as F


def _padded_index(perms: torch.Tensor, n: int) -> torch.Tensor:
    """Map -1 to n, the index of an all-zero row appended to the input."""
    return torch.where(perms < 0, torch.full_like(perms, n), perms)


def permute_adjacency_reference(adj: torch.Tensor, perms: torch.Tensor) -> torch.Tensor:
    """out[b, p, i, j] = adj[b, perms[b,p,i], perms[b,p,j]] by torch advanced indexing."""
    B, n = adj.shape[0], adj.shape[1]
    padded = F.pad(adj, (0, 0, 0, 1, 0, 1))  # [B, n+1, n+1, C], zeros at index n
    idx = _padded_index(perms, n)
    b = torch.arange(B).view(B, 1, 1, 1)
    return padded[b, idx.unsqueeze(-1), idx.unsqueeze(-2)]


def permute_nodes_reference(x: torch.Tensor, perms: torch.Tensor) -> torch.Tensor:
    B, n = x.shape[0], x.shape[1]
    padded = F.pad(x, (0, 0, 0, 1))
    idx = _padded_index(perms, n)
    return padded[torch.arange(B).view(B, 1, 1), idx]


def nx_graph(edge_index: torch.Tensor, n: int) -> nx.Graph:
    """The simple undirected graph of ``edge_index [2, E]`` on ``n`` vertices (self-loops dropped)."""
    G = nx.Graph()
    G.add_nodes_from(range(n))
    G.add_edges_from((u, v) for u, v in edge_index.t().tolist() if u != v)
    return G


def keep_subset(G: nx.Graph, subset, prune: str) -> bool:
    """The definition of each prune mode on the simple undirected graph (no self-loops)."""
    H = G.subgraph(subset)
    if prune == "none":
        return True
    if prune == "edgeless":
        return H.number_of_edges() > 0
    if prune == "isolated":
        return all(H.degree(v) > 0 for v in H)
    return nx.is_connected(H)


def k_subsets_reference(graphs, k: int, prune: str):
    """``(rows [S, k], ptr [B + 1])`` of ``k_subsets`` by itertools over ``[(edge_index, n), ...]``."""
    rows, ptr = [], [0]
    for edge_index, n in graphs:
        G = nx_graph(edge_index, n)
        found = [c for c in itertools.combinations(range(n), k) if keep_subset(G, c, prune)]
        rows += found
        ptr.append(ptr[-1] + len(found))
    return torch.tensor(rows, dtype=torch.int64).reshape(-1, k), torch.tensor(ptr, dtype=torch.int64)


def ranked_digraph(G: nx.Graph, rank):
    """Adjacency in rank order, so networkx iterates neighbours by increasing rank."""
    D = nx.DiGraph()
    D.add_nodes_from(sorted(G, key=lambda v: rank[v]))
    for u in G:
        for w in sorted(G[u], key=lambda v: rank[v]):
            if w != u:
                D.add_edge(u, w)
    return D


def traversal_order_reference(G: nx.Graph, start: int, rank, depth_first: bool):
    """networkx DFS preorder / BFS from start, neighbours by rank, restarts at the lowest rank."""
    D = ranked_digraph(G, rank)
    order, seen = [], set()
    for s in [start] + sorted(G, key=lambda v: rank[v]):
        if s in seen:
            continue
        part = list(nx.dfs_preorder_nodes(D, s)) if depth_first else [s] + [v for _, v in nx.bfs_edges(D, s)]
        part = [v for v in part if v not in seen]
        seen.update(part)
        order += part
    return order
