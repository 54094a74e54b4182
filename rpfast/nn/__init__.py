"""torch.nn layers built on rpfast's kernels."""
from rpfast.nn.relational_pooling import RelationalPooling

__all__ = ["RelationalPooling"]
