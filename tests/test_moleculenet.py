"""rpfast/data/moleculenet.py: the shipped Tox21 copy and the MoleculeNet CSV reader's checks."""
import csv
import gzip
import math

import pytest
import torch

from rpfast.data import MoleculeDataset, load_tox21, read_moleculenet_csv
from rpfast.data.moleculenet import DATASETS, TOX21_TASKS


def _tox21_rows():
    """The shipped CSV read with the csv module alone: header and rows."""
    with gzip.open(DATASETS / "tox21.csv.gz", "rt", encoding="utf-8", newline="") as fh:
        rows = list(csv.reader(fh))
    return rows[0], rows[1:]


def test_tox21_has_every_molecule_task_and_missing_label():
    data = load_tox21()
    header, rows = _tox21_rows()
    assert isinstance(data, MoleculeDataset)
    assert len(data) == len(data.smiles) == 7831 == len(rows)
    assert data.tasks == list(TOX21_TASKS) == header[1:] and len(data.tasks) == 12
    assert data.labels.dtype == torch.float32 and data.labels.shape == (7831, 12)
    assert data.smiles == [row[0] for row in rows]
    empty = torch.tensor([[cell == "" for cell in row[1:]] for row in rows])
    assert int(empty.sum()) == int(data.labels.isnan().sum()) == 16026
    assert torch.equal(data.labels.isnan(), empty)
    assert set(data.labels[~empty].tolist()) == {0.0, 1.0}
    for task, column in zip(data.tasks, data.labels.t()):  # per task too
        assert int(column.isnan().sum()) == sum(row[header.index(task)] == "" for row in rows)


def test_tox21_smiles_become_graphs_through_batch_from_smiles():
    pytest.importorskip("rdkit")
    from rpfast.data import batch_from_smiles

    data = load_tox21()
    batch, kept = batch_from_smiles(data.smiles[:50], skip_invalid=True)
    assert batch.num_graphs == len(kept) and data.labels[kept].shape == (len(kept), 12)


def write(tmp_path, text, name="data.csv"):
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return path


def test_reads_columns_in_the_order_asked_and_gzip(tmp_path):
    text = "id,smiles,b,a\r\n1,CCO,1,\r\n\r\n2,\"C,C\",0.5,nan\r\n"
    path = write(tmp_path, text)
    data = read_moleculenet_csv(path)
    assert data.smiles == ["CCO", "C,C"] and data.tasks == ["id", "b", "a"]
    assert torch.equal(data.labels.isnan(), torch.tensor([[False, False, True], [False, False, True]]))
    picked = read_moleculenet_csv(path, tasks=["a", "b"])
    assert picked.tasks == ["a", "b"] and picked.labels[:, 1].tolist() == [1.0, 0.5]
    gz = write(tmp_path, gzip.compress(text.encode()), "data.csv.gz")
    assert torch.equal(read_moleculenet_csv(gz).labels.nan_to_num(-1), data.labels.nan_to_num(-1))
    other = write(tmp_path, "mol\nC\n", "other.csv")
    none = read_moleculenet_csv(other, smiles_column="mol")
    assert none.smiles == ["C"] and none.labels.shape == (1, 0) and none.tasks == []
    blank = read_moleculenet_csv(write(tmp_path, "smiles,y\n ,1\nC,0\n", "blank.csv"))
    assert blank.smiles == ["", "C"]  # kept here; featurisation skips it as an invalid SMILES
    header_only = read_moleculenet_csv(write(tmp_path, "smiles,y\n", "h.csv"))
    assert len(header_only) == 0 and header_only.labels.shape == (0, 1)


@pytest.mark.parametrize("text, kwargs, match", [
    ("", {}, r"data\.csv: the file is empty; expected a CSV header with a 'smiles' column"),
    ("mol,y\nC,1\n", {}, r"data\.csv:1: no 'smiles' column \(smiles_column\); the header has \['mol', 'y'\]"),
    ("smiles,y\nC,1\n", {"tasks": ["y", "z"]}, r"data\.csv:1: no column for task 'z'"),
    ("smiles,y,y\nC,1,1\n", {}, r"data\.csv:1: column 'y' appears twice"),
    ("smiles,y\nC,1\nCC,active\n", {}, r"data\.csv:3: column 'y': label 'active' is not a number"),
    ("smiles,y\nC,inf\n", {}, r"data\.csv:2: column 'y': label 'inf' is not a finite number"),
    ("smiles,y\nC,1\nCC\n", {}, r"data\.csv:3: 1 fields, but the header has 2 columns"),
    ("smiles,y\nC,1\n\"" + "C" * 200_000 + "\",1\n", {}, r"data\.csv:3: not valid CSV \(field larger than"),
    (b"smiles,y\nC,1\n\xff,0\n", {}, r"data\.csv:3: not UTF-8 text \(byte 0xff\)"),
], ids=["empty", "no-smiles-column", "no-task-column", "duplicate-column", "non-numeric", "infinite",
        "short-row", "huge-field", "not-utf8"])
def test_bad_files_name_file_line_and_column(tmp_path, text, kwargs, match):
    with pytest.raises(ValueError, match=match):
        read_moleculenet_csv(write(tmp_path, text), **kwargs)


def test_bad_paths_and_arguments(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"MoleculeNet CSV .*missing\.csv does not exist"):
        read_moleculenet_csv(tmp_path / "missing.csv")
    with pytest.raises(IsADirectoryError, match="is a directory"):
        read_moleculenet_csv(tmp_path)
    with pytest.raises(ValueError, match=r"bad\.csv\.gz: not a valid gzip file"):
        read_moleculenet_csv(write(tmp_path, "smiles\nC\n", "bad.csv.gz"))
    path = write(tmp_path, "smiles,y\nC,1\n")
    with pytest.raises(TypeError, match="tasks must be a sequence of column names, not one string"):
        read_moleculenet_csv(path, tasks="y")
    with pytest.raises(TypeError, match=r"tasks\[0\] must be a column name"):
        read_moleculenet_csv(path, tasks=[1])
    with pytest.raises(ValueError, match="tasks includes the SMILES column 'smiles'"):
        read_moleculenet_csv(path, tasks=["smiles"])
    with pytest.raises(ValueError, match="tasks names a column twice"):
        read_moleculenet_csv(path, tasks=["y", "y"])
    with pytest.raises(TypeError, match="smiles_column must be a str"):
        read_moleculenet_csv(path, smiles_column=0)


def test_dataset_checks_its_label_shape():
    with pytest.raises(ValueError, match=r"labels must be a torch.float32 tensor of shape \(2, 1\)"):
        MoleculeDataset(["C", "CC"], torch.zeros(2, 2), ["y"])
    assert math.isnan(MoleculeDataset(["C"], torch.full((1, 1), math.nan), ["y"]).labels.item())

