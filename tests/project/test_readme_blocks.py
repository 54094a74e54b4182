"""The shell blocks (```bash, ```sh, ```console) of the README and of every page under docs/
run top to bottom, in order, one temporary directory per file, each command exiting 0
(``set -e -o pipefail``).

What the test changes, and why (so that the whole run takes well under a minute):

* Install commands (``pip install ...``), test-suite runs (``python -m pytest ...``, with or
  without leading ``VAR=value`` settings) and the docs build (``python -m sphinx``, ``python
  scripts/experiment_tables.py``: tests/project/test_docs.py runs them) are left out: this test runs
  inside the installed package's own test suite. A block left with no command is skipped.
* Experiment commands keep every documented option; :func:`_quick` appends short-run options
  after them (argparse keeps the last value of a repeated option): ``rpfast csl`` gets
  ``--epochs 2 --folds 1 --jobs 1 --no-progress``; ``rpfast molecules`` (``train``) gets
  ``--epochs 1 --eval-samples 2 --no-progress``, and ``--model duvenaud`` where it trains on the
  shipped Tox21 (no ``--data``); ``rpfast pairs`` (unless it only exports) gets ``--epochs 3
  --eval-samples 8 --no-progress``.
* Files a block reads without making them come from :data:`FIXTURES` (``my.csv.gz``: the first
  500 molecules of the shipped Tox21).
* ``RPFAST_CACHE`` is one temporary directory for every page; a console block's commands are its
  ``$ `` lines (the rest is output); a comment after a command is dropped.
"""
import gzip
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.paths import ROOT

README = ROOT / "README.md"
PAGES = [README] + sorted((ROOT / "docs").rglob("*.md"))
# installs, and commands that other tests run (the suites; the docs build and the experiment
# tables: tests/project/test_docs.py)
SKIPPED = (re.compile(r"pip install\b"), re.compile(r"(python -m )?pytest\b"), re.compile(r"python -m sphinx\b"),
           re.compile(r"python scripts/experiment_tables\.py\b"))
ENV_PREFIX = re.compile(r"^(\w+=\S*\s+)*")

pytestmark = pytest.mark.backend_neutral


def _tox21_head(path: Path, rows: int = 500) -> None:
    lines = gzip.open(ROOT / "rpfast" / "datasets" / "tox21.csv.gz", "rt").read().splitlines()
    with gzip.open(path, "wt") as fh:
        fh.write("\n".join(lines[:rows + 1]) + "\n")


FIXTURES = {"my.csv.gz": _tox21_head}


def readme_blocks(page: Path = README):
    """``(language, text)`` of every shell block of ``page`` (the README), in order."""
    return re.findall(r"^```(bash|sh|console)\n(.*?)^```", page.read_text(), re.S | re.M)


def _commands(language: str, text: str):
    """The block's command lines (continuations joined; a console block's ``$`` lines)."""
    text = text.replace("\\\n", " ")
    lines = text.splitlines()
    if language == "console":
        lines = [line[2:] for line in lines if line.startswith("$ ")]
    return [line for line in (_drop_comment(line).strip() for line in lines) if line]


def _drop_comment(line: str) -> str:
    """``line`` without a trailing ``# comment`` (a ``#`` outside quotes, at the start or after a space)."""
    quote = None
    for i, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line


def _quick(command: str) -> str:
    """``command`` with short-run options appended to the experiments (see the module docstring)."""
    words = command.split()
    if words[:2] == ["rpfast", "csl"]:
        return command + " --epochs 2 --folds 1 --jobs 1 --no-progress"
    if words[:2] == ["rpfast", "molecules"] and (len(words) == 2 or words[2] != "predict"):
        return command + " --epochs 1 --eval-samples 2 --no-progress" + ("" if "--data" in words else " --model duvenaud")
    if words[:2] == ["rpfast", "pairs"] and "--export" not in words:
        return command + " --epochs 3 --eval-samples 8 --no-progress"
    return command


def script(language: str, text: str) -> str:
    """The commands the test runs for one block (empty when nothing is left)."""
    kept = []
    for line in _commands(language, text):
        parts = [part.strip() for part in line.split(" && ")]
        parts = [_quick(part) for part in parts if not any(p.match(ENV_PREFIX.sub("", part)) for p in SKIPPED)]
        if parts:
            kept.append(" && ".join(parts))
    return "\n".join(kept)


def test_the_readme_has_shell_blocks_and_the_rules_apply():
    blocks = readme_blocks()
    assert len(blocks) >= 3
    assert script("bash", "pip install torch==2.13.0 . && rpfast csl  # a comment\n") == \
        "rpfast csl --epochs 2 --folds 1 --jobs 1 --no-progress"
    assert script("bash", "RPFAST_FUZZ_EXAMPLES=9 python -m pytest tests/fuzz\n") == ""
    assert script("console", "$ rpfast info\nbackend: cpp\n") == "rpfast info"
    assert _drop_comment("printf '# x\\n' > g.txt  # made here") == "printf '# x\\n' > g.txt  "


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    """One featurisation cache for every page (content-keyed: Tox21 is featurised once)."""
    return tmp_path_factory.mktemp("cache")


@pytest.mark.parametrize("page", [p for p in PAGES if readme_blocks(p)], ids=lambda p: str(p.relative_to(ROOT)))
def test_shell_blocks_run_top_to_bottom(page, tmp_path, cache):
    for name, make in FIXTURES.items():
        make(tmp_path / name)
    env = dict(os.environ, RPFAST_CACHE=str(cache), MPLBACKEND="Agg",
               PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))
    for index, (language, text) in enumerate(readme_blocks(page)):
        commands = script(language, text)
        if not commands:
            continue
        result = subprocess.run(["bash", "-c", "set -e -o pipefail\n" + commands], cwd=tmp_path, env=env,
                                capture_output=True, text=True, timeout=300)
        assert result.returncode == 0, (f"{page.name}: shell block {index + 1} failed (exit {result.returncode}):\n"
                                        f"{commands}\n--- stdout\n{result.stdout[-3000:]}\n--- stderr\n"
                                        f"{result.stderr[-3000:]}")
