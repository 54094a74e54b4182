"""Symmetric designs from difference sets and the ``dr`` and ``cfi-large`` pair families."""
import networkx as nx
import pytest

from rpfast.datasets.designs import (certified_different, complement, develop, gf2_rank, incidence_graph,
                                     quadratic_residues, singer_set, triple_counts)
from rpfast.datasets.pair_families import cfi_large_bases, distance_regular_pairs, family_pairs
from rpfast.datasets.pairs import local_invariants

pytestmark = pytest.mark.backend_neutral


def test_develop_checks_the_difference_set():
    fano = develop((7,), [(0,), (1,), (3,)], 1)  # the Fano plane
    assert len(fano) == 7 and all(len(b) == 3 for b in fano)
    assert all(len(a & b) == 1 for a in fano for b in fano if a is not b)
    with pytest.raises(ValueError, match=r"not a \(7, 3, 1\) difference set in Z7"):
        develop((7,), [(0,), (1,), (2,)], 1)
    with pytest.raises(ValueError, match="orders must be positive integers"):
        develop((0,), [(0,)], 1)
    with pytest.raises(ValueError, match="elements of 2 coordinates"):
        develop((4, 4), [(0,), (1,)], 1)


def test_singer_and_paley_sets_are_the_hadamard_difference_sets_of_order_31():
    for base in (singer_set(5, (0, 2)), quadratic_residues(31)):
        blocks = develop((31,), [(d,) for d in base], 7)
        assert len(base) == 15 and all(len(a & b) == 7 for a in blocks for b in blocks if a is not b)


def test_the_invariants_ignore_relabeling_and_duality():
    blocks = develop((2, 2, 2, 2), [(0, 0, 0, 0), (0, 0, 0, 1), (0, 0, 1, 0), (0, 1, 0, 0), (1, 0, 0, 0),
                                    (1, 1, 1, 1)], 2)
    relabel = [(5 * p + 3) % 16 for p in range(16)]
    moved = [{relabel[p] for p in b} for b in reversed(blocks)]
    dual = [{j for j, b in enumerate(blocks) if p in b} for p in range(16)]
    for other in (moved, dual):
        assert gf2_rank(other, 16) == gf2_rank(blocks, 16) == 6
        assert triple_counts(other, 16) == triple_counts(blocks, 16)
        assert not certified_different(blocks, other, 16)
    assert gf2_rank([{0, 1}, {1, 2}, {0, 2}], 3) == 2  # the rows sum to zero over GF(2)


def test_the_distance_regular_pairs_share_their_intersection_arrays_and_differ():
    arrays = []
    for name, g, h in distance_regular_pairs():
        assert nx.is_distance_regular(g) and nx.is_distance_regular(h), name
        assert nx.intersection_array(g) == nx.intersection_array(h), name
        arrays.append(nx.intersection_array(g))
    assert arrays == [([6, 5, 4], [1, 2, 6]), ([15, 14, 8], [1, 7, 15]), ([9, 6, 3], [1, 2, 3]),
                      ([10, 9, 4], [1, 6, 10]), ([16, 15, 8], [1, 8, 16])]
    (_, b1, b2), (_, h1, h2), (_, hamming, doob), (_, c1, c2), _ = distance_regular_pairs()

    def blocks(graph, v):  # the design read back from its incidence graph
        return [set(graph[v + j]) for j in range(v)]
    assert (gf2_rank(blocks(b1, 16), 16), gf2_rank(blocks(b2, 16), 16)) == (6, 7)  # not isomorphic
    assert [complement(b, 16) for b in (blocks(b1, 16), blocks(b2, 16))] == [blocks(c1, 16), blocks(c2, 16)]
    assert triple_counts(blocks(h1, 31), 31) != triple_counts(blocks(h2, 31), 31)
    assert local_invariants(hamming) != local_invariants(doob)  # K3 + K3 + K3 against C6 + K3 around a vertex


def test_the_new_families_are_1wl_equivalent_pairs_of_their_sizes():
    dr = family_pairs("dr")
    assert [(p.category, p.n) for p in dr] == [("dr", 32), ("dr", 62), ("dr", 64), ("dr", 32), ("dr", 62)]
    large = family_pairs("cfi-large")
    assert [p.n for p in large] == [80, 80, 80, 128, 168] and {p.category for p in large} == {"cfi_large"}
    assert len(cfi_large_bases()) == len(large)
    assert incidence_graph([{0, 1}, {1, 2}, {0, 2}], 3).number_of_edges() == 6
