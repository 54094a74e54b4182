"""The layering of docs/architecture.md, checked on the package's import statements.

Dependencies point one way: ``_validation <- data <- ops <- nn <- experiments <- commands <- cli``;
only ``rpfast/ops/_backend.py`` imports the compiled extension and only
``rpfast/data/molecules.py`` imports RDKit.
"""
import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "rpfast"
LAYERS = ["_validation", "data", "ops", "nn", "experiments", "commands", "cli"]


def _modules():
    return sorted(p for p in PACKAGE.rglob("*.py"))


def _imports(path: Path):
    """Absolute module names imported by ``path`` (``from rpfast import x`` gives ``rpfast.x``)."""
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module
            for alias in node.names:
                yield f"{node.module}.{alias.name}"


def _layer(path_or_module: str):
    parts = path_or_module.split(".")
    if parts[0] != "rpfast" or len(parts) < 2:
        return None
    return parts[1] if parts[1] in LAYERS else None


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    return ".".join(rel.parts)


def test_only_the_backend_imports_the_extension():
    importers = {_module_name(p) for p in _modules() if "rpfast._C" in set(_imports(p))}
    assert importers == {"rpfast.ops._backend"}


def test_rdkit_is_imported_in_one_module():
    importers = {_module_name(p) for p in _modules() if any(m.split(".")[0] == "rdkit" for m in _imports(p))}
    assert importers == {"rpfast.data.molecules"}


@pytest.mark.parametrize("path", _modules(), ids=lambda p: _module_name(p))
def test_imports_point_down_the_layers(path):
    own = _layer(_module_name(path))
    if own is None:
        return
    for module in _imports(path):
        other = _layer(module)
        if other is not None:
            assert LAYERS.index(other) <= LAYERS.index(own), f"{_module_name(path)} imports {module}"


def test_cli_declares_no_command_options():
    source = (PACKAGE / "cli.py").read_text()
    calls = [node for node in ast.walk(ast.parse(source))
             if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument"]
    flags = [ast.literal_eval(call.args[0]) for call in calls if call.args]
    assert set(flags) <= {"--version"}, flags
