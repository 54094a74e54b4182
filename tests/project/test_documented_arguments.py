"""Docstrings against the code: every argument a public function or class documents under
``Args:`` is one of its parameters (a renamed or removed argument must not live on in its docs)."""
import importlib
import inspect
import re

import pytest

PUBLIC = ["rpfast", "rpfast.ops", "rpfast.nn", "rpfast.nn.rp", "rpfast.data", "rpfast.datasets.molecules",
          "rpfast.datasets.moleculenet", "rpfast.experiments.training"]


def _public_objects():
    seen, out = set(), []
    for module_name in PUBLIC:
        module = importlib.import_module(module_name)
        for name in getattr(module, "__all__", []):
            obj = getattr(module, name)
            if (inspect.isclass(obj) or inspect.isfunction(obj)) and id(obj) not in seen:
                seen.add(id(obj))
                out.append((f"{module_name}.{name}", obj))
    return out


def _documented_arguments(doc: str):
    """The names listed under ``Args:``: the lines at the block's own indentation that start with
    ``name:`` or ``name, name:`` (continuation lines are indented deeper)."""
    if "Args:" not in doc:
        return []
    lines = doc.split("Args:", 1)[1].split("\n")[1:]
    body = [line for line in lines if line.strip()]
    if not body:
        return []
    indent = len(body[0]) - len(body[0].lstrip())
    names = []
    for line in lines:
        if line.strip() and len(line) - len(line.lstrip()) < indent:
            break  # the next section
        match = re.match(r"\s*(\*{0,2}\w+(?:, \*{0,2}\w+)*):(\s|$)", line)
        if match and len(line) - len(line.lstrip()) == indent:
            names += [name.lstrip("*") for name in match.group(1).split(", ")]
    return names


OBJECTS = _public_objects()


def test_there_are_documented_arguments_to_check():
    assert sum(bool(_documented_arguments(inspect.getdoc(obj) or "")) for _, obj in OBJECTS) > 15


@pytest.mark.parametrize("name,obj", OBJECTS, ids=[name for name, _ in OBJECTS])
def test_documented_arguments_are_parameters(name, obj):
    doc = inspect.getdoc(obj) or ""
    target = obj
    if inspect.isclass(obj):
        target = obj.__init__
        if "Args:" not in doc:
            doc = inspect.getdoc(obj.__init__) or ""
    try:
        parameters = set(inspect.signature(target).parameters)
    except (TypeError, ValueError):
        pytest.skip(f"{name} has no introspectable signature")
    unknown = [arg for arg in _documented_arguments(doc) if arg not in parameters]
    assert not unknown, f"{name}'s docstring documents {unknown}, which it does not take ({sorted(parameters)})"
