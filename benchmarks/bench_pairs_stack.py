"""`rpfast pairs` with the default model on a built-in family: every pair and seed trained as
stacks of one shape (`run_stack`, what the command runs) against the same protocol pair by pair
(`run_pair(..., stacked=False)`: a fresh model through `fit` for each pair and seed, what a user
would write around `build_model`). Both compute the same rows (the same draws, weights and
stopping rule; the embeddings agree to float32 rounding), checked before timing; rounds
alternate between the two (`paired`), one thread each."""
import pytest
import torch

from benchmarks.paired import paired
from rpfast.datasets.pair_families import family_pairs
from rpfast.experiments.pairs.batched import plan_stacks, run_stack
from rpfast.experiments.pairs.protocol import PairsSettings, run_pair

#: the command's training (100 steps) with fewer eval relabelings: the stack's gain is in the steps
SETTINGS = dict(epochs=100, patience=100, lr=1e-3, eval_samples=64)


@pytest.mark.parametrize("family,count,seeds", [("basic", 16, 1), ("basic", 8, 4), ("regular", 8, 4)])
def test_pairs_stacked_against_pair_by_pair(benchmark, family, count, seeds):
    pairs = family_pairs(family, count)
    todo = [(pair, seed) for pair in pairs for seed in range(seeds)]
    settings = PairsSettings(**SETTINGS)
    torch.set_num_threads(1)

    def ours():
        return [row for stack in plan_stacks(todo) for row in run_stack(stack, settings)]

    def theirs():
        return [run_pair(pair, seed, settings, stacked=False) for pair, seed in todo]

    def agree(ours, theirs):
        """The same protocol: the same steps and decisions on every pair and seed."""
        key = lambda row: (row["category"], row["index"], row["seed"])  # noqa: E731
        mine, other = sorted(ours(), key=key), sorted(theirs(), key=key)
        assert [(key(r), r["epochs"], r["distinguished"]) for r in mine] == \
               [(key(r), r["epochs"], r["distinguished"]) for r in other]

    benchmark.group = (f"rpfast pairs, {family} x {count} pairs x {seeds} seeds, oriented: "
                       f"{SETTINGS['epochs']} steps + 128 x {SETTINGS['eval_samples']} eval relabelings")
    paired(benchmark, ours, theirs, "pair by pair", rounds=1, warmup_rounds=0, agree=agree)
