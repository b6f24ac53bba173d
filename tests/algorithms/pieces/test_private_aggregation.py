"""Client-level DP and SecAgg+ against a robust rule and each other: one line naming the cause (the rule, or DP's
server-side clipping under SecAgg+), refused before any data loads (reliability probe 5, defect #8)."""

from __future__ import annotations

import pytest

from fedprior.algorithms.pieces.private_aggregation import check_private_aggregation
from fedprior.errors import ConfigError
from tests.support.cli import TINY, error_line, invoke

RULE_UNDER_DP = (
    "privacy.dp: algorithm.aggregation_rule = 'median' reads each client's reply, and DP-FedAvg gives the aggregate only the noised mean "
    "of the clipped updates; accepted with privacy.dp = 'server': algorithm.aggregation_rule = 'mean' (or privacy.dp = 'none' for the robust rule)"
)
RULE_UNDER_SECAGG = (
    "--secagg: algorithm.aggregation_rule = 'krum' reads each client's reply, and SecAgg+ gives the server only their sum; "
    "accepted with --secagg: algorithm.aggregation_rule = 'mean'"
)
SERVER_DP_UNDER_SECAGG = (
    "--secagg: privacy.dp = 'server' clips each client's update on the server, and under SecAgg+ the server sees only their sum "
    "(it cannot clip what it cannot see); accepted with --secagg: privacy.dp = 'client' (clients clip, SecAgg+ sums, the server adds the noise) or 'none'"
)


@pytest.mark.parametrize(
    ("rule", "dp", "secagg", "message"),
    [
        ("median", "server", False, RULE_UNDER_DP),
        ("median", "server", True, RULE_UNDER_DP),  # DP's refusal first: it holds without SecAgg+ too
        ("krum", "client", False, RULE_UNDER_DP.replace("'server'", "'client'", 1).replace("'median'", "'krum'")),
        ("krum", "none", True, RULE_UNDER_SECAGG),
        ("mean", "server", True, SERVER_DP_UNDER_SECAGG),
        (
            "mean",
            "sample",
            True,
            SERVER_DP_UNDER_SECAGG.replace(
                "'server' clips each client's update on the server, and under SecAgg+ the server sees only their sum (it cannot clip what it cannot see)",
                "'sample' reports each client's own epsilon, which SecAgg+'s sum hides from the server",
            ),
        ),
    ],
)
def test_each_refusal_names_its_cause_not_the_algorithm(rule, dp, secagg, message):
    with pytest.raises(ConfigError) as refused:
        check_private_aggregation(rule, dp, secagg)
    assert str(refused.value) == message
    assert "algorithm 'fedavg'" not in str(refused.value)


@pytest.mark.parametrize(
    ("rule", "dp", "secagg"), [("mean", "server", False), ("mean", "client", False), ("krum", "none", False), ("mean", "none", True), ("mean", "client", True)]
)
def test_what_dp_and_secagg_run_with_passes(rule, dp, secagg):
    check_private_aggregation(rule, dp, secagg)


@pytest.mark.parametrize("dry_run", [[], ["--dry-run"]], ids=["run", "dry-run"])
def test_dp_with_a_robust_rule_is_one_line_naming_the_rule_before_any_data_loads(tmp_path, dry_run):
    """`fedprior run fedavg-cnn --set privacy.dp=server --set algorithm.aggregation_rule=median`: exit 2 with the rule named,
    before the run folder is made (the run and its dry run refuse the same)."""
    run_dir = tmp_path / "run"
    result = invoke("run", "fedavg-cnn", *TINY, "--set", "privacy.dp=server", "--set", "algorithm.aggregation_rule=median", "--run-dir", run_dir, *dry_run)
    assert result.exit_code == 2
    assert error_line(result) == f"error: {RULE_UNDER_DP}"
    assert not run_dir.exists()


def test_flower_local_secagg_with_server_side_dp_is_one_line_before_any_process_starts(tmp_path):
    """`fedprior flower local --secagg --set privacy.dp=server` (and with a robust rule): exit 2 naming the cause, before any
    data loads or any SuperLink starts (nothing written)."""
    pytest.importorskip("flwr")
    run_dir = tmp_path / "run"
    secure = ("flower", "local", "--nodes", "3", "fedavg-cnn", *TINY, "--secagg", "--run-dir", run_dir)
    result = invoke(*secure, "--set", "privacy.dp=server")
    assert result.exit_code == 2 and error_line(result) == f"error: {SERVER_DP_UNDER_SECAGG}"
    robust = invoke(*secure, "--set", "federation.num_clients=10", "--set", "algorithm.aggregation_rule=krum")
    assert robust.exit_code == 2 and error_line(robust) == f"error: {RULE_UNDER_SECAGG}"
    assert not run_dir.exists()
