"""FedROD (Chen & Chao, "On Bridging Generic and Personalized Federated Learning for Image Classification", ICLR 2022).

Two heads on one body (Sec. 4, Figure 2): the generic head (G-head) and the body are
trained with a class-balanced loss and averaged by the server; the personalized head
(P-head) stays on the client and is trained with plain cross-entropy on the sum of the
two heads' logits, its input detached, so it never changes the body or the G-head:

    L_G = BSM(G(z), y)           = CE(G(z) + gamma log n_y', y), n' = the client's class counts
    L_P = CE(G(z).detach() + P(z.detach()), y)

(balanced softmax, Ren et al. 2020, the code FedBM follows; gamma = 1 as FedBM sets it;
a class the client lacks counts as 1, as the code). Both losses are minimized in one
step each batch (their gradients touch disjoint parameters); the P-head has its own
plain SGD (no momentum, no weight decay), as the code. The global test metrics are the
generic model's (body + G-head); on the clients' local test splits (``partition.local_test_fraction``)
each client is scored with its personalized model, the sum of both heads' logits (its P-head uploaded
for it, :mod:`fedprior.algorithms.pieces.personal`).

Equations (Chen & Chao, ICLR 2022, Sec. 4), and where each is computed: the G-head's balanced softmax
L_G, :func:`~fedprior.algorithms.pieces.class_balance.balanced_softmax_loss` on the counts of
:func:`~fedprior.algorithms.pieces.class_balance.class_counts`; the P-head's L_P on detached features, and
both together, :meth:`TwoHeads.losses`; the server's average of body and G-head,
:meth:`~fedprior.algorithms.engines.supervised.GlobalModel.average`.
Where it departs from the paper: the choices of the code FedBM follows, listed above (a missing class
counts 1; the P-head's own plain SGD).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

import torch
import torch.nn.functional as F
from pydantic import Field
from torch import nn
from torch.optim.optimizer import ParamsT

from fedprior.algorithms.base import Algorithm, Broadcast, ClientData, ClientInfo, Reply, RoundInfo, Runtime, State, Task
from fedprior.algorithms.engines.body_training import local_training, trains_body
from fedprior.algorithms.engines.supervised import model_task
from fedprior.algorithms.pieces.class_balance import balanced_softmax_loss, class_counts
from fedprior.algorithms.pieces.hyperparameters import BodyTraining
from fedprior.algorithms.pieces.metrics import logit_metrics
from fedprior.algorithms.pieces.personal import EVAL, UPLOAD_PERSONAL, client_arrays, eval_entries, without_eval
from fedprior.algorithms.pieces.tensors import MODEL, add_prefix, model_arrays, with_prefix
from fedprior.models.split import split

PERSONAL = "personal."
Gamma = Annotated[float, Field(ge=0, description="weight of log class counts in the balanced softmax (FedBM: 1)")]


class TwoHeads(nn.Module):
    """The client's network during training: the shared model (body + G-head) and its P-head."""

    def __init__(self, shared: nn.Module, personal: nn.Module) -> None:
        super().__init__()
        self.shared, self.personal = shared, personal

    def losses(self, x: torch.Tensor, y: torch.Tensor, counts: torch.Tensor, gamma: float) -> tuple[torch.Tensor, torch.Tensor]:
        z = split(self.shared).embed(x)
        generic = split(self.shared).head(z)
        personal = generic.detach() + self.personal(z.detach())
        return balanced_softmax_loss(generic, y, counts, gamma), F.cross_entropy(personal, y)


@trains_body
def fedrod(task: Task, runtime: Runtime, *, body: BodyTraining, gamma: Gamma = 1.0) -> Algorithm:
    """FedROD: a generic head trained with the balanced softmax and averaged, a personal head kept (Chen & Chao, 2022)."""
    model, training = body.model, local_training(body, runtime)
    net = training.global_model(model_task(task, model))
    feature_dim = split(net.build()).feature_dim
    heads = training.global_model(lambda: nn.Linear(feature_dim, task.num_classes))  # the P-head, resident on an accelerator

    def client_update(message: Broadcast, state: State, data: ClientData, info: ClientInfo) -> tuple[Reply, State]:
        shared = net.receive(message.arrays)  # on an accelerator the resident model, the broadcast copied in
        personal = heads.receive(add_prefix(with_prefix(state, PERSONAL) or with_prefix(message.arrays, "model.head."), MODEL))
        both = TwoHeads(shared, personal)
        counts = class_counts(data["y"], task.num_classes)

        def loss_fn(m: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            assert isinstance(m, TwoHeads)  # fit passes the model it trains: both
            generic_loss, personal_loss = m.losses(x, y, counts, gamma)
            return generic_loss + personal_loss

        def groups(m: nn.Module) -> ParamsT:
            assert isinstance(m, TwoHeads)
            shared_group: dict[str, Any] = {"params": m.shared.parameters()}
            return [shared_group, {"params": m.personal.parameters(), "momentum": 0.0, "weight_decay": 0.0}]

        metrics = training.fit(both, data, info, loss_fn=loss_fn, params=groups)
        # the reply and the P-head on the run's device
        kept = model_arrays(personal, PERSONAL, resident=True)
        shown = add_prefix(with_prefix(kept, PERSONAL), f"{EVAL}{info.client_id}.") if message.config.get(UPLOAD_PERSONAL) else {}
        return Reply({**model_arrays(shared, resident=True), **shown}, int(data["x"].shape[0]), metrics), kept

    def aggregate(state: State, replies: Sequence[Reply], info: RoundInfo) -> State:
        return {**net.average(without_eval(state), replies, info), **eval_entries(replies)}

    @torch.no_grad()
    def evaluate_client(state: State, client: int, data: ClientData) -> dict[str, float | list[float]]:
        """Client ``client``'s personalized model: the G-head's logits plus its P-head's on the shared body's features (Sec. 4)."""
        shared = net.receive(without_eval(state), "evaluate").eval()
        x, y = data["x"].to(training.device), data["y"].to(training.device)
        z = torch.cat([split(shared).embed(x[s : s + 2048]) for s in range(0, x.shape[0], 2048)])
        p_head = client_arrays(state, client)
        return logit_metrics(split(shared).head(z) + z @ p_head["weight"].to(z.device).T + p_head["bias"].to(z.device), y)

    return net.algorithm(
        "fedrod",
        client_update,
        aggregate=aggregate,
        mean_aggregate=True,  # the P-heads are uploaded only when with_local_tests asks, which sets it back to False
        evaluate=lambda state, data: training.evaluate(net.receive(without_eval(state), "evaluate"), data),
        evaluate_client=evaluate_client,
        thread_safe_updates=True,
    )
