"""The whole-GIN ops of :mod:`rpfast.ops.gin_network` as ``torch.library`` custom ops, for
compiled code: ``gin_network`` (the layers and their readouts; it returns the updated BatchNorm
statistics, copied into the buffers by the caller; its backward is not differentiable),
``gin_model`` (a whole :class:`rpfast.nn.GIN` with its input readouts and classifier in one C++
call; as ``gin_model_flat`` for a model with flat parameters).

Their eager forms are :mod:`rpfast.ops.gin_network_engine`'s autograd nodes, which hold Python
objects (a plan, a C++ workspace) that a custom op cannot take; here those travel as flat
argument lists and an int64 handle. CPU kernels only: on other devices (and with
``RPFAST_BACKEND=torch``) a GIN runs layer by layer on the registered ops.

These are the last ops not declared through :mod:`rpfast.ops._registry` (whose eager form is an
``autograd.Function`` over the op's own arguments): folding the whole-network node into one
declaration belongs with the GIN wing's one package (issue 26).
"""
import itertools
from collections import OrderedDict
from typing import List, Optional, Sequence

import torch
from torch import Tensor

from rpfast.ops.gin_network_engine import (
    FlatGradient,
    GINLayerParams,
    NetworkWeights,
    _compiled_forward,
    _forward,
    _Plan,
    compiled_backward,
    compiled_backward_flat,
    python_backward,
    runs_compiled,
)

__all__ = ["traced_gin_network", "traced_gin_model"]

_EMPTY = torch.empty(0)
_COUNT_ONE = torch.ones((), dtype=torch.int64)  # the counter of a stage without one (its momentum is never NaN)


# ------------------------------------------------------------------ a whole GIN network
# A layer's differentiable tensors travel as one flat list: per layer [first, id_weight, eps,
# S - 1 weights, S gammas, S betas], with ``stages`` giving S per layer; the running
# statistics as [mean_1, var_1, ..., mean_S, var_S] per layer; ``numbers`` the momenta then
# the BatchNorm epsilons of every stage.
def _with_gaps(tensors: Sequence[Tensor], present: Sequence[bool]) -> List[Optional[Tensor]]:
    """The flat parameter list with None where ``present`` is False (custom ops take no
    ``Tensor?[]`` that autograd tracks, so the absent entries travel as flags)."""
    out, k = [], 0
    for there in present:
        out.append(tensors[k] if there else None)
        k += there
    return out


def _layers(params: Sequence[Optional[Tensor]], running: Sequence[Tensor], stages: Sequence[int],
            numbers: Sequence[float]) -> List[GINLayerParams]:
    layers, p, r, n = [], 0, 0, 0
    for S in stages:
        first, id_weight, eps = params[p], params[p + 1], params[p + 2]
        weights = list(params[p + 3:p + 2 + S])
        gammas = list(params[p + 2 + S:p + 2 + 2 * S])
        betas = list(params[p + 2 + 2 * S:p + 2 + 3 * S])
        p += 2 + 3 * S
        layers.append(GINLayerParams(first, id_weight, eps, weights, gammas, betas, list(running[r:r + 2 * S:2]),
                                     list(running[r + 1:r + 2 * S:2]), list(numbers[n:n + S]),
                                     list(numbers[n + S:n + 2 * S])))
        r += 2 * S
        n += 2 * S
    return layers


def _saved_outputs(saved) -> List[Tensor]:
    out = []
    for _, z, stages in saved:
        out.append(z)
        for y, xhat, invstd in stages:
            out += [y, xhat, invstd]
    return out


def _saved_structure(outputs: Sequence[Tensor], x: Optional[Tensor], stages: Sequence[int]):
    saved, k, h = [], 0, x
    for S in stages:
        z = outputs[k]
        layer_stages = [tuple(outputs[k + 1 + 3 * s:k + 4 + 3 * s]) for s in range(S)]
        k += 1 + 3 * S
        saved.append((h, z, layer_stages))
        h = layer_stages[-1][0].view(z.shape)
    return saved


# Networks the C++ kernel runs (widths <= FUSED_MAX_WIDTH) keep their activations in a C++
# workspace; the forward returns a handle (an int64 scalar) to it, and the backward takes the
# workspace back. Forwards whose backward never runs (evaluation with gradients on) are
# forgotten after _MAX_PENDING newer ones.
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


# Functional (autograd formulas need it): the updated running statistics are outputs, which
# the caller copies into the BatchNorm buffers.
@torch.library.custom_op("rpfast::gin_network", mutates_args=())
def _gin_network(x: Optional[Tensor], ids: Optional[Tensor], graph: List[Tensor], params: List[Tensor],
                 present: List[bool], running: List[Tensor], stages: List[int], numbers: List[float], training: bool,
                 replicas: int) -> List[Tensor]:
    updated = [t.clone() for t in running]
    plan = _Plan(tuple(graph), _layers(_with_gaps(params, present), updated, stages, numbers), training, replicas)
    if runs_compiled(plan.layers):
        pooled, workspace = _compiled_forward(plan, x, ids, save=True)
        return [pooled] + updated + [_keep((workspace, x, ids))]  # x, ids: the workspace reads them
    pooled, saved = _forward(plan, x, ids, save=True)
    return [pooled] + updated + _saved_outputs(saved)


@_gin_network.register_fake
def _(x, ids, graph, params, present, running, stages, numbers, training, replicas):
    N, B = graph[0].shape[0] - 1, graph[4].shape[0] - 1
    layers = _layers(_with_gaps(params, present), running, stages, numbers)
    dtype = layers[0].gammas[0]
    widths = [layer.gammas[0].shape[0] for layer in layers]
    outputs = [dtype.new_empty((replicas, B, sum(widths)))] + [t.new_empty(t.shape) for t in running]
    if runs_compiled(layers):
        return outputs + [graph[0].new_empty(())]
    for H, S in zip(widths, stages):
        outputs.append(dtype.new_empty((replicas, N, H)))
        for _ in range(S):
            outputs += [dtype.new_empty((replicas * N, H)), dtype.new_empty((replicas * N, H)), dtype.new_empty((H,))]
    return outputs


@torch.library.custom_op("rpfast::gin_network_backward", mutates_args=())
def _gin_network_backward(grad: Tensor, x: Optional[Tensor], ids: Optional[Tensor], graph: List[Tensor],
                          params: List[Tensor], present: List[bool], running: List[Tensor], saved: List[Tensor],
                          stages: List[int], numbers: List[float], training: bool, replicas: int,
                          needs: List[bool]) -> List[Tensor]:
    """Gradients of ``x`` and of every present parameter (an empty tensor where ``needs`` is False)."""
    plan = _Plan(tuple(graph), _layers(_with_gaps(params, present), running, stages, numbers), training, replicas)
    slot_needs = [bool(need) for need in _with_gaps(needs[1:], present)]  # absent slots: None -> False
    if runs_compiled(plan.layers):
        workspace, x, _ = _take(saved[0])
        grad_x, grads = compiled_backward(plan, workspace, grad, x, needs[0], slot_needs)
        grads = [None if g is None else g.clone() for g in grads]  # views of one buffer: outputs may not alias
    else:
        grad_x, grads = python_backward(plan, _saved_structure(saved, x, stages), grad, ids, needs[0], slot_needs)
    grads = [g for g, there in zip(grads, present) if there]
    return [_EMPTY if g is None else g for g in [grad_x, *grads]]


@_gin_network_backward.register_fake
def _(grad, x, ids, graph, params, present, running, saved, stages, numbers, training, replicas, needs):
    tensors = [x, *params]
    return [t.new_empty(t.shape) if (t is not None and need) else grad.new_empty((0,))
            for t, need in zip(tensors, needs)]


def _network_setup(ctx, inputs, output):
    x, ids, graph, params, present, running, stages, numbers, training, replicas = inputs
    ctx.layout = (len(graph), len(params), len(running), list(present), list(stages), list(numbers), training,
                  replicas, x is not None, ids is not None)
    # the updated statistics (outputs), not the buffers: the caller copies into those in place
    ctx.save_for_backward(*([x] if x is not None else []), *([ids] if ids is not None else []), *graph, *params,
                          *output[1:])


def _network_backward(ctx, grads):
    n_graph, n_params, n_running, present, stages, numbers, training, replicas, has_x, has_ids = ctx.layout
    saved = list(ctx.saved_tensors)
    x = saved.pop(0) if has_x else None
    ids = saved.pop(0) if has_ids else None
    graph, params = saved[:n_graph], saved[n_graph:n_graph + n_params]
    running = saved[n_graph + n_params:n_graph + n_params + n_running]
    outputs = saved[n_graph + n_params + n_running:]
    needs = [has_x and ctx.needs_input_grad[0]] + [True] * n_params
    result = _gin_network_backward(grads[0], x, ids, graph, params, present, running, outputs, stages, numbers,
                                   training, replicas, needs)
    grad_x = result[0] if needs[0] else None
    none = [None]  # tensor-list inputs take a list of gradients of the same length
    return (grad_x, None, none * n_graph, list(result[1:]), None, none * n_running, None, None, None, None)


_gin_network.register_autograd(_network_backward, setup_context=_network_setup)


def traced_gin_network(x: Optional[Tensor], ids: Optional[Tensor], graph_tensors: Sequence[Tensor],
                layers: Sequence[GINLayerParams], training: bool, replicas: int) -> Tensor:
    """:func:`rpfast.ops.gin_network` as one traceable custom op (``graph_tensors`` =
    ``(in_rowptr, in_col, out_rowptr, out_col, ptr)``); returns the pooled ``[R, B, L * H]``."""
    slots = [t for layer in layers for t in layer.differentiable()]
    params, present = [t for t in slots if t is not None], [t is not None for t in slots]
    running = [t for layer in layers for pair in zip(layer.running_means, layer.running_vars) for t in pair]
    stages = [len(layer.gammas) for layer in layers]
    numbers = [float(v) for layer in layers for v in [*layer.momenta, *layer.bn_eps]]
    outputs = _gin_network(x, ids, list(graph_tensors), params, present, running, stages, numbers, training, replicas)
    if training:
        with torch.no_grad():
            for buffer, updated in zip(running, outputs[1:1 + len(running)]):
                buffer.copy_(updated)
    return outputs[0]


# ------------------------------------------------------------------ a whole GIN model
# The model's tensors are bound to C++ once (NetworkWeights) and found again by their
# addresses, shapes and strides; the BatchNorm statistics
# (fresh copies: the op is functional) are pointed at on every call. Bindings keep their
# tensors' storage alive, so only the most recent _MAX_BINDINGS are kept.
_MAX_BINDINGS = 8
_bindings: "OrderedDict[tuple, tuple]" = OrderedDict()  # key -> (NetworkWeights, its tensors, FlatGradient)


def _model_parts(params: Sequence[Tensor], present: Sequence[bool], running: Sequence[Tensor],
                 stages: Sequence[int], numbers: Sequence[float], head: Sequence[int]):
    """``(layers, classifier or None)`` from the op's flat arguments (see :func:`gin_model`)."""
    classify, has_bias = bool(head[2]), bool(head[3])
    tail = (1 + has_bias) if classify else 0
    layers = _layers(_with_gaps(params[:len(params) - tail], present), running, stages, numbers)
    classifier = None
    if classify:
        classifier = (params[len(params) - tail], params[-1] if has_bias else None)
    return layers, classifier


def _bound_eps(stages: Sequence[int], numbers: Sequence[float]) -> tuple:
    """The BatchNorm epsilons out of ``numbers`` (per layer the S momenta, then the S epsilons):
    a binding holds them, the momenta are passed per call."""
    bn_eps, n = [], 0
    for S in stages:
        bn_eps += numbers[n + S:n + 2 * S]
        n += 2 * S
    return tuple(bn_eps)


def _cached_binding(key: tuple, bind):
    """The cache entry for ``key``, made by ``bind()`` (``(NetworkWeights, the tensors it
    points into, anything else)``) when missing; the most recent ``_MAX_BINDINGS`` are kept."""
    entry = _bindings.get(key)
    if entry is not None:
        _bindings.move_to_end(key)
        return entry
    entry = _bindings[key] = bind()
    while len(_bindings) > _MAX_BINDINGS:
        _bindings.popitem(last=False)
    return entry


def _model_weights(params: Sequence[Tensor], present: Sequence[bool], running: Sequence[Tensor],
                   stages: Sequence[int], numbers: Sequence[float], head: Sequence[int]) -> NetworkWeights:
    """The binding of these tensors, found by the memory they occupy: a binding holds pointers
    and keeps its tensors (so their storage) alive, so a tensor at the same address, shape and
    strides is the same memory, whether it is the same tensor object or a fresh view of it."""
    key = (tuple(head), tuple(stages), tuple(present), _bound_eps(stages, numbers),
           tuple((t.data_ptr(), t.dtype, tuple(t.shape), t.stride()) for t in params))

    def bind():
        layers, classifier = _model_parts(params, present, running, stages, numbers, head)
        return (NetworkWeights(layers, head[0], input_readouts=True, id_dim=head[1], classifier=classifier,
                               cached_views=False), list(params), None)
    return _cached_binding(key, bind)[0]


def _flat_pieces(flat: Tensor, extra: Sequence[Tensor], spec: Sequence[int]) -> List[Tensor]:
    """The parameter tensors of :func:`gin_model`'s flat form: ``spec`` holds three ints per
    tensor, ``(offset, rows, columns)`` of a view of ``flat`` (``columns`` -1: 1-D ``[rows]``),
    or ``(-1, -1, -1)`` for the next tensor of ``extra`` (one outside ``flat``: a fixed eps)."""
    pieces, others = [], iter(extra)
    for k in range(0, len(spec), 3):
        offset, rows, cols = spec[k:k + 3]
        if offset < 0:
            pieces.append(next(others))
        elif cols < 0:
            pieces.append(flat[offset:offset + rows])
        else:
            pieces.append(flat[offset:offset + rows * cols].view(rows, cols))
    return pieces


def _flat_model_weights(flat: Tensor, extra: Sequence[Tensor], spec: Sequence[int], present: Sequence[bool],
                        running: Sequence[Tensor], stages: Sequence[int], numbers: Sequence[float],
                        head: Sequence[int]):
    """``(NetworkWeights, FlatGradient)`` of a model whose tensors are views of ``flat``
    (:func:`_flat_pieces`), found by ``flat``'s address and the layout: no per-tensor key."""
    key = ("flat", flat.data_ptr(), flat.dtype, flat.numel(), tuple(spec), tuple(head), tuple(stages),
           tuple(present), _bound_eps(stages, numbers),
           tuple((t.data_ptr(), t.dtype, tuple(t.shape), t.stride()) for t in extra))

    def bind():
        params = _flat_pieces(flat, extra, spec)
        layers, classifier = _model_parts(params, present, running, stages, numbers, head)
        weights = NetworkWeights(layers, head[0], input_readouts=True, id_dim=head[1], classifier=classifier,
                                 cached_views=False)
        return weights, [flat, *extra], FlatGradient(weights, flat)
    weights, _, mapping = _cached_binding(key, bind)
    return weights, mapping


# Functional (autograd formulas need it): the updated running statistics come back in one flat
# tensor, which the caller copies into the BatchNorm buffers; the gradients too come back in
# one flat tensor (custom-op outputs may not alias each other), split by the autograd formula.
@torch.library.custom_op("rpfast::gin_model", mutates_args=())
def _gin_model(x: Optional[Tensor], ids: Optional[Tensor], graph: List[Tensor], params: List[Tensor],
               present: List[bool], running: List[Tensor], counters: List[Tensor], stages: List[int],
               numbers: List[float], head: List[int], training: bool, replicas: int) -> List[Tensor]:
    weights = _model_weights(params, present, running, stages, numbers, head)
    return _run_model(weights, None, x, ids, graph, running, counters, stages, numbers, training, replicas)


def _run_model(weights: NetworkWeights, mapping, x, ids, graph, running, counters, stages, numbers, training,
               replicas) -> List[Tensor]:
    """The forward of :func:`_gin_model` and :func:`_gin_model_flat` on a bound model:
    ``[out, the updated running statistics, a handle to the activations]``."""
    updated = torch.cat(running)  # [mean, var] per stage: the layout set_statistics reads
    momenta, n = [], 0
    for S in stages:  # numbers: per layer the S momenta, then the S BatchNorm epsilons
        momenta += numbers[n:n + S]
        n += 2 * S
    # NaN: BatchNorm's cumulative momentum, 1 / the (already counted) steps
    momenta = [1.0 / float(counter) if m != m else m for m, counter in zip(momenta, counters)]
    weights.kernel.set_statistics(updated, momenta)
    plan = _Plan(tuple(graph), weights.layers, training, replicas, weights)
    out, workspace = _compiled_forward(plan, x, ids, save=True)
    return [out, updated, _keep((workspace, plan, x, ids, mapping))]  # x, ids: the workspace reads them


@_gin_model.register_fake
def _(x, ids, graph, params, present, running, counters, stages, numbers, head, training, replicas):
    return _fake_model_outputs(params, present, running, stages, numbers, head, graph, replicas)


def _fake_model_outputs(params, present, running, stages, numbers, head, graph, replicas) -> List[Tensor]:
    B = graph[4].shape[0] - 1
    layers, classifier = _model_parts(params, present, running, stages, numbers, head)
    width = classifier[0].shape[0] if classifier is not None else \
        head[0] + head[1] + sum(layer.gammas[0].shape[0] for layer in layers)
    return [running[0].new_empty((replicas, B, width)), running[0].new_empty((sum(t.numel() for t in running),)),
            graph[0].new_empty(())]


@torch.library.custom_op("rpfast::gin_model_backward", mutates_args=())
def _gin_model_backward(grad: Tensor, handle: Tensor, x: Optional[Tensor], params: List[Tensor],
                        x_needs_grad: bool) -> List[Tensor]:
    """``[grad_x (empty unless x_needs_grad), the gradients of params flattened one after another]``."""
    entry = _take(handle)  # (workspace, plan, x, ids, mapping): held until the backward ran, which reads x and ids
    workspace, plan, x = entry[:3]
    grad_x, flat = compiled_backward_flat(plan, workspace, grad, x, x_needs_grad, [True] * len(plan.weights.slots))
    del entry
    return [grad_x if grad_x is not None else _EMPTY, flat]


@_gin_model_backward.register_fake
def _(grad, handle, x, params, x_needs_grad):
    first = x.new_empty(x.shape) if x is not None and x_needs_grad else grad.new_empty((0,))
    return [first, grad.new_empty((sum(p.numel() for p in params),))]


def _model_setup(ctx, inputs, output):
    x, ids, graph, params, present, running, counters, stages, numbers, head, training, replicas = inputs
    ctx.layout = (len(graph), len(params), len(running), len(counters), x is not None)
    ctx.save_for_backward(*([x] if x is not None else []), *params, output[-1])


def _model_backward(ctx, grads):
    n_graph, n_params, n_running, n_counters, has_x = ctx.layout
    saved = list(ctx.saved_tensors)
    x = saved.pop(0) if has_x else None
    params, handle = saved[:n_params], saved[n_params]
    x_needs_grad = has_x and ctx.needs_input_grad[0]
    grad_x, flat = _gin_model_backward(grads[0], handle, x, params, x_needs_grad)
    pieces = flat.split_with_sizes([p.numel() for p in params])
    none = [None]  # tensor-list inputs take a list of gradients of the same length
    return (grad_x if x_needs_grad else None, None, none * n_graph, [g.view(p.shape) for g, p in zip(pieces, params)],
            None, none * n_running, none * n_counters, None, None, None, None, None)


_gin_model.register_autograd(_model_backward, setup_context=_model_setup)


# The same op for a model whose parameters are views of one flat parameter
# (GIN(flat_parameters=True)): the flat tensor is the op's one differentiable weight and gets
# one flat gradient, so compiled code neither views nor checks dozens of tensors per step.
@torch.library.custom_op("rpfast::gin_model_flat", mutates_args=())
def _gin_model_flat(x: Optional[Tensor], ids: Optional[Tensor], graph: List[Tensor], flat: Tensor,
                    extra: List[Tensor], spec: List[int], present: List[bool], running: List[Tensor],
                    counters: List[Tensor], stages: List[int], numbers: List[float], head: List[int],
                    training: bool, replicas: int) -> List[Tensor]:
    weights, mapping = _flat_model_weights(flat, extra, spec, present, running, stages, numbers, head)
    return _run_model(weights, mapping, x, ids, graph, running, counters, stages, numbers, training, replicas)


@_gin_model_flat.register_fake
def _(x, ids, graph, flat, extra, spec, present, running, counters, stages, numbers, head, training, replicas):
    return _fake_model_outputs(_flat_pieces(flat, extra, spec), present, running, stages, numbers, head, graph,
                               replicas)


@torch.library.custom_op("rpfast::gin_model_flat_backward", mutates_args=())
def _gin_model_flat_backward(grad: Tensor, handle: Tensor, x: Optional[Tensor], flat: Tensor,
                             x_needs_grad: bool) -> List[Tensor]:
    """``[grad_x (empty unless x_needs_grad), the gradient of flat]``."""
    entry = _take(handle)  # (workspace, plan, x, ids, mapping): held until the backward ran, which reads x and ids
    workspace, plan, x, _, mapping = entry
    grad_x, network = compiled_backward_flat(plan, workspace, grad, x, x_needs_grad, mapping.needs)
    del entry
    return [grad_x if grad_x is not None else _EMPTY, mapping(network)]


@_gin_model_flat_backward.register_fake
def _(grad, handle, x, flat, x_needs_grad):
    first = x.new_empty(x.shape) if x is not None and x_needs_grad else grad.new_empty((0,))
    return [first, flat.new_empty(flat.shape)]


def _model_flat_setup(ctx, inputs, output):
    x, ids, graph, flat, extra, spec, present, running, counters, stages, numbers, head, training, replicas = inputs
    ctx.layout = (len(graph), len(extra), len(running), len(counters), x is not None)
    ctx.save_for_backward(*([x] if x is not None else []), flat, output[-1])


def _model_flat_backward(ctx, grads):
    n_graph, n_extra, n_running, n_counters, has_x = ctx.layout
    saved = list(ctx.saved_tensors)
    x = saved.pop(0) if has_x else None
    flat, handle = saved
    x_needs_grad = has_x and ctx.needs_input_grad[0]
    grad_x, grad_flat = _gin_model_flat_backward(grads[0], handle, x, flat, x_needs_grad)
    none = [None]  # tensor-list inputs take a list of gradients of the same length
    return (grad_x if x_needs_grad else None, None, none * n_graph, grad_flat, none * n_extra, None, None,
            none * n_running, none * n_counters, None, None, None, None, None)


_gin_model_flat.register_autograd(_model_flat_backward, setup_context=_model_flat_setup)


def traced_gin_model(x: Optional[Tensor], ids: Optional[Tensor], graph_tensors: Sequence[Tensor],
              layers: Sequence[GINLayerParams], classifier: Optional[tuple], in_dim: int, id_dim: int,
              training: bool, replicas: int, flat: Optional[tuple] = None) -> Tensor:
    """:func:`rpfast.ops.gin_network.gin_model` as one traceable custom op: ``graph_tensors`` =
    ``(in_rowptr, in_col, out_rowptr, out_col, ptr)``, ``classifier`` = ``(weight, bias or None)``
    or None (then the embedding is returned). The caller counts BatchNorm steps and passes
    the step's momenta (``layers[i].momenta``; NaN for a cumulative one, with ``counters``); the
    op returns the updated running statistics, copied here into the buffers.

    ``flat``: ``(flat_parameter, offsets)`` for a model whose tensors are views of one flat
    parameter: ``offsets`` gives, per tensor in the op's order (per layer the present
    :meth:`GINLayerParams.differentiable` tensors, then the classifier's), where it starts in
    ``flat_parameter``, or None for one outside it (a fixed eps). The tensors in ``layers`` and
    ``classifier`` then give only their shapes (and the ones outside), and the gradient goes to
    ``flat_parameter`` as one tensor (:func:`_gin_model_flat`)."""
    slots = [t for layer in layers for t in layer.differentiable()]
    params, present = [t for t in slots if t is not None], [t is not None for t in slots]
    head = [in_dim, id_dim, int(classifier is not None), int(classifier is not None and classifier[1] is not None)]
    if classifier is not None:
        params += [classifier[0]] + ([classifier[1]] if classifier[1] is not None else [])
    running = [t for layer in layers for pair in zip(layer.running_means, layer.running_vars) for t in pair]
    stages = [len(layer.gammas) for layer in layers]
    numbers = [float(v) for layer in layers for v in [*layer.momenta, *layer.bn_eps]]
    counters = [c if c is not None else _COUNT_ONE for layer in layers
                for c in (layer.counters or [None] * len(layer.gammas))]
    if flat is None:
        out, updated, _ = _gin_model(x, ids, list(graph_tensors), params, present, running, counters, stages,
                                     numbers, head, training, replicas)
    else:
        flat_tensor, extra, spec = _flat_spec(params, *flat)
        out, updated, _ = _gin_model_flat(x, ids, list(graph_tensors), flat_tensor, extra, spec, present, running,
                                          counters, stages, numbers, head, training, replicas)
    if training:
        with torch.no_grad():
            torch._foreach_copy_(running, list(updated.split_with_sizes([t.numel() for t in running])))
    return out


def _flat_spec(params: Sequence[Tensor], flat: Tensor, offsets: Sequence[Optional[int]]):
    """``(flat, extra, spec)`` for :func:`_gin_model_flat` (see :func:`_flat_pieces`) from the
    op's tensors and their ``offsets`` in ``flat`` (None: passed as they are, in ``extra``)."""
    if not isinstance(flat, Tensor) or flat.dim() != 1:
        raise ValueError(f"flat must be a 1-D tensor (the model's flat parameter), got "
                         f"{tuple(flat.shape) if isinstance(flat, Tensor) else type(flat).__name__}")
    if len(offsets) != len(params):
        raise ValueError(f"offsets must give one offset per tensor ({len(params)}), got {len(offsets)}")
    extra, spec = [], []
    for tensor, offset in zip(params, offsets):
        if offset is None:
            extra.append(tensor)
            spec += [-1, -1, -1]
            continue
        if tensor.dim() not in (1, 2) or not 0 <= offset <= flat.shape[0] - tensor.numel():
            raise ValueError(f"a tensor of shape {tuple(tensor.shape)} does not fit at offset {offset} of a flat "
                             f"parameter of {flat.shape[0]} elements")
        spec += [offset, tensor.shape[0], tensor.shape[1] if tensor.dim() == 2 else -1]
    return flat, extra, spec
