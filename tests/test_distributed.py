"""Multi-process training (rpfast/experiments/distributed.py) and parallel runs (workers.py)."""
import json

import pytest
import torch

from rpfast.data import csl_batch, csl_dataset
from rpfast.experiments import distributed
from rpfast.nn import RPGIN, convert_sync_batch_norm

STEPS, GLOBAL_BATCH, SEED = 3, 8, 7
WORLD = 2


def _global_batches():
    generator = torch.Generator().manual_seed(SEED)
    return [torch.randperm(150, generator=generator)[:GLOBAL_BATCH].tolist() for _ in range(STEPS)]


def _model(rank: int) -> RPGIN:
    torch.manual_seed(SEED)
    generator = torch.Generator().manual_seed(distributed.rank_seed(SEED, rank))
    return RPGIN(1, 8, 2, 10, id_dim=6, generator=generator).double()  # float64: a tight comparison


def _ddp_steps():
    """Runs in every process: DDP + SyncBatchNorm on the process's half of each global batch;
    rank 0 returns the parameters and every rank's relabelings."""
    context = distributed.current()
    graphs, labels = csl_dataset()
    model = convert_sync_batch_norm(_model(context.rank))
    drawn = []
    sample_ids = model.sample_ids
    model.sample_ids = lambda graph, samples: drawn.append(sample_ids(graph, samples)) or drawn[-1]
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)  # linear in the gradients (Adam magnifies float noise)
    share = GLOBAL_BATCH // context.world_size
    for batch in _global_batches():
        local = batch[context.rank * share:(context.rank + 1) * share]
        graph = csl_batch(graphs, local)
        loss = torch.nn.functional.cross_entropy(ddp(graph.x, graph), labels[local])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    everyone = [None] * context.world_size
    torch.distributed.all_gather_object(everyone, drawn)
    return {"state": {k: v.clone() for k, v in model.state_dict().items()}, "ids": everyone}


def test_two_processes_match_one_process_on_the_global_batch():
    result = distributed.launch(_ddp_steps, WORLD, threads=1)
    graphs, labels = csl_dataset()
    reference = _model(0)  # plain BatchNorm over the whole global batch, in one process
    optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    for step, batch in enumerate(_global_batches()):
        graph = csl_batch(graphs, batch)
        ids = torch.cat([result["ids"][rank][step] for rank in range(WORLD)], dim=1)  # rank 0's nodes first
        logits = reference.gin(graph.x, graph, ids).mean(dim=0)
        loss = torch.nn.functional.cross_entropy(logits, labels[batch])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    state = result["state"]
    for name, value in reference.state_dict().items():
        torch.testing.assert_close(state[name], value, rtol=1e-9, atol=1e-10, msg=lambda m: f"{name}: {m}")
    # the ranks draw their relabelings from different streams
    assert not torch.equal(result["ids"][0][0], result["ids"][1][0])


def test_csl_command_with_two_processes_and_with_parallel_runs(tmp_path, capsys):
    from rpfast.cli import main

    common = ["csl", "--epochs", "2", "--folds", "2", "--no-progress", "--hidden", "8"]
    assert main([*common, "--nproc", "2", "--sync-bn", "--out", str(tmp_path / "ddp")]) == 0
    runs = json.loads((tmp_path / "ddp" / "results.json").read_text())["runs"]
    assert len(runs) == 4 and all(0 <= r["accuracy"] <= 100 for r in runs)
    # without --sync-bn the models keep flat parameters: one tensor for DDP to all-reduce
    assert main([*common, "--nproc", "2", "--out", str(tmp_path / "flat")]) == 0
    flat_runs = json.loads((tmp_path / "flat" / "results.json").read_text())["runs"]
    assert len(flat_runs) == 4 and all(0 <= r["accuracy"] <= 100 for r in flat_runs)
    assert main([*common, "--jobs", "1", "--out", str(tmp_path / "one")]) == 0
    assert main([*common, "--jobs", "2", "--out", str(tmp_path / "two")]) == 0
    one = json.loads((tmp_path / "one" / "results.json").read_text())["runs"]
    two = json.loads((tmp_path / "two" / "results.json").read_text())["runs"]
    assert one == two  # a run's result does not depend on the process that trains it
    capsys.readouterr()


def test_nproc_and_jobs_together_are_refused(capsys):
    from rpfast.cli import main

    with pytest.raises(SystemExit):
        main(["csl", "--nproc", "2", "--jobs", "2", "--out", "unused"])
    assert "choose one" in capsys.readouterr().err
