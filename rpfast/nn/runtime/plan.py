"""Which path runs a :class:`rpfast.nn.GIN`: the one place that decides, and the only reader
of :data:`FUSED_MAX_WIDTH`.

=============  ===========================================  ====================================  ============
path           when                                         forward / backward                    autograd
=============  ===========================================  ====================================  ============
``WHOLE``      eager; ``model.fused``; kernels run on the   one C++ call each for every layer,    one node
               model's device (CPU, backend ``auto``);      the readouts and the classifier, on
               every layer plain (no edge features, plain   the weights the model's runtime
               ``BatchNorm1d``); widths <= FUSED_MAX_WIDTH;  bound (``rpfast.ops.gin_network``)
               float32/float64; every tensor the network
               binds is the registered parameter or buffer
               itself, a leaf of the model's dtype
``COMPILED``   the same under ``torch.compile``, whatever   one custom op pair,                   one node
               the tensors are (they are the op's inputs)   ``rpfast::gin_model`` and its
                                                            backward (``rpfast.ops.
                                                            gin_network_op``)
``LAYERS``     anything else: other devices or              :class:`GINLayer` per layer: the      a node per
               ``RPFAST_BACKEND=torch``, wider layers,      registered ops (:func:`gin_mlp`; on   layer (CPU)
               GINE layers, ``SyncBatchNorm``,              the CPU one node per layer), the      or per op
               ``fused = False``, parametrized weights      norm modules for ``SyncBatchNorm``
=============  ===========================================  ====================================  ============

Why widths stop at 64: the C++ network's matrix products are plain loops, faster than a BLAS
call for the RP paper's widths (16-64) but not beyond; wider layers lose nothing to per-call
overhead, so the registered ops serve them. Flat parameters (``GIN(flat_parameters=True)``) run on
every path; on ``WHOLE`` and ``COMPILED`` the one flat gradient is the flat parameter's.
"""
import enum

import torch
from torch import nn

from rpfast.ops._registry import compiling, runs_kernels

__all__ = ["FUSED_MAX_WIDTH", "Path", "plan"]

FUSED_MAX_WIDTH = 64


class Path(enum.Enum):
    WHOLE = "whole"
    COMPILED = "compiled"
    LAYERS = "layers"


def plan(gin) -> Path:
    """The path that runs ``gin`` now (see the module's table); the only place that decides.
    The eager model asks once per binding (:mod:`rpfast.nn.runtime.binding`), compiled code at
    every trace."""
    weight = gin.classifier.weight
    whole = (gin.fused and runs_kernels(weight) and weight.dtype in (torch.float32, torch.float64)
             and all(layer.edge is None and layer.plain_norms() for layer in gin.layers)
             and max(w for layer in gin.layers for w in (layer.norms[0].num_features, layer.in_dim))
             <= FUSED_MAX_WIDTH)
    if not whole:
        return Path.LAYERS
    if compiling():
        return Path.COMPILED
    return Path.WHOLE if _bound_tensors_are_leaves(gin, weight.dtype) else Path.LAYERS


def _registered(module: nn.Module, name: str):
    """What ``module.name`` holds as a parameter, buffer or plain tensor attribute (a flat
    parameter's view), without computing it (a parametrization computes its weight anew at
    every read, so the C++ network could not bind it)."""
    for holder in (module._parameters, module._buffers, module.__dict__):
        if name in holder:
            return holder[name]
    return None


def _bound_tensors_are_leaves(gin, dtype: torch.dtype) -> bool:
    """Whether every tensor the C++ network would bind is the registered one, a leaf of ``dtype``."""
    flat = gin.flat_parameter if gin.flat_parameters else None
    if flat is not None and (flat.grad_fn is not None or flat.dtype != dtype):
        return False
    for path in bound_paths(gin):
        *names, leaf = path.split(".")
        module = gin
        for name in names:
            module = module._modules[name]
        tensor = getattr(module, leaf)
        if tensor is None:
            continue
        if tensor is not _registered(module, leaf) or tensor.grad_fn is not None or tensor.dtype != dtype:
            return False
    return True


def bound_paths(gin) -> list:
    """Every tensor attribute the C++ network binds, as dotted paths below ``gin`` (the
    parameters, then the fixed eps and the BatchNorm statistics)."""
    return [path for path in network_parameter_paths(gin) if path is not None] + [
        f"layers.{l}.{name}" for l, layer in enumerate(gin.layers) for name in
        ["fixed_eps"] + [f"norms.{s}.{stat}" for s in range(len(layer.norms))
                         for stat in ("running_mean", "running_var")]]


def network_parameter_paths(gin) -> list:
    """The parameter behind each tensor the C++ network takes, in the order its backward writes
    their gradients (per layer the present :meth:`~rpfast.ops.gin_network.GINLayerParams.differentiable`
    tensors, then the classifier's weight and bias): a dotted path, or None for a fixed eps (a
    buffer). The one list of a GIN's parameter paths: the flat layout, the binding's snapshot
    and the leaf check above read it."""
    paths = []
    for l, layer in enumerate(gin.layers):
        at = f"layers.{l}."
        paths += [at + "first.weight"] if layer.first is not None else []
        paths += [at + "id_weight"] if layer.id_weight is not None else []
        paths += [at + "eps" if layer.eps is not None else None]
        paths += [f"{at}linears.{s}.weight" for s in range(len(layer.linears))]
        paths += [f"{at}norms.{s}.{name}" for name in ("weight", "bias") for s in range(len(layer.norms))]
    return paths + ["classifier.weight", "classifier.bias"]
