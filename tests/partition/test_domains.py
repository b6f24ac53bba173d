"""Feature-shift federations' domains (``fedprior.partition.domains``; issue 55, item 3): the field's values, images
dealt to domains class by class, clients in blocks, each client's images from its own domain only, and the plot's colours."""

from __future__ import annotations

import numpy as np
import pytest

from fedprior.errors import ConfigError
from fedprior.partition.base import Partition
from fedprior.partition.dirichlet import DirichletPartitioner
from fedprior.partition.domains import STYLES, assign_domains, client_domains, domain_of_clients, domain_partition, parse_domains, shares
from fedprior.partition.plot import heatmap_figure


def test_the_accepted_values_and_a_one_line_error_for_others():
    assert parse_domains("") is None and parse_domains("  ") is None
    four = parse_domains("rotation:4")
    assert four is not None and four.kind == "rotation" and four.angles == (0.0, 90.0, 180.0, 270.0)  # Ghosh et al.'s K = 4
    assert parse_domains("Rotation:2").angles == (0.0, 180.0)  # type: ignore[union-attr]
    assert parse_domains("style").names == STYLES  # type: ignore[union-attr]
    assert parse_domains("dataset").kind == "dataset"  # type: ignore[union-attr]
    for bad in ("rotation:1", "rotation:x", "rotation", "styles", "rotation:99"):
        with pytest.raises(ConfigError, match=r"^partition\.domains: unknown value .*accepted: .*rotation:K.*style.*dataset") as error:
            parse_domains(bad)
        assert "\n" not in str(error.value)


def test_each_class_is_dealt_evenly_to_the_domains_by_a_fixed_draw():
    labels = np.repeat(np.arange(3), [8, 12, 5])
    domains = assign_domains(labels, 4)
    for k, count in enumerate((8, 12, 5)):
        shares = np.bincount(domains[labels == k], minlength=4)
        assert shares.max() - shares.min() <= 1 and shares.sum() == count
    assert np.array_equal(domains, assign_domains(labels, 4))  # the same for every run
    assert not np.array_equal(domains, assign_domains(labels, 4, seed=1))


def test_clients_are_dealt_to_domains_in_blocks_and_every_domain_needs_one():
    assert client_domains(10, 4).tolist() == [0, 0, 0, 1, 1, 2, 2, 2, 3, 3]
    assert client_domains(4, 4).tolist() == [0, 1, 2, 3]
    with pytest.raises(ConfigError, match="^federation.num_clients: 3 clients for the 4 domains"):
        client_domains(3, 4)


def test_every_client_holds_images_of_its_own_domain_split_by_the_scheme_inside_it():
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 5, 2000)
    domains = assign_domains(labels, 4)
    made = []

    def dirichlet(domain_labels, n, seed, d):
        made.append((n, seed))
        assert np.array_equal(domain_labels, labels[domains == d])
        return Partition({"train": tuple(DirichletPartitioner(n, 0.3, seed=seed).split(domain_labels))})

    part = domain_partition(labels, domains, 10, 4, seed=3, split=dirichlet)
    holdings = part.roles["train"]
    assert [n for n, _ in made] == [3, 2, 3, 2] and len({s for _, s in made}) == 4  # each domain its clients, its own seed
    owner = client_domains(10, 4)
    for c, held in enumerate(holdings):
        assert held.size and set(domains[held].tolist()) == {owner[c]}
    assert np.array_equal(np.sort(np.concatenate(holdings)), np.arange(2000))  # every image once
    assert domain_of_clients(holdings, domains).tolist() == owner.tolist()
    again = domain_partition(labels, domains, 10, 4, seed=3, split=dirichlet)
    assert all(np.array_equal(a, b) for a, b in zip(again.roles["train"], holdings, strict=True))


def test_a_labeled_set_is_shared_out_over_the_domains():
    assert shares(100, 4) == [25, 25, 25, 25] and shares(10, 4) == [3, 3, 2, 2] and sum(shares(7, 5)) == 7 and shares(0, 3) == [0, 0, 0]


def test_the_plot_colours_each_clients_size_bar_by_its_domain_and_names_the_domains():
    counts = np.arange(1, 25).reshape(6, 4)
    figure = heatmap_figure(counts, client_domains=[0, 0, 1, 1, 2, -1], domain_names=("a", "b", "c"), order="client")
    bars = next(ax for ax in figure.axes if ax.get_label() == "client sizes")
    colours = [tuple(p.get_facecolor()) for p in bars.patches]
    assert colours[0] == colours[1] != colours[2] == colours[3] != colours[4] and colours[5] != colours[4]
    assert [t.get_text() for t in bars.get_legend().get_texts()] == ["a", "b", "c"]
    plain = heatmap_figure(counts, order="client")
    bars = next(ax for ax in plain.axes if ax.get_label() == "client sizes")
    assert bars.get_legend() is None and len({tuple(p.get_facecolor()) for p in bars.patches}) == 1
