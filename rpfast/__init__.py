"""rpfast: fast Relational Pooling (Murphy et al., ICML 2019) for graph neural networks.

Subpackages:
    rpfast.ops   compiled kernels with validation and autograd (permutation gathers, ...)
    rpfast.data  graph batches (PyG layout) with cached CSR and dense padded views
    rpfast.nn    torch.nn.Modules built on the kernels
"""
__version__ = "0.1.0"


def _import_extension():
    """Import the compiled extension first, so a missing build is reported as such.

    Run from a source checkout without a build in it (e.g. after a non-editable
    ``pip install .``, Python started in the repository root imports this source tree,
    not the installed package), the import would otherwise fail deep inside a submodule
    with a confusing "partially initialized module ... circular import" message.
    """
    try:
        from rpfast import _C  # noqa: F401
    except ImportError as error:
        import importlib.machinery
        import os

        here = os.path.dirname(os.path.abspath(__file__))
        if any(os.path.exists(os.path.join(here, "_C" + s)) for s in importlib.machinery.EXTENSION_SUFFIXES):
            message = (f"the compiled extension rpfast._C in {here} could not be loaded ({error}); "
                       "rebuild it with `pip install -e .`")
        else:
            message = (f"the compiled extension rpfast._C is not in this source tree {here}; either run "
                       f"`pip install -e .` in {os.path.dirname(here)} to build it in place, or run "
                       "Python from outside the source directory so the installed package is used")
        raise ImportError(message) from error


_import_extension()
del _import_extension

from rpfast import data, ops, nn  # noqa: E402
from rpfast._config import show_config  # noqa: E402
from rpfast._validation import get_memory_budget, set_memory_budget  # noqa: E402

__all__ = ["__version__", "data", "ops", "nn", "show_config", "get_memory_budget", "set_memory_budget"]
