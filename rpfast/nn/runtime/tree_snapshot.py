"""A module tree's tensors resolved once and re-checked in microseconds at every step.

A fused network binds its parameters and buffers to C++ once (pointers into their storage).
Before each call it must know that the module still holds the same tensors: no submodule,
parameter or buffer was replaced, no ``param.data = ...`` moved a storage, no ``.to()`` changed
dtype or device, no scalar setting (a BatchNorm's momentum, say) changed. Walking the tree
through ``nn.Module.__getattr__`` costs ~1 us per attribute, so a snapshot keeps the
dictionaries the tree is made of and compares identities, data pointers and shapes.
"""
from typing import Any, Callable, Dict, List, Sequence, Tuple

from torch import Tensor, nn

__all__ = ["TreeSnapshot"]


class TreeSnapshot:
    """The parameters, buffers or submodules at dotted ``paths`` below ``root``
    (``"layers.0.norms.1.weight"``; a path to an absent attribute holds None; a plain tensor
    attribute counts as well, as the views of a flat parameter are) plus the value
    ``scalars()`` returns, as they were when the snapshot was taken. ``scalars`` must not
    reference ``root`` itself (a cache keyed weakly by the root would never be freed).

    :meth:`current` is True while every link of every path (the parent's ``_modules``,
    ``_parameters`` or ``_buffers`` entry) still holds the same object, every tensor keeps its
    storage address and shape, and ``scalars()`` returns an equal value.
    """

    def __init__(self, root: nn.Module, paths: Sequence[str], scalars: Callable[[], Any]):
        links: Dict[Tuple[int, str], Tuple[dict, str, Any]] = {}
        self.values: List[Any] = []  # per path: a tensor, a module or None
        for path in paths:
            module = root
            *names, leaf = path.split(".")
            for name in names:
                child = module._modules[name]
                links[(id(module._modules), name)] = (module._modules, name, child)
                module = child
            registered = [module._parameters, module._buffers, module._modules]
            holders = [h for h in registered if leaf in h]
            if not holders and isinstance(module.__dict__.get(leaf), Tensor):
                # a plain tensor attribute (a view of a flat parameter): must stay, and not become registered
                holders = [module.__dict__] + registered
            elif not holders:  # absent (a plain None attribute): must not become a parameter, buffer or module
                holders = registered
            for holder in holders:
                links[(id(holder), leaf)] = (holder, leaf, holder.get(leaf))
            self.values.append(holders[0].get(leaf))
        self._links = list(links.values())
        self._storage = [(t, t.data_ptr(), t.shape) for t in self.values if isinstance(t, Tensor)]
        self._scalars = scalars
        self._scalar_values = scalars()

    def current(self) -> bool:
        """Whether the tree still holds the snapshot's tensors and scalar settings."""
        for holder, name, value in self._links:
            if holder.get(name) is not value:
                return False
        for tensor, pointer, shape in self._storage:
            if tensor.data_ptr() != pointer or tensor.shape != shape:
                return False
        return self._scalars() == self._scalar_values
