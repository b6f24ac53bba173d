"""MFCL, Modular Federated Contrastive Learning with Peer Normalization (the MFCL paper; docs/mfcl.md walks it line by line).

Two modules, trained one after the other in one run (three stages):

1. ``sensor`` (training phase 1, Sec. 2.1): every sampled client trains the sensor
   module, the convolutional autoencoder of Table 5 normalized by PN (Eq. 3-4; or GN,
   BN), to reconstruct two SimCLR views of each of its images, A(x) in Eq. 2, with
   binary cross-entropy, Adam (lr 1e-3, fresh each round) and mini-batches of K images
   (2K rows, view-major: PN pools the two views of a sample); the server averages the
   modules weighted by client size, theta^fed = sum_m |D^m| theta^m / sum_m |D^m| (Eq. 1).
   PN and GN normalize groups of ``norm_group_channels`` channels, the paper's Lambda
   (Sec. 2.2, Eq. 3: "a group of Lambda <= C channels"): a layer of C channels has C / Lambda
   groups. The paper gives no value; the default 2 is GroupNorm's default of 32 groups at
   Table 5's 64 channels.
2. ``upload`` (phase 2, one round): the server sends the trained encoder f; each client
   that takes part draws two views of each image once and sends z_{i,j} = f(x~_{i,j}),
   j = 1, 2, the "contrastive client representation mini-batches" (Sec. 2.1, phase 2),
   (w, H/2, W/2) each: Table 5's max pool halves the side (64 x 16 x 16 on CIFAR-10, where
   Table 8 counts 32 x 32 x 64, which Table 5's architecture cannot give). A BN sensor
   encodes with its running statistics, averaged by FedAvg (``encode_bn = "running"``, eval
   mode, what TensorFlow's inference call does; the paper does not say), or with each
   encoding batch's own statistics (``"batch"``: both views of up to 512 images); PN and GN
   have no running statistics, and PN pools each image's two views as in training. Clients whose
   representations never arrive (Figure 7, Appendix D.2) are the field ``drop``: the
   stage's participation is 1 - drop, drawn from the run's shared sampling stream.
3. ``server`` (phase 2, ``server_epochs`` rounds, no client involved): the server trains
   the discriminator, a ResNet-18 whose stem takes the representation's channels (BN, as
   the paper's server uses), with Table 6's projection head on top, by minimizing NT-Xent
   (Appendix A, Eq. 5) over large batches of representation pairs; one round = one epoch
   over all received pairs, so the progress bar and ``metrics.jsonl`` advance per epoch
   and each epoch is checkpointed (Adam's moments are in the server State), and a run
   killed in phase 2 resumes with the same numbers.

Evaluation (stage ``server`` and the initial model): linear evaluation
(:mod:`fedprior.algorithms.pieces.linear_eval`; ``linear_eval = "train-test"``, the paper's Sec. 3:
a dense layer trained with the labels of the training pool's frozen features and scored
on the test set; ``"test-2fold"``: cross-fitted on the test set alone) of the features of
the images through the frozen encoder (``eval_input = "clean"``: each image alone, and PN with a single view is GN,
while the discriminator was trained on pairs normalized together; ``"views"``: two SimCLR views of each image
encoded together as the upload does, their features averaged; the paper does not say; BN as ``encode_bn``
says), the discriminator and, as the paper reads them ("one linear Dense
layer ... on top of the projection layers"), the projection head
(``eval_features = "backbone"`` reads the discriminator's pooled features instead, as
SimCLR does; ``"sensor"`` the encoder's representations z, flattened, before any
discriminator: a control, evaluated after the sensor stage too). The dense layer trains on the
training pool encoded as the test set is (``linear_train = "pool"``) or on the representation pairs
the server received, each view a row, with labels the clients send for it (``"uploads"``: the
server's B^s, on which Sec. 3's first alternative trains the linear layer; docs/mfcl.md, "The BN
path, walked"). ``server_loss`` is the last epoch's mean NT-Xent.

The server State holds ``sensor.*`` (the autoencoder), ``disc.*`` and ``proj.*``
(discriminator and head), ``opt.*`` (their Adam state, :mod:`~fedprior.algorithms.pieces.optimizer_state`), and after the upload
``reps.view1``, ``reps.view2`` (N, w, H/2, W/2) and ``reps.client`` (who sent each row). On an accelerator
all but ``reps.client`` stay on the run's device (the sensor's replies and their mean, the representations as the clients
send them, the discriminator and Adam's moments after each epoch), and the sensor, its encoder and the discriminator are
models kept there that receive the State by in-place copies (:meth:`~fedprior.algorithms.engines.supervised.GlobalModel.receive`).

Equations (the MFCL paper), and where each is computed:

- Eq. 1, the client-size-weighted average: :func:`~fedprior.algorithms.pieces.tensors.weighted_mean`;
- Eq. 2, the autoencoder's reconstruction of two views: ``train_sensor`` inside :func:`mfcl`
  (the module: :class:`~fedprior.models.autoencoder.SensorModule`; the views: :func:`~fedprior.data.augment.simclr.simclr_views`);
- Eq. 3-4, Peer Normalization: :class:`~fedprior.models.peer_norm.PeerNorm`;
- Eq. 5, NT-Xent: :func:`~fedprior.algorithms.pieces.contrastive.nt_xent` (``train_discriminator`` inside :func:`mfcl`);
- Sec. 3, linear evaluation: :func:`~fedprior.algorithms.engines.self_supervised.linear_evaluate`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Literal

import torch
import torch.nn.functional as F
from pydantic import Field
from torch import nn

from fedprior.algorithms.base import Algorithm, Broadcast, ClientData, ClientInfo, Reply, RoundInfo, Runtime, Stage, State, Task
from fedprior.algorithms.engines.self_supervised import evaluation_inputs, frozen_features, linear_evaluate, two_view_epochs, unit_images
from fedprior.algorithms.engines.supervised import GlobalModel
from fedprior.algorithms.pieces.contrastive import nt_xent
from fedprior.algorithms.pieces.hyperparameters import (
    ClientLr,
    LinearEval,
    MinScale,
    NormGroupChannels,
    ProjectionDim,
    Temperature,
    check_group_channels,
)
from fedprior.algorithms.pieces.optimizer_state import load_optimizer_state, store_optimizer_state
from fedprior.algorithms.pieces.tensors import MODEL, add_prefix, model_arrays, weighted_mean, with_prefix
from fedprior.data.augment import seed_from
from fedprior.data.augment.simclr import simclr_views
from fedprior.errors import ConfigError
from fedprior.models.autoencoder import SensorModule
from fedprior.models.peer_norm import peer_views
from fedprior.models.projection import ProjectionHead
from fedprior.models.resnet import ResNet18
from fedprior.seeding import derived_seed

SENSOR, ENCODER, DISC, PROJ, REPS = "sensor.", "sensor.encoder.", "disc.", "proj.", "reps."
STAGES = ("sensor", "upload", "server")

SensorNorm = Annotated[
    Literal["pn", "pn-eq3", "gn", "bn"],
    Field(
        description="normalization of the sensor module: pn (Peer Normalization, Eq. 3-4: a mean and variance per sample and group of "
        "channels, pooled over the two views, as GN's), pn-eq3 (Eq. 3 as printed: a per-pixel mean, the variance summed over the pixels), gn, bn"
    ),
]
EncodeBN = Annotated[
    Literal["running", "batch"],
    Field(
        description="how a BN sensor encodes for the server and the evaluation: running (its FedAvg-averaged running statistics, "
        "eval mode) or batch (each encoding batch's own statistics); PN and GN ignore it"
    ),
]
SensorWidth = Annotated[int, Field(ge=1, description="channels of the sensor module (Table 5: 64)")]
Drop = Annotated[float, Field(ge=0, lt=1, description="fraction of clients whose representations never reach the server in phase 2 (Figure 7's delta)")]
ServerEpochs = Annotated[int, Field(ge=0, description="phase 2: epochs of discriminator training over the received representations (one round each)")]
ServerBatch = Annotated[int, Field(ge=2, description="phase 2: representation pairs per server mini-batch (2x rows)")]
ServerLr = Annotated[float, Field(gt=0, description="phase 2: Adam learning rate of the discriminator and projection head")]
DiscWidth = Annotated[int, Field(ge=1, description="width of the ResNet-18 discriminator (64 is the standard network)")]
MfclEvalFeatures = Annotated[
    Literal["projection", "backbone", "sensor"],
    Field(
        description="features the linear evaluation reads: after the projection head (the paper), the discriminator's pooled output, "
        "or the sensor's representations z before the discriminator (a control)"
    ),
]

LinearTrain = Annotated[
    Literal["pool", "uploads"],
    Field(
        description="what the linear evaluation's dense layer is trained on: pool (the training images re-encoded by the final "
        "encoder as the test images are) or uploads (the representation pairs the server received, each view a row, with their "
        "labels: the server's B^s, on which Sec. 3's first alternative trains the linear layer; the clients send their labels, "
        "used by nothing else)"
    ),
]

EvalInput = Annotated[
    Literal["clean", "views"],
    Field(
        description="what the linear evaluation encodes for each image: clean (the image alone; PN with one view is GN) or views "
        "(two SimCLR views encoded together, PN pooled over the pair as in training and the upload; the two views' features averaged)"
    ),
]


def encoding_mode(module: nn.Module, encode_bn: str) -> nn.Module:
    """``module`` in eval mode, its BatchNorm layers in train mode (the batch's own statistics) if ``encode_bn == "batch"``.

    Used under no_grad on a model that receives the state again before its next use: BN's running statistics move in
    train mode but are never kept.
    """
    module.eval()
    if encode_bn == "batch":
        for layer in module.modules():
            if isinstance(layer, nn.modules.batchnorm._BatchNorm):
                layer.train()
    return module


class Discriminator(nn.Module):
    """Phase 2's trained pair: the ResNet-18 ``disc`` and its projection head ``proj`` (the State's ``disc.*`` and ``proj.*``)."""

    def __init__(self, disc: ResNet18, proj: ProjectionHead) -> None:
        super().__init__()
        self.disc, self.proj = disc, proj


def as_model(arrays: State, prefix: str) -> State:
    """The ``prefix``-named tensors of ``arrays`` (``sensor.``, ``sensor.encoder.``) renamed ``model.``, as a GlobalModel receives them."""
    return add_prefix(with_prefix(arrays, prefix), MODEL)


def mfcl(
    task: Task,
    runtime: Runtime,
    *,
    norm: SensorNorm = "pn",
    norm_group_channels: NormGroupChannels = 2,
    sensor_width: SensorWidth = 64,
    lr: ClientLr = 1e-3,
    drop: Drop = 0.0,
    server_epochs: ServerEpochs = 100,
    server_batch_size: ServerBatch = 512,
    server_lr: ServerLr = 1e-3,
    temperature: Temperature = 0.5,
    disc_width: DiscWidth = 64,
    projection_dim: ProjectionDim = 128,
    eval_features: MfclEvalFeatures = "projection",
    linear_eval: LinearEval = "train-test",
    encode_bn: EncodeBN = "running",
    eval_input: EvalInput = "clean",
    min_scale: MinScale = 0.08,
    linear_train: LinearTrain = "pool",
) -> Algorithm:
    """MFCL: a federated autoencoder with Peer Normalization, then a server-side contrastive discriminator (the MFCL paper).

    Phase 1 trains the sensor module with FedAvg (Eq. 1-2), phase 2 sends each client's
    representations once and trains a ResNet-18 with NT-Xent (Eq. 5) at the server;
    scored by linear evaluation. See the module docstring for the three stages.
    """
    if len(task.input_shape) != 3:
        raise ConfigError(f"algorithm.name: mfcl trains on images (C, H, W); the data gives {task.input_shape} (set encoder.name = 'none')")
    channels = task.input_shape[0]
    check_group_channels("sensor_width", sensor_width, norm, norm_group_channels)
    to_unit = unit_images(task)

    def sensor() -> SensorModule:
        return SensorModule(channels, sensor_width, norm, norm_group_channels)

    rep_channels = sensor_width

    def discriminator() -> tuple[ResNet18, ProjectionHead]:
        body = ResNet18(rep_channels, num_classes=0, width=disc_width, norm="bn")
        return body, ProjectionHead(body.feature_dim, projection_dim)

    # The models, on the device; on an accelerator one per slot, kept there and receiving the State by in-place copies
    # (GlobalModel.receive, whose tensors are named model.*: as_model renames a part of the State).
    sensor_net = GlobalModel(sensor, device=runtime.device)
    encoder_net = GlobalModel(lambda: sensor().encoder, device=runtime.device)  # the upload's broadcast and the evaluation: f alone
    server_net = GlobalModel(lambda: Discriminator(*discriminator()), device=runtime.device)

    def server_modules(state: State, slot: str) -> Discriminator:
        """The discriminator and its projection head with the State's weights, on the device."""
        return server_net.receive({MODEL + k: v for k, v in state.items() if k.startswith((DISC, PROJ))}, slot)

    def server_optimizer(body: nn.Module, head: nn.Module) -> torch.optim.Adam:
        return torch.optim.Adam([*body.parameters(), *head.parameters()], lr=server_lr)

    def init(info: RoundInfo) -> State:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(derived_seed(info.seed, "init", "model"))
            module = sensor()
            body, head = discriminator()
        return {**model_arrays(module, SENSOR), **model_arrays(body, DISC), **model_arrays(head, PROJ)}

    def broadcast(state: State, info: RoundInfo) -> Broadcast:
        """Phase 1: the whole sensor module; the upload: the trained encoder f only; the server stage: nothing."""
        prefix = {"sensor": SENSOR, "upload": ENCODER}.get(info.stage)
        return Broadcast({k: v for k, v in state.items() if k.startswith(prefix)} if prefix else {})

    def train_sensor(message: Broadcast, data: ClientData, info: ClientInfo) -> Reply:
        """Eq. 2: local Adam epochs on the BCE between the two views and their reconstructions."""
        module = sensor_net.receive(as_model(message.arrays, SENSOR))
        images = to_unit(data["x"].to(runtime.device))

        def reconstruction(model: nn.Module, view1: torch.Tensor, view2: torch.Tensor) -> torch.Tensor:
            pairs = torch.cat([view1, view2])
            return F.binary_cross_entropy_with_logits(model(pairs), pairs)

        metrics = two_view_epochs(
            module,
            images,
            epochs=runtime.local_epochs,
            batch_size=runtime.batch_size,
            optimizer=torch.optim.Adam(module.parameters(), lr=lr),
            generator=info.generator(),
            loss_fn=reconstruction,
            min_scale=min_scale,
        )
        return Reply(model_arrays(module, SENSOR, resident=True), int(images.shape[0]), metrics)  # on the run's device, averaged there

    @torch.no_grad()
    def encode_views(message: Broadcast, data: ClientData, info: ClientInfo) -> Reply:
        """Phase 2, client side: z_{i,j} = f(x~_{i,j}) for two fresh views of every image, sent once (kept on the run's
        device, where the server trains on them)."""
        encoder = encoding_mode(encoder_net.receive(as_model(message.arrays, ENCODER)), encode_bn)
        images = to_unit(data["x"].to(runtime.device))
        view1, view2 = simclr_views(images, seed_from(info.generator("views")), min_scale=min_scale)
        z1, z2 = [], []
        for i in range(0, images.shape[0], 512):
            with peer_views(encoder, 2):  # PN pools each image's two views, as in training
                z = encoder(torch.cat([view1[i : i + 512], view2[i : i + 512]]))
            half = z.shape[0] // 2
            z1.append(z[:half])
            z2.append(z[half:])
        labels = {REPS + "label": data["y"].to(torch.int64)} if linear_train == "uploads" else {}  # for the evaluation only
        return Reply({REPS + "view1": torch.cat(z1), REPS + "view2": torch.cat(z2), **labels}, int(images.shape[0]))

    def client_update(message: Broadcast, state: State, data: ClientData, info: ClientInfo) -> tuple[Reply, State]:
        if info.stage == "sensor":
            return train_sensor(message, data, info), state
        if info.stage == "upload":
            return encode_views(message, data, info), state
        raise ValueError(f"mfcl: no client work in stage '{info.stage}'")

    def receive(state: State, replies: Sequence[Reply]) -> State:
        """Concatenate the clients' representation pairs (in client order) into the server State."""
        owners = torch.cat([torch.full((r.num_examples,), r.client_id, dtype=torch.int64) for r in replies])
        sent = {k: torch.cat([r.arrays[k] for r in replies]) for k in replies[0].arrays if k.startswith(REPS)}
        return {**state, **sent, REPS + "client": owners}

    def train_discriminator(state: State, info: RoundInfo) -> State:
        """One epoch of NT-Xent (Eq. 5) over shuffled batches of the received pairs; Adam state carried in the State.

        Everything stays on the device: the representations (moved there once if the State has them on the host, after a
        resume, and kept there in the returned State), the batches gathered there by the epoch's order (drawn on the host
        from the epoch's stream and copied once), the loss summed there (``server.loss``, read by the evaluation), the
        discriminator, its head and Adam's moments: an epoch syncs with the host a fixed number of times, whatever its steps.
        """
        if REPS + "view1" not in state:  # no representation arrived (every client of the upload failed)
            return state
        pair = server_modules(state, "server")
        body, head = pair.disc, pair.proj
        optimizer = server_optimizer(body, head)
        load_optimizer_state(optimizer, pair, state)
        z1, z2 = state[REPS + "view1"].to(runtime.device), state[REPS + "view2"].to(runtime.device)
        order = torch.randperm(z1.shape[0], generator=info.generator("epoch")).to(runtime.device)
        pair.train()
        total, steps = torch.zeros((), dtype=torch.float64, device=runtime.device), 0
        for start in range(0, z1.shape[0], server_batch_size):
            rows = order[start : start + server_batch_size]
            if rows.numel() < 2:
                continue
            batch = torch.cat([z1[rows], z2[rows]])
            h = head(body.embed(batch))
            loss = nt_xent(h[: rows.numel()], h[rows.numel() :], temperature)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            total += loss.detach()  # float64, as the sum of the steps' float32 losses was on the host
            steps += 1
        kept = {**state, REPS + "view1": z1, REPS + "view2": z2}
        trained = store_optimizer_state({**kept, **model_arrays(body, DISC, resident=True), **model_arrays(head, PROJ, resident=True)}, optimizer, pair)
        return {**trained, "server.loss": (total / max(steps, 1)).float()}

    def aggregate(state: State, replies: Sequence[Reply], info: RoundInfo) -> State:
        if info.stage == "sensor":
            mean = weighted_mean([with_prefix(r.arrays, SENSOR) for r in replies], [r.num_examples for r in replies])
            return {**state, **{SENSOR + k: v for k, v in mean.items()}}
        if info.stage == "upload":
            return receive(state, replies)
        return train_discriminator(state, info)

    def evaluate(state: State, data: ClientData) -> dict[str, float | list[float]]:
        encoder = encoder_net.receive(as_model(state, ENCODER), "evaluate")
        pair = server_modules(state, "evaluate")
        body, head = pair.disc, pair.proj

        views_stream = torch.Generator().manual_seed(0)  # eval_input = "views": the same views at every evaluation

        def reads(z: torch.Tensor) -> torch.Tensor:  # the evaluated features of representations z (the sensor's output)
            if eval_features == "sensor":
                return z
            h = body.embed(z)
            return head(h) if eval_features == "projection" else h

        def features(x: torch.Tensor) -> torch.Tensor:
            encoding_mode(encoder, encode_bn)  # after linear_evaluate's eval(): BN as the clients encode
            if eval_input == "views":  # as the upload encodes: two views, PN pooled over each image's pair
                view1, view2 = simclr_views(x, seed_from(views_stream), min_scale=min_scale)
                with peer_views(encoder, 2):
                    z = encoder(torch.cat([view1, view2]))
            else:
                z = encoder(x)  # PN reads one view (linear_evaluate's peer_views): GN on the image alone
            out = reads(z)
            return out if eval_input == "clean" else (out[: x.shape[0]] + out[x.shape[0] :]) / 2

        parts = nn.ModuleDict({"encoder": encoder, "disc": body, "proj": head})
        uploads = None
        if linear_train == "uploads" and REPS + "label" in state:  # before the upload (the initial model): the pool
            parts.eval()
            received = torch.cat([state[REPS + "view1"], state[REPS + "view2"]])
            uploads = (frozen_features(lambda z: reads(z).flatten(1), received, runtime.device), torch.cat([state[REPS + "label"]] * 2))
        metrics = linear_evaluate(features, parts, data, task, runtime.device, linear_eval, train_features=uploads)
        if "server.loss" in state:
            metrics["server_loss"] = float(state["server.loss"])
        return metrics

    return Algorithm(
        name="mfcl",
        inputs=("x",),
        init=init,
        broadcast=broadcast,
        client_update=client_update,
        aggregate=aggregate,
        evaluate=evaluate,
        evaluation_inputs=evaluation_inputs(linear_eval),
        diagnostics=("y",) if linear_train == "uploads" else (),
        stages=(
            Stage("sensor", evaluate=eval_features == "sensor"),
            Stage("upload", rounds=1, fraction=1.0 - drop, evaluate=False),
            Stage("server", rounds=server_epochs, server_only=True),
        ),
    )
