"""CSL graphs: 4-regular, classes pairwise non-isomorphic, indistinguishable by 1-WL."""
import itertools

import networkx as nx
import numpy as np
import pytest
import torch

from rpfast.datasets import PAPER_SKIPS, csl_dataset, csl_graph


def to_nx(edge_index, n):
    G = nx.Graph()
    G.add_nodes_from(range(n))
    G.add_edges_from(edge_index.t().tolist())
    return G


def spectrum(edge_index, n):
    A = np.zeros((n, n))
    A[edge_index[0].numpy(), edge_index[1].numpy()] = 1
    return np.sort(np.linalg.eigvalsh(A))


def test_every_graph_is_4_regular_and_simple():
    graphs, labels = csl_dataset()
    assert len(graphs) == 150 and labels.bincount().tolist() == [15] * 10
    for edge_index, n in graphs:
        G = to_nx(edge_index, n)
        assert n == 41 and G.number_of_edges() == 82 and nx.number_of_selfloops(G) == 0
        assert {d for _, d in G.degree()} == {4}


def test_classes_pairwise_non_isomorphic_by_spectrum():
    spectra = [spectrum(csl_graph(41, R), 41) for R in PAPER_SKIPS]
    for a, b in itertools.combinations(range(len(spectra)), 2):
        assert np.abs(spectra[a] - spectra[b]).max() > 1e-6, (PAPER_SKIPS[a], PAPER_SKIPS[b])


def test_relabelings_are_isomorphic_to_their_canonical_graph():
    graphs, labels = csl_dataset(per_class=3)
    for k in range(0, len(graphs), 3):
        canonical = to_nx(*graphs[k])
        for j in (k + 1, k + 2):
            assert nx.vf2pp_is_isomorphic(canonical, to_nx(*graphs[j]))
            assert not torch.equal(graphs[j][0], graphs[k][0])


@pytest.mark.filterwarnings("ignore:The hashes produced")
def test_one_wl_cannot_tell_the_classes_apart():
    hashes = {nx.weisfeiler_lehman_graph_hash(to_nx(csl_graph(41, R), 41), iterations=5) for R in PAPER_SKIPS}
    assert len(hashes) == 1


@pytest.mark.parametrize("M, R, error, match", [
    (41, 1, ValueError, "2 <= R <= M - 2"),
    (41, 40, ValueError, "2 <= R <= M - 2"),
    (12, 3, ValueError, "coprime"),
    (4, 2, ValueError, "M must be >= 5"),
    (41, 2.0, TypeError, "R must be an int"),
])
def test_csl_graph_rejects_bad_parameters(M, R, error, match):
    with pytest.raises(error, match=match):
        csl_graph(M, R)


def test_dataset_is_reproducible():
    a, _ = csl_dataset(seed=3)
    b, _ = csl_dataset(seed=3)
    assert all(torch.equal(x[0], y[0]) for x, y in zip(a, b))
