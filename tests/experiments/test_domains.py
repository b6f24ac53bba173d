"""Feature-shift federations in a run (``partition.domains``, ``fedprior.experiments.domains``; issue 55, item 3): the images
shifted into each client's domain, the config's refusals before any data loads (the dry run's too), and a run's plot."""

from __future__ import annotations

import numpy as np
import pytest

from fedprior.data import load_dataset
from fedprior.errors import ConfigError
from fedprior.experiments.build import build_experiment
from fedprior.experiments.config import load_config
from fedprior.experiments.domains import with_domains
from fedprior.experiments.runner import start
from fedprior.partition.domains import client_domains
from tests.support.algorithm_setups import SETUPS, SMALL
from tests.support.cli import error_line, invoke


def test_rotated_images_are_the_originals_turned_and_the_labels_unchanged():
    digits = load_dataset("digits")
    turned = with_domains(digits, "rotation:4")
    assert turned.domain_names == ("rotated 0°", "rotated 90°", "rotated 180°", "rotated 270°")
    assert np.array_equal(turned.train_labels, digits.train_labels) and np.array_equal(turned.test_labels, digits.test_labels)
    for split in ("train", "test"):
        before, after, domains = getattr(digits, f"{split}_images"), getattr(turned, f"{split}_images"), getattr(turned, f"{split}_domains")
        assert np.bincount(domains).max() - np.bincount(domains).min() <= 10  # about a quarter each (each class dealt evenly)
        for i in np.flatnonzero(domains != 0)[:20]:
            assert np.array_equal(after[i, 0], np.rot90(before[i, 0], domains[i]))
    plan = with_domains(digits, "rotation:4", images=False)  # the dry run's: the same domains, images untouched
    assert np.array_equal(plan.train_domains, turned.train_domains) and plan.train_images is digits.train_images
    assert with_domains(digits, "") is digits
    with pytest.raises(ConfigError, match="^partition.domains: 'dataset' uses the dataset's own domains, and 'digits' has none"):
        with_domains(digits, "dataset")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["partition.domains=rotation:0"], r"^partition\.domains: unknown value 'rotation:0'; accepted: "),
        (["partition.domains=dataset"], "^partition.domains: 'dataset' uses the dataset's own domains, and 'digits' has none"),
        (["partition.domains=style", "federation.num_clients=4"], "^federation.num_clients: 4 clients for the 5 domains"),
        (["partition.domains=style", "partition.scheme=natural"], "^partition.scheme: the natural owners ignore the domains"),
    ],
)
def test_a_bad_setting_is_one_config_error_before_any_data_loads(overrides, message):
    with pytest.raises(ConfigError, match=message) as error:
        load_config("fedavg-cnn", ["data.dataset=digits", *overrides])
    assert "\n" not in str(error.value)


def test_the_dry_run_refuses_the_same(tmp_path):
    assert "partition.domains: unknown value 'rotate:4'" in error_line(invoke("run", "fedavg-cnn", "--set", "partition.domains=rotate:4", "--dry-run"))
    result = invoke("run", "fedavg-cnn", "--set", "data.dataset=digits", "--set", "partition.domains=rotation:4", "--dry-run", cache=tmp_path)
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("name", ["fedavg", "fedbn"])
@pytest.mark.parametrize("domains", ["rotation:4", "style"])
def test_each_client_trains_on_images_of_its_own_domain(shared_cache, one_torch_thread, name, domains):
    preset, overrides = SETUPS[name]
    _, config = load_config(preset, [*overrides, *SMALL, f"partition.domains={domains}", "federation.num_clients=10"])
    experiment = build_experiment("shifted", config)
    shifted, k = experiment.dataset, 4 if domains == "rotation:4" else 5
    assert shifted.train_domains is not None and len(shifted.domain_names) == k
    owner = client_domains(10, k)
    for c in range(10):
        held = experiment.partition.holdings(c)
        assert held.size and set(shifted.train_domains[held].tolist()) == {owner[c]}
    original = load_dataset("digits")
    changed = shifted.train_domains != 0
    assert not np.array_equal(shifted.train_images[changed], original.train_images[changed])
    assert np.array_equal(shifted.train_images[~changed], original.train_images[~changed])  # domain 0 is the original


def write_two_digit5_parts(folder) -> None:
    """SynthDigits and USPS, 40 training and 10 test images each, the label k in every tenth."""
    from scipy.io import savemat

    rng = np.random.default_rng(0)
    labels = np.arange(40) % 10
    savemat(
        folder / "syn_number.mat",
        {
            "train_data": rng.integers(0, 256, (40, 32, 32, 3)).astype(np.uint8),
            "test_data": np.zeros((10, 32, 32, 3), np.uint8),
            "train_label": labels[:, None],
            "test_label": np.arange(10)[:, None],
        },
    )
    cell = np.empty((2, 2), dtype=object)
    cell[0, 0], cell[0, 1] = rng.random((40, 1, 28, 28)), labels[:, None]
    cell[1, 0], cell[1, 1] = np.zeros((10, 1, 28, 28)), np.arange(10)[:, None]
    savemat(folder / "usps_28x28.mat", {"dataset": cell})


def test_a_multi_domain_dataset_deals_its_own_domains_to_the_clients(tmp_path, one_torch_thread, monkeypatch):
    monkeypatch.setenv("FEDPRIOR_CACHE", str(tmp_path / "cache"))
    write_two_digit5_parts(tmp_path)
    base = ["data.dataset=digit5", f"data.root='{tmp_path}'", "federation.num_clients=4", "federation.rounds=1", "algorithm.model=convnet-small"]
    _, config = load_config("fedbn-rotated", [*base, "partition.domains=dataset", "partition.local_test_fraction=0"])
    experiment = build_experiment("digit5", config)
    assert experiment.dataset.domain_names == ("syn", "usps")
    assert [set(experiment.dataset.train_domains[experiment.partition.holdings(c)].tolist()) for c in range(4)] == [{0}, {0}, {1}, {1}]
    with pytest.raises(ConfigError, match="^partition.domains: 'digit5' has its own domains; accepted with it: 'dataset'"):
        load_config("fedbn-rotated", base)
    _, mixed = load_config("fedbn-rotated", [*base, 'partition.domains=""', "partition.local_test_fraction=0"])
    plain = build_experiment("mixed", mixed)  # without partition.domains the sources are one pool
    assert any(len(set(plain.dataset.train_domains[plain.partition.holdings(c)].tolist())) == 2 for c in range(4))


def test_a_semi_supervised_federation_splits_labeled_and_unlabeled_inside_each_domain(shared_cache, one_torch_thread):
    preset, overrides = SETUPS["feddb"]  # 100 labeled images over 8 clients
    _, config = load_config(preset, [*overrides, *SMALL, "partition.domains=rotation:4"])
    experiment = build_experiment("shifted-feddb", config)
    domains, owner = experiment.dataset.train_domains, client_domains(8, 4)
    labeled = experiment.partition.roles["labeled"]
    assert sum(part.size for part in labeled) == 100  # 25 a domain, each drawn class-balanced as FedDB's split
    assert [int(sum(labeled[c].size for c in np.flatnonzero(owner == d))) for d in range(4)] == [25, 25, 25, 25]
    for role, parts in experiment.partition.roles.items():
        for c, part in enumerate(parts):
            assert set(domains[part].tolist()) <= {owner[c]}, (role, c)


def test_a_run_plots_the_clients_domains(shared_cache, one_torch_thread, tmp_path, monkeypatch):
    import fedprior.experiments.runner as runner

    drawn = {}
    real = runner.plot_heatmap

    def spy(*args, **kwargs):
        drawn.update(kwargs)
        return real(*args, **kwargs)

    monkeypatch.setattr(runner, "plot_heatmap", spy)
    preset, overrides = SETUPS["fedbn"]
    name, config = load_config(preset, [*overrides, *SMALL, "partition.domains=style", "federation.num_clients=10"])
    summary = start(name, config, tmp_path / "run")
    assert drawn["domain_names"] == ("original", "low-contrast", "blur", "noise", "inverted")
    assert drawn["client_domains"].tolist() == client_domains(10, 5).tolist() and "domains style" in drawn["title"]
    assert (tmp_path / "run" / "partition.png").stat().st_size > 0
    assert 0 <= summary["final_client_accuracy_pooled"] <= 1
