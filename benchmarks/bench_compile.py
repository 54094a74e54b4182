"""A GIN / RP-GIN training step (CSL, batch 16) in eager mode against the same model under
``torch.compile(fullgraph=True)``. Speed-up > 1: eager is faster."""
import pytest
import torch

from rpfast.data import csl_batch, csl_dataset
from rpfast.experiments.training import adam
from rpfast.nn import GIN, RPGIN
from paired import paired


def _training_step(model_name: str, compiled: bool):
    """One training step of a fresh GIN or RP-GIN (seed 0; "RP-GIN (flat parameters)": built
    with ``flat_parameters=True``), eager or under torch.compile."""
    graphs, labels = csl_dataset()
    batch = list(range(0, 150, 10))[:16]
    graph, target = csl_batch(graphs, batch), labels[batch]
    torch.manual_seed(0)
    flat = model_name.endswith("(flat parameters)")
    model = GIN(1, 16, 5, 10) if model_name == "GIN" else RPGIN(1, 16, 5, 10, id_dim=10, flat_parameters=flat)
    optimizer = adam(model.parameters(), 0.01)
    forward = torch.compile(model, fullgraph=True) if compiled else model

    def step():
        loss = torch.nn.functional.cross_entropy(forward(graph.x, graph), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return step


@pytest.mark.parametrize("impl", ["rpfast", "torch.compile(rpfast)"])
@pytest.mark.parametrize("model_name", ["GIN", "RP-GIN", "RP-GIN (flat parameters)"])
def test_training_step_compiled(benchmark, impl, model_name):
    step = _training_step(model_name, impl != "rpfast")
    benchmark.group = f"{model_name} training step, CSL batch 16: eager vs compiled"
    benchmark.extra_info["impl"] = impl
    benchmark.pedantic(step, rounds=100, warmup_rounds=10, iterations=1)


@pytest.mark.parametrize("model_name", ["GIN", "RP-GIN", "RP-GIN (flat parameters)"])
def test_training_step_compiled_alternating(benchmark, model_name):
    """Eager and compiled steps in alternating rounds (paired.py); the "speed-up" is eager's
    lead, so < 1 means compiled is faster."""
    eager, compiled = _training_step(model_name, False), _training_step(model_name, True)
    benchmark.group = f"{model_name} training step, CSL batch 16: eager vs compiled (alternating rounds)"
    benchmark.extra_info["impl"] = "rpfast"
    paired(benchmark, eager, compiled, "torch.compile(rpfast)", rounds=300, warmup_rounds=20)
