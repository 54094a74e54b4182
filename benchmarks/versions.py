"""Before/after: the training steps users run, timed in one run against an older rpfast tree.

    python benchmarks/versions.py OLD_TREE [--rounds 7] [--steps 40]

``OLD_TREE`` is a source tree of the older version with its compiled modules beside the
sources (``pip wheel --no-deps . -w W`` in a checkout of it, then unzip the wheel's ``.so``
files into its ``rpfast/``). Three long-lived worker processes, the old version, this one with
its C++ kernels and this one with ``RPFAST_BACKEND=torch`` (the composed path other devices
run), take turns: every round runs each workload's steps in each worker, in a rotating order,
so all three see the same machine. Prints a markdown table of medians over the rounds and the
ratios old / new and composed / kernels.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

WORKLOADS = {
    "GINConv forward+backward, CSL 150 graphs, F=16": "ginconv",
    "GIN training step, CSL batch 16 (whole network in C++)": "gin",
    "GIN training step, CSL batch 16, hidden 80 (layer by layer)": "gin_wide",
    "RP-GIN training step, CSL batch 16": "rpgin",
    "RP-GIN training step, CSL batch 16, flat parameters (as rpfast csl)": "rpgin_flat",
    "RP-GIN evaluation, CSL 30 graphs, 5 relabelings averaged": "rpgin_eval",
    "RP pi-SGD training step, VecMLP, 32 graphs of 10 vertices, 4 samples": "pisgd",
    "Duvenaud training step, 128 graphs of 24 vertices": "duvenaud",
}


# ------------------------------------------------------------------ the worker side
def _import_rpfast(tree):
    """Import rpfast from ``tree`` (None: the installed one), bypassing an editable install's finder."""
    if tree is not None:
        sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in type(f).__name__.lower()
                            and "editable" not in getattr(f, "__module__", "").lower()]
        sys.path.insert(0, tree)
    import rpfast
    return rpfast


def _csl(batch_size):
    try:
        from rpfast.datasets import csl_batch, csl_dataset
    except ImportError:  # a tree from before rpfast.datasets (issue 42)
        from rpfast.data import csl_batch, csl_dataset
    graphs, labels = csl_dataset()
    return csl_batch(graphs, list(range(batch_size))), labels[:batch_size]


def _train_step(model, inputs, target):
    import torch
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

    def step():
        loss = torch.nn.functional.cross_entropy(model(*inputs), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return step


def _make(name):
    import torch
    from rpfast.data import GraphBatch
    from rpfast.nn import GIN, RPGIN, Duvenaud, GINConv, PiSGD, RelationalPooling, VecMLP
    torch.manual_seed(0)
    if name == "ginconv":
        graph, _ = _csl(150)
        conv = GINConv(torch.nn.Linear(16, 16), train_eps=True)
        x = torch.randn(graph.total_nodes, 16, requires_grad=True)
        return lambda: conv(x, graph).sum().backward()
    if name in ("gin", "gin_wide", "rpgin", "rpgin_flat"):
        graph, labels = _csl(16)
        target = torch.as_tensor(labels, dtype=torch.int64)
        hidden = 80 if name == "gin_wide" else 16
        model = (RPGIN(1, 16, 5, 10, id_dim=10, flat_parameters=name == "rpgin_flat") if name.startswith("rpgin")
                 else GIN(1, hidden, 5, 10))
        return _train_step(model, (graph.x, graph), target)
    if name == "rpgin_eval":
        graph, _ = _csl(30)
        model = RPGIN(1, 16, 5, 10, id_dim=10).eval()  # both versions average 5 relabelings in eval mode

        def evaluate():
            with torch.no_grad():
                model(graph.x, graph)
        return evaluate
    if name == "pisgd":
        gen = torch.Generator().manual_seed(0)
        adj = (torch.rand(32, 10, 10, generator=gen) < 0.3).float()
        adj = ((adj + adj.transpose(1, 2)) > 0).float().unsqueeze(-1)
        x = torch.randn(32, 10, 3, generator=gen)
        sizes = torch.full((32,), 10)
        model = RelationalPooling(VecMLP(10, 1, 3, 64, 2), PiSGD(10, train_samples=4))
        return _train_step(model, (adj, x, sizes), torch.arange(32) % 2)
    if name == "duvenaud":
        gen = torch.Generator().manual_seed(0)
        graphs, xs = [], []
        for _ in range(128):  # a ring with chords: molecule-like degrees 2-3
            n = 24
            ring = torch.stack([torch.arange(n), (torch.arange(n) + 1) % n])
            chords = torch.stack([torch.arange(0, n, 6), torch.arange(3, n, 6)])
            e = torch.cat([ring, chords], dim=1)
            graphs.append((torch.cat([e, e.flip(0)], dim=1), n))
            xs.append(torch.randn(n, 32, generator=gen))
        batch = GraphBatch.from_edge_lists(graphs, x=xs)
        model = Duvenaud(32, 12)
        target = (torch.rand(128, 12, generator=gen) < 0.5).float()
        optimizer = torch.optim.Adam(model.parameters(), lr=0.001)

        def step():
            loss = torch.nn.functional.binary_cross_entropy_with_logits(model(batch), target)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        return step
    raise ValueError(name)


def worker(tree):
    """Serve ``{"workload": name, "steps": n}`` lines on stdin with the median step time (s)."""
    _import_rpfast(tree)
    steps_of = {}
    for line in sys.stdin:
        request = json.loads(line)
        name = request["workload"]
        if name not in steps_of:
            steps_of[name] = _make(name)
            for _ in range(3):  # warm-up: caches, bindings, allocator
                steps_of[name]()
        step, times = steps_of[name], []
        for _ in range(request["steps"]):
            start = time.perf_counter()
            step()
            times.append(time.perf_counter() - start)
        print(json.dumps({"median": statistics.median(times)}), flush=True)


# ------------------------------------------------------------------ the parent side
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("old_tree", help="a source tree of the older rpfast with its compiled modules beside it")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--only", nargs="*", choices=sorted(WORKLOADS.values()), help="a subset of the workloads")
    args = parser.parse_args()
    workloads = {label: key for label, key in WORKLOADS.items() if not args.only or key in args.only}
    if not os.path.isdir(os.path.join(args.old_tree, "rpfast")):
        parser.error(f"{args.old_tree} holds no rpfast package")
    variants = {"old": (args.old_tree, {}), "new": (None, {"RPFAST_BACKEND": "auto"}),
                "composed": (None, {"RPFAST_BACKEND": "torch"})}
    workers = {}
    for key, (tree, env) in variants.items():
        command = [sys.executable, __file__, "--worker"] + ([tree] if tree else [])
        workers[key] = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                        env={**os.environ, **env})
    medians = {(w, v): [] for w in workloads.values() for v in variants}
    order = list(variants)
    for round_ in range(args.rounds):
        for workload in workloads.values():
            for key in order[round_ % 3:] + order[:round_ % 3]:
                process = workers[key]
                process.stdin.write(json.dumps({"workload": workload, "steps": args.steps}) + "\n")
                process.stdin.flush()
                reply = process.stdout.readline()
                if not reply:
                    sys.exit(f"the {key} worker stopped (workload {workload})")
                medians[workload, key].append(json.loads(reply)["median"])
        print(f"round {round_ + 1}/{args.rounds} done", file=sys.stderr)
    for process in workers.values():
        process.stdin.close()
        process.wait()
    print("| training step | old (ms) | new (ms) | old / new (rounds' range) | composed path on CPU (ms) "
          "| composed / kernels |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, workload in workloads.items():
        old, new, composed = (statistics.median(medians[workload, v]) * 1e3 for v in variants)
        ratios = [a / b for a, b in zip(medians[workload, "old"], medians[workload, "new"])]
        print(f"| {label} | {old:.3f} | {new:.3f} | {old / new:.2f}x ({min(ratios):.2f}-{max(ratios):.2f}) "
              f"| {composed:.3f} | {composed / new:.2f}x |")


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "--worker":
        worker(sys.argv[2] if len(sys.argv) > 2 else None)
    else:
        main()
