"""The Flower adapter's pieces without Flower running: records, node files, client state, TLS certificates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

pytest.importorskip("flwr")

from flwr.app import ConfigRecord, Context, Message, MessageType, Metadata, RecordDict  # noqa: E402

from fedprior.algorithms.base import Broadcast, Reply, RoundInfo  # noqa: E402
from fedprior.experiments.build import build_experiment  # noqa: E402
from fedprior.experiments.config import load_config  # noqa: E402
from fedprior.flower.client_app import client_app  # noqa: E402
from fedprior.flower.client_state import ClientStateStore  # noqa: E402
from fedprior.flower.export import NodeData, export_nodes, node_of  # noqa: E402
from fedprior.flower.records import (  # noqa: E402
    RoundOrder,
    from_array_record,
    hosted_content,
    loss_content,
    read_hosted_content,
    read_losses_content,
    read_reply_content,
    read_train_content,
    reply_content,
    to_array_record,
    train_content,
)
from fedprior.runtime.clients import InProcessClients  # noqa: E402
from fedprior.runtime.threads import torch_threads  # noqa: E402

STATE = {
    "model.w": torch.randn(3, 4, dtype=torch.float32),
    "model.d": torch.randn(2, dtype=torch.float64),
    "count": torch.tensor(7, dtype=torch.int64),
    "mask": torch.tensor([True, False]),
    "empty": torch.zeros(0, 5),
    "half": torch.randn(4).half(),
}


def same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(a[k].dtype == b[k].dtype and a[k].shape == b[k].shape and torch.equal(a[k], b[k]) for k in a)


def test_state_round_trips_bit_for_bit_with_dtypes_and_shapes():
    back = from_array_record(to_array_record(STATE))
    assert same(STATE, back)
    back["model.w"].add_(1.0)  # writable, and a copy
    assert not torch.equal(back["model.w"], STATE["model.w"])


def test_broadcast_order_and_replies_round_trip():
    broadcast = Broadcast({"model.w": STATE["model.w"]}, {"lr": 0.5, "name": "x", "flag": True, "k": 3})
    order = RoundOrder(RoundInfo(seed=11, stage="server", round=4), step=9, clients=(2, 5), run_key="r-1", vectorize=False)
    got_broadcast, got_order = read_train_content(train_content(broadcast, order, "/data"))
    assert same(got_broadcast.arrays, broadcast.arrays) and got_broadcast.config == broadcast.config
    assert got_order == order
    assert got_order.info.for_client(5).generator().initial_seed() == order.info.for_client(5).generator().initial_seed()

    replies = {5: Reply({"model.w": STATE["model.w"] * 2}, 17, {"train_loss": 0.25, "steps": 3.0}), 2: Reply({"model.w": STATE["model.w"]}, 4, {})}
    got, failures = read_reply_content(reply_content(replies, {9: "ValueError: boom"}))
    assert [r.client_id for r in got] == [5, 2] and failures == {9: "ValueError: boom"}
    assert got[0].num_examples == 17 and got[0].metrics == {"train_loss": 0.25, "steps": 3.0}
    assert torch.equal(got[0].arrays["model.w"], STATE["model.w"] * 2)
    assert read_hosted_content(hosted_content([3, 1])) == [3, 1]


@pytest.fixture(scope="module")
def digits_experiment():
    name, config = load_config("fedavg-cnn", ["data.dataset=digits", "federation.num_clients=5", "federation.rounds=2"])
    return build_experiment(name, config)


def test_node_folders_hold_only_their_clients_and_give_back_the_same_tensors(tmp_path, digits_experiment):
    folders = export_nodes(digits_experiment, tmp_path, 2)
    assert [json.loads((f / "node.json").read_text())["clients"] for f in folders] == [[0, 2, 4], [1, 3]]
    node = NodeData(folders[1])
    assert node.hosted == [1, 3] and node.task == digits_experiment.task
    for client in (1, 3):
        mine, theirs = node.client_data(client), digits_experiment.client_data(client)
        assert same(mine, theirs)
        assert mine["x"].stride() == theirs["x"].stride()  # kernels pick their memory format from strides
    with pytest.raises(Exception, match="not hosted"):
        node.client_data(0)
    assert node_of(7, 3) == 1
    with pytest.raises(Exception, match="--nodes"):
        export_nodes(digits_experiment, tmp_path / "x", 6)


def test_client_update_on_a_node_equals_the_in_process_one(tmp_path, digits_experiment):
    node = NodeData(export_nodes(digits_experiment, tmp_path, 1)[0])
    algorithm, info = digits_experiment.algorithm, RoundInfo(seed=0, stage="federated", round=1)
    broadcast = algorithm.broadcast(algorithm.init(info), info)
    with torch_threads(digits_experiment.threads.train):  # the run's thread policy, which the node applies too
        here, _ = algorithm.client_update(broadcast, {}, digits_experiment.client_data(3), info.for_client(3))
        there, _ = node.algorithm.client_update(broadcast, {}, node.client_data(3), info.for_client(3))
        assert torch.get_num_threads() == digits_experiment.threads.train
    assert same(here.arrays, there.arrays) and here.metrics == there.metrics


def test_a_node_trains_in_the_runs_precision_like_the_in_process_client(tmp_path):
    name, config = load_config("fedavg-cnn", ["data.dataset=digits", "federation.num_clients=5", "federation.rounds=2", "run.precision=bf16"])
    experiment = build_experiment(name, config)
    node = NodeData(export_nodes(experiment, tmp_path, 1)[0])
    algorithm, info = experiment.algorithm, RoundInfo(seed=0, stage="federated", round=1)
    broadcast = algorithm.broadcast(algorithm.init(info), info)
    with torch_threads(experiment.threads.train):
        here, _ = algorithm.client_update(broadcast, {}, experiment.client_data(3), info.for_client(3))
        there, _ = node.algorithm.client_update(broadcast, {}, node.client_data(3), info.for_client(3))
    assert same(here.arrays, there.arrays) and here.metrics == there.metrics  # a node building in fp32 differs in the bf16 roundings


def test_client_state_is_versioned_by_step_and_survives_a_new_context(tmp_path):
    def context():
        return Context(run_id=1, node_id=1, node_config={}, state=RecordDict(), run_config={})

    store = ClientStateStore(context(), tmp_path, "run-a")
    assert store.load(4, step=1) == {}
    store.save(4, 1, {"q": torch.ones(2)})
    store.save(4, 3, {"q": torch.full((2,), 3.0)})
    assert torch.equal(store.load(4, step=5)["q"], torch.full((2,), 3.0))  # from the Context
    fresh = ClientStateStore(context(), tmp_path, "run-a")  # a restarted server: a new run, a new Context
    assert torch.equal(fresh.load(4, step=5)["q"], torch.full((2,), 3.0))
    assert torch.equal(fresh.load(4, step=3)["q"], torch.ones(2))  # step 3 replayed: the state it started from
    fresh.save(4, 3, {"q": torch.full((2,), 9.0)})
    assert sorted(p.name for p in (tmp_path / "run-a" / "4").iterdir()) == ["1.safetensors", "3.safetensors"]
    fresh.save(4, 6, {"q": torch.zeros(2)})
    assert sorted(p.name for p in (tmp_path / "run-a" / "4").iterdir()) == ["3.safetensors", "6.safetensors"]
    assert ClientStateStore(context(), tmp_path, "run-b").load(4, step=9) == {}  # another run shares nothing


def test_client_app_answers_query_and_train_and_reports_unknown_clients(tmp_path, digits_experiment):
    folder = export_nodes(digits_experiment, tmp_path, 2)[0]  # clients 0, 2, 4
    app = client_app()
    context = Context(run_id=1, node_id=7, node_config={"data-dir": str(folder)}, state=RecordDict(), run_config={})

    def ask(content, kind):
        metadata = Metadata(
            run_id=1, message_id="m", src_node_id=0, dst_node_id=7, reply_to_message_id="", group_id="", created_at=0.0, ttl=3600.0, message_type=kind
        )
        return app(Message(content=content, metadata=metadata), context)

    assert read_hosted_content(ask(RecordDict({"data-hint": ConfigRecord({"data-dir": ""})}), MessageType.QUERY).content) == [0, 2, 4]
    info = RoundInfo(seed=0, stage="federated", round=1)
    algorithm = digits_experiment.algorithm
    broadcast = algorithm.broadcast(algorithm.init(info), info)
    reply = ask(train_content(broadcast, RoundOrder(info, 1, (2, 3), "k")), MessageType.TRAIN)
    replies, failures = read_reply_content(reply.content)
    expected, _ = algorithm.client_update(broadcast, {}, digits_experiment.client_data(2), info.for_client(2))
    assert [r.client_id for r in replies] == [2] and same(replies[0].arrays, expected.arrays)
    assert failures == {3: "client 3 is not hosted on this node"}


def test_client_app_answers_evaluate_with_the_in_process_losses_of_its_candidates(tmp_path, digits_experiment):
    """Power-of-Choice on Flower: the node computes global_loss on its clients' data, the in-process pool's function, bit for bit."""
    folder = export_nodes(digits_experiment, tmp_path, 2)[0]  # clients 0, 2, 4
    app = client_app()
    context = Context(run_id=1, node_id=7, node_config={"data-dir": str(folder)}, state=RecordDict(), run_config={})
    metadata = Metadata(
        run_id=1,
        message_id="m",
        src_node_id=0,
        dst_node_id=7,
        reply_to_message_id="",
        group_id="",
        created_at=0.0,
        ttl=3600.0,
        message_type=MessageType.EVALUATE,
    )
    info = RoundInfo(seed=0, stage="federated", round=1)
    algorithm = digits_experiment.algorithm
    state = algorithm.init(info)
    reply = app(Message(content=loss_content(state, RoundOrder(info, 1, (2, 3, 4), "k")), metadata=metadata), context)
    losses, failures = read_losses_content(reply.content)
    pool = InProcessClients(algorithm, digits_experiment.client_data, digits_experiment.task.num_clients)
    assert losses == pool.losses(state, info, 1, [2, 4])[0] and len(losses) == 2
    assert failures == {3: "client 3 is not hosted on this node"}


def test_certificates_name_localhost_and_chain_to_the_ca(tmp_path):
    from cryptography import x509

    from fedprior.flower.tls import generate_certificates

    made = generate_certificates(tmp_path, hosts=("10.0.0.5", "link.example"))
    ca = x509.load_pem_x509_certificate(made.ca.read_bytes())
    cert = x509.load_pem_x509_certificate(made.cert.read_bytes())
    cert.verify_directly_issued_by(ca)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {"localhost", "link.example"} <= set(names.get_values_for_type(x509.DNSName))
    assert {"127.0.0.1", "10.0.0.5"} <= {str(ip) for ip in names.get_values_for_type(x509.IPAddress)}
    assert (Path(made.key).stat().st_mode & 0o777) == 0o600


def test_pyproject_declares_the_flower_app_with_the_run_config_the_server_reads():
    import tomllib

    from flwr.common.config import validate_config

    from fedprior.flower.local import app_pyproject
    from fedprior.flower.server_app import RUN_CONFIG_DEFAULTS

    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    app = pyproject["tool"]["flwr"]["app"]
    assert app["components"] == {"serverapp": "fedprior.experiments.flower_app:app", "clientapp": "fedprior.flower.client_app:app"}
    assert app["config"] == RUN_CONFIG_DEFAULTS
    for config in (pyproject, app_pyproject()):
        valid, errors, _ = validate_config(config, check_module=True)
        assert valid, errors


def test_run_runtime_option_sets_run_runtime_and_names_the_accepted_values(tmp_path):
    from tests.support.cli import fedprior

    result = fedprior("run", "fedavg-cnn", "--runtime", "flower", "--run-dir", str(tmp_path / "run"), cache=tmp_path)
    assert result.returncode == 2
    assert "run.runtime: input should be 'local', 'flower-sim' or 'flower-local'" in result.stderr
    assert not (tmp_path / "run").exists()
