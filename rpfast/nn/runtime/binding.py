"""A :class:`rpfast.nn.GIN`'s one cache: its path, and its tensors bound to the C++ network.

Binding costs ~100 us (pointers into ~40 tensors); a training step of the RP paper's GIN
costs ~1 ms. So each model keeps one :class:`GINRuntime` (made with the model, and anew for a
copy or an unpickled model), which holds

* the eager binding (:class:`Binding`): the path :func:`rpfast.nn.runtime.plan.plan` chose and,
  on the ``WHOLE`` path, the bound :class:`~rpfast.ops.gin_network.NetworkWeights`. A
  :class:`TreeSnapshot` of the module tree tells, in microseconds per call, when the model
  changed (a parameter replaced or moved, ``.to()``, a new BatchNorm momentum, ``fused`` or the
  backend switched) and the binding must be made again; every call between two changes takes
  the same path without deciding again;
* the weights the compiled op binds (:class:`~rpfast.ops.gin_network_op.BoundWeights`) and the
  handle that names them to it, fixed for the model's life (a compiled graph holds it).
"""
import weakref
from typing import TYPE_CHECKING, Dict, Optional

import torch
from torch import Tensor

from rpfast._config import backend
from rpfast.ops.gin import graph_csr
from rpfast.ops.gin_network import FlatGradient, NetworkWeights, run_network
from rpfast.ops.gin_network_op import BoundWeights, gin_model_op, weights_handle
from rpfast.nn.runtime.batch_norm_steps import count_batches, step_momenta
from rpfast.nn.runtime.plan import bound_paths, plan
from rpfast.nn.runtime.tree_snapshot import TreeSnapshot

if TYPE_CHECKING:  # pragma: no cover - annotations only
    from rpfast.nn.gin.model import GIN

__all__ = ["GINRuntime", "Binding", "runtime", "binding", "run_compiled"]

_COUNT_ONE = torch.ones((), dtype=torch.int64)


def _snapshot_paths(gin: "GIN") -> list:
    """Every attribute the path and the bound tensors depend on: the bound tensors, the
    attributes whose presence the path reads (``first``, ``edge``, ``id_weight``, ``eps``), the
    norm modules (their type), and the flat parameter."""
    modules = [f"layers.{l}.{name}" for l in range(len(gin.layers)) for name in ("first", "edge", "id_weight", "eps")]
    norms = [f"layers.{l}.norms.{s}" for l, layer in enumerate(gin.layers) for s in range(len(layer.norms))]
    counters = [f"{norm}.num_batches_tracked" for norm in norms]
    paths = bound_paths(gin) + modules + norms + counters + (["flat_parameter"] if gin.flat_parameters else [])
    return list(dict.fromkeys(paths))  # once each: the snapshot re-checks every path at every call


class Binding:
    """The model's path, and on the ``WHOLE`` path its tensors bound to C++ (one
    :class:`NetworkWeights` for logits, one for embeddings, made on first use)."""

    def __init__(self, gin: "GIN"):
        norms = [bn for layer in gin.layers for bn in layer.norms]
        containers = [gin.layers] + [c for layer in gin.layers for c in (layer.linears, layer.norms)]
        model = weakref.ref(gin)  # the binding lives on the model: no strong cycle

        def scalars():
            owner = model()
            return ([len(c) for c in containers], [(bn.momentum, bn.eps) for bn in norms],
                    None if owner is None else owner.fused, backend())

        self._model = model
        self.snapshot = TreeSnapshot(gin, _snapshot_paths(gin), scalars)
        self.norms = norms
        self.path = plan(gin)
        # momenta of a training step, fixed unless a BatchNorm averages cumulatively (momentum=None)
        self._momenta = None if any(bn.momentum is None for bn in norms) else step_momenta(norms, True)
        self._layers = [layer.params() for layer in gin.layers]
        self._classifier = (gin.classifier.weight, gin.classifier.bias)
        self._in_dim, self._id_dim = gin.in_dim, gin.id_dim
        self._flat = gin.flat_parameter if gin.flat_parameters else None
        self._weights: Dict[bool, NetworkWeights] = {}
        self._flat_gradients: Dict[bool, FlatGradient] = {}

    def current(self, gin: "GIN") -> bool:
        return self._model() is gin and self.snapshot.current()

    def weights(self, classify: bool) -> NetworkWeights:
        weights = self._weights.get(classify)
        if weights is None:
            weights = self._weights[classify] = NetworkWeights(
                self._layers, self._in_dim, self._id_dim, self._classifier if classify else None)
        return weights

    def run(self, h: Optional[Tensor], ids: Optional[Tensor], graph, replicas: int, training: bool,
            classify: bool) -> Tensor:
        """The ``WHOLE`` path: ``[R, B, out_dim]`` logits (``classify``) or ``[R, B, embedding_dim]``;
        a training call counts the BatchNorm step first (:mod:`rpfast.nn.runtime.batch_norm_steps`)."""
        weights = self.weights(classify)
        if training:
            count_batches(self.norms)
            weights.kernel.set_momenta(self._momenta or step_momenta(self.norms, True))
        if self._flat is None:
            return run_network(weights, graph, h, ids, replicas, training)
        mapping = self._flat_gradients.get(classify)
        if mapping is None:
            mapping = self._flat_gradients[classify] = FlatGradient(weights, self._flat)
        return run_network(weights, graph, h, ids, replicas, training, self._flat, mapping)


class GINRuntime:
    """A model's one cache (see the module docstring). Not copied or pickled with the model."""

    def __init__(self):
        self.compiled_weights = BoundWeights()
        self.handle = weights_handle(self.compiled_weights)
        self._binding: Optional[Binding] = None

    def binding(self, gin: "GIN") -> Binding:
        """The model's eager binding, made again when stale."""
        bound = self._binding
        if bound is not None and bound.current(gin):
            return bound
        if gin.flat_parameters:  # the flat tensor may have moved (param.data = ...): views follow it
            gin._flat_layout.refresh(gin, gin.flat_parameter)
        bound = self._binding = Binding(gin)
        return bound


def runtime(gin: "GIN") -> GINRuntime:
    """``gin``'s runtime (kept in its ``__dict__``; :class:`rpfast.nn.GIN` makes it)."""
    return gin.__dict__["_runtime"]


def binding(gin: "GIN") -> Binding:
    """``gin``'s eager binding, made again when stale."""
    return runtime(gin).binding(gin)


def run_compiled(gin: "GIN", h: Optional[Tensor], ids: Optional[Tensor], graph, replicas: int,
                 classify: bool) -> Tensor:
    """``gin`` on one batch through the custom op (the caller checked ``h [1 or R, N, F]`` and
    ``ids [R, N]``): counts the BatchNorm step, runs, copies the updated statistics into the
    buffers. Logits ``[R, B, C]`` (``classify``) or embeddings ``[R, B, D]``."""
    if gin.training and replicas * graph.total_nodes < 2:
        raise ValueError("BatchNorm in training mode needs more than one node")
    layers = [layer.params() for layer in gin.layers]
    norms = [bn for layer in gin.layers for bn in layer.norms]
    if gin.training:
        count_batches(norms)
    slots = [t for layer in layers for t in layer.differentiable()]
    params, present = [t for t in slots if t is not None], [t is not None for t in slots]
    bias = gin.classifier.bias
    if classify:
        params += [gin.classifier.weight] + ([bias] if bias is not None else [])
    running = [t for layer in layers for pair in zip(layer.running_means, layer.running_vars) for t in pair]
    stages = [len(layer.gammas) for layer in layers]
    momenta = step_momenta(norms, gin.training, cumulative_as_nan=True)
    counters = [bn.num_batches_tracked if bn.momentum is None else _COUNT_ONE for bn in norms]
    bn_eps = [float(bn.eps) for bn in norms]
    head = [gin.in_dim, gin.id_dim, int(classify), int(bias is not None)]
    x = h.contiguous() if h is not None else None
    ids = ids.contiguous() if ids is not None else None
    graph_tensors = [*graph_csr(graph), graph.ptr]
    out, updated, _ = gin_model_op(x, ids, graph_tensors, params, present, running, counters, stages, momenta,
                                   bn_eps, head, runtime(gin).handle, gin.training, replicas)
    if gin.training:
        with torch.no_grad():
            torch._foreach_copy_(running, list(updated.split_with_sizes([t.numel() for t in running])))
    return out
