"""random_permutations: validity, uniformity, reproducibility, thread independence."""
import itertools
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import chisquare

from tests.helpers.assertions import assert_thread_invariant
from rpfast.ops import random_permutations
from tests.helpers.strategies import batch_sizes


@settings(max_examples=100, deadline=None)
@given(batch_sizes(), st.integers(0, 10))
def test_rows_are_partial_permutations(sizes, k):
    num_nodes, _ = sizes
    perms = random_permutations(num_nodes, num_samples=3, k=k, generator=torch.Generator().manual_seed(k))
    assert perms.shape == (len(num_nodes), 3, k) and perms.dtype == torch.int64
    for b, n in enumerate(num_nodes.tolist()):
        take = min(n, k)
        for row in perms[b].tolist():
            assert sorted(row[:take]) == sorted(set(row[:take]))
            assert all(0 <= v < n for v in row[:take])
            assert row[take:] == [-1] * (k - take)


def test_default_k_is_n_max():
    perms = random_permutations(torch.tensor([2, 5]), generator=torch.Generator().manual_seed(0))
    assert perms.shape == (2, 1, 5)
    assert sorted(perms[1, 0].tolist()) == [0, 1, 2, 3, 4]
    assert perms[0, 0, 2:].tolist() == [-1, -1, -1]


@pytest.mark.parametrize("n, k", [(4, 4), (5, 2)])
def test_uniform_over_ordered_subsets(n, k):
    samples = 300 * math.perm(n, k)
    perms = random_permutations([n], num_samples=samples, k=k, generator=torch.Generator().manual_seed(1234))
    index = {p: i for i, p in enumerate(itertools.permutations(range(n), k))}
    counts = torch.zeros(len(index))
    for row in perms[0].tolist():
        counts[index[tuple(row)]] += 1
    assert counts.min() > 0
    assert chisquare(counts.numpy()).pvalue > 1e-3


def test_reproducible_from_generator_and_fresh_on_each_call():
    a = random_permutations([10] * 8, num_samples=4, generator=torch.Generator().manual_seed(7))
    b = random_permutations([10] * 8, num_samples=4, generator=torch.Generator().manual_seed(7))
    assert torch.equal(a, b)
    gen = torch.Generator().manual_seed(7)
    first = random_permutations([10] * 8, num_samples=4, generator=gen)
    second = random_permutations([10] * 8, num_samples=4, generator=gen)
    assert torch.equal(first, a) and not torch.equal(first, second)
    torch.manual_seed(3)
    c = random_permutations([10] * 8)
    torch.manual_seed(3)
    assert torch.equal(c, random_permutations([10] * 8))


def test_independent_of_thread_count():
    assert_thread_invariant(lambda: random_permutations(torch.arange(200) % 50, num_samples=16,
                                                        generator=torch.Generator().manual_seed(5)))


@pytest.mark.parametrize(
    "args, kwargs, error, match",
    [
        (([3, -1],), {}, ValueError, r"num_nodes\[1\] = -1 is negative"),
        (([3.5],), {}, TypeError, "num_nodes must hold integers"),
        (([3],), {"num_samples": 0}, ValueError, "num_samples must be >= 1"),
        (([3],), {"k": -2}, ValueError, "k must be >= 0"),
        (([3],), {"k": 2.0}, TypeError, "k must be an int"),
        (([[3]],), {}, ValueError, "num_nodes must have 1 dimension"),
        (([3],), {"generator": 5}, TypeError, "generator must be a torch.Generator"),
        (([10**6] * 10,), {"num_samples": 10**6}, ValueError, "would need"),
    ],
)
def test_rejects_bad_input(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        random_permutations(*args, **kwargs)


def test_empty_batch():
    assert random_permutations([], num_samples=2).shape == (0, 2, 0)


def test_the_removed_samples_spelling_is_a_type_error():
    with pytest.raises(TypeError, match="samples"):
        random_permutations([4, 2], samples=3)


def test_graph_positions_draw_what_random_positions_draws():
    """The layers' draw for a GraphBatch (its host offsets, no checks of the data) gives
    random_positions' IDs for the same generator state, on the batch's device (meta too)."""
    from rpfast.data import GraphBatch
    from rpfast.ops.random import graph_positions, random_positions

    graph = GraphBatch(torch.tensor([[0, 1, 5], [1, 0, 6]]), num_nodes=[3, 0, 4])
    expected = random_positions(graph.ptr, 4, 3, generator=torch.Generator().manual_seed(7))
    assert torch.equal(graph_positions(graph, 4, 3, generator=torch.Generator().manual_seed(7)), expected)
    on_meta = graph_positions(graph.to("meta"), 4, 3, generator=torch.Generator().manual_seed(7))
    assert on_meta.device.type == "meta" and on_meta.shape == expected.shape
    with pytest.raises(ValueError, match="num_samples must be >= 1"):
        graph_positions(graph, 0, 3)
    with pytest.raises(TypeError, match="graph must be an rpfast.data.GraphBatch"):
        graph_positions(graph.ptr, 2, 3)
