"""`rpfast pairs`: options, the run over every pair and seed, and its outputs.

Outputs in ``--out``: ``config.json`` (written first), ``pairs.csv`` (created with its header
before any pair runs, then one row per pair and seed, appended and flushed as each finishes, so
an interrupted run loses nothing and ``--resume`` continues it;
:mod:`~rpfast.experiments.pairs.rows`), with ``--save-embeddings``
``embeddings/<category>_<index>_seed<s>.npz``
(the D matrices ``differences`` and ``reliability``, to recompute T2 independently), and at the
end ``summary.json`` and ``scores.png`` (written whole; their presence marks a finished run).
"""
import csv
import json
import os
import shutil
import sys
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np
import torch
from tqdm.auto import tqdm

from rpfast._io import atomic_path, check_output_dir
from rpfast._options import option
from rpfast.datasets.pair_families import FAMILIES, family_pairs
from rpfast.datasets.pairs import GraphPair, read_pairs, write_pairs
from rpfast.experiments.shape import Experiment
from rpfast.experiments.pairs.models import MODELS, ORIENTATIONS, check_graph_sizes
from rpfast.experiments.pairs.batched import plan_stacks, run_stack
from rpfast.experiments.pairs.protocol import PairsSettings, run_pair, score, stacks
from rpfast.experiments.pairs.rows import COLUMNS, create_rows_file, read_rows
from rpfast.experiments.pairs.report import (changed_constants, describe_model, format_table, plot_scores, plot_seeds,
                                            seed_counts)
from rpfast.experiments.report import provenance, wall_seconds
from rpfast.experiments.devices import check_device, cuda_graphs_option, device_option, resolve_device
from rpfast.experiments.workers import default_jobs, run_in_workers


@dataclass
class PairsConfig:
    """The settings of ``rpfast pairs``; its options derive from these fields."""

    file: Optional[str] = option(None, "pair file: one pair per line, [category] graph6 graph6", positional=True,
                                 nargs="?")
    family: Optional[str] = option(None, "a built-in family instead of a file: " + ", ".join(FAMILIES),
                                   choices=FAMILIES)
    count: Optional[int] = option(None, "only the first COUNT pairs (with --family all: of every family)")
    model: str = option("oriented", "oriented (RP over random-start BFS/DFS views beside RP over marked roots, "
                                    "three up to 36 vertices (34 at degree 15), two up to 80 (75), one above: "
                                    "the best measured), "
                                    "rp-gin, kary, exact (with --ridge) or gin (the negative control)",
                        choices=MODELS)
    seeds: int = option(1, "seeds per pair (the published protocol uses 10); a pair counts as distinguished "
                           "only on every seed, as reliable only on every seed")
    epochs: int = option(20, "training steps per pair at most (the protocol's default)")
    patience: int = option(5, "stop training when the loss has not improved for this many steps (the protocol's default)")
    lr: float = option(1e-3, "Adam learning rate (the protocol's default is 1e-4)")
    k: int = option(32, "vertices f sees per view (oriented: the first K of the order; kary: subset size)")
    min_k: Optional[int] = option(None, "oriented: the shortest view; lengths are uniform in MIN_K..K (default: "
                                        "3/4 of K)")
    orientation: str = option("bfs", "the orders of the oriented model", choices=ORIENTATIONS)
    train_samples: Optional[int] = option(None, "relabelings per graph in a training step (default: 8 for "
                                                "oriented, 16 for kary, 1 for rp-gin, exact and gin)")
    eval_samples: int = option(256, "relabelings RP averages per embedding in eval mode")
    hidden: int = option(64, "width of f's hidden layers")
    layers: Optional[int] = option(None, "layers of f (default: 2 hidden MLP layers; 6 GIN layers for gin, rp-gin)")
    ridge: float = option(0.0, "add RIDGE * I to the covariance (a separate mode, for exactly invariant models)")
    out_dir: str = option("pairs_results", "output directory", flag="--out")
    export: Optional[str] = option(None, "write the pairs (of the file or --family, --count) to this pair file and "
                                         "stop: a file to share, edit or run later")
    force: bool = option(False, "replace an existing non-empty --out directory")
    strict: bool = option(False, "refuse a pair file with a category that has no published reference (a typo, "
                                 "most likely) instead of warning")
    resume: bool = option(False, "continue the run in --out (same options), skipping the pairs it has")
    save_embeddings: bool = option(False, "also write each pair's D matrices (embeddings/*.npz)")
    threads: Optional[int] = option(None, "torch/kernel threads in all, shared by the --jobs processes")
    jobs: Optional[int] = option(None, "pairs (with oriented: stacks of pairs and seeds trained as one model) run at "
                                       "once in worker processes (default: one per core, at most the number of pairs; "
                                       "1: all in this process)")
    device: str = device_option()
    cuda_graphs: bool = cuda_graphs_option(True)

    def settings(self) -> PairsSettings:
        names = {f.name for f in fields(PairsSettings)}
        return PairsSettings(**{k: v for k, v in asdict(self).items() if k in names})

    def validate(self) -> None:
        if (self.file is None) == (self.family is None):
            raise ValueError("name a pair file or a --family (one of them)")
        if self.seeds < 1:
            raise ValueError(f"seeds must be >= 1, got {self.seeds}")
        if self.count is not None and self.count < 1:
            raise ValueError(f"count must be >= 1, got {self.count}")
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"threads must be >= 1, got {self.threads}")
        if self.jobs is not None and self.jobs < 1:
            raise ValueError(f"jobs must be >= 1, got {self.jobs}")
        if self.resume and self.force:
            raise ValueError("--resume continues the run in --out and --force replaces it: choose one")
        check_device(self.device)
        self.settings().validate()


def load_pairs(config: PairsConfig) -> List[GraphPair]:
    if config.family is not None:
        return family_pairs(config.family, config.count)
    return read_pairs(config.file, strict=config.strict, warn=lambda line: print(line, file=sys.stderr))[:config.count]


def _identity(config: PairsConfig) -> Dict:
    """What a resumed run must share with the run it continues."""
    return {k: v for k, v in asdict(config).items()
            if k not in ("force", "resume", "threads", "jobs", "out_dir", "export", "strict")}


def _check_output(config: PairsConfig) -> None:
    """The streamed-rows output policy's check (the preamble's step 2), before any file is made:
    ``--export``'s pair file; ``--resume``'s run in ``--out`` (made with the same options); else
    a new ``--out`` directory (a non-empty one only with ``--force``)."""
    if config.export is not None:
        export = Path(config.export)
        if export.is_dir():
            raise IsADirectoryError(f"--export {config.export} is a directory; name a pair file")
        if not export.parent.is_dir():
            raise FileNotFoundError(f"the directory of --export {config.export} does not exist")
        if export.exists() and not config.force:
            raise FileExistsError(f"{config.export} exists: use --force to replace it")
        return
    out = Path(config.out_dir)
    if not config.resume:
        check_output_dir(out, config.force)
        return
    if not (out / "config.json").is_file():
        raise FileNotFoundError(f"--resume: {out} holds no rpfast pairs run (no config.json)")
    stored = json.loads((out / "config.json").read_text())
    if stored != _identity(config):
        differ = sorted(k for k in set(stored) | set(_identity(config)) if stored.get(k) != _identity(config).get(k))
        raise ValueError(f"--resume: the run in {out} used other options ({', '.join(differ)})")


def _open_output(config: PairsConfig) -> List[Dict]:
    """Create ``--out`` (its config and the rows file with its header), or reopen the one
    ``--resume`` continues; the rows it already has."""
    out = Path(config.out_dir)
    if config.resume:
        return read_rows(out / "pairs.csv")
    if out.is_dir() and config.force:
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)  # an existing empty directory is fine
    with atomic_path(out / "config.json") as tmp:
        tmp.write_text(json.dumps(_identity(config), indent=2))
    create_rows_file(out / "pairs.csv")
    return []


def _done_keys(rows: List[Dict], pairs: List[GraphPair], seeds: int, path: Path) -> set:
    """The (category, index, seed) of the rows a resumed run has; a ValueError for a row this
    run does not have or has twice (the file belongs to another pair list, or was edited)."""
    expected = {(p.category, p.index, s) for p in pairs for s in range(seeds)}
    done = set()
    for row in rows:
        key = (row["category"], row["index"], row["seed"])
        if key not in expected or key in done:
            what = "twice" if key in done else "but this run has no such pair and seed"
            raise ValueError(f"--resume: {path} has a row for {key[0]} pair {key[1]} seed {key[2]} {what}; move the "
                             "file away to run the pairs again")
        done.add(key)
    return done


def timed_pair(pair: GraphPair, seed: int, settings: PairsSettings, device: str = "cpu", cuda_graphs: bool = False,
               report=None) -> List[Dict]:
    """:func:`~rpfast.experiments.pairs.protocol.run_pair` and its seconds, as a list of one row
    (a worker's job)."""
    start = time.perf_counter()
    row = run_pair(pair, seed, settings, resolve_device(device), cuda_graphs=cuda_graphs)
    row["seconds"] = time.perf_counter() - start
    return [row]


def timed_stack(jobs: List, settings: PairsSettings, device: str = "cpu", report=None) -> List[Dict]:
    """:func:`~rpfast.experiments.pairs.batched.run_stack` on one stack of ``(pair, seed)`` jobs;
    each row gets the stack's seconds shared equally (a worker's job)."""
    start = time.perf_counter()
    rows = run_stack(jobs, settings, resolve_device(device))
    for row in rows:
        row["seconds"] = (time.perf_counter() - start) / len(rows)
    return rows


def main(config: PairsConfig, progress: bool = True) -> Dict:
    """Run the experiment (:class:`~rpfast.experiments.shape.Experiment` with the streamed-rows
    output policy: the preamble, :func:`run_pairs`, :func:`report`). The options, the output
    and the threads are checked and set once first."""
    return Experiment("rpfast pairs", run_pairs, report, check_output=_check_output,
                      in_process_group=False).main(config, progress)


def run_pairs(config: PairsConfig, progress: bool = True) -> Dict:
    """The protocol on every pair and seed (skipping those a resumed run has), each row streamed
    to ``pairs.csv`` as it finishes; with ``--export``, the pair file instead. Returns the rows
    (``{"exported": count}`` for an export)."""
    if config.threads:
        torch.set_num_threads(config.threads)
    pairs = load_pairs(config)
    if config.export is not None:
        write_pairs(pairs, config.export)
        print(f"wrote {len(pairs)} pairs to {config.export}")
        return {"exported": len(pairs)}
    settings = config.settings()
    slow = check_graph_sizes(config.model, [p.n for p in pairs])
    if slow:
        print(f"warning: {slow}", file=sys.stderr)
    rows = _open_output(config)
    out = Path(config.out_dir)
    done = _done_keys(rows, pairs, config.seeds, out / "pairs.csv")
    todo = [(p, s) for p in pairs for s in range(config.seeds) if (p.category, p.index, s) not in done]
    on_cpu = resolve_device(config.device).type == "cpu"  # a GPU runs the pairs one after another
    jobs = (min(len(todo), config.jobs or default_jobs()) or 1) if on_cpu else 1
    threads = config.threads or torch.get_num_threads()
    with (out / "pairs.csv").open("a", newline="") as fh, \
            tqdm(total=len(todo), desc="pairs", unit="pair", disable=not progress) as bar:
        writer = csv.DictWriter(fh, fieldnames=COLUMNS, extrasaction="ignore")

        def finished(_, done: List[Dict]) -> None:
            """Stream the rows of a call (and their D matrices) out as they arrive."""
            for row in done:
                if config.save_embeddings:
                    (out / "embeddings").mkdir(exist_ok=True)
                    name = f"{row['category']}_{row['index']}_seed{row['seed']}.npz"
                    with atomic_path(out / "embeddings" / name) as tmp, tmp.open("wb") as npz:
                        np.savez(npz, differences=row["differences"], reliability=row["reliability"])
                writer.writerow(row)
            fh.flush()
            os.fsync(fh.fileno())
            rows.extend(done)
            bar.set_postfix(t2=f"{done[-1]['t2']:.1f}", distinguished=sum(r["distinguished"] for r in rows))
            bar.update(len(done))

        if stacks(settings):  # many pairs and seeds trained as one model (batched.py)
            function = timed_stack
            calls = [(stack, settings, config.device) for stack in plan_stacks(todo, jobs)]
            jobs = min(jobs, len(calls)) or 1
        else:
            function = timed_pair
            calls = [(pair, seed, settings, config.device, config.cuda_graphs) for pair, seed in todo]
        if jobs == 1:
            for index, call in enumerate(calls):
                finished(index, function(*call))
        else:
            run_in_workers(function, calls, jobs, max(1, threads // jobs), bar, on_result=finished)
    place = {(p.category, p.index): i for i, p in enumerate(pairs)}
    rows.sort(key=lambda row: (place.get((row["category"], row["index"]), len(place)), row["seed"]))  # as listed
    return {"rows": rows}


def report(results: Dict, config: PairsConfig) -> None:
    """Score the rows; print the table beside the published scores; write the summary and the
    figure (each whole). Adds ``scores`` to ``results``. Nothing for an export."""
    if "exported" in results:
        return
    out = Path(config.out_dir)
    table = results["scores"] = score(results["rows"])
    changed = changed_constants(asdict(config))
    print(format_table(table, describe_model(asdict(config)), changed, config.seeds))
    per_pair = seed_counts(results["rows"])
    with atomic_path(out / "pair_seeds.csv") as tmp, tmp.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(per_pair[0]) if per_pair else ["category", "index"])
        writer.writeheader()
        writer.writerows(per_pair)
    with atomic_path(out / "summary.json") as tmp:
        tmp.write_text(json.dumps({"config": asdict(config), "model": describe_model(asdict(config)),
                                   "seeds": config.seeds, "changed_protocol_constants": changed, "scores": table,
                                   "provenance": provenance()}, indent=2, allow_nan=False))
    written = [out / "pairs.csv", out / "pair_seeds.csv", out / "summary.json", out / "scores.png"]
    with atomic_path(out / "scores.png") as tmp:
        plot_scores(table, config.model, tmp)
    if config.seeds > 1:
        with atomic_path(out / "seeds.png") as tmp:
            plot_seeds(per_pair, config.seeds, tmp)
        written.append(out / "seeds.png")
    print(f"finished in {wall_seconds():.0f} s; wrote {', '.join(map(str, written))}"
          + (f", {out / 'embeddings'}" if config.save_embeddings else ""))
