"""The GIN wing: :class:`GIN` (a whole model), :class:`GINLayer`, :class:`GINConv` (PyG's
drop-in). How a GIN runs (one C++ call for the whole model, custom ops under ``torch.compile``,
or layer by layer) is decided in :mod:`rpfast.nn.runtime.plan`."""
from rpfast.nn.gin.conv import GINConv
from rpfast.nn.gin.layer import GINLayer
from rpfast.nn.gin.model import GIN
from rpfast.nn.runtime.batch_norm_steps import batch_norm_arguments, count_batches

__all__ = ["GIN", "GINLayer", "GINConv", "batch_norm_arguments", "count_batches"]
