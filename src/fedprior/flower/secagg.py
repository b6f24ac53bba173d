"""Secure aggregation on Flower: fedprior's rounds under Flower's SecAgg+ workflow.

SecAgg+ (Bell et al., "Secure Single-Server Aggregation with (Poly)Logarithmic Overhead", CCS 2020, Sec. 3,
after Bonawitz et al., "Practical Secure Aggregation for Privacy-Preserving Machine Learning", CCS 2017,
Sec. 4): every node turns its vector into integers, adds a private mask and pairwise masks that cancel in the
sum, and sends only that; the server learns the sum of the nodes' integer vectors, never one node's. Secret
shares of the masks among each node's neighbours let the server unmask the sum when nodes drop out (as long
as ``threshold`` of a node's ``shares`` answer).

Flower 1.41 ships the protocol as ``flwr.server.workflow.SecAggPlusWorkflow`` (server) and
``flwr.client.mod.secaggplus_mod`` (client), both written for the *legacy* workflow API: the workflow asks a
``LegacyContext``'s Strategy for the round's nodes and their ``FitIns`` (``configure_fit``) and hands the
unmasked result to ``Strategy.aggregate_fit``; the mod reads the ClientApp's reply as a ``FitRes``.
fedprior's ServerApp drives the Grid itself (one TRAIN message per node, :mod:`fedprior.flower.server_app`),
so this module is the adapter, and the protocol, its cryptography and its quantization are Flower's:

- server: :func:`secure_round` runs one :class:`SecureRound` (the workflow, whose stage-2 messages carry
  fedprior's TRAIN content instead of ``FitIns``) per round, inside ``FlowerClients.update``, with a
  LegacyContext whose Strategy (:class:`RoundNodes`) names the round's nodes and keeps the unmasked result;
- client: :func:`secagg_mod` runs ``secaggplus_mod`` on the protocol's messages and lets every other message
  through; the ClientApp's TRAIN handler answers a protocol message with :func:`node_vector`'s FitRes.

What a node sends. For its sampled clients k (n_k examples, N = sum_k n_k) and each float array of their
replies, the example-weighted mean of the clients' updates u = sum_k (n_k / N) (w_k - w_t), w_t the
broadcast's array of the same name (an array the broadcast lacks goes as it is), with N as its weight.
``secaggplus_mod`` scales u by q / Q with q = round(Q N / W) (W = ``max_weight``, Q = ``quantization_range``),
clips to [-c, c] (c = ``clipping_range``), rounds stochastically onto the Q + 1 integers of that range,
prepends q and adds the masks; the workflow unmasks the sum and returns sum_i q_i u_i / sum_i q_i. fedprior
adds w_t back and hands the algorithm's ``aggregate`` that one mean as a Reply with N_total = sum_i N_i
examples: FedAvg's example-weighted mean over all the round's clients (McMahan et al., AISTATS 2017,
Algorithm 1), up to quantization (:func:`quantization_bound`). So only algorithms whose aggregate reads the
replies through that mean run under SecAgg+ (``Algorithm.mean_aggregate``; the others are refused by name,
:func:`require_secure_summable`).

Not protected: the clients' metrics (training loss, example counts) travel in the clear, as in Flower;
the aggregate itself is revealed to the server (that is the point), and with two nodes in a round each
node's vector follows from the aggregate and the other's. Stochastic rounding draws from NumPy's global
generator on the nodes, so a SecAgg+ run does not repeat to the last bit.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import torch
from flwr.app import ArrayRecord, ConfigRecord, Context, Message, RecordDict
from flwr.client.mod import secaggplus_mod
from flwr.clientapp.typing import ClientAppCallable
from flwr.common import Code, FitIns, FitRes, Parameters, Scalar, Status, ndarrays_to_parameters, parameters_to_ndarrays
from flwr.common.secure_aggregation.secaggplus_constants import RECORD_KEY_CONFIGS, RECORD_KEY_STATE
from flwr.compat.common.recorddict_compat import fitres_to_recorddict
from flwr.server.client_manager import ClientManager
from flwr.server.client_proxy import ClientProxy
from flwr.server.compat.grid_client_proxy import GridClientProxy
from flwr.server.compat.legacy_context import LegacyContext
from flwr.server.server_config import ServerConfig
from flwr.server.strategy import Strategy
from flwr.server.workflow import SecAggPlusWorkflow
from flwr.server.workflow.constant import MAIN_CONFIGS_RECORD, MAIN_PARAMS_RECORD
from flwr.server.workflow.constant import Key as WorkflowKey
from flwr.server.workflow.secure_aggregation.secaggplus_workflow import WorkflowState
from flwr.serverapp import Grid

from fedprior.algorithms.base import Algorithm, Broadcast, Reply, require_mean_aggregate
from fedprior.algorithms.pieces.differential_privacy import CONFIG_CLIP_NORM, METRIC_UNCLIPPED, secure_sum_reply
from fedprior.errors import ConfigError, FedpriorError

SECURE_AGGREGATE = -1
"""The client id of the one Reply a SecAgg+ round gives the algorithm: the round's aggregate, no client's."""

NAMES, CLIENTS, FAILED = "fedprior.names", "fedprior.clients", "fedprior.failures"
"""FitRes metrics of a node's vector: its arrays (name, dtype, shape), its clients' example counts and metrics, its failed clients."""


@dataclass(frozen=True)
class SecAggOptions:
    """SecAgg+'s parameters (``SecAggPlusWorkflow``'s), checked by :meth:`check`.

    - ``shares``: each node's secrets go to this many of the round's nodes (itself included): an integer >= 3,
      or a fraction in (0, 1] of the round's nodes (1: every node, the complete graph of Bonawitz et al.'s SecAgg);
    - ``threshold``: shares that rebuild a secret: an integer >= 2 (below ``shares`` when that is an integer),
      or a fraction in (0, 1] of ``shares``; more means more privacy and less tolerance of nodes that drop out;
    - ``clipping_range`` c: each coordinate of a node's scaled update must lie in [-c, c] (a node whose update
      does not fails, saying so, rather than being clipped silently);
    - ``quantization_range`` Q: the integers per coordinate (its grid step is 2c / Q);
    - ``modulus_range`` M: a power of 2, the masks' range; the sum of the round's integers must stay below it;
    - ``max_weight`` W: the largest example count a node may weigh (0: the federation's total, set by the runtime).
    """

    shares: float = 3
    threshold: float = 2
    clipping_range: float = 8.0
    quantization_range: int = 2**22
    modulus_range: int = 2**32
    max_weight: float = 0.0

    def check(self) -> SecAggOptions:
        """Itself, or ConfigError naming the first bad option and what it accepts."""
        shares, threshold = self.shares, self.threshold
        if not (math.isfinite(shares) and (0 < shares <= 1 or (shares >= 3 and float(shares).is_integer()))):
            raise ConfigError(f"secagg shares: {shares:g} is not accepted; accepted: an integer >= 3 (nodes) or a fraction in (0, 1] of the round's nodes")
        if not (math.isfinite(threshold) and (0 < threshold <= 1 or (threshold >= 2 and float(threshold).is_integer()))):
            raise ConfigError(f"secagg threshold: {threshold:g} is not accepted; accepted: an integer >= 2 (shares) or a fraction in (0, 1] of the shares")
        if shares >= 3 and threshold >= 2 and threshold >= shares:
            raise ConfigError(f"secagg threshold: {threshold:g} must be below secagg shares ({shares:g}), or a fraction in (0, 1] of them")
        if not (math.isfinite(self.clipping_range) and self.clipping_range > 0):
            raise ConfigError(f"secagg clipping range: {self.clipping_range:g} is not accepted; accepted: a positive number (each coordinate lies in [-c, c])")
        if not (2 <= self.quantization_range < self.modulus_range):
            raise ConfigError(
                f"secagg quantization range: {self.quantization_range} is not accepted; accepted: an integer >= 2 below the modulus range ({self.modulus_range})"
            )
        if self.modulus_range <= 0 or self.modulus_range & (self.modulus_range - 1) or self.modulus_range > 2**32:
            raise ConfigError(f"secagg modulus range: {self.modulus_range} is not accepted; accepted: a power of 2 up to 2**32")
        if not (math.isfinite(self.max_weight) and self.max_weight >= 0):
            raise ConfigError(f"secagg max weight: {self.max_weight:g} is not accepted; accepted: a positive number, or 0 for the federation's example count")
        return self

    def nodes_fit(self, nodes: int) -> None:
        """ConfigError unless a round over ``nodes`` SuperNodes can be summed: at least 2, and their integers below the modulus."""
        if nodes < 2:
            raise ConfigError(f"--secagg: SecAgg+ needs at least 2 SuperNodes in a round (a sum over one node is that node's update), got {nodes}")
        if nodes * self.quantization_range >= self.modulus_range:
            raise ConfigError(
                f"--secagg: {nodes} nodes times the quantization range {self.quantization_range} reach the modulus range {self.modulus_range}: "
                "the sum would wrap around; lower the quantization range or raise the modulus range"
            )

    def rounds_fit(self, clients_per_round: float, nodes: int, num_clients: int, fraction: float) -> None:
        """ConfigError unless a round's clients can reach SecAgg+'s reconstruction threshold: client c is hosted by node c mod
        ``nodes``, so a round of m clients has at most min(m, nodes) nodes, and SecAgg+ needs at least the threshold of them
        (2 at least: a sum over one node is its update; Bell et al., CCS 2020, Sec. 3: t of a node's shares rebuild its secrets).

        ``clients_per_round`` is the round's client count, or the expected count where the sampler's varies (a Poisson
        sampler's q N): a round of fewer nodes than that can still happen (clients on the same node), and fails alone; a
        federation whose rounds cannot reach it at all is refused before it starts (docs/privacy-robustness.md)."""
        if self.threshold >= 2:
            need = int(self.threshold)
        else:  # a fraction of the shares: of a count of nodes, or of the round's nodes (then 2 at least)
            need = max(2, math.ceil(self.threshold * self.shares)) if self.shares >= 3 else 2
        reach = min(clients_per_round, nodes)
        if reach >= need:
            return
        wanted = math.ceil(need / num_clients * 1000) / 1000
        if nodes < need:
            raise ConfigError(f"--secagg: {nodes} SuperNodes cannot reach SecAgg+'s reconstruction threshold of {need} nodes; give --nodes {need} or more")
        raise ConfigError(
            f"--secagg: a round samples {clients_per_round:g} client(s) (federation.fraction {fraction:g} x federation.num_clients {num_clients}), "
            f"so at most {clients_per_round:g} SuperNode(s) take part, below SecAgg+'s reconstruction threshold of {need} nodes; "
            f"raise federation.fraction to {wanted:g} or more"
        )

    def workflow_arguments(self) -> dict[str, Any]:
        """``SecAggPlusWorkflow``'s keyword arguments (integral counts as ints, as it reads them)."""
        as_count = lambda x: int(x) if x > 1 else float(x)  # noqa: E731
        return {
            "num_shares": as_count(self.shares),
            "reconstruction_threshold": as_count(self.threshold),
            "max_weight": float(self.max_weight),
            "clipping_range": float(self.clipping_range),
            "quantization_range": int(self.quantization_range),
            "modulus_range": int(self.modulus_range),
        }


def quantization_bound(options: SecAggOptions, nodes: int, total_examples: float) -> float:
    """The largest difference, per coordinate, between SecAgg+'s aggregate and the exact example-weighted mean.

    With m = ``nodes``, each node's value (q_i / Q) u_i is rounded onto a grid of step 2c / Q (error below one
    step), and the workflow divides the sum by sum_i q_i: at most 2 c m / sum_i q_i. Its weights q_i = round(Q N_i / W)
    differ from Q N_i / W by at most 1/2, which moves the weighted mean of the u_i (|u_i| <= c) by at most
    c m / sum_i q_i. With sum_i q_i >= Q N / W - m / 2 (N = ``total_examples``): 3 c m / (Q N / W - m / 2).
    """
    c, q = options.clipping_range, options.quantization_range
    weights = q * total_examples / options.max_weight - nodes / 2
    if weights <= 0:
        raise ValueError("the round's examples are too few for the quantization of the weights")
    return 3 * c * nodes / weights


def sum_quantization_bound(options: SecAggOptions, nodes: int) -> float:
    """The largest difference, per coordinate, between SecAgg+'s sum of the nodes' vectors and the exact sum, with every node
    weighing 1 (client-side DP, :func:`node_sum_vector`): each of the ``nodes`` values is rounded onto a grid of step 2c / Q
    (error below one step), and a weight of 1 is exact (q_i = Q), so the sum is within 2 c m / Q (m = ``nodes``). A client-side
    DP aggregate divides that sum by the clients expected per round, and its model is within this bound over that number."""
    return 2 * options.clipping_range * nodes / options.quantization_range


def require_secure_summable(algorithm: Algorithm) -> None:
    """FedpriorError (one line naming the algorithm) unless SecAgg+'s example-weighted sum is all its aggregate reads
    (``Algorithm.mean_aggregate``), or it takes the sum of clipped updates and bits (``Algorithm.secure_sum``: client-side DP)."""
    if algorithm.secure_sum:
        return
    require_mean_aggregate(
        algorithm,
        "--secagg",
        "reads more than the example-weighted mean of its clients' replies (its own weights, per-client uploads or state), "
        "and SecAgg+ gives the server only that sum",
    )


# -- the node ------------------------------------------------------------------------------------------


def is_secure(content: RecordDict) -> bool:
    """Whether a message belongs to the SecAgg+ protocol (it carries the workflow's configs)."""
    return RECORD_KEY_CONFIGS in content.config_records


def secagg_mod(message: Message, context: Context, call_next: ClientAppCallable) -> Message:
    """Flower's ``secaggplus_mod`` for the messages of the SecAgg+ protocol; every other message as it is."""
    if is_secure(message.content):
        return secaggplus_mod(message, context, call_next)
    return call_next(message, context)


def secagg_options(context: Context) -> SecAggOptions:
    """The options the server sent in the protocol's setup stage (``secaggplus_mod`` keeps them in the node's Context)."""
    kept = context.state.config_records[RECORD_KEY_STATE]
    return SecAggOptions(
        clipping_range=float(cast(float, kept["clipping_range"])),
        quantization_range=int(cast(int, kept["target_range"])),
        modulus_range=int(cast(int, kept["mod_range"])),
        max_weight=float(cast(float, kept["max_weight"])),
    )


def sums_clipped_updates(broadcast: Broadcast) -> bool:
    """Whether a SecAgg+ round sums clipped updates (client-side DP: the broadcast tells the clients C), both sides agreeing by it."""
    return CONFIG_CLIP_NORM in broadcast.config


def node_sum_vector(broadcast: Broadcast, replies: dict[int, Reply], failures: dict[int, str], options: SecAggOptions) -> RecordDict:
    """A node's FitRes under client-side DP: the sum of its clients' clipped updates sum_k clip(w_k - w_t) (equal weights,
    DP-FedAvg's) over the broadcast's float arrays, then the sum of their bits b_k as one more array, with weight 1.

    The bits leave the node only in that sum (the clear metrics lose them). Raises FedpriorError where a reply lacks one of
    the broadcast's arrays or holds another, an array is not float, or a coordinate lies outside [-c, c].
    """
    kept = {c: r for c, r in replies.items() if r.num_examples > 0}
    names = sorted(k for k, v in broadcast.arrays.items() if v.is_floating_point())
    vector: list[np.ndarray] = []
    for name in names:
        base = broadcast.arrays[name].detach().cpu().double()
        total = torch.zeros(base.shape, dtype=torch.float64)
        for client, reply in kept.items():
            if set(reply.arrays) != set(broadcast.arrays) or reply.arrays[name].shape != base.shape:
                raise FedpriorError(f"SecAgg+ with client-side DP sums updates of the broadcast model's arrays; client {client}'s reply differs in {name!r}")
            total += reply.arrays[name].detach().cpu().double() - base
        vector.append(total.numpy())
    bits = sum(float(r.metrics.get(METRIC_UNCLIPPED, 0.0)) for r in kept.values())
    vector.append(np.array([bits]))
    for name, values in zip([*names, METRIC_UNCLIPPED], vector, strict=True):
        largest = float(np.abs(values).max()) if values.size else 0.0
        if largest > options.clipping_range:
            raise FedpriorError(
                f"SecAgg+: this node's sum of {name!r} reaches {largest:.4g}, outside secagg clipping range {options.clipping_range:g}; raise it"
            )
    clear = {str(c): {"num_examples": r.num_examples, "metrics": {k: v for k, v in r.metrics.items() if k != METRIC_UNCLIPPED}} for c, r in replies.items()}
    layout = [[name, str(broadcast.arrays[name].dtype).removeprefix("torch."), False] for name in names] + [[METRIC_UNCLIPPED, "float64", False]]
    metrics: dict[str, Scalar] = {NAMES: json.dumps(layout), CLIENTS: json.dumps(clear), FAILED: json.dumps({str(c): r for c, r in failures.items()})}
    return fitres_to_recorddict(FitRes(Status(Code.OK, ""), ndarrays_to_parameters(vector), 1, metrics), keep_input=False)


def node_vector(broadcast: Broadcast, replies: dict[int, Reply], failures: dict[int, str], options: SecAggOptions) -> RecordDict:
    """A node's FitRes for ``secaggplus_mod``: the example-weighted mean of its clients' updates, its example count as the weight.

    Raises FedpriorError for what SecAgg+ cannot sum exactly: an integer array, arrays that differ between
    clients, a coordinate outside [-c, c], more examples than ``max_weight``.
    """
    kept = {c: r for c, r in replies.items() if r.num_examples > 0}
    total = sum(r.num_examples for r in kept.values())
    if options.max_weight and total > options.max_weight:
        raise FedpriorError(f"SecAgg+: this node's {total} examples exceed secagg max weight {options.max_weight:g}")
    vector: list[np.ndarray] = []
    names: list[list[Any]] = []
    if kept:
        first = next(iter(kept.values())).arrays
        for name in sorted(first):
            if not first[name].is_floating_point():
                raise FedpriorError(f"SecAgg+ sums float arrays; reply array {name!r} is {first[name].dtype}")
            mean = torch.zeros(first[name].shape, dtype=torch.float64)
            for client, reply in kept.items():
                if name not in reply.arrays or reply.arrays[name].shape != first[name].shape or set(reply.arrays) != set(first):
                    raise FedpriorError(f"SecAgg+ sums arrays of one layout; client {client}'s reply differs in {name!r}")
                mean += (reply.num_examples / total) * reply.arrays[name].detach().cpu().double()
            base = broadcast.arrays.get(name)
            if base is not None and base.shape == mean.shape:
                mean -= base.detach().cpu().double()
            largest = float(mean.abs().max()) if mean.numel() else 0.0
            if largest > options.clipping_range:
                raise FedpriorError(
                    f"SecAgg+: this node's update of {name!r} reaches {largest:.4g}, outside secagg clipping range {options.clipping_range:g}; raise it"
                )
            vector.append(mean.numpy())
            names.append([name, str(first[name].dtype).removeprefix("torch."), base is not None and base.shape == mean.shape])
    clients = {str(c): {"num_examples": r.num_examples, "metrics": r.metrics} for c, r in replies.items()}
    metrics: dict[str, Scalar] = {NAMES: json.dumps(names), CLIENTS: json.dumps(clients), FAILED: json.dumps({str(c): r for c, r in failures.items()})}
    return fitres_to_recorddict(FitRes(Status(Code.OK, ""), ndarrays_to_parameters(vector), int(total), metrics), keep_input=False)


# -- the server ----------------------------------------------------------------------------------------


class RoundNodes(Strategy):
    """The legacy Strategy SecAggPlusWorkflow asks: the round's nodes (``configure_fit``); the unmasked mean (``aggregate_fit``)."""

    def __init__(self, grid: Grid, nodes: Sequence[int]) -> None:
        self.proxies = [GridClientProxy(n, grid, run_id=0) for n in nodes]
        self.results: list[tuple[ClientProxy, FitRes]] | None = None

    def configure_fit(self, server_round: int, parameters: Parameters, client_manager: ClientManager) -> list[tuple[ClientProxy, FitIns]]:
        return [(proxy, FitIns(parameters, {})) for proxy in self.proxies]  # the content is replaced: SecureRound.setup_stage

    def aggregate_fit(self, server_round, results, failures):
        self.results = list(results)
        return None, {}

    def initialize_parameters(self, client_manager: ClientManager) -> Parameters | None:
        return None

    def configure_evaluate(self, server_round, parameters, client_manager):
        return []

    def aggregate_evaluate(self, server_round, results, failures):
        return None, {}

    def evaluate(self, server_round, parameters):
        return None


class SecureRound(SecAggPlusWorkflow):
    """SecAggPlusWorkflow sending each node fedprior's TRAIN content (``contents``) in its stage 2, and keeping its state."""

    def __init__(self, contents: dict[int, RecordDict], **arguments: Any) -> None:
        super().__init__(**arguments)
        self.contents = contents
        self.state: WorkflowState | None = None
        self.halted: str | None = None

    def setup_stage(self, grid: Grid, context: LegacyContext, state: WorkflowState) -> bool:
        ok = super().setup_stage(grid, context, state)
        state.nid_to_fitins = {node: self.contents[node] for node in state.nid_to_fitins}
        return ok

    def __call__(self, grid: Grid, context: Context) -> None:
        """The workflow's four stages (as ``SecAggPlusWorkflow.__call__``), remembering where it halted."""
        assert isinstance(context, LegacyContext)
        self.state = state = WorkflowState()
        for step in (self.setup_stage, self.share_keys_stage, self.collect_masked_vectors_stage, self.unmask_stage):
            if not step(grid, context, state):
                self.halted = step.__name__.removesuffix("_stage").replace("_", " ")
                return


@dataclass
class SecureOutcome:
    """What a SecAgg+ round gave: the aggregate Reply (None if none), the clients that failed, with reasons."""

    reply: Reply | None
    failures: dict[int, str]


def secure_round(
    grid: Grid, broadcast: Broadcast, contents: dict[int, RecordDict], hosted: dict[int, list[int]], options: SecAggOptions, step: int, timeout: float
) -> SecureOutcome:
    """Run SecAgg+ over the nodes of ``contents`` (each hosting ``hosted[node]`` of the round's clients); the aggregate as one Reply."""
    strategy = RoundNodes(grid, sorted(contents))
    context = LegacyContext(Context(run_id=0, node_id=0, node_config={}, state=RecordDict(), run_config={}), ServerConfig(num_rounds=1), strategy)
    context.state.config_records[MAIN_CONFIGS_RECORD] = ConfigRecord({WorkflowKey.CURRENT_ROUND: int(step)})
    context.state.array_records[MAIN_PARAMS_RECORD] = ArrayRecord()
    summed = sums_clipped_updates(broadcast)
    arguments = {**options.workflow_arguments(), **({"max_weight": 1.0} if summed else {})}  # client-side DP: every node weighs 1
    workflow = SecureRound(contents, timeout=timeout, **arguments)
    workflow(grid, context)
    failures: dict[int, str] = {}
    if strategy.results is None:
        reason = f"SecAgg+ halted in its {workflow.halted} stage: fewer nodes answered than its reconstruction threshold needs"
        return SecureOutcome(None, {c: reason for clients in hosted.values() for c in clients})
    answered = {proxy.node_id: fitres for proxy, fitres in strategy.results if isinstance(proxy, GridClientProxy)}
    dropped = "; ".join(str(f) for f in (workflow.state.failures if workflow.state else []))[:400]
    for node, clients in hosted.items():
        if node not in answered:
            failures.update({c: f"its node sent no masked vector in SecAgg+ ({dropped or 'no reply'})" for c in clients})
    client_metrics: list[dict[str, float]] = []
    layouts = set()
    total = 0
    for fitres in answered.values():
        layouts.add(str(fitres.metrics[NAMES]) if fitres.num_examples > 0 else "")
        failures.update({int(c): str(r) for c, r in json.loads(str(fitres.metrics[FAILED])).items()})
        for entry in json.loads(str(fitres.metrics[CLIENTS])).values():
            client_metrics.append(entry["metrics"])
            total += int(entry["num_examples"])
    layouts.discard("")
    if total == 0 or not layouts:
        return SecureOutcome(None, failures)
    if len(layouts) > 1:
        raise FedpriorError("SecAgg+: the nodes sent arrays of different layouts; the sum has no meaning")
    names = json.loads(layouts.pop())
    if summed:
        return SecureOutcome(sum_reply(names, answered, client_metrics, options), failures)
    summed_vectors = parameters_to_ndarrays(next(iter(answered.values())).parameters)
    arrays: dict[str, torch.Tensor] = {}
    for (name, dtype, is_delta), mean in zip(names, summed_vectors, strict=True):
        value = torch.from_numpy(np.asarray(mean, dtype=np.float64))
        if is_delta:
            value = value + broadcast.arrays[name].detach().cpu().double()
        arrays[name] = value.to(getattr(torch, dtype))
    metric_names = sorted({k for m in client_metrics for k in m})
    metrics = {k: float(np.mean([m[k] for m in client_metrics if k in m])) for k in metric_names}
    return SecureOutcome(Reply(arrays, total, metrics, SECURE_AGGREGATE), failures)


def sum_reply(names: list[list[Any]], answered: dict[int, FitRes], client_metrics: list[dict[str, float]], options: SecAggOptions) -> Reply:
    """The client-side DP aggregate's one Reply (``secure_sum_reply``) from the unmasked vector of a round whose nodes each weighed 1.

    The workflow returns sum_i u_i / (number of nodes), so the sum is that times the nodes that answered; the last array is the sum
    of the bits, an integer up to SecAgg+'s quantization (:func:`sum_quantization_bound`, below 1/2), so it is rounded to one.
    """
    nodes = len(answered)
    bound = sum_quantization_bound(options, nodes)
    if bound >= 0.5:
        raise FedpriorError(
            f"SecAgg+: {nodes} nodes' quantization error ({bound:.3g}) would blur the count of unclipped updates; raise secagg quantization range"
        )
    vectors = parameters_to_ndarrays(next(iter(answered.values())).parameters)
    sums = {name: torch.from_numpy(np.asarray(mean, dtype=np.float64) * nodes) for (name, _, _), mean in zip(names, vectors, strict=True)}
    bits = float(torch.round(sums.pop(METRIC_UNCLIPPED)).sum())
    clients = sum(1 for fitres in answered.values() for entry in json.loads(str(fitres.metrics[CLIENTS])).values() if int(entry["num_examples"]) > 0)
    metric_names = sorted({k for m in client_metrics for k in m})
    metrics = {k: float(np.mean([m[k] for m in client_metrics if k in m])) for k in metric_names}
    return secure_sum_reply(sums, clients, bits, metrics, SECURE_AGGREGATE)
