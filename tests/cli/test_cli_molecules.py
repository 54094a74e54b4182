"""`rpfast molecules` end to end on a tiny MoleculeNet-style file, and its one-line errors."""
import csv
import json

import pytest

pytest.importorskip("rdkit")

from tests.helpers.assertions import cli_fails  # noqa: E402
from rpfast.cli import main  # noqa: E402
from rpfast.datasets import load_tox21  # noqa: E402
from tests.helpers.tox21_files import write_tox21_subset  # noqa: E402

pytestmark = pytest.mark.backend_neutral  # the first CI run covers it (see conftest.py)


@pytest.fixture()
def tiny_csv(tmp_path, monkeypatch):
    """160 Tox21 molecules with 3 tasks, an id column, missing labels and one invalid SMILES."""
    monkeypatch.setenv("RPFAST_CACHE", str(tmp_path / "cache"))
    return write_tox21_subset(tmp_path / "tiny.csv", 160, {"A": 0, "B": 1, "C": 2}, smiles_header="SMILES", ids=True,
                              replace={5: "C1CC"})


def test_molecules_command_writes_table_csv_json_and_figures(tiny_csv, tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["molecules", "--data", str(tiny_csv), "--model", "duvenaud,rp-duvenaud,kary,rnn-dfs", "--k", "6",
            "--epochs", "2", "--eval-samples", "2", "--splits", "2", "--seed", "2", "--sweep-k", "--out", str(out), "--no-progress",
            "--threads", "1"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "skipped 1 of 160 SMILES" in printed and "data rows 5" in printed
    assert "rp-duvenaud" in printed and "test roc-auc" in printed
    results = json.loads((out / "results.json").read_text())
    assert results["tasks"] == ["A", "B", "C"] and results["molecules"] == 159
    assert {(r["model"], r["split"]) for r in results["runs"]} >= {("duvenaud", 0), ("rnn-dfs", 1)}
    assert {r["k"] for r in results["runs"] if r["model"] == "kary"} == {6, 10, 20, 30, 40, 50}
    for run in results["runs"]:
        known = [a for a in run["task_scores"] if a is not None]
        assert all(0 <= a <= 1 for a in known) and run["seconds_per_epoch"] > 0
        assert set(run["test_metrics"]) == {"roc-auc", "prc-auc", "accuracy"}
        assert len(run["history"]["train_loss"]) == len(run["history"]["valid_score"]) == 2
        where = out / "runs" / (run["model"] + ("" if run["k"] is None else f"-k{run['k']}")) / f"split{run['split']}"
        assert (where / "best.pt").stat().st_size > 1000
        lines = (where / "test_predictions.csv").read_text().splitlines()
        assert lines[0] == "row,smiles,A,A_pred,B,B_pred,C,C_pred" and len(lines) == 1 + 16
    assert (out / "summary.csv").read_text().startswith("model,metric,test_score,test_sd,valid_score,"
                                                        "seconds_per_epoch,splits")
    for figure in ("task_scores.png", "kary_sweep.png", "learning_curves.png"):
        assert (out / figure).stat().st_size > 10_000
    splits = json.loads((out / "splits.json").read_text())["splits"]
    assert len(splits) == 2 and sorted(sum(splits[0].values(), [])) == [i for i in range(160) if i != 5]
    assert not [p for p in out.iterdir() if p.name.startswith(".")]


@pytest.mark.parametrize("argv, message", [
    (["--model", "gcn"], "unknown model 'gcn'"),
    (["--epochs", "0"], "epochs must be a positive integer"),
    (["--split", "temporal"], "invalid choice: 'temporal'"),
    (["--metric", "rmse", "--task-type", "classification"], "metric 'rmse' scores regression"),
    (["--data", "no/such/file.csv"], "does not exist"),
])
def test_molecules_command_reports_bad_input_in_one_line(argv, message, capsys, tmp_path):
    code = None
    try:
        code = main(["molecules", *argv, "--out", str(tmp_path / "o"), "--no-progress"])
    except SystemExit as exit_info:
        code = exit_info.code
    assert code not in (0, None)
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err


def test_non_binary_labels_under_forced_classification_are_one_line_errors(tmp_path, capsys):
    path = tmp_path / "reg.csv"
    path.write_text("smiles,logp\n" + "".join(f"{'C' * (i + 1)},{i * 0.5}\n" for i in range(20)))
    with pytest.raises(SystemExit) as exit_info:
        main(["molecules", "--data", str(path), "--task-type", "classification", "--out", str(tmp_path / "o"),
              "--no-progress"])
    assert exit_info.value.code == 2
    assert "task 'logp' has label 0.5 (data row 1)" in capsys.readouterr().err


def test_task_figure_with_hundreds_of_tasks(tmp_path):
    """Wide datasets (ToxCast has 617 tasks) get a sorted-AUC curve instead of 617 bars."""
    from rpfast.experiments.molecules.report import _plot_tasks

    rng = __import__("numpy").random.default_rng(0)
    tasks = [f"t{i}" for i in range(300)]
    runs = [{"model": m, "k": None, "split": 0, "task_scores": [None if i % 7 == 0 else float(rng.uniform(0.5, 0.9))
                                                                 for i in range(300)]}
            for m in ("duvenaud", "rp-duvenaud")]
    summary = [{"model": m, "name": m, "k": None} for m in ("duvenaud", "rp-duvenaud")]
    _plot_tasks({"tasks": tasks, "metric": "roc-auc", "runs": runs, "summary": summary}, tmp_path / "t.png")
    assert 10_000 < (tmp_path / "t.png").stat().st_size < 2_000_000


def test_molecules_command_with_two_processes(tiny_csv, tmp_path, capfd):
    out = tmp_path / "ddp"
    assert main(["molecules", "--data", str(tiny_csv), "--model", "duvenaud,rp-duvenaud", "--epochs", "1",
                 "--batch-size", "32", "--nproc", "2", "--sync-bn", "--out", str(out), "--no-progress"]) == 0
    results = json.loads((out / "results.json").read_text())
    assert {r["model"] for r in results["runs"]} == {"duvenaud", "rp-duvenaud"}
    captured = capfd.readouterr()  # the ranks' stderr reaches file descriptor 2 through the relay
    assert "test roc-auc" in captured.out
    assert "find_unused_parameters" not in captured.err and "Warning" not in captured.err, captured.err


# --- issue defect 8: no usable label is an error; an undefined AUC is null, never NaN -------

def _strict_json(path):
    """results.json parsed with NaN and Infinity refused (they are not JSON)."""
    def refuse(constant):
        raise AssertionError(f"{path} holds {constant}")

    return json.loads(path.read_text(), parse_constant=refuse)


def _label_csv(tmp_path, columns, name="labels.csv"):
    """The first 40 Tox21 molecules with the label columns ``columns`` (name -> 40 values)."""
    data = load_tox21()
    path = tmp_path / name
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["smiles", *columns])
        for i in range(40):
            writer.writerow([data.smiles[i], *("" if v[i] is None else v[i] for v in columns.values())])
    return path


@pytest.mark.parametrize("columns, shown", [
    ({"flat": [0] * 40}, "'flat': only 0"),
    ({"empty": [None] * 40}, "'empty': no label"),
    ({"flat": [1] * 40, "empty": [None] * 40}, "'flat': only 1; 'empty': no label"),
])
def test_no_usable_label_is_a_one_line_error(columns, shown, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("RPFAST_CACHE", str(tmp_path / "cache"))
    path = _label_csv(tmp_path, columns)
    out = tmp_path / "out"
    err = cli_fails(["molecules", "--data", str(path), "--model", "duvenaud", "--epochs", "1", "--no-progress",
                     "--out", str(out)], capsys)
    assert err.startswith(f"rpfast molecules: error: {path}: no usable label: no task has both classes 0 and 1 "
                          f"({shown})"), err
    assert not out.exists()


def test_no_task_with_both_classes_in_the_test_split_is_a_one_line_error(tmp_path, capsys, monkeypatch):
    from rpfast.datasets.moleculenet import random_split

    monkeypatch.setenv("RPFAST_CACHE", str(tmp_path / "cache"))
    train, _, _ = random_split(40, 0)
    rare = [0] * 40
    rare[int(train[0])] = 1  # the only positive sits in the training set
    path = _label_csv(tmp_path, {"rare": rare})
    err = cli_fails(["molecules", "--data", str(path), "--model", "duvenaud", "--epochs", "1", "--no-progress",
                     "--out", str(tmp_path / "out")], capsys)
    assert "no task has roc-auc defined in the test set of the split (4 test molecules" in err
    assert not (tmp_path / "out").exists()


def _labels_scored_in(scored, unscored=()):
    """40 labels whose test set has both classes in the random splits of seeds ``scored`` and
    one class only in those of seeds ``unscored``."""
    from rpfast.datasets.moleculenet import random_split

    labels = [0] * 40
    avoid = {int(i) for seed in unscored for i in random_split(40, seed)[2]}
    for seed in scored:
        test = [int(i) for i in random_split(40, seed)[2]]
        labels[next(i for i in test if i not in avoid)] = 1
        assert any(labels[i] == 0 for i in test)
    assert sum(labels) >= 1 and all(labels[i] == 0 for i in avoid)
    return labels


def test_unusable_tasks_beside_a_usable_one_are_warned_about_and_null(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("RPFAST_CACHE", str(tmp_path / "cache"))
    path = _label_csv(tmp_path, {"A": _labels_scored_in([0, 1]), "flat": [0] * 40, "empty": [None] * 40})
    out = tmp_path / "out"
    assert main(["molecules", "--data", str(path), "--model", "duvenaud", "--epochs", "1", "--splits", "2",
                 "--no-progress", "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert "nan" not in captured.out.lower()
    assert "tasks left out of a mean (roc-auc undefined in a split's test set; null in results.json): " \
           "empty, flat" in captured.out
    assert "warning: split 1: 2 task(s) have one class only (or too few labels) in the test set and are left out " \
           "of its mean roc-auc: flat, empty" in captured.err
    results = _strict_json(out / "results.json")
    assert results["skipped_tasks"] == ["empty", "flat"]
    for run in results["runs"]:
        assert run["task_scores"][1:] == [None, None] and 0 <= run["task_scores"][0] <= 1
        assert run["test_score"] == run["task_scores"][0]
    assert 0 <= results["summary"][0]["test_score"] <= 1 and results["summary"][0]["splits"] == 2


def test_a_split_without_a_usable_test_task_is_an_error_before_training(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("RPFAST_CACHE", str(tmp_path / "cache"))
    path = _label_csv(tmp_path, {"A": _labels_scored_in([0], unscored=[1])})
    out = tmp_path / "out"
    err = cli_fails(["molecules", "--data", str(path), "--model", "duvenaud", "--epochs", "2", "--splits", "2",
                     "--no-progress", "--out", str(out)], capsys)
    assert "no task has roc-auc defined in the test set of split 1" in err
    assert not out.exists()


def test_undefined_scores_are_none_in_the_summary_and_na_in_the_table():
    from rpfast.experiments.molecules.train import summarise
    from rpfast.experiments.molecules.report import format_table

    runs = [{"model": "duvenaud", "k": None, "split": s, "metric": "roc-auc", "test_score": auc, "valid_score": None,
             "best_epoch": 0, "task_scores": [auc], "seconds_per_epoch": 1.0} for s, auc in enumerate([None, 0.75])]
    runs.append({**runs[0], "model": "rp-duvenaud"})
    results = {"tasks": ["A"], "metric": "roc-auc", "runs": runs, "summary": summarise(runs)}
    assert [(r["test_score"], r["test_sd"], r["valid_score"], r["splits"]) for r in results["summary"]] == [
        (0.75, None, None, 1), (None, None, None, 0)]
    table = format_table(results, "t")
    assert "nan" not in table and "0.000" not in table
    assert table.splitlines()[-1].split()[1:4] == ["n/a", "n/a", "n/a"]


# --- issue defect 11: the output directory is written whole --------------------------------

def test_ctrl_c_while_writing_keeps_the_previous_output_whole(tiny_csv, tmp_path, capsys, monkeypatch):
    import rpfast.experiments.molecules.report as report

    out = tmp_path / "out"
    argv = ["molecules", "--data", str(tiny_csv), "--model", "duvenaud", "--epochs", "1", "--no-progress",
            "--threads", "1", "--seed", "3", "--out", str(out)]  # seed 3: every task scored, no warning
    assert main(argv) == 0
    capsys.readouterr()
    before = {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert {name for name in before if "/" not in name} == {"summary.csv", "results.json", "splits.json",
                                                            "task_scores.png", "learning_curves.png"}
    err = cli_fails(argv + ["--epochs", "2"], capsys)  # no --force: refused before any training
    assert err == f"rpfast molecules: error: output directory {out} exists and is not empty; pass --force " \
                  "to replace it\n"

    def plot_then_interrupt(results, path):
        path.write_bytes(b"\x89PNG partial")
        raise KeyboardInterrupt

    monkeypatch.setattr(report, "_plot_tasks", plot_then_interrupt)
    assert cli_fails(argv + ["--epochs", "2", "--force"], capsys, 130) == "rpfast molecules: interrupted\n"
    after = {str(p.relative_to(out)): p.read_bytes() for p in out.rglob("*") if p.is_file()}
    assert after == before  # not new CSV/JSON beside the old figure
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "out", "tiny.csv"]
    monkeypatch.undo()
    monkeypatch.setenv("RPFAST_CACHE", str(tmp_path / "cache"))
    assert main(argv + ["--epochs", "2", "--force"]) == 0
    assert _strict_json(out / "results.json")["config"]["epochs"] == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "out", "tiny.csv"]


def test_a_diverging_learning_rate_stops_training_and_keeps_a_finite_epoch(tiny_csv, tmp_path, capsys):
    """A learning rate that blows the weights up in a later epoch: training stops there with a
    warning naming the epoch, an earlier epoch is kept, and its checkpoint is finite; one that
    does so in the first epoch is a one-line error."""
    import torch

    out = tmp_path / "out"
    argv = ["molecules", "--data", str(tiny_csv), "--model", "duvenaud", "--epochs", "6", "--no-progress",
            "--threads", "1"]
    assert main(argv + ["--lr", "5e7", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    run = json.loads((out / "results.json").read_text())["runs"][0]
    assert run["diverged_epoch"] is not None and 0 < run["diverged_epoch"] < 6
    assert f"duvenaud, split 0: training diverged in epoch {run['diverged_epoch']} (of 6, counting from 0" in err
    assert run["best_epoch"] < run["diverged_epoch"] and len(run["history"]["train_loss"]) == run["diverged_epoch"] + 1
    state = torch.load(out / "runs" / "duvenaud" / "split0" / "best.pt", weights_only=True)["state_dict"]
    assert all(torch.isfinite(v).all() for v in state.values() if v.is_floating_point())
    with pytest.raises(SystemExit) as stop:
        main(argv + ["--lr", "1e12", "--batch-size", "16", "--out", str(tmp_path / "none")])
    message = capsys.readouterr().err.splitlines()[-1]  # after the split's warning about task B
    assert stop.value.code == 2 and message.startswith("rpfast molecules: error: ")
    assert "duvenaud, split 0: training diverged in its first epoch" in message and "--lr, now 1e+12" in message
    assert not (tmp_path / "none").exists()
