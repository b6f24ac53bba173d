"""FedREP (Collins et al., "Exploiting Shared Representations for Personalized Federated Learning", ICML 2021).

The network splits into a shared body (the representation phi) and a head h_i each
client keeps (Algorithm 1): a sampled client first trains its own head for
``head_epochs`` with the received body frozen (lines 5-6), then the body for
``local_epochs`` with its head frozen (lines 7-8), and uploads the body only; the server
averages the bodies (line 11; example-weighted, as the code FedBM's tables come from).
A client's head starts from the server's initial head the first time it is sampled and
is client state afterwards. The global test metrics are those of the personalized
models (the shared body with each client's head), averaged over the clients of the
latest round (:mod:`fedprior.algorithms.pieces.personal`).

Equations (Collins et al., ICML 2021, Algorithm 1), and where each is computed: which part trains in
each local phase (head with the body frozen, then body with the head frozen), :func:`set_trainable`,
called twice by ``client_update`` inside :func:`fedrep`; the server's average of the bodies,
:meth:`~fedprior.algorithms.engines.supervised.GlobalModel.average`; the test metrics of the
personalized models, :func:`~fedprior.algorithms.pieces.personal.personal_evaluation` with :func:`head_metrics`.
Where it departs from the paper: the bodies' mean is example-weighted, as the code FedBM's tables come from.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

import torch
from pydantic import Field
from torch import nn

from fedprior.algorithms.base import Algorithm, Broadcast, ClientData, ClientInfo, Reply, RoundInfo, Runtime, State, Task
from fedprior.algorithms.engines.body_training import local_training, trains_body
from fedprior.algorithms.engines.supervised import model_task
from fedprior.algorithms.pieces.hyperparameters import BodyTraining
from fedprior.algorithms.pieces.local_training import classification_metrics
from fedprior.algorithms.pieces.metrics import logit_metrics
from fedprior.algorithms.pieces.personal import EVAL, client_arrays, eval_entries, mean_metrics, personal_evaluation, without_eval
from fedprior.algorithms.pieces.tensors import MODEL, add_prefix, device_of, model_arrays, to_device, with_prefix
from fedprior.models.split import split

HEAD = "head."
HeadEpochs = Annotated[int, Field(ge=0, description="epochs on the head before the body's (0: as many as federation.local_epochs, the code FedBM follows)")]


def set_trainable(model: nn.Module, head: bool) -> None:
    """Train the head only (``head=True``) or the body only, as FedREP's two local phases."""
    for name, p in model.named_parameters():
        p.requires_grad_(name.startswith(HEAD) == head)


@torch.no_grad()
def head_metrics(features: torch.Tensor, head: dict[str, torch.Tensor], y: torch.Tensor) -> dict[str, float | list[float]]:
    """Test metrics of a linear head on precomputed features."""
    return logit_metrics(features @ head["weight"].to(features.device).T + head["bias"].to(features.device), y)


@trains_body
def fedrep(task: Task, runtime: Runtime, *, body: BodyTraining, head_epochs: HeadEpochs = 0) -> Algorithm:
    """FedREP: shared body, personal heads; a client trains its head, then the body, and uploads the body (Collins et al., 2021)."""
    model, training = body.model, local_training(body, runtime)
    device = training.device
    net = training.global_model(model_task(task, model))

    def client_update(message: Broadcast, state: State, data: ClientData, info: ClientInfo) -> tuple[Reply, State]:
        local = net.receive(message.arrays)  # on an accelerator the resident model, the broadcast copied in
        if state:
            split(local).head.load_state_dict(with_prefix(state, HEAD))
        set_trainable(local, head=True)
        training.fit(local, data, info, epochs=head_epochs or training.epochs)
        set_trainable(local, head=False)
        metrics = training.fit(local, data, info)
        local.requires_grad_(True)
        arrays = model_arrays(local, resident=True)  # the body's reply and the head's state on the run's device
        body = {k: v for k, v in arrays.items() if not k.startswith(MODEL + HEAD)}
        head = model_arrays(split(local).head, HEAD, resident=True)
        personal = add_prefix(with_prefix(head, HEAD), f"{EVAL}{info.client_id}.")
        return Reply({**body, **personal}, int(data["x"].shape[0]), metrics), head

    def aggregate(state: State, replies: Sequence[Reply], info: RoundInfo) -> State:
        averaged = to_device(net.average(without_eval(state), replies, info), device_of(replies[0].arrays))  # the server's head too
        return {**averaged, **eval_entries(replies)}

    def features(state: State, x: torch.Tensor) -> torch.Tensor:
        body = net.receive(without_eval(state), "evaluate").eval()
        return torch.cat([split(body).embed(x[s : s + 2048]) for s in range(0, x.shape[0], 2048)])

    @torch.no_grad()
    def evaluate(state: State, data: ClientData) -> dict[str, float | list[float]]:
        x, y = data["x"].to(device), data["y"].to(device)
        if not any(k.startswith(EVAL) for k in state):
            return classification_metrics(net.receive(state, "evaluate").eval(), x, y, precision=training.precision)
        z = features(state, x)
        return mean_metrics(personal_evaluation(state, lambda head: head_metrics(z, head, y)))

    @torch.no_grad()
    def evaluate_client(state: State, client: int, data: ClientData) -> dict[str, float | list[float]]:
        """Client ``client``'s personalized model, the shared body with its own head, on ``data``."""
        x, y = data["x"].to(device), data["y"].to(device)
        return head_metrics(features(state, x), client_arrays(state, client), y)

    return net.algorithm("fedrep", client_update, aggregate=aggregate, evaluate=evaluate, evaluate_client=evaluate_client, thread_safe_updates=True)
