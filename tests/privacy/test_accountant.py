"""The epsilon fedprior reports holds for the sampling that ran: PLD by default, checked against computations outside
fedprior's code path (dp-accounting's PLD accountant and its Gaussian PLD composed directly, RDP), for Poisson and
fixed-size sampling, adaptive clipping's centred count, and the refusals of what no bound covers."""

from __future__ import annotations

import math

import pytest

from fedprior.errors import ConfigError
from fedprior.experiments.config import load_config
from fedprior.privacy.accountant import ORDERS, PLD_INTERVAL, Accounting, rounds_within
from fedprior.privacy.config import accounting
from tests.support.cli import error_line, invoke

DELTA = 1e-5


def pld_directly(z: float, q: float, sensitivity: int, rounds: int, interval: float = PLD_INTERVAL / 10) -> float:
    """dp-accounting's PLD of the subsampled Gaussian composed directly, on a grid ten times finer than fedprior's."""
    from dp_accounting.pld import privacy_loss_distribution as pld

    one = pld.from_gaussian_mechanism(standard_deviation=z, sensitivity=sensitivity, sampling_prob=q, value_discretization_interval=interval)
    return float(one.self_compose(rounds).get_epsilon_for_delta(DELTA))


def pld_accountant_poisson(z: float, q: float, rounds: int) -> float:
    """dp-accounting's PLDAccountant on Poisson-sampled Gaussian events, the way DP-SGD libraries account (its own event path)."""
    import dp_accounting

    accountant = dp_accounting.pld.PLDAccountant(value_discretization_interval=PLD_INTERVAL / 10)
    accountant.compose(dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(z)), rounds)
    return float(accountant.get_epsilon(DELTA))


def test_dp_fedavg_cnn_samples_as_poisson_and_its_epsilon_is_an_independent_pld_within_one_percent():
    _, config = load_config("dp-fedavg-cnn")
    f, privacy = config.federation, config.privacy
    assert f.sampler == "poisson" and privacy.accountant == "pld"
    accounted = accounting(privacy, f.sampler, f.num_clients, f.fraction)
    assert accounted.describe() | {"sampling_rate": 0.1} == {
        "method": "pld",
        "relation": "add-or-remove",
        "sampling": "poisson",
        "sampling_rate": 0.1,
        "noise_multiplier": 1.0,
        "delta": 1e-5,
    }
    ours = accounted.epsilon(f.rounds)
    assert ours == pytest.approx(pld_accountant_poisson(1.0, 0.1, 20), rel=0.01)
    assert ours == pytest.approx(pld_directly(1.0, 0.1, 1, 20), rel=0.01)
    assert ours == pytest.approx(3.59, abs=0.01)  # the number of the issue (dp-accounting, interval 1e-3)
    # RDP, an upper bound of the same mechanism: 4.26, as the preset printed before
    rdp = Accounting(1.0, 1000, "poisson", 0.1, 100, "rdp", DELTA).epsilon(20)
    assert rdp == pytest.approx(4.26, abs=0.01) and ours < rdp


def test_fixed_size_sampling_is_accounted_replace_one_with_the_sensitivity_two_pld():
    _, config = load_config("dp-fedavg-cnn", ["federation.sampler=uniform"])
    f = config.federation
    accounted = accounting(config.privacy, f.sampler, f.num_clients, f.fraction)
    assert (accounted.sampling, accounted.relation, accounted.rate, accounted.sampled) == ("fixed-size", "replace-one", 0.1, 100)
    ours = accounted.epsilon(20)
    # the dominating pair of fixed-size sampling under replace-one (Zhu, Dong, Wang, AISTATS 2022): Gaussian of sensitivity 2
    assert ours == pytest.approx(pld_directly(1.0, 0.1, 2, 20), rel=0.01)
    assert ours == pytest.approx(15.6, abs=0.05)
    # far above what the Poisson accounting said of the same run before (4.26): the fixed-size draw really spends more
    assert ours > 3 * Accounting(1.0, 1000, "poisson", 0.1, 100, "pld", DELTA).epsilon(20)
    import dp_accounting

    rdp = dp_accounting.rdp.RdpAccountant(ORDERS, dp_accounting.NeighboringRelation.REPLACE_ONE)
    rdp.compose(dp_accounting.SelfComposedDpEvent(dp_accounting.SampledWithoutReplacementDpEvent(1000, 100, dp_accounting.GaussianDpEvent(0.5)), 20))
    assert Accounting(1.0, 1000, "fixed-size", 0.1, 100, "rdp", DELTA).epsilon(20) == pytest.approx(rdp.get_epsilon(DELTA), rel=1e-9)
    assert ours < rdp.get_epsilon(DELTA)  # PLD is tighter than RDP's bound


def test_each_rounds_epsilon_is_the_directly_composed_one_whatever_order_they_are_asked_in():
    accounted = Accounting(1.3, 500, "poisson", 0.05, 25, "pld", DELTA)
    per_round = [accounted.epsilon(t) for t in range(1, 9)]  # composed one round at a time
    assert per_round == sorted(per_round) and accounted.epsilon(0) == 0.0
    for t in (8, 3, 5):
        assert accounted.epsilon(t) == pytest.approx(pld_directly(1.3, 0.05, 1, t), rel=0.01)
    assert rounds_within(accounted, per_round[4], 8) == 5 and rounds_within(accounted, per_round[0] / 2, 8) == 0


def test_adaptive_clippings_centred_count_and_update_noise_are_together_the_multiplier_accounted():
    from fedprior.algorithms.pieces.differential_privacy import ClientLevelDp

    z, sigma_b = 0.5, 1.0
    dp = ClientLevelDp("server", z, 1.0, 100.0, adaptive=True, count_stddev=sigma_b)
    z_update = dp.update_noise_multiplier
    # add-or-remove: the update's sum moves by C (multiplier z_update), the centred count sum (b_k - 1/2) by 1/2 (multiplier 2 sigma_b);
    # Gaussian mechanisms compose by adding their inverse squared multipliers (Andrew et al. 2021, Theorem 1)
    combined = (z_update**-2 + (sigma_b / 0.5) ** -2) ** -0.5
    assert combined == pytest.approx(z, rel=1e-12)
    # replace-one: sensitivities 2C and 1; the combined multiplier against sensitivity 2 is z / 2 = z accounted with sensitivity 2
    assert ((z_update / 2) ** -2 + (sigma_b / 1) ** -2) ** -0.5 == pytest.approx(z / 2, rel=1e-12)
    # a plain count (sensitivity 1 under add-or-remove), as released before: a smaller multiplier than the one accounted
    plain = (z_update**-2 + sigma_b**-2) ** -0.5
    assert plain == pytest.approx(0.459, abs=1e-3)
    _, config = load_config("dp-fedavg-cnn", ["privacy.clipping=adaptive", "privacy.noise_multiplier=0.5", "privacy.count_stddev=1", "federation.rounds=20"])
    f = config.federation
    ours = accounting(config.privacy, f.sampler, f.num_clients, f.fraction).epsilon(20)
    assert ours == pytest.approx(pld_directly(combined, 0.1, 1, 20), rel=0.01)
    assert ours < pld_directly(plain, 0.1, 1, 20)  # what the plain count really spent is more


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["federation.sampler=size-weighted"], "federation.sampler: 'size-weighted' cannot run with privacy.dp on: its choice depends on"),
        (
            ["federation.sampler=power-of-choice", "federation.power_of_choice_candidates=200"],
            "federation.sampler: 'power-of-choice' cannot run with privacy.dp on",
        ),
        (["privacy.accountant=poisson"], "privacy.accountant: 'poisson' named a sampling model, which now follows federation.sampler"),
        (["privacy.accountant=without-replacement"], "privacy.accountant: 'without-replacement' named a sampling model"),
        (["federation.num_clients=20", "privacy.delta=0.2"], "privacy.delta: 0.2 is not below 1 / federation.num_clients = 0.05 (20 clients)"),
        (["privacy.noise_multiplier=1e-300"], "privacy.noise_multiplier: 1e-300 is below 0.1, where the PLD accountant's grid takes"),
        (["privacy.noise_multiplier=1e-300", "privacy.accountant=rdp"], "privacy.noise_multiplier: the RDP accountant cannot account z = 1e-300"),
        (
            ["privacy.clipping=adaptive", "privacy.noise_multiplier=0.5", "privacy.count_stddev=1", "privacy.clip_lr=1e300"],
            "privacy.clip_lr: 1e+300 makes adaptive clipping's step exp(-clip_lr (b - target_quantile)) overflow a float",
        ),
        (["privacy.max_epsilon=-1"], "privacy.max_epsilon: input should be greater than 0 (got -1)"),
    ],
)
def test_what_no_bound_covers_or_cannot_run_is_one_line_naming_the_field(overrides, message):
    with pytest.raises(ConfigError) as error:
        load_config("dp-fedavg-cnn", overrides)
    assert str(error.value).startswith(message) and "\n" not in str(error.value)


def test_samplers_without_dp_stay_selectable_and_dp_off_ignores_the_old_accountant_values():
    _, config = load_config("fedavg-cnn", ["federation.sampler=size-weighted"])
    assert config.federation.sampler == "size-weighted"
    _, config = load_config("fedavg-cnn", ["federation.sampler=poisson"])
    assert config.federation.sampler == "poisson"
    _, config = load_config("fedavg-cnn", ["privacy.accountant=poisson"])  # every run directory written before holds it
    assert config.privacy.accountant == "pld"
    _, config = load_config("fedavg-cnn")
    assert config.federation.sampler == "uniform"  # DP off: the sampling of every run before
    _, config = load_config("fedavg-cnn", ["privacy.dp=server"])
    assert config.federation.sampler == "poisson"  # DP on, sampler unset: DP-FedAvg's sampling, written into the config as run
    assert 'sampler = "poisson"' in config.to_toml()
    _, config = load_config("fedavg-cnn", ["privacy.dp=server", "federation.sampler=uniform"])
    assert config.federation.sampler == "uniform"


def test_every_kept_cell_config_loads_and_matches_what_the_table_would_run_now():
    from pathlib import Path

    from fedprior.experiments.resume_check import changes_that_matter
    from fedprior.experiments.run_config import read_config
    from fedprior.results.run_dir import RunDir

    cells = sorted(Path(__file__).resolve().parents[2].glob("benchmarks/results/cells/*/*/config.toml"))
    cells = [cell for cell in cells if 'accountant = "poisson"' in cell.read_text()]  # written before the accountant named the method
    assert len(cells) >= 20
    for cell in cells[:: len(cells) // 10]:
        _, config = read_config(RunDir(cell.parent))
        assert config.privacy.accountant == "pld" and config.privacy.dp == "none"
        recorded = config.to_dict() | {"privacy": {**config.to_dict()["privacy"], "accountant": "poisson"}}  # a checkpoint's record
        assert changes_that_matter(recorded, config.to_dict()) == {}


def test_noise_that_will_outweigh_the_updates_is_one_warning_line():
    from fedprior.privacy.wrap import noise_warning

    # the preset: z 1, d about 100k, 100 clients a round, 20 rounds: z sqrt(d) / m = 3.2 < sqrt(20)
    assert noise_warning(1.0, 100.0, 100_000, 20) is None
    line = noise_warning(1.0, 2.0, 100_000, 20)  # m = 2: the noise norm on the mean is 158 C
    assert line is not None and "\n" not in line and "the model will be mostly noise" in line and "158 C" in line
    assert math.isclose(1.0 * math.sqrt(100_000) / 2, 158.1, rel_tol=1e-3)


def test_dp_with_a_sampler_no_bound_covers_is_refused_by_the_dry_run_too():
    result = invoke("run", "dp-fedavg-cnn", "--set", "federation.sampler=size-weighted", "--dry-run")
    assert result.exit_code != 0
    assert error_line(result).startswith("error: federation.sampler: 'size-weighted' cannot run with privacy.dp on")
