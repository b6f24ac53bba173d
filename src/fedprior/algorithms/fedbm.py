"""FedBM: Federated Bias eliMinating with LKCC and CGDE (Zhu et al., MedIA 2025, the FedBM
paper: "FedBM: Stealing Knowledge from Pre-trained Language Models for Heterogeneous Federated Learning"; its Algorithm 1).

Supervised clients with very skewed labels train only the feature extractor (and a
projection to the language model's dimension) against a classifier nobody trains:

- **LKCC** (:mod:`fedprior.algorithms.pieces.lkcc`, Eq. 1-5): the class concepts in M prompts
  through a pretrained language model give per-class means and variances (Eq. 2); the
  classifier F(h) of Eq. 5 is built from them once, in this factory's closure, from the
  Task's class names: every client rebuilds the same one, so it is never sent, and it
  has no parameters, so it receives no gradient. Clients minimize Eq. 4 (Algorithm 1,
  line 21; Eq. 11).
- **CGDE** (:mod:`fedprior.algorithms.pieces.cgde`, Eq. 6-10): after aggregating, every
  ``generator_every`` rounds, the server trains the conditional generator against the
  frozen global model (``generator_steps`` Adam steps); the generator is never
  re-initialized. Once trained it is broadcast with the model (the paper: "the updated
  generator is sent to all clients"; the round loop counts its bytes), and each client
  appends ``synthetic_batch`` generated images, with uniformly drawn labels, to every
  real mini-batch (Eq. 11: the loss on D^c U D^c_hat), fresh for every step as the code
  (``synthetic_data='per-round'``: one epoch's worth generated first and reused in every
  epoch, Algorithm 1 line 19). The code trains the generator after rounds 5, 10, ..., so
  synthetic images enter from round 6. L_sem (Eq. 6) is the clients' loss (the code;
  ``semantic_loss='cross-entropy'``: the paper's CE).

Server state: ``model.*`` (backbone and projection), ``generator.*`` (its parameters and
BatchNorm statistics), ``cgde.trained`` and, with ``adam_state='kept'``,
``generator_adam.*`` (its Adam, :mod:`~fedprior.algorithms.pieces.optimizer_state`).
Aggregation is the example-weighted FedAvg of the whole state dict (the code;
``aggregation='uniform'``: Algorithm 1 line 14's plain mean). docs/fedbm.md, "The
algorithm, line by line", walks Algorithm 1 against this module.

Defaults follow the authors' code where the paper is silent (tau, generator schedule,
synthetic batch, SGD with decay 0.99 per round; ``optimizer='adam'`` and
``lr_decay_every='epoch'`` give the paper's, ``body_training.py``). Ablations (Tables VI-XII) are switches:
``classifier`` ('linear' is "w/o LKCC"; 'mean-embedding' and 'random' are Table VIII),
``cgde=false`` ("w/o CGDE"), ``prompt_fraction`` (Table VII), ``conditions='noise'``,
``lambda_div=0``, ``lambda_dis=0`` (Table IX), ``lambda_div``/``lambda_dis`` (Tables X, XI),
``text_model`` (Table XII). Beyond the paper: ``loss='balanced-softmax'`` trains the
classifier with FedETF's balanced softmax instead of Eq. 4 (which of FedETF's two changes
carries its lead), ``synthetic_augment='per-image'`` crops and flips every generated image on
its own (the code: one draw per batch), ``evaluation_logits='f'`` scores rounds on F instead of
the code's F / tau.

Equations (the FedBM paper), and where each is computed:

- Eq. 2, the concept distributions: :func:`~fedprior.algorithms.pieces.lkcc.concept_distributions`,
  :func:`~fedprior.algorithms.pieces.lkcc.concept_covariances`;
- Eq. 3-5, LKCC's logits and loss: :func:`~fedprior.algorithms.pieces.lkcc.lkcc_logits`,
  :func:`~fedprior.algorithms.pieces.lkcc.lkcc_loss` (chosen by :func:`classifier_loss`; Eq. 5's F / tau: :class:`Rescaled`);
- Eq. 7, CGDE's diversity loss: :func:`~fedprior.algorithms.pieces.cgde.diversity_loss`;
- Eq. 8, the BatchNorm statistics loss: :class:`~fedprior.algorithms.pieces.cgde.BatchNormStatistics`;
- Eq. 9, the generator's conditions: :func:`condition_distribution`, :func:`~fedprior.algorithms.pieces.cgde.concept_conditions`;
- Eq. 10, a CGDE cycle: :func:`~fedprior.algorithms.pieces.cgde.train_generator`; its images: :func:`~fedprior.algorithms.pieces.cgde.synthesize`;
- Eq. 11, the client loss on real and synthetic images: :func:`classifier_loss`; the balanced softmax
  variant: :func:`~fedprior.algorithms.pieces.class_balance.balanced_softmax_loss`.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections.abc import Sequence
from typing import Annotated, Literal

import torch
import torch.nn.functional as F
from pydantic import Field
from torch import nn

from fedprior.algorithms.base import Algorithm, Broadcast, ClientData, ClientInfo, Reply, RoundInfo, Runtime, State, Task
from fedprior.algorithms.engines.body_training import local_training, trains_body
from fedprior.algorithms.pieces.cgde import Conditions, GeneratorTraining, concept_conditions, draw_batches, synthesize, train_generator
from fedprior.algorithms.pieces.class_balance import balanced_softmax_loss, class_counts
from fedprior.algorithms.pieces.hyperparameters import CPU, BodyTraining
from fedprior.algorithms.pieces.lkcc import FixedClassifier, build_classifier, concept_covariances, concept_distributions, concept_embeddings
from fedprior.algorithms.pieces.local_training import LossFn, local_steps
from fedprior.algorithms.pieces.optimizer_state import load_optimizer_state, store_optimizer_state
from fedprior.algorithms.pieces.tensors import MODEL, add_prefix, load_model_arrays, model_arrays, with_prefix
from fedprior.data.standardize import PixelStandardizer
from fedprior.errors import ConfigError
from fedprior.models.generator import ConditionalGenerator
from fedprior.models.projected import ProjectedNet
from fedprior.seeding import derived_seed, torch_generator

GENERATOR, ADAM, TRAINED = "generator.", "generator_adam.", "cgde.trained"

Tau = Annotated[float, Field(gt=0, description="temperature tau of Eq. 4-5 (code: 7.5-17.5 by dataset and beta)")]
TextModel = Annotated[str, Field(description="language model: 'minilm' (bundled), a sentence-transformers folder, 'hf:FOLDER' or 'hf-clip:FOLDER'")]
PromptSet = Annotated[str, Field(description="prompt set (fedprior.encoders.prompts): generic, fashion, handwriting, oct, endoscopy, dermoscopy, microscopy")]
PromptFraction = Annotated[float, Field(gt=0, le=1, description="fraction of the prompts used (Table VII)")]
ClassifierKind = Annotated[
    Literal["lkcc", "linear", "mean-embedding", "random"],
    Field(description="'lkcc' (Eq. 5), 'linear' (a trained head: 'w/o LKCC'), 'mean-embedding' or 'random' (frozen; Table VIII)"),
]
Every = Annotated[int, Field(ge=1, description="train the generator after every K-th round (code: 5)")]
Steps = Annotated[int, Field(ge=1, description="Adam steps per generator training (code: 100)")]
GenBatch = Annotated[int, Field(ge=2, description="generated images per generator step (code: 64)")]
GenLr = Annotated[float, Field(gt=0, description="generator Adam learning rate (code: 3e-4, betas 0.5, 0.999)")]
GenWidth = Annotated[int, Field(ge=1, description="generator width ngf (code: 64)")]
SynBatch = Annotated[int, Field(ge=0, description="synthetic images added to each real mini-batch (paper: 8, 16 or 32)")]
Lambda = Annotated[float, Field(ge=0, description="weight of a generator loss term (Eq. 10)")]
ConditionKind = Annotated[Literal["concept", "noise"], Field(description="generator conditions: concept embeddings (Eq. 9) or noise + one-hot (Table IX)")]
Covariance = Annotated[Literal["full", "diagonal"], Field(description="Sigma of the conditions: Eq. 2's full covariance (+1e-4 I, code) or its diagonal")]
LossKind = Annotated[
    Literal["eq4", "balanced-softmax"],
    Field(
        description="'eq4': Eq. 4 under LKCC (cross-entropy for the other classifiers); 'balanced-softmax': FedETF's "
        "CE(logits + log n_client) on the classifier's logits (no Eq. 4 penalty)"
    ),
]
SyntheticAugment = Annotated[Literal["per-batch", "per-image"], Field(description="one crop and flip per batch of generated images (the code) or per image")]
EvaluationLogits = Annotated[
    Literal["f-over-tau", "f"],
    Field(description="logits the metrics (AUC, loss) are computed on with a fixed classifier: Eq. 5's F / tau (the code) or F"),
]
AdamState = Annotated[
    Literal["fresh", "kept"], Field(description="generator Adam: a fresh optimizer each cycle (code) or its moments kept in the server state")
]
SemanticLoss = Annotated[
    Literal["model-loss", "cross-entropy"],
    Field(description="L_sem of Eq. 6: the clients' training loss (Eq. 4 under LKCC; the code) or cross-entropy on the model's logits F (the paper's CE)"),
]
Aggregation = Annotated[
    Literal["examples", "uniform"],
    Field(description="the server's mean of the client models: weighted by their example counts (the code) or plain (Algorithm 1, line 14)"),
]
SyntheticData = Annotated[
    Literal["per-step", "per-round"],
    Field(
        description="a client's generated images: fresh for every local step (the code) or one epoch's worth generated before the "
        "first epoch and reused in every epoch (Algorithm 1, line 19: 'generate the synthesized dataset', then E epochs on it)"
    ),
]


def input_standardizer(task: Task) -> PixelStandardizer:
    """What maps the generator's [0, 1] images to the model's inputs: the training set's standardisation (none: the identity)."""
    if len(task.input_shape) != 3 or task.input_shape[1] != task.input_shape[2]:
        raise ConfigError(f"fedbm trains on square images (C, H, H); the data gives {task.input_shape} (set encoder.name=none)")
    return PixelStandardizer(task.pixel_mean, task.pixel_std)


def condition_distribution(embeddings: torch.Tensor, kind: str = "concept", covariance: str = "full") -> Conditions:
    """CGDE's conditions from the (K, M, D) concept embeddings: N(mu_y, Sigma_y) of Eq. 2 (Eq. 9), or noise + one-hot."""
    mean, var = concept_distributions(embeddings)
    return concept_conditions(mean, concept_covariances(embeddings) if covariance == "full" else var, kind)


def classifier_loss(net: nn.Module, x: torch.Tensor, y: torch.Tensor, kind: str = "eq4", counts: torch.Tensor | None = None) -> torch.Tensor:
    """A FedBM client's (and the server's L_sem) loss on a batch (Eq. 11 when x holds synthetic images too).

    ``kind`` 'eq4': Eq. 4 under LKCC, cross-entropy for the other classifiers; 'balanced-softmax': FedETF's
    :func:`~fedprior.algorithms.pieces.class_balance.balanced_softmax_loss` on the classifier's logits F with the client's class
    ``counts`` (None, at the server: equal counts, i.e. cross-entropy on F).
    """
    if kind == "balanced-softmax":
        logits = net(x)
        return balanced_softmax_loss(logits, y, counts if counts is not None else torch.ones(logits.shape[1]))
    if isinstance(net, ProjectedNet):
        assert isinstance(net.head, FixedClassifier)  # fedbm's build() gives every ProjectedNet one
        return net.head.loss(net.embed(x), y)
    return F.cross_entropy(net(x), y)


class Rescaled(nn.Module):
    """``model``'s logits divided by ``tau``: Eq. 5's F / tau, what the authors' code evaluates (and ranks rounds) on."""

    def __init__(self, model: nn.Module, tau: float) -> None:
        super().__init__()
        self.model, self.tau = model, tau

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x) / self.tau


def evaluated(model: nn.Module, tau: float, logits: str = "f-over-tau") -> nn.Module:
    """The network whose logits the metrics read: F / tau for a fixed classifier under 'f-over-tau' (the code), else ``model``.

    Argmax metrics (accuracy, F1, precision) are the same either way; the AUC (softmax) and the loss are not.
    """
    return Rescaled(model, tau) if logits == "f-over-tau" and isinstance(model, ProjectedNet) else model


@torch.no_grad()
def generated_images(task: Task, state: State, hyperparameters: dict, per_class: int, seed: int = 0) -> torch.Tensor | None:
    """(K, per_class, C, H, W) images in [0, 1] from the generator in ``state`` (None if it was never trained).

    ``hyperparameters`` are the run's (``config.algorithm``): they say which language model,
    prompts and conditions the generator was trained with.
    """
    if not int(state.get(TRAINED, torch.tensor(0))):
        return None
    h = hyperparameters
    embeddings = concept_embeddings(task.class_names, h["text_model"], h["prompts"], h["prompt_fraction"])
    sampler = condition_distribution(embeddings, h["conditions"], h["condition_covariance"])
    generator = ConditionalGenerator(sampler.dim, task.input_shape[0], task.input_shape[1], h["generator_width"])
    load_model_arrays(generator, state, GENERATOR).eval()
    labels = torch.arange(task.num_classes).repeat_interleave(per_class)
    images = generator(sampler.sample(labels, torch_generator(seed, "report", "generated")))
    return images.view(task.num_classes, per_class, *images.shape[1:])


@trains_body
def fedbm(
    task: Task,
    runtime: Runtime,
    *,
    body: BodyTraining,
    tau: Tau = 12.5,
    text_model: TextModel = "minilm",
    prompts: PromptSet = "generic",
    prompt_fraction: PromptFraction = 1.0,
    classifier: ClassifierKind = "lkcc",
    classifier_seed: Annotated[int, Field(ge=0, description="stream of the 'random' classifier")] = 0,
    cgde: Annotated[bool, Field(description="train and use the generator (false: 'w/o CGDE')")] = True,
    generator_every: Every = 5,
    generator_steps: Steps = 100,
    generator_batch: GenBatch = 64,
    generator_lr: GenLr = 3e-4,
    generator_width: GenWidth = 64,
    synthetic_batch: SynBatch = 16,
    lambda_div: Lambda = 1.0,
    lambda_dis: Lambda = 0.1,
    conditions: ConditionKind = "concept",
    condition_covariance: Covariance = "full",
    adam_state: AdamState = "fresh",
    augment_synthetic: Annotated[bool, Field(description="crop and flip the generated images, as the code")] = True,
    synthetic_augment: SyntheticAugment = "per-batch",
    loss: LossKind = "eq4",
    evaluation_logits: EvaluationLogits = "f-over-tau",
    semantic_loss: SemanticLoss = "model-loss",
    aggregation: Aggregation = "examples",
    synthetic_data: SyntheticData = "per-step",
) -> Algorithm:
    """FedBM: a frozen language-model classifier (LKCC, Eq. 2-5) and a server-trained generator (CGDE, Eq. 6-10)."""
    model, training = body.model, local_training(body, runtime)
    from fedprior.models import build_model

    device = training.device
    standardize = input_standardizer(task)
    build_model(model, task)  # a wrong shape fails here, naming algorithm.model
    embeddings = concept_embeddings(task.class_names, text_model, prompts, prompt_fraction)
    text_dim = embeddings.shape[-1]
    condition_sampler = condition_distribution(embeddings, conditions, condition_covariance)
    channels, side = task.input_shape[0], task.input_shape[1]
    per_batch = synthetic_augment == "per-batch"
    settings = GeneratorTraining(generator_steps, generator_batch, generator_lr, (0.5, 0.999), lambda_div, lambda_dis, augment_synthetic, per_batch)
    if cgde and lambda_dis > 0 and not any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in build_model(model, task).modules()):
        raise ConfigError("algorithm.lambda_dis: Eq. 8 needs a model with BatchNorm; set lambda_dis = 0")

    def build() -> nn.Module:
        backbone = build_model(model, task)
        if classifier == "linear":
            return backbone
        return ProjectedNet(backbone, text_dim, build_classifier(classifier, embeddings, tau, classifier_seed))

    def train_loss(net: nn.Module, x: torch.Tensor, y: torch.Tensor, counts: torch.Tensor | None = None) -> torch.Tensor:
        return classifier_loss(net, x, y, loss, counts)

    def sem_loss(net: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """L_sem of Eq. 6 on the frozen global model."""
        return F.cross_entropy(net(x), y) if semantic_loss == "cross-entropy" else train_loss(net, x, y)

    def to_input(images: torch.Tensor) -> torch.Tensor:
        return standardize.apply(images)

    def new_generator() -> ConditionalGenerator:
        return ConditionalGenerator(condition_sampler.dim, channels, side, generator_width)

    net = training.global_model(build)
    generators = training.global_model(new_generator)  # G's slots: a client's copy of the broadcast one, the server's trained one

    def generator_arrays(arrays: State) -> State:
        """The ``generator.*`` tensors of ``arrays`` named as ``generators`` receives them (``model.*``)."""
        return add_prefix(with_prefix(arrays, GENERATOR), MODEL)

    @functools.cache
    def conditions_on_device() -> Conditions:
        """The conditions' mean and factors on the run's device, moved there once per process."""
        return condition_sampler.to(device)

    def init(info: RoundInfo) -> State:
        state = net.init(info)
        if not cgde:
            return state
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(derived_seed(info.seed, "init", "generator"))
            generator = new_generator()
        return {**state, **model_arrays(generator, GENERATOR), TRAINED: torch.tensor(0)}

    def broadcast(state: State, info: RoundInfo) -> Broadcast:
        sent = net.broadcast(state, info).arrays
        if cgde and int(state[TRAINED]):
            sent = {**sent, **{k: v for k, v in state.items() if k.startswith(GENERATOR)}}
        return Broadcast(arrays=sent)

    def client_update(message: Broadcast, state: State, data: ClientData, info: ClientInfo) -> tuple[Reply, State]:
        local = net.receive(message.arrays)  # on an accelerator the resident model, the broadcast copied in
        counts = class_counts(data["y"], task.num_classes) if loss == "balanced-softmax" else None

        def loss_fn(m: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return train_loss(m, x, y, counts)

        fit_loss: LossFn = loss_fn
        if synthetic_batch > 0 and any(k.startswith(GENERATOR) for k in message.arrays):
            generator = generators.receive(generator_arrays(message.arrays))
            if device.type == "cpu":
                generator.to(memory_format=torch.channels_last)  # type: ignore[call-overload]  # Module.to takes memory_format; its stub overloads omit it
            sampler = conditions_on_device()
            # every local step's labels, noise and crop-and-flip seed, drawn before the first step from the client's
            # "synthetic" stream in the order the steps use them (the numbers of drawing at each step), moved to the device once
            # ("per-round": one epoch's draws, Algorithm 1 line 19's dataset, that every epoch visits in the same order)
            per_epoch = local_steps(int(data["x"].shape[0]), training.batch_size, 1)
            steps = per_epoch * (1 if synthetic_data == "per-round" else training.epochs)
            draws = draw_batches(sampler, task.num_classes, synthetic_batch, steps, info.generator("synthetic"), device)
            step = itertools.count()

            def with_synthetic(m: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
                i = next(step) % steps  # training.fit calls the loss once per local step
                fake = synthesize(generator, sampler, draws, i, to_input, augment_synthetic, per_batch)
                return train_loss(m, torch.cat([x, fake]), torch.cat([y, draws.labels[i]]), counts)

            fit_loss = with_synthetic

        metrics = training.fit(local, data, info, loss_fn=fit_loss)
        return Reply(model_arrays(local, resident=True), num_examples=int(data["x"].shape[0]), metrics=metrics), state  # on the run's device

    def aggregate(state: State, replies: Sequence[Reply], info: RoundInfo) -> State:
        weighted = replies if aggregation == "examples" else [dataclasses.replace(r, num_examples=1) for r in replies]
        state = net.average(state, weighted, info)
        if not cgde or info.round % generator_every:
            return state
        teacher = net.receive(state, "teacher")  # on an accelerator resident models, the new global model and G copied in
        generator = generators.receive(generator_arrays(state), "server")
        if device.type == "cpu":  # oneDNN's fast path for convolutions (see body_training.fast_layout)
            teacher.to(memory_format=torch.channels_last)  # type: ignore[call-overload]  # Module.to takes memory_format; its stub overloads omit it
            generator.to(memory_format=torch.channels_last)  # type: ignore[call-overload]  # Module.to takes memory_format; its stub overloads omit it
        adam = torch.optim.Adam(generator.parameters(), lr=settings.lr, betas=settings.betas)
        if adam_state == "kept":
            load_optimizer_state(adam, generator, state, ADAM)
        train_generator(generator, teacher, sem_loss, conditions_on_device(), task.num_classes, settings, to_input, info.generator("cgde"), adam)
        if device.type == "cpu":
            generator.to(CPU, memory_format=torch.contiguous_format)  # type: ignore[call-overload]  # Module.to takes memory_format; its stub overloads omit it
        new = {**state, **model_arrays(generator, GENERATOR, resident=True), TRAINED: torch.tensor(1)}  # G stays on the run's device
        if adam_state == "kept":
            new = store_optimizer_state(new, adam, generator, ADAM)
        return new

    return Algorithm(
        name="fedbm",
        inputs=("x", "y"),
        init=init,
        broadcast=broadcast,
        client_update=client_update,
        aggregate=aggregate,
        evaluate=lambda state, data: training.evaluate(evaluated(net.receive(state, "evaluate"), tau, evaluation_logits), data),
        thread_safe_updates=True,
    )
