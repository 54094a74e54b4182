"""rpfast/datasets/moleculenet.py: the shipped Tox21 copy, the MoleculeNet CSV reader's checks and the
featurisation cache's verification."""
import csv
import gzip
import math
import shutil
import tempfile
import warnings
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rpfast.datasets import MoleculeDataset, load_tox21, read_moleculenet_csv
from rpfast.datasets.molecule_cache import CACHE_FORMAT, featurize_dataset
from rpfast.datasets.moleculenet import DATASETS, TOX21_TASKS
from rpfast.datasets.molecules import MoleculeGraphs


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
    from rpfast.datasets import batch_from_smiles

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
    ("smiles,y\nC,1\n\"CC,1\nCCC,0\n", {}, r"data\.csv:3: 1 fields, but the header has 2 columns \(a quoted field "
                                       r"runs on to line 4: an unclosed quote\?\)"),
    ("smiles\nC\n\"CC\nCCC\n", {}, r"data\.csv:3: column 'smiles': the SMILES 'CC\\nCCC' spans lines 3\.\.4 "
                                  r"\(an unclosed quote\?\)"),
    (b"smiles,y\nC,1\n\xff,0\n", {}, r"data\.csv:3: not UTF-8 text \(byte 0xff\)"),
], ids=["empty", "no-smiles-column", "no-task-column", "duplicate-column", "non-numeric", "infinite",
        "short-row", "unclosed-quote", "unclosed-quote-smiles", "not-utf8"])
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



# ------------------------------------------------------------------ fields longer than csv's default limit
def test_fields_longer_than_the_csv_field_limit_are_read(tmp_path):
    """A 200,000-character field (csv's default limit is 131,072) in a name column and in the SMILES
    column: the file is valid CSV and reads whole; the limit is back to what it was afterwards."""
    limit = csv.field_size_limit()
    name = "N" * 200_000
    data = read_moleculenet_csv(write(tmp_path, f'smiles,name,y\nCCO,short,1\nC,"{name}",0\n'))
    assert data.smiles == ["CCO", "C"] and data.tasks == ["y"] and data.labels[:, 0].tolist() == [1.0, 0.0]
    chain = "C" * 200_000  # read as text; RDKit judges it only when the molecules are featurised
    data = read_moleculenet_csv(write(tmp_path, f"smiles,y\nC,1\n{chain},0\n", "chain.csv"))
    assert data.smiles == ["C", chain]
    from rpfast.datasets.molecule_files import read_smiles_file

    assert read_smiles_file(write(tmp_path, f'id,SMILES\n1,"{chain}"\n', "mols.csv")) == [chain]
    assert csv.field_size_limit() == limit


# ------------------------------------------------------------------ the featurisation cache
POOL = ["CCO", "c1ccccc1", "C[N+](C)(C)C", "[Na+].[Cl-]", "F/C=C/F", "C1CC", "not a smiles", "", "[U]",
        "[2H]C([H])Cl", "[H]", "OC(=O)c1ccccc1N", "C#N", "c1cc[nH]c1", "[O-][n+]1ccccc1", "*C"]


def dataset(smiles):
    return MoleculeDataset(list(smiles), torch.zeros(len(smiles), 0), [])


def assert_same_graphs(got, want):
    for name in ("atoms", "bonds", "pairs", "atom_ptr", "bond_ptr", "x", "element", "edge_index", "edge_attr",
                 "edge_ptr", "rows"):
        a, b = getattr(got, name), getattr(want, name)
        assert a.dtype == b.dtype and torch.equal(a, b), name
    assert got.invalid == want.invalid and got.smiles == want.smiles


def cache_file(directory):
    files = list(Path(directory).glob("molecules-*.pt"))
    assert len(files) == 1, files
    return files[0]


def reloads_fresh(data, directory, match):
    """featurize_dataset warns (``match``), returns a fresh featurisation and rewrites the file so the
    next call reads it without a warning."""
    from rpfast.datasets.molecules import featurize_smiles

    fresh = featurize_smiles(data.smiles)
    with pytest.warns(RuntimeWarning, match=match):
        assert_same_graphs(featurize_dataset(data, cache_dir=directory), fresh)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_same_graphs(featurize_dataset(data, cache_dir=directory), fresh)


@pytest.fixture
def cached(tmp_path):
    """(data set, its cache file, its fresh features) after one featurize_dataset call."""
    pytest.importorskip("rdkit")
    data = dataset(["CCO", "c1ccccc1", "not a smiles", "F/C=C/F", "[Na+].[Cl-]"])
    graphs = featurize_dataset(data, cache_dir=tmp_path)
    return data, cache_file(tmp_path), graphs


def test_cache_is_reused_without_a_warning(cached, tmp_path):
    data, path, graphs = cached
    record = torch.load(path, weights_only=True)
    assert record["format"] == CACHE_FORMAT and record["num_smiles"] == 5
    assert record["atom_counts"].tolist() == [3, 6, 4, 2]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert_same_graphs(featurize_dataset(data, cache_dir=tmp_path), graphs)
    assert not list(tmp_path.glob(".*tmp*"))


def test_the_cache_pieces_name_read_and_refuse(cached, tmp_path):
    from rpfast.datasets.molecule_cache import cache_path, cached_graphs, store_graphs

    data, path, graphs = cached
    assert cache_path(data, tmp_path) == path and cache_path(data, False) is None
    assert_same_graphs(cached_graphs(data, tmp_path), graphs)
    assert cached_graphs(data, tmp_path / "empty") is None  # no file: nothing to warn about
    with pytest.raises(TypeError, match="dataset must be a MoleculeDataset"):
        cache_path(["CCO"], tmp_path)
    with pytest.raises(TypeError, match="graphs must be a MoleculeGraphs"):
        store_graphs({"atoms": None}, data, tmp_path)


def test_another_data_sets_cache_under_the_key_is_not_used(cached, tmp_path):
    """Repro 1: the cache of other molecules copied under this data set's name."""
    data, path, _ = cached
    other = tmp_path / "other"
    featurize_dataset(dataset(["CCN", "c1ccncc1", "C", "FC=CF", "[K+].[Br-]"]), cache_dir=other)
    shutil.copyfile(cache_file(other), path)
    reloads_fresh(data, tmp_path, "holds the features of other SMILES")


def test_a_bit_flipped_in_the_stored_atoms_is_detected(cached, tmp_path):
    """Repro 2: one bit of the atom codes flipped in the file's bytes (the zip entry holding them)."""
    data, path, graphs = cached
    raw = bytearray(path.read_bytes())
    x_bytes = graphs.atoms.numpy().tobytes()
    at = raw.find(x_bytes)
    assert at >= 0 and raw.find(x_bytes, at + 1) < 0
    raw[at + len(x_bytes) // 2] ^= 0x10
    path.write_bytes(bytes(raw))
    reloads_fresh(data, tmp_path, "content hash does not match")


def test_a_well_formed_file_with_altered_features_is_detected(cached, tmp_path):
    """Repro 3: a file torch.save wrote, every shape, offset and record entry as before, with a formal
    charge changed and two molecules' bond features swapped."""
    data, path, _ = cached
    record = torch.load(path, weights_only=True)
    record["atoms"][0, 3] = 1  # ethanol's first carbon now carries a +1 charge
    record["bonds"][[0, 2]] = record["bonds"][[2, 0]]  # an ethanol bond swapped with a benzene one
    torch.save(record, path)
    reloads_fresh(data, tmp_path, "content hash does not match")


def test_forged_files_with_a_recomputed_hash_are_caught_by_the_cheap_checks(cached, tmp_path):
    """A consistent content hash is not enough: atom counts are checked against RDKit's parse of the
    SMILES, element codes against the element list and degree codes against the bonds."""
    from rpfast.datasets.molecule_cache import _cache_record, _content_digest
    from rpfast.datasets.molecules import featurize_smiles, featurizer_settings

    data, path, graphs = cached
    forged = _cache_record(featurize_smiles(["CCCO", "c1ccccc1", "F/C=C/F", "[Na+].[Cl-]"]), data.smiles,
                           featurizer_settings())
    forged.update(rows=graphs.rows, invalid=graphs.invalid, smiles=graphs.smiles)  # a consistent record
    forged["content_sha256"] = _content_digest(forged)
    torch.save(forged, path)
    reloads_fresh(data, tmp_path, r"molecule at row 0 has 4 atoms, but its SMILES has 3\.\.3")

    record = torch.load(path, weights_only=True)
    record["atoms"][0, 1] = 2  # ethanol's first carbon has one bond, its degree now says two
    record["content_sha256"] = _content_digest(record)
    torch.save(record, path)
    reloads_fresh(data, tmp_path, "degree codes disagree with its bonds")

    record["atoms"][0, 1] = 1
    record["atoms"][0, 0] = 44  # one past the element list
    record["content_sha256"] = _content_digest(record)
    torch.save(record, path)
    reloads_fresh(data, tmp_path, r"element codes hold an index outside 0\.\.43")


@pytest.mark.parametrize("change, match", [
    (lambda r: {k: r[k] for k in MoleculeGraphs.STATE if k != "smiles"},
     r"format None, not 'rpfast-featurised-molecules/3'"),
    (lambda r: dict(r, featurizer=dict(r["featurizer"], rdkit="2019.03.1")), "featurised with"),
    (lambda r: dict(r, rows=r["rows"].to(torch.int32)), "its rows is torch.int32"),
    (lambda r: dict(r, invalid=["2"]), "invalid entry"),
    (lambda r: b"damaged", "cannot be read"),
], ids=["old-format", "other-rdkit", "rows-dtype", "invalid-entry", "unreadable"])
def test_other_damage_is_explained_and_recomputed(cached, tmp_path, change, match):
    data, path, _ = cached
    changed = change(torch.load(path, weights_only=True))
    if isinstance(changed, bytes):
        path.write_bytes(changed)
    else:
        torch.save(changed, path)
    reloads_fresh(data, tmp_path, match)


@st.composite
def corruptions(draw):
    """(kind, function of (file bytes, record) -> new file bytes) for one random corruption."""
    kind = draw(st.sampled_from(["byte", "truncate", "tensor", "list", "swap", "none"]))
    if kind == "byte":
        spot, bit = draw(st.floats(0, 1, exclude_max=True)), draw(st.integers(0, 7))
        return kind, (spot, bit)
    if kind == "truncate":
        return kind, draw(st.floats(0, 1, exclude_max=True))
    if kind == "tensor":
        name = draw(st.sampled_from(["atoms", "bonds", "pairs", "atom_ptr", "bond_ptr", "rows", "atom_counts"]))
        return kind, (name, draw(st.floats(0, 1, exclude_max=True)), draw(st.integers(0, 31)))
    if kind == "list":
        return kind, ("invalid", draw(st.sampled_from(["drop", "add", "reverse"])))
    if kind == "swap":
        return kind, draw(st.lists(st.sampled_from(POOL), max_size=5))
    return kind, None


def corrupt(path, kind, how):
    """Apply a corruption drawn by :func:`corruptions`; True when it must be detected."""
    raw = bytearray(path.read_bytes())
    if kind == "byte":
        spot, bit = how
        raw[int(spot * len(raw))] ^= 1 << bit
        path.write_bytes(bytes(raw))
        return False  # the byte may sit in the zip's padding, and the file reads the same
    if kind == "truncate":
        path.write_bytes(bytes(raw[:int(how * len(raw))]))
        return True
    record = torch.load(path, weights_only=True)
    if kind == "tensor":
        name, spot, bit = how
        tensor = record[name]
        if tensor.numel() == 0:
            return False
        words = tensor.view(torch.int32) if tensor.dtype == torch.float32 else tensor
        words.view(-1)[int(spot * tensor.numel())] ^= 1 << (bit % (8 * tensor.element_size()))  # a bit it has
        torch.save(record, path)
        return True
    if kind == "list":
        name, edit = how
        values = record[name]
        new = values[1:] if edit == "drop" else values + [values[-1] if values else 0] if edit == "add" \
            else values[::-1]
        if new == values:
            return False
        record[name] = new
        torch.save(record, path)
        return True
    return False


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(smiles=st.lists(st.sampled_from(POOL), max_size=6), corruption=corruptions())
def test_loaded_features_always_equal_a_fresh_featurisation(smiles, corruption):
    """Whatever happens to the cache file, featurize_dataset returns what featurising without a cache
    returns (the reference: featurize_smiles, which never sees a cache)."""
    pytest.importorskip("rdkit")
    from rpfast.datasets.molecules import featurize_smiles

    kind, how = corruption
    data = dataset(smiles)
    with tempfile.TemporaryDirectory() as directory:
        featurize_dataset(data, cache_dir=directory)
        path = cache_file(directory)
        if kind == "swap":
            other = Path(directory) / "other"
            featurize_dataset(dataset(how), cache_dir=other)
            shutil.copyfile(cache_file(other), path)
            must_warn = how != list(smiles)
        else:
            must_warn = corrupt(path, kind, how)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            got = featurize_dataset(data, cache_dir=directory)
        assert_same_graphs(got, featurize_smiles(smiles))
        if must_warn:
            assert any(issubclass(w.category, RuntimeWarning) and "featurisation cache" in str(w.message)
                       for w in caught)
