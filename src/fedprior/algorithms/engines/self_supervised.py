"""What the self-supervised algorithms share (MFCL and its baselines): [0, 1] images, two-view epochs, frozen features.

- Clients receive standardized pixels; SimCLR's colour ops and MFCL's binary
  cross-entropy need images in [0, 1]: :func:`unit_images` undoes the standardization
  (:mod:`fedprior.data.standardize`) with the training set's channel statistics the Task carries
  (``task.pixel_mean``, ``task.pixel_std``; absent: the data is taken as [0, 1]).
- :func:`two_view_epochs`: every epoch draws two fresh SimCLR views of all the client's
  images (``fedprior.data.augment.simclr``) and runs one shuffled pass of mini-batches of
  K samples with ``loss_fn(model, view1_batch, view2_batch)``; the batch orders go to the device at
  once and the losses are read once per update (no host sync per step).
- :func:`frozen_features`: features of many images in large batches, under no_grad, on a device;
  :func:`linear_evaluate`: their linear evaluation (``linear_eval``: the paper's dense layer trained
  on the training pool's features and scored on the test set, or the 2-fold protocol on the
  test set alone; :mod:`~fedprior.algorithms.pieces.linear_eval`).
- :func:`two_view_fedavg`: an end-to-end self-supervised baseline (FedSimCLR, FedSwAV) is
  FedAvg whose clients run :func:`two_view_epochs` with its own loss; on an accelerator the
  client and the evaluation receive the broadcast into resident models
  (:meth:`~fedprior.algorithms.engines.supervised.GlobalModel.receive`) and replies stay on the
  device, where the server averages them.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from fedprior.algorithms.base import Algorithm, Broadcast, ClientData, ClientInfo, Reply, Runtime, State, Task
from fedprior.algorithms.engines.supervised import GlobalModel
from fedprior.algorithms.pieces.hyperparameters import SelfSupervisedFields
from fedprior.algorithms.pieces.linear_eval import dense_evaluation, linear_evaluation
from fedprior.algorithms.pieces.local_training import LossFn, train_pass
from fedprior.algorithms.pieces.metrics import read_once
from fedprior.algorithms.pieces.tensors import model_arrays
from fedprior.data.augment import seed_from
from fedprior.data.augment.simclr import simclr_views
from fedprior.data.standardize import PixelStandardizer
from fedprior.models.peer_norm import peer_views
from fedprior.models.split import split

TRAIN_FIELDS = ("x_train", "y_train")
"""The evaluation-data fields of the labelled training pool (``Algorithm.evaluation_inputs``; the runtime adds them)."""


def unit_images(task: Task) -> Callable[[torch.Tensor], torch.Tensor]:
    """A function mapping the Task's standardized images back to [0, 1] pixels (:meth:`PixelStandardizer.to_unit`)."""
    if not task.pixel_mean or not task.pixel_std:
        return PixelStandardizer().to_unit
    return PixelStandardizer(task.pixel_mean, task.pixel_std).to_unit


def two_view_epochs(
    model: nn.Module,
    images: torch.Tensor,
    *,
    epochs: int,
    batch_size: int,
    optimizer: torch.optim.Optimizer,
    generator: torch.Generator,
    loss_fn: LossFn,
    min_scale: float = 0.08,
) -> dict[str, float]:
    """``epochs`` passes over ``images`` ([0, 1]) with fresh SimCLR view pairs each epoch; mean loss and steps.

    The client's ``generator`` gives each epoch a view seed and then a batch order, all drawn before the first step (the
    draws and their order as one epoch after the other) and the orders copied to the images' device at once; the losses
    are summed there and read once, at the end (:func:`~fedprior.algorithms.pieces.metrics.read_once`): no host sync per
    step or epoch besides the views' own (kornia draws their parameters on the host; docs/runtime.md).
    """
    seeds, orders = [], []
    for _ in range(epochs):
        seeds.append(seed_from(generator))
        orders.append(torch.randperm(images.shape[0], generator=generator))
    uploaded = torch.stack(orders).to(images.device) if orders else ()
    model.train()
    losses, steps = torch.zeros((), dtype=torch.float64, device=images.device), 0
    for seed, order in zip(seeds, uploaded, strict=True):
        view1, view2 = simclr_views(images, seed, min_scale=min_scale)
        total = torch.zeros((), dtype=torch.float64, device=images.device)
        taken = train_pass(model, view1, view2, order, total, batch_size=batch_size, optimizer=optimizer, loss_fn=loss_fn)
        losses += total / max(taken, 1) * taken  # each epoch's mean loss times its steps, the float64 operations of before
        steps += taken
    return read_once({"train_loss": losses / max(steps, 1.0), "steps": float(steps)})


@torch.no_grad()
def frozen_features(features: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, device: torch.device, batch_size: int = 1024) -> torch.Tensor:
    """``features(batch)`` over all of ``x`` in batches moved to ``device`` (no copy where ``x`` is there already); the result stays there."""
    return torch.cat([features(x[i : i + batch_size].to(device)) for i in range(0, x.shape[0], batch_size)])


def linear_evaluate(
    features: Callable[[torch.Tensor], torch.Tensor],
    model: nn.Module,
    data: ClientData,
    task: Task,
    device: torch.device,
    protocol: str = "train-test",
    train_features: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> dict[str, float | list[float]]:
    """Linear evaluation (:mod:`~fedprior.algorithms.pieces.linear_eval`) of ``features`` ([0, 1] images in) on the test images.

    ``protocol = "train-test"`` (the MFCL paper's Sec. 3): a dense layer is trained on the features of the
    training pool, ``data["x_train"]`` / ``data["y_train"]`` (:data:`TRAIN_FIELDS`, added by the
    runtime for an algorithm whose ``evaluation_inputs`` name them), and scores ``data["x"]``;
    ``"test-2fold"``: cross-fitted on the test set alone. ``model`` is put in eval mode and its
    Peer Normalization layers read one view per image (PN with a single view is GN).
    ``train_features``: (features, labels) the dense layer is trained on instead of the training pool's
    (``"train-test"`` only; MFCL's ``linear_train = "uploads"``: the representations the server received).
    """
    if protocol == "train-test" and any(k not in data for k in TRAIN_FIELDS):
        raise ValueError(
            "linear_eval = 'train-test' trains its dense layer on the training pool: the evaluation data needs "
            f"{', '.join(TRAIN_FIELDS)} beside x and y (build_experiment adds them for an algorithm whose evaluation_inputs "
            "name them); or set linear_eval = 'test-2fold'"
        )
    to_unit = unit_images(task)
    model.to(device).eval()
    with peer_views(model, 1):
        encoded = frozen_features(lambda x: features(to_unit(x)).flatten(1), data["x"], device)
        if protocol == "test-2fold":
            return linear_evaluation(encoded, data["y"], task.num_classes, device=device)
        if train_features is None:
            train_features = (frozen_features(lambda x: features(to_unit(x)).flatten(1), data["x_train"], device), data["y_train"])
    return dense_evaluation(*train_features, encoded, data["y"], task.num_classes, device=device)


def evaluation_inputs(protocol: str) -> tuple[str, ...]:
    """The ``Algorithm.evaluation_inputs`` a linear-evaluation protocol needs."""
    return TRAIN_FIELDS if protocol == "train-test" else ()


def two_view_fedavg(
    name: str, task: Task, build: Callable[[], nn.Module], loss_fn: LossFn, runtime: Runtime, *, lr: float, protocol: SelfSupervisedFields
) -> Algorithm:
    """An end-to-end self-supervised FedAvg baseline: clients minimize ``loss_fn`` on two SimCLR views, the server averages.

    ``build()`` returns a network with ``embed`` (backbone features) and ``forward``
    (projection); FedAvg (Eq. 1, weighted by client size) averages every parameter and
    buffer; the clients' Adam at ``lr`` is fresh each round; evaluation is the linear evaluation of
    the projection (``protocol.eval_features = "projection"``, as MFCL's) or the backbone features.
    """
    device, eval_features, linear_eval = runtime.device, protocol.eval_features, protocol.linear_eval
    net = GlobalModel(build, device=device)
    to_unit = unit_images(task)

    def client_update(message: Broadcast, state: State, data: ClientData, info: ClientInfo) -> tuple[Reply, State]:
        model = net.receive(message.arrays)  # on an accelerator the resident model, the broadcast copied in
        images = to_unit(data["x"].to(device))
        metrics = two_view_epochs(
            model,
            images,
            epochs=runtime.local_epochs,
            batch_size=runtime.batch_size,
            optimizer=torch.optim.Adam(model.parameters(), lr=lr),
            generator=info.generator(),
            loss_fn=loss_fn,
            min_scale=protocol.min_scale,
        )
        return Reply(model_arrays(model, resident=True), int(images.shape[0]), metrics), state  # on the run's device, averaged there

    def evaluate(state: State, data: ClientData) -> dict[str, float | list[float]]:
        model = net.receive(state, "evaluate")
        return linear_evaluate(model if eval_features == "projection" else split(model).embed, model, data, task, device, linear_eval)

    return net.algorithm(name, client_update, inputs=("x",), evaluate=evaluate, evaluation_inputs=evaluation_inputs(linear_eval))
