"""`rpfast csl` end to end on a tiny budget, and its error messages."""
import json

import pytest

from rpfast.cli import main


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


@pytest.mark.parametrize("argv, message", [
    (["csl", "--epochs", "0"], "epochs must be a positive integer"),
    (["csl", "--folds", "20"], "folds must be between 2 and 15"),
    (["csl", "--lr", "-1"], "lr must be positive"),
])
def test_csl_command_reports_bad_options(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv + ["--no-progress"])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err
