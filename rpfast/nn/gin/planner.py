"""Which path runs a :class:`rpfast.nn.GIN`: the one place that decides, and the only reader
of :data:`FUSED_MAX_WIDTH`.

=============  ===========================================  ====================================  ============
path           when                                         forward / backward                    autograd
=============  ===========================================  ====================================  ============
``WHOLE``      eager; ``model.fused``; kernels run on the   one C++ call each for every layer,    one node
               model's device (CPU, backend ``auto``);      the readouts and the classifier,
               every layer plain (no edge features, plain   through the model's binding
               ``BatchNorm1d``); widths <= FUSED_MAX_WIDTH;  (:mod:`rpfast.nn.gin.binding`)
               float32/float64; parameters are leaves
``COMPILED``   the same under ``torch.compile``             one custom op pair,                   one node
                                                            ``rpfast::gin_model`` and its
                                                            backward (:mod:`.compiled`)
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

from rpfast._backend import compiling, runs_kernels

__all__ = ["FUSED_MAX_WIDTH", "Path", "plan"]

FUSED_MAX_WIDTH = 64


class Path(enum.Enum):
    WHOLE = "whole"
    COMPILED = "compiled"
    LAYERS = "layers"


def plan(gin) -> Path:
    """The path that runs ``gin`` now (see the module's table). The eager ``WHOLE`` path is
    taken only once :mod:`rpfast.nn.gin.binding` has bound the parameters (leaves)."""
    weight = gin.classifier.weight
    whole = (gin.fused and runs_kernels(weight) and weight.dtype in (torch.float32, torch.float64)
             and all(layer.edge is None and layer.plain_norms() for layer in gin.layers)
             and max(w for layer in gin.layers for w in (layer.norms[0].num_features, layer.in_dim))
             <= FUSED_MAX_WIDTH)
    if not whole:
        return Path.LAYERS
    return Path.COMPILED if compiling() else Path.WHOLE
