"""Issue 53 item 5: flower-sim with a large population: K virtual SuperNodes, node k hosting the clients c with
c mod K = k, reported as a range (never a list of N ids) and looked up when a round samples a client; the numbers
are those of the in-process runtime."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

pytest.importorskip("flwr")

from fedprior.errors import FedpriorError  # noqa: E402
from fedprior.flower.client_app import hosted_clients  # noqa: E402
from fedprior.flower.records import hosted_content, read_hosted_content  # noqa: E402
from fedprior.flower.server_app import NodeDirectory  # noqa: E402
from fedprior.flower.simulation import VIRTUAL_NODES, virtual_nodes  # noqa: E402


def test_a_virtual_node_hosts_every_kth_client_as_a_range():
    node = SimpleNamespace(task=SimpleNamespace(num_clients=1_000_000))
    hosted = hosted_clients(SimpleNamespace(node_config={"partition-id": 3, "num-partitions": 100}), node)
    assert hosted == range(3, 1_000_000, 100) and 999_903 in hosted and 4 not in hosted
    assert list(
        hosted_clients(SimpleNamespace(node_config={"partition-id": 3, "num-partitions": 6}), SimpleNamespace(task=SimpleNamespace(num_clients=6)))
    ) == [3]
    record = hosted_content(hosted)
    assert read_hosted_content(record) == hosted and "clients" not in record.config_records["hosted"]  # three numbers, not 10,000 ids
    assert read_hosted_content(hosted_content([5, 7])) == [5, 7]  # a real SuperNode's list


def test_the_server_finds_a_sampled_clients_node_in_the_ranges():
    directory = NodeDirectory(grid=None, settings=None)  # type: ignore[arg-type]
    directory.ranges = {11: range(0, 10**6, 3), 12: range(1, 10**6, 3), 13: range(2, 10**6, 3)}
    directory.hosts = {10**6 + 5: 99}
    assert [directory.host(c) for c in (0, 4, 999_998, 10**6 + 5, 10**6 + 6)] == [11, 12, 13, 99, None]


def test_virtual_nodes_one_per_client_up_to_the_default_then_capped():
    assert virtual_nodes(6) == 6 and virtual_nodes(10**6) == VIRTUAL_NODES and virtual_nodes(10**6, 7) == 7
    with pytest.raises(FedpriorError, match=r"nodes: 9 virtual SuperNodes for 6 clients; accepted: 1\.\.6"):
        virtual_nodes(6, 9)


@pytest.mark.slow
def test_six_clients_on_two_virtual_nodes_give_the_in_process_numbers(shared_cache, tmp_path, monkeypatch):
    for key, value in {"FLWR_TELEMETRY_ENABLED": "0", "FLWR_DISABLE_UPDATE_CHECK": "1", "RAY_USAGE_STATS_ENABLED": "0"}.items():
        monkeypatch.setenv(key, value)
    from tests.flower.test_simulation import CNN, assert_flower_run_is_the_local_one, run

    local = run(CNN, "local", tmp_path / "local")
    flower = run(CNN, "flower-sim", tmp_path / "flower", runtime_options={"nodes": 2})
    assert_flower_run_is_the_local_one(flower, local, tmp_path / "flower", tmp_path / "local")
