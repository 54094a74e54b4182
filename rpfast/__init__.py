"""rpfast: fast Relational Pooling (Murphy et al., ICML 2019) for graph neural networks.

Subpackages:
    rpfast.ops   compiled kernels with validation and autograd (permutation gathers, ...)
    rpfast.data  graph batches (PyG layout) with cached CSR and dense padded views, conversions
    rpfast.datasets  CSL, molecules (RDKit), MoleculeNet and Tox21, graph pairs and their families
    rpfast.nn    torch.nn.Modules built on the kernels
"""
__version__ = "0.1.0"


# rpfast._backend imports the compiled extension (the only module that does) and turns
# a missing or stale build into an actionable ImportError.
from rpfast import data, datasets, ops, nn
from rpfast._config import backend, set_backend, set_threads_policy, show_config, threads_policy
from rpfast._validation import get_memory_budget, set_memory_budget

__all__ = ["__version__", "data", "datasets", "ops", "nn", "show_config", "set_threads_policy", "threads_policy", "set_backend",
           "backend", "get_memory_budget", "set_memory_budget"]
