"""The paper's Table 2 in `rpfast molecules`: the data sets recognised, the paper's numbers and
MUV's PRC-AUC beside the table, early stopping, and what --paper sets."""
import argparse
import json

import pytest

pytest.importorskip("rdkit")

from rpfast.cli import main  # noqa: E402
from rpfast.datasets.moleculenet import TOX21_TASKS  # noqa: E402
from rpfast.experiments.molecules.paper import (PAPER_PROTOCOL, extra_metrics, paper_dataset,  # noqa: E402
                                                paper_scores)
from rpfast.experiments.molecules.report import format_table  # noqa: E402
from rpfast.experiments.molecules.train import summarise  # noqa: E402
from tests.helpers.assertions import cli_fails  # noqa: E402
from tests.helpers.tox21_files import write_tox21_subset  # noqa: E402

pytestmark = pytest.mark.backend_neutral

MUV_TASKS = ["MUV-466", "MUV-548", "MUV-600", "MUV-644", "MUV-652", "MUV-689", "MUV-692", "MUV-712", "MUV-713",
             "MUV-733", "MUV-737", "MUV-810", "MUV-832", "MUV-846", "MUV-852", "MUV-858", "MUV-859"]


def test_the_papers_data_sets_are_recognised_by_their_label_columns():
    assert paper_dataset(TOX21_TASKS) == "Tox21"
    assert paper_dataset(["HIV_active"]) == "HIV"
    assert paper_dataset(MUV_TASKS) == "MUV"
    assert paper_dataset(MUV_TASKS[:16]) is None  # a subset of MUV's assays is another data set
    assert paper_dataset(["HIV_active", "other"]) is None and paper_dataset(["A"]) is None
    assert paper_dataset(["HIV_active"], 41000) == "HIV" and paper_dataset(TOX21_TASKS, 7823) == "Tox21"
    assert paper_dataset(TOX21_TASKS, 1_000_000) is None  # a library of Tox21's rows is not Tox21
    assert paper_scores(["HIV_active"], "roc-auc")["rp-duvenaud"] == 0.832
    assert paper_scores(["HIV_active"], "prc-auc") == {}  # Table 2 is ROC-AUC
    assert extra_metrics(MUV_TASKS, "roc-auc") == ("prc-auc",)
    assert extra_metrics(MUV_TASKS, "prc-auc") == () and extra_metrics(["HIV_active"], "roc-auc") == ()


def _run(model, k, split, auc, prc):
    return {"model": model, "k": k, "split": split, "metric": "roc-auc", "test_score": auc, "valid_score": auc,
            "best_epoch": 0, "task_scores": [auc], "seconds_per_epoch": 1.0,
            "test_metrics": {"roc-auc": {"mean": auc}, "prc-auc": {"mean": prc}, "accuracy": {"mean": 0.9}},
            "history": {"train_loss": [1.0] * (3 + split), "valid_score": [auc] * (3 + split)}}


def test_the_table_shows_muvs_prc_auc_and_the_papers_numbers():
    runs = [_run("duvenaud", None, s, auc, prc) for s, (auc, prc) in enumerate([(0.70, 0.10), (0.80, 0.30)])]
    runs += [_run("kary", 10, 0, 0.6, 0.05), _run("kary", 20, 0, 0.65, 0.07)]
    summary = summarise(runs)
    assert summary[0]["test_metrics"]["prc-auc"]["mean"] == pytest.approx(0.2)
    assert summary[0]["test_metrics"]["prc-auc"]["sd"] == pytest.approx(0.1414, abs=1e-4)
    assert summary[0]["epochs"] == 3.5  # early stopping: the mean of the epochs trained
    table = format_table({"tasks": MUV_TASKS, "metric": "roc-auc", "summary": summary}, "MUV")
    header, _, duvenaud, kary10, kary20 = table.splitlines()[1:]
    assert "test prc-auc" in header and header.rstrip().endswith("paper")
    assert duvenaud.split()[3:5] == ["0.200", "0.141"] and duvenaud.split()[-1] == "0.798"
    assert kary10.split()[-1] == "-"  # Table 2's k-ary row is k = 20, and for MUV it is not known here
    plain = format_table({"tasks": ["A"], "metric": "roc-auc", "summary": summary}, "other")
    assert "prc-auc" not in plain and "paper" not in plain


def test_paper_sets_the_protocol(monkeypatch):
    from rpfast.commands import molecules as command

    captured = []
    monkeypatch.setattr(command.molecules, "main", lambda config, progress: captured.append(config))
    parser = argparse.ArgumentParser()
    command.add_parser(parser)
    command.run(parser.parse_args(["train", "--paper"]))
    config = captured[-1]
    assert (config.splits, config.models, config.epochs, config.patience, config.sweep_k) == (
        PAPER_PROTOCOL["splits"], PAPER_PROTOCOL["models"], PAPER_PROTOCOL["epochs"], PAPER_PROTOCOL["patience"], True)
    command.run(parser.parse_args(["train", "--paper", "--splits", "5", "--model", "cnn-dfs", "--patience", "2"]))
    config = captured[-1]  # the options given beside --paper win over it
    assert (config.splits, config.models, config.patience, config.epochs) == (5, "cnn-dfs", 2,
                                                                              PAPER_PROTOCOL["epochs"])


def test_early_stopping_stops_after_patience_epochs_without_a_better_validation_metric(tmp_path, monkeypatch):
    monkeypatch.setenv("RPFAST_CACHE", str(tmp_path / "cache"))
    data = write_tox21_subset(tmp_path / "tiny.csv", 400, {"A": 2, "B": 11})
    out = tmp_path / "out"
    assert main(["molecules", "--data", str(data), "--model", "duvenaud", "--epochs", "30", "--patience", "1",
                 "--lr", "0.3", "--no-progress", "--threads", "1", "--out", str(out)]) == 0
    run = json.loads((out / "results.json").read_text())["runs"][0]
    trained = len(run["history"]["train_loss"])
    assert run["stopped_early"] and trained < 30 and run["best_epoch"] == trained - 2


def test_patience_must_be_a_positive_integer(tmp_path, capsys):
    assert "patience must be a positive integer" in cli_fails(["molecules", "--patience", "0", "--out",
                                                                str(tmp_path / "o")], capsys)
