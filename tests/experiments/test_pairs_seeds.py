"""``rpfast pairs``' seed report (``--seeds S``) and the rooted part's budget of roots (issue 44)."""
import csv
import json

import pytest

from rpfast.cli import main
from rpfast.datasets.pair_families import family_pairs
from rpfast.experiments.pairs.protocol import PairsSettings, run_pair


def _rows(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_with_several_seeds_a_pair_counts_only_when_every_seed_distinguishes_it(tmp_path):
    from rpfast.experiments.pairs.protocol import score
    from rpfast.experiments.pairs.report import format_table, plot_seeds, seed_counts

    def row(index, seed, distinguished, reliable=True, t2=10.0):
        return {"category": "cfi", "index": index, "n": 18, "seed": seed, "distinguished": distinguished,
                "reliable": reliable, "t2": t2}
    rows = [row(0, 0, True), row(0, 1, True, t2=30.0), row(1, 0, True), row(1, 1, False, t2=float("nan")),
            row(2, 0, False), row(2, 1, False, reliable=False)]
    table = score(rows)
    assert table["cfi"] == {"pairs": 3, "distinguished": 1, "unreliable": 1, "score": 0, "any_seed": 2}
    assert seed_counts(rows) == [
        {"category": "cfi", "index": 0, "n": 18, "seeds": 2, "distinguished_seeds": 2, "reliable_seeds": 2,
         "median_t2": 20.0},
        {"category": "cfi", "index": 1, "n": 18, "seeds": 2, "distinguished_seeds": 1, "reliable_seeds": 2,
         "median_t2": 10.0},
        {"category": "cfi", "index": 2, "n": 18, "seeds": 2, "distinguished_seeds": 0, "reliable_seeds": 1,
         "median_t2": 10.0}]
    text = format_table(table, "oriented", seeds=2)
    assert "2 seeds (distinguished: on every seed)" in text and "on some seed" in text
    assert text.splitlines()[3].split() == ["cfi", "3", "1", "1", "0", "2"]
    assert "on some seed" not in format_table(table, "oriented")
    plot_seeds(seed_counts(rows), 2, tmp_path / "seeds.png")
    assert (tmp_path / "seeds.png").stat().st_size > 10_000


def test_the_command_reports_seeds_per_pair(tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["pairs", "--family", "regular", "--count", "2", "--model", "gin", "--epochs", "2", "--seeds", "2",
                 "--out", str(out), "--no-progress", "--jobs", "1"]) == 0
    assert "on some seed" in capsys.readouterr().out
    per_pair = _rows(out / "pair_seeds.csv")
    assert [(r["index"], r["seeds"], r["distinguished_seeds"]) for r in per_pair] == [("0", "2", "0"), ("1", "2", "0")]
    assert json.loads((out / "summary.json").read_text())["seeds"] == 2
    assert (out / "seeds.png").stat().st_size > 10_000


def test_the_rooted_part_marks_as_many_roots_as_its_work_budget_affords():
    from rpfast.experiments.pairs.models import ROOT_WORK_BUDGET, rooted_roots, rooted_sizes, rooted_work

    assert [rooted_roots(n, 3) for n in (4, 36, 37, 80, 82, 83, 500)] == [3, 3, 2, 2, 2, 1, 1]
    # a denser graph's rows cost more: the 36-vertex strongly regular graphs of degree 15 get two
    assert rooted_roots(36, 15) == 2 and rooted_roots(28, 12) == 3 and rooted_roots(32, 10) == 3
    assert rooted_sizes(15) == {3: 34, 2: 75}
    assert rooted_work(36, 3, 5) <= ROOT_WORK_BUDGET < rooted_work(36, 3, 15)  # C(n, 3) * n * (degree + c)
    assert rooted_work(80, 2, 5) <= ROOT_WORK_BUDGET < rooted_work(81, 2, 5)
    with pytest.raises(ValueError, match="positive number of vertices"):
        rooted_roots(0, 0)
    with pytest.raises(ValueError, match="largest degree, an integer from 0 to n - 1 = 9"):
        rooted_roots(10, 10)
    with pytest.raises(ValueError, match="roots must be an integer of at least 1"):
        rooted_work(10, 0, 3)
    with pytest.raises(ValueError, match="largest degree at most n - 1, got 10"):
        rooted_work(10, 2, 10)
    assert rooted_work(2, 3, 1) == 0 and rooted_roots(2, 1) == 3  # no triple of 2 vertices: all of them


def test_three_roots_separate_the_incidence_graphs_of_the_biplanes_of_order_4():
    """Distance-regular with one intersection array; two marked roots leave T2 near 0.2."""
    pair = family_pairs("dr")[0]
    row = run_pair(pair, 0, PairsSettings(epochs=100, patience=100, lr=1e-3))  # the command's defaults
    assert row["distinguished"] and row["reliable"] and row["t2"] > 1e4
