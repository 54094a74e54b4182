"""`rpfast subsets` on molecule files (.csv, .csv.gz, .smi, .smi.gz): per-molecule subsets and
counts checked against itertools.combinations on RDKit's heavy-atom graph, the molecule-index
column, invalid rows, one-line errors and atomic outputs."""
import csv
import errno
import gzip
import io
import os
from itertools import combinations

import numpy as np
import pytest

import rpfast.experiments.subsets as subsets_tool
from tests.helpers.assertions import cli_fails, stream_failing_after_first_chunk
from rpfast.cli import main

Chem = pytest.importorskip("rdkit.Chem")

# Row 3 does not parse; it sits before aspirin, so a molecule index taken from the parsed
# molecules' positions instead of the file rows would be caught (aspirin is row 4, not 3).
MOLECULES = ["CCO", "c1ccccc1", "[Na+].[Cl-]", "C1CC", "CC(=O)Oc1ccccc1C(=O)O"]
VALID = [0, 1, 2, 4]
PRUNES = ["none", "edgeless", "isolated", "disconnected"]


def _reference(smiles, k, prune):
    """The kept k-subsets of the molecule's heavy-atom graph (RDKit), lexicographic."""
    mol = Chem.MolFromSmiles(smiles)
    adj = {i: set() for i in range(mol.GetNumAtoms())}
    for bond in mol.GetBonds():
        u, v = bond.GetBeginAtomIdx(), bond.GetEndAtomIdx()
        adj[u].add(v)
        adj[v].add(u)

    def keep(subset):
        inside = set(subset)
        if prune == "edgeless":
            return any(adj[u] & inside for u in subset)
        if prune == "isolated":
            return all(adj[u] & inside for u in subset)
        if prune == "disconnected":
            seen, todo = {subset[0]}, [subset[0]]
            while todo:
                for v in adj[todo.pop()] & inside - seen:
                    seen.add(v)
                    todo.append(v)
            return seen == inside
        return True

    return [s for s in combinations(range(len(adj)), k) if keep(s)]


def _expected_rows(k, prune):
    return [[row, *s] for row in VALID for s in _reference(MOLECULES[row], k, prune)]


def _write(tmp_path, kind, molecules=MOLECULES):
    """A molecule file of ``kind`` holding ``molecules`` (with a header, names and blank lines)."""
    if kind.startswith("csv"):
        lines = ["id,SMILES,name"] + [f"{i},{s},mol{i}" for i, s in enumerate(molecules)]
    else:
        lines = ["SMILES Name", "# a comment"] + [f"{s}\tmol{i}" for i, s in enumerate(molecules)]
    lines.insert(3, "")  # a blank line is no molecule: the rows after it keep their index
    text = "\n".join(lines) + "\n"
    path = tmp_path / f"mols.{kind}"
    if kind.endswith(".gz"):
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path




def test_reference_tells_the_prune_modes_apart():
    # benzene, k=4: 15 subsets, none edgeless, 6 with an isolated vertex, 3 more disconnected
    assert [len(_reference("c1ccccc1", 4, p)) for p in PRUNES] == [15, 15, 9, 6]


@pytest.mark.parametrize("prune", PRUNES)
@pytest.mark.parametrize("kind", ["csv", "csv.gz", "smi", "smi.gz"])
def test_subsets_per_molecule_match_combinations(kind, prune, tmp_path, capsys):
    path = _write(tmp_path, kind)
    assert main(["subsets", str(path), "--k", "2", "--prune", prune, "--no-progress", "--chunk-size", "3"]) == 0
    captured = capsys.readouterr()
    rows = [[int(v) for v in line.split(",")] for line in captured.out.splitlines()]
    expected = _expected_rows(2, prune)
    assert rows == expected
    assert {r[0] for r in rows} == ({0, 1, 2, 4} if prune == "none" else {0, 1, 4})  # the salt has no bond
    err = captured.err.splitlines()
    assert err[0] == ("rpfast subsets: warning: skipped 1 of 5 molecules with invalid SMILES "
                      "(rows 3; 0-based, header not counted)")
    assert err[1].startswith(f"4 molecules, 24 atoms, 21 bonds; k=2, prune={prune}: {len(expected)} subsets")


@pytest.mark.parametrize("prune", PRUNES)
def test_npy_and_csv_outputs_hold_the_molecule_column(prune, tmp_path):
    path = _write(tmp_path, "csv")
    expected = _expected_rows(4, prune)
    for out in (tmp_path / "s.npy", tmp_path / "s.csv"):
        assert main(["subsets", str(path), "--k", "4", "--prune", prune, "--out", str(out), "--no-progress",
                     "--chunk-size", "7"]) == 0
        rows = np.load(out) if out.suffix == ".npy" else np.loadtxt(out, delimiter=",", dtype=np.int64, ndmin=2)
        assert rows.dtype == np.int64 and rows.shape == (len(expected), 5)
        assert rows.tolist() == expected
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mols.csv", "s.csv", "s.npy"]


@pytest.mark.parametrize("prune", PRUNES)
def test_count_gives_one_row_per_valid_molecule(prune, tmp_path, capsys):
    path = _write(tmp_path, "smi")
    assert main(["subsets", str(path), "--k", "3", "--prune", prune, "--count"]) == 0
    captured = capsys.readouterr()
    table = list(csv.reader(io.StringIO(captured.out)))
    assert table[0] == ["molecule", "smiles", "atoms", "count"]
    expected = [[str(row), MOLECULES[row], str(Chem.MolFromSmiles(MOLECULES[row]).GetNumAtoms()),
                 str(len(_reference(MOLECULES[row], 3, prune)))] for row in VALID]
    assert table[1:] == expected
    assert "rows 3;" in captured.err
    assert f"prune={prune}: {sum(int(r[3]) for r in expected)} subsets" in captured.err


def test_count_table_to_a_file_and_a_named_smiles_column(tmp_path, capsys):
    path = tmp_path / "named.csv"
    path.write_text('name,canonical,smiles\n"ethanol, dry",CCO,not used\nbenzene,c1ccccc1,x\n')
    out = tmp_path / "counts.csv"
    assert main(["subsets", str(path), "--smiles-column", "Canonical", "--k", "2", "--count",
                 "--out", str(out)]) == 0
    assert capsys.readouterr().out == ""
    assert out.read_text().splitlines() == ["molecule,smiles,atoms,count", "0,CCO,3,3", "1,c1ccccc1,6,15"]


def test_many_invalid_rows_are_summarised_in_one_line(tmp_path, capsys):
    path = _write(tmp_path, "smi", ["C1CC", "CC", "X", "C(", "c1cc", "Q", "C)", "CCO"])
    assert main(["subsets", str(path), "--k", "2", "--no-progress"]) == 0
    captured = capsys.readouterr()
    assert captured.out.split() == ["1,0,1", "7,0,1", "7,0,2", "7,1,2"]
    warnings = [line for line in captured.err.splitlines() if "warning" in line]
    assert warnings == ["rpfast subsets: warning: skipped 6 of 8 molecules with invalid SMILES "
                        "(rows 0, 2, 3, 4, 5, ...; 0-based, header not counted)"]


def test_rdkit_messages_are_silenced_and_counted(tmp_path, capfd):
    """RDKit writes to the C-level stderr (capfd sees it); the summary counts instead."""
    import logging

    from rpfast.datasets.molecules import parse_smiles_quietly

    path = _write(tmp_path, "smi", ["[H]", "CCO", "C1CC", "[H]C([H])([H])[H]", "[H]"])
    handlers = list(logging.getLogger("rdkit").handlers)
    assert main(["subsets", str(path), "--k", "2", "--count", "--no-progress"]) == 0
    err = capfd.readouterr().err
    assert "WARNING" not in err and "Parse Error" not in err, err
    assert err.splitlines()[-1].endswith("RDKit: 1 failed, 2 warned (its messages silenced)")
    _, kept, warned = parse_smiles_quietly(["[H]", "CCO", "C1CC", "[H]"])
    assert kept.tolist() == [0, 1, 3] and warned == [0, 3]
    assert logging.getLogger("rdkit").handlers == handlers  # restored, and RDKit logs as before:
    Chem.MolFromSmiles("C1CC")
    assert "Parse Error" in capfd.readouterr().err


@pytest.mark.parametrize("setup, argv, message", [
    (None, ["missing.csv"], "molecule file {dir}/missing.csv does not exist"),
    ("", ["f.csv"], "f.csv: the file is empty; expected a CSV header with a 'smiles' column"),
    ("\n\n", ["f.smi"], "f.smi: the file is empty; expected one SMILES per line"),
    ("smiles\n\n", ["f.csv"], "f.csv: no molecules in the file"),
    ("id,name\n1,ethanol\n", ["f.csv"], "f.csv:1: no 'smiles' column (smiles_column); "
                                        "the header has ['id', 'name']"),
    ("id,name\n1,CCO\n", ["f.csv", "--smiles-column", "mol"], "no 'mol' column"),
    ("smiles,id\nCCO,1\nCC\n", ["f.csv"], "f.csv:3: 1 fields, but the header has 2 columns"),
    ("smiles\nC1CC\n\nX\n", ["f.csv"], "f.csv: none of the 2 molecules has a valid SMILES (invalid rows: 0, 1)"),
    ("CCO\n", ["f.smi", "--smiles-column", "smiles"], "--smiles-column only applies to a .csv or .csv.gz"),
    ("smiles\nCCO\n", ["f.csv", "--count", "--out", "{dir}/c.npy"], "--out must be '-' or a .csv path"),
    ("smiles\nCCO\n", ["f.csv.gz"], "f.csv.gz: not a valid gzip file"),
])
def test_bad_molecule_inputs_are_one_line_errors(setup, argv, message, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    if setup is not None:
        (tmp_path / argv[0]).write_text(setup)
    argv = [a.replace("{dir}", str(tmp_path)) for a in argv]
    out = tmp_path / "out.csv"
    if "--out" not in argv:
        argv += ["--out", str(out)]
    err = cli_fails(["subsets", str(tmp_path / argv[0])] + argv[1:] + ["--k", "2", "--no-progress"], capsys)
    assert err.startswith("rpfast subsets: error: ")
    assert message.replace("{dir}", str(tmp_path)) in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ([] if setup is None else [argv[0]])


@pytest.mark.parametrize("suffix", [".npy", ".csv"])
@pytest.mark.parametrize("error, code, message", [
    (KeyboardInterrupt(), 130, "rpfast subsets: interrupted"),
    (OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)), 2, "rpfast subsets: error: No space left on device"),
])
def test_failed_run_leaves_no_output(suffix, error, code, message, tmp_path, capsys, monkeypatch):
    path = _write(tmp_path, "csv.gz")
    seen = []
    stream_failing_after_first_chunk(monkeypatch, error, tmp_path, seen)
    with pytest.raises(SystemExit) as exit_info:
        main(["subsets", str(path), "--k", "2", "--chunk-size", "2", "--no-progress", "--out",
              str(tmp_path / ("s" + suffix))])
    assert exit_info.value.code == code
    assert capsys.readouterr().err.splitlines()[-1] == message
    # The failure came mid-write: rows had gone to a temporary, not to the output name.
    assert f".s{suffix}.tmp-{os.getpid()}" in seen and "s" + suffix not in seen
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mols.csv.gz"]


def test_interrupted_count_table_leaves_no_output(tmp_path, capsys, monkeypatch):
    path = _write(tmp_path, "csv")
    real_writer, seen = csv.writer, []

    class Interrupted:
        def __init__(self, fh, **kwargs):
            self._writer = real_writer(fh, **kwargs)
            self.writerow = self._writer.writerow

        def writerows(self, rows):
            self._writer.writerows(rows)
            seen.extend(p.name for p in tmp_path.iterdir())
            raise KeyboardInterrupt

    monkeypatch.setattr(subsets_tool.csv, "writer", Interrupted)
    with pytest.raises(SystemExit) as exit_info:
        main(["subsets", str(path), "--k", "2", "--count", "--out", str(tmp_path / "c.csv")])
    assert exit_info.value.code == 130
    assert capsys.readouterr().err.splitlines()[-1] == "rpfast subsets: interrupted"
    assert f".c.csv.tmp-{os.getpid()}" in seen
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mols.csv"]
