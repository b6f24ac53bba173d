"""Numeric checks of FedAvg, FedProx and SCAFFOLD against hand-computed values."""

import pytest
import torch
import torch.nn.functional as F

from fedprior.algorithms.base import Reply, RoundInfo, Runtime, Task
from fedprior.algorithms.fedavg import fedavg
from fedprior.algorithms.fedprox import fedprox, proximal_loss
from fedprior.algorithms.pieces.tensors import MODEL, weighted_mean, with_prefix
from fedprior.algorithms.scaffold import scaffold
from tests.support.toy_data import toy_images

FEATURES = Task(num_classes=3, input_shape=(4,), class_names=("a", "b", "c"), num_clients=10)
INFO = RoundInfo(seed=0, stage="federated", round=1)


def linear_data(n=12, seed=0):
    g = torch.Generator().manual_seed(seed)
    return {"x": torch.randn(n, 4, generator=g), "y": torch.randint(0, 3, (n,), generator=g)}


def test_weighted_mean_by_hand():
    a = {"w": torch.tensor([1.0, 2.0]), "n": torch.tensor(5)}
    b = {"w": torch.tensor([3.0, 6.0]), "n": torch.tensor(9)}
    out = weighted_mean([a, b], [1, 3])
    assert torch.allclose(out["w"], torch.tensor([2.5, 5.0]))
    assert out["n"].item() == 5  # integer buffers are not averaged
    with pytest.raises(ValueError):
        weighted_mean([a, b], [0, 0])


def test_weighted_mean_by_foreach_is_the_float64_stacked_mean_and_stays_on_the_device():
    """Issue 19 item 1: the float64 multiply-adds over all tensors at once (torch._foreach_*) give the per-tensor float64
    tensordot of the stacked mappings (the former code) to float tolerance (float32 tensors here to the bit), in each
    tensor's dtype (float64 tensors to 1e-12), on the tensors' device without a host sync."""
    from tests.support.pretend_device import DEVICE, OnDevice, PretendDevice

    g = torch.Generator().manual_seed(0)
    arrays = [
        {"w": torch.randn(100_000, generator=g), "conv": torch.randn(8, 3, 3, 3, generator=g), "h": torch.randn(7, generator=g).double(), "n": torch.tensor(k)}
        for k in range(12)
    ]
    weights = torch.rand(12, generator=g).tolist()
    w = torch.tensor(weights, dtype=torch.float64)
    w = w / w.sum()
    out = weighted_mean(arrays, weights)
    for name, rtol in (("w", 1e-6), ("conv", 1e-6), ("h", 1e-12)):
        stacked = torch.tensordot(w, torch.stack([a[name].to(torch.float64) for a in arrays]), dims=1).to(arrays[0][name].dtype)
        assert out[name].dtype == arrays[0][name].dtype and torch.allclose(out[name], stacked, rtol=rtol, atol=0)
        if stacked.dtype == torch.float32:  # the float64 sums differ in their last bits at most: float32 rounds that away
            assert torch.equal(out[name], stacked)
    assert out["n"].item() == 0
    with PretendDevice() as record:
        on_device = weighted_mean([{k: v.to(DEVICE) for k, v in a.items()} for a in arrays], weights)
        before = len(record.syncs)
    assert all(isinstance(v, OnDevice) for v in on_device.values()) and torch.equal(on_device["w"].elem, out["w"])
    assert [s for s in record.syncs[before:]] == [] and not [s for s in record.syncs if "tensors.py" in s], record.syncs


def test_fedavg_aggregate_is_example_weighted():
    algo = fedavg(FEATURES, Runtime(1, 4), model="linear")
    state = algo.init(INFO)
    r1 = Reply({k: torch.ones_like(v) for k, v in state.items()}, num_examples=1)
    r2 = Reply({k: 5 * torch.ones_like(v) for k, v in state.items()}, num_examples=3)
    new = algo.aggregate(state, [r1, r2], INFO)
    for v in new.values():
        assert torch.allclose(v, torch.full_like(v, 4.0))  # (1*1 + 3*5) / 4


def test_fedavg_one_full_batch_step_is_plain_sgd():
    """One epoch with batch = all data is one SGD step: w - lr * grad CE, checked by autograd on a copy."""
    data = linear_data()
    algo = fedavg(FEATURES, Runtime(1, 12), model="linear", lr=0.5)
    state = algo.init(INFO)
    reply, _ = algo.client_update(algo.broadcast(state, INFO), {}, data, INFO.for_client(0))
    w = state[MODEL + "weight"].clone().requires_grad_(True)
    b = state[MODEL + "bias"].clone().requires_grad_(True)
    F.cross_entropy(data["x"] @ w.T + b, data["y"]).backward()
    assert torch.allclose(reply.arrays[MODEL + "weight"], w.detach() - 0.5 * w.grad, atol=1e-6)
    assert torch.allclose(reply.arrays[MODEL + "bias"], b.detach() - 0.5 * b.grad, atol=1e-6)
    assert reply.num_examples == 12


def test_proximal_loss_by_hand():
    global_model = torch.nn.Linear(4, 3)
    local = torch.nn.Linear(4, 3)
    local.load_state_dict(global_model.state_dict())
    with torch.no_grad():
        local.weight[0, 0] += 2.0  # drift ||w - w_g||^2 = 4
    data = linear_data()
    ce = F.cross_entropy(local(data["x"]), data["y"])
    loss = proximal_loss(global_model, mu=0.5)(local, data["x"], data["y"])
    assert torch.allclose(loss, ce + 0.5 * 0.5 * 4.0)


def test_fedprox_mu_zero_equals_fedavg_and_mu_pulls_towards_global():
    data = linear_data(40)
    runs = {}
    for name, algo in {
        "fedavg": fedavg(FEATURES, Runtime(3, 8), model="linear", lr=0.5),
        "prox0": fedprox(FEATURES, Runtime(3, 8), model="linear", lr=0.5, mu=0.0),
        "prox": fedprox(FEATURES, Runtime(3, 8), model="linear", lr=0.5, mu=1.0),
    }.items():
        state = algo.init(INFO)
        reply, _ = algo.client_update(algo.broadcast(state, INFO), {}, data, INFO.for_client(1))
        runs[name] = (state, reply.arrays)
    state = runs["fedavg"][0]
    for k in state:
        assert torch.allclose(runs["fedavg"][1][k], runs["prox0"][1][k], atol=1e-7)

    def drift(arrays):
        return sum(((arrays[k] - state[k]) ** 2).sum() for k in state)

    assert drift(runs["prox"][1]) < drift(runs["fedavg"][1])


def test_scaffold_control_variates_by_hand():
    data = linear_data(12)
    lr, steps = 0.2, 3  # batch 4 -> 3 steps
    algo = scaffold(FEATURES, Runtime(1, 4), model="linear", lr=lr)
    state = algo.init(INFO)
    assert all((v == 0).all() for v in with_prefix(state, "control.").values())
    # with c = c_i = 0, local training is plain SGD: same model as FedAvg with momentum 0
    plain = fedavg(FEATURES, Runtime(1, 4), model="linear", lr=lr)
    ref, _ = plain.client_update(plain.broadcast(state, INFO), {}, data, INFO.for_client(0))
    reply, client_state = algo.client_update(algo.broadcast(state, INFO), {}, data, INFO.for_client(0))
    for name in ("weight", "bias"):
        y = reply.arrays[MODEL + name]
        assert torch.allclose(y, ref.arrays[MODEL + name], atol=1e-6)
        expected_ci = (state[MODEL + name] - y) / (steps * lr)  # option II with c = c_i = 0
        assert torch.allclose(client_state["control." + name], expected_ci, atol=1e-5)
        assert torch.allclose(reply.arrays["delta_control." + name], expected_ci, atol=1e-5)
    # server: c <- c + (1/N) sum dc; x <- mean of the clients' models (eta_g = 1)
    new = algo.aggregate(state, [reply, reply], INFO)
    for name in ("weight", "bias"):
        assert torch.allclose(new["control." + name], 2 * reply.arrays["delta_control." + name] / FEATURES.num_clients)
        assert torch.allclose(new[MODEL + name], reply.arrays[MODEL + name], atol=1e-6)


def test_scaffold_corrects_the_gradient_by_c_minus_ci():
    """One step from x with controls c, c_i moves by -lr (g - c_i + c)."""
    data = linear_data(4)
    algo = scaffold(FEATURES, Runtime(1, 4), model="linear", lr=0.1)
    state = algo.init(INFO)
    state["control.weight"] = torch.full_like(state["control.weight"], 0.3)
    c_i = {"control.weight": torch.full_like(state["control.weight"], -0.2), "control.bias": torch.zeros(3)}
    reply, _ = algo.client_update(algo.broadcast(state, INFO), c_i, data, INFO.for_client(0))
    w = state[MODEL + "weight"].clone().requires_grad_(True)
    F.cross_entropy(data["x"] @ w.T + state[MODEL + "bias"], data["y"]).backward()
    expected = w.detach() - 0.1 * (w.grad + 0.3 - (-0.2))
    assert torch.allclose(reply.arrays[MODEL + "weight"], expected, atol=1e-6)


def test_cnn_learns_toy_images(image_task):
    data = toy_images(96)
    algo = fedavg(image_task, Runtime(3, 16), model="cnn", lr=0.1)
    state = algo.init(INFO)
    before = algo.evaluate(state, data)["accuracy"]
    reply, _ = algo.client_update(algo.broadcast(state, INFO), {}, data, INFO.for_client(0))
    after = algo.evaluate(algo.aggregate(state, [reply], INFO), data)["accuracy"]
    assert after > max(before, 0.8)


def test_scaffold_averages_a_model_with_batchnorm_and_keeps_its_integer_buffers(image_task):
    """convnet-small has BatchNorm: num_batches_tracked is an integer tensor, which a plain mean cannot take."""
    algo = scaffold(image_task, Runtime(1, 8), model="convnet-small", lr=0.05)
    state = algo.init(INFO)
    replies = [algo.client_update(algo.broadcast(state, INFO), {}, toy_images(16, seed), INFO.for_client(seed))[0] for seed in (0, 1)]
    new = algo.aggregate(state, replies, INFO)
    integer = [k for k, v in new.items() if k.startswith(MODEL) and not v.is_floating_point()]
    assert integer and all(torch.equal(new[k], replies[0].arrays[k]) for k in integer)
    floating = [k for k, v in new.items() if k.startswith(MODEL) and v.is_floating_point()]
    for k in floating:  # eta_g = 1: the unweighted mean of the two client models
        assert torch.allclose(new[k], (replies[0].arrays[k] + replies[1].arrays[k]) / 2, atol=1e-6)
