"""Feature-shift federations (``partition.domains``): which domain each image belongs to, and each client.

A domain is a style of image: every client belongs to one domain and holds images of that domain only; inside a
domain the images are split over its clients by ``partition.scheme`` (IID, Dirichlet, shards, ...), so feature
shift combines with label skew. The accepted values:

- ``"rotation:K"``: rotated images, K groups rotated by 0, 360/K, 2 x 360/K, ... degrees (Ghosh, Chung, Yin,
  Ramchandran, "An Efficient Framework for Clustered Federated Learning", NeurIPS 2020, Sec. 6: rotated MNIST with
  K = 4, rotations by 0, 90, 180 and 270 degrees; rotated CIFAR-10 with K = 2);
- ``"style"``: five image styles, :data:`STYLES` (original, low contrast, blurred, noisy, inverted:
  :mod:`fedprior.data.shift` makes them);
- ``"dataset"``: the dataset's own domains (Digit-5's digit datasets, DomainNet's and Office-Caltech-10's image
  sources), for a dataset that has them.

The synthetic domains (rotation, style) are a fixed function of the data: each class's images are dealt to the
K domains in a fixed random order (seed 0, the same for every run seed, as ``data.train_subset``), train and test
split alike, so each domain holds every class in equal shares and a run's seed changes its training only. Clients
are dealt to domains in blocks of consecutive ids (client c in domain floor(c K / N)), as even as they go.
Unlike Ghosh et al., who copy the whole training set into each rotation, each image lies in one domain here.
With a labeled/unlabeled split (``partition.num_labeled``) the labeled set is shared out over the domains (:func:`shares`)
and each domain split as FedDB's inside it.

NumPy only: a dry run assigns the domains without touching an image.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from fedprior.errors import ConfigError
from fedprior.partition.base import Partition
from fedprior.seeding import derived_seed

STYLES = ("original", "low-contrast", "blur", "noise", "inverted")
"""The domains of ``partition.domains = "style"``, in domain order (:func:`fedprior.data.shift.styled` draws each)."""
MAX_ROTATIONS = 36
ACCEPTED = f'"" (none), "rotation:K" (K = 2..{MAX_ROTATIONS} rotation groups), "style" ({len(STYLES)} styles: {", ".join(STYLES)}), "dataset" (the dataset\'s own domains)'


@dataclass(frozen=True)
class Domains:
    """A parsed ``partition.domains``: its kind and, for the synthetic kinds, the domains' names."""

    kind: str
    """'rotation', 'style' or 'dataset'."""
    names: tuple[str, ...] = ()
    """The domains, in order (empty for 'dataset': the dataset names them)."""

    @property
    def angles(self) -> tuple[float, ...]:
        """The rotation of each domain, in degrees counterclockwise (kind 'rotation')."""
        return tuple(360.0 * d / len(self.names) for d in range(len(self.names)))


def parse_domains(value: str) -> Domains | None:
    """``partition.domains`` parsed (None for ""); a ConfigError naming the field and the accepted values otherwise."""
    text = value.strip().lower()
    if not text:
        return None
    if text == "style":
        return Domains("style", STYLES)
    if text == "dataset":
        return Domains("dataset")
    match = re.fullmatch(r"rotation:(\d+)", text)
    if match and 2 <= int(match.group(1)) <= MAX_ROTATIONS:
        k = int(match.group(1))
        return Domains("rotation", tuple(f"rotated {360 * d / k:g}°" for d in range(k)))
    raise ConfigError(f"partition.domains: unknown value {value!r}; accepted: {ACCEPTED}")


def assign_domains(labels: np.ndarray, k: int, seed: int = 0) -> np.ndarray:
    """Each image's domain 0..k-1: every class's images dealt to the k domains in turn, in a random order drawn from ``seed``
    (so every domain holds each class's images in equal shares, to one image)."""
    rng = np.random.default_rng(seed)
    domains = np.empty(labels.size, dtype=np.int64)
    for label in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == label))
        domains[members] = np.arange(members.size) % k
    return domains


def client_domains(num_clients: int, k: int) -> np.ndarray:
    """The domain of each client: blocks of consecutive ids, client c in domain floor(c k / N); every domain gets a client."""
    if num_clients < k:
        raise ConfigError(
            f"federation.num_clients: {num_clients} clients for the {k} domains of partition.domains; every domain needs a client: use {k} or more"
        )
    return np.arange(num_clients) * k // num_clients


def shares(total: int, parts: int) -> list[int]:
    """``total`` split into ``parts`` near-equal whole shares, the remainder to the first ones (a labeled set over the domains)."""
    return [total // parts + (d < total % parts) for d in range(parts)]


def domain_partition(
    labels: np.ndarray, domains: np.ndarray, num_clients: int, num_domains: int, seed: int, split: Callable[[np.ndarray, int, int, int], Partition]
) -> Partition:
    """Domain d's images (``domains == d``) split over domain d's clients (:func:`client_domains`) by ``split(labels of its
    images, its number of clients, a seed derived from the run's for the domain, d)``, the config's scheme (and labeled split);
    each role's parts of every domain, in client order."""
    owner = client_domains(num_clients, num_domains)
    roles: dict[str, list[np.ndarray]] = {}
    for d in range(num_domains):
        clients = np.flatnonzero(owner == d)
        members = np.flatnonzero(domains == d)
        if members.size < clients.size:
            raise ConfigError(
                f"federation.num_clients: domain {d} of partition.domains holds {members.size} training images for its {clients.size} clients; use fewer clients"
            )
        for role, parts in split(labels[members], clients.size, derived_seed(seed, "partition", "domain", d), d).roles.items():
            held = roles.setdefault(role, [np.zeros(0, dtype=np.int64)] * num_clients)
            for client, part in zip(clients, parts, strict=True):
                held[client] = members[part]
    return Partition({role: tuple(parts) for role, parts in roles.items()})


def domain_of_clients(holdings: list[np.ndarray] | tuple[np.ndarray, ...], domains: np.ndarray) -> np.ndarray:
    """Each client's domain as its images give it (the most common domain among them; -1 for an empty client): what a plot colours."""
    return np.array([np.bincount(domains[h]).argmax() if h.size else -1 for h in holdings], dtype=np.int64)
