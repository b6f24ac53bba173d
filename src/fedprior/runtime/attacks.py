"""Misbehaving clients, simulated: a fixed fraction of the clients attacks in every round it is sampled.

``federation.malicious_fraction`` = p makes round(p N) of the N clients malicious, the same ones for the whole run,
drawn from the run seed's own stream (:func:`malicious_clients`); ``federation.attack`` says what a malicious client does
whenever it is sampled. With x_t the broadcast model and w the model its honest training gives, u = w - x_t its update
(every floating array the reply shares by name with the broadcast), s = ``federation.attack_scale``:

- ``sign_flip``: it replies x_t - s u (its honest step reversed, s times: an ascent step on its loss);
- ``scaled``: it replies x_t + s u (its honest update boosted s times);
- ``gaussian``: it replies x_t + e, e ~ N(0, s^2 I) (its update replaced by noise), drawn from the client's own stream
  of the round, so a run is repeatable;
- ``label_flip``: it trains honestly on labels y -> C - 1 - y (C classes) and replies what that gives (data poisoning).

:func:`with_attack` wraps an algorithm's client updates, so the attack runs wherever its clients do: in the in-process
runtime, its worker processes (each builds the algorithm from the same config), and on Flower's nodes (told by the exported task, ``flower/export.py``). The attacks on
the reply need a reply that is a model (the algorithms with ``algorithm.aggregation_rule``); label flipping needs labels.

Threat model (docs/privacy-robustness.md): a malicious client sends whatever it wants. Under client-side DP
(``privacy.dp = 'client'``) the attack therefore wraps the algorithm *after* its honest clip (the runs compose
``with_attack(with_privacy(algorithm))``), so a model attack's reply is not clipped (``scaled`` sends 10 times its
clipped update, of norm 10 C) and only the server's check bounds it (``algorithms/pieces/clip_check.py``); with
``'server'`` the server clips every reply anyway. ``label_flip`` poisons the data and then follows the protocol
(its update is clipped like any other).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

import torch

from fedprior.algorithms.base import Algorithm, Broadcast, ClientData, ClientInfo, Reply, State
from fedprior.seeding import numpy_rng

Attack = Literal["none", "sign_flip", "scaled", "gaussian", "label_flip"]
DEFAULT_SCALE = {"sign_flip": 1.0, "scaled": 10.0, "gaussian": 1.0}
"""``federation.attack_scale`` where it is unset: the plain sign flip, a tenfold update, unit-variance noise (fedprior's choices)."""


def malicious_count(num_clients: int, fraction: float) -> int:
    """round(fraction * num_clients): how many of the clients are malicious."""
    return int(round(fraction * num_clients))


def malicious_clients(seed: int, num_clients: int, fraction: float) -> frozenset[int]:
    """round(fraction * num_clients) client ids, drawn without replacement from the run seed's ``malicious`` stream: fixed for the run."""
    count = malicious_count(num_clients, fraction)
    return frozenset(int(c) for c in numpy_rng(seed, "malicious").choice(num_clients, size=count, replace=False))


@dataclass(frozen=True)
class Misbehaviour:
    """What the malicious clients do: the attack, its scale and who they are."""

    attack: Attack
    scale: float
    clients: frozenset[int]
    num_classes: int

    @classmethod
    def of_run(cls, attack: Attack, scale: float | None, seed: int, num_clients: int, fraction: float, num_classes: int) -> Misbehaviour:
        """A run's misbehaving clients from its fields (``federation.attack``, ``attack_scale``, ``malicious_fraction``; ``run.seed``):
        the attack's default scale where none is set, the clients drawn by :func:`malicious_clients`, none without an attack."""
        clients = malicious_clients(seed, num_clients, fraction) if attack != "none" else frozenset()
        return cls(attack, scale if scale is not None else DEFAULT_SCALE.get(attack, 1.0), clients, num_classes)

    def data(self, data: ClientData, info: ClientInfo) -> ClientData:
        """A malicious client's training data under ``label_flip`` (y -> C - 1 - y); anyone else's as it is."""
        if self.attack != "label_flip" or info.client_id not in self.clients:
            return data
        return {**data, "y": self.num_classes - 1 - data["y"]}

    def reply(self, message: Broadcast, reply: Reply, info: ClientInfo) -> Reply:
        """A malicious client's reply under a model attack (the module docstring); anyone else's as it is."""
        if self.attack in ("none", "label_flip") or info.client_id not in self.clients:
            return reply
        arrays = dict(reply.arrays)
        generator = info.generator("attack")
        for name, w in reply.arrays.items():
            if name not in message.arrays or not w.is_floating_point():
                continue
            x = message.arrays[name].to(w.device)
            if self.attack == "gaussian":
                update = self.scale * torch.randn(w.shape, generator=generator, dtype=torch.float32).to(device=w.device, dtype=w.dtype)
            else:
                update = (w - x) * (-self.scale if self.attack == "sign_flip" else self.scale)
            arrays[name] = x + update
        return replace(reply, arrays=arrays)


def with_attack(algorithm: Algorithm, misbehaviour: Misbehaviour) -> Algorithm:
    """``algorithm`` whose malicious clients misbehave (:class:`Misbehaviour`); itself where no client does."""
    if misbehaviour.attack == "none" or not misbehaviour.clients:
        return algorithm
    update, many = algorithm.client_update, algorithm.client_update_many

    def client_update(message: Broadcast, state: State, data: ClientData, info: ClientInfo) -> tuple[Reply, State]:
        reply, new_state = update(message, state, misbehaviour.data(data, info), info)
        return misbehaviour.reply(message, reply, info), new_state

    def client_update_many(message: Broadcast, states: Sequence[State], datas: Sequence[ClientData], infos: Sequence[ClientInfo]) -> list[tuple[Reply, State]]:
        assert many is not None
        results = many(message, states, [misbehaviour.data(d, i) for d, i in zip(datas, infos, strict=True)], infos)
        return [(misbehaviour.reply(message, r, i), s) for (r, s), i in zip(results, infos, strict=True)]

    return algorithm.with_(client_update=client_update, client_update_many=None if many is None else client_update_many)
