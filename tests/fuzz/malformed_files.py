"""Malformed-input cases for the files users hand to the commands (the ``files`` group of
malformed.py): pair files, a ``pairs.csv`` to resume, molecule files to predict, splits files.

Each reader must return what the file holds or raise a clean error that names the file (and,
for line-based files, the line); networkx's own errors (an ``IndexError`` from a truncated
graph6 string) must never reach the user. Every case also checks a property of what it read.
"""
import json
import tempfile
from pathlib import Path

import networkx as nx
from hypothesis import strategies as st

class Case:
    """One call of a reader on one file's text (the interface malformed.run_op expects)."""

    def __init__(self, desc: str, fn, args, after=None):
        self.desc, self.fn, self.args = desc, fn, args

    def run(self):
        return self.fn(*self.args)


GRAPH6_CHARS = st.characters(min_codepoint=63, max_codepoint=126)
CATEGORIES = ["basic", "regular", "cfi", "4vtx", "Strongly-Regular", "bsic", "../up", "a/b", ".hidden", "x#y", "é"]


@st.composite
def graph6_tokens(draw):
    """Valid graph6 strings of small graphs, cut or grown by a few characters, random ones, and
    sparse6 / digraph6 / out-of-range forms."""
    n = draw(st.integers(0, 70))
    graph = nx.gnp_random_graph(n, draw(st.floats(0, 1)), seed=draw(st.integers(0, 1000)))
    valid = nx.to_graph6_bytes(graph, header=draw(st.booleans())).decode().strip()
    kind = draw(st.sampled_from(["valid", "valid", "cut", "grown", "random", "other"]))
    if kind == "cut":
        return valid[:draw(st.integers(0, max(0, len(valid) - 1)))]
    if kind == "grown":
        return valid + draw(st.text(GRAPH6_CHARS, min_size=1, max_size=3))
    if kind == "random":
        return draw(st.text(GRAPH6_CHARS, min_size=1, max_size=12))
    if kind == "other":
        return draw(st.sampled_from([":Fa@x", "&D??", "D?{\x7f", "D?é", "~", "~~", "~~~~~~~~", ">>graph6<<",
                                     ">>sparse6<<:A_"]))
    return valid


def _networkx_reads(token: str) -> bool:
    try:
        nx.from_graph6_bytes(token.encode("ascii"))
        return True
    except Exception:  # noqa: BLE001 - any refusal
        return False


@st.composite
def graph6_case(draw):
    """graph6_problem against networkx: rpfast accepts exactly what networkx reads, among the
    strings of graph6's characters ('?'..'~'; networkx takes some below '?', and sparse6 and
    digraph6, as graph6 of nonsense sizes); the others it refuses."""
    from rpfast.datasets.pairs import graph6_problem

    token = draw(graph6_tokens())

    def run(token):
        problem = graph6_problem(token)
        body = token[len(">>graph6<<"):] if token.startswith(">>graph6<<") else token
        if all(63 <= ord(c) <= 126 for c in body):
            assert (problem is None) == _networkx_reads(token), f"graph6_problem says {problem!r}"
        else:
            assert problem is not None, "accepted a character outside graph6's range"

    return Case(f"graph6_problem({token!r})", run, (token,), after=lambda _: None)


@st.composite
def pair_file_case(draw):
    """A pair file of random lines: read whole, or refused naming the file and a line."""
    from rpfast.datasets.pairs import read_pairs

    lines = []
    for _ in range(draw(st.integers(0, 4))):
        fields = [draw(graph6_tokens()) for _ in range(draw(st.integers(1, 3)))]
        if draw(st.booleans()):
            fields.insert(0, draw(st.sampled_from(CATEGORIES)))
        lines.append(draw(st.sampled_from([" ", "\t"])).join(fields) + draw(st.sampled_from(["", " # note"])))
    if draw(st.integers(0, 5)) == 0:
        lines.append(draw(st.text(max_size=20)))
    text = "\n".join(lines)
    strict = draw(st.booleans())

    def run(text):
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "pairs.txt"
            path.write_text(text, encoding="utf-8")
            try:
                pairs = read_pairs(path, strict=strict, warn=lambda line: None)
            except ValueError as error:
                assert str(path) in str(error), f"the error names no file: {error}"
                assert "list index" not in str(error), str(error)
                raise
            assert pairs and all(p.n >= 1 and p.g.shape[0] == 2 for p in pairs)

    return Case(f"read_pairs(text={text!r}, strict={strict})", run, (text,), after=lambda _: None)


@st.composite
def pairs_csv_case(draw):
    """A finished run's pairs.csv, damaged: cut anywhere, lines dropped or duplicated, fields
    edited. read_rows returns typed rows or refuses naming the file; it never loses the header."""
    from rpfast.experiments.pairs.rows import COLUMNS, read_rows

    header = ",".join(COLUMNS)
    rows = [f"regular,{i},10,0,{draw(st.floats(0, 1e9)):.6g},0.5,0.01,True,True,20,-0.9,0.3" for i in range(3)]
    text = header + "\n" + "".join(row + "\n" for row in rows)
    damage = draw(st.sampled_from(["cut", "drop_header", "edit", "insert", "none"]))
    if damage == "cut":
        text = text[:draw(st.integers(0, len(text)))]
    elif damage == "drop_header":
        text = text.split("\n", 1)[1]
    elif damage == "edit":
        at = draw(st.integers(0, len(text) - 1))
        text = text[:at] + draw(st.text(st.characters(blacklist_categories=("Cs",)), max_size=4)) + text[at + 1:]
    elif damage == "insert":
        text += draw(st.sampled_from(["\n", "regular,1\n", "basic,7,10,0,1,1,1,True,True,1,1,1\n", '"a\nb"\n']))

    def run(text):
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "pairs.csv"
            path.write_text(text, encoding="utf-8")
            try:
                typed = read_rows(path)
            except ValueError as error:
                assert str(path) in str(error), f"the error names no file: {error}"
                raise
            assert path.read_text(encoding="utf-8").startswith(header + "\n"), "the header is missing"
            assert all(isinstance(r["index"], int) and isinstance(r["distinguished"], bool) for r in typed)

    return Case(f"read_rows(text={text!r})", run, (text,), after=lambda _: None)


@st.composite
def smiles_file_case(draw):
    """A molecule file to enumerate (blank lines skipped) or to predict (``keep_blank``: one entry
    per line after the header): its entries, or refused naming the file."""
    from rpfast.datasets.molecule_files import read_smiles_file

    suffix = draw(st.sampled_from([".csv", ".smi"]))
    cells = st.sampled_from(["CCO", "c1ccccc1", "", "  ", "not-a-smiles", '"C,C"', '"unclosed', "# comment",
                             "smiles", "C\tname", "é"])
    lines = [draw(cells) for _ in range(draw(st.integers(0, 6)))]
    keep_blank = draw(st.booleans())
    text = ("smiles,y\n" if suffix == ".csv" and draw(st.booleans()) else "") + "\n".join(
        line + (",1" if suffix == ".csv" and draw(st.booleans()) else "") for line in lines)

    def run(text):
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / f"molecules{suffix}"
            path.write_text(text, encoding="utf-8")
            try:
                smiles = read_smiles_file(path, keep_blank=keep_blank)
            except ValueError as error:
                assert str(path) in str(error), f"the error names no file: {error}"
                raise
            assert smiles and all(isinstance(s, str) and s == s.strip() for s in smiles)
            assert any(smiles) or not keep_blank

    return Case(f"read_smiles_file({suffix}, text={text!r}, keep_blank={keep_blank})", run, (text,),
                after=lambda _: None)


JSON_VALUES = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-3, 40), st.floats(allow_nan=False),
                                     st.text(max_size=3)),
                           lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
                               st.sampled_from(["train", "valid", "val", "test", "splits", "x"]), inner, max_size=4),
                           max_leaves=12)


@st.composite
def splits_file_case(draw):
    """A splits.json of random structure over 30 molecules (row 5 unparsable): splits of
    disjoint in-range rows, or refused naming the file."""
    from rpfast.datasets.molecules import featurize_smiles
    from rpfast.experiments.molecules.splits import read_splits_file

    if draw(st.booleans()):
        record = {"splits": [{part: draw(st.lists(st.integers(-2, 32), max_size=8)) for part in
                              draw(st.sampled_from([("train", "valid", "test"), ("train", "val", "test"),
                                                    ("train", "test")]))}]}
    else:
        record = draw(JSON_VALUES)
    text = json.dumps(record) if draw(st.integers(0, 6)) else draw(st.text(max_size=10))
    smiles = ["C" * (1 + i % 7) for i in range(30)]
    smiles[5] = "not-a-smiles"

    def run(text):
        graphs = featurize_smiles(smiles)
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "splits.json"
            path.write_text(text, encoding="utf-8")
            try:
                splits = read_splits_file(path, graphs, len(smiles))
            except ValueError as error:
                assert str(path) in str(error), f"the error names no file: {error}"
                raise
            for parts in splits:
                taken = [int(i) for part in parts for i in part]
                assert len(taken) == len(set(taken)) and all(0 <= i < len(graphs) for i in taken)

    return Case(f"read_splits_file(text={text!r})", run, (text,), after=lambda _: None)


GROUP = {
    "graph6_problem": (graph6_case(), 300),
    "read_pairs": (pair_file_case(), 200),
    "read_rows (pairs.csv)": (pairs_csv_case(), 200),
    "read_smiles_file": (smiles_file_case(), 150),
    "read_splits_file": (splits_file_case(), 150),
}
