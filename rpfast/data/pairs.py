"""Pairs of non-isomorphic graphs that the 1-WL test cannot tell apart: the input of
``rpfast pairs`` (the RPC protocol of the BREC benchmark).

A pair file holds one pair per line: an optional category label, then two graph6 strings,
separated by tabs or spaces; ``#`` starts a comment and blank lines are skipped.
:func:`family_pairs` generates pairs built into rpfast:

* ``csl``: circulant skip-link graphs CSL(41, R) against CSL(41, R') for the paper's ten skip
  lengths (4-regular, 45 pairs);
* ``srg``: the Shrikhande graph against the 4x4 rook's graph (both strongly regular
  srg(16, 6, 2, 2));
* ``regular``: random d-regular graphs of equal size (seeded), kept when non-isomorphic;
* ``cfi``: Cai-Fuerer-Immerman pairs (:func:`cfi_pair`) over small base graphs (cycles, K4,
  K3,3, the prism, the cube, the Petersen graph: 18 to 100 vertices).

Graph6 parsing is networkx's. Every pair is checked: equal vertex counts, and, up to
:data:`ISOMORPHISM_CHECK_MAX` vertices, non-isomorphic (networkx's VF2++); bigger pairs are not
checked for isomorphism (the test costs exponential time on some regular graphs).
"""
import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional

import torch
from torch import Tensor

from rpfast._io import read_text
from rpfast.data.csl import PAPER_SKIPS, csl_graph

__all__ = ["GraphPair", "read_pairs", "family_pairs", "cfi_pair", "FAMILIES", "ISOMORPHISM_CHECK_MAX"]

#: Pairs of at most this many vertices are checked for isomorphism.
ISOMORPHISM_CHECK_MAX = 64
FAMILIES = ("csl", "srg", "regular", "cfi")


@dataclass(frozen=True)
class GraphPair:
    """Two graphs on ``n`` vertices: ``g`` and ``h`` are ``edge_index [2, 2E]`` (both directions
    of every undirected edge, int64); ``category`` names the family or the file's label,
    ``index`` the pair's position (from 0) and ``where`` its origin (``file:line``)."""

    category: str
    index: int
    n: int
    g: Tensor
    h: Tensor
    where: str = ""


def _edge_index(graph) -> Tensor:
    """A networkx graph on nodes ``0..n-1`` as ``edge_index [2, 2E]``."""
    edges = torch.tensor(list(graph.edges()), dtype=torch.int64).reshape(-1, 2).t()
    return torch.cat([edges, edges.flip(0)], dim=1)


def _networkx(edge_index: Tensor, n: int):
    import networkx as nx

    graph = nx.Graph()
    graph.add_nodes_from(range(n))
    graph.add_edges_from(edge_index.t().tolist())
    return graph


def _check(pair: GraphPair) -> GraphPair:
    """``pair`` if it is a valid pair, else ValueError naming it (sizes, isomorphism)."""
    import networkx as nx

    name = pair.where or f"{pair.category} pair {pair.index}"
    if pair.n < 1:
        raise ValueError(f"{name}: the graphs have no vertex")
    if pair.n <= ISOMORPHISM_CHECK_MAX and nx.vf2pp_is_isomorphic(_networkx(pair.g, pair.n), _networkx(pair.h, pair.n)):
        raise ValueError(f"{name}: the two graphs are isomorphic, so no model can (or should) tell them apart")
    return pair


def read_pairs(path) -> List[GraphPair]:
    """The pairs of a pair file (see the module docstring). Every problem is a ValueError
    naming the file and the line: a line without two graphs, invalid graph6, graphs of
    different sizes, an isomorphic pair; an empty file or one with no pair too."""
    import networkx as nx

    path = Path(path)
    text = read_text(path, "pair file", "graph6 pairs")
    pairs: List[GraphPair] = []
    for number, line in enumerate(text.splitlines(), start=1):
        fields = line.split("#", 1)[0].split()
        if not fields:
            continue
        where = f"{path}:{number}"
        if len(fields) not in (2, 3):
            raise ValueError(f"{where}: expected [category] graph6 graph6, got {len(fields)} fields")
        category = fields[0] if len(fields) == 3 else "pairs"
        graphs = []
        for text6 in fields[-2:]:
            try:
                graphs.append(nx.from_graph6_bytes(text6.encode("ascii")))
            except (ValueError, UnicodeEncodeError, nx.NetworkXError) as error:
                shown = text6 if len(text6) <= 30 else text6[:27] + "..."
                raise ValueError(f"{where}: {shown!r} is not a graph6 string ({error})") from None
        g, h = graphs
        if g.number_of_nodes() != h.number_of_nodes():
            raise ValueError(f"{where}: the graphs have {g.number_of_nodes()} and {h.number_of_nodes()} vertices; "
                             "a pair must be of one size")
        pairs.append(_check(GraphPair(category, len(pairs), g.number_of_nodes(), _edge_index(g), _edge_index(h),
                                      where)))
    if not pairs:
        raise ValueError(f"{path}: no pair in the file (one per line: [category] graph6 graph6)")
    return pairs


def _shrikhande():
    """The Shrikhande graph: Z4 x Z4, (a, b) ~ (a, b) + (+-1, 0), (0, +-1), +-(1, 1)."""
    import networkx as nx

    graph = nx.Graph()
    steps = [(1, 0), (3, 0), (0, 1), (0, 3), (1, 1), (3, 3)]
    for a, b in itertools.product(range(4), repeat=2):
        for da, db in steps:
            graph.add_edge(4 * a + b, 4 * ((a + da) % 4) + (b + db) % 4)
    return graph


def _rook_4x4():
    """The 4x4 rook's graph: (a, b) ~ (c, d) iff exactly one coordinate agrees."""
    import networkx as nx

    graph = nx.Graph()
    for (a, b), (c, d) in itertools.combinations(itertools.product(range(4), repeat=2), 2):
        if (a == c) != (b == d):
            graph.add_edge(4 * a + b, 4 * c + d)
    return graph


def family_pairs(name: str, count: Optional[int] = None, seed: int = 0, n: int = 10, degree: int = 3
                 ) -> List[GraphPair]:
    """The pairs of a built-in family (:data:`FAMILIES`): all of them, or the first ``count``.
    ``regular`` draws ``count`` (default 20) pairs of random ``degree``-regular graphs on ``n``
    vertices from ``seed``, each checked non-isomorphic."""
    if name not in FAMILIES:
        raise ValueError(f"unknown family {name!r}: choose from {', '.join(FAMILIES)}")
    if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 1):
        raise ValueError(f"count must be a positive integer, got {count!r}")
    if name == "csl":
        graphs = [csl_graph(41, r) for r in PAPER_SKIPS]
        pairs = [GraphPair("csl", i, 41, a, b) for i, (a, b) in enumerate(itertools.combinations(graphs, 2))]
    elif name == "srg":
        pairs = [GraphPair("srg", 0, 16, _edge_index(_shrikhande()), _edge_index(_rook_4x4()))]
    elif name == "cfi":
        pairs = []
        for base in _cfi_bases():
            g, h = cfi_pair(base)
            pairs.append(GraphPair("cfi", len(pairs), g.number_of_nodes(), _edge_index(g), _edge_index(h)))
    else:
        pairs = _regular_pairs(count or 20, seed, n, degree)
    return [_check(p) for p in pairs[:count]]


def _regular_pairs(count: int, seed: int, n: int, degree: int) -> List[GraphPair]:
    import networkx as nx

    if n * degree % 2 or not 0 < degree < n:
        raise ValueError(f"no {degree}-regular graph on {n} vertices")
    pairs, attempt = [], 0
    while len(pairs) < count:
        g = nx.random_regular_graph(degree, n, seed=seed * 1_000_003 + 2 * attempt)
        h = nx.random_regular_graph(degree, n, seed=seed * 1_000_003 + 2 * attempt + 1)
        attempt += 1
        if attempt > 100 * count:
            raise ValueError(f"could not draw {count} non-isomorphic {degree}-regular pairs on {n} vertices")
        if nx.is_connected(g) and nx.is_connected(h) and not nx.vf2pp_is_isomorphic(g, h):
            pairs.append(GraphPair("regular", len(pairs), n, _edge_index(g), _edge_index(h)))
    return pairs


def _cfi_bases():
    """Small connected base graphs for CFI pairs, smallest first."""
    import networkx as nx

    return [nx.cycle_graph(3), nx.cycle_graph(4), nx.cycle_graph(5), nx.complete_graph(4),
            nx.complete_bipartite_graph(3, 3), nx.circular_ladder_graph(3), nx.hypercube_graph(3),
            nx.petersen_graph()]


def cfi_pair(base):
    """The Cai-Fuerer-Immerman pair over a connected base graph (networkx), as two networkx
    graphs on the same vertices ``0..n-1``.

    Each base vertex v of degree d becomes a gadget: two end vertices ``a(v, e, 0)``,
    ``a(v, e, 1)`` per incident edge e, and one middle vertex per even-sized subset S of its
    incident edges, joined to ``a(v, e, 1)`` for e in S and to ``a(v, e, 0)`` otherwise. Each base
    edge {u, v} joins ``a(u, e, i)`` to ``a(v, e, i)`` (i = 0, 1); the second graph twists one
    edge (``a(u, e, i)`` to ``a(v, e, 1 - i)``). The two are non-isomorphic for a connected base
    and not told apart by the 1-WL test (nor by k-WL for k below the base's treewidth)."""
    import networkx as nx

    if base.number_of_nodes() < 2 or not nx.is_connected(base):
        raise ValueError("a CFI base graph must be connected with at least 2 vertices")
    base = nx.convert_node_labels_to_integers(base)
    ids = {}

    def vertex(key):
        return ids.setdefault(key, len(ids))

    gadget_edges = []
    for v in base.nodes:
        incident = sorted(tuple(sorted(e)) for e in base.edges(v))
        for size in range(0, len(incident) + 1, 2):
            for subset in itertools.combinations(incident, size):
                middle = vertex(("m", v, subset))
                for e in incident:
                    gadget_edges.append((middle, vertex(("a", v, e, int(e in subset)))))
    twisted = tuple(sorted(next(iter(base.edges))))
    graphs = []
    for twist in (False, True):
        graph = nx.Graph()
        graph.add_nodes_from(range(len(ids)))
        graph.add_edges_from(gadget_edges)
        for u, v in base.edges:
            e = tuple(sorted((u, v)))
            for i in (0, 1):
                graph.add_edge(ids[("a", u, e, i)], ids[("a", v, e, 1 - i if twist and e == twisted else i)])
        graphs.append(graph)
    return graphs[0], graphs[1]
