"""gin_mlp (rpfast/ops/gin_layer.py), the fused GIN layer, against the unfused layer in plain PyTorch."""
import copy

import pytest
import torch
import torch.nn.functional as F

from tests.helpers.assertions import assert_backward_matches, assert_thread_invariant
from rpfast.data import GraphBatch
from rpfast.nn.gin import batch_norm_arguments
from rpfast.ops import gin_aggregate, gin_mlp


def gin_mlp_modules(z, graph, eps, weights, norms, training):
    """gin_mlp with its BatchNorm state taken from modules, as GINLayer calls it."""
    return gin_mlp(z, graph, eps, weights, training=training, **batch_norm_arguments(norms, training))


def reference_gin_mlp(z, graph, eps, weights, norms, training):
    h = gin_aggregate(z, graph, eps).reshape(-1, z.shape[-1])
    for stage, bn in enumerate(norms):
        if stage:
            h = h @ weights[stage - 1].t()
        h = torch.relu(F.batch_norm(h, bn.running_mean, bn.running_var, bn.weight, bn.bias, training, bn.momentum, bn.eps))
    return h.reshape(z.shape[0], z.shape[1], -1)


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("stages", [1, 2, 3])
def test_gin_mlp_matches_unfused_layer(training, stages):
    torch.manual_seed(stages)
    edge_index = torch.randint(0, 40, (2, 120))
    graph = GraphBatch(edge_index, num_nodes=40)
    H = 6
    norms = torch.nn.ModuleList(torch.nn.BatchNorm1d(H) for _ in range(stages)).double()
    for bn in norms:
        bn.weight.data.uniform_(0.5, 1.5)
        bn.bias.data.normal_()
        bn.running_mean.normal_()
    weights = [torch.randn(H, H, dtype=torch.float64, requires_grad=True) for _ in range(stages - 1)]
    ref_norms = copy.deepcopy(norms)
    ref_weights = [w.detach().clone().requires_grad_() for w in weights]
    z1 = torch.randn(2, 40, H, dtype=torch.float64, requires_grad=True)
    z2 = z1.detach().clone().requires_grad_()
    e1 = torch.tensor([0.3], dtype=torch.float64, requires_grad=True)
    e2 = e1.detach().clone().requires_grad_()
    out = gin_mlp_modules(z1, graph, e1, weights, norms, training)
    ref = reference_gin_mlp(z2, graph, e2, ref_weights, ref_norms, training)
    torch.testing.assert_close(out, ref)
    for a, b in zip(norms, ref_norms):
        torch.testing.assert_close(a.running_mean, b.running_mean)
        torch.testing.assert_close(a.running_var, b.running_var)
    g = torch.randn_like(out)
    assert_backward_matches(out, ref, g, [(z1, z2), (e1, e2), *zip(weights, ref_weights),
                                          *((a.weight, b.weight) for a, b in zip(norms, ref_norms)),
                                          *((a.bias, b.bias) for a, b in zip(norms, ref_norms))])


@pytest.mark.kernels
def test_gin_mlp_bitwise_identical_across_threads():
    torch.manual_seed(0)
    graph = GraphBatch(torch.randint(0, 5000, (2, 30000)), num_nodes=5000)
    norms = torch.nn.ModuleList(torch.nn.BatchNorm1d(32) for _ in range(2))
    weight = torch.randn(32, 32, requires_grad=True)
    z = torch.randn(1, 5000, 32)

    def run():
        state = copy.deepcopy(norms)
        zz = z.clone().requires_grad_()
        weight.grad = None
        out = gin_mlp_modules(zz, graph, torch.tensor([0.1]), [weight], state, True)
        out.square().sum().backward()
        return out, zz.grad, weight.grad, state[0].weight.grad, state[1].running_var

    assert_thread_invariant(run)


def test_gin_mlp_rejects_bad_input():
    graph = GraphBatch(torch.tensor([[0, 1], [1, 0]]), num_nodes=2)
    norms = torch.nn.ModuleList(torch.nn.BatchNorm1d(3) for _ in range(2))
    weight = torch.randn(3, 3)

    def call(z, weights, norms, training=True, **overrides):
        return gin_mlp(z, graph, torch.zeros(1), weights, training=training,
                       **{**batch_norm_arguments(norms, training), **overrides})

    with pytest.raises(TypeError, match="z must be float32 or float64"):
        call(torch.zeros(1, 2, 3, dtype=torch.int64), [weight], norms)
    with pytest.raises(ValueError, match=r"z must have shape \[R, N=2, H\]"):
        call(torch.zeros(2, 3), [weight], norms)
    with pytest.raises(ValueError, match=r"weights\[0\] must be a torch.float32 tensor of shape \(3, 3\)"):
        call(torch.zeros(1, 2, 3), [torch.randn(3, 4)], norms)
    with pytest.raises(ValueError, match=r"bn_weights\[1\] must be a contiguous torch.float32 tensor of shape \(3,\)"):
        call(torch.zeros(1, 2, 3), [weight], [norms[0], torch.nn.BatchNorm1d(4)])
    with pytest.raises(ValueError, match="bn_weights needs one tensor per stage: 2 expected"):
        call(torch.zeros(1, 2, 3), [weight], norms[:1])
    with pytest.raises(ValueError, match="momentum needs one number or 2"):
        call(torch.zeros(1, 2, 3), [weight], norms, momentum=[0.1])
    with pytest.raises(TypeError, match="bn_eps must be a float"):
        call(torch.zeros(1, 2, 3), [weight], norms, bn_eps="small")
    with pytest.raises(TypeError, match=r"norms\[0\] must be an affine BatchNorm module"):
        batch_norm_arguments([torch.nn.BatchNorm1d(3, affine=False)], True)


def test_gin_mlp_takes_sync_batch_norm_state():
    """After SyncBatchNorm conversion (multi-process training) GINLayer still runs: the op takes
    tensors, not BatchNorm1d modules."""
    from rpfast.nn import GIN

    torch.manual_seed(0)
    graph = GraphBatch(torch.tensor([[0, 1, 1, 2], [1, 0, 2, 1]]), num_nodes=3)
    model = GIN(2, 4, 2, 3)
    converted = torch.nn.SyncBatchNorm.convert_sync_batchnorm(copy.deepcopy(model))
    assert any(isinstance(m, torch.nn.SyncBatchNorm) for m in converted.modules())
    x = torch.randn(3, 2)
    model.eval(), converted.eval()
    torch.testing.assert_close(converted(x, graph), model(x, graph))
