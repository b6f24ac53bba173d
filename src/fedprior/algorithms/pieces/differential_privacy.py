"""Client-level differential privacy (DP-FedAvg) around any algorithm whose clients reply with their trained model.

McMahan, Ramage, Talwar, Zhang, "Learning Differentially Private Recurrent Language Models", ICLR 2018,
Algorithm 1 (DP-FedAvg) with uniform client weights and the fixed-denominator estimator of its Sec. 2
(the denominator: qN, the expected clients a round, under Poisson sampling, m under fixed-size sampling):

- each sampled client k's update Delta_k = w_k - w_t is clipped to L2 norm C as one flat vector
  (FlatClip): Delta_k * min(1, C / ||Delta_k||)                                   (:func:`clip_update`);
- the server averages them over the denominator, sum_k clip(Delta_k) / (qN or m), and adds
  Gaussian noise N(0, sigma^2) to every coordinate with sigma = z C / (qN or m)     (:func:`noise_std`);
- w_{t+1} = w_t + that noised mean. A round that sampled no client (Poisson sampling can) or whose clients
  held no data still releases it: the noised mean of no updates, pure noise, counted as a release.

The clipping runs on the server (``'server'``: the server sees the raw updates and clips them) or on the
clients (``'client'``: each client clips its own update before it leaves; the server adds the noise).

Adaptive clipping (Andrew, Thakkar, McMahan, Ramaswamy, "Differentially Private Learning with Adaptive
Clipping", NeurIPS 2021, Algorithm 1): C follows the gamma-quantile of the update norms. Each client
reports b_k = 1[||Delta_k|| <= C] (unclipped); the server releases the centred count
sum_k (b_k - 1/2) + N(0, sigma_b^2), whose sensitivity is 1/2 under add-or-remove (and 1 under replace-one), reads
b = that / (qN or m) + 1/2 and steps C <- C exp(-eta_C (b - gamma)) (the geometric update), after the round's noise
was drawn with the C its updates were clipped to. With the count centred, the two releases together are one Gaussian
mechanism of noise multiplier z (Theorem 1: (z_Delta)^-2 + (2 sigma_b)^-2 = z^-2 under add-or-remove; with sensitivities
2C and 1 under replace-one, 4 (z_Delta)^-2 + sigma_b^-2 = 4 z^-2, the multiplier z / 2 of a sensitivity-2 accounting) when
the updates get z_Delta = (z^-2 - (2 sigma_b)^-2)^(-1/2) (:attr:`ClientLevelDp.update_noise_multiplier`), which needs
z < 2 sigma_b; sigma_b defaults to the denominator / 20, the paper's recommendation (m / 20).

:func:`with_client_level_dp` composes this with an algorithm as ``with_server_optimizer`` composes a server
step: the clients and the rest of the server state are the algorithm's own, and its ``aggregate``, which must read
the replies only through their mean (``Algorithm.mean_aggregate``: FedAvg's, FedProx's, a server optimizer's step on
it), receives one reply, the noised mean of the clipped updates (:func:`noised_mean`); a server optimizer then steps
on the private mean (DP-FedAdam and the like). The update is every floating-point array of the reply
(parameters and float buffers alike, as Flower clips them); integer buffers (BatchNorm's step counters) take
the first reply's value, as FedAvg's mean does. The noise is drawn from the
round's seeded server stream (``RoundInfo.generator("privacy", ...)``), so a run and its resume draw the same.

With client-side clipping the server checks each reply's norm and bit (:func:`checked_replies`, ``clip_check.py``:
a reply above C beyond float tolerance is clipped or dropped and counted, ``dp_overnorm_replies``). Under SecAgg+ the
aggregate is handed instead one Reply holding the sum of the clipped updates and of the bits (:func:`secure_sum_reply`,
``Algorithm.secure_sum``) and adds the same noise to it (:func:`noised_sum`); no single reply can be checked there.

The current C, the noise std and the number of noised releases are server State (``privacy.*``): checkpoints,
resume and Flower carry them, and they are never broadcast except C, in the broadcast's config, to clients
that clip. ``round_metrics`` reports ``dp_noise_std``, ``dp_clip_norm`` (the C of the round), with adaptive
clipping ``dp_unclipped_fraction`` (the noised b), and ``dp_epsilon`` from the accounting given, beside
``dp_bound``: its method, neighbouring relation and sampling (:class:`fedprior.privacy.accountant.Accounting`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal, Protocol

import torch

from fedprior.algorithms.base import Algorithm, Broadcast, ClientData, ClientInfo, Reply, RoundInfo, State, require_mean_aggregate
from fedprior.algorithms.pieces.clip_check import Overnorm, check_reply, reply_dtype
from fedprior.errors import ConfigError

PREFIX = "privacy."
CLIP_NORM = PREFIX + "clip_norm"
"""State key of C for the next round (the initial C, then adaptive clipping's estimate)."""
USED_CLIP_NORM = PREFIX + "used_clip_norm"
NOISE_STD = PREFIX + "noise_std"
RELEASES = PREFIX + "releases"
UNCLIPPED = PREFIX + "unclipped_fraction"
CONFIG_CLIP_NORM = "dp_clip_norm"
"""Broadcast config key of C for clients that clip (Flower's ``clipping_norm``)."""
METRIC_UNCLIPPED = "dp_unclipped"
"""Reply metric of a client that clips: b_k = 1 if its update was within C (Andrew et al. 2021, Algorithm 1)."""
OVERNORM = PREFIX + "overnorm_replies"
CORRECTED_BITS = PREFIX + "corrected_bits"
CHECKED = PREFIX + "checked_replies"
"""State keys of client-side clipping's server check (``clip_check.py``): the round's replies above C, bits corrected, replies checked."""
SECURE_SUM_CLIENTS = "dp_secure_sum_clients"
SECURE_SUM_UNCLIPPED = "dp_secure_sum_unclipped"
"""Metrics of the one Reply SecAgg+ hands a client-side DP aggregate (:func:`secure_sum_reply`): the clients summed, their bits' sum."""

Clipping = Literal["server", "client"]


class Accounting(Protocol):
    """What the server reports epsilon with (``fedprior.privacy.accountant.Accounting``, built by the run's ``[privacy]`` section)."""

    def epsilon(self, releases: int) -> float: ...

    def label(self) -> str: ...


@dataclass(frozen=True)
class ClientLevelDp:
    """The settings of DP-FedAvg: where updates are clipped, z, C (the initial C when adaptive), m, and adaptive clipping's own."""

    clipping: Clipping
    noise_multiplier: float
    clip_norm: float
    denominator: float
    """The fixed denominator of the noised mean: m (fixed-size sampling) or the expected count qN (Poisson sampling), not rounded."""
    adaptive: bool = False
    target_quantile: float = 0.5
    clip_lr: float = 0.2
    count_stddev: float | None = None
    overnorm: Overnorm = "clip"
    """With client-side clipping, what the server does with a reply above C (``clip_check.py``): clip it to C, or drop it."""

    @property
    def count_std(self) -> float:
        """sigma_b, the std of the noise on the count of unclipped updates: given, or the denominator / 20 (Andrew et al. 2021's m / 20)."""
        return self.denominator / 20 if self.count_stddev is None else self.count_stddev

    @property
    def update_noise_multiplier(self) -> float:
        """z_Delta: z itself with fixed clipping; with adaptive clipping (z^-2 - (2 sigma_b)^-2)^(-1/2) (Andrew et al. 2021, Theorem 1)."""
        if not self.adaptive:
            return self.noise_multiplier
        return (self.noise_multiplier**-2 - (2 * self.count_std) ** -2) ** -0.5


def check_client_level_dp(dp: ClientLevelDp) -> None:
    """ConfigError naming the ``privacy.*`` field for settings DP-FedAvg cannot run with (the config checks the same first)."""
    if not dp.noise_multiplier > 0:
        raise ConfigError(f"privacy.noise_multiplier: must be > 0 with privacy.dp on (got {dp.noise_multiplier}); it is the noise std over the clip norm")
    if not dp.clip_norm > 0:
        raise ConfigError(f"privacy.clip_norm: must be > 0 (got {dp.clip_norm})")
    if not dp.denominator > 0:
        raise ConfigError(f"federation: {dp.denominator:g} clients expected per round; DP-FedAvg needs more than 0")
    if dp.adaptive and not dp.noise_multiplier < 2 * dp.count_std:
        raise ConfigError(
            f"privacy.noise_multiplier: {dp.noise_multiplier:g} must be below 2 * privacy.count_stddev = {2 * dp.count_std:g} with adaptive clipping "
            f"(the count's noise alone would exceed the budget; Andrew et al. 2021, Theorem 1); raise privacy.count_stddev"
            + (f" (unset: m / 20 = {dp.count_std:g})" if dp.count_stddev is None else "")
            + " or lower privacy.noise_multiplier"
        )


def noise_std(noise_multiplier: float, clip_norm: float, denominator: float) -> float:
    """sigma = z C / m (or z C / (qN)), the per-coordinate noise std on the mean of clipped updates over the fixed denominator
    (McMahan et al. 2018, Algorithm 1; Flower's ``compute_stdv``)."""
    return noise_multiplier * clip_norm / denominator


def flat_norm(update: dict[str, torch.Tensor]) -> torch.Tensor:
    """The L2 norm of all arrays of ``update`` as one flat vector (in float64)."""
    if not update:
        return torch.zeros((), dtype=torch.float64)
    return torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(v.double()) for v in update.values()]))


def clip_update(update: dict[str, torch.Tensor], clip_norm: float) -> tuple[dict[str, torch.Tensor], bool]:
    """(update * min(1, C / ||update||), whether ||update|| <= C): FlatClip (McMahan et al. 2018, Sec. 2), the b_k of Andrew et al. 2021."""
    norm = float(flat_norm(update))
    scale = 1.0 if norm <= clip_norm else clip_norm / norm
    return {k: v * scale for k, v in update.items()}, norm <= clip_norm


def model_update(model: dict[str, torch.Tensor], reference: dict[str, torch.Tensor], algorithm: str) -> dict[str, torch.Tensor]:
    """w_k - w_t for every floating-point array of the reply ``model``; ConfigError where the reply is not the client's model."""
    strange = [k for k, v in model.items() if k not in reference or reference[k].shape != v.shape]
    if strange:
        raise ConfigError(
            f"privacy.dp: algorithm '{algorithm}' replies with {strange[0]!r}, which is no array of the model it was sent; "
            "client-level DP clips model updates w_k - w and needs an algorithm whose reply is the client's trained model"
        )
    return {k: v - reference[k].to(v.device) for k, v in model.items() if v.is_floating_point()}


def clipped_reply(reply: Reply, reference: dict[str, torch.Tensor], clip_norm: float, algorithm: str) -> tuple[Reply, bool]:
    """``reply`` whose model is w_t + clip(w_k - w_t), weighted 1 (DP-FedAvg's equal weights), and whether it was within C."""
    update, unclipped = clip_update(model_update(reply.arrays, reference, algorithm), clip_norm)
    arrays = {k: (reference[k].to(v.device) + update[k]).to(v.dtype) if k in update else v for k, v in reply.arrays.items()}
    return replace(reply, arrays=arrays, num_examples=1), unclipped


@dataclass(frozen=True)
class CheckedReplies:
    """The replies of clients that clipped, after the server's check (``clip_check.py``): those it sums, their bits' sum, what it found."""

    replies: list[Reply]
    unclipped: float
    overnorm: int
    corrected_bits: int


def checked_replies(replies: Sequence[Reply], reference: State, clip_norm: float, overnorm: Overnorm, algorithm: str) -> CheckedReplies:
    """Client-side clipping checked by the server: each reply's update norm recomputed, one above C beyond the float tolerance
    clipped to C (``overnorm = 'clip'``) or left out of the sum (``'drop'``: a zero update), each bit checked against the norm (``clip_check.py``).
    A reply within the tolerance is passed on as it came, so honest clients' numbers are those of an unchecked sum."""
    kept: list[Reply] = []
    unclipped, over, corrected = 0.0, 0, 0
    for reply in replies:
        update = model_update(reply.arrays, reference, algorithm)
        model_norm = float(flat_norm({k: v for k, v in reply.arrays.items() if k in update}))
        found = check_reply(float(flat_norm(update)), model_norm, reply_dtype(update), clip_norm, reply.metrics.get(METRIC_UNCLIPPED))
        over += found.overnorm
        corrected += found.bit_corrected
        unclipped += found.bit
        if found.overnorm:  # 'drop': its update counts as zero (w_t itself), the denominator m is unchanged
            reply = clipped_reply(reply, reference, clip_norm if overnorm == "clip" else 0.0, algorithm)[0]
        kept.append(reply)
    return CheckedReplies(kept, unclipped, over, corrected)


def noised_mean(
    clipped: Sequence[Reply], reference: State, denominator: float, sigma: float, generator: torch.Generator, algorithm: str, model: State | None = None
) -> Reply:
    """One Reply: w_t + sum_k clip(Delta_k) / denominator + N(0, sigma^2) in every floating-point array (McMahan et al. 2018,
    Algorithm 1 with the fixed denominator of its Sec. 2, even where fewer clients answered); the noise drawn in key order from
    ``generator``. An integer array (a step counter) is the first reply's, as FedAvg's mean keeps it. With no reply (a round that
    sampled nobody, or whose clients held no data) it is w_t + noise over the arrays of ``model`` (the broadcast's: what a reply holds)."""
    if not clipped and model is None:
        raise ValueError("noised_mean: no reply and no model to release the noise on")
    keys = sorted(clipped[0].arrays if clipped else model)  # type: ignore[arg-type]  # model is given where no reply is
    if any(sorted(r.arrays) != keys for r in clipped):
        raise ConfigError(f"privacy.dp: algorithm '{algorithm}' replies with different arrays from different clients; client-level DP needs whole models")
    arrays = {}
    for key in keys:
        first = clipped[0].arrays[key] if clipped else model[key]  # type: ignore[index]
        if not first.is_floating_point():
            arrays[key] = first
            continue
        x = reference[key].to(first.device)
        total = (
            torch.stack([r.arrays[key].to(first.device, torch.float64) - x.double() for r in clipped]).sum(0)
            if clipped
            else torch.zeros_like(x, dtype=torch.float64)
        )
        arrays[key] = noised_array(x, total, denominator, sigma, generator, first.dtype)
    return Reply(arrays, num_examples=len(clipped) or 1, client_id=clipped[0].client_id if clipped else -1)


def noised_array(x: torch.Tensor, total: torch.Tensor, m: float, sigma: float, generator: torch.Generator, dtype: torch.dtype) -> torch.Tensor:
    """x + total / m + N(0, sigma^2) per coordinate (in float64, the noise drawn from ``generator``), cast to ``dtype``:
    one array of DP-FedAvg's noised mean, ``total`` the sum of the clients' clipped updates (McMahan et al. 2018, Algorithm 1)."""
    noise = torch.randn(x.shape, generator=generator, dtype=torch.float64).to(total.device) * sigma
    return (x.double() + total / m + noise).to(dtype)


def secure_sum_reply(sums: dict[str, torch.Tensor], clients: int, unclipped: float, metrics: dict[str, float] | None = None, client_id: int = -1) -> Reply:
    """The one Reply a client-side DP aggregate accepts in place of the replies (``Algorithm.secure_sum``): ``sums`` the sum over
    ``clients`` clients of their clipped updates clip(w_k - w_t), by array name (float64), ``unclipped`` the sum of their bits b_k;
    ``client_id`` negative, no client's (the runtime's aggregate: ``fedprior.flower.secagg.SECURE_AGGREGATE``)."""
    if client_id >= 0:
        raise ValueError(f"a secure sum is no client's reply: its client id must be negative, got {client_id}")
    metrics = {**(metrics or {}), SECURE_SUM_CLIENTS: float(clients), SECURE_SUM_UNCLIPPED: float(unclipped)}
    return Reply(dict(sums), num_examples=clients, metrics=metrics, client_id=client_id)


def is_secure_sum(replies: Sequence[Reply]) -> bool:
    """Whether ``replies`` is the one sum SecAgg+ gives (:func:`secure_sum_reply`), not the clients' replies: a client's reply
    (a client id >= 0, which the runtimes set, not the client) is never taken for one, whatever metrics it sends."""
    return len(replies) == 1 and replies[0].client_id < 0 and SECURE_SUM_CLIENTS in replies[0].metrics


def noised_sum(summed: Reply, reference: State, m: float, sigma: float, generator: torch.Generator) -> Reply:
    """:func:`noised_mean` from the sum of the clipped updates (SecAgg+'s), the noise drawn in the same key order from the same
    stream: so a run under SecAgg+ draws the in-process run's noise (its sum differs only by SecAgg+'s quantization)."""
    arrays = {}
    for key in sorted(summed.arrays):
        x = reference[key]
        arrays[key] = noised_array(x, summed.arrays[key].to(x.device, torch.float64), m, sigma, generator, x.dtype)
    return Reply(arrays, num_examples=summed.num_examples, client_id=summed.client_id)


def check_counts(checked: int, overnorm: int, corrected_bits: int) -> State:
    """The State entries of client-side clipping's server check for one round (``clip_check.py``)."""
    return {CHECKED: torch.tensor(checked), OVERNORM: torch.tensor(overnorm), CORRECTED_BITS: torch.tensor(corrected_bits)}


def without_privacy(state: State) -> State:
    """The algorithm's own State: the DP wrapper's entries left out."""
    return {k: v for k, v in state.items() if not k.startswith(PREFIX)}


def with_client_level_dp(algorithm: Algorithm, dp: ClientLevelDp, accounting: Accounting | None = None) -> Algorithm:
    """``algorithm`` under DP-FedAvg (the module docstring): clipped, equally weighted updates, Gaussian noise on their mean.

    ``accounting``: its ``epsilon(releases)`` after that many noised rounds (``fedprior.privacy.accountant``) is reported as
    ``dp_epsilon`` every round, with what it is (``dp_accounting``); None on the clients, which need none. ConfigError where
    ``algorithm`` does not declare ``mean_aggregate``. The wrapped algorithm aggregates in every round, one with no reply
    included (``Algorithm.aggregates_no_reply``): DP-FedAvg releases the noised mean whoever answered.
    """
    check_client_level_dp(dp)
    require_mean_aggregate(
        algorithm,
        "privacy.dp",
        "reads its clients' replies other than through their mean, so its updates cannot be clipped and noised as DP-FedAvg's (set privacy.dp = 'none' for it)",
    )

    def init(info: RoundInfo) -> State:
        zero = torch.zeros((), dtype=torch.float64)
        return {
            **algorithm.init(info),
            CLIP_NORM: torch.tensor(dp.clip_norm, dtype=torch.float64),
            USED_CLIP_NORM: torch.tensor(dp.clip_norm, dtype=torch.float64),
            NOISE_STD: zero,
            RELEASES: torch.zeros((), dtype=torch.int64),
            UNCLIPPED: zero.clone(),
            **(check_counts(0, 0, 0) if dp.clipping == "client" else {}),
        }

    def broadcast(state: State, info: RoundInfo) -> Broadcast:
        message = algorithm.broadcast(without_privacy(state), info)
        if dp.clipping == "server":
            return message
        return replace(message, config={**message.config, CONFIG_CLIP_NORM: float(state[CLIP_NORM])})

    def client_update(message: Broadcast, state: State, data: ClientData, info: ClientInfo) -> tuple[Reply, State]:
        reply, state = algorithm.client_update(message, state, data, info)
        return client_clipped(message, reply), state

    def client_clipped(message: Broadcast, reply: Reply) -> Reply:
        if CONFIG_CLIP_NORM not in message.config:
            raise ConfigError("privacy.dp: 'client' clipping needs the clip norm in the broadcast (dp_clip_norm); the server sent none")
        clipped, unclipped = clipped_reply(reply, message.arrays, float(message.config[CONFIG_CLIP_NORM]), algorithm.name)
        return replace(clipped, metrics={**clipped.metrics, METRIC_UNCLIPPED: float(unclipped)})

    def client_update_many(message, states, datas, infos):  # the algorithm's batched updates, each reply clipped
        assert algorithm.client_update_many is not None
        return [(client_clipped(message, reply), state) for reply, state in algorithm.client_update_many(message, states, datas, infos)]

    def aggregate(state: State, replies: Sequence[Reply], info: RoundInfo) -> State:
        own = without_privacy(state)
        clip = float(state[CLIP_NORM])
        secure = dp.clipping == "client" and is_secure_sum(replies)
        if secure:  # SecAgg+'s sum of the clients' clipped updates and bits: no single reply to check (clip_check.py)
            checked = CheckedReplies([], replies[0].metrics[SECURE_SUM_UNCLIPPED], 0, 0)
            unclipped = checked.unclipped
        elif dp.clipping == "server":
            pairs = [clipped_reply(r, own, clip, algorithm.name) for r in replies]
            clipped, unclipped = [r for r, _ in pairs], sum(float(b) for _, b in pairs)
        else:  # clipped on the clients: the server checks each reply's norm and bit (clip_check.py)
            checked = checked_replies(replies, own, clip, dp.overnorm, algorithm.name)
            clipped, unclipped = checked.replies, checked.unclipped
        counted = int(replies[0].metrics[SECURE_SUM_CLIENTS]) if secure else len(clipped)  # the clients whose bits are summed
        denominator = dp.denominator
        sigma = noise_std(dp.update_noise_multiplier, clip, denominator)
        if secure:
            mean = noised_sum(replies[0], own, denominator, sigma, info.generator("privacy", "noise"))
        else:
            model = algorithm.broadcast(own, info).arrays if not clipped else None  # no reply: the noise goes on the model's arrays
            mean = noised_mean(clipped, own, denominator, sigma, info.generator("privacy", "noise"), algorithm.name, model)
        out = dict(algorithm.aggregate(own, [mean], info))  # an aggregate of the mean alone (mean_aggregate): FedAvg's, a server step
        next_clip, fraction = clip, 0.0
        if dp.adaptive:  # Andrew et al. 2021, Algorithm 1 and Theorem 1: the centred count noised, the geometric step of C
            count_noise = torch.randn((), generator=info.generator("privacy", "count"), dtype=torch.float64).item() * dp.count_std
            fraction = (unclipped - counted / 2 + count_noise) / denominator + 0.5
            next_clip = clip * math.exp(-dp.clip_lr * (fraction - dp.target_quantile))
        if dp.clipping == "client":  # the server's check of the round (clip_check.py)
            out.update(check_counts(0 if secure else len(replies), checked.overnorm, checked.corrected_bits))
        return {
            **out,
            CLIP_NORM: torch.tensor(next_clip, dtype=torch.float64),
            USED_CLIP_NORM: torch.tensor(clip, dtype=torch.float64),
            NOISE_STD: torch.tensor(sigma, dtype=torch.float64),
            RELEASES: state[RELEASES] + 1,
            UNCLIPPED: torch.tensor(fraction, dtype=torch.float64),
        }

    def evaluate(state: State, data: ClientData) -> dict[str, float | list[float]]:
        return algorithm.evaluate(without_privacy(state), data)

    def round_metrics(state: State) -> dict[str, float | str]:
        own = algorithm.round_metrics(without_privacy(state)) if algorithm.round_metrics is not None else {}
        metrics: dict[str, float | str] = {"dp_clip_norm": float(state[USED_CLIP_NORM]), "dp_noise_std": float(state[NOISE_STD])}
        if dp.adaptive:
            metrics["dp_unclipped_fraction"] = float(state[UNCLIPPED])
        if dp.clipping == "client" and CHECKED in state:  # the server's check of client-side clipping (clip_check.py)
            metrics.update(
                {"dp_overnorm_replies": float(state[OVERNORM]), "dp_corrected_bits": float(state[CORRECTED_BITS]), "dp_checked_replies": float(state[CHECKED])}
            )
        if accounting is not None:
            metrics["dp_epsilon"] = accounting.epsilon(int(state[RELEASES]))
            metrics["dp_bound"] = accounting.label()
        return {**own, **metrics}

    validate = algorithm.validate
    client_side = dp.clipping == "client"
    return algorithm.with_(
        init=init,
        broadcast=broadcast,
        client_update=client_update if client_side else algorithm.client_update,
        client_update_many=client_update_many if client_side and algorithm.client_update_many is not None else algorithm.client_update_many,
        aggregate=aggregate,
        evaluate=evaluate,
        validate=None if validate is None else (lambda state: validate(without_privacy(state))),
        round_metrics=round_metrics,
        aggregates_no_reply=True,
        secure_sum=client_side,
    )
