"""Tables and figures of `rpfast pairs`, beside the published RPC scores."""
import math
import statistics
from pathlib import Path
from typing import Dict, List

import numpy as np

#: Published BREC scores (out of 400; the last two on the reduced 340-pair file), issue 29.
PUBLISHED = {"Graphormer": 79, "OSAN": 148, "NGNN": 166, "DropGNN": 177, "KC-SetGNN": 211, "GNN-AK": 222,
             "SUN": 223, "PPGN": 233, "GSN": 254, "3-WL": 270, "KP-GNN": 275, "I2-GNN": 281, "N2-GNN": 287}


#: The published protocol's constants that rpfast's options may change (reported beside a score).
PROTOCOL = {"epochs": 20, "patience": 5, "lr": 1e-4}


def changed_constants(config: Dict) -> str:
    """``"epochs 100 (protocol 20), lr 0.001 (protocol 0.0001)"`` for the constants ``config``
    changes; empty when it keeps them all."""
    return ", ".join(f"{k} {config[k]:g} (protocol {v:g})" for k, v in PROTOCOL.items() if config[k] != v)


def describe_model(config: Dict) -> str:
    """The model and the settings that shape it, e.g. ``"oriented (bfs views of 0.75 k..32
    vertices from balanced starts, walk counts + MLP 2 x 64; rooted 16 x 4 over all root triples up
    to 36 vertices (34 at degree 15), pairs up to 80 (75), all roots above, 8 train / 256 eval
    relabelings)"``."""
    from rpfast.experiments.pairs.models import (DEFAULT_LAYERS, DEFAULT_TRAIN_SAMPLES, ROOT_BUDGET_DEGREE,
                                                ROOTED_HIDDEN, ROOTED_LAYERS, SHORTEST_VIEW, rooted_sizes)

    model = config["model"]
    layers = config.get("layers") or DEFAULT_LAYERS[model]
    train = config.get("train_samples") or DEFAULT_TRAIN_SAMPLES[model]
    shortest = config.get("min_k") or f"{SHORTEST_VIEW:g} k"
    out = config.get("output_dim", 16)
    parts = "walk counts" + (f" + MLP {layers} x {config['hidden']}" if out >= 4 else "")
    sparse, dense = rooted_sizes(ROOT_BUDGET_DEGREE), rooted_sizes(15)
    parts += (f"; rooted {ROOTED_LAYERS} x {ROOTED_HIDDEN} over all root triples up to {sparse[3]} vertices ({dense[3]} "
              f"at degree 15), pairs up to {sparse[2]} ({dense[2]}), all roots above" if out >= 8 else "")
    view = {"oriented": f"{config['orientation']} views of {shortest}..{config['k']} vertices from balanced starts, "
                        + parts,
            "kary": f"{config['k']}-subsets in random order, MLP {layers} x {config['hidden']}",
            "exact": f"all n! orders, MLP {layers} x {config['hidden']}, ridge {config['ridge']:g}",
            "rp-gin": f"GIN {layers} x {config['hidden']} on one-hot IDs",
            "gin": f"GIN {layers} x {config['hidden']}"}[model]
    samples = "" if model in ("gin", "exact") else f", {train} train / {config['eval_samples']} eval relabelings"
    return f"{model} ({view}{samples})"


def format_table(table: Dict[str, Dict[str, int]], model: str, changed: str = "", seeds: int = 1) -> str:
    """Per category and in total: pairs, distinguished (on every seed), unreliable, score, and
    with several seeds the pairs distinguished on some seed; then the protocol constants the run
    changed and the published totals for comparison."""
    several = seeds > 1
    header = f"{'category':<16}{'pairs':>7}{'distinguished':>15}{'unreliable':>12}{'score':>8}"
    header += f"{'on some seed':>14}" if several else ""
    title = f"rpfast {model}: RPC protocol" + (f", {seeds} seeds (distinguished: on every seed)" if several else "")
    lines = [title + (f"; changed: {changed}" if changed else ""), header, "-" * len(header)]
    for category, row in table.items():
        lines.append(f"{category:<16}{row['pairs']:>7}{row['distinguished']:>15}{row['unreliable']:>12}"
                     f"{row['score']:>8}" + (f"{row['any_seed']:>14}" if several else ""))
    lines.append("published scores (of 400): " + ", ".join(f"{k} {v}" for k, v in PUBLISHED.items()))
    return "\n".join(lines)


def plot_scores(table: Dict[str, Dict[str, int]], model: str, path: Path) -> None:
    """Left: per category, the pairs and the score; right: the published totals, with this run's
    beside them when it scored 400 pairs (BREC's file), else named in the title only."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    categories = [c for c in table if c != "total"]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    x = np.arange(len(categories))
    axes[0].bar(x - 0.2, [table[c]["pairs"] for c in categories], 0.4, label="pairs", color="lightgrey")
    axes[0].bar(x + 0.2, [table[c]["score"] for c in categories], 0.4, label=f"rpfast {model} score", color="C0")
    axes[0].set_xticks(x)
    axes[0].set_xticklabels(categories, rotation=30, ha="right")
    axes[0].set_title("Per category")
    axes[0].legend(fontsize=8)
    total = table.get("total", {"pairs": 0, "score": 0})
    comparable = total["pairs"] == 400  # BREC's file; another pair set is not on the same scale
    names = list(PUBLISHED) + ([f"rpfast {model}"] if comparable else [])
    values = list(PUBLISHED.values()) + ([total["score"]] if comparable else [])
    axes[1].barh(np.arange(len(names)), values, color=["C7"] * len(PUBLISHED) + ["C0"] * comparable)
    axes[1].set_yticks(np.arange(len(names)))
    axes[1].set_yticklabels(names, fontsize=8)
    axes[1].set_xlabel("score (of 400)")
    axes[1].set_title("Published RPC scores" + ("" if comparable else
                                                f" (this run: {total['score']} of {total['pairs']} pairs, "
                                                "not BREC's 400)"), fontsize=10)
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=120, format="png")
    finally:
        plt.close(fig)


def seed_counts(rows: List[Dict]) -> List[Dict]:
    """One entry per pair (by category, then index): its vertices, seeds run, seeds on which it
    was distinguished and reliable, and the median T2 over the seeds (NaN where undefined)."""
    by_pair: Dict = {}
    for row in rows:
        by_pair.setdefault((row["category"], int(row["index"])), []).append(row)
    out = []
    for (category, index), group in sorted(by_pair.items()):
        t2 = [float(r["t2"]) for r in group if not math.isnan(float(r["t2"]))]
        out.append({"category": category, "index": index, "n": int(group[0]["n"]), "seeds": len(group),
                    "distinguished_seeds": sum(bool(r["distinguished"]) for r in group),
                    "reliable_seeds": sum(bool(r["reliable"]) for r in group),
                    "median_t2": statistics.median(t2) if t2 else math.nan})
    return out


def plot_seeds(per_pair: List[Dict], seeds: int, path: Path) -> None:
    """Per category, the pairs by the number of seeds (0..``seeds``) that distinguished them, as
    stacked bars: a pair counts in the score only in the last band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    categories = sorted({p["category"] for p in per_pair})
    fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(categories) + 3), 4.5))
    colours = plt.get_cmap("viridis")(np.linspace(0.05, 0.95, seeds + 1))
    bottom = np.zeros(len(categories))
    for count in range(seeds + 1):
        heights = np.array([sum(p["category"] == c and p["distinguished_seeds"] == count for p in per_pair)
                            for c in categories], dtype=float)
        ax.bar(categories, heights, bottom=bottom, color=colours[count],
               label=f"{count} of {seeds}" + (" (scored)" if count == seeds else ""))
        bottom += heights
    ax.set_ylabel("pairs")
    ax.yaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    ax.set_title(f"Seeds on which each pair was distinguished ({seeds} seeds)")
    ax.legend(fontsize=8, title="distinguished on", title_fontsize=8, bbox_to_anchor=(1.01, 1), loc="upper left")
    plt.setp(ax.get_xticklabels(), rotation=30, ha="right")
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=120, format="png")
    finally:
        plt.close(fig)
