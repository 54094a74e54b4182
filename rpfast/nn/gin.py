"""GIN (Xu et al., ICLR 2019) as used by the RP paper, with optional one-hot node IDs."""
import contextlib
from typing import List, Optional, Tuple

import torch
from torch import Tensor, nn

from rpfast._validation import check_memory, require_flag
from rpfast.data import GraphBatch
from rpfast.nn._flat_parameters import FlatLayout
from rpfast.nn._gin_binding import BOUND, BoundGIN
from rpfast.nn.pooling import sum_pool
from rpfast.ops import gin_aggregate
from rpfast.ops import gin_network_compiled
from rpfast.ops._registry import compiling, eager_kernels, runs_kernels
from rpfast.ops.gin import graph_csr
from rpfast.ops.dense import embedding, linear
from rpfast.ops.gin_layer import gin_mlp
from rpfast.ops.gin_network import FUSED_MAX_WIDTH, GINLayerParams, gin_network

__all__ = ["GIN", "GINLayer", "batch_norm_arguments", "count_batches"]


class GINLayer(nn.Module):
    r"""One GIN layer: aggregation, then an MLP of ``mlp_layers`` linear maps, each followed
    by BatchNorm and ReLU (Xu et al.'s MLP plus their outer BN-ReLU).

    .. math::
        h_i' = \mathrm{MLP}\Big((1+\epsilon) z_i + \sum_{j\to i} z_j\Big),\qquad
        z = [h, \mathrm{onehot}(\mathrm{id})]\, W_1^\top

    The first linear map commutes with the (linear) aggregation, so it is applied before
    it, in the narrower width: ``z = h W_h^T + W_id[id]``. The one-hot ID block is thus a
    gather of learned rows and is never materialised as an ``[N, id_dim]`` matrix. Linear
    maps carry no bias because the BatchNorm after each one removes any per-channel shift.
    The aggregation and the BatchNorm-ReLU stages form one autograd node
    (:func:`rpfast.ops.gin_mlp`).

    With ``edge_dim > 0`` the layer is GINE-style (Hu et al., 2020): every message carries
    its edge's features, in the projected width,

    .. math:: a_i = (1+\epsilon) z_i + \sum_{j\to i} \mathrm{ReLU}\big(z_j + e_{ji} W_e^\top + b_e\big),

    so bond types reach the MLP (the messages are summed in torch, then the MLP stages run as
    one node).

    Args:
        in_dim: node feature width (0 for none), id_dim: one-hot ID width (0 for none),
        hidden: output width, mlp_layers: linear maps in the MLP (>= 1), train_eps: learn eps,
        edge_dim: edge feature width (0: plain GIN; > 0: GINE messages, ``graph.edge_attr``
        ``[E, edge_dim]`` required).

    Shapes: ``h [R, N, in_dim]`` or None, ``ids [R, N]`` or None -> ``[R, N, hidden]``.
    """

    def __init__(self, in_dim: int, hidden: int, mlp_layers: int = 2, train_eps: bool = True, id_dim: int = 0,
                 edge_dim: int = 0):
        super().__init__()
        if in_dim + id_dim < 1:
            raise ValueError("a GIN layer needs node features (in_dim) or IDs (id_dim)")
        if mlp_layers < 1:
            raise ValueError(f"mlp_layers must be >= 1, got {mlp_layers}")
        self.in_dim, self.id_dim = in_dim, id_dim
        self.first = nn.Linear(in_dim, hidden, bias=False) if in_dim else None
        self.id_weight = nn.Parameter(torch.empty(id_dim, hidden)) if id_dim else None
        if id_dim:
            bound = 1 / (in_dim + id_dim) ** 0.5  # nn.Linear's init for the full [x, onehot] input
            nn.init.uniform_(self.id_weight, -bound, bound)
        self.linears = nn.ModuleList(nn.Linear(hidden, hidden, bias=False) for _ in range(mlp_layers - 1))
        self.norms = nn.ModuleList(nn.BatchNorm1d(hidden) for _ in range(mlp_layers))
        self.eps = nn.Parameter(torch.zeros(1)) if train_eps else None
        self.register_buffer("fixed_eps", torch.zeros(1))
        self.edge_dim = edge_dim
        self.edge = nn.Linear(edge_dim, hidden) if edge_dim else None

    def forward(self, h: Optional[Tensor], graph: GraphBatch, ids: Optional[Tensor] = None) -> Tensor:
        z = None
        if self.first is not None:
            z = linear(h, self.first.weight)
        if self.id_weight is not None:
            if ids is None:
                raise ValueError("this layer was built with id_dim > 0 and needs ids")
            emb = embedding(self.id_weight, ids)  # [R, N, hidden], a gather of weight rows
            z = emb if z is None else z + emb
        eps = self.eps if self.eps is not None else self.fixed_eps
        z = z if z.dim() == 3 else z.unsqueeze(0)
        aggregate = self.edge is None
        if not aggregate:
            z = self._edge_aggregate(z, graph, eps)
        if not all(type(bn) is nn.BatchNorm1d for bn in self.norms):
            return self._mlp_modules(gin_aggregate(z, graph, eps) if aggregate else z)
        return gin_mlp(z, graph, eps, [linear.weight for linear in self.linears], training=self.training,
                       aggregate=aggregate, **batch_norm_arguments(self.norms, self.training))

    def _mlp_modules(self, a: Tensor) -> Tensor:
        """The MLP stages through the norm modules themselves: a ``SyncBatchNorm`` (multi-process
        training) all-reduces its statistics across processes, which the fused C++ stages cannot."""
        R, N, H = a.shape
        h = a.reshape(R * N, H)
        for stage, norm in enumerate(self.norms):
            if stage:
                h = linear(h, self.linears[stage - 1].weight)
            h = torch.relu(norm(h))
        return h.view(R, N, h.shape[-1])

    def fusable(self) -> bool:
        """Whether :func:`rpfast.ops.gin_network` can run this layer: no edge features and
        plain ``BatchNorm1d`` (``SyncBatchNorm`` must synchronise its statistics itself)."""
        return self.edge is None and all(type(bn) is nn.BatchNorm1d for bn in self.norms)

    def params(self, training: bool, count: bool = True, with_counters: bool = False) -> GINLayerParams:
        """This layer's tensors for :func:`rpfast.ops.gin_network` (counts a training step in
        the BatchNorm modules, as a forward does, unless ``count=False``). ``with_counters``:
        a cumulative momentum (``momentum=None``) stays NaN and the step counters come along,
        for a kernel that reads ``1 / count`` itself (compiled code cannot divide by a counter
        it traces)."""
        bn = batch_norm_arguments(self.norms, training, count, cumulative_as_nan=with_counters)
        return GINLayerParams(
            first=self.first.weight if self.first is not None else None, id_weight=self.id_weight,
            eps=self.eps if self.eps is not None else self.fixed_eps,
            weights=[linear.weight for linear in self.linears], gammas=bn["bn_weights"], betas=bn["bn_biases"],
            running_means=bn["running_means"], running_vars=bn["running_vars"], momenta=bn["momentum"],
            bn_eps=bn["bn_eps"], counters=[b.num_batches_tracked for b in self.norms] if with_counters else None)

    def _edge_aggregate(self, z: Tensor, graph: GraphBatch, eps: Tensor) -> Tensor:
        """``(1 + eps) z_i + sum_{j->i} ReLU(z_j + edge(e_ji))`` for ``z [R, N, H]``."""
        edge_attr = graph.edge_attr
        if edge_attr is None:
            raise ValueError(f"this GIN layer was built with edge_dim={self.edge_dim} and needs edge features: "
                             f"give the graph edge_attr [E, {self.edge_dim}]")
        if edge_attr.dim() != 2 or edge_attr.shape[1] != self.edge_dim:
            raise ValueError(f"edge_attr must have shape [E={graph.num_edges}, {self.edge_dim}], "
                             f"got {tuple(edge_attr.shape)}")
        source, target = graph.edge_index
        messages = torch.relu(z[:, source] + self.edge(edge_attr.to(z.dtype)))  # [R, E, H]
        return (1 + eps) * z + torch.zeros_like(z).index_add_(1, target, messages)


def count_batches(norms) -> None:
    """Add one to every BatchNorm module's ``num_batches_tracked`` (one fused op for all)."""
    counters = [bn.num_batches_tracked for bn in norms]
    if counters:
        torch._foreach_add_(counters, 1)


def batch_norm_arguments(norms, training: bool, count: bool = True, cumulative_as_nan: bool = False) -> dict:
    """:func:`rpfast.ops.gin_mlp`'s BatchNorm arguments (``bn_weights``, ``bn_biases``,
    ``running_means``, ``running_vars``, ``momentum``, ``bn_eps``) from ``L`` BatchNorm modules,
    counting the step as the modules themselves would: in training ``num_batches_tracked``
    grows by one (unless ``count=False``: the caller counted already, see :func:`count_batches`)
    and ``momentum=None`` becomes the cumulative factor ``1 / num_batches_tracked`` (NaN with
    ``cumulative_as_nan``: the kernel computes it from the counter).
    Accepts ``BatchNorm1d`` and the ``SyncBatchNorm`` that replaces it in multi-process training.
    """
    training = require_flag(training, "training")
    norms = list(norms)
    for i, bn in enumerate(norms):
        if not isinstance(bn, nn.modules.batchnorm._BatchNorm) or not bn.affine or not bn.track_running_stats:
            raise TypeError(f"norms[{i}] must be an affine BatchNorm module with running statistics "
                            f"(track_running_stats=True), got {bn!r}")
    if training and not cumulative_as_nan and compiling() and any(bn.momentum is None for bn in norms):
        # 1 / num_batches_tracked would be read from a traced counter (a data-dependent float)
        raise NotImplementedError("torch.compile supports BatchNorm momentum=None (a cumulative average) in the "
                                  "fused GIN (widths <= 64) only; give the BatchNorm a momentum, or train this "
                                  "model eagerly")
    if training and count:
        count_batches(norms)
    cumulative = float("nan") if cumulative_as_nan else None
    momenta = [0.0 if not training else float(bn.momentum) if bn.momentum is not None
               else cumulative if cumulative is not None else 1.0 / float(bn.num_batches_tracked) for bn in norms]
    return {"bn_weights": [bn.weight for bn in norms], "bn_biases": [bn.bias for bn in norms],
            "running_means": [bn.running_mean for bn in norms], "running_vars": [bn.running_var for bn in norms],
            "momentum": momenta, "bn_eps": [float(bn.eps) for bn in norms]}


class GIN(nn.Module):
    r"""The Graph Isomorphism Network of Xu et al. as used by Murphy et al. (2019).

    ``num_layers`` GIN layers of width ``hidden``; the graph embedding concatenates the
    sum-pooled node states of every layer, the input included,

    .. math:: e_G = \big[\textstyle\sum_i h_i^{(0)}, \sum_i h_i^{(1)}, \dots, \sum_i h_i^{(L)}\big],

    and a linear classifier maps it to ``out_dim`` logits (with dropout before it).
    With ``id_dim = m > 0`` the input also carries one-hot IDs (see :class:`GINLayer`); its
    pooled part is the per-graph ID histogram. With ``edge_dim > 0`` every layer is GINE-style
    and reads ``graph.edge_attr [E, edge_dim]`` (bond features, say).

    All layers run as one autograd node (:func:`rpfast.ops.gin_network`) unless a layer has
    edge features or its BatchNorm is not a plain ``BatchNorm1d``; then, or with
    ``model.fused = False``, every layer is its own node (:func:`rpfast.ops.gin_mlp`, or the
    norm modules themselves for ``SyncBatchNorm``). Not twice differentiable: a second
    derivative raises ``RuntimeError``.

    Devices: on the CPU the whole-network node and the layers run rpfast's C++ kernels; on any
    other device (after ``model.to(device)`` and ``graph.to(device)``), and with
    ``RPFAST_BACKEND=torch``, every layer is its own node composed of registered ops, each on its
    torch-composed implementation (:meth:`_runs_whole_network` is the one place that decides).

    ``flat_parameters=True`` stores every parameter in one tensor, ``flat_parameter`` (as
    FSDP's ``FlatParameter`` does): the model then has a single parameter, so autograd's
    gradient accumulation, ``zero_grad`` and the optimizer's per-tensor work run once instead
    of ~40 times, which on a small GIN costs more than the network itself. Same initial
    values and the same gradients, bit for bit. What differs:

    - The submodules own no parameters. Their attributes (``layers[0].first.weight``, ...)
      are views of ``flat_parameter``, readable and writable under ``torch.no_grad()``, without
      ``.grad``; ``model.classifier.parameters()`` is empty, so per-module optimizer groups,
      freezing a submodule or a submodule's own ``state_dict`` need the default layout, as does
      :func:`~rpfast.nn.convert_sync_batch_norm`. Replacing a submodule or reassigning a
      parameter attribute raises a ValueError at the next forward.
    - ``state_dict()`` has the per-parameter entries of the default layout (copies, in the
      same order), so model checkpoints load into either layout; optimizer state dicts do not
      (one tensor against ~40).
    - A parameter the loss does not reach gets a zero gradient, not None (the classifier when
      training on :meth:`graph_embedding` alone), so weight decay still shrinks it.
    - Reductions over all gradients (``clip_grad_norm_``) and optimizers whose rounding depends
      on where tensors end (fused Adam's vector body and scalar tail, LBFGS's flattening) may
      round differently, as for any other split of the parameters.
    - After ``flat_parameter.data = ...`` the attributes follow at the next forward or ``.to()``;
      after ``layers[0].first.weight.data = values`` (an attribute), ``flat_parameter`` adopts
      the values at the next forward, ``state_dict()``, ``.to()`` or copy (an optimizer step taken
      in between is overwritten for that tensor). ``requires_grad_`` on a submodule raises a
      ValueError: it could freeze nothing.

    Shapes: ``x [N, in_dim]`` or ``[R, N, in_dim]`` (or None if ``in_dim == 0``),
    ``ids [R, N]`` -> logits ``[R, B, out_dim]`` (``[B, out_dim]`` for 2-D ``x`` without ids).
    """

    _flat_layout: Optional[FlatLayout] = None  # also for models pickled before flat parameters existed

    def __init__(self, in_dim: int, hidden: int, num_layers: int, out_dim: int, mlp_layers: int = 2,
                 train_eps: bool = True, dropout: float = 0.0, id_dim: int = 0, edge_dim: int = 0,
                 flat_parameters: bool = False):
        super().__init__()
        flat_parameters = require_flag(flat_parameters, "flat_parameters")
        for name, value, low in (("in_dim", in_dim, 0), ("hidden", hidden, 1), ("num_layers", num_layers, 1),
                                 ("out_dim", out_dim, 1), ("id_dim", id_dim, 0), ("edge_dim", edge_dim, 0)):
            if not isinstance(value, int) or value < low:
                raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
        if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0 <= dropout < 1:
            raise ValueError(f"dropout must be a float in [0, 1), got {dropout!r}")
        width = in_dim + id_dim + num_layers * hidden
        check_memory(4 * (width * (hidden + out_dim) + num_layers * mlp_layers * hidden * hidden),
                     f"GIN parameters (in_dim={in_dim}, id_dim={id_dim}, hidden={hidden}, num_layers={num_layers})")
        self.in_dim, self.id_dim, self.edge_dim = in_dim, id_dim, edge_dim
        self.layers = nn.ModuleList(
            GINLayer(in_dim if l == 0 else hidden, hidden, mlp_layers, train_eps, id_dim if l == 0 else 0, edge_dim)
            for l in range(num_layers)
        )
        self.embedding_dim = in_dim + id_dim + num_layers * hidden
        self.dropout = nn.Dropout(dropout)
        self.classifier = nn.Linear(self.embedding_dim, out_dim)
        self.fused = True
        self._flat_layout: Optional[FlatLayout] = None
        if flat_parameters:
            self._flatten()

    def _flatten(self) -> None:
        """Moves every parameter into ``flat_parameter``, in the order the C++ network returns
        their gradients (:meth:`_network_paths`), so its flat gradient is the parameter's
        gradient as it is; the edge networks of GINE layers (never in the C++ network) last."""
        paths = [path for path in self._network_paths() if path is not None]
        paths += [f"layers.{l}.edge.{name}" for l, layer in enumerate(self.layers) if layer.edge is not None
                  for name in ("weight", "bias")]
        self._flat_layout = FlatLayout.flatten(self, paths, "flat_parameter")

    def _network_paths(self) -> List[Optional[str]]:
        """The parameter behind each tensor the C++ network takes, in its order (per layer the
        present :meth:`GINLayerParams.differentiable` tensors, then the classifier's weight and
        bias): a dotted path, or None for a fixed eps (a buffer)."""
        paths = []
        for l, layer in enumerate(self.layers):
            at = f"layers.{l}."
            paths += [at + "first.weight"] if layer.first is not None else []
            paths += [at + "id_weight"] if layer.id_weight is not None else []
            paths += [at + "eps" if layer.eps is not None else None]
            paths += [f"{at}linears.{s}.weight" for s in range(len(layer.linears))]
            paths += [f"{at}norms.{s}.{name}" for name in ("weight", "bias") for s in range(len(layer.norms))]
        return paths + ["classifier.weight", "classifier.bias"]

    @property
    def flat_parameters(self) -> bool:
        """Whether every parameter lives in ``flat_parameter`` (see the class docstring)."""
        return self._flat_layout is not None

    def _apply(self, fn, recurse: bool = True):
        if self._flat_layout is not None:  # values given with view.data = ... first (a conversion copies flat only)
            self._flat_layout.adopt_data(self.flat_parameter)
        module = super()._apply(fn, recurse)
        if self._flat_layout is not None:  # .to() / .double() made a new flat tensor: point the views at it
            self._flat_layout.install(self.flat_parameter)
        return module

    def __getstate__(self):
        if self._flat_layout is not None:  # values given with view.data = ... go with the copy
            self._flat_layout.adopt_data(self.flat_parameter)
        return super().__getstate__()

    def __setstate__(self, state):
        super().__setstate__(state)
        if state.get("_flat_layout") is not None:  # a copy's views must share its own flat storage
            self._flat_layout.install(self.flat_parameter)

    def graph_embedding(self, x: Optional[Tensor], graph: GraphBatch, ids: Optional[Tensor] = None) -> Tensor:
        """``[R, B, embedding_dim]`` (``[B, embedding_dim]`` for 2-D ``x`` without ids):
        the concatenated sum-pooled states of all layers."""
        bound = self._bound()
        if bound is not None or self._compiles_whole():
            embedding = self._whole_model(bound, x, graph, ids, classify=False)
        else:
            with self._parameters_in_graph():
                embedding = self._embed(x, graph, ids)
        return embedding.squeeze(0) if self._single(x, ids) else embedding

    def forward(self, x: Optional[Tensor], graph: GraphBatch, ids: Optional[Tensor] = None) -> Tensor:
        classify = not (self.training and self.dropout.p > 0)  # else dropout runs between embedding and classifier
        bound = self._bound()
        whole = bound is not None or self._compiles_whole()
        if whole and classify:
            logits = self._whole_model(bound, x, graph, ids, classify)
        else:  # the embedding first: inside the context a binding's snapshot would see the swapped attributes
            embedding = self._whole_model(bound, x, graph, ids, classify=False) if whole else None
            with self._parameters_in_graph():
                if embedding is None:
                    embedding = self._embed(x, graph, ids)
                logits = linear(self.dropout(embedding), self.classifier.weight, self.classifier.bias)
        return logits.squeeze(0) if self._single(x, ids) else logits

    def _parameters_in_graph(self):
        """With flat parameters, a context in which the submodules' attributes are views of
        ``flat_parameter`` in the autograd graph (the layer-by-layer paths and the classifier
        after dropout read the parameters through them); otherwise a no-op."""
        if self._flat_layout is None:
            return contextlib.nullcontext()
        return self._flat_layout.connected(self, self.flat_parameter)

    def _compiles_whole(self) -> bool:
        """Whether compiled code runs the model as one custom op
        (:func:`rpfast.ops.gin_network_compiled.traced_gin_model`): under ``torch.compile``, the
        whole network where kernels run (:meth:`_runs_whole_network`), at most ``FUSED_MAX_WIDTH``
        wide, float32/float64."""
        if not compiling() or not self._runs_whole_network():
            return False
        widths = [w for layer in self.layers for w in (layer.norms[0].num_features, layer.in_dim)]
        return max(widths) <= FUSED_MAX_WIDTH and self.classifier.weight.dtype in (torch.float32, torch.float64)

    def _whole_model(self, bound: Optional[BoundGIN], x, graph: GraphBatch, ids, classify: bool) -> Tensor:
        """Logits (``classify``) or embeddings from one C++ call for the whole model: in eager mode
        through the cached binding ``bound`` (:meth:`_bound`), compiled (``bound`` None, where
        :meth:`_compiles_whole`) through one custom op
        (:func:`rpfast.ops.gin_network_compiled.traced_gin_model`)."""
        if bound is not None:
            return bound.run(self, x, graph, ids, classify)
        h, ids, replicas = self._inputs(x, graph, ids)
        if self.training:
            count_batches([bn for layer in self.layers for bn in layer.norms])
        params = [layer.params(self.training, count=False, with_counters=True) for layer in self.layers]
        classifier = (self.classifier.weight, self.classifier.bias) if classify else None
        flat = None
        if self._flat_layout is not None:  # the op takes flat_parameter itself: one input, one gradient
            self._flat_layout.check(self)  # evaluated while tracing (the modules are guarded)
            paths = self._network_paths()[:None if classify else -2]
            flat = (self.flat_parameter, [self._flat_layout.offset(path) if path else None for path in paths])
        return gin_network_compiled.traced_gin_model(h, ids, (*graph_csr(graph), graph.ptr), params, classifier,
                                                     self.in_dim, self.id_dim, self.training, replicas, flat=flat)

    def _runs_whole_network(self) -> bool:
        """Whether the layers run as one node (:func:`rpfast.ops.gin_network`): ``fused``, every
        layer fusable, and the model on a device whose C++ kernels run (the CPU unless
        ``RPFAST_BACKEND=torch``); otherwise every layer is its own node, composed of registered
        ops that run on any device. The one place that chooses between the two."""
        return self.fused and runs_kernels(self.classifier.weight) and all(layer.fusable() for layer in self.layers)

    def _bound(self) -> Optional[BoundGIN]:
        """The whole model bound to the C++ network (cached, re-checked each call), or None when
        it cannot run there: ``fused`` is off, a layer is not fusable or wider than
        ``FUSED_MAX_WIDTH``, the model is not where the kernels run, or under ``torch.compile``
        (which traces the custom ops)."""
        if not self.fused or not eager_kernels(self.classifier.weight):
            return None
        bound = BOUND.get(self)
        if bound is not None and bound.snapshot.current():
            return bound
        if not BoundGIN.eligible(self):
            BOUND.pop(self, None)
            return None
        if self._flat_layout is not None:  # the flat tensor may have moved (param.data = ...): views follow it
            self._flat_layout.refresh(self, self.flat_parameter)
        bound = BoundGIN.bind(self)
        if bound is None:
            BOUND.pop(self, None)
        else:
            BOUND[self] = bound
        return bound

    @staticmethod
    def _single(x: Optional[Tensor], ids: Optional[Tensor]) -> bool:
        return ids is None and (x is None or x.dim() == 2)

    def _embed(self, x: Optional[Tensor], graph: GraphBatch, ids: Optional[Tensor]) -> Tensor:
        h, ids, R = self._inputs(x, graph, ids)
        pooled = []
        if h is not None:
            pooled.append(sum_pool(h, graph).expand(R, -1, -1))
        if self.id_dim:
            pooled.append(self._id_histogram(ids, graph))
        if self._runs_whole_network():
            if self.training:
                count_batches([bn for layer in self.layers for bn in layer.norms])
            params = [layer.params(self.training, count=False) for layer in self.layers]
            pooled.append(gin_network(h, ids, graph, params, self.training))
            return torch.cat(pooled, dim=-1)
        for layer in self.layers:
            h = layer(h, graph, ids if layer is self.layers[0] else None)
            pooled.append(sum_pool(h, graph))
        return torch.cat(pooled, dim=-1)

    def _inputs(self, x, graph: GraphBatch, ids, check_ids: bool = True) -> Tuple[Optional[Tensor], Optional[Tensor], int]:
        """``(h [1 or R, N, in_dim] or None, ids [R, N] int64 or None, R)``, checked (the ID
        range only with ``check_ids``: the C++ network checks it as it reads them)."""
        if not isinstance(graph, GraphBatch):
            raise TypeError(f"graph must be an rpfast.data.GraphBatch, got {type(graph).__name__}")
        if self.id_dim and ids is None:
            raise ValueError(f"this GIN has id_dim={self.id_dim} and needs ids [R, N]")
        if ids is not None:
            if not isinstance(ids, Tensor) or ids.dtype.is_floating_point or ids.dtype.is_complex \
                    or ids.dtype == torch.bool:
                raise TypeError(f"ids must be an integer tensor [R, N], got "
                                f"{ids.dtype if isinstance(ids, Tensor) else type(ids).__name__}")
            ids = ids.to(torch.int64)
            if ids.dim() != 2 or ids.shape[1] != graph.total_nodes:
                raise ValueError(f"ids must have shape [R, N={graph.total_nodes}], got {tuple(ids.shape)}")
            in_range = not check_ids or compiling() or not ids.numel() or (  # compiled: the op checks
                int(ids.min()) >= 0 and int(ids.max()) < self.id_dim)
            if not in_range:
                raise IndexError(f"ids must lie in [0, {self.id_dim}), got {int(ids.min())}..{int(ids.max())}")
        R = ids.shape[0] if ids is not None else (x.shape[0] if x is not None and x.dim() == 3 else 1)
        if self.in_dim == 0:
            return None, ids, R
        if x is None:
            raise ValueError(f"this GIN has in_dim={self.in_dim} and needs node features x")
        if x.shape[-1] != self.in_dim or x.shape[-2] != graph.total_nodes:
            raise ValueError(f"x must have shape [..., N={graph.total_nodes}, {self.in_dim}], got {tuple(x.shape)}")
        h = x if x.dim() == 3 else x.unsqueeze(0)
        return h.to(self.classifier.weight.dtype), ids, R

    def _id_histogram(self, ids: Tensor, graph: GraphBatch) -> Tensor:
        """``[R, B, id_dim]``: how many nodes of each graph carry each ID (pooled one-hots)."""
        R, B, m = ids.shape[0], graph.num_graphs, self.id_dim
        flat = (torch.arange(R, device=ids.device).unsqueeze(1) * B + graph.batch.unsqueeze(0)) * m + ids
        counts = torch.zeros(R * B * m, dtype=self.classifier.weight.dtype, device=ids.device)  # exact: small counts
        counts.index_add_(0, flat.reshape(-1), counts.new_ones(flat.numel()))
        return counts.reshape(R, B, m)
