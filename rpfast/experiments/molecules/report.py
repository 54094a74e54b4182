"""Tables, files and figures of `rpfast molecules`."""
import csv
import json
from pathlib import Path
from typing import Dict, List

import numpy as np

from rpfast._io import atomic_directory
from rpfast.experiments.molecules.checkpoints import write_checkpoint
from rpfast.experiments.molecules.paper import extra_metrics, paper_cell, paper_scores
from rpfast.experiments.molecules.tasks import mean_defined, mean_sd
from rpfast.experiments.report import provenance

COLUMNS = ("model", "metric", "test_score", "test_sd", "valid_score", "seconds_per_epoch", "splits")


def format_table(results: Dict, title: str) -> str:
    """The paper's Table 2 layout: model, the selected test metric's mean (sd over splits; n/a
    with one split), the validation metric, s/epoch, splits counted; then, for MUV, its
    PRC-AUC (:func:`~rpfast.experiments.molecules.paper.extra_metrics`), and, for a data set of
    the paper with ROC-AUC selected, Table 2's number for the model ("-" where it has none)."""
    metric, tasks, molecules = results["metric"], results.get("tasks", ()), results.get("molecules")
    extras = extra_metrics(tasks, metric, molecules)
    paper = paper_scores(tasks, metric, molecules)
    header = (f"{'model':<22}{'test ' + metric:>14}{'sd':>8}" + "".join(f"{'test ' + m:>14}{'sd':>8}" for m in extras)
              + f"{'valid ' + metric:>15}{'s/epoch':>9}{'splits':>8}" + (f"{'paper':>8}" if paper else ""))
    lines = [title, header, "-" * len(header)]
    for row in results["summary"]:
        cells = "".join(_cell(row["test_metrics"][m]["mean"], 14) + _cell(row["test_metrics"][m]["sd"], 8)
                        for m in extras)
        lines.append(f"{row['model']:<22}{_cell(row['test_score'], 14)}{_cell(row['test_sd'], 8)}{cells}"
                     f"{_cell(row['valid_score'], 15)}{row['seconds_per_epoch']:>9.2f}{row['splits']:>8}"
                     + (f"{paper_cell(paper, row):>8}" if paper else ""))
    return "\n".join(lines)


def _cell(value, width: int) -> str:
    """A metric right-aligned with 3 decimals; 'n/a' where it is undefined (None)."""
    return f"{'n/a':>{width}}" if value is None else f"{value:>{width}.3f}"


def _number(value) -> float:
    """None (an undefined metric) as NaN, which matplotlib leaves out."""
    return np.nan if value is None else value


def run_directory(run: Dict) -> str:
    """A run's directory under ``runs/``: ``<model>[-k<k>]/split<s>``."""
    return f"runs/{run['model']}{'' if run['k'] is None else '-k' + str(run['k'])}/split{run['split']}"


def write_outputs(results: Dict, out_dir: Path, force: bool = False) -> List[Path]:
    """The run's files: summary.csv, results.json (with
    :func:`~rpfast.experiments.report.provenance`), splits.json, task_scores.png,
    learning_curves.png, (regression) test_parity.png, (with k-ary runs at several k)
    kary_sweep.png, and per model and split
    ``runs/<model>/split<s>/best.pt`` (the checkpoint ``rpfast molecules predict`` reads) and
    ``test_predictions.csv``.

    The files are written into a temporary directory beside ``out_dir`` that replaces it when
    all of them are complete (:func:`atomic_directory`: a non-empty ``out_dir`` only with
    ``force``), so ``out_dir`` never holds a mix of two runs. An undefined metric is null in
    results.json (and empty in summary.csv), never NaN. Returns the top-level paths.
    """
    out_dir = Path(out_dir)
    names = ["summary.csv", "results.json", "splits.json", "task_scores.png", "learning_curves.png"]
    if results.get("task_type") == "regression":
        names.append("test_parity.png")
    ks = sorted({r["k"] for r in results["summary"] if r["name"] == "kary"})
    if len(ks) > 1:
        names.append("kary_sweep.png")
    files = results["files"]
    with atomic_directory(out_dir, force) as tmp:
        with (tmp / "summary.csv").open("w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=COLUMNS, extrasaction="ignore")
            writer.writeheader()
            writer.writerows(results["summary"])
        shown = {**{key: value for key, value in results.items() if key != "files"}, "provenance": provenance()}
        (tmp / "results.json").write_text(json.dumps(shown, indent=2, allow_nan=False))
        (tmp / "splits.json").write_text(json.dumps(results["splits"], allow_nan=False))
        for run, checkpoint, predicted in zip(results["runs"], files["checkpoints"], files["predictions"]):
            where = tmp / run_directory(run)
            where.mkdir(parents=True)
            write_checkpoint(where / "best.pt", checkpoint)
            write_predictions(where / "test_predictions.csv", results["tasks"], predicted["test"],
                              predicted["values"], files)
        _plot_tasks(results, tmp / "task_scores.png")
        _plot_learning_curves(results, tmp / "learning_curves.png")
        if "test_parity.png" in names:
            _plot_parity(results, tmp / "test_parity.png")
        if len(ks) > 1:
            _plot_sweep(results, tmp / "kary_sweep.png")
    return [out_dir / name for name in names] + [out_dir / "runs"]


def _label_text(value: float) -> str:
    """A label as the data file would show it (float32's shortest form); empty when missing."""
    return "" if np.isnan(value) else str(np.float32(value))


def write_predictions(path: Path, tasks: List[str], molecules, values: np.ndarray, files: Dict) -> None:
    """``test_predictions.csv``: per test molecule its data row, SMILES, and per task the label
    (empty where missing) and the prediction (``<task>_pred``: a probability or in label units,
    every digit of the float64, so ``rpfast molecules predict`` can be compared exactly)."""
    labels, rows, smiles = files["labels"], files["rows"], files["smiles"]
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["row", "smiles"] + [name for task in tasks for name in (task, f"{task}_pred")])
        for at, i in enumerate(molecules.tolist()):
            cells = [cell for t in range(len(tasks)) for cell in (_label_text(labels[i, t]), repr(float(values[at, t])))]
            writer.writerow([rows[i], smiles[i]] + cells)


def _figure(ncols: int, width: float):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, ncols, figsize=(width, 4.5))
    return plt, fig, np.atleast_1d(axes)


MAX_TASK_BARS = 40


def _bounded(metric: str) -> bool:
    """Whether ``metric`` lies in [0, 1] (the classification metrics)."""
    return metric in ("roc-auc", "prc-auc", "accuracy")


def _plot_tasks(results: Dict, path: Path) -> None:
    """The selected test metric per task and model (mean over splits; ROC-AUC with the chance
    line): bars per task, or, above :data:`MAX_TASK_BARS` tasks, each model's per-task scores
    sorted (a quantile curve)."""
    tasks, metric = results["tasks"], results["metric"]
    many = len(tasks) > MAX_TASK_BARS
    plt, fig, (ax,) = _figure(1, 10.0 if many else max(8.0, 0.6 * len(tasks) + 3))
    rows = results["summary"]
    width = 0.8 / max(len(rows), 1)
    for i, row in enumerate(rows):
        runs = [r for r in results["runs"] if (r["model"], r["k"]) == (row["name"], row["k"])]
        means = [np.mean([r["task_scores"][t] for r in runs if r["task_scores"][t] is not None] or [np.nan])
                 for t in range(len(tasks))]
        if many:
            ax.plot(np.sort(np.array(means)[~np.isnan(means)]), label=row["model"], color=f"C{i % 10}")
        else:
            ax.bar(np.arange(len(tasks)) + (i - (len(rows) - 1) / 2) * width, means, width, label=row["model"],
                   color=f"C{i % 10}")
    if metric == "roc-auc":
        ax.axhline(0.5, color="grey", linestyle="--", linewidth=1, label="chance")
    if many:
        ax.set_xlabel(f"task, sorted by {metric} ({len(tasks)} tasks)")
    else:
        ax.set_xticks(np.arange(len(tasks)))
        ax.set_xticklabels(tasks, rotation=45, ha="right", fontsize=8)
    ax.set_ylabel(f"test {metric}")
    if _bounded(metric):
        ax.set_ylim(0.0, 1.0)
    ax.set_title(f"Test {metric} per task")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    _save(plt, fig, path)


def _plot_learning_curves(results: Dict, path: Path) -> None:
    """Per run, the mean training loss (left) and the validation metric (right) per epoch; one
    colour per model, one line style per split."""
    metric = results["metric"]
    plt, fig, axes = _figure(2, 11.0)
    models = list(dict.fromkeys((r["model"], r["k"]) for r in results["runs"]))
    styles = ("-", "--", ":", "-.")
    for run in results["runs"]:
        colour = f"C{models.index((run['model'], run['k'])) % 10}"
        label = (run["model"] + ("" if run["k"] is None else f" (k={run['k']})")) if run["split"] == 0 else None
        style = styles[run["split"] % len(styles)]
        epochs = np.arange(1, len(run["history"]["train_loss"]) + 1)
        axes[0].plot(epochs, [_number(v) for v in run["history"]["train_loss"]], style, color=colour, label=label)
        axes[1].plot(epochs, [_number(v) for v in run["history"]["valid_score"]], style, color=colour, label=label)
        axes[1].plot([run["best_epoch"] + 1], [_number(run["valid_score"])], "o", color=colour)
    axes[0].set_ylabel("training loss")
    axes[0].set_title("Training loss")
    axes[1].set_ylabel(f"validation {metric}")
    axes[1].set_title(f"Validation {metric} (dot: the epoch kept)")
    for ax in axes:
        ax.set_xlabel("epoch")
    axes[1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    _save(plt, fig, path)


MAX_PARITY_TASKS = 10


def _plot_parity(results: Dict, path: Path) -> None:
    """Regression: predicted against true test labels, one panel per model (every split's test
    molecules; one colour per task, the first :data:`MAX_PARITY_TASKS`), with the identity line
    and the model's mean test RMSE."""
    files, tasks = results["files"], results["tasks"][:MAX_PARITY_TASKS]
    labels = files["labels"]
    rows = results["summary"]
    plt, fig, axes = _figure(len(rows), 4.2 * len(rows) + 1.5)
    for ax, row in zip(axes, rows):
        low, high = np.inf, -np.inf
        for run, predicted in zip(results["runs"], files["predictions"]):
            if (run["model"], run["k"]) != (row["name"], row["k"]):
                continue
            truth = labels[predicted["test"].numpy()]
            for t, task in enumerate(tasks):
                known = ~np.isnan(truth[:, t])
                x, y = truth[known, t], predicted["values"][known, t]
                ax.scatter(x, y, s=6, alpha=0.5, color=f"C{t}", label=task if run["split"] == 0 else None)
                if len(x):
                    low, high = min(low, x.min(), y.min()), max(high, x.max(), y.max())
        if np.isfinite(low):
            ax.plot([low, high], [low, high], color="grey", linestyle="--", linewidth=1)
        rmse = row["test_score"] if row["metric"] == "rmse" else None
        ax.set_title(row["model"] + ("" if rmse is None else f" (test RMSE {rmse:.3f})"), fontsize=10)
        ax.set_xlabel("true label")
        ax.set_ylabel("predicted")
    if len(tasks) > 1:
        axes[-1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    _save(plt, fig, path)


def _sweep_points(results: Dict) -> tuple:
    """The k-ary figure's points: ``(splits, kary, full)`` where ``splits`` are the splits every
    k-ary run and Duvenaud ran on (``--sweep-splits`` may leave the sweep on fewer than the
    table's), ``kary`` is ``[(k, mean test metric, sd or None, mean s/epoch)]`` over them by k,
    and ``full`` Duvenaud's ``(mean test metric, mean s/epoch)`` there, or None without it."""
    runs = [r for r in results["runs"] if r["model"] in ("kary", "duvenaud")]
    by_key: Dict[tuple, Dict[int, Dict]] = {}
    for run in runs:
        by_key.setdefault((run["model"], run["k"]), {})[run.get("split", 0)] = run
    shared = set.intersection(*(set(v) for v in by_key.values())) if by_key else set()
    splits = sorted(shared)

    kary = []
    for (_, k), group in sorted((item for item in by_key.items() if item[0][0] == "kary"), key=lambda item: item[0][1]):
        score, sd, _ = mean_sd([group[s]["test_score"] for s in splits])
        kary.append((k, score, sd, mean_defined([group[s]["seconds_per_epoch"] for s in splits])))
    full = next((g for (model, _), g in by_key.items() if model == "duvenaud"), None)
    if full is not None:
        full = (mean_defined([full[s]["test_score"] for s in splits]),
                mean_defined([full[s]["seconds_per_epoch"] for s in splits]))
    return splits, kary, full


def _plot_sweep(results: Dict, path: Path) -> None:
    """The paper's k-ary figure: the test metric against k (left) and training speed-up over the
    full graph model, Duvenaud's s/epoch over k-ary's (right), on the splits every k ran on."""
    metric = results["metric"]
    splits, kary, full = _sweep_points(results)
    plt, fig, axes = _figure(2, 10.0)
    ks = [k for k, *_ in kary]
    axes[0].errorbar(ks, [_number(m) for _, m, _, _ in kary], yerr=[_number(d) for _, _, d, _ in kary],
                     marker="o", capsize=3, label="k-ary Duvenaud")
    if full is not None:
        if full[0] is not None:
            axes[0].axhline(full[0], color="C1", linestyle="--", label="Duvenaud (full graph)")
        axes[1].plot(ks, [full[1] / seconds for _, _, _, seconds in kary], marker="o")
        axes[1].axhline(1.0, color="grey", linestyle="--", linewidth=1)
    where = f"split {splits[0] + 1}" if len(splits) == 1 else f"mean of {len(splits)} splits"
    axes[0].set_xlabel("k")
    axes[0].set_ylabel(f"test {metric}")
    axes[0].set_title(f"Accuracy against k ({where})")
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
