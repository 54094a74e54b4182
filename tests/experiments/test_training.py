"""The one training loop (rpfast/experiments/training.py: fit) and an epoch's batches (batches.py)."""
import math

import pytest
import torch
from torch import nn

from rpfast.experiments import distributed
from rpfast.experiments.distributed import Context
from rpfast.experiments.training import Batches, Epoch, TrainingDiverged, fit

N = 8


def _problem(n: int = N):
    """A linear regression any linear model learns: targets ``X @ w``."""
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(n, 3, generator=generator, dtype=torch.float64)
    return x, x @ torch.tensor([[1.0], [-2.0], [0.5]], dtype=torch.float64)


def _linear() -> nn.Linear:
    torch.manual_seed(0)
    return nn.Linear(3, 1).double()


def _mse(module, batch):
    x, y = batch
    return nn.functional.mse_loss(module(x), y)


def _batches(size: int = N, **kwargs) -> Batches:
    x, y = _problem()
    return Batches(torch.arange(N), lambda chunk: (x[chunk], y[chunk]), size=size,
                   generator=torch.Generator().manual_seed(1), **kwargs)


def _sgd(parameters):
    return torch.optim.SGD(parameters, lr=0.1)


def test_loss_decreases_on_a_learnable_problem_and_every_epoch_is_reported():
    seen = []
    result = fit(_linear(), _batches(), _mse, epochs=20, optimizer=_sgd, on_epoch=seen.append,
                 context=Context())
    assert len(result.losses) == len(result.seconds) == 20 and result.metrics == []
    assert result.losses[-1] < 0.1 * result.losses[0]
    assert all(b < a for a, b in zip(result.losses, result.losses[1:]))
    assert [e.index for e in seen] == list(range(20)) and all(isinstance(e, Epoch) for e in seen)
    assert [e.loss for e in seen] == result.losses and all(e.metric is None for e in seen)
    assert result.best_epoch == 19 and result.best_metric is None and result.final_loss == result.losses[-1]


def _fit_with_scores(scores):
    """fit with a metric that returns ``scores`` in turn; also the weights after every epoch."""
    states, values = [], iter(scores)

    def metric(model):
        states.append(model.weight.detach().clone())
        return next(values)

    result = fit(_linear(), _batches(), _mse, epochs=len(scores), optimizer=_sgd, metric=metric, context=Context())
    return result, states


def test_the_best_metric_epoch_is_selected_and_its_state_restored():
    result, states = _fit_with_scores([0.5, 0.9, 0.7])
    assert (result.best_epoch, result.best_metric, result.metrics) == (1, 0.9, [0.5, 0.9, 0.7])
    assert torch.equal(result.model.weight, states[1]) and not torch.equal(states[1], states[2])


@pytest.mark.parametrize("scores, best", [([None, None, None], 2), ([None, 0.6, 0.5], 1), ([0.8, None, 0.3], 0),
                                          ([math.nan, 0.2, 0.1], 1), ([0.4, math.inf, math.nan], 0)])
def test_an_undefined_or_non_finite_metric_never_wins(scores, best):
    """A defined finite score beats an undefined one (None, NaN, infinity), which never replaces
    it: only while no score is defined is the latest epoch kept. Non-finite scores are recorded
    as None."""
    result, states = _fit_with_scores(scores)
    assert result.best_epoch == best
    assert result.metrics == [s if s is not None and math.isfinite(s) else None for s in scores]
    assert result.best_metric == result.metrics[best]
    assert torch.equal(result.model.weight, states[best])


def _loss_nan_from(epoch: int, steps_per_epoch: int = 1):
    """An MSE loss that turns NaN from the ``epoch``-th epoch on (counting steps)."""
    calls = []

    def loss(module, batch):
        calls.append(1)
        value = _mse(module, batch)
        return value * math.nan if len(calls) > epoch * steps_per_epoch else value

    return loss


def test_a_non_finite_loss_stops_training_and_an_earlier_epoch_is_kept():
    seen = []
    result = fit(_linear(), _batches(), _loss_nan_from(3), epochs=6, optimizer=_sgd, on_epoch=seen.append,
                 context=Context())
    assert result.diverged_epoch == 3 and "loss is nan" in result.divergence
    assert len(result.losses) == 4 and math.isnan(result.losses[3]) and all(map(math.isfinite, result.losses[:3]))
    assert result.best_epoch == 2 and [e.index for e in seen] == [0, 1, 2, 3]
    assert all(torch.isfinite(p).all() for p in result.model.parameters())


def test_a_non_finite_loss_is_never_selected_by_the_metric():
    scores = iter([0.1, 0.2, 0.3, 0.9, 0.9])

    result = fit(_linear(), _batches(), _loss_nan_from(2), epochs=5, optimizer=_sgd,
                 metric=lambda model: next(scores), context=Context())
    assert (result.diverged_epoch, result.best_epoch, result.best_metric) == (2, 1, 0.2)
    assert result.metrics == [0.1, 0.2, None] and len(result.losses) == 3
    assert all(torch.isfinite(p).all() for p in result.model.parameters())


def test_weights_that_become_non_finite_stop_training_even_with_a_finite_loss():
    class Blows(nn.Linear):
        """A linear model whose weight becomes infinite in the third epoch's step."""

        steps = 0

        def forward(self, x):
            Blows.steps += 1
            if Blows.steps == 3:
                with torch.no_grad():
                    self.bias.fill_(math.inf)
                return x[:, :1] * 0 + (self.weight * 0).sum()  # a finite loss this step
            return super().forward(x)

    torch.manual_seed(0)
    result = fit(Blows(3, 1).double(), _batches(), _mse, epochs=5, optimizer=_sgd, context=Context())
    assert result.diverged_epoch == 2 and "bias is not finite" in result.divergence and result.best_epoch == 1
    assert all(torch.isfinite(p).all() for p in result.model.parameters())


def test_divergence_in_the_first_epoch_is_an_error():
    with pytest.raises(TrainingDiverged, match="diverged in its first epoch .the training loss is nan.: no epoch"):
        fit(_linear(), _batches(), _loss_nan_from(0), epochs=3, optimizer=_sgd, context=Context())


def test_schedule_steps_once_per_epoch_after_the_optimizer_is_built():
    built = []

    def schedule(optimizer):
        built.append(optimizer)
        return torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)

    fit(_linear(), _batches(), _mse, epochs=3, optimizer=_sgd, schedule=schedule, context=Context())
    assert built[0].param_groups[0]["lr"] == pytest.approx(0.1 * 0.5 ** 3)


def test_the_loss_gets_the_module_and_what_make_returns():
    calls = []

    def loss(module, batch):
        calls.append(batch)
        return module(batch[0]).sum() * 0

    fit(_linear(), _batches(size=3), loss, epochs=1, optimizer=_sgd, context=Context())
    assert [len(x) for x, _ in calls] == [3, 3, 2]


def test_full_batch_keeps_its_order_and_draws_nothing_unless_shuffled():
    batches = _batches()
    before = batches.generator.get_state()
    assert [c.tolist() for c in batches.epoch(0, Context())] == [list(range(N))]
    assert torch.equal(batches.generator.get_state(), before)
    shuffled = _batches(shuffle_full_batch=True)
    (chunk,) = shuffled.epoch(0, Context())
    assert sorted(chunk.tolist()) == list(range(N))
    assert not torch.equal(shuffled.generator.get_state(), before)


def test_mini_batches_cover_a_new_permutation_each_epoch_and_skip_small_chunks():
    batches = _batches(size=3, min_size=3)
    epochs = [[c.tolist() for c in batches.epoch(e, Context())] for e in range(2)]
    assert all(len(chunks) == 2 and all(len(c) == 3 for c in chunks) for chunks in epochs)  # the last 2 skipped
    assert epochs[0] != epochs[1]


@pytest.mark.parametrize("size", [4, 100])
def test_processes_get_equal_shards_of_one_shuffled_order(size):
    """Rank r's chunks hold its share of each global batch: together the ranks cover every example,
    and the step is the global batch (at most all examples) over the processes, rounded up."""
    batches = Batches(torch.arange(7), lambda chunk: chunk, size=size, generator=torch.Generator(), seed=3)
    shards = [[c.tolist() for c in batches.epoch(0, Context(rank, 2))] for rank in range(2)]
    step = math.ceil(min(size, 7) / 2)
    assert all(len(c) <= step for shard in shards for c in shard)
    assert sorted(sum(shards[0] + shards[1], [])) == sorted(list(range(7)) + [shards[0][0][0]])  # padded to 8
    assert shards == [[c.tolist() for c in batches.epoch(0, Context(rank, 2))] for rank in range(2)]  # seeded
    assert shards != [[c.tolist() for c in batches.epoch(1, Context(rank, 2))] for rank in range(2)]


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(indices=torch.arange(3.0)), TypeError, "indices must be a 1-D int64"),
    (dict(size=0), ValueError, "size must be a positive integer, got 0"),
    (dict(min_size=True), ValueError, "min_size"),
    (dict(generator=0), TypeError, "generator must be a torch.Generator"),
])
def test_bad_batches_are_refused(kwargs, error, match):
    arguments = dict(indices=torch.arange(3), make=lambda c: c, size=2, generator=torch.Generator()) | kwargs
    with pytest.raises(error, match=match):
        Batches(**arguments)


def test_epochs_must_be_positive():
    with pytest.raises(ValueError, match="epochs must be a positive integer, got 0"):
        fit(_linear(), _batches(), _mse, epochs=0, optimizer=_sgd, context=Context())


def _fit_in_group():
    """Runs in every process of a group: full-batch fit of the linear model (DDP averages the
    gradients of the two equal shards, so it follows the one-process run)."""
    x, y = _problem()
    batches = Batches(torch.arange(N), lambda chunk: (x[chunk], y[chunk]), size=N, generator=torch.Generator())
    result = fit(_linear(), batches, _mse, epochs=5, optimizer=_sgd)
    assert not isinstance(result.model, nn.parallel.DistributedDataParallel)
    return result.losses, result.model.weight.detach().clone()


def test_a_process_group_follows_the_one_process_run():
    losses, weight = distributed.launch(_fit_in_group, 2, threads=1)
    alone = fit(_linear(), _batches(), _mse, epochs=5, optimizer=_sgd, context=Context())
    assert losses == pytest.approx(alone.losses, rel=1e-6)  # Context.mean reduces in float32
    assert torch.allclose(weight, alone.model.weight, rtol=1e-12, atol=0)


# ------------------------------------------------------------------ issue 42: patience, the kept weights
def test_patience_on_the_loss_stops_when_it_stops_improving():
    """Without a metric the mean training loss is watched: an SGD step too small to lower it by
    min_delta counts as no improvement."""
    result = fit(_linear(), _batches(), _mse, epochs=50, optimizer=lambda p: torch.optim.SGD(p, lr=1e-9),
                 patience=3, min_delta=1e-3, context=Context())
    assert len(result.losses) == 4 and result.stopped_early  # the first epoch sets the mark, three fail it
    unlimited = fit(_linear(), _batches(), _mse, epochs=6, optimizer=_sgd, patience=3, context=Context())
    assert len(unlimited.losses) == 6 and not unlimited.stopped_early  # the loss falls every epoch


def test_patience_on_a_metric_follows_its_direction():
    scores = [0.5, 0.6, 0.55, 0.6, 0.59, 0.9]
    kept = iter(scores)
    result = fit(_linear(), _batches(), _mse, epochs=6, optimizer=_sgd, metric=lambda model: next(kept),
                 patience=3, context=Context())
    assert result.metrics == [0.5, 0.6, 0.55, 0.6, 0.59] and result.stopped_early and result.best_epoch == 1
    errors = iter([1.0, 0.5, 0.6, 0.7])  # an error: lower is better, so 0.6 and 0.7 do not improve
    result = fit(_linear(), _batches(), _mse, epochs=6, optimizer=_sgd, metric=lambda model: next(errors),
                 maximize=False, patience=2, context=Context())
    assert len(result.metrics) == 4 and result.best_epoch == 1


@pytest.mark.parametrize("patience,min_delta", [(0, 0.0), (True, 0.0), (2.5, 0.0), (2, -1.0), (2, math.nan)])
def test_patience_and_min_delta_are_checked(patience, min_delta):
    with pytest.raises(ValueError, match="patience|min_delta"):
        fit(_linear(), _batches(), _mse, epochs=2, optimizer=_sgd, patience=patience, min_delta=min_delta,
            context=Context())


def test_without_a_metric_a_divergence_keeps_the_weights_that_gave_the_last_finite_loss():
    """Full-batch training whose third loss is NaN: the second loss is the last finite one, and the
    weights kept are those it was computed on (the first step's result), not the second step's."""
    states, nan_from_third = [], _loss_nan_from(2)

    def recording(module, batch):
        states.append(module.weight.detach().clone())
        return nan_from_third(module, batch)

    result = fit(_linear(), _batches(), recording, epochs=5, optimizer=_sgd, context=Context())
    assert result.diverged_epoch == 2 and result.finite_epochs == 2
    assert torch.equal(result.model.weight, states[1]) and not torch.equal(states[1], states[2])


def test_a_non_finite_batch_loss_takes_no_step():
    """The epoch ends at the batch whose loss is not finite, before its step: the NaN never reaches
    the weights (nor the optimizer's state)."""
    model = _linear()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    fit(model, _batches(size=2), _loss_nan_from(1, steps_per_epoch=4), epochs=3, optimizer=lambda _: optimizer,
        metric=lambda m: 1.0, context=Context())
    assert all(torch.isfinite(s["exp_avg"]).all() for s in optimizer.state.values())


def test_on_a_device_the_losses_are_read_once_per_epoch(monkeypatch):
    """Where reading a loss makes a step wait (a GPU), an epoch sums its losses where they are and
    reads them once: the same mean losses, bit for bit, as reading each step on the CPU; a NaN
    batch then shows at the epoch's end, and the divergence rule keeps an earlier epoch."""
    from rpfast.experiments import training

    def run(**kwargs):
        return fit(_linear(), _batches(size=4), _mse, epochs=4, optimizer=_sgd, context=Context(), **kwargs)

    read_each_step = run()
    reads = []

    def counted(value):
        reads.append(value)
        return False

    monkeypatch.setattr(training, "_reads_each_step", counted)
    with monkeypatch.context() as patch:
        items = []
        patch.setattr(torch.Tensor, "item", lambda self: items.append(1) or float(self.tolist()))
        read_once = run()
    assert read_once.losses == read_each_step.losses and len(items) == 4  # one read per epoch
    diverged = fit(_linear(), _batches(size=4), _loss_nan_from(2, steps_per_epoch=N // 4), epochs=5, optimizer=_sgd,
                   context=Context())
    assert diverged.diverged_epoch == 2 and math.isnan(diverged.losses[2]) and diverged.best_epoch == 1
    assert all(torch.isfinite(p).all() for p in diverged.model.parameters())


def test_pairs_train_through_fit(monkeypatch):
    """`rpfast pairs` trains a pair alone with the experiments' one loop (a stack of replicas
    applies its rules per replica: tests/experiments/test_pairs_stack.py checks it against it)."""
    import rpfast.experiments.pairs.protocol as protocol
    from rpfast.datasets.pair_families import family_pairs
    from rpfast.experiments.pairs.protocol import PairsSettings

    calls = []
    real = protocol.fit
    monkeypatch.setattr(protocol, "fit", lambda *a, **k: calls.append(k) or real(*a, **k))
    row = protocol.run_pair(family_pairs("basic", 1)[0], 0, PairsSettings(epochs=4, patience=2, lr=1e-3),
                            stacked=False)
    assert len(calls) == 1 and calls[0]["patience"] == 2 and calls[0]["epochs"] == 4
    assert 1 <= row["epochs"] <= 4
