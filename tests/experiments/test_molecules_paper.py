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
from rpfast.experiments.molecules.models import Architecture, averaging, build_model  # noqa: E402
from rpfast.experiments.molecules.train import MoleculesConfig, jobs_of, summarise  # noqa: E402
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
    assert (config.sweep_splits, config.valid_samples) == (1, 5) and config.eval_samples == 20  # the test keeps 20
    assert config.jobs == 0 and config.resolved_jobs(16) == (config.threads or torch_threads())  # one per thread
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


def test_the_sweep_runs_on_the_first_sweep_splits_splits():
    config = MoleculesConfig(models="rp-duvenaud,kary", sweep_k=True, sweep_splits=1)
    first, second, third = jobs_of(config, 3)
    assert first == [("duvenaud", 20), ("rp-duvenaud", 20), ("kary", 20), ("kary", 10), ("kary", 30), ("kary", 40),
                     ("kary", 50)]
    assert second == third == first[:3]  # Duvenaud stays: the speed-up's baseline on every split
    assert jobs_of(MoleculesConfig(models="kary", sweep_k=True), 2)[1] == jobs_of(
        MoleculesConfig(models="kary", sweep_k=True), 2)[0]  # default: every split
    assert jobs_of(MoleculesConfig(models="duvenaud"), 2) == [[("duvenaud", 20)]] * 2


@pytest.mark.parametrize("name", ["valid_samples", "sweep_splits"])
def test_valid_samples_and_sweep_splits_must_be_positive_integers(name):
    with pytest.raises(ValueError, match=f"{name} must be a positive integer, got 0"):
        MoleculesConfig(**{name: 0}).validate()


def test_averaging_sets_the_eval_samples_of_every_strategy_and_restores_them():
    import torch

    arch = Architecture("kary", 1, 6, 1, eval_samples=20)
    model = build_model(arch, torch.Generator().manual_seed(0))
    with averaging(model, 5) as inside:
        assert inside.strategy.eval_samples == 5
        assert inside.strategy.samples(False) == 5 and inside.strategy.samples(True) == 1
    assert model.strategy.eval_samples == 20
    with pytest.raises(RuntimeError):
        with averaging(model, 3):
            raise RuntimeError("a failing pass")
    assert model.strategy.eval_samples == 20  # restored after an error too
    with averaging(model, None):
        assert model.strategy.eval_samples == 20
    plain = build_model(Architecture("duvenaud", 1), torch.Generator())
    with averaging(plain, 5):  # nothing to set in a model without relabelings
        pass


def test_the_validation_pass_averages_valid_samples_relabelings(tmp_path, monkeypatch):
    """--valid-samples reaches the validation pass; the checkpoint and the test keep --eval-samples."""
    from rpfast.experiments.molecules import models as molecule_models
    from rpfast.experiments.molecules import train as molecule_train

    monkeypatch.setenv("RPFAST_CACHE", str(tmp_path / "cache"))
    seen = []
    real = molecule_models.model_outputs

    def recording(model, *args, **kwargs):
        seen.append(model.strategy.eval_samples)
        return real(model, *args, **kwargs)

    monkeypatch.setattr(molecule_train, "model_outputs", recording)
    data = write_tox21_subset(tmp_path / "tiny.csv", 200, {"A": 2, "B": 11})
    out = tmp_path / "out"
    assert main(["molecules", "--data", str(data), "--model", "rp-duvenaud", "--epochs", "2", "--valid-samples", "3",
                 "--eval-samples", "7", "--no-progress", "--threads", "1", "--out", str(out)]) == 0
    assert seen == [3, 3]
    checkpoint = next((out / "runs").rglob("*.pt"))
    assert torch_load(checkpoint)["architecture"]["eval_samples"] == 7


def torch_load(path):
    import torch

    return torch.load(path, weights_only=False)


def test_the_k_figure_compares_every_k_on_the_splits_they_all_ran_on():
    from rpfast.experiments.molecules.report import _sweep_points

    runs = [_run("duvenaud", None, s, 0.80 + s / 100, 0.1) for s in range(3)]
    runs += [_run("kary", 20, s, 0.70 + s / 100, 0.1) for s in range(3)] + [_run("kary", 10, 0, 0.6, 0.1)]
    splits, kary, full = _sweep_points({"runs": runs})
    assert splits == [0]  # the sweep's k = 10 ran on the first split only
    assert kary == [(10, 0.6, None, 1.0), (20, 0.70, None, 1.0)] and full == (0.80, 1.0)
    splits, kary, _ = _sweep_points({"runs": runs[:6]})
    assert splits == [0, 1, 2] and kary[0][1] == pytest.approx(0.71) and kary[0][2] == pytest.approx(0.01)


def torch_threads() -> int:
    import torch

    return torch.get_num_threads()


def test_runs_in_worker_processes_give_what_one_process_gives(tmp_path, monkeypatch):
    """--jobs 2 --threads 2 (two one-thread workers) trains every run exactly as one process of
    one thread does: the same test scores, epochs and test predictions, bit for bit."""
    monkeypatch.setenv("RPFAST_CACHE", str(tmp_path / "cache"))
    data = write_tox21_subset(tmp_path / "tiny.csv", 200, {"A": 2, "B": 11})
    results = {}
    for jobs, threads in (("1", "1"), ("2", "2")):
        out = tmp_path / f"jobs{jobs}"
        assert main(["molecules", "--data", str(data), "--model", "duvenaud,rp-duvenaud,rnn-dfs", "--k", "6",
                     "--splits", "2", "--epochs", "2", "--eval-samples", "3", "--jobs", jobs, "--threads", threads,
                     "--no-progress", "--out", str(out)]) == 0
        runs = json.loads((out / "results.json").read_text())["runs"]
        predictions = sorted((out / "runs").rglob("test_predictions.csv"))
        results[jobs] = ([(r["model"], r["split"], r["test_score"], r["history"]) for r in runs],
                         [p.read_bytes() for p in predictions])
    assert len(results["1"][0]) == 6 and results["1"][0] == results["2"][0]
    assert len(results["1"][1]) == 6 and results["1"][1] == results["2"][1]


@pytest.mark.parametrize("args, message", [
    (["--jobs", "-1"], "jobs must be >= 0"),
    (["--jobs", "2", "--nproc", "2"], "--nproc shares each run among processes and --jobs trains runs side by side"),
])
def test_jobs_are_checked(tmp_path, capsys, args, message):
    assert message in cli_fails(["molecules", *args, "--out", str(tmp_path / "o")], capsys)


def test_a_run_that_fails_in_a_worker_fails_the_command_with_one_line(tmp_path, monkeypatch, capsys):
    """A divergence in the first epoch, raised in a worker process, ends the command as it does in
    one process: one line naming the model and split."""
    monkeypatch.setenv("RPFAST_CACHE", str(tmp_path / "cache"))
    data = write_tox21_subset(tmp_path / "tiny.csv", 200, {"A": 2, "B": 11})
    with pytest.raises(SystemExit) as stopped:
        main(["molecules", "--data", str(data), "--model", "duvenaud,kary", "--k", "6", "--epochs", "1", "--lr", "1e30",
              "--jobs", "2", "--threads", "2", "--no-progress", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and "Traceback" not in err
    line = err.splitlines()[-1]  # after the data set's warnings
    assert line.startswith("rpfast molecules: error: ") and "split 0" in line and "--lr" in line
    assert not (tmp_path / "o").exists()
