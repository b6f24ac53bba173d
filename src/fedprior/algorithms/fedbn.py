"""FedBN (Li, Jiang, Zhang, Kamp, Dou, "FedBN: Federated Learning on Non-IID Features via Local Batch Normalization", ICLR 2021).

Algorithm 1 of the paper: each client trains the whole network by local SGD, as FedAvg's client does, and uploads
every parameter except those of its batch-normalization layers; the server averages what it receives
(w <- sum_k (n_k / n) w_k over the non-BN layers, the paper's Eq. in Algorithm 1 line "aggregation"), and each
client keeps its BN layers (their weights, biases and running statistics) between rounds as its own state
(:mod:`fedprior.runtime.client_store`), starting from the network's initial BN the first time it is sampled.
So a client whose images differ in style keeps the normalization of its own domain (the paper's feature-shift
non-IID, Sec. 3).

The BN tensors never leave a client in training: the server's state holds no BN tensor, neither do the replies,
except where the run asks to score each client on its local test split (``partition.local_test_fraction > 0``;
:mod:`fedprior.algorithms.pieces.personal`): then a sampled client uploads its BN tensors under ``eval.<client>.``
for that measurement alone (never averaged; counted as upload), as FedROD uploads its P-head. The per-client
accuracy is each client's personalized model (the averaged layers with its own BN) on its own split, which the
paper reports (Table 3: each client's test set of its own domain).

The global test set has no domain of its own and the server has no BN: with clients' BN uploaded, its metrics
are the mean of the latest round's personalized models (as FedREP's); without, the averaged layers normalize with
the evaluated batch's own statistics (fedprior's choice, not the paper's: the paper has no global test).

Equations (Li et al., ICLR 2021, Algorithm 1), and where each is computed: the local update, FedAvg's
:func:`~fedprior.algorithms.engines.supervised.local_sgd_update` on the client's own BN; the split into what is sent
and what is kept, :func:`split_batch_norm`; the server's example-weighted mean of the non-BN layers,
:meth:`~fedprior.algorithms.engines.supervised.GlobalModel.average`.
Where it departs from the paper: nothing in training (the paper's mean is the example-weighted one, its Eq. in Algorithm 1).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from fedprior.algorithms.base import Algorithm, Broadcast, ClientData, ClientInfo, Reply, RoundInfo, Runtime, State, Task, runtime_options
from fedprior.algorithms.engines.supervised import GlobalModel, local_sgd_update, model_task
from fedprior.algorithms.pieces.hyperparameters import LocalSgd, with_fields
from fedprior.algorithms.pieces.local_training import classification_metrics
from fedprior.algorithms.pieces.personal import EVAL, UPLOAD_PERSONAL, client_arrays, eval_entries, mean_metrics, stored_clients, without_eval
from fedprior.algorithms.pieces.tensors import MODEL, add_prefix, model_arrays
from fedprior.errors import ConfigError


def batch_norm_keys(model: nn.Module) -> frozenset[str]:
    """The State keys (``model.<module>.<name>``) of every batch-norm layer's weights, biases and buffers (running mean,
    running variance, batch count): what FedBN keeps on the client."""
    return frozenset(
        f"{MODEL}{module_name}.{name}"
        for module_name, module in model.named_modules()
        if isinstance(module, nn.modules.batchnorm._BatchNorm)
        for name, _ in [*module.named_parameters(recurse=False), *module.named_buffers(recurse=False)]
    )


def split_batch_norm(arrays: State, keys: frozenset[str]) -> tuple[State, State]:
    """(the arrays a client sends, the BN arrays it keeps)."""
    return {k: v for k, v in arrays.items() if k not in keys}, {k: v for k, v in arrays.items() if k in keys}


def batch_statistics(model: nn.Module) -> nn.Module:
    """``model`` whose BN layers normalize by each evaluated batch's own statistics (no running statistics kept)."""
    for module in model.modules():
        if isinstance(module, nn.modules.batchnorm._BatchNorm):
            module.track_running_stats, module.running_mean, module.running_var, module.num_batches_tracked = False, None, None, None
    return model


@runtime_options("precision", "compile")
@with_fields("sgd", LocalSgd, model="convnet-small")
def fedbn(task: Task, runtime: Runtime, *, sgd: LocalSgd) -> Algorithm:
    """FedBN: FedAvg that leaves every batch-norm layer (weights, biases, running statistics) on its client (Li et al., ICLR 2021).

    Li, Jiang, Zhang, Kamp, Dou, "FedBN: Federated Learning on Non-IID Features via Local Batch Normalization",
    ICLR 2021, Algorithm 1. Needs a network with BatchNorm layers: 'convnet-small' (the default), 'convnet', 'resnet18'.
    """
    net = GlobalModel(model_task(task, sgd.model), device=runtime.device, precision=runtime.precision, compile=runtime.compile)
    with torch.random.fork_rng(devices=[]):
        built = net.build()
    keys = batch_norm_keys(built)
    if not keys:
        raise ConfigError(f"algorithm.model: fedbn keeps the BatchNorm layers local, and '{sgd.model}' has none; use convnet-small, convnet or resnet18")
    initial_bn = split_batch_norm(model_arrays(built), keys)[1]  # BN's init is the same for every seed: weight 1, bias 0, mean 0, var 1
    train = local_sgd_update(net, runtime, sgd)

    def init(info: RoundInfo) -> State:
        return split_batch_norm(net.init(info), keys)[0]

    def client_update(message: Broadcast, state: State, data: ClientData, info: ClientInfo) -> tuple[Reply, State]:
        own = state or initial_bn  # the client's BN from its last round, or the network's initial BN
        reply, _ = train(Broadcast({**message.arrays, **own}, message.config), {}, data, info)
        sent, kept = split_batch_norm(reply.arrays, keys)
        shown = add_prefix(kept, f"{EVAL}{info.client_id}.") if message.config.get(UPLOAD_PERSONAL) else {}
        return Reply({**sent, **shown}, reply.num_examples, reply.metrics), kept

    def aggregate(state: State, replies: Sequence[Reply], info: RoundInfo) -> State:
        return {**net.average(without_eval(state), replies, info), **eval_entries(replies)}

    @torch.no_grad()
    def evaluate_client(state: State, client: int, data: ClientData) -> dict[str, float | list[float]]:
        """Client ``client``'s personalized model, the averaged layers with its own BN, on ``data`` (the paper's Table 3 metric)."""
        model = net.receive({**without_eval(state), **client_arrays(state, client)}, "evaluate").eval()
        return classification_metrics(model, data["x"].to(net.device), data["y"].to(net.device), precision=net.precision)

    @torch.no_grad()
    def evaluate(state: State, data: ClientData) -> dict[str, float | list[float]]:
        clients = stored_clients(state)
        if clients:
            return mean_metrics([evaluate_client(state, c, data) for c in clients])
        model = batch_statistics(net.load({**without_eval(state), **initial_bn})).eval()
        return classification_metrics(model, data["x"].to(net.device), data["y"].to(net.device), precision=net.precision)

    return net.algorithm(
        "fedbn",
        client_update,
        init=init,
        aggregate=aggregate,
        mean_aggregate=True,  # the BN tensors are uploaded only when with_local_tests asks, which sets it back to False
        evaluate=evaluate,
        evaluate_client=evaluate_client,
        thread_safe_updates=True,
    )
