"""The ``COMPILED`` path (:mod:`rpfast.nn.gin.planner`): a whole GIN as one ``torch.library``
custom op pair, ``rpfast::gin_model`` and ``rpfast::gin_model_backward``, for ``torch.compile``.

The eager node (:mod:`rpfast.nn.gin.network`) holds Python objects (a binding, a C++ workspace)
that a custom op cannot take; here the tensors travel as flat lists, the model as an integer
key (its binding is found again through it), and the saved activations as an int64 handle.
The op is functional: it returns the updated BatchNorm statistics, which :func:`gin_model`
copies into the buffers. A flat-parameter model passes the views of its flat parameter, whose
view backward collects the gradients into it.
"""
import itertools
import weakref
from collections import OrderedDict
from typing import List, Optional, Sequence

import torch
from torch import Tensor

from rpfast.nn.gin.network import Call, GINLayerParams, NetworkWeights
from rpfast.nn.gin.norms import count_batches, step_momenta
from rpfast.ops.gin import graph_csr

__all__ = ["gin_model"]

_EMPTY = torch.empty(0)
_COUNT_ONE = torch.ones((), dtype=torch.int64)

# model key -> model, for the op to find the model's binding at run time
_models: "weakref.WeakValueDictionary[int, torch.nn.Module]" = weakref.WeakValueDictionary()
_keys = itertools.count(1)


def register(gin) -> None:
    """Give ``gin`` the integer key that names it to the op (a compiled graph holds it as a
    constant); called when a model is made or copied, never while tracing."""
    key = gin.__dict__["_compile_key"] = next(_keys)
    _models[key] = gin


# The activations of forwards whose backward has not run yet: handle -> (Call, ...). Forwards
# whose backward never runs (evaluation with gradients on) are dropped after _MAX_PENDING newer ones.
_MAX_PENDING = 16
_pending: "OrderedDict[int, tuple]" = OrderedDict()
_handles = itertools.count(1)


def _keep(entry: tuple) -> Tensor:
    handle = next(_handles)
    _pending[handle] = entry
    while len(_pending) > _MAX_PENDING:
        _pending.popitem(last=False)
    return torch.tensor(handle, dtype=torch.int64)


def _take(handle: Tensor) -> tuple:
    entry = _pending.pop(int(handle), None)
    if entry is None:
        raise RuntimeError(f"rpfast: the activations of this compiled GIN forward are gone (a second backward "
                           f"through it, or more than {_MAX_PENDING} forwards waiting for their backward)")
    return entry


def _layers(params: Sequence[Tensor], present: Sequence[bool], running: Sequence[Tensor], stages: Sequence[int],
            bn_eps: Sequence[float]) -> List[GINLayerParams]:
    """The layers from the op's flat lists: per layer ``[first, id_weight, eps, S - 1 weights,
    S gammas, S betas]`` (absent ones flagged off in ``present``), ``[mean, var]`` per stage."""
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


def _weights(key: int, params, present, running, stages, bn_eps, head) -> NetworkWeights:
    """The model's compiled-path binding, kept on the model (one per ``classify``) and made again
    when the memory of ``params`` or the layout differs. A model key whose model is gone binds
    for this call only."""
    in_dim, id_dim, classify, has_bias = head
    memory = (tuple(bn_eps), tuple(stages), tuple(present),  # bound with the tensors, as the memory is
              tuple((t.data_ptr(), t.dtype, tuple(t.shape), t.stride()) for t in params))
    gin = _models.get(key)
    store = gin.__dict__.setdefault("_compiled_weights", {}) if gin is not None else {}
    entry = store.get(classify)
    if entry is None or entry[0] != memory:
        tail = (1 + has_bias) if classify else 0
        layers = _layers(params[:len(params) - tail], present, running, stages, bn_eps)
        classifier = (params[len(params) - tail], params[-1] if has_bias else None) if classify else None
        entry = store[classify] = (memory, NetworkWeights(layers, in_dim, id_dim, classifier), list(params))
    return entry[1]


@torch.library.custom_op("rpfast::gin_model", mutates_args=())
def _gin_model(x: Optional[Tensor], ids: Optional[Tensor], graph: List[Tensor], params: List[Tensor],
               present: List[bool], running: List[Tensor], counters: List[Tensor], stages: List[int],
               momenta: List[float], bn_eps: List[float], head: List[int], model: int, training: bool,
               replicas: int) -> List[Tensor]:
    """``[out [R, B, C or D], the updated running statistics (flat), a handle to the activations]``."""
    weights = _weights(model, params, present, running, stages, bn_eps, head)
    updated = torch.cat(running)  # [mean, var] per stage: the layout set_statistics reads
    weights.kernel.set_statistics(updated)
    # NaN: BatchNorm's cumulative momentum, 1 / the steps counted before the op
    weights.kernel.set_momenta([1.0 / float(c) if m != m else m for m, c in zip(momenta, counters)])
    call = Call(weights, tuple(graph), x, ids, replicas, training)
    out = call.forward(save=True)
    return [out, updated, _keep((call,))]


@_gin_model.register_fake
def _(x, ids, graph, params, present, running, counters, stages, momenta, bn_eps, head, model, training, replicas):
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
    call, = _take(handle)
    grad_x, flat = call.backward(grad, x_needs_grad, [True] * len(call.weights.slots))
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


def gin_model(gin, h: Optional[Tensor], ids: Optional[Tensor], graph, replicas: int, classify: bool) -> Tensor:
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
    out, updated, _ = _gin_model(x, ids, graph_tensors, params, present, running, counters, stages, momenta, bn_eps,
                                 head, gin._compile_key, gin.training, replicas)
    if gin.training:
        with torch.no_grad():
            torch._foreach_copy_(running, list(updated.split_with_sizes([t.numel() for t in running])))
    return out
