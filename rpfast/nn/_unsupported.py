"""What rpfast's layers do not support, refused with one clear error each
(docs/guide/unsupported.md).

* ``torch.jit.script``: every public rpfast module inherits :class:`NotScriptable`, whose
  ``__prepare_scriptable__`` (which ``torch.jit.script`` calls on a module and on each of its
  submodules before compiling) raises, so a model holding an rpfast layer fails at once.
* ``torch.jit.trace`` and ``torch.func`` transforms: :func:`check_call` (every graph layer's
  forward) and each op's dispatch (:func:`rpfast.ops._registry.refuse_unsupported`) raise.
* PyG ``Explainer`` edge masks: PyG applies them inside its ``MessagePassing`` layers only, so an
  rpfast layer would silently ignore them; :func:`check_call` raises when it runs under an
  Explainer that asks for edge masks (node masks, which act on ``x``, work).
"""
import os
import sys

from rpfast.ops._registry import compiling, refuse_unsupported

__all__ = ["NotScriptable", "check_call"]


class NotScriptable:
    """Mixin for rpfast's ``nn.Module`` classes: ``torch.jit.script`` raises NotImplementedError."""

    def __prepare_scriptable__(self):
        raise NotImplementedError(
            f"rpfast.nn.{type(self).__name__} does not support torch.jit.script (its forward takes graphs in "
            "several Python forms and calls C++ kernels TorchScript cannot compile); use torch.compile(model) or "
            "eager mode")


def check_call(owner: str, training: bool = False) -> None:
    """Raise NotImplementedError naming ``owner`` (a layer) under ``torch.jit.trace``, a
    ``torch.func`` transform, or (unless ``training``: PyG's Explainer puts the model in eval
    mode) a PyG Explainer that asks for edge masks; nothing under ``torch.compile`` (which
    traces the layers itself). The Explainer check walks up the call stack (~10 us)."""
    if compiling():
        return
    refuse_unsupported(owner)
    if not training and _explainer_edge_masks():
        raise NotImplementedError(
            f"{owner} does not support PyG Explainer edge masks: PyG applies them inside its MessagePassing layers, "
            "and rpfast's layers are not MessagePassing layers, so the mask would be ignored; explain with "
            "edge_mask_type=None (node masks work)")


def _explainer_edge_masks() -> bool:
    """Whether a caller up the stack is PyG's explain code with an edge mask type set (on the
    ``Explainer``, or on the algorithm's explainer configuration)."""
    explain = sys.modules.get("torch_geometric.explain")
    if explain is None or not getattr(explain, "__file__", None):
        return False
    root = os.path.dirname(explain.__file__)
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename.startswith(root):
            owner = frame.f_locals.get("self")
            config = getattr(owner, "__dict__", {}).get("_explainer_config", owner)
            if getattr(config, "edge_mask_type", None) is not None:
                return True
        frame = frame.f_back
    return False
