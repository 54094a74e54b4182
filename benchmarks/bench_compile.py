"""A GIN / RP-GIN training step (CSL, batch 16) in eager mode against the same model under
``torch.compile(fullgraph=True)``. Speed-up > 1: eager is faster.

Two reference rows: the flat RP-GIN at hidden 64 on all 150 CSL graphs (the compiler's fixed
per-step cost against ~20 ms of kernels), and a model of one ``torch.nn.Linear`` (no rpfast
at all): what ``torch.compile`` itself adds to the smallest training step."""
import pytest
import torch

from rpfast.datasets import csl_batch, csl_dataset
from rpfast.experiments.training import adam
from rpfast.nn import GIN, RPGIN
from rpfast.ops import graph_sum
from benchmarks.paired import paired


FLAT = "RP-GIN (flat parameters)"
LARGE = "RP-GIN (flat parameters), hidden 64"
REFERENCE = "one torch.nn.Linear (reference, no rpfast)"
MODELS = ["GIN", "RP-GIN", FLAT, LARGE, REFERENCE]
ROUNDS = {LARGE: 20}  # ~20 ms a step; the others take about a millisecond


def _model(model_name: str) -> torch.nn.Module:
    torch.manual_seed(0)
    if model_name == "GIN":
        return GIN(1, 16, 5, 10)
    if model_name == REFERENCE:
        return torch.nn.Linear(1, 10)
    hidden = 64 if model_name == LARGE else 16
    return RPGIN(1, hidden, 5, 10, id_dim=10, flat_parameters=model_name in (FLAT, LARGE))


def _training_step(model_name: str, compiled: bool):
    """One training step of a fresh model (seed 0) on CSL graphs (16, or all 150 for the large
    row), eager or under torch.compile; the Linear maps each graph's node-feature sum."""
    graphs, labels = csl_dataset()
    batch = list(range(150)) if model_name == LARGE else list(range(0, 150, 10))[:16]
    graph, target = csl_batch(graphs, batch), labels[batch]
    model = _model(model_name)
    optimizer = adam(model.parameters(), 0.01)
    forward = torch.compile(model, fullgraph=True) if compiled else model
    inputs = (graph_sum(graph.x, graph),) if model_name == REFERENCE else (graph.x, graph)

    def step():
        loss = torch.nn.functional.cross_entropy(forward(*inputs), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.detach()
    return step


def _same_loss(eager_step, compiled_step) -> None:
    """Both models start from seed 0 on the same batch and draw their random IDs from one seed:
    their first losses agree."""
    torch.manual_seed(1)
    eager_loss = eager_step()
    torch.manual_seed(1)
    torch.testing.assert_close(compiled_step(), eager_loss, rtol=1e-5, atol=1e-6)


def _group(model_name: str) -> str:
    return f"{model_name} training step, CSL batch {150 if model_name == LARGE else 16}: eager vs compiled"


@pytest.mark.parametrize("impl", ["rpfast", "torch.compile(rpfast)"])
@pytest.mark.parametrize("model_name", MODELS)
def test_training_step_compiled(benchmark, impl, model_name):
    step = _training_step(model_name, impl != "rpfast")
    benchmark.group = _group(model_name)
    benchmark.extra_info["impl"] = impl
    benchmark.pedantic(step, rounds=ROUNDS.get(model_name, 100), warmup_rounds=5, iterations=1)


@pytest.mark.parametrize("model_name", MODELS)
def test_training_step_compiled_alternating(benchmark, model_name):
    """Eager and compiled steps in alternating rounds (paired.py); the "speed-up" is eager's
    lead, so < 1 means compiled is faster."""
    eager, compiled = _training_step(model_name, False), _training_step(model_name, True)
    benchmark.group = _group(model_name) + " (alternating rounds)"
    benchmark.extra_info["impl"] = "rpfast"
    paired(benchmark, eager, compiled, "torch.compile(rpfast)", rounds=3 * ROUNDS.get(model_name, 100),
           warmup_rounds=5, agree=_same_loss)
