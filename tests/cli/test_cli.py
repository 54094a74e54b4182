"""`rpfast csl` end to end on a tiny budget, and its error messages."""
import json

import pytest

from rpfast.cli import main

pytestmark = pytest.mark.backend_neutral  # the first CI run covers it (see conftest.py)


def test_csl_command_writes_table_csv_json_and_figure(tmp_path, capsys):
    out = tmp_path / "csl"
    assert main(["csl", "--epochs", "2", "--folds", "2", "--out", str(out), "--no-progress", "--threads", "1"]) == 0
    printed = capsys.readouterr().out
    assert "RP-GIN" in printed and "median" in printed
    results = json.loads((out / "results.json").read_text())
    assert {r["model"] for r in results["runs"]} == {"GIN", "RP-GIN"}
    assert len(results["runs"]) == 4
    assert all(0 <= r["accuracy"] <= 100 for r in results["runs"])
    assert (out / "summary.csv").read_text().startswith("model,mean,median,max,min,sd")
    assert (out / "csl.png").stat().st_size > 10_000


def test_csl_single_split_is_stratified_and_its_sd_is_not_a_number(tmp_path, capsys):
    import csv

    import torch

    from rpfast.experiments.csl.experiment import CSLConfig, _dataset, _splits

    config = CSLConfig(folds=1)
    _, labels = _dataset(config.num_vertices, config.data_seed)
    [(train, valid)] = _splits(config, labels)
    assert len(valid) == 30 and sorted(train + valid) == list(range(150))
    assert torch.bincount(labels[valid], minlength=10).tolist() == [3] * 10  # as one of the 5 default folds
    assert _splits(config, labels) == [(train, valid)]  # the data seed fixes it

    out = tmp_path / "csl"
    assert main(["csl", "--epochs", "1", "--folds", "1", "--out", str(out), "--no-progress", "--threads", "1",
                 "--hidden", "4", "--jobs", "1"]) == 0
    printed = capsys.readouterr().out
    rows = [line.split() for line in printed.splitlines() if line.startswith(("GIN", "RP-GIN"))]
    assert [row[5] for row in rows] == ["n/a", "n/a"] and [row[6] for row in rows] == ["1", "1"]
    assert [row["sd"] for row in csv.DictReader((out / "summary.csv").open())] == ["", ""]
    results = json.loads((out / "results.json").read_text())
    assert [row["sd"] for row in results["summary"]] == [None, None] and len(results["runs"]) == 2


def test_finished_in_is_the_whole_wall_time_of_the_process():
    import subprocess
    import sys
    import time

    from rpfast.experiments.report import wall_seconds

    assert wall_seconds() > 0
    start = time.monotonic()
    code = ("import time; time.sleep(1.5); from rpfast.experiments.report import wall_seconds; "
            "print(wall_seconds())")
    reported = float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                    check=True).stdout)
    assert 1.5 <= reported <= time.monotonic() - start  # the sleep before the import counts


def test_wall_seconds_without_proc_counts_from_the_import(monkeypatch):
    import time

    from rpfast.experiments import report

    def no_proc(*args, **kwargs):
        raise OSError("no /proc here")

    monkeypatch.setattr(report, "open", no_proc, raising=False)
    before = time.monotonic() - report._IMPORTED
    assert before <= report.wall_seconds() <= time.monotonic() - report._IMPORTED


@pytest.mark.parametrize("argv, message", [
    (["csl", "--epochs", "0"], "epochs must be a positive integer"),
    (["csl", "--folds", "20"], "folds must be between 1 and 15"),
    (["csl", "--folds", "0"], "folds must be a positive integer"),
    (["csl", "--lr", "-1"], "lr must be positive"),
])
def test_csl_command_reports_bad_options(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv + ["--no-progress"])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


EDGE_LIST = "# a triangle with a tail and an isolated vertex\n1 2\n2 3\n3 1\n3 10\n42\n"


def test_subsets_command_streams_csv_with_original_labels(tmp_path, capsys):
    graph = tmp_path / "g.txt"
    graph.write_text(EDGE_LIST)
    out = tmp_path / "s.csv"
    assert main(["subsets", str(graph), "--k", "3", "--prune", "disconnected", "--out", str(out),
                 "--no-progress", "--chunk-size", "1"]) == 0
    assert out.read_text().split() == ["1,2,3", "1,3,10", "2,3,10"]
    assert "5 vertices, 4 edges; k=3, prune=disconnected: 3 subsets" in capsys.readouterr().err


def test_subsets_command_count_npy_and_smiles(tmp_path, capsys):
    import numpy as np

    graph = tmp_path / "g.txt"
    graph.write_text(EDGE_LIST)
    assert main(["subsets", str(graph), "--k", "2", "--count"]) == 0
    assert capsys.readouterr().out.strip() == "10"
    pytest.importorskip("rdkit")
    out = tmp_path / "phenol.npy"
    assert main(["subsets", "c1ccccc1O", "--smiles", "--k", "3", "--prune", "disconnected", "--out", str(out),
                 "--no-progress"]) == 0
    rows = np.load(out)
    assert rows.shape == (8, 3) and rows[0].tolist() == [0, 1, 2]


@pytest.mark.parametrize("argv, message", [
    (["subsets", "missing.txt", "--k", "2"], "does not exist"),
    (["subsets", "C1CC", "--smiles", "--k", "2"], "could not parse"),
    (["subsets", "{graph}", "--k", "0"], "argument --k: must be >= 1"),
    (["subsets", "{graph}", "--k", "2", "--out", "x.txt"], "--out must be"),
])
def test_subsets_command_reports_errors(argv, message, tmp_path, capsys):
    if message == "could not parse":
        pytest.importorskip("rdkit")
    graph = tmp_path / "g.txt"
    graph.write_text(EDGE_LIST)
    argv = [a.replace("{graph}", str(graph)) for a in argv]
    with pytest.raises(SystemExit) as exit_info:
        main(argv + ["--no-progress"])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_version_and_old_spellings(tmp_path, capsys):
    import rpfast

    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0 and capsys.readouterr().out.strip() == f"rpfast {rpfast.__version__}"
    graph = tmp_path / "g.txt"
    graph.write_text("0 1\n1 2\n")
    assert main(["subsets", str(graph), "--k", "2", "--prune", "connected", "--no-progress"]) == 0
    captured = capsys.readouterr()
    assert captured.out.split() == ["0,1", "1,2"]
    assert "--prune connected is now spelled --prune disconnected" in captured.err


def test_csl_options_come_from_the_config_dataclass(capsys):
    import dataclasses

    from rpfast.cli import build_parser
    from rpfast.experiments.csl.experiment import CSLConfig

    parser = build_parser()
    args = parser.parse_args(["csl"])
    for field in dataclasses.fields(CSLConfig):
        if field.metadata.get("cli", True):
            assert getattr(args, field.name) == field.default, field.name
    with pytest.raises(SystemExit):
        parser.parse_args(["csl", "--help"])
    help_text = capsys.readouterr().out
    for flag in ("--epochs", "--layers", "--eval-samples", "--out", "--force", "--threads", "--paper", "--no-progress"):
        assert flag in help_text
    assert "--num-vertices" not in help_text and "--inference-perms" not in help_text
    assert parser.parse_args(["csl", "--inference-perms", "3"]).eval_samples == 3  # old spelling
