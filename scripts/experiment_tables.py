"""Write the result tables of docs/experiments/*.md from the runs' own output files.

A table sits in a page between ``<!-- table: NAME -->`` and ``<!-- end table -->``. NAME names a
file in docs/experiments/results/, the output file of one run copied as the command wrote it:
``rpfast csl``'s or ``rpfast molecules``' results.json, or ``rpfast pairs``' summary.json. The
table's kind follows from the file, and a line under it says how the run was made (its
settings, seconds, rpfast and torch versions, cores, date), so every number on those pages comes
from a run's file, never typed by hand.

    python scripts/experiment_tables.py           # rewrite the tables
    python scripts/experiment_tables.py --check   # exit 1 if a page is not what its files give

tests/project/test_docs.py runs the check.
"""
import argparse
import json
import re
import sys
from pathlib import Path
from typing import Dict, List

from rpfast.experiments.molecules.paper import extra_metrics, paper_cell, paper_scores

ROOT = Path(__file__).resolve().parent.parent
PAGES = ROOT / "docs" / "experiments"
RESULTS = PAGES / "results"
TABLE = re.compile(r"(<!-- table: (?P<name>[\w.-]+) -->\n)(?P<body>.*?)(<!-- end table -->)", re.S)

# The paper's Table 1: RP-GIN on CSL, mean validation accuracy (%).
PAPER_CSL = {"RP-GIN": 37.6}


def _number(value, digits: int) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _made(record: Dict, what: str) -> str:
    """The line under a table: what was run, and where."""
    made = record.get("provenance", {})
    where = (f"rpfast {made['rpfast']}, torch {made['torch']}, {made['cores']} cores, {made['threads']} threads, "
             f"{made['date']}; {made['wall_seconds']:.0f} s wall") if made else "provenance not recorded"
    return f"*{what} ({where}).*"


def csl_table(record: Dict) -> List[str]:
    config = record["config"]
    lines = ["| model | mean | median | max | min | sd | runs | paper (Table 1) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for row in record["summary"]:
        paper = PAPER_CSL.get(row["model"])
        lines.append(f"| {row['model']} | " + " | ".join(_number(row[k], 1) for k in ("mean", "median", "max", "min",
                                                                                          "sd"))
                     + f" | {row['runs']} | {'-' if paper is None else paper} |")
    lines.append("")
    seeds = f"{config['seeds']} initialisation" + ("s" if config["seeds"] != 1 else "")
    lines.append(_made(record, f"Validation accuracy (%) of `rpfast csl`: {config['folds']} folds x {seeds}, "
                               f"{config['epochs']} epochs, batches of "
                               f"{config['batch_size'] or 'all'}; {record['seconds']:.0f} s of training"))
    return lines


def molecules_table(record: Dict) -> List[str]:
    config, metric = record["config"], record["metric"]
    data = "Tox21" if config["data"] == "tox21" else Path(config["data"]).name
    paper = paper_scores(record["tasks"], metric, record["molecules"])
    extras = extra_metrics(record["tasks"], metric, record["molecules"])
    lines = [f"| model | test {metric} (sd) |" + "".join(f" test {m} (sd) |" for m in extras)
             + " validation | s / epoch | splits |" + (" paper (Table 2) |" * bool(paper)),
             "|---|---:|" + "---:|" * len(extras) + "---:|---:|---:|" + ("---:|" * bool(paper))]
    for row in record["summary"]:
        def shown(mean, sd):
            return _number(mean, 3) + ("" if sd is None else f" ({sd:.3f})")

        cells = [row["model"], shown(row["test_score"], row["test_sd"])]
        cells += [shown(row["test_metrics"][m]["mean"], row["test_metrics"][m]["sd"]) for m in extras]
        cells += [_number(row["valid_score"], 3), _number(row["seconds_per_epoch"], 2), str(row["splits"])]
        if paper:
            cells.append(paper_cell(paper, row))
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append(_made(record, f"`rpfast molecules` on {data} ({record['molecules']:,} molecules, "
                               f"{record['task_type']}): {len(record['splits']['splits'])} {config['split']} "
                               f"split(s), {record['epochs']} epochs, batches of {config['batch_size']}, "
                               f"{config['eval_samples']} eval relabelings{_validation(config)}"
                               f"{_workers(config, len(record['runs']))}; {record['seconds']:.0f} s"))
    return lines


def _workers(config: Dict, runs: int) -> str:
    """How the runs shared the threads when they trained side by side (``--jobs``)."""
    jobs, threads = config.get("jobs"), config.get("threads") or 1
    if jobs is None or config.get("nproc", 1) > 1:
        return ""
    workers = max(1, min(runs, jobs or threads))
    return "" if workers == 1 else f", {workers} runs at a time in worker processes of {max(1, threads // workers)} thread(s)"


def _validation(config: Dict) -> str:
    """The validation metric's relabelings when they are not the test's (``--valid-samples``)."""
    samples = config.get("valid_samples")
    return "" if samples is None or samples == config["eval_samples"] else f" ({samples} for validation)"


def pairs_table(record: Dict) -> List[str]:
    lines = ["| category | pairs | distinguished | unreliable | score |", "|---|---:|---:|---:|---:|"]
    for category, row in record["scores"].items():
        bold = "**" if category == "total" else ""
        lines.append(f"| {bold}{category}{bold} | {row['pairs']} | {row['distinguished']} | {row['unreliable']} | "
                     f"{bold}{row['score']}{bold} |")
    config = record["config"]
    source = f"`--family {config['family']}`" if config.get("family") else "a pair file"
    changed = record.get("changed_protocol_constants")
    lines.append("")
    lines.append(_made(record, f"`rpfast pairs` on {source}, {config['seeds']} seed(s), model {record['model']}"
                               + (f"; changed protocol constants: {changed}" if changed else "")))
    return lines


def table(name: str) -> List[str]:
    """The lines of the table that results file ``name`` gives."""
    path = RESULTS / f"{name}.json"
    record = json.loads(path.read_text())
    if "scores" in record:
        return pairs_table(record)
    if "metric" in record and "task_type" in record:
        return molecules_table(record)
    if "summary" in record and "runs" in record:
        return csl_table(record)
    raise ValueError(f"{path}: not an rpfast csl or molecules results.json, nor a pairs summary.json")


def render(text: str) -> str:
    """``text`` with every marked table written from its results file."""
    return TABLE.sub(lambda m: m.group(1) + "\n".join(table(m.group("name"))) + "\n" + m.group(4), text)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a page is not what its results files give")
    args = parser.parse_args(argv)
    stale = []
    for page in sorted(PAGES.glob("*.md")):
        text = page.read_text()
        rendered = render(text)
        if rendered != text:
            stale.append(page)
            if not args.check:
                page.write_text(rendered)
    if args.check and stale:
        print("out of date (run python scripts/experiment_tables.py): " + ", ".join(map(str, stale)),
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
