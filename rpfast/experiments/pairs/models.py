r"""The models of ``rpfast pairs``, each a composition of :mod:`rpfast.nn` parts (usable from
Python as ``build_model(PairsSettings(model=...), n, generator, max_degree)``), and why the
default is what it is.

Every scored model is a learned RP model as Murphy et al. (2019) define it: one f, averaged
over relabelings drawn at random (no isomorphism solver, no canonical labeling, no hand-made
invariant fed to f, no noise added to the output). In eval mode each embedding averages
``eval_samples`` draws, so the spread of an embedding shrinks like ``1/sqrt(eval_samples)``
while the difference f learned between two graphs stays: that is how RP turns relabelings per
second into a larger T^2.

* ``gin``: a plain GIN (the negative control: no 1-WL-equivalent pair can be separated; its
  outputs are exactly equal, T^2 = 0).
* ``rp-gin``: GIN on one-hot IDs of a uniformly random relabeling (pi-SGD, eq. 3-4):
  ``RPGIN(id_dim=n, strategy=PiSGD)``.
* ``kary``: k-ary RP (eq. 5) with sampled k-subsets in a random order: an MLP on the induced
  k x k adjacency, ``RelationalPooling(VecMLP, KAry(k, subsets="sample", order="random"))``.
* ``exact``: all n! relabelings (eq. 1, n <= 11) of an MLP on the adjacency: exactly invariant
  and deterministic, so S = 0 and T^2 = 0 under the published convention; it runs with
  ``ridge > 0`` only.
* ``oriented`` (the default): RP over breadth-first (or depth-first) orders with random
  tie-breaks (Sec. 2.3.1), from starts spread evenly over the vertices (``starts="balanced"``:
  each vertex as likely as under uniform starts, without the spread of which ones were drawn),
  on the first L vertices of the order, L uniform in ``min_k..k`` (default 3/4 of k to k).
  f has two parts with their own output coordinates (:class:`~rpfast.nn.rp.Concat`): five
  eighths from :class:`~rpfast.nn.rp.RootWalks` (learned gates on the view's first vertex and
  its neighbours, its ego network, in the first 1 + (the pair's largest degree) positions, at
  most k; gated edges, 2-walks and closed 3-walks: the 4-cliques through the start, which
  separate strongly regular graphs with equal parameters) and one eighth from an MLP on the
  adjacency (:class:`~rpfast.nn.rp.VecMLP`: cycles, and the links between neighbourhoods,
  which separate CSL and CFI pairs):
  ``RelationalPooling(Concat(RootWalks, VecMLP), Oriented(method, k, "balanced", min_size=min_k))``.
  Beside it (:class:`~rpfast.nn.rp.Concat` of the two whole-graph models), the last quarter
  comes from :class:`~rpfast.nn.rp.RootedRP`: RP over the vertices at the first positions,
  as many as the eval pass affords (:func:`rooted_roots`: C(n, roots) * n rows, each costing
  the largest degree + 36, within ``ROOT_WORK_BUDGET``, 2^18 rows of degree 5: three roots up
  to 36 vertices, 34 at degree 15; two up to 80, 75 at degree 15; one above), averaged
  exactly over every set of that many vertices in eval mode: 16 rounds of message passing from
  the marked roots over the whole graph, width 8; one root set per graph and step in training,
  where only its read-out learns: the rounds are a fixed random hash, drawn once per seed for
  every pair (:func:`rooted_hash`), so the pairs and seeds of a run train as one stack
  (``STACKED_MODELS``, :mod:`rpfast.experiments.pairs.batched`). Refinement from marked roots
  sees the twist of CFI pairs, which views of 32 vertices and walk counts do not: one root
  where the base loses its cycles with one vertex (the diamond, K2,3, the 3-rung ladder, C6
  with a chord, the fan, the theta
  graph), two where it needs two (the 4-rung ladder, C8 with two chords, K4, K3,3, the prism);
  two roots also separate the generalized quadrangles W(3) and Q(4, 3), strongly regular with
  the 4-vertex condition, where the walk counts are equal on every vertex. Three roots
  separate the incidence graphs of the two biplanes of order 4 (the ``dr`` family: T2 0.2 with
  two roots, 1e9 with three), and two the CFI pair over the 3 x 3 grid (80 vertices: T2 143
  against one root's 1). The budget keeps an eval pass at about what two roots cost at 80
  vertices (7 s per pair here with width 4; three roots at 80 vertices took 94 s).
  The hash's width and the rooted part's share of the output decide how often a seed's hash
  misses a difference it can see (``--seeds 10``): on the first ``4vtx`` pair and the first
  three ``dr`` pairs, width 4 with two outputs missed 3 of 40 runs (T2 9.8 to 60) and width 8
  with two outputs 1 (T2 0.09); on the four hardest (the complements and the (31, 15, 7)
  designs), width 8 missed 7 of 40 with two outputs (T2 0.09 to 67) and 3 with four (1.2 to 36).
  Balanced starts weigh every start vertex the same, and the ego gates see the same
  neighbourhood on every view from one start, so the walk part's average is exact when
  ``eval_samples >= n`` (every vertex a start) and every start's closed neighbourhood fits in
  the shortest view (BFS; degree + 1 <= min_k): its 10 coordinates are then the same on every
  relabeling up to rounding (an invariant of the graph, the mean over the vertices of a learned
  function of the counts in their neighbourhoods).
  Where the two graphs' means differ, S has eigenvalues at rounding level in those directions
  and T^2 reaches 1e7 to 1e15 (the reliability statistic stays below 10): a deterministic
  separation, decided by the protocol as BREC decides its deterministic models. Where the
  coordinates are bitwise equal on every relabeling (vertex-transitive graphs, whose counts are
  equal on every vertex), S is exactly 0 there and pinv drops them, even when the two graphs'
  values differ (Shrikhande against the 4 x 4 rook's graph): whether such a pair is separated
  by the walk part then depends on whether rounding moves those coordinates at all. Without
  the ego confinement the window's vertices beyond the neighbourhood, and without the weights
  the starts drawn once more than others, left a spread that hid differences of 0.1 to 0.4
  four-cliques per vertex. Views of one fixed length are all alike on some graphs (C6
  against two triangles: every BFS view of C6 is the same matrix): the RP average is then
  exact, S = 0 and T^2 = 0 under the published convention although the two means differ;
  random lengths keep a spread. A BFS view is a vertex's neighbourhood laid out by distance,
  so f sees cycles, cliques and the links between neighbourhoods directly; the orders'
  distribution depends only on the graph, so the average is invariant in expectation, and far
  fewer draws than pi-SGD's n! relabelings cover it, which makes the average of
  ``eval_samples`` views sharp. Measured on the built-in families
  (docs/experiments/pairs.md), it separates every CSL, basic and regular pair that rp-gin
  misses, at a fraction of rp-gin's cost; with the walk part it separates the 20 strongly regular pairs
  where the MLP alone separated 4.
"""
import math
from typing import Optional

import torch
from torch import nn

from rpfast.nn import (GIN, RPGIN, Concat, Exact, KAry, Oriented, PiSGD, RelationalPooling, RootedRP, RootWalks,
                       VecMLP)

__all__ = ["MODELS", "ORIENTATIONS", "DEFAULT_LAYERS", "DEFAULT_TRAIN_SAMPLES", "build_model", "check_model_settings",
           "check_graph_sizes", "rooted_roots", "rooted_work", "rooted_sizes", "CAPTURABLE_MODELS", "STACKED_MODELS",
           "rooted_hash"]

MODELS = ("oriented", "rp-gin", "kary", "exact", "gin")
ORIENTATIONS = ("bfs", "dfs")
#: layers of f when ``layers`` is not given: GIN layers, or hidden layers of the MLP
DEFAULT_LAYERS = {"gin": 6, "rp-gin": 6, "kary": 2, "exact": 2, "oriented": 2}
#: relabelings (k-subsets, orders) per graph in a training step when ``train_samples`` is not
#: given: a sharper gradient for the cheap MLP views; one for rp-gin, whose GIN costs more
DEFAULT_TRAIN_SAMPLES = {"gin": 1, "rp-gin": 1, "kary": 16, "exact": 1, "oriented": 8}
#: the models whose training step a CUDA graph can replay (``--cuda-graphs``): the others
#: compute orders, subsets or roots on the host at every step (rpfast.experiments.step_graphs)
CAPTURABLE_MODELS = ("gin", "rp-gin")
#: the models ``rpfast pairs`` trains many pairs at once, as one stack of their replicas
#: (:mod:`rpfast.experiments.pairs.batched`); the others train pair by pair
STACKED_MODELS = ("oriented",)
#: the oriented model's shortest view when ``min_k`` is not given, as a fraction of k
SHORTEST_VIEW = 0.75
#: positions the oriented model's walk part reads when the pair's largest degree is not given
#: (the start and up to 19 neighbours); given, the walk part reads 1 + that degree positions,
#: the start's whole neighbourhood (at most k; cost grows as the cube of the window)
WALK_WINDOW = 20
#: gates of the walk part, all confined to the start's ego network
WALK_CHANNELS = 2
#: the rooted part (:class:`~rpfast.nn.rp.RootedRP`): width, rounds (the first round in which
#: rooted refinement tells the CFI pairs over small treewidth-2 bases apart is the sixth to
#: ninth; larger bases need more: with two roots, 12 rounds lost the 4-rung ladder), and root
#: sets per graph in a training step, where only its read-out learns (its cost; eval mode
#: averages over all of them)
ROOTED_HIDDEN, ROOTED_LAYERS, ROOTED_TRAIN_ROOTS = 8, 16, 1
#: the cost of a row of the rooted rounds beside its neighbour sum, in neighbours: a row's sum
#: adds degree + 1 rows of p (D values each), its two D x D products and D cosines about 36 rows'
#: worth at width 8 (counted: 2 * 64 multiply-adds and 8 cosines of 17 operations; measured with
#: one thread on 40-vertex regular graphs of degree 3 to 27: 34 to 35)
ROW_COST_DEGREES = 36
#: the work of the rooted part's eval pass that fixes how many roots it marks
#: (:func:`rooted_roots`, :func:`rooted_work`): 2^18 rows on graphs of degree ROOT_BUDGET_DEGREE,
#: which allows three roots up to 36 vertices on sparse graphs (34 at degree 15), two up to 80 on
#: those of degree 5 or less (75 at degree 15), one above. Counting rows alone (2^18 of them)
#: gave three roots to every graph of up to 36 vertices: the strongly regular pairs of 36
#: vertices (degree 15) then took about a third of a BREC-shaped run, 25 to 30 s a pair, for a third root that
#: the walk part's clique counts made unneeded there
ROOT_BUDGET_DEGREE = 5
ROOT_WORK_BUDGET = (1 << 18) * (ROOT_BUDGET_DEGREE + ROW_COST_DEGREES)
#: the most roots the rooted part marks
MAX_ROOTED_ROOTS = RootedRP.MAX_ROOTS


def rooted_work(n: int, roots: int, degree: int) -> int:
    """The work of the rooted part's exact eval average on a graph of ``n`` vertices and largest
    degree ``degree`` with ``roots`` marked vertices: C(n, roots) * n rows of
    ``degree + ROW_COST_DEGREES`` each (:data:`ROOT_WORK_BUDGET`'s unit)."""
    for name, value, least in (("n", n, 1), ("roots", roots, 1), ("degree", degree, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(f"{name} must be an integer of at least {least}, got {value!r}")
    if degree >= n:  # more roots than vertices is allowed: C(n, roots) = 0 sets, no work
        raise ValueError(f"a graph on n = {n} vertices has largest degree at most n - 1, got {degree}")
    return math.comb(n, roots) * n * (degree + ROW_COST_DEGREES)


def rooted_roots(n: int, degree: int) -> int:
    """The roots the oriented model's rooted part marks on graphs of ``n`` vertices and largest
    degree ``degree``: the most, up to :data:`MAX_ROOTED_ROOTS`, whose exact eval average
    (:func:`rooted_work`) fits :data:`ROOT_WORK_BUDGET`; at least one."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive number of vertices, got {n!r}")
    if isinstance(degree, bool) or not isinstance(degree, int) or not 0 <= degree < n:
        raise ValueError(f"degree must be the graphs' largest degree, an integer from 0 to n - 1 = {n - 1}, "
                         f"got {degree!r}")
    return max([1] + [k for k in range(2, MAX_ROOTED_ROOTS + 1) if rooted_work(n, k, degree) <= ROOT_WORK_BUDGET])


def rooted_sizes(degree: int) -> dict:
    """``{roots: the largest n}``, for 3 and 2 roots: the largest graphs of largest degree
    ``degree`` on which the rooted part marks that many (:func:`rooted_roots`)."""
    return {k: max([n for n in range(max(k, degree + 1), 1000) if rooted_roots(n, degree) == k] or [0])
            for k in (3, 2)}


def rooted_hash(seed: int) -> RootedRP:
    """The rooted part's fixed random rounds for every pair of ``seed`` (its input map, marker and
    rounds; ``learn_rounds=False``: they never train, only each pair's read-out does), drawn from
    their own stream of the seed (pairs draw theirs from ``seed * 1_000_003 + index``)."""
    state = torch.random.get_rng_state()
    try:
        torch.manual_seed(seed * 1_000_003 + HASH_STREAM)
        return RootedRP(1, ROOTED_HIDDEN, ROOTED_LAYERS, 1, train_roots=ROOTED_TRAIN_ROOTS, learn_rounds=False)
    finally:
        torch.random.set_rng_state(state)


#: the offset of :func:`rooted_hash`'s stream among a seed's (pair indices stay below it)
HASH_STREAM = 1_000_002
#: Above this many vertices ``rpfast pairs`` warns that the oriented model's rooted part is slow.
SLOW_ROOTED_NODES = 1000


def check_model_settings(model: str, k: int, orientation: str, ridge: float, min_k: Optional[int] = None) -> None:
    """ValueError for a model name or a combination the models cannot run."""
    if model not in MODELS:
        raise ValueError(f"unknown model {model!r}: choose from {', '.join(MODELS)}")
    if orientation not in ORIENTATIONS:
        raise ValueError(f"unknown orientation {orientation!r}: choose from {', '.join(ORIENTATIONS)}")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")
    if min_k is not None and (isinstance(min_k, bool) or not isinstance(min_k, int) or not 1 <= min_k <= k):
        raise ValueError(f"min_k must be an integer from 1 to k = {k}, got {min_k!r}")
    if model == "exact" and ridge <= 0:
        raise ValueError("model exact is deterministic and exactly invariant: its D matrix has covariance 0 and "
                         "T2 = 0 under the published convention; give --ridge EPS (a separate mode)")


def check_graph_sizes(model: str, sizes) -> Optional[str]:
    """Before a run: ValueError when ``model`` cannot take graphs of these sizes (exact above
    n = 11); a warning text when it will be very slow (exact above n = 8: n! orders per graph
    for every embedding and training step; oriented above :data:`SLOW_ROOTED_NODES`: its rooted
    part visits every vertex as a root in eval, n^2 work per embedding); else None."""
    if not sizes:
        return None
    largest = max(sizes)
    if model == "oriented" and largest > SLOW_ROOTED_NODES:
        return (f"model oriented's rooted part visits each of the {largest:,} vertices as a root in every eval pass: "
                "time grows with n^2 (a pair of 1,500 vertices took about 3 minutes on 2 cores; memory stays "
                "bounded)")
    if model != "exact":
        return None
    if largest > Exact.MAX_NODES:
        raise ValueError(f"model exact averages over all n! orders: a pair on {largest} vertices is above its "
                         f"{Exact.MAX_NODES}; use oriented, rp-gin or kary")
    if largest > 8:
        return (f"model exact evaluates f on {math.factorial(largest):,} orders per graph for each of the pair's "
                f"embeddings and training steps ({largest} vertices): expect hours per pair")
    return None


def build_model(settings, n: int, generator: Optional[torch.Generator] = None,
                max_degree: Optional[int] = None) -> nn.Module:
    """A fresh model of ``settings.model`` for graphs on ``n`` vertices (weights from torch's
    global seed, relabelings from ``generator``). ``settings`` is a
    :class:`~rpfast.experiments.pairs.protocol.PairsSettings`; its output is ``[B, output_dim]``.
    ``max_degree``, the largest degree of the graphs, sizes the oriented model's walk window
    (``1 + max_degree`` positions, at most k; None: ``WALK_WINDOW``) and its rooted part's roots
    (:func:`rooted_roots`; None: as for the densest graph, degree n - 1)."""
    model, out = settings.model, settings.output_dim
    layers = settings.layers or DEFAULT_LAYERS[model]
    samples = dict(train_samples=settings.train_samples or DEFAULT_TRAIN_SAMPLES[model],
                   eval_samples=settings.eval_samples)
    if model == "gin":
        return GIN(1, settings.hidden, layers, out)
    if model == "rp-gin":
        return RPGIN(1, settings.hidden, layers, out, id_dim=n, generator=generator,
                     strategy=PiSGD(**samples))
    if model == "exact":
        if n > Exact.MAX_NODES:
            raise ValueError(f"model exact averages over all n! relabelings: graphs on {n} vertices are above its "
                             f"{Exact.MAX_NODES}")
        strategy, k = Exact(n), n
    else:
        k = min(settings.k, n)
        if model == "kary":
            strategy = KAry(k, subsets="sample", order="random", **samples)
        else:
            shortest = min(settings.min_k or math.ceil(SHORTEST_VIEW * k), k)
            strategy = Oriented(settings.orientation, k, starts="balanced", min_size=shortest, **samples)
            window = min(WALK_WINDOW if max_degree is None else max(1, max_degree + 1), k)
            rooted = out // 4 if out >= 8 else 0
            views = RelationalPooling(_oriented_f(k, window, settings.hidden, out, layers, rooted), strategy,
                                      generator=generator, use_edge_attr=False)
            if not rooted:
                return views
            return Concat(views, RootedRP(1, ROOTED_HIDDEN, ROOTED_LAYERS, rooted, train_roots=ROOTED_TRAIN_ROOTS,
                                          generator=generator, learn_rounds=False,
                                          roots=rooted_roots(n, n - 1 if max_degree is None else max_degree)))
    f = VecMLP(k, 1, 1, settings.hidden, out, layers)
    return RelationalPooling(f, strategy, generator=generator, use_edge_attr=False)


def _oriented_f(k: int, window: int, hidden: int, out: int, layers: int, rooted: int = 0) -> nn.Module:
    """The oriented model's f on a view, for the ``out - rooted`` output coordinates the rooted
    part leaves: an MLP on the view in ``out // 8`` of them (at least one from 4 up), walk counts
    in the first ``window`` positions in the rest (the walk part alone below 4 outputs)."""
    if out - rooted < 4:
        return RootWalks(k, 1, 1, hidden, out - rooted, window=window, channels=WALK_CHANNELS,
                         ego_channels=WALK_CHANNELS)
    mlp = max(1, out // 8)
    walks = RootWalks(k, 1, 1, hidden, out - rooted - mlp, window=window, channels=WALK_CHANNELS,
                      ego_channels=WALK_CHANNELS)
    return Concat(walks, VecMLP(k, 1, 1, hidden, mlp, layers))
