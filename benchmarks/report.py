"""Turn a pytest-benchmark JSON file into the ratio table of benchmarks/README.md.

    python -m pytest benchmarks --benchmark-json=bench.json
    python benchmarks/report.py bench.json            # prints markdown

Within every benchmark group (one op, one pass, one shape) the first implementation
listed in --ours (default "rpfast") is compared with every other one: ratio =
baseline median time / rpfast median time (> 1 means rpfast is faster). Bandwidth is
the group's ``extra_info["bytes"]`` (or ``["items"]``, e.g. subsets) divided by
rpfast's median time.
"""
import argparse
import json
import platform
from collections import defaultdict


def load_groups(path):
    with open(path) as fh:
        data = json.load(fh)
    groups = defaultdict(dict)
    for bench in data["benchmarks"]:
        impl = bench["extra_info"].get("impl", bench["name"])
        groups[bench["group"]][impl] = bench
    return data, groups


def render(data, groups, ours="rpfast"):
    machine = data.get("machine_info", {})
    lines = [
        f"Machine: {machine.get('cpu', {}).get('brand_raw', platform.processor())}, "
        f"{machine.get('cpu', {}).get('count', '?')} logical CPUs, Python {machine.get('python_version', '?')}; "
        f"median of the timed rounds.",
        "",
        "| benchmark | rpfast (ms) | baseline | baseline (ms) | speed-up | rpfast throughput |",
        "|---|---:|---|---:|---:|---:|",
    ]
    for group in sorted(groups):
        impls = groups[group]
        if ours not in impls:
            continue
        mine = impls[ours]["stats"]["median"]
        info = impls[ours]["extra_info"]
        if info.get("bytes"):
            bandwidth = f"{info['bytes'] / mine / 1e9:.1f} GB/s"
        elif info.get("items"):
            bandwidth = f"{info['items'] / mine / 1e6:.1f} M/s"
        else:
            bandwidth = "-"
        for name, bench in sorted(impls.items()):
            if name == ours:
                continue
            theirs = bench["stats"]["median"]
            lines.append(
                f"| {group} | {mine * 1e3:.3f} | {name} | {theirs * 1e3:.3f} | "
                f"{theirs / mine:.1f}x | {bandwidth} |"
            )
    paired_rows = [(group, groups[group][ours]["extra_info"]) for group in sorted(groups)
                   if "paired_speedup" in groups[group].get(ours, {}).get("extra_info", {})]
    if paired_rows:
        lines += ["", "Alternating rounds (each rpfast round follows a baseline round; benchmarks/paired.py):", "",
                  "| benchmark | rpfast (ms) | baseline | baseline (ms) | speed-up |", "|---|---:|---|---:|---:|"]
        for group, info in paired_rows:
            lines.append(f"| {group} | {info['paired_median'] * 1e3:.3f} | {info['paired_baseline']} | "
                         f"{info['paired_baseline_median'] * 1e3:.3f} | {info['paired_speedup']:.1f}x |")
    boundary = sorted((b["extra_info"] for b in data["benchmarks"] if "boundary_op" in b["extra_info"]),
                      key=lambda info: info["boundary_op"])
    if boundary:
        lines += ["", "The boundary: every op on one CSL graph, alternating rounds (bench_op_boundary.py; us per call):",
                  "", "| op | bare kernel | op | op - bare | composed | composed / op | step: op | step: composed "
                  "| composed / op |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for info in boundary:
            step = (f"{info['op_step_us']:.1f} | {info['composed_step_us']:.1f} | "
                    f"{info['composed_step_over_op_step']:.2f}x" if "op_step_us" in info else "- | - | -")
            lines.append(f"| {info['boundary_op']} | {info['bare_us']:.1f} | {info['op_us']:.1f} | "
                         f"{info['above_bare_us']:.1f} | {info['composed_us']:.1f} | {info['composed_over_op']:.2f}x | "
                         f"{step} |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("json", help="file written by pytest --benchmark-json")
    parser.add_argument("--ours", default="rpfast", help="implementation the others are compared with")
    args = parser.parse_args()
    data, groups = load_groups(args.json)
    print(render(data, groups, args.ours))


if __name__ == "__main__":
    main()
