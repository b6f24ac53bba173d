"""MFCL: Peer Normalization, the sensor module, NT-Xent, the two phases, resume in phase 2, byte counts."""

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from fedprior.algorithms.base import Algorithm, Broadcast, Reply, RoundInfo, Runtime, Stage, Task
from fedprior.algorithms.mfcl import mfcl
from fedprior.algorithms.pieces.contrastive import nt_xent, sinkhorn
from fedprior.algorithms.pieces.linear_eval import linear_evaluation
from fedprior.algorithms.pieces.optimizer_state import load_optimizer_state, optimizer_state
from fedprior.data.augment import seed_from
from fedprior.data.augment.simclr import simclr_views
from fedprior.models.autoencoder import SensorModule
from fedprior.models.peer_norm import PeerNorm, peer_views
from fedprior.runtime.checkpoint import load_checkpoint
from fedprior.runtime.round_loop import RoundLoop
from fedprior.runtime.simulation import simulate

pytestmark = pytest.mark.usefixtures("one_torch_thread")


# ---------------------------------------------------------------- Peer Normalization (Eq. 3-4)


def test_peer_norm_pools_the_two_views_by_hand():
    # K = 1 sample, C = 2 channels in one group, 1 x 2 pixels; view 1 then view 2 (view-major).
    view1 = torch.tensor([[[[1.0, 3.0]], [[5.0, 7.0]]]])
    view2 = torch.tensor([[[[2.0, 2.0]], [[4.0, 8.0]]]])
    pn = PeerNorm(2, groups=1, eps=0.0)
    out = pn(torch.cat([view1, view2]))
    # Eq. 3 over the 8 numbers {1, 3, 5, 7, 2, 2, 4, 8}: mean 4, variance (9+1+1+9+4+4+0+16)/8 = 5.5.
    expected = (torch.cat([view1, view2]) - 4.0) / math.sqrt(5.5)
    assert torch.allclose(out, expected)
    # GN normalizes each view alone: view 1 has mean 4, variance 5; view 2 mean 4, variance 5.
    gn = F.group_norm(torch.cat([view1, view2]), 1, eps=0.0)
    assert torch.allclose(gn[0], (view1[0] - 4.0) / math.sqrt(5.0))
    assert not torch.allclose(out, gn, atol=1e-3)


def test_peer_norm_groups_views_and_affine():
    torch.manual_seed(0)
    k, c, groups = 3, 4, 2
    x = torch.randn(2 * k, c, 3, 3)
    pn = PeerNorm(c, groups=groups, eps=1e-5)
    with torch.no_grad():
        pn.weight.copy_(torch.tensor([1.0, 2.0, -1.0, 0.5]))
        pn.bias.copy_(torch.tensor([0.0, 1.0, 2.0, -3.0]))
    out = pn(x)
    for i in range(k):
        for g in range(groups):
            block = torch.cat([x[i, 2 * g : 2 * g + 2], x[k + i, 2 * g : 2 * g + 2]])  # both views, the group's channels
            mean, var = block.mean(), block.var(unbiased=False)
            for j, row in ((0, i), (1, k + i)):
                for ch in (2 * g, 2 * g + 1):
                    want = pn.weight[ch] * (x[row, ch] - mean) / torch.sqrt(var + 1e-5) + pn.bias[ch]
                    assert torch.allclose(out[row, ch], want, atol=1e-5), (i, g, j, ch)
    # Identical views: PN is GN; one view per sample (views = 1): PN is GN exactly.
    twins = torch.cat([x[:k], x[:k]])
    gn = nn.GroupNorm(groups, c)
    gn.load_state_dict(pn.state_dict())
    assert torch.allclose(pn(twins)[:k], gn(x[:k]), atol=1e-5)
    with peer_views(pn, 1):
        assert torch.allclose(pn(x), gn(x), atol=1e-5)
    assert pn.views == 2
    with pytest.raises(ValueError, match="cannot hold 2 views"):
        pn(x[:3])


def test_peer_norm_eq3_as_printed_by_hand():
    # The same 8 numbers: K = 1, one group of Lambda = 2 channels, 1 x 2 pixels, view 1 then view 2.
    view1 = torch.tensor([[[[1.0, 3.0]], [[5.0, 7.0]]]])
    view2 = torch.tensor([[[[2.0, 2.0]], [[4.0, 8.0]]]])
    out = PeerNorm(2, groups=1, eps=0.0, statistics="eq3")(torch.cat([view1, view2]))
    # Eq. 3 as printed: mu = 1/(2 Lambda) sum_j sum_c w_j^c, a vector over the 2 pixels: ((1+5+2+4)/4, (3+7+2+8)/4) = (3, 5);
    # sigma^2 = 1/(2 Lambda) sum_j sum_c ||w_j^c - mu||^2 = ((4+4) + (4+4) + (1+9) + (1+9)) / 4 = 9 (the norm sums the pixels).
    mu = torch.tensor([3.0, 5.0]).view(1, 1, 1, 2)
    assert torch.allclose(out, (torch.cat([view1, view2]) - mu) / 3.0)
    assert not torch.allclose(out, PeerNorm(2, groups=1, eps=0.0)(torch.cat([view1, view2])), atol=1e-3)
    # One view (an image alone): the same formula with j = 1 only: mu = (3, 5), sigma^2 = ((4+4) + (4+4)) / 2 = 8.
    lone = PeerNorm(2, groups=1, eps=0.0, statistics="eq3", views=1)(view1)
    assert torch.allclose(lone, (view1 - mu) / math.sqrt(8.0))


def test_the_sensor_takes_pn_as_printed_by_name():
    module = SensorModule(3, 8, "pn-eq3", 2)
    norms = [m for m in module.modules() if isinstance(m, PeerNorm)]
    assert len(norms) == 4 and {m.statistics for m in norms} == {"eq3"}
    assert {m.statistics for m in SensorModule(3, 8, "pn", 2).modules() if isinstance(m, PeerNorm)} == {"group"}
    with pytest.raises(ValueError, match="unknown statistics 'per-pixel'; accepted: group, eq3"):
        PeerNorm(4, 2, statistics="per-pixel")


# ---------------------------------------------------------------- sensor module (Table 5)


def test_sensor_module_shapes_and_table_5_parameter_count():
    module = SensorModule(3, 64, "pn")
    x = torch.rand(4, 3, 32, 32)
    assert module(x).shape == x.shape
    assert module.encode(x).shape == (4, 64, 16, 16) == (4, *module.representation_shape((3, 32, 32)))
    # Conv(3,64) + PN(64) + Conv(64,64) + PN(64) + ConvT(64,64) + PN(64) + ConvT(64,3) + PN(3) + Conv(3,3), with biases.
    by_hand = (3 * 64 * 9 + 64) + 128 + (64 * 64 * 9 + 64) + 128 + (64 * 64 * 9 + 64) + 128 + (64 * 3 * 9 + 3) + 6 + (3 * 3 * 9 + 3)
    assert sum(p.numel() for p in module.parameters()) == by_hand == 77_853
    odd = torch.rand(2, 1, 28, 28)
    assert SensorModule(1, 8, "bn")(odd).shape == odd.shape
    assert isinstance(SensorModule(1, 8, "gn").encoder[1], nn.GroupNorm)


# ---------------------------------------------------------------- NT-Xent (Appendix Eq. 5)


def test_nt_xent_by_hand():
    # Two samples with orthogonal views identical to each other: every row has its positive at
    # cosine 1 and two negatives at cosine 0; with tau = 0.5, L = -log(e^2 / (e^0 + e^2 + e^0)).
    h = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    assert nt_xent(h, 3 * h, 0.5).item() == pytest.approx(math.log(2 + math.e**2) - 2)


def test_nt_xent_equals_equation_5_term_by_term():
    torch.manual_seed(1)
    h1, h2, tau = torch.randn(3, 4), torch.randn(3, 4), 0.7
    rows = torch.cat([h1, h2])
    sim = lambda a, b: float(F.cosine_similarity(a, b, dim=0))  # noqa: E731
    total = 0.0
    for i in range(6):
        j = (i + 3) % 6
        denominator = sum(math.exp(sim(rows[i], rows[k]) / tau) for k in range(6) if k != i)
        total -= math.log(math.exp(sim(rows[i], rows[j]) / tau) / denominator)
    assert nt_xent(h1, h2, tau).item() == pytest.approx(total / 6, rel=1e-5)


def test_sinkhorn_gives_equal_cluster_mass():
    scores = torch.tensor([[5.0, 0.0], [4.0, 0.0], [3.0, 0.0], [2.0, 1.0]])
    codes = sinkhorn(scores, epsilon=1.0, iterations=50)
    assert torch.allclose(codes.sum(1), torch.ones(4), atol=1e-4)
    assert torch.allclose(codes.sum(0), torch.full((2,), 2.0), atol=1e-3)  # N/K each despite the skewed scores
    assert codes[3, 1] > codes[0, 1]


# ---------------------------------------------------------------- linear evaluation, optimizer state


def test_linear_evaluation_scores_held_out_folds():
    g = torch.Generator().manual_seed(0)
    y = torch.arange(200) % 4
    separable = F.one_hot(y, 4).float() * 5 + 0.1 * torch.randn(200, 4, generator=g)
    noise = torch.randn(200, 4, generator=g)
    good, bad = linear_evaluation(separable, y, 4), linear_evaluation(noise, y, 4)
    assert good["accuracy"] == 1.0 and bad["accuracy"] < 0.5
    assert len(good["class_accuracy"]) == 4 and good["macro_f1"] == 1.0
    assert linear_evaluation(noise, y, 4) == bad  # deterministic
    # A class missing from the labels gets no probability but keeps its column.
    assert len(linear_evaluation(separable[y < 3], y[y < 3], 4)["class_accuracy"]) == 4


def test_optimizer_state_round_trip():
    torch.manual_seed(0)
    model = nn.Linear(3, 2)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    for _ in range(2):
        optimizer.zero_grad()
        model(torch.randn(4, 3)).sum().backward()
        optimizer.step()
    arrays = optimizer_state(optimizer, model)
    assert set(arrays) == {f"opt.{p}:{k}" for p in ("weight", "bias") for k in ("step", "exp_avg", "exp_avg_sq")}
    copy = nn.Linear(3, 2)
    copy.load_state_dict(model.state_dict())
    again = torch.optim.Adam(copy.parameters(), lr=0.1)
    load_optimizer_state(again, copy, arrays)
    x = torch.randn(4, 3)
    for m, o in ((model, optimizer), (copy, again)):
        o.zero_grad()
        m(x).sum().backward()
        o.step()
    assert torch.equal(model.weight, copy.weight)


# ---------------------------------------------------------------- the algorithm's phases

TASK = Task(num_classes=3, input_shape=(1, 8, 8), class_names=("a", "b", "c"), num_clients=4)
SMALL = dict(sensor_width=4, norm_group_channels=2, disc_width=4, projection_dim=8, server_batch_size=16, server_epochs=2)


def small_data(n: int, seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 3, (n,), generator=g)
    x = torch.rand(n, 1, 8, 8, generator=g)
    for k in range(3):
        x[y == k, :, 2 * k : 2 * k + 3, :] += 1.0
    return {"x": x.clamp(0, 1), "y": y}


DATA = [small_data(n, c) for c, n in enumerate((12, 20, 8, 16))]
# The test set, and the labelled training pool the linear evaluation trains its dense layer on (the MFCL paper's Sec. 3).
TEST = {**small_data(60, 99), "x_train": torch.cat([d["x"] for d in DATA]), "y_train": torch.cat([d["y"] for d in DATA])}


def build(**changes) -> Algorithm:
    return mfcl(TASK, Runtime(1, 4), **{**SMALL, **changes})


def test_stages_are_the_two_phases():
    algorithm = build(drop=0.5)
    assert [(s.name, s.rounds, s.fraction, s.server_only, s.evaluate) for s in algorithm.stages] == [
        ("sensor", None, None, False, False),
        ("upload", 1, 0.5, False, False),
        ("server", 2, None, True, True),
    ]


def test_phase_1_fedavg_is_example_weighted():
    algorithm = build()
    state = algorithm.init(RoundInfo(0, "sensor", 0))
    sensor_keys = [k for k in state if k.startswith("sensor.")]
    replies = [
        Reply({k: torch.full_like(state[k], 1.0) if state[k].is_floating_point() else state[k] for k in sensor_keys}, 1, client_id=0),
        Reply({k: torch.full_like(state[k], 3.0) if state[k].is_floating_point() else state[k] for k in sensor_keys}, 3, client_id=2),
    ]
    new = algorithm.aggregate(state, replies, RoundInfo(0, "sensor", 1))
    for k in sensor_keys:
        assert torch.allclose(new[k], torch.full_like(state[k], (1 * 1.0 + 3 * 3.0) / 4))  # Eq. 1: |D^m|-weighted
    assert all(torch.equal(new[k], state[k]) for k in state if not k.startswith("sensor."))


@pytest.mark.parametrize("norm", ["pn", "gn", "bn"])
def test_representations_sent_are_the_encoders_output(norm):
    algorithm = build(norm=norm)
    state = algorithm.init(RoundInfo(5, "sensor", 0))
    info = RoundInfo(5, "upload", 1)
    message = algorithm.broadcast(state, info)
    assert set(message.arrays) == {k for k in state if k.startswith("sensor.encoder.")}  # f only, not the decoder
    client = info.for_client(1)
    reply, _ = algorithm.client_update(message, {}, {"x": DATA[1]["x"]}, client)
    # The same views, from the client's documented stream, through the trained encoder.
    module = SensorModule(1, 4, norm, 2)
    module.encoder.load_state_dict({k[len("sensor.encoder.") :]: v for k, v in message.arrays.items()})
    module.eval()
    v1, v2 = simclr_views(DATA[1]["x"], seed_from(client.generator("views")))
    with peer_views(module, 2), torch.no_grad():
        z = module.encoder(torch.cat([v1, v2]))
    assert torch.equal(reply.arrays["reps.view1"], z[:20]) and torch.equal(reply.arrays["reps.view2"], z[20:])
    assert reply.num_examples == 20 and reply.arrays["reps.view1"].shape == (20, 4, 4, 4)
    # The server stacks what arrives, in client order, and remembers who sent each row.
    other, _ = algorithm.client_update(message, {}, {"x": DATA[3]["x"]}, info.for_client(3))
    received = algorithm.aggregate(state, [Reply(reply.arrays, 20, client_id=1), Reply(other.arrays, 16, client_id=3)], info)
    assert torch.equal(received["reps.view1"], torch.cat([reply.arrays["reps.view1"], other.arrays["reps.view1"]]))
    assert received["reps.client"].tolist() == [1] * 20 + [3] * 16


def run(tmp_path=None, stop_after=None, start=None, **changes):
    algorithm = build(**changes)

    def stop(record):
        if stop_after is not None and (record["stage"], record["round"]) == stop_after:
            raise KeyboardInterrupt

    return simulate(
        algorithm,
        lambda c: {"x": DATA[c]["x"]},
        4,
        TEST,
        RoundLoop(seed=2, rounds=1, fraction=1.0),
        checkpoint_path=tmp_path / "checkpoint.safetensors" if tmp_path else None,
        start=start,
        on_round=stop,
    )


def strip(history):
    return [{k: v for k, v in r.items() if k != "seconds"} for r in history]


def test_run_killed_in_phase_2_resumes_with_the_same_numbers(tmp_path):
    whole = run()
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, stop_after=("server", 1))
    saved = load_checkpoint(tmp_path / "checkpoint.safetensors")
    assert (saved.progress.stage_index, saved.progress.round) == (2, 1) and "opt.proj.0.weight:exp_avg" in saved.server
    resumed = run(tmp_path, start=saved)
    assert strip(resumed.progress.history) == strip(whole.progress.history)
    assert set(resumed.state) == set(whole.state) and all(torch.equal(resumed.state[k], whole.state[k]) for k in whole.state)
    stages = [(r["stage"], r["round"]) for r in whole.progress.history]
    assert stages == [("sensor", 1), ("upload", 1), ("server", 1), ("server", 2)]
    server = [r for r in whole.progress.history if r["stage"] == "server"]
    assert all(0 <= r["accuracy"] <= 1 and r["server_loss"] > 0 and r["clients"] == [] for r in server)
    assert "accuracy" not in whole.progress.history[0] and "accuracy" in whole.progress.initial


def test_byte_counts_equal_the_tensors_sizes():
    history = run(drop=0.5).progress.history
    sensor, upload, *server = history
    sizes = {c: DATA[c]["x"].shape[0] for c in range(4)}
    model = SensorModule(1, 4, "pn", 2)
    whole = sum(t.numel() * 4 for t in model.state_dict().values())
    encoder = sum(t.numel() * 4 for t in model.encoder.state_dict().values())
    assert sensor["download_bytes"] == 4 * whole and sensor["upload_bytes"] == 4 * whole  # the round's totals over 4 clients
    assert sensor["upload_bytes_by_client"] == {str(c): whole for c in range(4)}
    assert len(upload["clients"]) == 2  # drop = 0.5 of 4 clients
    assert upload["download_bytes"] == 2 * encoder
    # Two views of every image, each a 4 x 4 x 4 float32 representation.
    assert upload["upload_bytes_by_client"] == {str(c): sizes[c] * 2 * 4 * 4 * 4 * 4 for c in upload["clients"]}
    assert upload["upload_bytes"] == sum(sizes[c] * 2 * 4 * 4 * 4 * 4 for c in upload["clients"])
    assert all(r["download_bytes"] == 0 and r["upload_bytes"] == 0 and r["upload_bytes_by_client"] == {} for r in server)


def test_a_server_only_stage_trains_without_clients():
    seen = []

    def client_update(message, state, data, info):
        seen.append(info.stage)
        return Reply({"v": message.arrays["v"] + 1}, 1), state

    algorithm = Algorithm(
        name="toy",
        inputs=("x",),
        init=lambda info: {"v": torch.zeros(())},
        broadcast=lambda state, info: Broadcast(dict(state)),
        client_update=client_update,
        aggregate=lambda state, replies, info: {"v": state["v"] + (10 if not replies else sum(r.arrays["v"] for r in replies))},
        evaluate=lambda state, data: {"accuracy": 0.0, "v": float(state["v"])},
        stages=(Stage("clients", rounds=1), Stage("server", rounds=2, server_only=True)),
    )
    result = simulate(algorithm, lambda c: {"x": torch.zeros(1, 1)}, 2, {}, RoundLoop(seed=0, rounds=1, fraction=1.0))
    assert seen == ["clients", "clients"]
    assert [r["v"] for r in result.progress.history] == [2.0, 12.0, 22.0]
    assert result.progress.history[-1]["clients"] == [] and "aggregated" not in result.progress.history[-1]


def test_unit_images_undo_the_tasks_standardization():
    """SimCLR's colour ops and MFCL's BCE work on [0, 1] pixels: the Task's channel statistics map the inputs back."""
    from fedprior.algorithms.engines.self_supervised import unit_images

    task = Task(num_classes=2, input_shape=(2, 2, 2), class_names=("a", "b"), num_clients=1, pixel_mean=(0.5, 0.2), pixel_std=(0.25, 0.1))
    pixels = torch.tensor([[[[0.0, 0.25], [0.5, 1.0]], [[0.2, 0.3], [0.1, 0.0]]]])
    standardized = (pixels - torch.tensor([0.5, 0.2]).view(1, 2, 1, 1)) / torch.tensor([0.25, 0.1]).view(1, 2, 1, 1)
    assert torch.allclose(unit_images(task)(standardized), pixels, atol=1e-6)
    no_stats = Task(num_classes=2, input_shape=(2, 2, 2), class_names=("a", "b"), num_clients=1)
    assert torch.equal(unit_images(no_stats)(torch.tensor([-1.0, 0.5, 2.0])), torch.tensor([0.0, 0.5, 1.0]))


def test_an_image_experiment_gives_its_task_the_training_sets_channel_statistics():
    from fedprior.experiments.build import build_experiment
    from fedprior.experiments.config import load_config

    experiment = build_experiment(*load_config("mfcl", ["data.dataset=digits", "data.train_subset=0", 'partition.scenario=""', "partition.scheme=iid"]))
    scaled = experiment.dataset.train_images.astype("float32") / 255.0
    assert experiment.task.pixel_mean == pytest.approx(tuple(scaled.mean(axis=(0, 2, 3))), abs=1e-5)
    assert experiment.task.pixel_std == pytest.approx(tuple(scaled.std(axis=(0, 2, 3))), abs=1e-4)
