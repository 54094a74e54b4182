"""`rpfast molecules` end to end on a tiny MoleculeNet-style file, and its one-line errors."""
import csv
import json

import pytest

pytest.importorskip("rdkit")

from rpfast.cli import main  # noqa: E402
from rpfast.data import load_tox21  # noqa: E402


@pytest.fixture()
def tiny_csv(tmp_path, monkeypatch):
    """160 Tox21 molecules with 3 tasks, an id column, missing labels and one invalid SMILES."""
    monkeypatch.setenv("RPFAST_CACHE", str(tmp_path / "cache"))
    data = load_tox21()
    path = tmp_path / "tiny.csv"
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["mol_id", "SMILES", "A", "B", "C"])
        for i in range(160):
            labels = ["" if v != v else int(v) for v in data.labels[i, :3].tolist()]
            writer.writerow([f"TOX{i}", data.smiles[i] if i != 5 else "C1CC", *labels])
    return path


def test_molecules_command_writes_table_csv_json_and_figures(tiny_csv, tmp_path, capsys):
    out = tmp_path / "out"
    argv = ["molecules", "--data", str(tiny_csv), "--model", "duvenaud,rp-duvenaud,kary,rnn-dfs", "--k", "6",
            "--epochs", "2", "--eval-samples", "2", "--splits", "2", "--sweep-k", "--out", str(out), "--no-progress",
            "--threads", "1"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "skipped 1 of 160 SMILES" in printed and "data rows 5" in printed
    assert "rp-duvenaud" in printed and "test AUC" in printed
    results = json.loads((out / "results.json").read_text())
    assert results["tasks"] == ["A", "B", "C"] and results["molecules"] == 159
    assert {(r["model"], r["split"]) for r in results["runs"]} >= {("duvenaud", 0), ("rnn-dfs", 1)}
    assert {r["k"] for r in results["runs"] if r["model"] == "kary"} == {6, 10, 20, 30, 40, 50}
    for run in results["runs"]:
        known = [a for a in run["task_aucs"] if a is not None]
        assert all(0 <= a <= 1 for a in known) and run["seconds_per_epoch"] > 0
    assert (out / "summary.csv").read_text().startswith("model,test_auc,test_sd,valid_auc,seconds_per_epoch,splits")
    assert (out / "task_auc.png").stat().st_size > 10_000 and (out / "kary_sweep.png").stat().st_size > 10_000
    assert not [p for p in out.iterdir() if p.name.startswith(".")]


@pytest.mark.parametrize("argv, message", [
    (["--model", "gcn"], "unknown model 'gcn'"),
    (["--epochs", "0"], "epochs must be a positive integer"),
    (["--split", "temporal"], "split must be 'random' or 'scaffold'"),
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


def test_non_binary_labels_are_one_line_errors(tmp_path, capsys):
    path = tmp_path / "reg.csv"
    path.write_text("smiles,logp\n" + "".join(f"{'C' * (i + 1)},{i * 0.5}\n" for i in range(20)))
    with pytest.raises(SystemExit) as exit_info:
        main(["molecules", "--data", str(path), "--out", str(tmp_path / "o"), "--no-progress"])
    assert exit_info.value.code == 2
    assert "task 'logp' has label 0.5 (data row 1)" in capsys.readouterr().err


def test_task_figure_with_hundreds_of_tasks(tmp_path):
    """Wide datasets (ToxCast has 617 tasks) get a sorted-AUC curve instead of 617 bars."""
    from rpfast.experiments.molecules_report import write_outputs

    rng = __import__("numpy").random.default_rng(0)
    tasks = [f"t{i}" for i in range(300)]
    runs = [{"model": m, "k": None, "split": 0, "test_auc": 0.7, "valid_auc": 0.7, "seconds_per_epoch": 1.0,
             "task_aucs": [None if i % 7 == 0 else float(rng.uniform(0.5, 0.9)) for i in range(300)]}
            for m in ("duvenaud", "rp-duvenaud")]
    summary = [{"model": m, "name": m, "k": None, "test_auc": 0.7, "test_sd": 0.0, "valid_auc": 0.7,
                "seconds_per_epoch": 1.0, "splits": 1} for m in ("duvenaud", "rp-duvenaud")]
    paths = write_outputs({"tasks": tasks, "runs": runs, "summary": summary}, tmp_path)
    assert [p.name for p in paths] == ["summary.csv", "results.json", "task_auc.png"]
    assert 10_000 < paths[2].stat().st_size < 2_000_000


def test_molecules_command_with_two_processes(tiny_csv, tmp_path, capsys):
    out = tmp_path / "ddp"
    assert main(["molecules", "--data", str(tiny_csv), "--model", "duvenaud,rp-duvenaud", "--epochs", "1",
                 "--batch-size", "32", "--nproc", "2", "--sync-bn", "--out", str(out), "--no-progress"]) == 0
    results = json.loads((out / "results.json").read_text())
    assert {r["model"] for r in results["runs"]} == {"duvenaud", "rp-duvenaud"}
    assert "test ROC-AUC" in capsys.readouterr().out
