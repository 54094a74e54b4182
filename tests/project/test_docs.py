"""The documentation (docs/): Sphinx builds it without a warning, the API reference it generates
from the docstrings holds every public name, and the experiment pages' tables are what the runs'
own files give (scripts/experiment_tables.py)."""
import importlib
import re
import subprocess
import sys

import pytest

from tests.helpers.paths import ROOT

#: The public modules: every name in their ``__all__`` is documented.
PUBLIC_MODULES = ["rpfast", "rpfast.data", "rpfast.datasets", "rpfast.datasets.molecules", "rpfast.datasets.molecule_graphs",
                  "rpfast.datasets.moleculenet", "rpfast.datasets.molecule_cache", "rpfast.datasets.pairs",
                  "rpfast.datasets.pair_families", "rpfast.ops", "rpfast.nn", "rpfast.nn.rp", "rpfast.experiments.training",
                  "rpfast.experiments.molecules.checkpoints"]
NOT_DOCUMENTED = {"__version__", "data", "datasets", "ops", "nn"}  # the version string and the subpackages themselves

pytestmark = pytest.mark.backend_neutral  # the build does not depend on the backend


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """``(sphinx's completed process, the html directory)`` of one build of docs/."""
    pytest.importorskip("sphinx")
    pytest.importorskip("myst_parser")
    out = tmp_path_factory.mktemp("docs")
    result = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", "-d",
                             str(out / "doctrees"), str(ROOT / "docs"), str(out / "html")],
                            capture_output=True, text=True, timeout=900)
    return result, out / "html"


def test_the_docs_build_without_warnings(built):
    result, html = built
    assert result.returncode == 0 and not result.stderr.strip(), result.stderr[-6000:]
    assert (html / "api" / "index.html").is_file() and (html / "experiments" / "pairs.html").is_file()


def _resolve(dotted: str):
    """The object a documented id names, or None."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            obj = getattr(obj, attribute, None)
        return obj
    return None


def test_every_public_name_is_in_the_api_reference(built):
    _, html = built
    text = "".join(page.read_text() for page in (html / "api").glob("*.html"))
    documented = set(re.findall(r'id="(rpfast[\w.]*)"', text))
    objects = [_resolve(name) for name in documented]
    missing = []
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            if name in NOT_DOCUMENTED or f"{module_name}.{name}" in documented:
                continue
            value = getattr(module, name)
            if not any(value is obj for obj in objects):  # documented under the module that defines it
                missing.append(f"{module_name}.{name}")
    assert not missing, f"public names missing from the API reference (docs/api/*.rst): {missing}"


def test_experiment_tables_are_what_the_runs_files_give():
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "experiment_tables.py"), "--check"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    pages = list((ROOT / "docs" / "experiments").glob("*.md"))
    assert sum(page.read_text().count("<!-- table: ") for page in pages) >= 4
