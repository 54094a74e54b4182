"""The reusable molecule workflow (issue 28): `rpfast molecules train` leaves checkpoints, test
predictions and splits; `rpfast molecules predict` reproduces the test predictions from the
checkpoints bit for bit; regression; metrics; splits files."""
import csv
import json
import math

import numpy as np
import pytest
import torch

pytest.importorskip("rdkit")

from tests.helpers.assertions import cli_fails  # noqa: E402
from rpfast.cli import main  # noqa: E402
from rpfast.datasets import load_tox21  # noqa: E402
from tests.helpers.tox21_files import write_tox21_subset  # noqa: E402

pytestmark = pytest.mark.backend_neutral  # the first CI run covers it (see conftest.py)


def _strict_json(path):
    def refuse(constant):
        raise AssertionError(f"{path} holds {constant}")

    return json.loads(path.read_text(), parse_constant=refuse)


def _rows(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture()
def regression_csv(tmp_path, monkeypatch):
    """120 Tox21 molecules with a continuous label (their atom count, with noise) and a second,
    partly missing task: multi-task regression with missing labels."""
    from rdkit import Chem

    monkeypatch.setenv("RPFAST_CACHE", str(tmp_path / "cache"))
    data, rng = load_tox21(), np.random.default_rng(0)
    path = tmp_path / "reg.csv"
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["smiles", "size", "other"])
        for i in range(120):
            atoms = Chem.MolFromSmiles(data.smiles[i]).GetNumAtoms()
            writer.writerow([data.smiles[i], f"{atoms / 10 + rng.normal(0, 0.1):.3f}",
                             "" if i % 3 == 0 else f"{rng.normal(2, 1):.3f}"])
    return path


@pytest.fixture()
def tiny_csv(tmp_path, monkeypatch):
    """300 Tox21 molecules with 2 tasks (missing labels included)."""
    monkeypatch.setenv("RPFAST_CACHE", str(tmp_path / "cache"))
    return write_tox21_subset(tmp_path / "tiny.csv", 300, {"NR-AhR": 2, "SR-MMP": 10})


def _predicted_columns(rows):
    return [[row[c] for c in row if c.endswith("_pred")] for row in rows]


def test_regression_trains_scores_and_round_trips_through_predict(regression_csv, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["molecules", "train", "--data", str(regression_csv), "--model", "rp-duvenaud,duvenaud",
                 "--epochs", "3", "--eval-samples", "3", "--out", str(out), "--no-progress", "--threads", "1"]) == 0
    printed = capsys.readouterr().out
    assert "test rmse" in printed
    assert (out / "test_parity.png").stat().st_size > 10_000
    results = _strict_json(out / "results.json")
    assert results["task_type"] == "regression" and results["metric"] == "rmse"
    for run in results["runs"]:
        assert set(run["test_metrics"]) == {"rmse", "mae", "r2"}
        assert run["test_score"] == run["test_metrics"]["rmse"]["mean"] > 0
    test_file = out / "runs" / "duvenaud" / "split0" / "test_predictions.csv"  # its sums depend on the threads
    written = _rows(test_file)
    assert list(written[0]) == ["row", "smiles", "size", "size_pred", "other", "other_pred"]
    # predictions are in label units: their RMSE against the labels is the reported one
    errors = [float(r["size_pred"]) - float(r["size"]) for r in written]
    run = next(r for r in results["runs"] if r["model"] == "duvenaud")
    assert math.isclose(math.sqrt(np.mean(np.square(errors))), run["test_metrics"]["rmse"]["tasks"][0], rel_tol=1e-6)

    predicted = tmp_path / "pred.csv"
    before = torch.get_num_threads()
    torch.set_num_threads(2)  # predict returns to the checkpoint's 1 thread by itself
    try:
        assert main(["molecules", "predict", "--checkpoint", str(test_file.parent / "best.pt"), "--data",
                     str(test_file), "--out", str(predicted), "--no-progress"]) == 0
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
    assert "predicted 12 of 12 molecules, 2 regression task(s), with 1 checkpoint" in capsys.readouterr().out
    again = _rows(predicted)
    assert list(again[0]) == ["row", "smiles", "size_pred", "other_pred"]
    assert [r["smiles"] for r in again] == [r["smiles"] for r in written]
    assert _predicted_columns(again) == _predicted_columns(written)  # bitwise: every digit of the float64


def test_sampled_models_round_trip_and_ensembles_average(tiny_csv, tmp_path, capsys):
    """kary draws its DFS subgraphs at random: the checkpoint's seed makes predict reproduce the
    test predictions exactly; a directory is an ensemble of every checkpoint under it."""
    from rpfast.experiments.molecules.checkpoints import load_checkpoint, predict

    out = tmp_path / "out"
    assert main(["molecules", "--data", str(tiny_csv), "--model", "kary,duvenaud", "--k", "5", "--epochs", "2",
                 "--eval-samples", "4", "--out", str(out), "--no-progress", "--threads", "1"]) == 0
    capsys.readouterr()
    kary = out / "runs" / "kary-k5" / "split0"
    written = _rows(kary / "test_predictions.csv")
    smiles = [r["smiles"] for r in written]
    model = load_checkpoint(kary / "best.pt")
    assert model.task_type == "classification" and model.tasks == ["NR-AhR", "SR-MMP"]
    first, second = predict(model, smiles), predict(model, smiles)
    np.testing.assert_array_equal(first.values, second.values)
    assert [[repr(float(v)) for v in row] for row in first.values] == _predicted_columns(written)

    duvenaud = predict(out / "runs" / "duvenaud" / "split0" / "best.pt", smiles).values
    ensemble = tmp_path / "ensemble.csv"
    assert main(["molecules", "predict", "--checkpoint", str(out), "--data", str(kary / "test_predictions.csv"),
                 "--out", str(ensemble), "--no-progress"]) == 0
    assert "with the mean of 2 checkpoints" in capsys.readouterr().out
    averaged = np.array([[float(v) for v in row] for row in _predicted_columns(_rows(ensemble))])
    np.testing.assert_allclose(averaged, (first.values + duvenaud) / 2, rtol=1e-12)


def test_predict_keeps_rows_of_invalid_smiles_empty_and_names_them(tiny_csv, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["molecules", "--data", str(tiny_csv), "--model", "duvenaud", "--epochs", "1", "--out", str(out),
                 "--no-progress", "--threads", "1"]) == 0
    new = tmp_path / "new.smi"
    new.write_text("CCO ethanol\nnot-a-smiles\nc1ccccc1O phenol\n")
    predicted = tmp_path / "p.csv"
    capsys.readouterr()
    assert main(["molecules", "predict", "--checkpoint", str(out / "runs/duvenaud/split0/best.pt"), "--data",
                 str(new), "--out", str(predicted), "--no-progress"]) == 0
    captured = capsys.readouterr()
    assert "1 SMILES RDKit could not parse, left with empty predictions: rows 1" in captured.err
    rows = _rows(predicted)
    assert [r["row"] for r in rows] == ["0", "1", "2"] and [r["smiles"] for r in rows][1] == "not-a-smiles"
    assert rows[1]["NR-AhR_pred"] == "" and 0 < float(rows[0]["NR-AhR_pred"]) < 1
    # an existing output is kept unless --force
    err = cli_fails(["molecules", "predict", "--checkpoint", str(out / "runs/duvenaud/split0/best.pt"),
                     "--data", str(new), "--out", str(predicted), "--no-progress"], capsys)
    assert "exists; use --force" in err


@pytest.mark.parametrize("make, message", [
    (lambda p: p.write_text("not a checkpoint"), "not an rpfast molecules checkpoint"),
    (lambda p: torch.save({"format": "something else"}, p), "format 'something else'"),
    (lambda p: torch.save({"format": "rpfast-molecules-checkpoint/1"}, p), "incomplete rpfast molecules checkpoint"),
])
def test_a_file_that_is_no_checkpoint_is_a_one_line_error(make, message, tmp_path, capsys):
    bad = tmp_path / "best.pt"
    make(bad)
    data = tmp_path / "m.smi"
    data.write_text("CCO\n")
    err = cli_fails(["molecules", "predict", "--checkpoint", str(bad), "--data", str(data), "--out",
                     str(tmp_path / "p.csv"), "--no-progress"], capsys)
    assert message in err and len(err.splitlines()) == 1
    assert not (tmp_path / "p.csv").exists()


def test_splits_file_reuses_the_rows_and_bad_files_are_refused(tiny_csv, tmp_path, capsys):
    first = tmp_path / "first"
    argv = ["molecules", "--data", str(tiny_csv), "--model", "duvenaud", "--epochs", "1", "--no-progress",
            "--threads", "1", "--split", "scaffold-balanced", "--splits", "2"]
    assert main(argv + ["--out", str(first)]) == 0
    record = json.loads((first / "splits.json").read_text())
    assert record["split"] == "scaffold-balanced" and len(record["splits"]) == 2
    assert record["splits"][0]["test"] != record["splits"][1]["test"]  # each seed another split
    second = tmp_path / "second"
    assert main(argv + ["--out", str(second), "--splits-file", str(first / "splits.json")]) == 0
    assert json.loads((second / "splits.json").read_text())["splits"] == record["splits"]
    reused = _strict_json(second / "results.json")["runs"]
    assert [r["test_score"] for r in reused] == [r["test_score"] for r in _strict_json(first / "results.json")["runs"]]

    capsys.readouterr()
    for change, message in [
        (lambda s: s["splits"][0]["test"].append(1000), "row 1000 is not a row of the data (0..299"),
        (lambda s: s["splits"][0]["test"].append(s["splits"][0]["train"][0]), "is in train and in test"),
        (lambda s: s["splits"][1].pop("valid"), "split 1 has no 'valid' list of rows"),
        (lambda s: s["splits"][0]["test"].append(s["splits"][0]["test"][0]), "is twice in test"),
        (lambda s: s["splits"][0]["train"].append(-3), "row -3 is not a row of the data (0..299"),
        (lambda s: s["splits"][0]["valid"].append(2.0), "row 2.0 is not a row of the data (0..299"),
        (lambda s: s["splits"][0]["valid"].append(True), "row True is not a row of the data (0..299"),
        (lambda s: s["splits"][0].update(test=[]), "split 0 has an empty test part"),
    ]:
        broken = json.loads(json.dumps(record))
        change(broken)
        path = tmp_path / "broken.json"
        path.write_text(json.dumps(broken))
        err = cli_fails(argv + ["--out", str(tmp_path / "o"), "--splits-file", str(path)], capsys)
        assert message in err and str(path) in err, err


def test_metric_choice_selects_and_is_reported(tiny_csv, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["molecules", "--data", str(tiny_csv), "--model", "duvenaud", "--epochs", "2", "--metric", "prc-auc",
                 "--out", str(out), "--no-progress", "--threads", "1"]) == 0
    printed = capsys.readouterr().out
    assert "test prc-auc" in printed
    results = _strict_json(out / "results.json")
    run = results["runs"][0]
    assert run["metric"] == "prc-auc" and run["test_score"] == run["test_metrics"]["prc-auc"]["mean"]
    assert run["valid_score"] == max(v for v in run["history"]["valid_score"] if v is not None)
    # where the time went: every phase measured, the training part the epochs' sum, printed in one line
    timing = results["timing"]
    assert set(timing) == {"read", "featurise", "train", "validate", "test"}
    assert all(value > 0 for value in timing.values())
    assert math.isclose(timing["train"], 2 * run["seconds_per_epoch"], rel_tol=1e-9)
    assert f"featurise {timing['featurise']:.1f} s, train {timing['train']:.1f} s" in printed


def test_metrics_agree_with_sklearn_and_skip_undefined_tasks():
    from sklearn.metrics import average_precision_score, r2_score, roc_auc_score

    from rpfast.experiments.molecules.tasks import task_scores

    labels = np.array([[0, 1.0], [1, np.nan], [1, 2.0], [0, 3.0]])
    predictions = np.array([[0.2, 1.5], [0.7, 0.0], [0.4, 2.5], [0.6, 2.0]])
    assert task_scores("roc-auc", predictions[:, :1], labels[:, :1]) == [roc_auc_score([0, 1, 1, 0], [.2, .7, .4, .6])]
    assert task_scores("prc-auc", predictions[:, :1], labels[:, :1]) == [
        average_precision_score([0, 1, 1, 0], [.2, .7, .4, .6])]
    assert task_scores("accuracy", predictions[:, :1], labels[:, :1]) == [0.5]
    assert task_scores("rmse", predictions[:, 1:], labels[:, 1:]) == [math.sqrt((0.25 + 0.25 + 1) / 3)]
    assert task_scores("r2", predictions[:, 1:], labels[:, 1:]) == [r2_score([1, 2, 3], [1.5, 2.5, 2.0])]
    assert task_scores("roc-auc", predictions[:2, :1], np.array([[0.0], [0.0]])) == [None]
    assert task_scores("rmse", np.array([[np.nan]]), np.array([[1.0]])) == [None]  # diverged: null, not NaN


def test_regression_targets_are_standardised_on_train_and_inverted():
    from rpfast.experiments.molecules.tasks import Targets

    labels = torch.tensor([[1.0, float("nan")], [3.0, 5.0], [5.0, 5.0]])
    targets = Targets.fit("regression", labels)
    assert targets.mean.tolist() == [3.0, 5.0] and targets.sd.tolist() == [2.0, 1.0]  # sd 0 -> 1
    standard = ((labels.double() - targets.mean) / targets.sd).float()
    assert float(targets.loss(standard.nan_to_num(0), labels)) == 0.0
    np.testing.assert_allclose(targets.predictions(standard.nan_to_num(0))[1:], labels[1:].numpy())


def test_fit_selects_the_lowest_score_when_minimising():
    from rpfast.experiments.training import Batches, fit

    model = torch.nn.Linear(1, 1)
    scores = iter([3.0, 1.0, 2.0])
    data = torch.arange(4.0).view(-1, 1)
    batches = Batches(torch.arange(4), lambda i: data[i], size=4, generator=torch.Generator().manual_seed(0), seed=0)
    fitted = fit(model, batches, lambda m, x: m(x).pow(2).mean(), epochs=3,
                 optimizer=lambda p: torch.optim.SGD(p, lr=0.01), metric=lambda m: next(scores), maximize=False)
    assert (fitted.best_epoch, fitted.best_metric) == (1, 1.0)


def test_balanced_scaffold_split_keeps_scaffolds_together_and_varies_with_the_seed():
    from rpfast.datasets.moleculenet import balanced_scaffold_split
    from rpfast.datasets.molecules import scaffold_groups

    smiles = load_tox21().smiles[:300]
    scaffolds = scaffold_groups(smiles)
    parts = [balanced_scaffold_split(smiles, seed) for seed in (0, 1)]
    for split in parts:
        assert sorted(torch.cat(split).tolist()) == list(range(300))
        owner = {}
        for name, index in zip(("train", "valid", "test"), split):
            for i in index.tolist():
                assert owner.setdefault(scaffolds[i], name) == name
    assert not torch.equal(parts[0][2], parts[1][2])


def test_an_id_column_beside_binary_labels_is_left_out_with_a_warning(tmp_path, capsys, monkeypatch):
    """BBBP's layout: num (a row number), name, p_np (0/1), smiles."""
    monkeypatch.setenv("RPFAST_CACHE", str(tmp_path / "cache"))
    data = load_tox21()
    path = tmp_path / "bbbp_like.csv"
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["num", "name", "p_np", "smiles"])
        for i in range(120):
            writer.writerow([i + 1, f"compound {i}", int(i % 3 == 0), data.smiles[i]])
    out = tmp_path / "out"
    assert main(["molecules", "--data", str(path), "--model", "duvenaud", "--epochs", "1", "--out", str(out),
                 "--no-progress", "--threads", "1", "--split", "scaffold"]) == 0
    assert "left out the columns that are not 0/1 beside the 0/1 label columns (an id or a count?): num" \
        in capsys.readouterr().err
    results = _strict_json(out / "results.json")
    assert results["tasks"] == ["p_np"] and results["task_type"] == "classification"
    err = cli_fails(["molecules", "--data", str(path), "--tasks", "num,p_np", "--out", str(tmp_path / "o"),
                     "--no-progress"], capsys)
    assert "--tasks mixes 0/1 columns (p_np) with continuous ones (num)" in err


def test_a_molecules_prediction_does_not_depend_on_the_other_rows(tiny_csv, tmp_path, capsys):
    """The campaign's case: CCO's NR-AR prediction differed in the last digits between two files
    (batch composition changed float32 sums; RP models drew a batch's relabelings in one stream)."""
    from rpfast.experiments.molecules.checkpoints import predict

    out = tmp_path / "out"
    assert main(["molecules", "--data", str(tiny_csv), "--model", "duvenaud,rp-duvenaud", "--epochs", "1",
                 "--eval-samples", "3", "--out", str(out), "--no-progress", "--threads", "1"]) == 0
    capsys.readouterr()
    others = load_tox21().smiles[300:420]
    before = torch.get_num_threads()
    try:
        for threads, name in ((1, "duvenaud"), (1, "rp-duvenaud"), (2, "rp-duvenaud")):
            torch.set_num_threads(threads)
            checkpoint = out / "runs" / name / "split0" / "best.pt"
            alone = predict(checkpoint, ["CCO"]).values[0]
            for smiles, at in ((others[:57] + ["CCO"] + others[57:], 57), (["c1ccccc1O", "CCO"], 1),
                               (["CCO"] + others, 0), (others + ["CCO"], len(others))):
                np.testing.assert_array_equal(predict(checkpoint, smiles).values[at], alone, err_msg=name)
    finally:
        torch.set_num_threads(before)


def test_predict_writes_one_row_per_line_and_reports_blank_ones(tiny_csv, tmp_path, capsys):
    """The campaign's case: a blank line in a prediction CSV was dropped silently (4 data lines,
    3 output rows), shifting every later row."""
    out = tmp_path / "out"
    assert main(["molecules", "--data", str(tiny_csv), "--model", "duvenaud", "--epochs", "1", "--out", str(out),
                 "--no-progress", "--threads", "1"]) == 0
    checkpoint = str(out / "runs/duvenaud/split0/best.pt")
    for name, text in (("blank.csv", "smiles\nCCO\n\nc1ccccc1O\nCC(=O)O\n"),
                       ("blank.smi", "CCO ethanol\n\n# a comment\nc1ccccc1O phenol\nCC(=O)O\n")):
        data, predicted = tmp_path / name, tmp_path / f"{name}.out.csv"
        data.write_text(text)
        capsys.readouterr()
        assert main(["molecules", "predict", "--checkpoint", checkpoint, "--data", str(data), "--out",
                     str(predicted), "--no-progress"]) == 0
        err = capsys.readouterr().err
        assert "1 row(s) without a SMILES (a blank line or an empty cell), left with empty predictions: rows 1" in err
        rows = _rows(predicted)
        assert [r["smiles"] for r in rows] == ["CCO", "", "c1ccccc1O", "CC(=O)O"]
        assert rows[1]["NR-AhR_pred"] == "" and all(0 < float(rows[i]["NR-AhR_pred"]) < 1 for i in (0, 2, 3))
