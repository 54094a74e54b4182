"""The whole-GIN network as a ``torch.library`` custom op pair, ``rpfast::gin_model`` and
``rpfast::gin_model_backward``: the form ``torch.compile`` traces (the eager form is the
autograd node of :mod:`rpfast.ops.gin_network`; both run one :class:`~rpfast.ops.gin_network.Call`
forward and its backward).

A custom op takes tensors, lists and numbers, not the Python objects the network keeps, so:

* the tensors travel as flat lists (per layer ``[first, id_weight, eps, S - 1 weights, S gammas,
  S betas]`` with absent ones flagged off in ``present``; ``[mean, var]`` per BatchNorm stage);
* the model's weights bound to C++ are named by a handle (:func:`weights_handle`, from the
  registry's :class:`~rpfast.ops._registry.Handles`), an integer a compiled graph holds as a
  constant; they are bound anew when the memory of the tensors differs;
* the activations a forward keeps for its backward are named by an int64 tensor handle.

The op is functional: it returns the updated BatchNorm statistics for the caller to copy into
the buffers.
"""
from typing import List, Optional, Sequence

import torch
from torch import Tensor

from rpfast.ops._registry import Handles
from rpfast.ops.gin_network import Call, GINLayerParams, NetworkWeights

__all__ = ["BoundWeights", "weights_handle", "gin_model_op"]

_EMPTY = torch.empty(0)

# A model's weights bound for the op, by handle; weak: a handle dies with the model that owns the store.
_bound = Handles("a model's bound GIN weights are gone", weak=True)
# The activations of forwards whose backward has not run yet. Forwards whose backward never runs
# (evaluation with gradients on) are dropped after 16 newer ones.
_activations = Handles("the activations of this compiled GIN forward are gone (a second backward through it, "
                       "or more than 16 forwards waiting for their backward)", weak=False, keep=16)


def _layers(params: Sequence[Tensor], present: Sequence[bool], running: Sequence[Tensor], stages: Sequence[int],
            bn_eps: Sequence[float]) -> List[GINLayerParams]:
    """The layers from the op's flat lists (see the module docstring)."""
    slots, k = [], 0
    for there in present:
        slots.append(params[k] if there else None)
        k += there
    layers, p, r = [], 0, 0
    for S in stages:
        first, id_weight, eps = slots[p:p + 3]
        layers.append(GINLayerParams(first, id_weight, eps, slots[p + 3:p + 2 + S], slots[p + 2 + S:p + 2 + 2 * S],
                                     slots[p + 2 + 2 * S:p + 2 + 3 * S], list(running[r:r + 2 * S:2]),
                                     list(running[r + 1:r + 2 * S:2]), list(bn_eps[r // 2:r // 2 + S])))
        p += 2 + 3 * S
        r += 2 * S
    return layers


class BoundWeights:
    """A model's weights bound for the op, one :class:`NetworkWeights` per ``classify``, bound
    anew when the memory of the tensors or the layout differs (the model keeps this store;
    :func:`weights_handle` names it to the op)."""

    def __init__(self):
        self._entries = {}

    def weights(self, params: Sequence[Tensor], present, running, stages, bn_eps, head) -> NetworkWeights:
        in_dim, id_dim, classify, has_bias = head
        memory = (tuple(bn_eps), tuple(stages), tuple(present),  # bound with the tensors, as the memory is
                  tuple((t.data_ptr(), t.dtype, tuple(t.shape), t.stride()) for t in params))
        entry = self._entries.get(classify)
        if entry is None or entry[0] != memory:
            tail = (1 + has_bias) if classify else 0
            layers = _layers(params[:len(params) - tail], present, running, stages, bn_eps)
            classifier = (params[len(params) - tail], params[-1] if has_bias else None) if classify else None
            entry = self._entries[classify] = (memory, NetworkWeights(layers, in_dim, id_dim, classifier), list(params))
        return entry[1]


def weights_handle(store: BoundWeights) -> int:
    """The integer that names ``store`` to the op while ``store`` lives."""
    return _bound.add(store)


@torch.library.custom_op("rpfast::gin_model", mutates_args=())
def _gin_model(x: Optional[Tensor], ids: Optional[Tensor], graph: List[Tensor], params: List[Tensor],
               present: List[bool], running: List[Tensor], counters: List[Tensor], stages: List[int],
               momenta: List[float], bn_eps: List[float], head: List[int], bound: int, training: bool,
               replicas: int) -> List[Tensor]:
    """``[out [R, B, C or D], the updated running statistics (flat), a handle to the activations]``;
    ``bound``: the :func:`weights_handle` of the model's store (gone: bound for this call only)."""
    store = _bound.get(bound) or BoundWeights()
    weights = store.weights(params, present, running, stages, bn_eps, head)
    updated = torch.cat(running)  # [mean, var] per stage: the layout set_statistics reads
    weights.kernel.set_statistics(updated)
    # NaN: BatchNorm's cumulative momentum, 1 / the steps counted before the op
    weights.kernel.set_momenta([1.0 / float(c) if m != m else m for m, c in zip(momenta, counters)])
    call = Call(weights, tuple(graph), x, ids, replicas, training)
    out = call.forward(save=True)
    return [out, updated, torch.tensor(_activations.add(call), dtype=torch.int64)]


@_gin_model.register_fake
def _(x, ids, graph, params, present, running, counters, stages, momenta, bn_eps, head, bound, training, replicas):
    in_dim, id_dim, classify, has_bias = head
    classes = params[-1 - has_bias].shape[0]
    widths = [running[2 * sum(stages[:l])].shape[0] for l in range(len(stages))]  # each layer's first mean
    width = classes if classify else in_dim + id_dim + sum(widths)
    return [running[0].new_empty((replicas, graph[4].shape[0] - 1, width)),
            running[0].new_empty((sum(t.numel() for t in running),)), graph[0].new_empty(())]


@torch.library.custom_op("rpfast::gin_model_backward", mutates_args=())
def _gin_model_backward(grad: Tensor, handle: Tensor, x: Optional[Tensor], params: List[Tensor],
                        x_needs_grad: bool) -> List[Tensor]:
    """``[grad_x (empty unless x_needs_grad), the gradients of params flattened one after another]``."""
    call = _activations.take(handle)
    grad_x, flat = call.backward(grad, x_needs_grad, [True] * len(call.weights.slots))  # absent tensors: 0 slots
    return [grad_x if grad_x is not None else _EMPTY, flat]


@_gin_model_backward.register_fake
def _(grad, handle, x, params, x_needs_grad):
    first = x.new_empty(x.shape) if x is not None and x_needs_grad else grad.new_empty((0,))
    return [first, grad.new_empty((sum(p.numel() for p in params),))]


def _setup(ctx, inputs, output):
    x, ids, graph, params, present, running, counters = inputs[:7]
    ctx.layout = (len(graph), len(params), len(running), len(counters), x is not None)
    ctx.save_for_backward(*([x] if x is not None else []), *params, output[-1])


def _backward(ctx, grads):
    n_graph, n_params, n_running, n_counters, has_x = ctx.layout
    saved = list(ctx.saved_tensors)
    x = saved.pop(0) if has_x else None
    params, handle = saved[:n_params], saved[n_params]
    x_needs_grad = has_x and ctx.needs_input_grad[0]
    grad_x, flat = _gin_model_backward(grads[0], handle, x, params, x_needs_grad)
    pieces = flat.split_with_sizes([p.numel() for p in params])
    none = [None]  # tensor-list inputs take a list of gradients of the same length
    return (grad_x if x_needs_grad else None, None, none * n_graph, [g.view(p.shape) for g, p in zip(pieces, params)],
            None, none * n_running, none * n_counters, None, None, None, None, None, None, None)


_gin_model.register_autograd(_backward, setup_context=_setup)


gin_model_op = _gin_model
