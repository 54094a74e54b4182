"""A module tree's parameters stored in one flat tensor (the idea of FSDP's ``FlatParameter``).

Why: a small model's training step pays torch's per-parameter costs once per tensor:
autograd's ``AccumulateGrad``, ``zero_grad`` and the optimizer's bookkeeping (fused Adam
~5 us per tensor here). A GIN of width 16 has ~40 tensors, so these cost more than the C++
network's forward and backward together. Held in one tensor, they are paid once.

Layout: ``paths[i]`` (dotted, below the root) holds ``flat[offsets[i]:offsets[i] + numel]``
viewed as ``shapes[i]``. The original attributes keep *detached* views of the flat storage
(reading, printing and in-place writes under ``torch.no_grad`` work and write through), so
code that reads them sees the current values but builds no autograd edge. Code that needs
gradients to reach the flat parameter through the attributes runs under :meth:`connected`,
which installs views taken in the autograd graph and puts the detached ones back after.
"""
import functools
from contextlib import contextmanager
from typing import Iterator, List, Sequence, Tuple

import torch
from torch import Tensor, nn

__all__ = ["FlatLayout"]


def _owner(root: nn.Module, path: str) -> Tuple[nn.Module, str]:
    module = root
    *names, leaf = path.split(".")
    for name in names:
        module = module._modules[name]
    return module, leaf


class FlatLayout:
    """Where each parameter of a module tree lives in its flat parameter (see the module
    docstring). Holds the submodules that own the attributes, never the root."""

    def __init__(self, owners: Sequence[Tuple[nn.Module, str]], paths: Sequence[str],
                 shapes: Sequence[torch.Size], name: str):
        """``name``: the flat parameter's attribute on the root (its state-dict key)."""
        self.name = name
        self.owners = list(owners)
        self.paths = list(paths)
        self.shapes = [torch.Size(s) for s in shapes]
        self.numels = [s.numel() for s in self.shapes]
        self.size = sum(self.numels)
        self._detached = None  # (which flat tensor, its detached views)

    @staticmethod
    def flatten(root: nn.Module, paths: Sequence[str], name: str) -> "FlatLayout":
        """Moves the parameters at ``paths`` into one new flat parameter, registered on
        ``root`` as ``name``, with their current values; their attributes become views of it,
        and ``root``'s state dict keeps one entry per original parameter."""
        owners, params = [], []
        for path in paths:
            owner, leaf = _owner(root, path)
            param = owner._parameters.get(leaf)
            if not isinstance(param, nn.Parameter):
                raise ValueError(f"{path} is not a parameter of this module")
            owners.append((owner, leaf))
            params.append(param)
        kinds = {(p.dtype, p.device) for p in params}
        if len(kinds) != 1:
            raise ValueError(f"flat parameters need one dtype and device, got {sorted(map(str, kinds))}")
        flat = nn.Parameter(torch.cat([p.detach().reshape(-1) for p in params]),
                            requires_grad=any(p.requires_grad for p in params))
        layout = FlatLayout(owners, paths, [p.shape for p in params], name)
        for owner, leaf in owners:
            del owner._parameters[leaf]
        root.register_parameter(name, flat)
        layout.install(flat)
        # partials of plain functions: torch tags the hooks with attributes, and a model pickles with them
        root.register_state_dict_post_hook(functools.partial(FlatLayout.state_dict_hook, layout))
        root.register_load_state_dict_pre_hook(functools.partial(FlatLayout.load_state_dict_pre_hook, layout))
        return layout

    def views(self, flat: Tensor) -> List[Tensor]:
        """``flat``'s pieces shaped as the original parameters (views: gradients reach ``flat``
        where ``flat`` is in the autograd graph)."""
        return [piece.view(shape) for piece, shape in zip(flat.split(self.numels), self.shapes)]

    def install(self, flat: Tensor, connected: bool = False) -> None:
        """Sets every attribute to its view of ``flat`` (detached unless ``connected``). The
        detached views are made once per flat storage and reinstalled as the same objects
        (a binding checks the attributes by identity)."""
        if flat.shape != (self.size,):
            raise ValueError(f"the flat parameter must have shape [{self.size}], got {tuple(flat.shape)}")
        if connected:
            views = self.views(flat)
        elif torch.compiler.is_compiling() and self._detached is not None:
            views = self._detached[1]  # made in eager mode (Dynamo cannot compare data pointers)
        else:
            key = (id(flat), flat.data_ptr(), flat.dtype, flat.device)
            if self._detached is None or self._detached[0] != key:
                self._detached = (key, self.views(flat.detach()))
            views = self._detached[1]
        for (owner, leaf), path, view in zip(self.owners, self.paths, views):
            if leaf in owner._parameters or leaf in owner._buffers or leaf in owner._modules:
                raise ValueError(f"{path} was replaced by a parameter, buffer or module, but this model keeps its "
                                 f"parameters in one flat tensor: assign to the flat parameter (or write into "
                                 f"{path} under torch.no_grad()) instead")
            setattr(owner, leaf, view)

    @contextmanager
    def connected(self, flat: Tensor) -> Iterator[None]:
        """The attributes as views of ``flat`` in the autograd graph for the duration."""
        self.install(flat, connected=True)
        try:
            yield
        finally:
            self.install(flat)

    def state_dict_hook(self, module, state_dict, prefix, local_metadata) -> None:
        """A state-dict post hook: the flat entry becomes one entry per original parameter, so
        checkpoints load into the same model built either way. """
        flat = state_dict.pop(prefix + self.name)
        for path, view in zip(self.paths, self.views(flat)):
            state_dict[prefix + path] = view

    def load_state_dict_pre_hook(self, module, state_dict, prefix, local_metadata, strict, missing_keys,
                                 unexpected_keys, error_msgs) -> None:
        """A load-state-dict pre hook: per-parameter entries are packed into the flat entry
        (missing ones are reported as missing, wrong shapes as size mismatches)."""
        keys = [prefix + path for path in self.paths]
        if prefix + self.name in state_dict or not any(key in state_dict for key in keys):
            return
        flat = getattr(module, self.name)
        pieces = []
        for key, shape, current in zip(keys, self.shapes, self.views(flat.detach())):
            value = state_dict.pop(key, None)
            if value is None:
                missing_keys.append(key)
                value = current
            elif not isinstance(value, Tensor) or value.shape != shape:
                error_msgs.append(f"size mismatch for {key}: copying a param with shape "
                                  f"{tuple(getattr(value, 'shape', ()))} from checkpoint, the shape in "
                                  f"current model is {tuple(shape)}.")
                value = current
            pieces.append(value.detach().reshape(-1).to(flat.dtype))
        state_dict[prefix + self.name] = torch.cat(pieces)
