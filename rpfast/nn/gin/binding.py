"""A :class:`rpfast.nn.GIN`'s plan, and its tensors bound to the C++ network: one per model.

Binding costs ~100 us (pointers into ~40 tensors); a training step of the RP paper's GIN
costs ~1 ms. So the model keeps one :class:`Binding`, and a :class:`TreeSnapshot` of the module
tree tells, in microseconds per call, when the model changed (a parameter replaced or moved,
``.to()``, a new BatchNorm momentum, ``fused`` or the backend switched) and the binding must be
made again. The path (:func:`rpfast.nn.gin.planner.plan`) is decided when binding, so every
call between two changes takes the same path without deciding again.
"""
import weakref
from typing import TYPE_CHECKING, Dict, List, Optional

from torch import Tensor

from rpfast import _backend
from rpfast.nn.gin.network import FlatGradient, NetworkWeights, run_network
from rpfast.nn.gin.norms import count_batches, step_momenta
from rpfast.nn.gin.planner import Path, plan
from rpfast.nn.gin.snapshot import TreeSnapshot

if TYPE_CHECKING:  # pragma: no cover - annotations only
    from rpfast.nn.gin.model import GIN

__all__ = ["Binding", "binding"]


def _tensor_paths(gin: "GIN") -> List[str]:
    """Every attribute the plan and the bound tensors depend on, as dotted paths."""
    paths = []
    for l, layer in enumerate(gin.layers):
        at = f"layers.{l}."
        paths += [at + name for name in ("first", "edge", "id_weight", "eps", "fixed_eps")]
        paths += [at + "first.weight"] if layer.first is not None else []
        paths += [f"{at}linears.{s}.weight" for s in range(len(layer.linears))]
        for s in range(len(layer.norms)):
            paths += [f"{at}norms.{s}"] + [f"{at}norms.{s}.{name}" for name in
                                           ("weight", "bias", "running_mean", "running_var", "num_batches_tracked")]
    paths += ["classifier.weight", "classifier.bias"]
    return paths + (["flat_parameter"] if gin.flat_parameters else [])


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
                    None if owner is None else owner.fused, _backend.backend())

        self._model = model
        self.snapshot = TreeSnapshot(gin, _tensor_paths(gin), scalars)
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
        if self.path is Path.WHOLE and not self._leaves():
            self.path = Path.LAYERS  # parametrized weights are computed anew at every access

    def _leaves(self) -> bool:
        dtype = self._classifier[0].dtype
        tensors = [t for layer in self._layers for t in (*layer.differentiable(), *layer.running_means,
                                                         *layer.running_vars)] + list(self._classifier)
        known = {id(v) for v in self.snapshot.values}
        if self._flat is not None and (self._flat.grad_fn is not None or self._flat.dtype != dtype):
            return False
        return all(t is None or (id(t) in known and t.grad_fn is None and t.dtype == dtype) for t in tensors)

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
        a training call counts the BatchNorm step first (:mod:`rpfast.nn.gin.norms`)."""
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


def binding(gin: "GIN") -> Binding:
    """The model's binding, made again when stale (kept in the model's ``__dict__``, left out
    of copies and pickles by :class:`rpfast.nn.GIN`)."""
    bound = gin.__dict__.get("_binding")
    if bound is not None and bound.current(gin):
        return bound
    if gin.flat_parameters:  # the flat tensor may have moved (param.data = ...): views follow it
        gin._flat_layout.refresh(gin, gin.flat_parameter)
    bound = gin.__dict__["_binding"] = Binding(gin)
    return bound
