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
which installs views taken in the autograd graph and puts the detached ones back after
(holding a lock meanwhile, so concurrent forwards of one model cannot see each other's views).
"""
import functools
import threading
from contextlib import contextmanager
from typing import Iterator, List, Sequence, Tuple

import torch
from torch import Tensor, nn

from rpfast.ops._registry import compiling

__all__ = ["FlatLayout"]


def _module_at(root: nn.Module, names: Sequence[str]) -> nn.Module:
    module = root
    for name in names:
        module = module._modules[name]
    return module


class FlatLayout:
    """Where each parameter of a module tree lives in its flat parameter (see the module
    docstring). Holds the submodules that own the attributes, never the root."""

    def __init__(self, owners: Sequence[Tuple[nn.Module, str]], paths: Sequence[str],
                 shapes: Sequence[torch.Size], name: str, key_order: Sequence[str]):
        """``name``: the flat parameter's attribute on the root (its state-dict key);
        ``key_order``: the root's state-dict keys before flattening (kept in that order)."""
        self.name = name
        self.owners = list(owners)
        self.paths = list(paths)
        self.shapes = [torch.Size(s) for s in shapes]
        self.numels = [s.numel() for s in self.shapes]
        self.size = sum(self.numels)
        self.key_order = list(key_order)
        self._detached = None  # (which flat tensor, its detached views)
        self._lock = threading.RLock()

    def __getstate__(self):
        state = dict(self.__dict__)
        del state["_lock"]  # locks do not copy or pickle
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._lock = threading.RLock()

    @staticmethod
    def flatten(root: nn.Module, paths: Sequence[str], name: str) -> "FlatLayout":
        """Moves the parameters at ``paths`` into one new flat parameter, registered on
        ``root`` as ``name``, with their current values; their attributes become views of it,
        and ``root``'s state dict keeps one entry per original parameter."""
        owners, params = [], []
        for path in paths:
            *names, leaf = path.split(".")
            owner = _module_at(root, names)
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
        layout = FlatLayout(owners, paths, [p.shape for p in params], name, root.state_dict().keys())
        for owner, leaf in owners:
            del owner._parameters[leaf]
        root.register_parameter(name, flat)
        layout.install(flat)
        # Submodules own no parameters now, so nn.Module.requires_grad_ on one would freeze nothing
        # and say nothing: it raises instead (an instance attribute shadows the method).
        for prefix in sorted({".".join(path.split(".")[:depth]) for path in paths
                              for depth in range(1, path.count(".") + 1)}):
            module = _module_at(root, prefix.split("."))
            object.__setattr__(module, "requires_grad_",
                               functools.partial(FlatLayout.refuse_requires_grad, prefix, name))
        # partials of plain functions: torch tags the hooks with attributes, and a model pickles with them
        root.register_state_dict_post_hook(functools.partial(FlatLayout.state_dict_hook, layout))
        root.register_load_state_dict_pre_hook(functools.partial(FlatLayout.load_state_dict_pre_hook, layout))
        return layout

    @staticmethod
    def refuse_requires_grad(prefix: str, name: str, requires_grad: bool = True):
        """``requires_grad_`` of a submodule whose parameters were moved into the flat one."""
        raise ValueError(f"{prefix}.requires_grad_() cannot freeze or unfreeze part of this model: its parameters "
                         f"live in one flat tensor ({name}); call requires_grad_ on the whole model, or build it "
                         f"with flat_parameters=False to freeze single modules")

    def views(self, flat: Tensor) -> List[Tensor]:
        """``flat``'s pieces shaped as the original parameters (views: gradients reach ``flat``
        where ``flat`` is in the autograd graph)."""
        return [piece.view(shape) for piece, shape in zip(flat.split(self.numels), self.shapes)]

    def offset(self, path: str) -> int:
        """Where the parameter at ``path`` starts in the flat tensor."""
        return sum(self.numels[:self.paths.index(path)])

    def check(self, root: nn.Module) -> None:
        """Raises ValueError if the tree no longer holds this layout: a module on a parameter's
        path was replaced (a new classifier head, say), or a parameter attribute was reassigned
        or registered anew. Such changes would otherwise be silently undone or cut off from
        the gradient. Values given to an attribute with ``.data = ...`` are adopted
        (:meth:`adopt_data`)."""
        installed = self._detached[1] if self._detached is not None else [None] * len(self.paths)
        for (owner, leaf), path, view in zip(self.owners, self.paths, installed):
            *names, _ = path.split(".")
            try:
                current = _module_at(root, names)
            except KeyError:
                current = None
            if current is not owner:
                raise ValueError(f"{'.'.join(names)} was replaced or removed, but this model keeps its parameters in "
                                 f"one flat tensor ({self.name}) laid out for the original modules: build the model "
                                 f"with flat_parameters=False to change its modules, or write new values into "
                                 f"{path} under torch.no_grad()")
            if leaf in owner._parameters or leaf in owner._buffers or leaf in owner._modules or (
                    view is not None and owner.__dict__.get(leaf) is not view):
                raise ValueError(f"{path} was reassigned, but this model keeps its parameters in one flat tensor "
                                 f"({self.name}): write into {path} under torch.no_grad() instead (or build the "
                                 f"model with flat_parameters=False)")
        if not compiling():
            self.adopt_data(getattr(root, self.name))

    def adopt_data(self, flat: Tensor, keep_values: bool = True) -> None:
        """Follows ``attribute.data = values`` on a parameter view: such an assignment gives the
        view new storage, so the forward (reading the attribute) and ``flat`` (what the optimizer
        updates and ``state_dict`` saves) would disagree. The values are copied into ``flat``
        and the view is pointed back at its slice (the same object, so bindings stay valid).
        Called on every forward, ``state_dict()`` and ``.to()``; an optimizer step taken between
        the assignment and that call is overwritten for that tensor, as the assignment came
        first. A new shape is a ValueError. ``keep_values=False`` only points the views back
        (``load_state_dict``: the loaded values win over an earlier assignment)."""
        self._check_size(flat)
        if self._detached is None:
            return
        (_, base, dtype, device), views = self._detached  # the flat storage the views were made from
        flat = flat.detach()
        element_size = torch.empty(0, dtype=dtype).element_size()
        for path, offset, numel, shape, view in zip(self.paths, self._offsets(), self.numels, self.shapes, views):
            if view.data_ptr() == base + offset * element_size and view.shape == shape \
                    and view.dtype == dtype and view.device == device and view.is_contiguous():
                continue  # still a view of that storage (which install() re-points if flat itself moved)
            if view.shape != shape and keep_values:
                raise ValueError(f"{path} was given values of shape {tuple(view.shape)} (.data = ...), but this "
                                 f"model keeps a {tuple(shape)} tensor there in its flat parameter ({self.name}); "
                                 f"build the model with flat_parameters=False to change shapes")
            piece = flat[offset:offset + numel].view(shape)
            if keep_values:
                with torch.no_grad():
                    piece.copy_(view.data)
            view.data = piece

    def _offsets(self) -> List[int]:
        offsets, start = [], 0
        for numel in self.numels:
            offsets.append(start)
            start += numel
        return offsets

    def install(self, flat: Tensor, connected: bool = False) -> None:
        """Sets every attribute to its view of ``flat`` (detached unless ``connected``). The
        detached views are made once per flat storage and reinstalled as the same objects
        (a binding checks the attributes by identity)."""
        self._check_size(flat)
        if connected:
            views = self.views(flat)
        elif compiling() and self._detached is not None:
            views = self._detached[1]  # made in eager mode (Dynamo cannot compare data pointers)
        else:
            key = (id(flat), flat.data_ptr(), flat.dtype, flat.device)
            if self._detached is None or self._detached[0] != key:
                self._detached = (key, self.views(flat.detach()))
            views = self._detached[1]
        for (owner, leaf), view in zip(self.owners, views):
            setattr(owner, leaf, view)

    def _check_size(self, flat: Tensor) -> None:
        if flat.shape != (self.size,):
            raise ValueError(f"the flat parameter must have shape [{self.size}], got {tuple(flat.shape)} (was "
                             f"{self.name}.data replaced by a tensor of another size?)")

    def refresh(self, root: nn.Module, flat: Tensor) -> None:
        """:meth:`check`, then the detached views of ``flat`` (which may have moved: ``.data =
        ...``), while no other thread has the attributes swapped (:meth:`connected`)."""
        with self._lock:
            self.check(root)
            self.install(flat)

    @contextmanager
    def connected(self, root: nn.Module, flat: Tensor) -> Iterator[None]:
        """The attributes as views of ``flat`` in the autograd graph for the duration, after
        :meth:`check`; one thread at a time (eager mode; compiled code cannot take a lock)."""
        lock = None if compiling() else self._lock
        if lock is not None:
            lock.acquire()
        try:
            self.check(root)
            self.install(flat, connected=True)
            try:
                yield
            finally:
                self.install(flat)
        finally:
            if lock is not None:
                lock.release()

    def state_dict_hook(self, module, state_dict, prefix, local_metadata) -> None:
        """A state-dict post hook: the flat entry becomes one entry per original parameter, in
        the order the per-tensor layout gives them, so checkpoints load into the same model
        built either way. The entries are copies: each owns its storage, as formats that refuse
        shared memory (safetensors) need."""
        self.adopt_data(getattr(module, self.name))
        flat = state_dict.pop(prefix + self.name)
        pieces = {prefix + path: view.clone() for path, view in zip(self.paths, self.views(flat.detach()))}
        entries = {key: value for key, value in state_dict.items() if key.startswith(prefix)}
        for key in entries:
            del state_dict[key]
        entries.update(pieces)
        for key in self.key_order:
            if prefix + key in entries:
                state_dict[prefix + key] = entries.pop(prefix + key)
        state_dict.update(entries)  # anything the original layout did not have

    def load_state_dict_pre_hook(self, module, state_dict, prefix, local_metadata, strict, missing_keys,
                                 unexpected_keys, error_msgs) -> None:
        """A load-state-dict pre hook: per-parameter entries are packed into the flat entry
        (missing ones are reported as missing, wrong shapes as size mismatches)."""
        flat = getattr(module, self.name)
        self.adopt_data(flat, keep_values=False)  # a view given .data = ... before: the loaded values win
        if prefix + self.name in state_dict:
            return
        pieces = []
        for path, shape, current in zip(self.paths, self.shapes, self.views(flat.detach())):
            key = prefix + path
            value = state_dict.pop(key, None)
            if value is None:
                missing_keys.append(key)
                value = current
            elif not isinstance(value, Tensor) or value.shape != shape:
                error_msgs.append(f"size mismatch for {key}: copying a param with shape "
                                  f"{tuple(getattr(value, 'shape', ()))} from checkpoint, the shape in "
                                  f"current model is {tuple(shape)}.")
                value = current
            pieces.append(value.detach().reshape(-1).to(device=flat.device, dtype=flat.dtype))
        state_dict[prefix + self.name] = torch.cat(pieces)
