"""Linear heads on features: FedNTD's loss by hand, batched = per-client, SGD as torch computes it."""

import json

import pytest
import torch
import torch.nn.functional as F

from fedprior.algorithms.base import RoundInfo, Runtime, Task
from fedprior.algorithms.engines.linear_heads import BIAS, WEIGHT
from fedprior.algorithms.engines.supervised_heads import not_true_distillation
from fedprior.algorithms.fedavg import fedavg
from fedprior.algorithms.fedntd import fedntd
from tests.support.cli import invoke as cli
from tests.support.cli import linear_args

K, D = 3, 5
TEXT = F.normalize(torch.randn(K, D, generator=torch.Generator().manual_seed(0)), dim=1)
TASK = Task(num_classes=K, input_shape=(D,), class_names=("a", "b", "c"), num_clients=4, prior={"text_features": TEXT})
INFO = RoundInfo(seed=1, stage="federated", round=1)


def data(n, seed):
    g = torch.Generator().manual_seed(seed)
    return {"x": torch.randn(n, D, generator=g), "y": torch.randint(0, K, (n,), generator=g)}


def test_not_true_distillation_by_hand():
    local, teacher, y = torch.tensor([[1.0, 2.0, 3.0]]), torch.tensor([[3.0, 2.0, 1.0]]), torch.tensor([0])
    p_local = torch.softmax(torch.tensor([2.0, 3.0]) / 2.0, 0)
    g = torch.softmax(torch.tensor([2.0, 1.0]) / 2.0, 0)
    expected = float((g * (g / p_local).log()).sum())
    assert not_true_distillation(local, teacher, y, tau=2.0).item() == pytest.approx(expected, rel=1e-6)
    # the true class's logit does not matter
    moved = torch.tensor([[9.0, 2.0, 3.0]])
    assert torch.allclose(not_true_distillation(moved, teacher, y, 2.0), not_true_distillation(local, teacher, y, 2.0))
    assert not_true_distillation(teacher, teacher, y, 1.0).abs().item() < 1e-7


def test_fedntd_with_beta_zero_is_fedavg_and_beta_keeps_not_true_predictions_closer():
    d = data(30, 0)
    plain = fedavg(TASK, Runtime(3, 8), model="linear", init="text", lr=0.5, momentum=0.9, weight_decay=1e-5)
    ntd0 = fedntd(TASK, Runtime(3, 8), lr=0.5, beta=0.0)
    ntd = fedntd(TASK, Runtime(3, 8), lr=0.5, beta=5.0)
    state = plain.init(INFO)
    out = {n: a.client_update(a.broadcast(state, INFO), {}, d, INFO.for_client(0))[0] for n, a in {"plain": plain, "ntd0": ntd0, "ntd": ntd}.items()}
    assert torch.allclose(out["plain"].arrays[WEIGHT], out["ntd0"].arrays[WEIGHT], atol=1e-6)
    teacher = d["x"] @ state[WEIGHT].T + state[BIAS]

    def gap(r):
        return not_true_distillation(d["x"] @ r.arrays[WEIGHT].T + r.arrays[BIAS], teacher, d["y"], 1.0).mean()

    assert gap(out["ntd"]) < gap(out["plain"])


def test_sgd_with_momentum_and_weight_decay_matches_torch():
    """Two full-batch steps of our batched SGD equal torch.optim.SGD on nn.Linear."""
    d = data(6, 3)
    algo = fedavg(TASK, Runtime(2, 6), model="linear", lr=0.3, momentum=0.9, weight_decay=0.01)
    state = algo.init(INFO)
    reply, _ = algo.client_update(algo.broadcast(state, INFO), {}, d, INFO.for_client(0))
    layer = torch.nn.Linear(D, K)
    layer.load_state_dict({"weight": state[WEIGHT], "bias": state[BIAS]})
    optimizer = torch.optim.SGD(layer.parameters(), lr=0.3, momentum=0.9, weight_decay=0.01)
    for _ in range(2):
        optimizer.zero_grad()
        F.cross_entropy(layer(d["x"]), d["y"]).backward()  # one batch: the order does not matter
        optimizer.step()
    assert torch.allclose(reply.arrays[WEIGHT], layer.weight.detach(), atol=1e-6)
    assert torch.allclose(reply.arrays[BIAS], layer.bias.detach(), atol=1e-6)


@pytest.mark.parametrize(
    "factory",
    [
        lambda: fedavg(TASK, Runtime(2, 4), model="linear", init="text", lr=0.1, momentum=0.9),
        lambda: fedntd(TASK, Runtime(2, 4), lr=0.1),
    ],
)
def test_vectorized_equals_per_client_with_uneven_sizes(factory):
    algo = factory()
    state = algo.init(INFO)
    message = algo.broadcast(state, INFO)
    datas = [data(n, s) for s, n in enumerate([3, 11, 7, 1])]
    infos = [INFO.for_client(c) for c in range(4)]
    together = algo.client_update_many(message, [{}] * 4, datas, infos)
    for (reply, _), d, info in zip(together, datas, infos, strict=True):
        alone, _ = algo.client_update(message, {}, d, info)
        assert torch.allclose(reply.arrays[WEIGHT], alone.arrays[WEIGHT], atol=1e-6)
        assert reply.num_examples == d["x"].shape[0] and reply.metrics == alone.metrics
    assert together[3][0].metrics["steps"] == 2.0 and together[1][0].metrics["steps"] == 6.0


def test_text_init_needs_text_features():
    from fedprior.errors import ConfigError

    bare = Task(num_classes=K, input_shape=(D,), class_names=("a", "b", "c"), num_clients=4)
    with pytest.raises(ConfigError, match="algorithm.init: 'text' needs class text features"):
        fedavg(bare, Runtime(1, 4), model="linear", init="text")
    images = Task(num_classes=K, input_shape=(1, 8, 8), class_names=("a", "b", "c"), num_clients=2)
    with pytest.raises(ConfigError, match="^algorithm.model: this algorithm trains a linear head on feature vectors"):
        fedavg(images, Runtime(1, 4), model="linear")
    from fedprior.algorithms.fst_cbdg import fst_cbdg

    with pytest.raises(ConfigError, match="^encoder.name: .* images of shape \\(1, 8, 8\\); set encoder.name to locked-text"):
        fst_cbdg(images, Runtime(1, 4))  # fst-cbdg has no algorithm.model: the field to fix is the encoder


def test_a_huge_batch_size_pads_to_the_largest_client_not_to_the_batch_size():
    """federation.batch_size=10^8 once padded every client to 10^8 rows (1.5 TB); it is one batch per client."""
    from fedprior.algorithms.engines.linear_heads import HeadTraining, Sgd

    xs = [data(7, 1)["x"], data(4, 2)["x"]]
    generators = lambda: [torch.Generator().manual_seed(s) for s in (5, 6)]  # noqa: E731
    weight, bias = torch.zeros(K, D), torch.zeros(K)
    huge = HeadTraining(weight, bias, xs, generators(), batch_size=10**8, sgd=Sgd(0.1))
    rows, mask = huge._batches()
    assert huge.steps == [1, 1] and rows.shape == (1, 2, 7) and mask.sum().item() == 11
    whole = HeadTraining(weight, bias, xs, generators(), batch_size=7, sgd=Sgd(0.1))
    assert torch.equal(rows, whole._batches()[0])  # the same batches as a batch size of the largest client


def test_batch_size_larger_than_any_client_runs(tmp_path, tiny_clip):
    """federation.batch_size=10^8 once padded every client to 10^8 rows (1.5 TB); now one batch per client
    (tests/algorithms/engines/test_linear_heads.py checks the batches equal those of a batch size of the largest client)."""
    result = cli(*linear_args(tiny_clip, tmp_path / "huge", "--set", "federation.batch_size=100000000"), "--json")
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["rounds"] == 1
