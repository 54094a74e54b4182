"""GIN (Xu et al., ICLR 2019) as used by the RP paper, with optional one-hot node IDs."""
import contextlib
from typing import Optional, Tuple

import torch
from torch import Tensor, nn

from rpfast._validation import check_memory, is_pyg_data, require_flag
from rpfast.data import GraphBatch
from rpfast.nn.gin.layer import GINLayer
from rpfast.nn.runtime.binding import GINRuntime, binding, run_compiled
from rpfast.nn.runtime.flat_parameters import FlatLayout
from rpfast.nn.runtime.plan import Path, network_parameter_paths, plan
from rpfast.nn.graph_input import read_graph_input
from rpfast.nn.pooling import sum_pool
from rpfast.ops._registry import compiling
from rpfast.ops.dense import linear
from rpfast.nn._unsupported import NotScriptable

__all__ = ["GIN"]


class GIN(NotScriptable, nn.Module):
    r"""The Graph Isomorphism Network of Xu et al. as used by Murphy et al. (2019).

    ``num_layers`` GIN layers of width ``hidden``; the graph embedding concatenates the
    sum-pooled node states of every layer, the input included,

    .. math:: e_G = \big[\textstyle\sum_i h_i^{(0)}, \sum_i h_i^{(1)}, \dots, \sum_i h_i^{(L)}\big],

    and a linear classifier maps it to ``out_dim`` logits (with dropout before it).
    With ``id_dim = m > 0`` the input also carries one-hot IDs (see :class:`GINLayer`); its
    pooled part is the per-graph ID histogram. With ``edge_dim > 0`` every layer is GINE-style
    and reads ``graph.edge_attr [E, edge_dim]`` (bond features, say).

    On the CPU the whole model (layers, readouts, classifier) runs as one C++ call and one
    autograd node; a GINE layer, a ``SyncBatchNorm``, a width above 64, ``model.fused = False``,
    another device (after ``model.to(device)`` and ``graph.to(device)``) or
    ``RPFAST_BACKEND=torch`` make it run layer by layer on the registered ops
    (:func:`rpfast.ops.gin_mlp`). :mod:`rpfast.nn.runtime.plan` decides, and tabulates the paths.
    The whole-model node is not twice differentiable: a second derivative raises ``RuntimeError``.

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

    graph_batch_input = True  # forward takes (x, GraphBatch): RPGNN hands it the replicas as one

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
        self.__dict__["_runtime"] = GINRuntime()
        self._flat_layout: Optional[FlatLayout] = None
        if flat_parameters:
            self._flatten()

    def _flatten(self) -> None:
        """Moves every parameter into ``flat_parameter``, in the order the C++ network returns
        their gradients (:func:`~rpfast.nn.runtime.plan.network_parameter_paths`), so its flat
        gradient is the parameter's gradient as it is; the edge networks of GINE layers (never
        in the C++ network) last."""
        paths = [path for path in network_parameter_paths(self) if path is not None]
        paths += [f"layers.{l}.edge.{name}" for l, layer in enumerate(self.layers) if layer.edge is not None
                  for name in ("weight", "bias")]
        self._flat_layout = FlatLayout.flatten(self, paths, "flat_parameter")

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
        state = dict(super().__getstate__())
        state.pop("_runtime", None)  # this model's: a copy binds its own
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        self.__dict__["_runtime"] = GINRuntime()
        if state.get("_flat_layout") is not None:  # a copy's views must share its own flat storage
            self._flat_layout.install(self.flat_parameter)

    def graph_embedding(self, x: Optional[Tensor], edge_index=None, batch: Optional[Tensor] = None,
                        edge_attr: Optional[Tensor] = None, *, ids: Optional[Tensor] = None) -> Tensor:
        """``[R, B, embedding_dim]`` (``[B, embedding_dim]`` for 2-D ``x`` without ids): the
        concatenated sum-pooled states of all layers. Takes the inputs :meth:`forward` takes."""
        x, graph = self._read("GIN.graph_embedding", x, edge_index, batch, edge_attr)
        embedding = self._run(x, graph, ids, classify=False)
        return embedding.squeeze(0) if self._single(x, ids) else embedding

    def replica_logits(self, x: Optional[Tensor], graph: GraphBatch, ids: Tensor, *, embedding: bool = False) -> Tensor:
        """``[R, B, out_dim]`` logits (``embedding``: ``[R, B, embedding_dim]``) for ``ids [R, N]``
        that the caller drew in ``[0, id_dim)`` (RP's relabelings mod ``id_dim``): :meth:`forward`
        without reading the IDs back to check their range, so an RP training step on a device
        never waits for it. Out-of-range IDs still fail where they are read, without the
        message naming the values: the C++ network and ``torch.embedding`` raise on the CPU, CUDA
        asserts on the device."""
        if embedding:
            return self._run(x, graph, ids, classify=False, check_ids=False)
        return self._logits(x, graph, ids, check_ids=False)

    def forward(self, x: Optional[Tensor], edge_index=None, batch: Optional[Tensor] = None,
                edge_attr: Optional[Tensor] = None, *, ids: Optional[Tensor] = None) -> Tensor:
        """Logits ``[B, out_dim]`` (``[R, B, out_dim]`` with ``ids [R, N]`` or ``x [R, N, F]``).

        The graph comes in any form of :func:`rpfast.nn.graph_input.read_graph_input`: a
        :class:`~rpfast.data.GraphBatch` or PyG ``Data``/``Batch`` alone, ``(x or None, graph)``, or
        ``(x, edge_index, batch=None, edge_attr=None)``; ``ids`` (keyword): one-hot IDs of
        ``R`` relabelings for a model with ``id_dim > 0``."""
        x, graph = self._read("GIN", x, edge_index, batch, edge_attr)
        out = self._logits(x, graph, ids)
        return out.squeeze(0) if self._single(x, ids) else out

    def _logits(self, x: Optional[Tensor], graph: GraphBatch, ids: Optional[Tensor], check_ids: bool = True) -> Tensor:
        """``[R, B, out_dim]``: the embedding, dropout in training, the classifier."""
        classify = not (self.training and self.dropout.p > 0)  # else dropout runs between embedding and classifier
        out = self._run(x, graph, ids, classify, check_ids)
        if not classify:
            with self._parameters_in_graph():
                out = linear(self.dropout(out), self.classifier.weight, self.classifier.bias)
        return out

    def _read(self, owner: str, x, edge_index, batch, edge_attr):
        """:func:`read_graph_input`, after catching a model with IDs given ``ids`` positionally
        (``ids`` is keyword-only; its places hold PyG's ``edge_index``, ``batch`` and ``edge_attr``)."""
        graph_alone = isinstance(x, GraphBatch) or is_pyg_data(x)
        misplaced = ((graph_alone and isinstance(edge_index, Tensor))
                     or (isinstance(edge_index, GraphBatch) and isinstance(batch, Tensor) and batch.dim() == 2)
                     or (isinstance(edge_attr, Tensor) and isinstance(edge_index, Tensor) and edge_attr.dim() == 2
                         and not edge_attr.dtype.is_floating_point and edge_index.dim() == 2
                         and edge_attr.shape[0] != edge_index.shape[-1]))
        if misplaced and self.id_dim:
            raise TypeError(f"{owner} takes ids as a keyword argument (gin(graph, ids=ids), gin(x, graph, ids=ids)): "
                            "its positional arguments are PyG's (x, edge_index, batch, edge_attr)")
        return read_graph_input(owner, x, edge_index, batch, edge_attr, training=self.training)

    def _run(self, x: Optional[Tensor], graph: GraphBatch, ids: Optional[Tensor], classify: bool,
             check_ids: bool = True) -> Tensor:
        """Logits ``[R, B, out_dim]`` (``classify``) or embeddings ``[R, B, embedding_dim]`` on the
        path :func:`rpfast.nn.runtime.plan.plan` chose (eager: decided when the model's binding
        was made, :func:`rpfast.nn.runtime.binding.binding`)."""
        if compiling():
            path, bound = plan(self), None
        else:
            bound = binding(self)
            path = bound.path
        if path is Path.WHOLE:  # outside _parameters_in_graph: the binding points at the detached views
            h, ids, replicas = self._inputs(x, graph, ids, check_ids=False)  # the kernel checks the ID range
            return bound.run(h, ids, graph, replicas, self.training, classify)
        h, ids, replicas = self._inputs(x, graph, ids, check_ids)
        with self._parameters_in_graph():
            if path is Path.COMPILED:
                return run_compiled(self, h, ids, graph, replicas, classify)
            embedding = self._embed_layers(h, ids, graph, replicas)
            if not classify:
                return embedding
            return linear(self.dropout(embedding), self.classifier.weight, self.classifier.bias)

    def _parameters_in_graph(self):
        """With flat parameters, a context in which the submodules' attributes are views of
        ``flat_parameter`` in the autograd graph (the layer-by-layer and compiled paths and the
        classifier after dropout read the parameters through them); otherwise a no-op."""
        if self._flat_layout is None:
            return contextlib.nullcontext()
        return self._flat_layout.connected(self, self.flat_parameter)

    def _embed_layers(self, h: Optional[Tensor], ids: Optional[Tensor], graph: GraphBatch, R: int) -> Tensor:
        """The ``LAYERS`` path's embedding ``[R, B, embedding_dim]``: one :class:`GINLayer` after another."""
        pooled = []
        if h is not None:
            pooled.append(sum_pool(h, graph).expand(R, -1, -1))
        if self.id_dim:
            pooled.append(self._id_histogram(ids, graph))
        for layer in self.layers:
            h = layer(h, graph, ids if layer is self.layers[0] else None)
            pooled.append(sum_pool(h, graph))
        return torch.cat(pooled, dim=-1)

    @staticmethod
    def _single(x: Optional[Tensor], ids: Optional[Tensor]) -> bool:
        return ids is None and (x is None or x.dim() == 2)

    def _inputs(self, x, graph: GraphBatch, ids, check_ids: bool = True) -> Tuple[Optional[Tensor], Optional[Tensor], int]:
        """``(h [1 or R, N, in_dim] or None, ids [R, N] int64 or None, R)``, checked (the ID
        range only with ``check_ids``: the C++ network checks it as it reads them)."""
        if not isinstance(graph, GraphBatch):
            raise TypeError(f"graph must be an rpfast.data.GraphBatch, got {type(graph).__name__}")
        if self.id_dim and ids is None:
            raise ValueError(f"this GIN has id_dim={self.id_dim} and needs ids [R, N]")
        if not self.id_dim and ids is not None:
            raise ValueError("this GIN has id_dim=0 and takes no ids (build it with id_dim=m for one-hot IDs)")
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
