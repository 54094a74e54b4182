"""A :class:`rpfast.nn.GIN` bound to the C++ network once (its eager fast path).

The binding holds pointers into the model's parameters and buffers; a :class:`TreeSnapshot`
of the module tree tells, in microseconds per call, when the model changed and the binding
must be rebuilt. ``GIN._bound`` keeps one binding per model in :data:`BOUND`.
"""
import weakref
from typing import TYPE_CHECKING, Optional

import torch
from torch import Tensor

from rpfast.data import GraphBatch
from rpfast.nn._snapshot import TreeSnapshot
from rpfast.ops.gin_network import (FUSED_MAX_WIDTH, FlatGradient, GINLayerParams, NetworkWeights, gin_model,
                                   runs_compiled)

if TYPE_CHECKING:  # pragma: no cover - annotations only
    from rpfast.nn.gin import GIN

__all__ = ["BoundGIN", "BOUND"]


class BoundGIN:
    """A :class:`GIN` bound to the C++ network once: every layer, the input readouts and the
    classifier run in one call (:func:`rpfast.ops.gin_network.gin_model`), and the BatchNorm step counters
    are counted there. The snapshot tells when the module changed and the binding is stale."""

    def __init__(self, snapshot: TreeSnapshot, layers, classifier, in_dim: int, id_dim: int,
                 flat: Optional[Tensor] = None):
        """``flat``: the model's flat parameter (``GIN(flat_parameters=True)``), whose views
        the layers and classifier are; gradients then go to it alone."""
        self.snapshot = snapshot
        self._layers, self._classifier = layers, classifier
        self._in_dim, self._id_dim = in_dim, id_dim
        self._flat = flat
        self._weights = {}
        self._flat_gradients = {}

    @staticmethod
    def eligible(gin: "GIN") -> bool:
        """Whether the model's structure can run in the C++ network: every layer fusable, no
        width above ``FUSED_MAX_WIDTH``, affine BatchNorm with running statistics."""
        layers = list(gin.layers)
        if not all(layer.fusable() for layer in layers):
            return False
        if max(w for layer in layers for w in (layer.norms[0].num_features, layer.in_dim)) > FUSED_MAX_WIDTH:
            return False
        return all(bn.affine and bn.track_running_stats for layer in layers for bn in layer.norms)

    @staticmethod
    def bind(gin: "GIN") -> Optional["BoundGIN"]:
        """The binding, or None where the model must run layer by layer: a layer that is not
        fusable or wider than ``FUSED_MAX_WIDTH``, a dtype other than float32/float64 (the
        layer path raises the clear error), or tensors that are not the module's own leaves
        (``torch.nn.utils.parametrize`` computes its weights anew at every access)."""
        if not BoundGIN.eligible(gin):
            return None  # (the layer-by-layer path raises the clear error where there is one)
        layers = list(gin.layers)
        norms = [bn for layer in layers for bn in layer.norms]
        paths = []
        for l, layer in enumerate(layers):
            at = f"layers.{l}."
            paths += [at + name for name in ("first", "edge", "id_weight", "eps", "fixed_eps")]
            paths += [at + "first.weight"] if layer.first is not None else []
            paths += [f"{at}linears.{s}.weight" for s in range(len(layer.linears))]
            paths += [f"{at}norms.{s}.{name}" for s in range(len(layer.norms))
                      for name in ("weight", "bias", "running_mean", "running_var", "num_batches_tracked")]
        paths += ["classifier.weight", "classifier.bias"]
        flat = gin.flat_parameter if gin.flat_parameters else None
        paths += ["flat_parameter"] if flat is not None else []
        containers = [gin.layers] + [c for layer in layers for c in (layer.linears, layer.norms)]

        def scalars():  # references the children only (see TreeSnapshot)
            return ([len(c) for c in containers],
                    [(bn.momentum, bn.eps, bn.affine, bn.track_running_stats) for bn in norms])

        snapshot = TreeSnapshot(gin, paths, scalars)
        params = []
        for layer in layers:
            bn = layer.norms
            params.append(GINLayerParams(
                first=layer.first.weight if layer.first is not None else None, id_weight=layer.id_weight,
                eps=layer.eps if layer.eps is not None else layer.fixed_eps,
                weights=[linear.weight for linear in layer.linears], gammas=[b.weight for b in bn],
                betas=[b.bias for b in bn], running_means=[b.running_mean for b in bn],
                running_vars=[b.running_var for b in bn],
                momenta=[float("nan") if b.momentum is None else float(b.momentum) for b in bn],
                bn_eps=[float(b.eps) for b in bn], counters=[b.num_batches_tracked for b in bn]))
        classifier = (gin.classifier.weight, gin.classifier.bias)
        dtype = classifier[0].dtype
        floats = [t for p in params for t in (*p.differentiable(), *p.running_means, *p.running_vars)
                  if t is not None] + [t for t in classifier if t is not None]
        counters = [c for p in params for c in p.counters]
        known = {id(v) for v in snapshot.values}
        if dtype not in (torch.float32, torch.float64) or not runs_compiled(params) or any(
                id(t) not in known or t.grad_fn is not None or t.dtype != dtype for t in floats) or any(
                id(c) not in known or c.dtype != torch.int64 for c in counters):
            return None
        if flat is not None and (flat.grad_fn is not None or flat.dtype != dtype):
            return None
        return BoundGIN(snapshot, params, classifier, gin.in_dim, gin.id_dim, flat)

    def weights(self, classify: bool) -> NetworkWeights:
        weights = self._weights.get(classify)
        if weights is None:
            weights = NetworkWeights(self._layers, self._in_dim, input_readouts=True, id_dim=self._id_dim,
                                     classifier=self._classifier if classify else None, cached_views=False)
            self._weights[classify] = weights
        return weights

    def run(self, gin: "GIN", x, graph: GraphBatch, ids, classify: bool) -> Tensor:
        """``[R, B, out_dim]`` logits (``classify``) or ``[R, B, embedding_dim]`` embeddings."""
        h, ids, replicas = gin._inputs(x, graph, ids, check_ids=False)
        weights = self.weights(classify)
        if self._flat is None:
            return gin_model(h, ids, graph, weights, gin.training, replicas)
        mapping = self._flat_gradients.get(classify)
        if mapping is None:
            mapping = self._flat_gradients[classify] = FlatGradient(weights, self._flat)
        return gin_model(h, ids, graph, weights, gin.training, replicas, flat=(self._flat, mapping))


# model -> its binding; weak keys, so a binding never keeps its model alive
BOUND: "weakref.WeakKeyDictionary[GIN, BoundGIN]" = weakref.WeakKeyDictionary()
