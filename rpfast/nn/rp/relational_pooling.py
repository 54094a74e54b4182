"""RelationalPooling: make any permutation-sensitive f invariant by averaging over relabelings."""
import inspect
from typing import Optional

import torch
from torch import Tensor, nn

from rpfast._uploads import upload
from rpfast._validation import check_memory, check_sizes, index_tensor, require_flag, require_tensor
from rpfast.data import GraphBatch
from rpfast.nn.graph_input import read_graph_input
from rpfast.nn.rp.encoders import _Layout
from rpfast.nn.rp.pisgd import PiSGD
from rpfast.nn.rp.strategies import Exact, KAry, Strategy
from rpfast.ops.subsets import Prune
from rpfast.ops import permute_adjacency, permute_nodes
from rpfast.ops._registry import compiling
from rpfast.nn._unsupported import NotScriptable

__all__ = ["RelationalPooling"]


def _positional_arity(f, most: int) -> int:
    """How many positional arguments ``f`` (a module's forward or a function) takes, at most
    ``most`` (``most`` for ``*args``; 2 when the signature cannot be read)."""
    target = f.forward if isinstance(f, nn.Module) else f
    try:
        parameters = inspect.signature(target).parameters.values()
    except (TypeError, ValueError):  # builtins without a signature
        return 2
    if any(p.kind == p.VAR_POSITIONAL for p in parameters):
        return most
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return max(1, min(len(positional), most))


class RelationalPooling(NotScriptable, nn.Module):
    r"""Relational Pooling (Murphy et al. 2019, eq. 1-5): average a permutation-sensitive f
    over the relabelings a :class:`~rpfast.nn.rp.Strategy` yields.

    Joint RP (``mode="joint"``, eq. 1) relabels rows and columns of the adjacency together:

    .. math::
        \bar f(G) = \sum_{p} w_{b,p}\, f\big(A_{\pi_p,\pi_p}, X_{\pi_p}\big)

    where :math:`\pi_p, w_{b,p}` come from ``strategy`` (:class:`~rpfast.nn.rp.Exact`: all
    :math:`n!` with weight :math:`1/n!`; :class:`~rpfast.nn.rp.PiSGD`: uniform samples;
    :class:`~rpfast.nn.rp.KAry`: k-vertex subgraphs; :class:`~rpfast.nn.rp.Oriented`: DFS/BFS
    orders). All relabelings of a batch go to f in one call (in blocks for ``Exact``).

    Devices: the strategies enumerate, traverse and draw on the CPU (from the graph sizes and
    structure); the relabelings move to the input's device, where the gathers run (C++ kernels
    on the CPU, their torch-composed form elsewhere), and f runs where it lives.

    Separate RP (``mode="separate"``, eq. 2) takes a bipartite tensor ``A [n_r, n_c, C]`` (rows
    and columns are different vertex sets, e.g. users x items) and relabels rows and columns
    independently:

    .. math::
        \bar f(A) = \sum_{p, q} w^{r}_{b,p}\, w^{c}_{b,q}\, f\big(A_{\pi_p,\sigma_q}\big)

    with row relabelings :math:`\pi_p` and column relabelings :math:`\sigma_q` from a pair of
    strategies (one strategy serves both). ``Exact``, ``PiSGD`` and ``KAry`` with
    ``prune="none"`` apply (k_r, k_c for k-ary: ``(KAry(k_r), KAry(k_c))``); orientations and
    pruning need a graph and do not. Rows and columns are paired every way (the double sum),
    except when both strategies are ``PiSGD``: then the p-th row sample goes with the p-th column
    sample, ``P`` independent pairs per call (an unbiased estimate, as in joint pi-SGD).

    Args:
        f: joint: called as ``f(adj [M, K, K, C], x [M, K, F], mask [M, K], num_nodes [M])``
            with ``M = B * P`` relabeled graphs, ``mask`` true on the real vertices (the first
            ``num_nodes`` positions; the rest are zero padding). Separate: called as
            ``f(adj [M, K_r, K_c, C], None, (row_mask, col_mask), (num_rows, num_cols))``.
            An f with fewer positional parameters gets the first two or three. Returns
            ``[M, ...]``. The encoders of :mod:`rpfast.nn.rp` take both forms.
        strategy: the relabelings (a pair ``(rows, columns)`` for separate RP); None means
            pi-SGD, one relabeling per graph in training and five averaged in evaluation, over
            ``K`` positions: an rpfast encoder's own ``K`` (``PiSGD(max_nodes=K)``), else the width
            of the dense input (``n_max`` of a graph batch, which varies between batches).
        mode: ``"joint"`` or ``"separate"``.
        generator: CPU ``torch.Generator`` for reproducible sampling.
        use_edge_attr: for graph input, whether edge features become adjacency channels (below).

    Shapes (joint): a graph in any form of :func:`~rpfast.nn.graph_input.read_graph_input` (a
    :class:`~rpfast.data.GraphBatch`, a PyG ``Data``/``Batch``, ``forward(x [N, F], edge_index [2, E],
    batch [N] = None, edge_attr [E, D] = None)`` in PyG's order, or ``forward(x or None, graph)``),
    or ``forward(adj [B, n, n(, C)], x [B, n(, F)], num_nodes [B])`` for dense padded input (told
    apart by the floating ``adj`` of dimension 3 or 4). A graph becomes
    ``adj = GraphBatch.dense_adj()``: channel 0 is the edge indicator and, with
    ``use_edge_attr=True`` (the default), channels ``1..D`` hold the edge features ``edge_attr
    [E, D]``, so f is built for ``1 + D`` channels; with ``use_edge_attr=False`` f sees the
    indicator alone (``C = 1``). Node features (``graph.x``, or the ``x`` passed beside the graph)
    are f's second input ``[.., K, F]``, never adjacency channels. Dense input is used as given.
    (separate): ``forward(adj [B, n_r, n_c, C], num_nodes=(num_rows [B], num_cols [B]))``, sizes
    defaulting to the full ``n_r, n_c``. Returns ``[B, ...]``.
    """

    def __init__(self, f: nn.Module, strategy=None, generator: Optional[torch.Generator] = None, *,
                 mode: str = "joint", use_edge_attr: bool = True):
        super().__init__()
        if not callable(f):
            raise TypeError(f"f must be a module or function, got {type(f).__name__}")
        if mode not in ("joint", "separate"):
            raise ValueError(f"mode must be 'joint' or 'separate', got {mode!r}")
        if strategy is not None:
            pair = strategy if mode == "separate" and isinstance(strategy, (tuple, list)) else (strategy,)
            if len(pair) != (2 if len(pair) > 1 else 1) or not all(isinstance(s, Strategy) for s in pair):
                raise TypeError("strategy must be an rpfast.nn.rp Strategy (Exact, PiSGD, KAry, Oriented)"
                                + (" or a (rows, columns) pair of them" if mode == "separate" else "")
                                + f", got {strategy!r}")
            if mode == "separate":
                for s in pair:
                    _check_separable(s)
                strategy = tuple(pair) * (2 // len(pair))
                if all(isinstance(s, PiSGD) for s in strategy) and (
                        strategy[0].train_samples, strategy[0].eval_samples) != (strategy[1].train_samples,
                                                                                 strategy[1].eval_samples):
                    raise ValueError("separate pi-SGD pairs the p-th row sample with the p-th column sample: "
                                     "give both PiSGD strategies the same train_samples and eval_samples")
        elif mode == "separate":
            raise ValueError("mode='separate' needs a strategy (or a (rows, columns) pair): Exact, PiSGD or KAry")
        elif isinstance(getattr(f, "layout", None), _Layout) and not f.layout.bipartite:
            strategy = PiSGD(f.layout.rows)  # an rpfast encoder sees K positions whatever the batch's n_max
        self.f = f
        self.mode = mode
        self.strategy = strategy
        if generator is not None and not isinstance(generator, torch.Generator):
            raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
        self.generator = generator
        self.use_edge_attr = require_flag(use_edge_attr, "use_edge_attr")
        self._arity = max(2, _positional_arity(f, 4))

    def forward(self, adj, x: Optional[Tensor] = None, num_nodes=None, edge_attr: Optional[Tensor] = None) -> Tensor:
        """``forward(adj, x, num_nodes)`` (dense), ``forward(graph)``, ``forward(x, edge_index,
        batch=None, edge_attr=None)`` or ``forward(x, graph)``: see the class docstring."""
        if self.mode == "separate":
            if edge_attr is not None:
                raise TypeError("separate RP takes forward(adj, num_nodes=(num_rows, num_cols)): no edge_attr")
            return self._forward_separate(adj, x, num_nodes)
        dense = _is_dense(adj)
        if dense and edge_attr is not None:
            raise TypeError("dense RP input forward(adj, x, num_nodes) holds edge features as adjacency channels: "
                            "no edge_attr")
        if compiling():
            return self._forward_compiled(adj, x, num_nodes)
        needs_edges = (self.strategy or PiSGD()).needs_edges
        graph, adj, x = (self._dense_inputs(adj, x, num_nodes, needs_edges) if dense
                         else self._graph_inputs(adj, x, num_nodes, edge_attr, needs_edges))
        strategy = _sized(self.strategy or PiSGD(), x.shape[1])  # default: one sample to train, five to evaluate
        total = None
        for perms, weights in strategy.relabel_chunks(graph, self.training, self.generator):
            perms = upload(perms, adj.device)  # strategies draw and enumerate on the CPU
            adj_p = _relabel_adjacency(adj, perms, self.use_edge_attr).flatten(0, 1)  # [M, K, K(, C)]
            x_p = permute_nodes(x, perms).flatten(0, 1)  # [M, K(, F)]
            mask = (perms >= 0).flatten(0, 1)
            out = self.f(*(adj_p, x_p, mask, mask.sum(dim=1))[:self._arity])
            total = _accumulate(total, out, weights)
        return total

    def _forward_compiled(self, adj, x, num_nodes) -> Tensor:
        """Joint RP under ``torch.compile``: the strategy relabels the dense input in one op with
        static output shapes (:meth:`PiSGD.relabel_dense`), and f is traced. Other strategies
        yield data-dependent shapes (Exact's blocks, k-subsets, traversal orders): they raise
        here; compile their f instead."""
        strategy = self.strategy or PiSGD()
        if not (_is_dense(adj) and isinstance(x, Tensor) and num_nodes is not None):
            raise NotImplementedError("torch.compile of RelationalPooling takes dense input forward(adj [B, n, n(, C)], "
                                      "x [B, n(, F)], num_nodes [B]) (a graph object's dense view has a "
                                      "data-dependent size)")
        adj_p, x_p, mask, weights = strategy.relabel_dense(adj, x, num_nodes, self.training)
        out = self.f(*(adj_p, x_p, mask, mask.sum(dim=1))[:self._arity])
        return _accumulate(None, out, weights)

    def _forward_separate(self, adj, x, num_nodes) -> Tensor:
        if x is not None:
            raise TypeError("separate RP takes forward(adj [B, n_r, n_c, C], num_nodes=(num_rows, num_cols)): "
                            "no node features (put them in the edge channels)")
        require_tensor(adj, "adj")
        if adj.dim() not in (3, 4):
            raise ValueError(f"adj must have shape [B, n_r, n_c, C] or [B, n_r, n_c], got {tuple(adj.shape)}")
        B, n_r, n_c = adj.shape[:3]
        if num_nodes is None:
            num_nodes = (torch.full((B,), n_r), torch.full((B,), n_c))
        if not isinstance(num_nodes, (tuple, list)) or len(num_nodes) != 2:
            raise TypeError("separate RP's num_nodes must be a pair (num_rows [B], num_cols [B])")
        sides = [_sizes_within(sizes, B, n, name).cpu() for sizes, n, name in
                 zip(num_nodes, (n_r, n_c), ("num_rows", "num_cols"))]
        graphs = [GraphBatch(torch.zeros(2, 0, dtype=torch.int64), num_nodes=sizes) for sizes in sides]
        row_strategy, col_strategy = self.strategy
        paired = isinstance(row_strategy, PiSGD) and isinstance(col_strategy, PiSGD)
        total = None
        for rows, row_w in row_strategy.relabel_chunks(graphs[0], self.training, self.generator):
            for cols, col_w in col_strategy.relabel_chunks(graphs[1], self.training, self.generator):
                if paired:  # sample p of the rows with sample p of the columns
                    rows_p, cols_p, weights = rows, cols, row_w
                else:  # every pair: [B, P_r * P_c, K]
                    P_r, P_c = rows.shape[1], cols.shape[1]
                    rows_p = rows.unsqueeze(2).expand(-1, -1, P_c, -1).flatten(1, 2)
                    cols_p = cols.unsqueeze(1).expand(-1, P_r, -1, -1).flatten(1, 2)
                    weights = (row_w.unsqueeze(2) * col_w.unsqueeze(1)).flatten(1)
                rows_p, cols_p = rows_p.to(adj.device), cols_p.to(adj.device)
                adj_p = _permute_bipartite(adj, rows_p, cols_p).flatten(0, 1)
                masks = ((rows_p >= 0).flatten(0, 1), (cols_p >= 0).flatten(0, 1))
                counts = tuple(m.sum(dim=1) for m in masks)
                out = self.f(*(adj_p, None, masks, counts)[:self._arity])
                total = _accumulate(total, out, weights)
        return total

    def _graph_inputs(self, data, edge_index, batch, edge_attr, needs_edges: bool):
        """``(the strategy's graph on the CPU, the graph, x [B, n, F])`` of a graph input: the
        batch's host copy (:meth:`GraphBatch.host`) when the strategy reads edges, else a batch of
        its host-side sizes alone. The graph's adjacency is relabeled from its edges
        (:func:`_relabel_adjacency`), never made dense."""
        node_x, graph = read_graph_input(type(self).__name__, data, edge_index, batch, edge_attr,
                                         training=self.training)
        if node_x is None:
            raise ValueError("RelationalPooling needs node features x (graph.x, or x beside the graph; a column of "
                             "ones for featureless graphs)")
        if node_x.device != graph.device:
            raise ValueError(f"x is on {node_x.device} but the graph is on {graph.device}; put them on one device")
        x = graph.dense_x() if node_x is graph.x else _pad_nodes(node_x, graph)
        adj = graph
        # the strategies enumerate, traverse and draw on the CPU
        if not needs_edges:
            return _sizes_batch(graph.host_ptr.diff()), adj, x
        return graph.host(), adj, x

    def _dense_inputs(self, adj, x, num_nodes, needs_edges: bool):
        """``(the strategy's graph on the CPU, adj, x)`` of a dense input: the graph of
        adj's nonzeros when the strategy reads edges, else a batch of the sizes alone. Sizes given
        on the CPU (a tensor or a list) are checked there, so a step on a device reads nothing
        back; sizes on the device are read once."""
        if x is None or num_nodes is None:
            raise TypeError("dense RP input is forward(adj [B, n, n(, C)], x [B, n(, F)], num_nodes [B]): "
                            "x and num_nodes are missing")
        self._check_dense(adj, x)
        sizes = _sizes_within(num_nodes, adj.shape[0], adj.shape[1], "num_nodes").cpu()
        if not needs_edges:
            return _sizes_batch(sizes), adj, x
        return _graph_of_dense(adj.detach().cpu(), sizes), adj, x

    @staticmethod
    def _check_dense(adj, x) -> None:
        """Check that ``adj [B, n, n(, C)]`` and ``x [B, n(, F)]`` agree."""
        for name, value in (("adj", adj), ("x", x)):
            require_tensor(value, name)
        if x.device != adj.device:
            raise ValueError(f"x is on {x.device} but adj is on {adj.device}; put them on one device")
        if adj.dim() not in (3, 4) or adj.shape[1] != adj.shape[2]:
            raise ValueError(f"adj must have shape [B, n, n, C] or [B, n, n], got {tuple(adj.shape)}")
        B, n = adj.shape[:2]
        if x.dim() not in (2, 3) or tuple(x.shape[:2]) != (B, n):
            raise ValueError(f"x must have shape [B={B}, n={n}, F] to match adj, got {tuple(x.shape)}")


def _sizes_batch(sizes: Tensor) -> GraphBatch:
    """A CPU batch of graphs of ``sizes`` vertices and no edges: all a strategy that reads only
    the sizes needs (PiSGD, Exact, KAry without pruning)."""
    return GraphBatch(torch.zeros(2, 0, dtype=torch.int64), num_nodes=sizes)


def _is_dense(adj) -> bool:
    """A floating ``[B, n, n(, C)]`` tensor: the dense form ``forward(adj, x, num_nodes)``."""
    return isinstance(adj, Tensor) and adj.dim() in (3, 4) and (adj.dtype.is_floating_point or adj.dtype.is_complex)


def _pad_nodes(x: Tensor, graph: GraphBatch) -> Tensor:
    """``[B, n_max, F]``: node rows ``x [N, F]`` (or ``[N]``) padded per graph, zero rows at padding."""
    require_tensor(x, "x")
    x = x.unsqueeze(-1) if x.dim() == 1 else x
    if x.dim() != 2 or x.shape[0] != graph.total_nodes:
        raise ValueError(f"x must have shape [N={graph.total_nodes}, F] to match the graph, got {tuple(x.shape)}")
    out = x.new_zeros((graph.num_graphs, graph.n_max, x.shape[1]))
    out[graph.batch, graph.local_index] = x
    return out


def _sizes_within(sizes, B: int, n: int, name: str) -> Tensor:
    """``sizes`` as ``[B]`` int64, each in ``0..n``."""
    sizes = index_tensor(sizes, name)
    check_sizes(sizes, name)
    if sizes.numel() != B:
        raise ValueError(f"{name} has {sizes.numel()} entries but adj holds {B} graphs")
    if B and int(sizes.max()) > n:
        b = int(torch.nonzero(sizes > n)[0, 0])
        raise ValueError(f"{name}[{b}] = {int(sizes[b])} exceeds the n = {n} positions of adj")
    return sizes


def _sized(strategy: Strategy, width: int) -> Strategy:
    """``strategy``, or for a PiSGD declared without a size, the same counts over ``width``
    positions (the dense input's width, so f always sees it)."""
    if strategy.size is not None:
        return strategy
    return PiSGD(width, train_samples=strategy.train_samples, eval_samples=strategy.eval_samples)


def _check_separable(strategy: Strategy) -> None:
    """Separate RP relabels vertex sets without edges: only size-driven strategies apply."""
    if isinstance(strategy, PiSGD) and strategy.size is None:
        raise ValueError("separate RP needs the row and column widths from its strategies: give PiSGD max_nodes or k")
    if isinstance(strategy, (Exact, PiSGD)) or (isinstance(strategy, KAry) and strategy.prune == Prune.NONE):
        return
    raise ValueError(f"separate RP relabels rows and columns as vertex sets without edges, so {strategy!r} "
                     "does not apply: use Exact, PiSGD or KAry with prune='none'")


def _accumulate(total: Optional[Tensor], out, weights: Tensor) -> Tensor:
    """``total + sum_p w[b, p] out[b * P + p]`` for a block of ``P`` relabelings per graph.

    The average is taken in floating point: an integer or bool ``out`` (a count, a flag)
    becomes the default float dtype first, since weights such as ``1/n!`` cast to an integer
    dtype are 0."""
    B, P = weights.shape
    if not isinstance(out, Tensor):
        raise TypeError(f"f must return a tensor [M, ...] with one row per relabeled graph, got {type(out).__name__}")
    if out.dim() == 0 or out.shape[0] != B * P:
        raise ValueError(f"f must return a tensor [M, ...] with one row per relabeled graph (M = {B * P}: {B} "
                         f"graphs x {P} relabelings), got shape {tuple(out.shape)}")
    if not (out.is_floating_point() or out.is_complex()):
        out = out.to(torch.get_default_dtype())
    out = out.reshape(B, P, *out.shape[1:])
    w = upload(weights, out.device, out.dtype).reshape(B, P, *([1] * (out.dim() - 2)))
    pooled = (out * w).sum(dim=1)
    return pooled if total is None else total + pooled


def _permute_bipartite(adj: Tensor, rows: Tensor, cols: Tensor) -> Tensor:
    """``out[b, p, i, j] = adj[b, rows[b, p, i], cols[b, p, j]]`` (0 where either index is -1):
    ``[B, P, K_r, K_c(, C)]`` with independent row and column relabelings (gather convention)."""
    squeeze = adj.dim() == 3
    adj = adj.unsqueeze(-1) if squeeze else adj
    B, P, K_r = rows.shape
    K_c, C = cols.shape[2], adj.shape[-1]
    picked = adj[torch.arange(B, device=adj.device).view(B, 1, 1), rows.clamp(min=0)]  # [B, P, K_r, n_c, C]
    index = cols.clamp(min=0).view(B, P, 1, K_c, 1).expand(B, P, K_r, K_c, C)
    out = picked.gather(3, index)
    keep = ((rows >= 0).unsqueeze(3) & (cols >= 0).unsqueeze(2)).unsqueeze(-1)
    out = out * keep.to(out.dtype)
    return out.squeeze(-1) if squeeze else out


def _relabel_adjacency(adj, perms: Tensor, edge_features: bool) -> Tensor:
    """``[B, P, K, K, C]``: ``permute_adjacency(adj, perms)`` of a dense ``adj``, or of a
    :class:`GraphBatch`'s ``dense_adj()`` (channel 0 alone without ``edge_features``), which is
    built from its edges instead (:func:`_permute_graph_adjacency`)."""
    if isinstance(adj, GraphBatch):
        return _permute_graph_adjacency(adj, perms, edge_features)
    return permute_adjacency(adj, perms)


def _permute_graph_adjacency(graph: GraphBatch, perms: Tensor, edge_features: bool) -> Tensor:
    r"""``permute_adjacency(graph.dense_adj(), perms)`` (channel 0 alone without
    ``edge_features``) written edge by edge: with :math:`q_{bp}(v)` vertex v's position in
    relabeling :math:`\pi_{bp}` (-1 where it is left out), each edge (u, v) of graph b with values
    :math:`a_{uv}` (:meth:`GraphBatch.adjacency_values`) adds

    .. math:: \text{out}[b, p, q_{bp}(u), q_{bp}(v), :] \mathrel{+}= a_{uv}
        \quad \text{where } q_{bp}(u), q_{bp}(v) \ge 0,

    in edge order (multi-edges add up as in ``dense_adj``, bit for bit). It writes
    ``B * P * K * K * C`` entries where the dense view writes ``B * n_max^2 * C``: the largest graph of
    a batch sets ``n_max`` (a molecule of 130 atoms makes 128 molecules' view 100 MB, while their
    20-vertex DFS blocks take 2 MB). Differentiable in ``edge_attr``; reads nothing back to the host."""
    B, P, K = perms.shape
    values = graph.adjacency_values(edge_features)  # [E, C]
    C = values.shape[1]
    check_memory(B * P * K * K * C * values.element_size(), f"the relabeled adjacency [B={B}, P={P}, K={K}, K={K}, "
                 f"{C}]", "reduce the batch, the samples or k")
    slots = B * P * K * K
    out = torch.zeros((slots + 1, C), dtype=values.dtype, device=values.device)  # row `slots`: edges left out
    if graph.num_edges:
        # position[b, p, v] = i where perms[b, p, i] = v, -1 for vertices no relabeling holds
        # (column n_max collects the padding's -1 entries)
        n = graph.n_max
        position = torch.full((B, P, n + 1), -1, dtype=torch.int64, device=perms.device)
        position.scatter_(2, torch.where(perms >= 0, perms, n),
                          torch.arange(K, device=perms.device).expand(B, P, K).contiguous())
        position = position[:, :, :n]
        src, dst = graph.edge_index
        owner = graph.batch[src]
        row, col = position[owner, :, graph.local_index[src]], position[owner, :, graph.local_index[dst]]  # [E, P]
        block = owner.unsqueeze(1) * P + torch.arange(P, device=perms.device)
        slot = torch.where((row >= 0) & (col >= 0), (block * K + row) * K + col, slots)
        out.index_put_((slot.reshape(-1),), values.unsqueeze(1).expand(-1, P, -1).reshape(-1, C), accumulate=True)
    return out[:slots].reshape(B, P, K, K, C)


def _graph_of_dense(adj: Tensor, num_nodes: Tensor) -> GraphBatch:
    """The GraphBatch whose edges are the nonzero entries of a dense padded ``adj``."""
    B, n = adj.shape[:2]
    present = adj.detach().ne(0)
    if present.dim() == 4:
        present = present.any(dim=-1)
    inside = torch.arange(n, device=adj.device).unsqueeze(0) < num_nodes.unsqueeze(1)  # [B, n]
    b, i, j = torch.nonzero(present & inside.unsqueeze(2) & inside.unsqueeze(1), as_tuple=True)
    ptr = torch.cat([torch.zeros(1, dtype=torch.int64, device=adj.device), num_nodes.cumsum(0)])
    return GraphBatch(torch.stack([ptr[b] + i, ptr[b] + j]), ptr=ptr)
