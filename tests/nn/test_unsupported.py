"""The guide's "What is not supported" list (docs/guide/unsupported.md): each entry raises the
error it documents (the backticked ``Error: message`` of the entry is the start of the raised
one), and torch.compile, which is supported, is not caught by the checks (tests/nn/test_compile.py)."""
import re
import warnings

import pytest
import torch

from rpfast.data import GraphBatch
from rpfast.nn import GIN, RPGIN, GINConv, RelationalPooling, VecMLP
from rpfast.ops import gin_aggregate

from tests.helpers.paths import ROOT

PAGE = ROOT / "docs" / "guide" / "unsupported.md"
EDGE_INDEX = torch.tensor([[0, 1, 1, 2, 2, 0, 2, 3], [1, 0, 2, 1, 0, 2, 3, 2]])
X = torch.randn(4, 3)


def _documented_errors():
    """``{topic: "Error: message start"}`` of the section's bullets (topic: the bullet's text up to
    its first colon or parenthesis, without backticks)."""
    section = PAGE.read_text()
    errors = {}
    for bullet in re.split(r"\n(?=- )", section)[1:]:
        spans = [" ".join(s.split()) for s in re.findall(r"`([^`]+)`", bullet)]
        topic = re.match(r"- ([^:(]*)", bullet).group(1).replace("`", "").strip()
        errors[topic] = next(s for s in spans if re.match(r"[A-Z]\w*Error: ", s))
    return errors


def _raised(call) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.jit's deprecation warnings
        with pytest.raises(Exception) as info:
            call()
    return f"{info.type.__name__}: {info.value}"


def _gin():
    return GIN(3, 8, 2, 2).eval()


def _explain(model, edge_mask_type):
    explain = pytest.importorskip("torch_geometric.explain")
    explainer = explain.Explainer(
        model=model, algorithm=explain.GNNExplainer(epochs=2), explanation_type="model",
        node_mask_type="attributes", edge_mask_type=edge_mask_type,
        model_config=dict(mode="multiclass_classification", task_level="graph", return_type="raw"))
    return explainer(X, EDGE_INDEX, batch=torch.zeros(4, dtype=torch.int64))


def _vmap(model):
    return torch.func.vmap(lambda x: model(x, EDGE_INDEX))(torch.randn(2, 4, 3))


def _weighted_adj_t():
    return torch.sparse_coo_tensor(EDGE_INDEX.flip(0), torch.full((8,), 0.5), (4, 4))


TRIGGERS = {  # the guide entry's topic -> a call that hits it with the entry's example names
    "torch.jit.trace": lambda: torch.jit.trace(_gin(), (X, EDGE_INDEX)),
    "torch.jit.script": lambda: torch.jit.script(_gin()),
    "torch.func": lambda: _vmap(_gin()),
    "Half precision": lambda: gin_aggregate(X.bfloat16(), GraphBatch(EDGE_INDEX, num_nodes=4)),
    "Explainer": lambda: _explain(_gin(), "object"),
    "adj_t": lambda: _gin()(X, _weighted_adj_t()),
}


def _trigger(topic: str):
    for key, call in TRIGGERS.items():
        if key in topic:
            return call
    raise AssertionError(f"no test triggers the guide's unsupported entry {topic!r}")


DOCUMENTED = _documented_errors()


def test_the_section_lists_the_unsupported_tools():
    topics = " ".join(DOCUMENTED)
    for tool in ("torch.jit.trace", "torch.jit.script", "torch.func", "Explainer"):
        assert tool in topics
    assert any("bfloat16" in error for error in DOCUMENTED.values())


@pytest.mark.parametrize("topic", list(DOCUMENTED), ids=list(DOCUMENTED))
def test_each_entry_raises_its_documented_error(topic):
    raised = _raised(_trigger(topic))
    assert raised.startswith(DOCUMENTED[topic]), (raised, DOCUMENTED[topic])


@pytest.mark.parametrize("make", [lambda: GINConv(torch.nn.Linear(3, 2)), _gin,
                                  lambda: RPGIN(3, 8, 2, 2, id_dim=3).eval(),
                                  lambda: RelationalPooling(VecMLP(4, 1, 3, hidden=8, out_dim=2)).eval()],
                         ids=["GINConv", "GIN", "RPGIN", "RelationalPooling"])
def test_every_layer_refuses_trace_script_and_vmap(make):
    module = make()
    assert "does not support torch.jit.trace" in _raised(lambda: torch.jit.trace(module, (X, EDGE_INDEX)))
    assert "does not support torch.jit.script" in _raised(lambda: torch.jit.script(module))
    wrapper = torch.nn.Sequential(torch.nn.Identity(), module)  # a model holding one
    assert "does not support torch.jit.script" in _raised(lambda: torch.jit.script(wrapper))
    vmapped = torch.func.vmap(lambda x: module(x, EDGE_INDEX), randomness="same")
    assert "does not support torch.func transforms" in _raised(lambda: vmapped(torch.randn(2, 4, 3)))


def test_ops_refuse_trace_and_transforms_and_run_again_afterwards():
    graph = GraphBatch(EDGE_INDEX, num_nodes=4)
    assert "rpfast op gin_aggregate does not support torch.jit.trace" in _raised(
        lambda: torch.jit.trace(lambda x: gin_aggregate(x, graph), (X,)))
    assert "does not support torch.func transforms" in _raised(
        lambda: torch.func.grad(lambda x: gin_aggregate(x, graph).sum())(X))
    assert "does not support half precision" in _raised(lambda: gin_aggregate(X.half(), graph))
    x = X.clone().requires_grad_()
    gin_aggregate(x, graph).sum().backward()  # eager autograd is unaffected
    assert x.grad.shape == X.shape


def test_explainer_node_masks_work():
    explanation = _explain(_gin(), None)
    assert explanation.node_mask.shape == X.shape
