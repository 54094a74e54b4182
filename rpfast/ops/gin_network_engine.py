"""The machinery of a whole GIN network as one autograd node (:mod:`rpfast.ops.gin_network`
holds the public ops): layer tensors, the plan of a call, the C++ network's bindings and
workspaces, the layer-by-layer forward and backward, and the eager autograd nodes.

A GIN training step on the RP paper's graphs (tens of nodes, width 16) is a few hundred
tiny tensor operations; their dispatch, autograd bookkeeping and argument checks cost far
more than the arithmetic. Here the whole forward is one C++ call and the whole backward
another (``GINNetwork``, for widths up to ``FUSED_MAX_WIDTH``; wider networks run the same
kernels layer by layer from Python, where the per-call cost no longer matters), and the
autograd graph holds one node for the whole network.
"""
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import torch
from torch import Tensor
from torch.autograd.function import once_differentiable

from rpfast.data import GraphBatch
from rpfast import _backend
from rpfast.ops.dense import rows_of, rows_product
from rpfast.ops.norm import bn_relu_backward, bn_relu_forward
from rpfast._validation import check_count, require_flag

__all__ = ["GINLayerParams", "NetworkWeights", "FlatGradient", "FUSED_MAX_WIDTH", "runs_compiled"]


@dataclass
class GINLayerParams:
    """One GIN layer's tensors (see :func:`gin_network`).

    ``first`` ``[H, F]`` maps the layer's input features (None: the layer has none, i.e. the
    first layer of a network without node features); ``id_weight`` ``[m, H]`` holds the rows
    gathered for one-hot IDs (first layer only, else None); ``eps`` a one-element tensor;
    ``weights`` the ``S - 1`` bias-free maps ``[H, H]`` between the MLP's stages; per stage
    BatchNorm affine tensors ``gammas``/``betas`` and statistics ``running_means``/
    ``running_vars`` ``[H]``, with the step's ``momenta`` and variance ``bn_eps``.

    ``counters`` (optional, per stage an int64 ``num_batches_tracked`` tensor or None): a
    training forward adds one to each, as a BatchNorm module counts its steps, and a momentum
    of NaN then means the cumulative average ``1 / count`` (BatchNorm's ``momentum=None``).
    Without counters the caller counts and passes the step's momenta.
    """

    first: Optional[Tensor]
    id_weight: Optional[Tensor]
    eps: Tensor
    weights: Sequence[Tensor]
    gammas: Sequence[Tensor]
    betas: Sequence[Tensor]
    running_means: Sequence[Tensor]
    running_vars: Sequence[Tensor]
    momenta: Sequence[float]
    bn_eps: Sequence[float]
    counters: Optional[Sequence[Optional[Tensor]]] = None

    def differentiable(self) -> List[Optional[Tensor]]:
        """The tensors gradients flow to, in the node's input order."""
        return [self.first, self.id_weight, self.eps, *self.weights, *self.gammas, *self.betas]


class _Plan:
    """What the forward needs besides the differentiable tensors: graph CSRs, the layers (and
    their C++ binding, :class:`NetworkWeights`), the mode and the replica count."""

    def __init__(self, graph, layers: Sequence[GINLayerParams], training: bool, replicas: int,
                 weights: Optional["NetworkWeights"] = None):
        """``graph``: a GraphBatch, or the tensors ``(in_rowptr, in_col, out_rowptr, out_col, ptr)``.
        ``weights``: the layers bound once (a model's cached binding); else bound on first use."""
        if isinstance(graph, GraphBatch):
            graph = (graph.t_rowptr, graph.t_col, graph.rowptr, graph.col, graph.ptr)
        self.in_rowptr, self.in_col, self.out_rowptr, self.out_col, self.ptr = graph
        self.num_graphs = self.ptr.shape[0] - 1
        self.layers = layers
        self.stages = [len(layer.gammas) for layer in layers]
        self.training = training
        self.replicas = replicas
        self._weights = weights
        self._graph_buffers = None

    @property
    def graph_buffers(self) -> tuple:
        """The CSRs and ``ptr`` as kernel buffers, converted once for forward and backward."""
        if self._graph_buffers is None:
            graph = _backend.prepare((self.in_rowptr, self.in_col, self.out_rowptr, self.out_col, self.ptr),
                                     "gin_network")
            self._graph_buffers = tuple(_backend.Buffers(g, graph.device) for g in graph.value)
        return self._graph_buffers

    @property
    def weights(self) -> "NetworkWeights":
        """The layers' tensors bound to the C++ network (the network's output is the layers'
        pooled states)."""
        if self._weights is None:
            x_layer = self.layers[0].first
            self._weights = NetworkWeights(self.layers, 0 if x_layer is None else x_layer.shape[1])
        return self._weights


def _momentum(layer: GINLayerParams, stage: int, training: bool) -> float:
    """Stage ``stage``'s BatchNorm momentum; with counters a training step is counted first
    (NaN: the cumulative average, as the C++ network does)."""
    counter = layer.counters[stage] if layer.counters is not None else None
    if training and counter is not None:
        counter.add_(1)
    momentum = float(layer.momenta[stage])
    if momentum != momentum:  # NaN
        if counter is None:
            raise ValueError("a cumulative BatchNorm momentum (NaN) needs the step counter")
        momentum = 1.0 / float(counter)
    return momentum


def _forward(plan: _Plan, x: Optional[Tensor], ids: Optional[Tensor], save: bool):
    """Runs the network; returns the pooled states ``[R, B, L * H]`` and what backward needs."""
    R = plan.replicas
    h = x  # [R or 1, N, F] or None
    pooled, saved = [], []
    for layer in plan.layers:
        z = None
        if layer.first is not None:
            z = rows_product.run(h, layer.first.t())
        if layer.id_weight is not None:
            gathered = layer.id_weight.detach()[ids]  # [R, N, H]: onehot(ids) @ W, never built
            z = gathered if z is None else gathered.add_(z)  # z may be one copy for all replicas
        if z.shape[0] != R:
            z = z.expand(R, -1, -1)
        z = z.contiguous()
        aggregated = torch.empty_like(z)
        _backend.call("gin_aggregate", z, plan.in_rowptr, plan.in_col, float(layer.eps.detach()), aggregated)
        current = rows_of(aggregated)
        stages = []
        for s in range(len(layer.gammas)):
            if s:
                current = rows_product.run(current, layer.weights[s - 1].t())
            y, xhat, invstd = bn_relu_forward(current, layer.gammas[s].detach(), layer.betas[s].detach(),
                                              layer.running_means[s], layer.running_vars[s], plan.training,
                                              _momentum(layer, s, plan.training), layer.bn_eps[s])
            stages.append((y, xhat, invstd))
            current = y
        new_h = current.view(z.shape)
        out = z.new_empty((R, plan.num_graphs, z.shape[2]))
        _backend.call("segment_sum", new_h, plan.ptr, out)
        pooled.append(out)
        if save:
            saved.append((h, z, stages))
        h = new_h
    return torch.cat(pooled, dim=-1), saved


# Widths up to this run in one C++ call; wider layers call the same kernels one by one
# (python_backward / _forward, also the reference the C++ network is tested against).
FUSED_MAX_WIDTH = 64
_POOL_SIZE = 4
_free_networks = {torch.float32: [], torch.float64: []}


class _Workspace:
    """A compiled GINNetwork on loan to one forward (and its backward): it holds the saved
    activations, and its buffers return to a small pool for the next step when the
    autograd graph that owns the loan is freed (no fresh pages every step)."""

    def __init__(self, dtype: torch.dtype):
        self.dtype = dtype
        pool = _free_networks[dtype]
        self.kernel = pool.pop() if pool else _backend.create(
            "GINNetworkF64" if dtype == torch.float64 else "GINNetworkF32")

    def __del__(self):
        kernel = getattr(self, "kernel", None)  # None if __init__ failed
        pool = _free_networks.get(getattr(self, "dtype", None))
        if kernel is not None and pool is not None and len(pool) < _POOL_SIZE:
            pool.append(kernel)


def _persistent_view(t: Optional[Tensor]):
    """A parameter's kernel buffer from the process-wide cache (per-call bindings reuse them)."""
    return None if t is None else _backend.persistent_buffer(t, "gin_network")


def _own_view(t: Optional[Tensor]):
    """A kernel buffer held only by the binding that asks for it (which then keeps ``t`` alive)."""
    return None if t is None else _backend.prepare(t, "gin_network").value


def _layer_tuple(layer: GINLayerParams, view=_persistent_view) -> tuple:
    """The tuple the C++ network binds for one layer, its tensors as kernel buffers."""
    counters = layer.counters if layer.counters is not None else [None] * len(layer.gammas)
    return (view(layer.first), view(layer.id_weight), view(layer.eps),
            [view(w) for w in layer.weights], [view(g) for g in layer.gammas], [view(b) for b in layer.betas],
            [view(m) for m in layer.running_means], [view(v) for v in layer.running_vars],
            [float(m) for m in layer.momenta], [float(e) for e in layer.bn_eps], [view(c) for c in counters])


class NetworkWeights:
    """A network's tensors bound to the C++ kernels once (pointers into their storage, so the
    optimizer's in-place updates are seen at every call), for the layers alone or for a whole
    GIN model: ``input_readouts`` puts the input's sum readout (``in_dim`` columns) and the
    per-graph ID histogram (``id_dim`` columns) before the layers' pooled states, and a
    ``classifier = (weight [C, D], bias [C] or None)`` turns the embedding into logits.

    ``tensors``: the differentiable tensors in the order the backward returns their gradients
    (:meth:`GINLayerParams.differentiable` per layer, then the classifier's weight and bias);
    None where a layer has no such tensor.
    """

    def __init__(self, layers: Sequence[GINLayerParams], in_dim: int, input_readouts: bool = False,
                 id_dim: int = 0, classifier: Optional[tuple] = None, cached_views: bool = True):
        """``cached_views``: take the tensors' buffers from the process-wide cache (a binding
        made for one call); False for a binding kept as long as its model (the model's
        tensors are then freed with the binding)."""
        self.layers = layers
        self.dtype = layers[0].gammas[0].dtype
        cls_weight, cls_bias = classifier if classifier is not None else (None, None)
        self.tensors = [t for layer in layers for t in layer.differentiable()]
        if classifier is not None:
            self.tensors += [cls_weight, cls_bias]

        view = _persistent_view if cached_views else _own_view
        self.kernel = _backend.create("GINWeightsF64" if self.dtype == torch.float64 else "GINWeightsF32",
                                      [_layer_tuple(layer, view) for layer in layers], in_dim, input_readouts, id_dim,
                                      view(cls_weight), view(cls_bias))
        self.slots = list(self.kernel.slots)
        self.total = sum(self.slots)
        self.output_width = self.kernel.output_width
        self._shapes = [None if t is None else (tuple(t.shape) if t.dim() > 1 else None) for t in self.tensors]

    def gradients(self, flat: Tensor, needs: Sequence[bool]) -> List[Optional[Tensor]]:
        """The per-tensor gradients, views of the flat buffer the C++ backward wrote (None
        where ``needs`` is False or the tensor is absent)."""
        pieces = flat.split_with_sizes(self.slots)
        return [None if not need or t is None else (piece.view(shape) if shape is not None else piece)
                for piece, shape, need, t in zip(pieces, self._shapes, needs, self.tensors)]


def _compiled_forward(plan: _Plan, x: Optional[Tensor], ids: Optional[Tensor], save: bool):
    """The C++ network's forward; returns its output (see :class:`NetworkWeights`) and the
    workspace holding the saved activations."""
    weights = plan.weights
    out = torch.empty((plan.replicas, plan.num_graphs, weights.output_width), dtype=weights.dtype)
    workspace = _Workspace(weights.dtype)
    workspace.kernel.forward(x, ids, plan.replicas, *plan.graph_buffers, weights.kernel, plan.training, save, out)
    return out, workspace


class _GINNetworkCompiled(torch.autograd.Function):
    @staticmethod
    def forward(ctx, plan: _Plan, x: Optional[Tensor], ids: Optional[Tensor], *params):
        out, workspace = _compiled_forward(plan, x, ids, save=True)
        ctx.plan, ctx.workspace, ctx.x, ctx.ids = plan, workspace, x, ids  # the workspace reads x and ids
        # the backward reads x, ids and the weights again through pointers: autograd's check that
        # none changed in place in between (saved tensors), and the weights' version counters
        ctx.save_for_backward(*[t for t in (x, ids) if t is not None])
        ctx.versions = [t._version for t in params if t is not None]
        return out

    @staticmethod
    @once_differentiable  # the hand-written backward is not itself differentiable: a clear error
    def backward(ctx, grad: Tensor):
        ctx.saved_tensors  # raises if x or ids were modified in place since the forward
        params = [t for t in ctx.plan.weights.tensors if t is not None]
        if [t._version for t in params] != ctx.versions:
            raise RuntimeError("one of the variables needed for gradient computation has been modified by an "
                               "inplace operation: a weight of the GIN changed between its forward and backward "
                               "(an optimizer step before backward?); call backward first")
        x_needs_grad = ctx.x is not None and ctx.needs_input_grad[1]
        grad_x, flat = compiled_backward(ctx.plan, ctx.workspace, grad, ctx.x, x_needs_grad, ctx.needs_input_grad[3:])
        return (None, grad_x, None, *flat)


def compiled_backward(plan: _Plan, workspace: "_Workspace", grad: Tensor, x: Optional[Tensor], x_needs_grad: bool,
                      needs: Sequence[bool]):
    """The C++ network's backward from the activations ``workspace`` saved: ``(grad_x, gradients
    of :attr:`NetworkWeights.tensors`)``, None where ``needs`` is False."""
    needs = [bool(need) for need in needs]
    grad_x, flat = compiled_backward_flat(plan, workspace, grad, x, x_needs_grad, needs)
    return grad_x, plan.weights.gradients(flat, needs)


def compiled_backward_flat(plan: _Plan, workspace: "_Workspace", grad: Tensor, x: Optional[Tensor],
                           x_needs_grad: bool, needs: Sequence[bool]):
    """:func:`compiled_backward` with the gradients in one flat tensor: the slots of
    :attr:`NetworkWeights.slots` in order (absent tensors have empty slots, so with every
    ``needs`` True it is the present tensors' gradients flattened one after another)."""
    weights = plan.weights
    flat = torch.empty(weights.total, dtype=weights.dtype)
    grad_x = torch.empty_like(x) if x_needs_grad else None
    workspace.kernel.backward(grad.contiguous(), *plan.graph_buffers, weights.kernel, plan.training, bytes(needs),
                              flat, grad_x)
    return grad_x, flat


class FlatGradient:
    """How the C++ network's flat gradient (the slots of :attr:`NetworkWeights.slots`) maps onto
    a model's flat parameter when the bound tensors are views of it (``GIN(flat_parameters=True)``).

    ``needs``: per bound tensor, whether it lies in ``flat`` (a fixed eps buffer does not);
    ``index``: ``[P]`` for every element of ``flat`` its position in the network's gradient with
    one zero appended (elements the network does not produce, say a classifier applied outside
    it, read the zero), or None where the two layouts are the same.
    """

    def __init__(self, weights: "NetworkWeights", flat: Tensor):
        if not isinstance(weights, NetworkWeights):
            raise TypeError(f"weights must be rpfast.ops.gin_network.NetworkWeights, got {type(weights).__name__}")
        if not isinstance(flat, Tensor) or flat.dim() != 1 or flat.dtype != weights.dtype:
            raise ValueError(f"flat must be a 1-D {weights.dtype} tensor holding the bound tensors, got "
                             f"{tuple(flat.shape) if isinstance(flat, Tensor) else type(flat).__name__}")
        base, size, item = flat.data_ptr(), flat.numel(), flat.element_size()
        index = torch.full((size,), weights.total, dtype=torch.int64)
        self.needs, slot = [], 0
        for tensor, width in zip(weights.tensors, weights.slots):
            offset = (tensor.data_ptr() - base) // item if tensor is not None else -1
            inside = tensor is not None and tensor.is_contiguous() and 0 <= offset and offset + width <= size \
                and tensor.untyped_storage().data_ptr() == flat.untyped_storage().data_ptr()
            self.needs.append(inside)
            if inside:
                index[offset:offset + width] = torch.arange(slot, slot + width)
            slot += width
        same = size == weights.total and bool((index == torch.arange(size)).all())
        self.index = None if same else index

    def __call__(self, network_gradient: Tensor) -> Tensor:
        """The flat parameter's gradient from the network's."""
        if self.index is None:
            return network_gradient
        return torch.cat([network_gradient, network_gradient.new_zeros(1)])[self.index]


class _GINNetworkFlat(torch.autograd.Function):
    """:class:`_GINNetworkCompiled` for a model whose tensors are views of one flat parameter:
    that parameter is the node's only weight input and receives the one flat gradient."""

    @staticmethod
    def forward(ctx, plan: _Plan, x: Optional[Tensor], ids: Optional[Tensor], flat: Tensor, mapping: FlatGradient):
        out, workspace = _compiled_forward(plan, x, ids, save=True)
        ctx.plan, ctx.workspace, ctx.x, ctx.mapping = plan, workspace, x, mapping
        ctx.save_for_backward(*[t for t in (x, ids) if t is not None], flat)  # flat: autograd's in-place check
        return out

    @staticmethod
    @once_differentiable
    def backward(ctx, grad: Tensor):
        ctx.saved_tensors  # raises if x, ids or the parameters were modified in place since the forward
        x_needs_grad = ctx.x is not None and ctx.needs_input_grad[1]
        grad_x, network = compiled_backward_flat(ctx.plan, ctx.workspace, grad, ctx.x, x_needs_grad,
                                                 ctx.mapping.needs if ctx.needs_input_grad[3] else
                                                 [False] * len(ctx.mapping.needs))
        return None, grad_x, None, ctx.mapping(network) if ctx.needs_input_grad[3] else None, None


def runs_compiled(layers: Sequence[GINLayerParams]) -> bool:
    """Whether the network runs in C++ end to end (every width up to FUSED_MAX_WIDTH)."""
    return max(max(layer.gammas[0].shape[0], 0 if layer.first is None else layer.first.shape[1])
               for layer in layers) <= FUSED_MAX_WIDTH


class _GINNetwork(torch.autograd.Function):
    @staticmethod
    def forward(ctx, plan: _Plan, x: Optional[Tensor], ids: Optional[Tensor], *params):
        embedding, saved = _forward(plan, x, ids, save=True)
        ctx.plan, ctx.saved = plan, saved
        ctx.x_needs_grad = x is not None and ctx.needs_input_grad[1]
        ctx.ids = ids
        return embedding

    @staticmethod
    @once_differentiable  # the hand-written backward is not itself differentiable: a clear error
    def backward(ctx, grad: Tensor):
        needs = list(ctx.needs_input_grad[3:])
        grad_x, flat = python_backward(ctx.plan, ctx.saved, grad, ctx.ids, ctx.x_needs_grad, needs)
        return (None, grad_x, None, *flat)


def python_backward(plan: _Plan, saved, grad: Tensor, ids: Optional[Tensor], x_needs_grad: bool,
                    needs: Sequence[bool]):
    """The backward of :func:`_forward`'s network: ``(grad_x, gradients of the layers' tensors in
    :meth:`GINLayerParams.differentiable` order)``, None where ``needs`` is False."""
    R = plan.replicas
    grad = grad.contiguous()
    needs = iter(needs)
    wanted = [[next(needs) for _ in layer.differentiable()] for layer in plan.layers]
    grads: List[List[Optional[Tensor]]] = []
    g_h = None  # gradient reaching the current layer's output from the layer above
    grad_x = None
    offset = grad.shape[-1]
    for index in range(len(plan.layers) - 1, -1, -1):
        layer, (h_in, z, stages), want = plan.layers[index], saved[index], wanted[index]
        S = len(stages)
        H = z.shape[2]
        offset -= H
        readout = grad[:, :, offset:offset + H].contiguous()
        g = torch.empty_like(z)
        _backend.call("segment_broadcast", readout, plan.ptr, g)
        if g_h is not None:
            g.add_(g_h)
        g = rows_of(g)
        grad_weights: List[Optional[Tensor]] = [None] * len(layer.weights)
        grad_gammas: List[Optional[Tensor]] = [None] * S
        grad_betas: List[Optional[Tensor]] = [None] * S
        for s in range(S - 1, -1, -1):
            y, xhat, invstd = stages[s]
            g_pre, grad_gammas[s], grad_betas[s] = bn_relu_backward(
                g, y, xhat, layer.gammas[s].detach(), invstd, plan.training)
            if s:
                weight = layer.weights[s - 1]
                if want[2 + s]:
                    grad_weights[s - 1] = torch.empty_like(weight)
                    _backend.call("matmul_tn", g_pre, stages[s - 1][0], grad_weights[s - 1])
                g = rows_product.run(g_pre, weight)
            else:
                g = g_pre
        grad_gammas = [g if w else None for g, w in zip(grad_gammas, want[2 + S:2 + 2 * S])]
        grad_betas = [g if w else None for g, w in zip(grad_betas, want[2 + 2 * S:])]
        g_a = g.view(z.shape)
        g_z = torch.empty_like(g_a)
        grad_eps = None
        if want[2]:  # grad_eps = sum(g_a * z), in the same pass over g_a
            grad_eps = torch.full_like(layer.eps, _backend.call(
                "gin_aggregate_adjoint", g_a, plan.out_rowptr, plan.out_col, float(layer.eps.detach()), z, g_z))
        else:
            _backend.call("gin_aggregate", g_a, plan.out_rowptr, plan.out_col, float(layer.eps.detach()), g_z)
        grad_first = grad_ids = None
        if layer.first is not None:
            # a broadcast input (one copy for all R replicas) collects the replicas' gradients
            g_in = g_z if h_in.shape[0] == R else g_z.sum(dim=0, keepdim=True)
            if want[0]:
                grad_first = torch.empty_like(layer.first)
                _backend.call("matmul_tn", rows_of(g_in), rows_of(h_in.contiguous()), grad_first)
            if index > 0:
                g_h = rows_product.run(g_in, layer.first)
            elif x_needs_grad:
                grad_x = rows_product.run(g_in, layer.first)
        if layer.id_weight is not None and want[1]:
            grad_ids = layer.id_weight.new_empty(layer.id_weight.shape)
            _backend.call("scatter_rows_sum", ids.reshape(-1), rows_of(g_z), grad_ids)
        grads.append([grad_first, grad_ids, grad_eps, *grad_weights, *grad_gammas, *grad_betas])
    return grad_x, [g for layer_grads in reversed(grads) for g in layer_grads]
