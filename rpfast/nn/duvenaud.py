r"""Duvenaud et al.'s neural graph fingerprint convolution as in DeepChem's GraphConvModel, the
baseline of the RP paper's molecule experiments, and RP-Duvenaud (RP-GNN, eq. 3)."""
from typing import List, NamedTuple, Optional, Sequence, Tuple

import torch
from torch import Tensor, nn

from rpfast._uploads import upload
from rpfast._validation import check_count
from rpfast.data import GraphBatch
from rpfast.nn.graph_input import read_graph_input
from rpfast.nn.rp import PiSGD, RPGNN, Strategy
from rpfast.ops import gin_aggregate, graph_max, graph_sum, neighbour_max
from rpfast.nn._unsupported import NotScriptable

__all__ = ["DuvenaudConv", "Duvenaud", "RPDuvenaud"]


class DuvenaudConv(NotScriptable, nn.Module):
    r"""One graph convolution with a weight pair per atom degree (DeepChem ``GraphConv``):

    .. math:: h_i' = x_i W^{self}_{d_i} + \Big(\sum_{j \in N(i)} x_j\Big) W^{nbr}_{d_i} + b_{d_i},
              \qquad d_i = \min(\deg i, \text{max\_degree})

    The neighbour sums run on rpfast's aggregation kernel; atoms are grouped by degree so each
    degree is one matrix product.

    Parameters: ``weights[d]`` ``[2 in_dim, out_dim]`` (:math:`[W^{self}_d; W^{nbr}_d]`), one
    tensor per degree as PyG's ``MFConv`` has, so a degree absent from a batch gets no gradient
    and the optimizer skips it; ``bias [max_degree + 1, out_dim]``. Earlier versions had one
    stacked ``weight [max_degree + 1, 2 in_dim, out_dim]``: their state dicts still load, and
    :meth:`stacked_weight` returns that stack (a copy: initialise or edit ``weights[d]``).

    Shapes: ``x [N, in_dim]``, ``graph`` with N nodes -> ``[N, out_dim]``.
    """

    def __init__(self, in_dim: int, out_dim: int, max_degree: int = 10):
        super().__init__()
        self.in_dim = check_count(in_dim, "in_dim", 1)
        self.max_degree = check_count(max_degree, "max_degree", 1)
        out_dim = check_count(out_dim, "out_dim", 1)
        bound = 1 / (2 * in_dim) ** 0.5
        self.weights = nn.ParameterList(nn.Parameter(torch.empty(2 * in_dim, out_dim).uniform_(-bound, bound))
                                        for _ in range(self.max_degree + 1))
        self.bias = nn.Parameter(torch.zeros(self.max_degree + 1, out_dim))
        self.register_load_state_dict_pre_hook(_split_stacked_weight)

    def stacked_weight(self) -> Tensor:
        """The per-degree weights stacked, ``[max_degree + 1, 2 in_dim, out_dim]`` (a new tensor,
        differentiable with respect to ``weights``)."""
        return torch.stack(list(self.weights))

    def forward(self, x: Tensor, graph: GraphBatch, groups: Optional["DegreeGroups"] = None) -> Tensor:
        """``groups``: the atoms grouped by degree (:func:`degree_groups`), computed here if not
        given (:class:`Duvenaud` computes them once for all its convolutions)."""
        if x.dim() != 2 or x.shape != (graph.total_nodes, self.in_dim):
            raise ValueError(f"x must have shape [N={graph.total_nodes}, {self.in_dim}], got {tuple(x.shape)}")
        if groups is None:
            groups = degree_groups(graph, self.max_degree)
        else:
            _check_groups(groups, graph.total_nodes, self.max_degree)
        neighbours = gin_aggregate(x, graph, -1.0)  # (1 + eps) x_i + sum_j x_j with eps = -1
        inverse = groups.inverse if groups.inverse is not None else _inverse(groups.order)
        both = _PermuteRows.apply(torch.cat([x, neighbours], dim=1), groups.order, inverse)  # by degree
        sorted_out = _DegreeLinear.apply(both, self.bias, groups.ranges, *self.weights)
        return _PermuteRows.apply(sorted_out, inverse, groups.order)  # back to atom order


def _split_stacked_weight(module, state_dict, prefix, *args) -> None:
    """Load-state-dict pre-hook: an earlier version's stacked ``weight [D, 2 in, out]`` becomes
    the per-degree ``weights.d``."""
    stacked = state_dict.pop(prefix + "weight", None)
    if stacked is None:
        return
    if any(key.startswith(prefix + "weights.") for key in state_dict):
        raise RuntimeError(f"the state dict holds both a stacked '{prefix}weight' (earlier versions) and "
                           f"per-degree '{prefix}weights.d'; keep one of them")
    for d in range(stacked.shape[0]):
        state_dict[f"{prefix}weights.{d}"] = stacked[d]


def _check_groups(groups: "DegreeGroups", num_nodes: int, max_degree: int) -> None:
    """Caller-given degree groups must cover the rows 0..N in order, one degree each."""
    end, seen = 0, set()
    for d, start, stop in groups.ranges:
        if start != end or stop <= start or not 0 <= d <= max_degree or d in seen:
            raise ValueError(f"groups.ranges must be (degree, start, end) blocks covering rows 0..{num_nodes} in "
                             f"order, one per degree in 0..{max_degree}, as degree_groups makes them; got "
                             f"{groups.ranges}")
        end = stop
        seen.add(d)
    if end != num_nodes or groups.order.numel() != num_nodes:
        raise ValueError(f"groups cover {end} rows and order {groups.order.numel()} nodes, but the graph has "
                         f"{num_nodes} nodes")


class _DegreeLinear(torch.autograd.Function):
    """``out[s:e] = x[s:e] W_d + b[d]`` for every ``(d, s, e)`` in ``ranges``, with ``x [N, K]``
    sorted by degree, ``b [D, C]`` and one weight ``W_d [K, C]`` per degree.

    One node for all degrees, writing into one output: a selection or a product per degree
    would each be an autograd node. Degrees absent from ``ranges`` get no weight gradient
    (None), so the optimizer leaves them alone, as it does PyG's unused per-degree layers.
    Under ``create_graph=True`` the backward is made of differentiable ops.
    """

    @staticmethod
    def forward(ctx, x: Tensor, bias: Tensor, ranges: List[Tuple[int, int, int]], *weights: Tensor) -> Tensor:
        out = x.new_empty(x.shape[0], bias.shape[1])
        for d, start, end in ranges:
            torch.addmm(bias[d], x[start:end], weights[d], out=out[start:end])
        ctx.save_for_backward(x, *weights)
        ctx.ranges = ranges
        return out

    @staticmethod
    def backward(ctx, grad: Tensor):
        x, *weights = ctx.saved_tensors
        ranges, needs = ctx.ranges, ctx.needs_input_grad
        grad_x = grad_bias = None
        grad_weights = [None] * len(weights)
        if needs[0]:
            if torch.is_grad_enabled():  # create_graph=True: out= is not differentiable
                parts = [grad[s:e] @ weights[d].t() for d, s, e in ranges]
                grad_x = torch.cat(parts) if parts else x.new_zeros(x.shape)
            else:
                grad_x = x.new_empty(x.shape)
                for d, start, end in ranges:
                    torch.mm(grad[start:end], weights[d].t(), out=grad_x[start:end])
        for d, start, end in ranges:
            if needs[3 + d]:
                grad_weights[d] = x[start:end].t() @ grad[start:end]
        if needs[1]:
            sums = {d: grad[s:e].sum(0) for d, s, e in ranges}
            zeros = grad.new_zeros(grad.shape[1])
            grad_bias = torch.stack([sums.get(d, zeros) for d in range(len(weights))])
        return (grad_x, grad_bias, None, *grad_weights)


class _PermuteRows(torch.autograd.Function):
    """``x[order]`` for a permutation ``order``, whose gradient is a gather by the inverse
    permutation (torch's indexing backward is a general scatter-add, ~10x slower here)."""

    @staticmethod
    def forward(ctx, x: Tensor, order: Tensor, inverse: Tensor) -> Tensor:
        ctx.save_for_backward(order, inverse)
        return x.index_select(0, order)

    @staticmethod
    def backward(ctx, grad: Tensor):
        order, inverse = ctx.saved_tensors
        return _PermuteRows.apply(grad, inverse, order), None, None


class DegreeGroups(NamedTuple):
    """Atoms sorted by degree: ``order [N]`` (stable), ``(degree, start, end)`` ranges of
    ``order`` holding the atoms of each degree present (degrees above the cap share it), and
    the ``inverse`` permutation of ``order`` (computed from it when None)."""

    order: Tensor
    ranges: List[Tuple[int, int, int]]
    inverse: Optional[Tensor] = None


def degree_groups(graph: GraphBatch, max_degree: int) -> DegreeGroups:
    """Group a batch's atoms by (capped) in-degree, so each degree's weights are one product
    on a contiguous block instead of a gather and a scatter per degree."""
    degree = graph.host_in_degree.clamp(max=max_degree)  # on the host: the ranges are host ints
    order = torch.argsort(degree, stable=True)
    counts = torch.bincount(degree, minlength=max_degree + 1).tolist()
    ranges, start = [], 0
    for d, count in enumerate(counts):
        if count:
            ranges.append((d, start, start + count))
            start += count
    return DegreeGroups(upload(order, graph.device), ranges, upload(_inverse(order), graph.device))


def _inverse(order: Tensor) -> Tensor:
    inverse = torch.empty_like(order)
    inverse[order] = torch.arange(order.numel(), device=order.device)
    return inverse


def graph_max_pool(h: Tensor, graph: GraphBatch) -> Tensor:
    """``h_i' = max(h_i, max_{j in N(i)} h_j)`` per channel (DeepChem ``GraphPool``), one C++
    pass each way (:func:`rpfast.ops.neighbour_max`)."""
    return neighbour_max(h, graph)


def graph_gather(h: Tensor, graph: GraphBatch) -> Tensor:
    """``[B, 2H]``: per-graph sum and max of the atom states (DeepChem ``GraphGather``; an
    empty graph gathers zeros)."""
    return torch.cat([graph_sum(h, graph), graph_max(h, graph)], dim=1)


class Duvenaud(NotScriptable, nn.Module):
    r"""DeepChem's ``GraphConvModel`` (the RP paper's Duvenaud baseline): graph convolutions
    (:class:`DuvenaudConv`) each followed by ReLU, BatchNorm and graph max-pooling; a dense layer
    with ReLU and BatchNorm; the per-graph sum and max of the atom states through tanh; one logit
    per task.

    Args:
        in_dim: atom feature width (75 for :func:`rpfast.datasets.molecules.featurize_smiles`).
        num_tasks: output logits.
        conv: widths of the convolutions (paper: two of 64); dense: the dense width (128);
        dropout: before the head; max_degree: atoms of higher degree share the last weights.

    Shapes: any input of :func:`~rpfast.nn.graph_input.read_graph_input` (a GraphBatch or PyG
    batch with ``x``, ``forward(x [N, in_dim], edge_index, batch=None, edge_attr=None)`` or
    ``forward(x, graph)``) -> ``[B, num_tasks]`` logits. Edge features are accepted and unused
    (the convolution reads atoms, not bonds).
    """

    graph_batch_input = True  # forward takes (x, GraphBatch): RPGNN hands it the replicas as one

    def __init__(self, in_dim: int, num_tasks: int, conv: Sequence[int] = (64, 64), dense: int = 128,
                 dropout: float = 0.0, max_degree: int = 10):
        super().__init__()
        widths = [check_count(in_dim, "in_dim", 1)] + [check_count(c, "conv width", 1) for c in conv]
        if len(widths) < 2:
            raise ValueError("conv must name at least one convolution width")
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0 <= dropout < 1:
            raise ValueError(f"dropout must be a float in [0, 1), got {dropout!r}")
        self.in_dim = in_dim
        self.convs = nn.ModuleList(DuvenaudConv(a, b, max_degree) for a, b in zip(widths, widths[1:]))
        self.norms = nn.ModuleList(nn.BatchNorm1d(w) for w in widths[1:])
        self.dense = nn.Linear(widths[-1], check_count(dense, "dense", 1))
        self.dense_norm = nn.BatchNorm1d(dense)
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(2 * dense, check_count(num_tasks, "num_tasks", 1))

    def forward(self, data, edge_index: Optional[Tensor] = None, batch: Optional[Tensor] = None,
                edge_attr: Optional[Tensor] = None) -> Tensor:
        h, graph = read_graph_input(type(self).__name__, data, edge_index, batch, edge_attr,
                                    training=self.training)
        if h is None:
            raise ValueError("Duvenaud needs atom features x")
        h = h.to(self.head.weight.dtype)
        groups = degree_groups(graph, self.convs[0].max_degree)  # shared by the convolutions
        for conv, norm in zip(self.convs, self.norms):
            h = graph_max_pool(norm(torch.relu(conv(h, graph, groups))), graph)
        h = self.dense_norm(torch.relu(self.dense(h)))
        return self.head(self.dropout(torch.tanh(graph_gather(h, graph))))


class RPDuvenaud(RPGNN):
    r"""RP-Duvenaud (paper Sec. 2.2 and supplementary): :class:`Duvenaud` on atom features plus
    one-hot IDs that make the atoms of each element unique.

    Within a molecule the atoms of one element get a uniformly random order; an atom's ID is its
    position in that order (mod ``id_dim``): ``id_dim`` = the largest number of atoms of one
    element in a molecule gives every such atom a distinct ID with the fewest columns. The
    strategy must be a :class:`~rpfast.nn.rp.PiSGD` (uniform orders of each element's atoms):
    the default ``PiSGD(train_samples=1, eval_samples=20)`` draws one order per element in
    training (pi-SGD) and averages 20 in eval mode (the paper's). The graph must carry
    ``element [N]`` (as :meth:`MoleculeGraphs.batch` sets it).

    Args:
        in_dim, num_tasks: as for :class:`Duvenaud` (``in_dim`` without IDs).
        **duvenaud_kwargs: as for :class:`Duvenaud`.
        id_dim: the ID width.
        strategy: a PiSGD; its counts per mode belong to it.
        generator: CPU ``torch.Generator`` for reproducible orders.

    Shapes: as for :class:`Duvenaud`; the input's graph must carry ``element``.
    """

    def __init__(self, in_dim: int, num_tasks: int, id_dim: int, *, strategy: Optional[Strategy] = None,
                 generator: Optional[torch.Generator] = None, **duvenaud_kwargs):
        id_dim = check_count(id_dim, "id_dim", 1)
        super().__init__(Duvenaud(in_dim + id_dim, num_tasks, **duvenaud_kwargs), id_dim,
                         strategy=PiSGD(train_samples=1, eval_samples=20) if strategy is None else strategy,
                         generator=generator)

    def id_groups(self, graph: GraphBatch) -> Tensor:
        """``[N]`` on the CPU: one group per (molecule, element), from the batch's host views,
        so drawing the orders reads nothing back from the device."""
        element = graph.host_extra("element")
        if element is None:
            raise ValueError("RPDuvenaud needs each atom's element (graph.element [N]); "
                             "MoleculeGraphs.batch() provides it")
        # each atom's molecule: how many molecules end at or before it
        molecule = torch.searchsorted(graph.host_ptr[1:], torch.arange(graph.total_nodes), right=True)
        return molecule * (int(element.max()) + 1 if element.numel() else 1) + element
