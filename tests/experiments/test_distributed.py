"""Multi-process training (rpfast/experiments/distributed.py) and parallel runs (workers.py)."""
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from rpfast.datasets import csl_batch, csl_dataset
from rpfast.experiments import distributed
from rpfast.experiments.workers import ProcessFailed, run_in_workers
from rpfast.nn import RPGIN, convert_sync_batch_norm
from tests.helpers.paths import ROOT
from tests.helpers.processes import alive as _alive, children as _children, start_command

pytestmark = pytest.mark.backend_neutral  # the first CI run covers it (see conftest.py)

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
    node_ids = model.node_ids
    model.node_ids = lambda graph: drawn.append(next(iter(node_ids(graph))).positions) or [(drawn[-1], None)]
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
        logits = reference.gin(graph.x, graph, ids=ids).mean(dim=0)
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


# --- a process that dies or fails (issue defect 9) ------------------------------------------

def _rank_one_kills_itself():
    if distributed.current().rank == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    torch.distributed.barrier()  # rank 0 waits for the rank that died
    return "unreachable"


def _rank_one_raises():
    if distributed.current().rank == 1:
        raise ValueError("bad data in rank 1")
    torch.distributed.barrier()
    return "unreachable"


def test_a_rank_killed_by_a_signal_is_named_and_the_others_are_stopped():
    with pytest.raises(ProcessFailed, match=r"^rank 1 was killed by SIGKILL$"):
        distributed.launch(_rank_one_kills_itself, WORLD, threads=1)


def _rank_one_aborts():
    if distributed.current().rank == 1:
        os.write(2, b"terminate called after throwing an instance of 'gloo::IoException'\n  what():  read: peer gone\n")
        os.abort()
    torch.distributed.barrier()
    return "unreachable"


def test_a_rank_that_aborts_is_reported_with_what_the_cpp_runtime_said():
    """gloo aborts a rank through std::terminate; its message is not relayed as noise but named
    in the one-line report, so a CI failure says why."""
    with pytest.raises(ProcessFailed, match=r"^rank 1 was killed by SIGABRT \(terminate called after throwing an "
                                            r"instance of 'gloo::IoException' what\(\): read: peer gone\)$"):
        distributed.launch(_rank_one_aborts, WORLD, threads=1)


def test_an_exception_in_a_rank_is_raised_here_with_its_traceback_as_a_note():
    with pytest.raises(ValueError) as info:
        distributed.launch(_rank_one_raises, WORLD, threads=1)
    assert str(info.value) == "bad data in rank 1"  # not rank 0's lost connection, which came after it
    notes = "".join(getattr(info.value, "__notes__", []))
    assert "rank 1 of the launched group" in notes and "_rank_one_raises" in notes


def _call_that_kills_its_worker(index, report):
    report(1)
    if index == 1:
        os.kill(os.getpid(), signal.SIGKILL)
    return index


def _call_that_raises(index, report):
    if index == 2:
        raise KeyError(index)
    return index


class _Bar:
    def __init__(self):
        self.n = 0

    def update(self, n):
        self.n += n


def test_run_in_workers_reports_a_killed_worker_instead_of_waiting_for_it():
    with pytest.raises(ProcessFailed, match=r"^worker process \d+ was killed by SIGKILL$"):
        run_in_workers(_call_that_kills_its_worker, [(i,) for i in range(3)], 2, 1, _Bar())


def _tensor_sum(tensor, report):
    return float(tensor.sum())


def test_run_in_workers_sends_tensors_by_value():
    """Tasks and results cross the pipes as plain pickles: multiprocessing's pickler would share a
    tensor's storage through a file descriptor that a background thread of the sender hands over
    on request, and a worker stopped (SIGTERM) during that hand-over made the thread print a
    traceback after the command's one line."""
    code = ("import torch; from multiprocessing import resource_sharer; "
            "from tests.experiments.test_distributed import _Bar, _tensor_sum; from rpfast.experiments.workers import run_in_workers; "
            "print(run_in_workers(_tensor_sum, [(torch.ones(3),), (torch.ones(4),)], 2, 1, _Bar()), "
            "resource_sharer._resource_sharer._listener is None)")
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["[3.0,", "4.0]", "True"]


def test_run_in_workers_raises_a_workers_exception_and_keeps_the_order_of_results():
    with pytest.raises(KeyError):
        run_in_workers(_call_that_raises, [(i,) for i in range(4)], 2, 1, _Bar())
    bar = _Bar()
    assert run_in_workers(_call_that_kills_its_worker, [(0,), (2,), (3,)], 2, 1, bar) == [0, 2, 3]
    assert bar.n == 3


def _start_csl(tmp_path, *options):
    """``rpfast csl`` in a subprocess that trains far longer than the test waits, and its two
    worker processes once both run."""
    command = [sys.executable, "-m", "rpfast", "csl", "--epochs", "100000", "--folds", "2", "--hidden", "8",
               "--no-progress", "--threads", "2", "--out", str(tmp_path / "out"), *options]
    process = start_command(command, cwd=tmp_path)
    deadline = time.monotonic() + 120  # a hang guard, not a timing assertion
    while len(workers := _children(process.pid)) < 2:
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the worker processes did not start"
        time.sleep(0.05)
    time.sleep(1.0)  # let them get past start-up (a process killed while being spawned is another story)
    return process, workers


def _finished(process, workers, tmp_path):
    out, err = process.communicate(timeout=120)
    time.sleep(0.2)
    assert not [w for w in workers if _alive(w)], "worker processes left running"
    assert "Traceback" not in err and "leaked" not in err and err.count("\n") == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == [], "left an output or a temporary"
    return process.returncode, err


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the worker processes in /proc")
@pytest.mark.parametrize("options", [("--nproc", "2"), ("--jobs", "2")])
def test_killing_a_worker_process_is_one_line_naming_it(options, tmp_path):
    process, workers = _start_csl(tmp_path, *options)
    os.kill(workers[-1], signal.SIGKILL)
    code, err = _finished(process, workers, tmp_path)
    assert code == 2
    if options[0] == "--nproc":
        assert re.fullmatch(r"rpfast csl: error: rank [01] was killed by SIGKILL\n", err), err
    else:
        assert err == f"rpfast csl: error: worker process {workers[-1]} was killed by SIGKILL\n"


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the worker processes in /proc")
@pytest.mark.parametrize("options", [("--nproc", "2"), ("--jobs", "2")])
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_to_the_command_stops_its_workers_in_one_line(signum, options, tmp_path):
    process, workers = _start_csl(tmp_path, *options)
    process.send_signal(signum)
    code, err = _finished(process, workers, tmp_path)
    assert code == 128 + signum
    assert err == f"rpfast csl: terminated by {signal.Signals(signum).name}\n"


def test_process_group_backend_follows_the_model_device_not_the_machine(monkeypatch):
    """A CPU model on a machine with GPUs must use gloo (NCCL carries CUDA tensors only)."""
    from rpfast.experiments import distributed

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert distributed._backend() == "gloo"
    assert distributed._backend(torch.device("cpu")) == "gloo"


def _featurise_in_group(smiles):
    """Runs in every process: the group featurisation of ``smiles``; rank 0 returns its state and
    how many molecules each process read with RDKit."""
    from rpfast.datasets.moleculenet import MoleculeDataset
    from rpfast.experiments.molecules import featurise

    context = distributed.current()
    dataset = MoleculeDataset(list(smiles), torch.zeros(len(smiles), 1), ("A",))
    calls = []
    featurise_smiles = featurise.featurize_smiles
    featurise.featurize_smiles = lambda part, **kw: calls.append(len(part)) or featurise_smiles(part, **kw)
    graphs = featurise.featurize_for_group(dataset, context)
    everyone = [None] * context.world_size
    torch.distributed.all_gather_object(everyone, calls)
    return {"state": {k: v for k, v in graphs.state().items()}, "calls": everyone}


def test_a_group_featurises_each_share_once_and_gathers_the_one_process_result(tmp_path, monkeypatch):
    pytest.importorskip("rdkit")
    from rpfast.datasets import load_tox21
    from rpfast.datasets.molecules import featurize_smiles
    from rpfast.experiments.molecules.featurise import share

    assert [list(share(5, r, 2)) for r in range(2)] == [[0, 1], [2, 3, 4]]
    assert [len(share(7, r, 3)) for r in range(3)] == [2, 2, 3]
    with pytest.raises(ValueError, match="rank must lie in"):
        share(5, 2, 2)
    with pytest.raises(ValueError, match="count must be a non-negative int"):
        share(-1, 0, 1)
    monkeypatch.setenv("RPFAST_CACHE", str(tmp_path / "cache"))
    smiles = load_tox21().smiles[:61] + ["not a smiles", "C"]
    first = distributed.launch(_featurise_in_group, WORLD, smiles, threads=1)
    assert first["calls"] == [[31], [32]]  # each process read its share, no more
    expected = featurize_smiles(smiles).state()
    for name, value in expected.items():
        got = first["state"][name]
        assert (torch.equal(got, value) if isinstance(value, torch.Tensor) else got == value), name
    again = distributed.launch(_featurise_in_group, WORLD, smiles, threads=1)
    assert again["calls"] == [[], []]  # rank 0 wrote the cache; the group reads it
    assert torch.equal(again["state"]["atoms"], expected["atoms"])
