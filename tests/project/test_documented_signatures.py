"""The guide's signatures against the code: every call of an rpfast class that
docs/guide/relational-pooling.md documents in its prose (``PiSGD(...)``, ``KAry(...)``,
``RPGNN(...)``, ``GIN(..., edge_dim=d)``) names a function, class or method that exists, with the
documented parameters in the documented order and the documented literal defaults
(``name=...`` documents the name only). Calls written as examples (a literal or ``...`` as an
argument) only have to exist. (The API reference itself is generated from the code: docs/api.)"""
import ast
import importlib
import inspect
import re

import pytest

from tests.helpers.paths import ROOT

PAGE = ROOT / "docs" / "guide" / "relational-pooling.md"
# where a bare documented name is looked up, in this order
NAMESPACES = ["rpfast", "rpfast.data", "rpfast.ops", "rpfast.nn", "rpfast.nn.rp", "rpfast.datasets.molecules",
              "rpfast.datasets.moleculenet", "rpfast.ops.random", "rpfast.ops.dense", "rpfast.ops.subsets"]
# documented calls on an instance (``graph.to_pyg()``): the class they belong to
INSTANCES = {"graph": "GraphBatch"}


def _call(span: str):
    """``(name, arguments)`` of a span ``name(arguments)[ -> result]``, else None."""
    match = re.match(r"([A-Za-z_][\w.]*)\(", span)
    if not match:
        return None
    depth = 0
    for end in range(match.end() - 1, len(span)):
        depth += {"(": 1, ")": -1}.get(span[end], 0)
        if depth == 0:
            rest = span[end + 1:].strip()
            if rest and not rest.startswith("->"):
                return None
            return match.group(1), span[match.end():end]
    return None


def _documented_calls():
    """``(name, arguments text)`` of the calls of rpfast classes the page's prose documents."""
    prose = re.sub(r"```.*?```", "", PAGE.read_text(), flags=re.S)
    calls = []
    for span in re.findall(r"`([^`]+)`", prose, flags=re.S):
        call = _call(" ".join(span.split()))
        if call is not None and _rpfast_class(call[0]):
            calls.append(call)
    return calls


def _rpfast_class(name: str) -> bool:
    """Whether ``name`` (``PiSGD``, ``GraphBatch.dense_adj``) starts with an rpfast class."""
    return name[0].isupper() and _resolve(name.split(".")[0]) is not None


def _resolve(name: str):
    first, *rest = name.split(".")
    candidates = []
    if first in INSTANCES:
        first = INSTANCES[first]
    if name.startswith("rpfast."):
        parts = name.split(".")
        for cut in range(len(parts), 0, -1):
            try:
                obj = importlib.import_module(".".join(parts[:cut]))
            except ImportError:
                continue
            candidates.append((obj, parts[cut:]))
            break
    else:
        for namespace in NAMESPACES:
            module = importlib.import_module(namespace)
            if hasattr(module, first):
                candidates.append((getattr(module, first), rest))
                break
            try:
                candidates.append((importlib.import_module(f"{namespace}.{first}"), rest))
                break
            except ImportError:
                continue
    for obj, path in candidates:
        for attribute in path:
            obj = getattr(obj, attribute, None)
        if obj is not None:
            return obj
    return None


def _split(arguments: str):
    """Top-level comma-separated parts of an argument list."""
    parts, depth, current = [], 0, ""
    for char in arguments:
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current.strip())
            current = ""
        else:
            current += char
    if current.strip():
        parts.append(current.strip())
    return parts


def _parameters(obj):
    target = obj.__init__ if inspect.isclass(obj) else obj
    parameters = list(inspect.signature(target).parameters.values())
    return [p for p in parameters if p.name not in ("self", "cls")]


CALLS = _documented_calls()


def test_the_guide_documents_calls():
    assert len(CALLS) > 10


@pytest.mark.parametrize("name,arguments", CALLS, ids=[name for name, _ in CALLS])
def test_documented_signature_matches_the_code(name, arguments):
    obj = _resolve(name)
    assert obj is not None, f"the guide documents {name}(...), which rpfast does not have"
    if not callable(obj):
        pytest.fail(f"the guide documents {name}(...), which is not callable")
    documented = [part for part in _split(arguments) if part not in ("*", "/")]
    if any(not re.fullmatch(r"\*{0,2}[A-Za-z_]\w*", part.partition("=")[0].strip()) for part in documented):
        return  # an example call (literal arguments, "..."): it exists, which is all it claims
    actual = _parameters(obj)
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in actual) and len(actual) <= 2:
        return  # an op object's __call__(*args): its schema is tested with the op
    names = [p.name for p in actual]
    for part in documented:
        key, _, default = part.partition("=")
        key = key.strip().lstrip("*")
        assert key in names, f"guide: {name}({arguments}) documents {key!r}; the code takes {names}"
        if default and default.strip() != "...":
            try:
                value = ast.literal_eval(default.strip())
            except (ValueError, SyntaxError):
                continue  # a name (PAPER_SKIPS), an expression: not compared
            code = next(p for p in actual if p.name == key).default
            assert code == value, f"guide: {name}: {key}={default.strip()}, the code's default is {code!r}"
    documented_names = [part.partition("=")[0].strip().lstrip("*") for part in documented]
    order = [n for n in names if n in documented_names]
    assert order == documented_names, f"guide: {name}({arguments}) lists {documented_names}; the code's order {names}"
