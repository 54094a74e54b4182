"""Symmetric designs from difference sets, and the distance-regular pairs they give (most of the
``dr`` family of ``rpfast pairs``).

A ``(v, k, lambda)`` difference set ``D`` in an abelian group ``G`` of order ``v`` (every nonzero
element a difference ``d - d'`` of two elements of ``D`` exactly ``lambda`` times) develops into a
symmetric 2-design: the ``v`` blocks ``D + g``. The design's incidence graph (points and blocks,
a point joined to the blocks through it) is bipartite, ``k``-regular and distance-regular with
intersection array ``{k, k - 1, k - lambda; 1, lambda, k}``: two designs with equal parameters
give incidence graphs with equal intersection arrays, which the 1-WL test (any regular graphs of
one size and degree) cannot tell apart. The graphs are isomorphic only when one design is
isomorphic to the other or to its dual; an invariant of the incidence matrix that a transpose
keeps (its rank over GF(2), the counts of blocks through triples of points and of points on
triples of blocks) certifies that two are not.
"""
import itertools
from collections import Counter
from typing import List, Sequence, Set, Tuple

__all__ = ["develop", "complement", "incidence_graph", "gf2_rank", "triple_counts", "certified_different",
           "singer_set", "quadratic_residues", "design_pairs"]

Element = Tuple[int, ...]


def develop(orders: Sequence[int], base: Sequence[Element], lam: int) -> List[Set[int]]:
    """The blocks ``D + g`` (as sets of element numbers, row-major over ``Z_orders[0] x ...``)
    of the difference set ``base`` in the group ``Z_orders[0] x Z_orders[1] x ...``; ValueError
    unless every nonzero element is a difference of ``base`` exactly ``lam`` times."""
    if not orders or any(isinstance(m, bool) or not isinstance(m, int) or m < 1 for m in orders):
        raise ValueError(f"orders must be positive integers (the cyclic factors of the group), got {orders!r}")
    if not base or any(len(tuple(d)) != len(orders) for d in base):
        raise ValueError(f"base must hold elements of {len(orders)} coordinates (one per factor), got {base!r}")
    elements = list(itertools.product(*(range(m) for m in orders)))
    number = {e: i for i, e in enumerate(elements)}

    def combine(a, b, sign):
        return tuple((x + sign * y) % m for x, y, m in zip(a, b, orders))

    base = [tuple(d) for d in base]
    differences = Counter(combine(a, b, -1) for a in base for b in base if a != b)
    zero = elements[0]
    if any(differences.get(e, 0) != lam for e in elements if e != zero):
        raise ValueError(f"{base} is not a ({len(elements)}, {len(base)}, {lam}) difference set in "
                         f"{' x '.join(f'Z{m}' for m in orders)}")
    return [{number[combine(d, g, 1)] for d in base} for g in elements]


def complement(blocks: List[Set[int]], v: int) -> List[Set[int]]:
    """The complementary design: every block replaced by the other ``v - k`` points. The
    complement of a symmetric ``(v, k, lambda)`` design is a symmetric ``(v, v - k, v - 2k +
    lambda)`` design, and two designs are isomorphic exactly when their complements are."""
    return [set(range(v)) - block for block in blocks]


def incidence_graph(blocks: List[Set[int]], v: int):
    """The points ``0..v-1`` and the blocks ``v..2v-1``, a point joined to every block through it
    (networkx)."""
    import networkx as nx

    graph = nx.Graph()
    graph.add_nodes_from(range(2 * v))
    graph.add_edges_from((point, v + j) for j, block in enumerate(blocks) for point in block)
    return graph


def gf2_rank(blocks: List[Set[int]], v: int) -> int:
    """The rank over GF(2) of the ``v x v`` incidence matrix (a transpose keeps it)."""
    rows = [sum(1 << p for p in block) for block in blocks]
    rank = 0
    for bit in reversed(range(v)):
        pivot = next((r for r in rows if r >> bit & 1), None)
        if pivot is None:
            continue
        rank += 1
        rows = [r ^ pivot if r >> bit & 1 else r for r in rows if r is not pivot]
    return rank


def triple_counts(blocks: List[Set[int]], v: int) -> Tuple:
    """The sorted pair of histograms: blocks through each triple of points, points on each triple
    of blocks (invariant under isomorphism and duality)."""
    def histogram(sets, size):
        return tuple(sorted(Counter(sum(1 for s in sets if set(t) <= s)
                                    for t in itertools.combinations(range(size), 3)).items()))
    dual = [{j for j, block in enumerate(blocks) if p in block} for p in range(v)]
    return tuple(sorted((histogram(blocks, v), histogram(dual, v))))


def certified_different(a: List[Set[int]], b: List[Set[int]], v: int) -> bool:
    """Whether an invariant shows that the incidence graphs of designs ``a`` and ``b`` differ."""
    return gf2_rank(a, v) != gf2_rank(b, v) or triple_counts(a, v) != triple_counts(b, v)


def singer_set(degree: int, taps: Sequence[int]) -> List[int]:
    """The Singer difference set with parameters ``(2^d - 1, 2^(d-1) - 1, 2^(d-2) - 1)`` in
    ``Z_(2^d - 1)``: the zeros of one period of the m-sequence of the primitive polynomial
    ``x^d + sum x^t`` (``taps``, exponents below ``d``; ``s[i + d] = sum s[i + t]``), the
    complements of the hyperplanes of PG(d - 1, 2)."""
    period = 2 ** degree - 1
    sequence = [1] + [0] * (degree - 1)
    while len(sequence) < period:
        i = len(sequence) - degree
        sequence.append(sum(sequence[i + t] for t in taps) % 2)
    return [i for i, s in enumerate(sequence) if s == 0]


def quadratic_residues(p: int) -> List[int]:
    """The nonzero squares mod a prime ``p = 3 (mod 4)``: the Paley difference set
    ``(p, (p - 1) / 2, (p - 3) / 4)``."""
    return sorted({x * x % p for x in range(1, p)})


def design_pairs():
    """``[(name, g, h)]``: incidence graphs of non-isomorphic symmetric designs with equal
    parameters (networkx), each pair certified by :func:`certified_different`:

    * the biplanes of order 4 with GF(2) ranks 6 and 7 (difference sets in Z2^4 and Z8 x Z2):
      32 vertices, intersection array {6, 5, 4; 1, 2, 6};
    * the (31, 15, 7) Singer and Paley designs (PG(4, 2) against the quadratic residues mod 31):
      62 vertices, {15, 14, 8; 1, 7, 15};
    * the complements of both pairs (:func:`complement`), (16, 10, 6) and (31, 16, 8) designs:
      32 vertices, {10, 9, 4; 1, 6, 10}, and 62 vertices, {16, 15, 8; 1, 8, 16}.
    """
    biplanes = [develop((2, 2, 2, 2), [(0, 0, 0, 0), (0, 0, 0, 1), (0, 0, 1, 0), (0, 1, 0, 0), (1, 0, 0, 0),
                                       (1, 1, 1, 1)], 2),
                develop((8, 2), [(0, 0), (0, 1), (1, 0), (2, 0), (5, 1), (6, 0)], 2)]
    hadamard = [develop((31,), [(d,) for d in singer_set(5, (0, 2))], 7),
                develop((31,), [(d,) for d in quadratic_residues(31)], 7)]
    designs = [("biplanes of order 4", biplanes, 16), ("(31, 15, 7) designs", hadamard, 31)]
    designs += [(f"complements of the {name}", [complement(d, v) for d in pair], v) for name, pair, v in designs]
    pairs = []
    for name, (a, b), v in designs:
        if not certified_different(a, b, v):  # pragma: no cover - the constructions above are fixed
            raise AssertionError(f"the {name} are not certified different")
        pairs.append((name, incidence_graph(a, v), incidence_graph(b, v)))
    return pairs
