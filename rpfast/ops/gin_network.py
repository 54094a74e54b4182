"""A whole GIN network (all layers and their sum readouts) as one autograd node.

A GIN training step on the RP paper's graphs (tens of nodes, width 16) is a few hundred
tiny tensor operations; their dispatch, autograd bookkeeping and argument checks cost far
more than the arithmetic. Here the whole forward is one C++ call and the whole backward
another (``GINNetwork``, for widths up to ``FUSED_MAX_WIDTH``; wider networks run the same
kernels layer by layer from Python, where the per-call cost no longer matters), and the
autograd graph holds one node for the whole network. CPU kernels only: a GIN on another
device (or with ``RPFAST_BACKEND=torch``) runs layer by layer on the registered ops
(:class:`rpfast.nn.GIN` decides, in one place). Under ``torch.compile`` the same work runs as
custom ops (:mod:`rpfast.ops.gin_network_compiled`).
"""
from typing import Optional, Sequence, Tuple

import torch
from torch import Tensor

from rpfast.data import GraphBatch
from rpfast.ops import gin_network_compiled
from rpfast.ops._registry import compiling
from rpfast.ops.gin import graph_csr
from rpfast.ops.gin_network_engine import (
    FUSED_MAX_WIDTH,
    FlatGradient,
    GINLayerParams,
    NetworkWeights,
    _compiled_forward,
    _forward,
    _GINNetwork,
    _GINNetworkCompiled,
    _GINNetworkFlat,
    _Plan,
    runs_compiled,
)
from rpfast._validation import check_count, require_flag

__all__ = ["GINLayerParams", "NetworkWeights", "FlatGradient", "FUSED_MAX_WIDTH", "gin_network", "gin_model"]


def gin_network(x: Optional[Tensor], ids: Optional[Tensor], graph: GraphBatch, layers: Sequence[GINLayerParams],
                training: bool) -> Tensor:
    r"""All layers of a GIN and their sum readouts, forward and backward as one node.

    Layer :math:`l` (``S`` MLP stages, width ``H``):

    .. math::
        z = h^{(l-1)} W_{\text{first}}^\top + W_{\text{id}}[\text{ids}],\quad
        a = (1 + \epsilon) z + A z,\quad
        u_1 = \mathrm{ReLU}(\mathrm{BN}_1(a)),\ u_s = \mathrm{ReLU}(\mathrm{BN}_s(u_{s-1} W_s^\top)),\quad
        h^{(l)} = u_S

    (the ID term only in a layer with ``id_weight``), and the output concatenates the
    per-graph sums :math:`\sum_{i \in G} h^{(l)}_i` of every layer. Same results as
    :func:`rpfast.ops.gin_mlp` layer by layer, with the same deterministic reductions;
    BatchNorm running statistics are updated in place in training.

    Args:
        x: ``[R, N, F]`` or ``[1, N, F]`` (shared by all replicas) node features, or None
            when the first layer has no ``first`` map.
        ids: ``[R, N]`` int64 IDs for the first layer's ``id_weight``, or None.
        graph: the :class:`~rpfast.data.GraphBatch` with ``N`` nodes and ``B`` graphs.
        layers: one :class:`GINLayerParams` per layer (callers build them from modules and
            check shapes: this op is the inner loop of :class:`rpfast.nn.GIN`).
        training: batch statistics or running statistics.

    Returns ``[R, B, L * H]``. Not twice differentiable: a second backward raises
    ``RuntimeError``; :func:`rpfast.ops.gin_mlp` per layer supports it where only the
    aggregation needs it.
    """
    training = require_flag(training, "training")
    if not isinstance(graph, GraphBatch):
        raise TypeError(f"graph must be an rpfast.data.GraphBatch, got {type(graph).__name__}")
    if not layers:
        raise ValueError("gin_network needs at least one layer")
    replicas = ids.shape[0] if ids is not None else x.shape[0]
    if training and replicas * graph.total_nodes < 2:
        raise ValueError("BatchNorm in training mode needs more than one node")
    if x is not None:
        x = x.contiguous()
    if ids is not None:
        ids = ids.contiguous()
    if compiling():
        return gin_network_compiled.traced_gin_network(x, ids, (*graph_csr(graph), graph.ptr), layers, training,
                                                       replicas)
    plan = _Plan(graph, layers, training, replicas)
    params = [t for layer in layers for t in layer.differentiable()]
    tensors = [t for t in params if t is not None] + ([x] if x is not None else [])
    compiled = runs_compiled(layers)
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
        return (_GINNetworkCompiled if compiled else _GINNetwork).apply(plan, x, ids, *params)
    return (_compiled_forward if compiled else _forward)(plan, x, ids, save=False)[0]


def gin_model(x: Optional[Tensor], ids: Optional[Tensor], graph: GraphBatch, weights: NetworkWeights,
              training: bool, replicas: int, flat: Optional[Tuple[Tensor, FlatGradient]] = None) -> Tensor:
    r"""A whole GIN model as one C++ call and one autograd node: :func:`gin_network`'s layers
    plus, as :class:`NetworkWeights` binds them, the input readouts before the layers' pooled
    states and the classifier after them,

    .. math::
        e_{r,b} = \Big[\textstyle\sum_{i \in b} x_{r,i},\ \sum_{i \in b} \mathrm{onehot}(\mathrm{ids}_{r,i}),\
        \text{pooled layers}\Big],\qquad \mathrm{out}_{r,b} = e_{r,b} W_{\text{cls}}^\top + b_{\text{cls}}

    Training calls count a step in every BatchNorm (``counters``). For callers that checked
    their inputs (:class:`rpfast.nn.GIN`): ``x [1 or R, N, F]`` or None, ``ids [R, N]`` int64
    (the kernel checks their range) or None. Returns ``[R, B, C]`` (or ``[R, B, D]`` without a
    classifier). Not twice differentiable.

    ``flat = (parameter, FlatGradient(weights, parameter))`` where the bound tensors are views
    of one flat parameter: the gradient goes to that parameter.
    """
    training = require_flag(training, "training")
    replicas = check_count(replicas, "replicas", minimum=1)
    if not isinstance(graph, GraphBatch):
        raise TypeError(f"graph must be an rpfast.data.GraphBatch, got {type(graph).__name__}")
    if not isinstance(weights, NetworkWeights):
        raise TypeError(f"weights must be rpfast.ops.gin_network.NetworkWeights, got {type(weights).__name__}")
    if flat is not None and not (isinstance(flat, tuple) and len(flat) == 2 and isinstance(flat[0], Tensor)
                                 and isinstance(flat[1], FlatGradient)):
        raise TypeError("flat must be (parameter, FlatGradient(weights, parameter))")
    if training and replicas * graph.total_nodes < 2:
        raise ValueError("BatchNorm in training mode needs more than one node")
    plan = _Plan(graph, weights.layers, training, replicas, weights)
    if x is not None:
        x = x.contiguous()
    if ids is not None:
        ids = ids.contiguous()
    if flat is not None:
        if torch.is_grad_enabled() and (flat[0].requires_grad or (x is not None and x.requires_grad)):
            return _GINNetworkFlat.apply(plan, x, ids, flat[0], flat[1])
    elif torch.is_grad_enabled() and (any(t is not None and t.requires_grad for t in weights.tensors)
                                      or (x is not None and x.requires_grad)):
        return _GINNetworkCompiled.apply(plan, x, ids, *weights.tensors)
    return _compiled_forward(plan, x, ids, save=False)[0]
