"""rpfast: fast Relational Pooling (Murphy et al., ICML 2019) for graph neural networks.

Subpackages:
    rpfast.ops   compiled kernels with validation and autograd (permutation gathers, ...)
    rpfast.data  graph batches (PyG layout) with cached CSR and dense padded views
    rpfast.nn    torch.nn.Modules built on the kernels
"""
__version__ = "0.1.0"

from rpfast import data, ops, nn  # noqa: E402
from rpfast._config import show_config  # noqa: E402

__all__ = ["__version__", "data", "ops", "nn", "show_config"]
