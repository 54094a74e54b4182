"""The oriented strategy: poly-canonical DFS/BFS vertex orders (Murphy et al. 2019, Sec. 2.3.1)
from random, balanced or all start vertices, 1-WL colour orders, or RDKit's canonical atom order.
The strategy protocol (``Relabelings``, sample counts) is in :mod:`rpfast.nn.rp.strategies`."""
from typing import Optional

import torch
from torch import Tensor

from rpfast._validation import check_count
from rpfast.data import GraphBatch
from rpfast.datasets.molecules import canonical_order_from_mol
from rpfast.nn.rp.strategies import Relabelings, Strategy, _sample_counts, _uniform
from rpfast.ops import bfs_order, dfs_order, random_permutations, wl_order

__all__ = ["Oriented"]


class Oriented(Strategy):
    r"""Poly-canonical orientations (Sec. 2.3.1): depth- or breadth-first vertex orders.

    Args:
        method: ``"dfs"``, ``"bfs"``, ``"wl"`` (vertices sorted by their stable 1-WL colour,
            computed from the node features; ties broken by ``tiebreak``; only
            ``starts="random"``, where the sample counts are the numbers of tie-breaks) or
            ``"rdkit"`` (RDKit's canonical atom ranking, ``Chem.CanonicalRankAtoms``: one order
            per molecule, invariant to how the SMILES numbered the atoms up to symmetry; the
            graph must carry its molecules as ``smiles`` or ``mol``, one per graph, with atoms
            numbered as RDKit parses them, as ``batch_from_smiles`` and PyG's ``from_smiles``
            do).
        size: the ``K`` positions f sees: the first ``size`` vertices of each order (the paper's
            "random start, BFS/DFS until k vertices" when smaller than the graphs).
        starts: ``"random"`` (uniform start vertices, fresh each call: ``train_samples`` per graph
            in training, the average of ``eval_samples`` in eval mode), ``"balanced"`` (the same
            counts, the starts spread evenly: with ``P`` orders on ``n`` vertices every vertex
            starts ``P // n`` of them and ``P % n`` distinct random vertices one more, and the
            average weighs each order by ``1 / (m c)``, ``c`` the orders of its start and
            ``m = min(P, n)`` the starts drawn, so every start carries the same weight: the
            average has the expectation of ``"random"``'s, without the spread that comes from
            which starts were drawn (a stratified sample, exact over the starts when ``P >= n``)) or
            ``"all"`` (one order from every vertex: the full poly-canonical set, in both modes).
        tiebreak: which neighbour a traversal visits first: ``"random"`` (a fresh uniform ranking
            per order, so the distribution of orders does not depend on the vertex ids: RP stays
            invariant in expectation), ``"features"`` (vertices ranked by their feature rows,
            lexicographically; exactly invariant when a graph's feature rows are distinct) or
            ``"id"`` (vertex ids; depends on the labeling).
        train_samples, eval_samples: orders per graph with random or balanced starts in training
            (default 1) and in eval mode (default 5; 1 for ``"wl"`` with a deterministic
            ``tiebreak``, whose orders are all the same). ``starts="all"`` and ``"rdkit"`` fix
            the count and take neither.
        min_size: views of random length (DFS/BFS with random or balanced starts): each order keeps
            its first L vertices, L drawn uniformly from ``min_size..size`` per order (the rest
            is padding). The average then runs over every view length too: on graphs whose
            full-size views are all alike (a cycle, a disjoint union of cycles) the views still
            vary, so a sampled RP estimate keeps a spread to compare against. None: every view
            has ``size`` positions.

    Used by :class:`~rpfast.nn.rp.RPGNN`, an orientation must place every vertex: a ``size`` of
    at least the largest graph (a traversal restarts in every component, so it places them all).
    """

    def __init__(self, method: str, size: int, starts: str = "random", train_samples: Optional[int] = None,
                 eval_samples: Optional[int] = None, tiebreak: str = "random", min_size: Optional[int] = None):
        if method not in ("dfs", "bfs", "wl", "rdkit"):
            raise ValueError(f"method must be 'dfs', 'bfs', 'wl' or 'rdkit', got {method!r}")
        counted = train_samples is not None or eval_samples is not None
        if method == "wl" and starts != "random":
            raise ValueError("a WL orientation has no start vertex: use starts='random' (the sample counts are "
                             "tie-breaks)")
        sampled = starts in ("random", "balanced")
        if method == "rdkit" and (starts != "random" or counted or tiebreak != "random"):
            raise ValueError("method='rdkit' gives one canonical order per molecule: it takes no starts, "
                             "train_samples, eval_samples or tiebreak")
        if starts not in ("random", "balanced", "all"):
            raise ValueError(f"starts must be 'random', 'balanced' or 'all', got {starts!r}")
        if tiebreak not in ("random", "features", "id"):
            raise ValueError(f"tiebreak must be 'random', 'features' or 'id', got {tiebreak!r}")
        if starts == "all" and counted:
            raise ValueError("starts='all' implies the count (one order per vertex): it takes no train_samples or "
                             "eval_samples")
        self.method, self.starts, self.tiebreak = method, starts, tiebreak
        self.size = check_count(size, "size", minimum=1)
        if min_size is not None:
            if method not in ("dfs", "bfs") or not sampled:
                raise ValueError("min_size (views of random length) is for method='dfs' or 'bfs' with random or "
                                 "balanced starts")
            min_size = check_count(min_size, "min_size", minimum=1)
            if min_size > self.size:
                raise ValueError(f"min_size = {min_size} is above size = {self.size}")
        self.min_size = min_size
        if sampled and method != "rdkit":
            deterministic = method == "wl" and tiebreak != "random"
            self.train_samples, self.eval_samples = _sample_counts(train_samples, eval_samples, 1,
                                                                   1 if deterministic else 5)

    def relabel(self, graph, training, generator=None):
        if self.method == "rdkit":
            return _uniform(_fit(_rdkit_orders(graph), self.size))
        P = graph.n_max if self.starts == "all" else self.samples(training)
        ties = self._ranks(graph, P, generator)
        if self.method == "wl":
            if ties is None:
                ties = torch.arange(graph.n_max).expand(graph.num_graphs, P, -1)
            return _uniform(_fit(wl_order(graph, tiebreak=ties, x=graph.x).order, self.size))
        order_fn = dfs_order if self.method == "dfs" else bfs_order
        if self.starts != "all":
            start = "random" if self.starts == "random" else _balanced_starts(graph.num_nodes, P, generator)
            orders = order_fn(graph, start=start, tiebreak=ties, k=self.size, num_samples=P, generator=generator)
            if self.min_size is not None:
                lengths = torch.randint(self.min_size, self.size + 1, (*orders.shape[:2], 1), generator=generator)
                orders = orders.masked_fill(torch.arange(orders.shape[2]) >= lengths, -1)
            if self.starts == "balanced":
                return Relabelings(orders, _equal_start_weights(start, graph.n_max))
            return _uniform(orders)
        orders = order_fn(graph, start="all", tiebreak=ties, k=self.size)  # [B, n_max, K]: start p = vertex p
        valid = torch.arange(orders.shape[1]).unsqueeze(0) < graph.num_nodes.unsqueeze(1)
        weights = valid.to(torch.float64) / graph.num_nodes.clamp(min=1).unsqueeze(1)
        return Relabelings(torch.where(valid.unsqueeze(-1), orders, torch.full_like(orders, -1)), weights)

    def _ranks(self, graph: GraphBatch, P: int, generator) -> Optional[Tensor]:
        """Tie-break ranks ``[B, P, n_max]`` (None: by vertex id)."""
        if self.tiebreak == "id" or graph.n_max == 0:
            return None
        if self.tiebreak == "random":
            return random_permutations(graph.num_nodes, P, generator=generator)
        if graph.x is None:
            raise ValueError("tiebreak='features' needs node features x")
        keys = graph.dense_x().to(torch.float64).masked_fill(~graph.node_mask.unsqueeze(-1), float("inf"))
        order = torch.arange(graph.n_max).expand(graph.num_graphs, -1)
        for column in reversed(range(keys.shape[-1])):  # lexicographic: stable sorts, last column first
            order = order.gather(1, keys[..., column].gather(1, order).argsort(dim=1, stable=True))
        ranks = torch.empty_like(order).scatter_(1, order, torch.arange(graph.n_max).expand_as(order))
        return ranks.unsqueeze(1).expand(-1, P, -1).contiguous()

    def __repr__(self):
        if self.method == "rdkit":
            return f"Oriented('rdkit', size={self.size})"
        samples = (f", train_samples={self.train_samples}, eval_samples={self.eval_samples}"
                   if self.starts != "all" else "")
        shorter = "" if self.min_size is None else f", min_size={self.min_size}"
        return (f"Oriented({self.method!r}, size={self.size}, starts={self.starts!r}{samples}, "
                f"tiebreak={self.tiebreak!r}{shorter})")


def _balanced_starts(num_nodes: Tensor, P: int, generator) -> Tensor:
    """``[B, P]`` start vertices spread evenly: a uniformly random order ``sigma`` of each graph's
    ``n`` vertices, repeated (``start[b, p] = sigma[p mod n]``); -1 for an empty graph."""
    sigma = random_permutations(num_nodes, 1, generator=generator)[:, 0]  # [B, n_max]
    if sigma.shape[1] == 0:
        return torch.full((len(num_nodes), P), -1, dtype=torch.int64)
    slot = torch.arange(P).unsqueeze(0) % num_nodes.clamp(min=1).unsqueeze(1)
    return sigma.gather(1, slot)


def _equal_start_weights(starts: Tensor, n_max: int) -> Tensor:
    """``[B, P]`` weights that give every start vertex drawn in ``starts [B, P]`` (-1: none) the
    same total weight: a view whose start begins ``c`` of the graph's views, among ``m``
    distinct starts, weighs ``1 / (m c)`` (with :func:`_balanced_starts`, ``m = min(P, n)`` and
    ``c`` is ``P // n`` or ``P // n + 1``); 0 where there is no start."""
    B = starts.shape[0]
    real = starts >= 0
    slots = (torch.arange(B).unsqueeze(1) * max(1, n_max) + starts.clamp(min=0))[real]
    counts = torch.bincount(slots, minlength=B * max(1, n_max)).view(B, max(1, n_max))  # [B, n_max]
    views_of_start = counts.gather(1, starts.clamp(min=0)).to(torch.float64)
    distinct = (counts > 0).sum(dim=1, keepdim=True).to(torch.float64)
    return torch.where(real, 1.0 / (distinct * views_of_start).clamp(min=1.0), torch.zeros((), dtype=torch.float64))


def _fit(orders: Tensor, K: int) -> Tensor:
    """``orders [B, P, n]`` cut or -1 padded to ``[B, P, K]``."""
    out = torch.full((*orders.shape[:2], K), -1, dtype=torch.int64)
    width = min(K, orders.shape[2])
    out[:, :, :width] = orders[:, :, :width]
    return out


def _rdkit_orders(graph: GraphBatch) -> Tensor:
    """``[B, 1, n_max]`` RDKit canonical atom orders of the molecules ``graph`` carries."""
    extras = graph.__dict__.get("extras", {})
    key = next((k for k in ("mol", "smiles") if k in extras), None)
    if key is None:
        raise ValueError("Oriented('rdkit') needs the molecules: give the graph a 'smiles' or 'mol' attribute, "
                         "one per graph (batch_from_smiles and PyG's from_smiles set 'smiles')")
    mols = extras[key]
    mols = [mols] if isinstance(mols, str) or not isinstance(mols, (list, tuple)) else list(mols)
    if len(mols) != graph.num_graphs:
        raise ValueError(f"the graph carries {len(mols)} {key} entries for {graph.num_graphs} graphs")
    orders = canonical_order_from_mol(mols)
    atoms = (orders[:, 0] >= 0).sum(dim=1)
    if not torch.equal(atoms, graph.num_nodes):
        b = int(torch.nonzero(atoms != graph.num_nodes)[0, 0])
        raise ValueError(f"molecule {b} ({mols[b]!r}) has {int(atoms[b])} atoms but its graph has "
                         f"{int(graph.num_nodes[b])} vertices: the graph must hold RDKit's atoms in parse order")
    return orders
