"""Built-in families of pairs of non-isomorphic, 1-WL-equivalent graphs (``rpfast pairs
--family``), one per category of the BREC benchmark that can be built without its files:

* ``basic``: connected, non-regular graphs on 10 vertices (BREC's "basic" category is such
  pairs, found by search): random graphs of one degree sequence, walked by random double-edge
  swaps and grouped by their 1-WL colour histograms;
* ``regular``: random 3-regular graphs on 10 vertices;
* ``srg``: strongly regular graphs with equal parameters (BREC's "strongly regular"): the
  Shrikhande graph against the 4x4 rook's graph (srg(16, 6, 2, 2)), the triangular graph T(8)
  against the three Chang graphs (srg(28, 12, 6, 4)), and Latin square graphs of Latin squares
  from different main classes (srg(m^2, 3(m - 1), m, 6), m = 6, 7; a pair is kept when its
  numbers of 4-cliques through the vertices differ, which certifies non-isomorphism cheaply,
  and skipped when its two graphs have the same local invariants as an earlier pair's, which
  are most likely the same two main classes again);
* ``4vtx``: strongly regular graphs that also satisfy the 4-vertex condition (BREC's
  "4-vertex condition"): the collinearity graphs of the generalized quadrangles W(3) and
  Q(4, 3), srg(40, 12, 2, 4) (points of PG(3, 3) under a symplectic form, and of a parabolic
  quadric in PG(4, 3); two points adjacent when orthogonal), and their complements,
  srg(40, 27, 18, 18), which satisfy it too;
* ``csl``: circulant skip-link graphs CSL(41, R) against CSL(41, R') for the paper's ten skip
  lengths (45 pairs of 4-regular graphs);
* ``cfi``: Cai-Fuerer-Immerman pairs (:func:`cfi_pair`) over small base graphs (cycles, bases
  of treewidth 2, K4, K3,3, the prism, the cube, the Petersen graph: 18 to 104 vertices,
  :func:`cfi_bases`);
* ``cfi-large``: CFI pairs over bases of treewidth 3 and 4 beyond ``cfi``'s (the 3 x 3 and 4 x 4
  grids, K5, the Wagner graph, K4,4: 80 to 168 vertices, :func:`cfi_large_bases`; category
  ``cfi_large``);
* ``dr``: distance-regular graphs with equal intersection arrays (BREC's "distance regular"):
  incidence graphs of non-isomorphic symmetric designs (biplanes of order 4, 32 vertices; the
  (31, 15, 7) Singer and Paley designs, 62 vertices; the complements of both, whose incidence
  graphs are denser) and H(3, 4) against the Doob graph (64 vertices):
  :func:`distance_regular_pairs`;
* ``all``: every family above, each under its own category.

Every pair is checked non-isomorphic (networkx's VF2++, up to
:data:`~rpfast.datasets.pairs.ISOMORPHISM_CHECK_MAX` vertices) and 1-WL-equivalent
(:func:`wl_equivalent`). The draws are seeded: a family is the same list on every machine.
"""
import itertools
import random
from typing import Callable, Dict, List, Optional, Tuple

from rpfast.datasets.csl import PAPER_SKIPS, csl_graph
from rpfast.datasets.designs import design_pairs
from rpfast.datasets.pairs import GraphPair, check_pair, local_invariants, networkx_edge_index, networkx_graph

__all__ = ["family_pairs", "cfi_pair", "cfi_bases", "cfi_large_bases", "generalized_quadrangles", "latin_square_graph",
           "shrikhande_graph", "distance_regular_pairs", "wl_equivalent", "FAMILIES"]


def wl_colours(graph) -> List:
    """The 1-WL test's verdict on a networkx graph as a comparable value: the sorted multiset of
    colours after every refinement round, up to the first round that splits no colour class.
    A colour is the hash of the vertex's previous colour and the sorted colours of its
    neighbours (Python hashes tuples of ints the same in every process), so colours mean the
    same in every graph; two graphs are 1-WL-equivalent iff these lists are equal (up to a hash
    collision)."""
    colour = {v: 0 for v in graph}
    rounds, classes = [], 1
    for _ in range(graph.number_of_nodes()):
        colour = {v: hash((colour[v], tuple(sorted(colour[u] for u in graph[v])))) for v in graph}
        rounds.append(sorted(colour.values()))
        if len(set(colour.values())) == classes:
            break
        classes = len(set(colour.values()))
    return rounds


def wl_equivalent(g, h) -> bool:
    """Whether the 1-WL test (colour refinement) fails to tell networkx graphs g and h apart."""
    return g.number_of_nodes() == h.number_of_nodes() and wl_colours(g) == wl_colours(h)


def _pair(category: str, index: int, g, h) -> GraphPair:
    return GraphPair(category, index, g.number_of_nodes(), networkx_edge_index(g), networkx_edge_index(h))


def _csl(count: int, seed: int) -> List[GraphPair]:
    graphs = [networkx_graph(csl_graph(41, r), 41) for r in PAPER_SKIPS]
    return [_pair("csl", i, a, b) for i, (a, b) in enumerate(itertools.combinations(graphs, 2))]


def shrikhande_graph():
    """The Shrikhande graph: Z4 x Z4, (a, b) ~ (a, b) + (+-1, 0), (0, +-1), +-(1, 1)."""
    import networkx as nx

    graph = nx.Graph()
    steps = [(1, 0), (3, 0), (0, 1), (0, 3), (1, 1), (3, 3)]
    for a, b in itertools.product(range(4), repeat=2):
        for da, db in steps:
            graph.add_edge(4 * a + b, 4 * ((a + da) % 4) + (b + db) % 4)
    return graph


def _rook(m: int):
    """The m x m rook's graph: (a, b) ~ (c, d) iff exactly one coordinate agrees."""
    import networkx as nx

    graph = nx.Graph()
    graph.add_nodes_from(range(m * m))
    for (a, b), (c, d) in itertools.combinations(itertools.product(range(m), repeat=2), 2):
        if (a == c) != (b == d):
            graph.add_edge(m * a + b, m * c + d)
    return graph


def _chang_graphs():
    """T(8), the line graph of K8, and the three Chang graphs: T(8) Seidel-switched with respect
    to the edges of a perfect matching, of C8 and of C3 + C5 in K8 (all srg(28, 12, 6, 4))."""
    import networkx as nx

    triangular = nx.convert_node_labels_to_integers(nx.line_graph(nx.complete_graph(8)), label_attribute="edge")
    index = {frozenset(e): v for v, e in triangular.nodes(data="edge")}
    switch_sets = [[(0, 1), (2, 3), (4, 5), (6, 7)],
                   [(i, (i + 1) % 8) for i in range(8)],
                   [(0, 1), (1, 2), (2, 0), (3, 4), (4, 5), (5, 6), (6, 7), (7, 3)]]
    graphs = [nx.Graph(triangular)]
    for edges in switch_sets:
        inside = {index[frozenset(e)] for e in edges}
        chang = nx.Graph(triangular)
        for u in inside:
            for v in set(triangular) - inside:
                if chang.has_edge(u, v):
                    chang.remove_edge(u, v)
                else:
                    chang.add_edge(u, v)
        graphs.append(chang)
    return graphs


def random_latin_square(m: int, rng: random.Random) -> List[List[int]]:
    """A random m x m Latin square, row by row: each row a random permutation of the symbols
    avoiding every column's earlier symbols (a random perfect matching, by backtracking)."""
    rows: List[List[int]] = []
    while len(rows) < m:
        used = [{row[c] for row in rows} for c in range(m)]
        row = _random_row(m, used, rng)
        if row is None:  # a dead end (rare): start the square again
            rows = []
        else:
            rows.append(row)
    return rows


def _random_row(m: int, used, rng: random.Random, budget: int = 10_000) -> Optional[List[int]]:
    row: List[int] = []
    choices = [None] * m
    steps = 0
    while len(row) < m:
        c = len(row)
        if choices[c] is None:
            free = [s for s in range(m) if s not in used[c] and s not in row]
            rng.shuffle(free)
            choices[c] = free
        steps += 1
        if steps > budget:
            return None
        if choices[c]:
            row.append(choices[c].pop())
        else:
            choices[c] = None
            if not row:
                return None
            row.pop()
    return row


def latin_square_graph(square: List[List[int]]):
    """The Latin square graph: the m^2 cells, two adjacent when they share a row, a column or a
    symbol: srg(m^2, 3(m - 1), m, 6) for m >= 3; isomorphic for m >= 5 exactly when the squares
    are main-class equivalent. ``square``: m rows of m symbols, each of ``0..m-1`` once per row
    and per column (else ValueError)."""
    import networkx as nx

    m = len(square)
    symbols = list(range(m))
    if m < 1 or any(len(row) != m for row in square) or any(sorted(row) != symbols for row in square) \
            or any(sorted(column) != symbols for column in zip(*square)):
        raise ValueError("square must be a Latin square: m rows of m symbols, each of 0..m-1 once per row and "
                         "once per column")
    cells = list(itertools.product(range(m), repeat=2))
    graph = nx.Graph()
    graph.add_nodes_from(range(m * m))
    for (a, b), (c, d) in itertools.combinations(cells, 2):
        if a == c or b == d or square[a][b] == square[c][d]:
            graph.add_edge(m * a + b, m * c + d)
    return graph


def _srg(count: int, seed: int) -> List[GraphPair]:
    pairs = [_pair("srg", 0, shrikhande_graph(), _rook(4))]
    triangular, *changs = _chang_graphs()
    pairs += [_pair("srg", len(pairs) + i, triangular, chang) for i, chang in enumerate(changs)]
    rng = random.Random(seed)
    orders = itertools.cycle((6, 7))
    tries, drawn = 0, set()
    while len(pairs) < count:
        tries += 1
        if tries > 50 * count:
            raise ValueError(f"could not draw {count} srg pairs")
        m = next(orders)
        g, h = (latin_square_graph(random_latin_square(m, rng)) for _ in range(2))
        invariants = tuple(sorted((tuple(local_invariants(g)), tuple(local_invariants(h)))))
        # different invariants: certainly non-isomorphic, without a costly search; the invariants
        # of an earlier pair: most likely the same two main classes again, so skipped
        if invariants[0] != invariants[1] and invariants not in drawn:
            drawn.add(invariants)
            pairs.append(_pair("srg", len(pairs), g, h))
    return pairs


def _four_vertex(count: int, seed: int) -> List[GraphPair]:
    import networkx as nx

    g, h = generalized_quadrangles()
    return [_pair("4vtx", 0, g, h), _pair("4vtx", 1, nx.complement(g), nx.complement(h))]


def generalized_quadrangles():
    """The collinearity graphs of the generalized quadrangles W(3) and Q(4, 3) (networkx), both
    srg(40, 12, 2, 4) with the 4-vertex condition: the points of PG(3, 3), adjacent when
    orthogonal under the symplectic form x0 y1 - x1 y0 + x2 y3 - x3 y2; the points of the quadric
    x0^2 + x1 x2 + x3 x4 = 0 in PG(4, 3), adjacent when orthogonal under its bilinear form. They
    are not isomorphic (the points of W(q) are regular, those of Q(4, q) for odd q are not: two
    non-adjacent points have q + 1 common neighbours, and 4 against 2 points adjacent to all of
    those)."""
    import networkx as nx

    def points(dim):  # projective points over GF(3): first nonzero coordinate 1
        return [v for v in itertools.product(range(3), repeat=dim) if any(v) and next(x for x in v if x) == 1]

    def graph(vertices, form):
        return nx.Graph([(i, j) for i, j in itertools.combinations(range(len(vertices)), 2)
                         if form(vertices[i], vertices[j]) % 3 == 0])

    symplectic = graph(points(4), lambda x, y: x[0] * y[1] - x[1] * y[0] + x[2] * y[3] - x[3] * y[2])
    quadric = [v for v in points(5) if (v[0] ** 2 + v[1] * v[2] + v[3] * v[4]) % 3 == 0]
    parabolic = graph(quadric, lambda x, y: 2 * x[0] * y[0] + x[1] * y[2] + x[2] * y[1] + x[3] * y[4] + x[4] * y[3])
    return symplectic, parabolic


def _regular(count: int, seed: int, n: int = 10, degree: int = 3) -> List[GraphPair]:
    import networkx as nx

    pairs, attempt = [], 0
    while len(pairs) < count:
        g = nx.random_regular_graph(degree, n, seed=seed * 1_000_003 + 2 * attempt)
        h = nx.random_regular_graph(degree, n, seed=seed * 1_000_003 + 2 * attempt + 1)
        attempt += 1
        if attempt > 100 * count:
            raise ValueError(f"could not draw {count} non-isomorphic {degree}-regular pairs on {n} vertices")
        if nx.is_connected(g) and nx.is_connected(h) and not nx.vf2pp_is_isomorphic(g, h):
            pairs.append(_pair("regular", len(pairs), g, h))
    return pairs


def _basic(count: int, seed: int, n: int = 10) -> List[GraphPair]:
    """Non-regular connected 1-WL-equivalent pairs on ``n`` vertices: for a random degree
    sequence, a walk of random double-edge swaps (which keep the degrees); graphs met on the way
    are grouped by their 1-WL colours and the first two non-isomorphic graphs of a group pair up."""
    import networkx as nx

    rng = random.Random(seed)
    pairs: List[GraphPair] = []
    for _ in range(1000 * count):
        if len(pairs) >= count:
            return pairs
        g = nx.gnm_random_graph(n, rng.randint(n + 3, 2 * n), seed=rng.randrange(2 ** 31))
        if not nx.is_connected(g) or len({d for _, d in g.degree}) == 1:
            continue
        groups: Dict = {}
        for _ in range(200):
            try:
                nx.double_edge_swap(g, nswap=1, max_tries=50, seed=rng.randrange(2 ** 31))
            except nx.NetworkXException:
                break
            if not nx.is_connected(g):
                continue
            group = groups.setdefault(repr(wl_colours(g)), [])
            if not group or (len(group) == 1 and not nx.vf2pp_is_isomorphic(g, group[0])):
                group.append(g.copy())
            if len(group) == 2:
                pairs.append(_pair("basic", len(pairs), *group))
                break
    if len(pairs) < count:
        raise ValueError(f"could not draw {count} basic pairs on {n} vertices")
    return pairs


def _cfi(count: int, seed: int) -> List[GraphPair]:
    return [_pair("cfi", i, *cfi_pair(base)) for i, base in enumerate(cfi_bases())]


def cfi_bases() -> List:
    """The base graphs of the ``cfi`` family (networkx): cycles; bases of treewidth 2 (the
    diamond, K2,3, ladders of 3, 4 and 6 rungs, C6 with a chord, a fan, the theta graph with
    paths of 2, 2 and 3 edges, C8 with two chords), whose CFI pairs the 3-WL test separates, as
    BREC's 60 "3-WL" CFI pairs; and K4, K3,3, the prism, the cube and Petersen's graph."""
    import networkx as nx

    def with_edges(graph, *edges):
        graph.add_edges_from(edges)
        return graph

    theta = nx.Graph([(0, 1), (1, 5), (0, 2), (2, 5), (0, 3), (3, 4), (4, 5)])
    fan = with_edges(nx.path_graph(4), *((4, v) for v in range(4)))
    return [nx.cycle_graph(3), nx.cycle_graph(4), nx.cycle_graph(5),
            nx.diamond_graph(), nx.complete_bipartite_graph(2, 3), nx.ladder_graph(3), nx.ladder_graph(4),
            with_edges(nx.cycle_graph(6), (0, 3)), fan, theta, with_edges(nx.cycle_graph(8), (0, 3), (4, 7)),
            nx.ladder_graph(6),
            nx.complete_graph(4), nx.complete_bipartite_graph(3, 3), nx.circular_ladder_graph(3),
            nx.hypercube_graph(3), nx.petersen_graph()]


def _cfi_large(count: int, seed: int) -> List[GraphPair]:
    return [_pair("cfi_large", i, *cfi_pair(base)) for i, base in enumerate(cfi_large_bases())]


def cfi_large_bases() -> List:
    """The base graphs of the ``cfi-large`` family (networkx), of treewidth 3 and more, beyond
    those of ``cfi``: the 3 x 3 grid (treewidth 3), K5, the Wagner graph (the Moebius ladder on 8
    vertices), K4,4 and the 4 x 4 grid (treewidth 4): CFI pairs of 80 to 168 vertices, which
    3-WL does not separate when the treewidth is 4."""
    import networkx as nx

    return [nx.grid_2d_graph(3, 3), nx.complete_graph(5), nx.circulant_graph(8, [1, 4]),
            nx.complete_bipartite_graph(4, 4), nx.grid_2d_graph(4, 4)]


def _distance_regular(count: int, seed: int) -> List[GraphPair]:
    return [_pair("dr", i, g, h) for i, (_, g, h) in enumerate(distance_regular_pairs())]


def distance_regular_pairs():
    """``[(name, g, h)]``: the ``dr`` family's pairs of distance-regular graphs with one
    intersection array (networkx): the design incidence graphs of
    :func:`rpfast.datasets.designs.design_pairs` (32 and 62 vertices), then the Hamming graph
    H(3, 4) against the Doob graph D(1, 1), the Shrikhande graph times K4 (64 vertices,
    {9, 6, 3; 1, 2, 3}), then the complements' incidence graphs (32 and 62 vertices)."""
    import networkx as nx

    k4 = nx.complete_graph(4)
    hamming = nx.cartesian_product(nx.cartesian_product(k4, k4), k4)
    doob = nx.cartesian_product(shrikhande_graph(), k4)
    designs = design_pairs()  # the complements last: the earlier pairs keep their indices
    return designs[:2] + [("H(3, 4) and Doob D(1, 1)", nx.convert_node_labels_to_integers(hamming),
                           nx.convert_node_labels_to_integers(doob))] + designs[2:]


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


#: family name -> (generator(count, seed), default count; None: the family's fixed size)
_GENERATORS: Dict[str, Tuple[Callable[[int, int], List[GraphPair]], Optional[int]]] = {
    "basic": (_basic, 20), "regular": (_regular, 20), "srg": (_srg, 20), "4vtx": (_four_vertex, None),
    "csl": (_csl, None), "cfi": (_cfi, None), "cfi-large": (_cfi_large, None), "dr": (_distance_regular, None)}
#: The built-in families' names (``all``: every family, each under its own category).
FAMILIES = tuple(_GENERATORS) + ("all",)


def family_pairs(name: str, count: Optional[int] = None, seed: int = 0) -> List[GraphPair]:
    """The pairs of a built-in family (:data:`FAMILIES`, see the module docstring): its default
    number, or the first ``count`` (for ``all``: the first ``count`` of every family). Random
    families are drawn from ``seed``. Every pair is checked non-isomorphic and 1-WL-equivalent."""
    if name not in FAMILIES:
        raise ValueError(f"unknown family {name!r}: choose from {', '.join(FAMILIES)}")
    if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 1):
        raise ValueError(f"count must be a positive integer, got {count!r}")
    if name == "all":
        return [p for family in _GENERATORS for p in family_pairs(family, count, seed)]
    generate, default = _GENERATORS[name]
    pairs = generate(count or default or 0, seed)[:count]
    for pair in pairs:
        check_pair(pair)
        g, h = (networkx_graph(e, pair.n) for e in (pair.g, pair.h))
        if not wl_equivalent(g, h):
            raise AssertionError(f"{name} pair {pair.index} is told apart by 1-WL: a bug in its generator")
    return pairs

