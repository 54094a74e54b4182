"""docs/architecture.md's layout map (its "Layers" block) matches the tree: every file it lists
exists where it says, and every source file of ``rpfast/`` and ``csrc/`` is named there (by its
name in its directory's entry, or by a pattern such as ``rpfast/ops/<family>.py``)."""
import fnmatch
import re

from tests.helpers.paths import ROOT

DESCRIPTION_COLUMN = 33  # a line indented this far continues the description above it


def _entries():
    """``[(path, names listed under it, its whole text)]`` for the block's top-level entries: a
    line at column 0 starts an entry (its path, then two spaces and the description); a line
    indented by two lists file names of the entry's directory before its own description."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = text.split("## Layers", 1)[1].split("```", 2)[1]
    entries = []
    for line in block.splitlines():
        if not line.strip():
            continue
        names = re.split(r"\s{2,}", line.strip(), maxsplit=1)[0]
        if not line.startswith(" "):
            entries.append([names, [], line])
            continue
        if entries and not line.startswith(" " * DESCRIPTION_COLUMN):
            entries[-1][1].extend(names.split())
        if entries:
            entries[-1][2] += "\n" + line
    return entries


def _patterns(path: str):
    """A top-level path as glob patterns: ``<family>`` and ``<name>`` stand for any name, and in
    ``dir/a.hpp, b.hpp`` the later names are in the first one's directory."""
    items = [re.sub(r"<\w+>", "*", p.strip()) for p in path.split(",")]
    directory = items[0].rsplit("/", 1)[0] + "/" if "/" in items[0] else ""
    return [item if "/" in item or not directory else directory + item for item in items]


def _directory(path: str) -> str:
    """The directory an entry's indented names and description refer to (``csrc/bindings/`` for
    ``csrc/bindings/*.cpp``; empty for a file at the top)."""
    first = path.split(",")[0].strip()
    return first if first.endswith("/") else (first.rsplit("/", 1)[0] + "/" if "/" in first else "")


def test_every_file_the_map_lists_exists():
    missing = []
    for path, names, _ in _entries():
        for pattern in _patterns(path):
            matches = list(ROOT.glob(pattern.rstrip("/"))) if "*" in pattern else [ROOT / pattern.rstrip("/")]
            if not any(m.exists() for m in matches):
                missing.append(pattern)
        missing += [_directory(path) + name for name in names if not (ROOT / _directory(path) / name).exists()]
    assert not missing, f"docs/architecture.md lists files that do not exist: {missing}"


def _mentions(text: str, name: str) -> bool:
    """Whether an entry's text names the file ``name``, itself or as ``<family>.ext``."""
    if re.search(rf"(?<![\w./]){re.escape(name)}(?![\w])", text):
        return True
    return any(fnmatch.fnmatch(name, "*." + ext) for ext in re.findall(r"<\w+>\.(\w+)", text))


def test_every_source_file_is_on_the_map():
    entries = _entries()
    sources = [p for p in (ROOT / "rpfast").rglob("*.py") if p.name != "__init__.py"]
    sources += [p for p in (ROOT / "csrc").rglob("*") if p.is_file()]
    unnamed = []
    for source in sources:
        relative = source.relative_to(ROOT).as_posix()
        directory = relative.rsplit("/", 1)[0] + "/"
        named = any(relative == pattern or fnmatch.fnmatch(relative, pattern)
                    for path, _, _ in entries for pattern in _patterns(path))
        named = named or any(_directory(path) == directory and _mentions(text, source.name)
                             for path, _, text in entries)
        if not named:
            unnamed.append(relative)
    assert not unnamed, f"source files missing from docs/architecture.md's layout map: {unnamed}"
