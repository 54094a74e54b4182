"""The RPC protocol of `rpfast pairs` on one CSL pair (41 vertices), rpfast against the same
protocol written with PyG + torch (`baselines/pairs_protocol.py`), for the default model
(`oriented`: BFS views of up to 32 vertices, walk counts and an MLP) and for `rp-gin`. Both
sides train a fresh model for the same steps and average the same number of eval relabelings
per embedding; rounds alternate between the two (`paired`), so both see the same machine
minute."""
import pytest
import torch

from benchmarks.paired import paired
from rpfast.datasets.pair_families import family_pairs
from rpfast.experiments.pairs.protocol import PairsSettings, run_pair

EPOCHS, EVAL_SAMPLES = 20, 64


@pytest.mark.parametrize("model", ["oriented", "rp-gin"])
def test_rpc_protocol_one_pair(benchmark, model):
    pytest.importorskip("torch_geometric")
    from benchmarks.baselines.pairs_protocol import run_pair_baseline

    pair = family_pairs("csl", 1)[0]
    settings = PairsSettings(model=model, epochs=EPOCHS, patience=EPOCHS, lr=1e-3, eval_samples=EVAL_SAMPLES)
    torch.set_num_threads(1)

    def ours():
        return run_pair(pair, 0, settings)

    def theirs():
        return run_pair_baseline(pair, 0, model=model, epochs=EPOCHS, eval_samples=EVAL_SAMPLES)

    def agree(ours, theirs):
        """The same protocol: both runs are reliable and reach the same verdict on the pair."""
        row, result = ours(), theirs()
        assert row["reliable"] and result.reliable
        assert row["distinguished"] == result.distinguished, (row["p_value"], result.p_value)

    benchmark.group = f"RPC protocol, one CSL pair, {model}: {EPOCHS} steps + 128 x {EVAL_SAMPLES} eval relabelings"
    paired(benchmark, ours, theirs, "pyg+torch", rounds=3, warmup_rounds=1, agree=agree)
