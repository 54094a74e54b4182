"""Tables, files and figures of `rpfast molecules`."""
import csv
import json
from pathlib import Path
from typing import Dict, List

import numpy as np

from rpfast._io import atomic_directory

COLUMNS = ("model", "test_auc", "test_sd", "valid_auc", "seconds_per_epoch", "splits")


def format_table(results: Dict, title: str) -> str:
    """The paper's Table 2 layout: model, test ROC-AUC mean (sd), validation AUC, s/epoch."""
    header = f"{'model':<22}{'test AUC':>10}{'sd':>8}{'valid AUC':>11}{'s/epoch':>9}{'splits':>8}"
    lines = [title, header, "-" * len(header)]
    for row in results["summary"]:
        lines.append(f"{row['model']:<22}{_cell(row['test_auc'], 10)}{_cell(row['test_sd'], 8)}"
                     f"{_cell(row['valid_auc'], 11)}{row['seconds_per_epoch']:>9.2f}{row['splits']:>8}")
    return "\n".join(lines)


def _cell(value, width: int) -> str:
    """A metric right-aligned with 3 decimals; 'n/a' where it is undefined (None)."""
    return f"{'n/a':>{width}}" if value is None else f"{value:>{width}.3f}"


def _number(value) -> float:
    """None (an undefined metric) as NaN, which matplotlib leaves out."""
    return np.nan if value is None else value


def write_outputs(results: Dict, out_dir: Path, force: bool = False) -> List[Path]:
    """summary.csv, results.json, task_auc.png and (with k-ary runs at several k) kary_sweep.png.

    The files are written into a temporary directory beside ``out_dir`` that replaces it when
    all of them are complete (:func:`atomic_directory`: a non-empty ``out_dir`` only with
    ``force``), so ``out_dir`` never holds a mix of two runs. An undefined metric is null in
    results.json (and empty in summary.csv), never NaN.
    """
    out_dir = Path(out_dir)
    names = ["summary.csv", "results.json", "task_auc.png"]
    ks = sorted({r["k"] for r in results["summary"] if r["name"] == "kary"})
    if len(ks) > 1:
        names.append("kary_sweep.png")
    with atomic_directory(out_dir, force) as tmp:
        with (tmp / names[0]).open("w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=COLUMNS, extrasaction="ignore")
            writer.writeheader()
            writer.writerows(results["summary"])
        (tmp / names[1]).write_text(json.dumps(results, indent=2, allow_nan=False))
        _plot_tasks(results, tmp / names[2])
        if len(ks) > 1:
            _plot_sweep(results, tmp / names[3])
    return [out_dir / name for name in names]


def _figure(ncols: int, width: float):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, ncols, figsize=(width, 4.5))
    return plt, fig, np.atleast_1d(axes)


MAX_TASK_BARS = 40


def _plot_tasks(results: Dict, path: Path) -> None:
    """Test ROC-AUC per task and model (mean over splits), with the chance line: bars per task,
    or, above :data:`MAX_TASK_BARS` tasks, each model's per-task AUCs sorted (a quantile curve)."""
    tasks = results["tasks"]
    many = len(tasks) > MAX_TASK_BARS
    plt, fig, (ax,) = _figure(1, 10.0 if many else max(8.0, 0.6 * len(tasks) + 3))
    rows = results["summary"]
    width = 0.8 / max(len(rows), 1)
    for i, row in enumerate(rows):
        runs = [r for r in results["runs"] if (r["model"], r["k"]) == (row["name"], row["k"])]
        means = [np.mean([r["task_aucs"][t] for r in runs if r["task_aucs"][t] is not None] or [np.nan])
                 for t in range(len(tasks))]
        if many:
            ax.plot(np.sort(np.array(means)[~np.isnan(means)]), label=row["model"], color=f"C{i % 10}")
        else:
            ax.bar(np.arange(len(tasks)) + (i - (len(rows) - 1) / 2) * width, means, width, label=row["model"],
                   color=f"C{i % 10}")
    ax.axhline(0.5, color="grey", linestyle="--", linewidth=1, label="chance")
    if many:
        ax.set_xlabel(f"task, sorted by ROC-AUC ({len(tasks)} tasks)")
    else:
        ax.set_xticks(np.arange(len(tasks)))
        ax.set_xticklabels(tasks, rotation=45, ha="right", fontsize=8)
    ax.set_ylabel("test ROC-AUC")
    ax.set_ylim(0.0, 1.0)
    ax.set_title("Test ROC-AUC per task")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    _save(plt, fig, path)


def _plot_sweep(results: Dict, path: Path) -> None:
    """The paper's k-ary figure: test AUC against k (left) and training speed-up over the full
    graph model, Duvenaud's s/epoch over k-ary's (right)."""
    rows = sorted((r for r in results["summary"] if r["name"] == "kary"), key=lambda r: r["k"])
    full = next((r for r in results["summary"] if r["name"] == "duvenaud"), None)
    plt, fig, axes = _figure(2, 10.0)
    ks = [r["k"] for r in rows]
    axes[0].errorbar(ks, [_number(r["test_auc"]) for r in rows], yerr=[_number(r["test_sd"]) for r in rows],
                     marker="o", capsize=3, label="k-ary Duvenaud")
    if full is not None:
        if full["test_auc"] is not None:
            axes[0].axhline(full["test_auc"], color="C1", linestyle="--", label="Duvenaud (full graph)")
        axes[1].plot(ks, [full["seconds_per_epoch"] / r["seconds_per_epoch"] for r in rows], marker="o")
        axes[1].axhline(1.0, color="grey", linestyle="--", linewidth=1)
    axes[0].set_xlabel("k")
    axes[0].set_ylabel("test ROC-AUC")
    axes[0].set_title("Accuracy against k")
    axes[0].legend(fontsize=8)
    axes[1].set_xlabel("k")
    axes[1].set_ylabel("training speed-up over Duvenaud")
    axes[1].set_title("Training time per epoch: Duvenaud / k-ary")
    _save(plt, fig, path)


def _save(plt, fig, path: Path) -> None:
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=120, format="png")
    finally:
        plt.close(fig)
