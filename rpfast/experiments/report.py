"""Summaries, tables, files and figures for cross-validated experiments."""
import csv
import json
import os
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

import numpy as np

from rpfast._io import atomic_directory

STATS = ("mean", "median", "max", "min", "sd")

# The fallback start of this process where /proc cannot tell: when this module was imported
# (a command imports it before it parses its options).
_IMPORTED = time.monotonic()


def provenance() -> Dict:
    """Where and with what a run was made, for its results.json or summary.json: the rpfast and
    torch versions, the machine's cores, the torch threads, the command's wall seconds so far and
    the UTC date (docs/experiments/ quotes runs by these files)."""
    import datetime

    import torch

    from rpfast import __version__

    return {"rpfast": __version__, "torch": torch.__version__, "cores": os.cpu_count(),
            "threads": torch.get_num_threads(), "wall_seconds": round(wall_seconds(), 1),
            "date": datetime.datetime.now(datetime.timezone.utc).date().isoformat()}


def wall_seconds() -> float:
    """Seconds since this process started: the whole wall time of a command, its interpreter
    start-up, imports and ``--nproc`` process start-up included.

    On Linux the start comes from the kernel (``/proc/self/stat``'s start time against
    ``/proc/uptime``); elsewhere, or if those cannot be read, it is the time this module was
    imported, which is never later than a command's own start."""
    since_import = time.monotonic() - _IMPORTED
    try:
        with open("/proc/self/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
        with open("/proc/uptime") as fh:
            uptime = float(fh.read().split()[0])
        started = int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22: start time in clock ticks since boot
    except (OSError, IndexError, ValueError, AttributeError):
        return since_import
    seconds = uptime - started
    return seconds if seconds >= since_import else since_import  # never less than the fallback


def summarise(runs: List[Dict], models: Sequence[str]) -> List[Dict]:
    """Per model: mean, median, max, min and sample sd of the runs' accuracy (%); the sd is None
    (n/a in the table, empty in the CSV, null in JSON) for a model with a single run."""
    rows = []
    for model in models:
        values = np.array([r["accuracy"] for r in runs if r["model"] == model], dtype=float)
        if values.size == 0:
            continue
        rows.append({
            "model": model,
            "mean": float(values.mean()),
            "median": float(np.median(values)),
            "max": float(values.max()),
            "min": float(values.min()),
            "sd": float(values.std(ddof=1)) if values.size > 1 else None,
            "runs": int(values.size),
        })
    return rows


def format_table(summary: List[Dict], title: str) -> str:
    """The paper's Table 1 layout: model, mean, median, max, min, sd (``n/a`` where a statistic is
    None: the sd of a single run)."""
    header = f"{'model':<10}" + "".join(f"{s:>9}" for s in STATS) + f"{'runs':>7}"
    lines = [title, header, "-" * len(header)]
    for row in summary:
        cells = "".join(f"{'n/a':>9}" if row[s] is None else f"{row[s]:>9.1f}" for s in STATS)
        lines.append(f"{row['model']:<10}" + cells + f"{row['runs']:>7}")
    return "\n".join(lines)


def write_outputs(results: Dict, out_dir: Path, class_names: Sequence[str], force: bool = False) -> List[Path]:
    """Write summary.csv, results.json (the settings, the table, every run and
    :func:`provenance`) and a figure (per-fold accuracy, embedding projections).

    The files are written into a temporary directory beside ``out_dir`` that replaces it when
    all of them are complete (:func:`atomic_directory`: a non-empty ``out_dir`` only with
    ``force``), so ``out_dir`` never holds a mix of two runs. results.json holds no NaN.
    """
    out_dir = Path(out_dir)
    names = ["summary.csv", "results.json", "csl.png"]
    with atomic_directory(out_dir, force) as tmp:
        with (tmp / "summary.csv").open("w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=["model", *STATS, "runs"])
            writer.writeheader()
            writer.writerows(results["summary"])
        payload = {**{k: results[k] for k in ("config", "summary", "runs", "seconds")}, "provenance": provenance()}
        (tmp / "results.json").write_text(json.dumps(payload, indent=2, allow_nan=False))
        plot(results, tmp / "csl.png", class_names, fmt="png")
    return [out_dir / name for name in names]


def plot(results: Dict, path: Path, class_names: Sequence[str], fmt: Optional[str] = None) -> None:
    """Left: validation accuracy per fold and model. Right: PCA of graph embeddings by class.

    ``fmt`` is the image format (default: from the file name's extension).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from sklearn.decomposition import PCA

    models = [row["model"] for row in results["summary"]]
    embeddings = results["embeddings"]
    fig, axes = plt.subplots(1, 1 + len(embeddings), figsize=(5 * (1 + len(embeddings)), 4.5))
    axes = np.atleast_1d(axes)
    ax = axes[0]
    folds = sorted({r["fold"] for r in results["runs"]})
    width = 0.8 / max(len(models), 1)
    for k, model in enumerate(models):
        for fold in folds:
            accs = [r["accuracy"] for r in results["runs"] if r["model"] == model and r["fold"] == fold]
            x = fold + (k - (len(models) - 1) / 2) * width
            ax.bar(x, np.mean(accs), width, color=f"C{k}", label=model if fold == folds[0] else None)
            ax.scatter([x] * len(accs), accs, color="black", s=8, zorder=3)
    chance = 100 / len(class_names)
    ax.axhline(chance, color="grey", linestyle="--", linewidth=1, label=f"chance ({chance:.0f}%)")
    ax.set_xticks(folds)
    ax.set_xlabel("fold")
    ax.set_ylabel("validation accuracy (%)")
    ax.set_ylim(0, 105)
    ax.set_title("Validation accuracy per fold")
    ax.legend(loc="upper left", fontsize=8)
    labels = results["labels"]
    for ax, (model, emb) in zip(axes[1:], embeddings.items()):
        # Embeddings equal up to float rounding (plain GIN on CSL) have no direction to project.
        scale = np.abs(emb).max() if emb.size else 0.0
        distinct = emb.size and emb.std(axis=0).max() > 1e-5 * (1.0 + scale)
        points = PCA(2).fit_transform(emb) if distinct else np.zeros((len(emb), 2))
        for c, name in enumerate(class_names):
            mask = labels == c
            ax.scatter(points[mask, 0], points[mask, 1], s=14, color=plt.cm.tab10(c % 10), label=name)
        ax.set_title(f"{model}: embeddings of all 150 graphs (PCA)" if distinct
                     else f"{model}: all graph embeddings identical")
        ax.set_xlabel("PC 1")
        ax.set_ylabel("PC 2")
    axes[-1].legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8, title="class")
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=120, format=fmt)
    finally:
        plt.close(fig)
