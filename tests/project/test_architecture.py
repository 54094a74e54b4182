"""The layering of docs/architecture.md, checked on the package's import statements.

Dependencies point one way:
``_validation <- _backend <- data <- ops <- nn <- experiments <- commands <- cli``; only
``rpfast/_backend.py`` imports the compiled extension and only ``rpfast/datasets/molecules.py``
imports RDKit; no import circle inside a package; no module assigns into another.
"""
import ast
from pathlib import Path

import pytest

from tests.helpers.paths import ROOT

PACKAGE = ROOT / "rpfast"
LAYERS = ["_validation", "_backend", "data", "datasets", "ops", "nn", "experiments", "commands", "cli"]


def _modules():
    return sorted(p for p in PACKAGE.rglob("*.py"))


def _walk_runtime(node: ast.AST):
    """``ast.walk`` without ``if TYPE_CHECKING:`` blocks (imports for annotations never run)."""
    todo = [node]
    while todo:
        node = todo.pop()
        yield node
        if isinstance(node, ast.If) and getattr(node.test, "id", "") == "TYPE_CHECKING":
            todo.extend(node.orelse)
            continue
        todo.extend(ast.iter_child_nodes(node))


def _imports(path: Path):
    """Absolute module names imported by ``path`` (``from rpfast import x`` gives ``rpfast.x``),
    at any depth of its code (function-level imports run too, only later)."""
    tree = ast.parse(path.read_text(), str(path))
    for node in _walk_runtime(tree):
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
    assert importers == {"rpfast._backend"}


def test_only_data_and_ops_cross_the_kernel_boundary():
    """Modules above ``ops`` reach kernels through ops, never through ``_backend`` (the two
    top-level facades excepted: ``_config``, the public switches, and ``_testing``)."""
    facades = {"rpfast._config", "rpfast._testing"}
    importers = {_module_name(p) for p in _modules()
                 if any(m == "rpfast._backend" or m.startswith("rpfast._backend.") for m in _imports(p))}
    outside = {m for m in importers - facades if _layer(m) not in ("data", "ops")}
    assert importers and not outside, f"{sorted(outside)} import rpfast._backend"


def test_the_gin_package_holds_modules_only():
    """``rpfast/nn/gin/`` holds the GIN modules; how they run lives in ``rpfast/nn/runtime/``."""
    files = sorted(p.name for p in (PACKAGE / "nn" / "gin").glob("*.py"))
    assert files == ["__init__.py", "conv.py", "layer.py", "model.py"]


def test_rdkit_is_imported_in_one_module():
    importers = {_module_name(p) for p in _modules() if any(m.split(".")[0] == "rdkit" for m in _imports(p))}
    assert importers == {"rpfast.datasets.molecules"}


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


def _module_names():
    return {_module_name(p): p for p in _modules()}


def _rpfast_targets(module: str, path: Path, names: dict):
    """The rpfast modules ``path`` imports, at any depth of its code (function-level imports
    count: they close a circle as surely, only later)."""
    for imported in _imports(path):
        while imported and imported not in names:  # "rpfast.ops.permute_adjacency" -> "rpfast.ops"
            imported = imported.rpartition(".")[0]
        if imported and imported != module:
            yield imported


def _package(module: str) -> str:
    return module.rpartition(".")[0]


def _circles_inside_packages():
    """Strongly connected sets of two or more modules of one package (package ``__init__``
    re-exports excluded: they import their own modules by design)."""
    names = _module_names()
    edges = {m: {t for t in _rpfast_targets(m, p, names) if _package(t) == _package(m) and not t.endswith("__init__")
                 and t != _package(m)}
             for m, p in names.items() if not m.endswith("__init__")}
    index, low, stack, on_stack, found, counter = {}, {}, [], set(), [], [0]

    def visit(v):  # Tarjan's algorithm
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return set(found)


def test_no_import_circle_inside_a_package():
    assert _circles_inside_packages() == set()


def test_is_compiling_is_asked_in_one_place():
    """The eager-or-compiled choice lives in the op registry, through rpfast._backend.compiling."""
    askers = [_module_name(path) for path in _modules() if "is_compiling" in _code_of(path)]
    assert askers == ["rpfast._backend"]


def test_no_public_name_is_defined_twice_in_ops():
    """One definition per op: no two modules of rpfast.ops define the same public function or class."""
    seen = {}
    for path in _modules():
        if not _module_name(path).startswith("rpfast.ops."):
            continue
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and not node.name.startswith("_"):
                assert node.name not in seen, f"{node.name} is defined in {seen[node.name]} and {_module_name(path)}"
                seen[node.name] = _module_name(path)


def _code_of(path) -> str:
    """The file without its docstrings and comments (names in prose do not count)."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            body[0].value.value = ""
    return ast.unparse(tree)


def _module_aliases(tree: ast.AST, names: dict) -> set:
    """Names a file binds to modules: ``import a.b as c``, ``from rpfast import _validation``."""
    aliases = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            aliases |= {alias.asname or alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            aliases |= {alias.asname or alias.name for alias in node.names
                        if f"{node.module}.{alias.name}" in names}
    return aliases


@pytest.mark.parametrize("path", _modules(), ids=lambda p: _module_name(p))
def test_no_module_assigns_into_another_module(path):
    """``other_module.attribute = value`` (or ``setattr(other_module, ...)``) makes a module behave
    differently depending on what was imported before: hooks go through arguments instead."""
    tree = ast.parse(path.read_text(), str(path))
    modules = _module_aliases(tree, _module_names())
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
        for target in targets:
            if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name):
                assert target.value.id not in modules, \
                    f"{_module_name(path)}:{node.lineno} assigns {target.value.id}.{target.attr}"
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "setattr" and node.args \
                and isinstance(node.args[0], ast.Name):
            assert node.args[0].id not in modules, f"{_module_name(path)}:{node.lineno} setattr on a module"
