"""The parts every whole-model supervised algorithm shares: init, broadcast, evaluate, FedAvg aggregation, and FedAvg's client loop (:func:`local_sgd_update`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic

import torch
from torch import nn

from fedprior.algorithms.base import Algorithm, Broadcast, ClientData, ClientInfo, ClientUpdate, Reply, RoundInfo, Runtime, State, Task
from fedprior.algorithms.pieces.hyperparameters import LocalSgd
from fedprior.algorithms.pieces.lanes import lane_key
from fedprior.algorithms.pieces.local_training import LossFn, classification_metrics, cross_entropy_loss, train_epochs
from fedprior.algorithms.pieces.optimizer_kernels import fused_on_cuda
from fedprior.algorithms.pieces.tensors import MODEL, M, load_model_arrays, model_arrays, weighted_mean, with_prefix
from fedprior.seeding import derived_seed


@dataclass(frozen=True)
class GlobalModel(Generic[M]):
    """The global model of an algorithm: how to build it, and the pure functions around it.

    ``build`` returns a fresh module with the architecture (its weights are then
    overwritten); ``initial`` sets the weights of round 0 (default: the module's own
    initialization under the run's ``init`` stream). Models are built on the CPU (the
    same initial weights everywhere) and trained and evaluated on ``device``, their
    forward passes in ``precision`` (``run.precision``; :mod:`~fedprior.algorithms.pieces.precision`),
    the models :meth:`receive` keeps compiled with ``torch.compile`` where ``compile`` (``run.compile``);
    States hold CPU tensors, except where an algorithm keeps them on the device (FedAvg's replies and mean,
    :func:`local_sgd_update`, :meth:`average`; the others that reply with ``model_arrays(..., resident=True)``); :meth:`receive`
    loads a State into a model kept there. ``load`` gives back what ``build`` gives (``M``).
    """

    build: Callable[[], M]
    initial: Callable[[M], None] | None = None
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    precision: str = "fp32"
    compile: bool = False
    resident: dict[str, ResidentModel[M]] = field(default_factory=dict, init=False, compare=False, repr=False, hash=False)
    """The models :meth:`receive` keeps on the device in this process, by slot and lane (filled as they are asked for)."""

    def init(self, info: RoundInfo) -> State:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(derived_seed(info.seed, "init", "model"))
            model = self.build()
        if self.initial is not None:
            self.initial(model)
        return model_arrays(model)

    def broadcast(self, state: State, info: RoundInfo) -> Broadcast:
        """Send the model parameters only (no other server state)."""
        return Broadcast(arrays={k: v for k, v in state.items() if k.startswith(MODEL)})

    def algorithm(self, name: str, client_update: ClientUpdate, **overrides) -> Algorithm:
        """A supervised algorithm on this model: FedAvg's init, broadcast, aggregation and evaluation unless overridden
        (``mean_aggregate`` with FedAvg's aggregation; an ``aggregate`` of its own is not, unless ``mean_aggregate`` says so)."""
        parts = dict(
            name=name,
            inputs=("x", "y"),
            init=self.init,
            broadcast=self.broadcast,
            client_update=client_update,
            aggregate=self.average,
            evaluate=self.evaluate,
            mean_aggregate="aggregate" not in overrides,  # the example-weighted mean, unless replaced
        )
        return Algorithm(**{**parts, **overrides})

    def parameter_names(self) -> tuple[str, ...]:
        """The State keys of the model's parameters (``model.conv.weight``; not its buffers): what a server optimizer steps.

        The build's random init draws from a forked generator: asking leaves torch's global generator as it was.
        """
        with torch.random.fork_rng(devices=[]):
            return tuple(MODEL + name for name, _ in self.build().named_parameters())

    def load(self, arrays: State) -> M:
        """A fresh model with the ``model.``-named weights of ``arrays``, on the device."""
        return load_model_arrays(self.build(), arrays).to(self.device)

    def receive(self, arrays: State, slot: str = "local") -> M:
        """The model with the ``model.``-named weights of ``arrays``, on the device: what :meth:`load` gives, without the rebuild.

        On the CPU (without ``compile``) it is :meth:`load` (a fresh model each call). Else one model per ``slot`` is built once
        in this process and kept there; each call copies the weights and buffers in place (``copy_``, all of them,
        strictly, as ``load_state_dict``) and puts back what a fresh build has: no gradients, each parameter's
        ``requires_grad`` and each module's training mode as built. The numbers are those of a rebuilt model: the
        weights and buffers are the same values, the optimizer is made afresh by the caller, and the rebuild's only
        other effect, the draws of the build's random init from torch's CPU generator, is invisible to the updates that
        call this (they draw from their client's streams, or under a reseeded generator; ``tests/experiments/test_resident.py``
        compares both paths). The returned model is the slot's until the next call with that slot in this thread's lane:
        concurrent client updates (``run.concurrent_clients``) each have their own (:mod:`~fedprior.algorithms.pieces.lanes`).

        On CUDA a slot's model is kept in the channels-last layout (:func:`cuda_layout`). With ``compile`` (``run.compile``) a slot's model is compiled once when it is built (``nn.Module.compile``: its
        state dict keeps its names) and kept on the CPU too, so that each update reuses the compiled code rather than
        compiling a rebuild; the numbers then differ from eager ones within float tolerance (fused kernels).
        """
        if self.device.type == "cpu" and not self.compile:
            return self.load(arrays)
        key = lane_key(slot)
        held = self.resident.get(key)
        if held is None:
            model = self.load(arrays)
            self.resident[key] = ResidentModel(
                model,
                {name: p.requires_grad for name, p in model.named_parameters()},
                {name: m.training for name, m in model.named_modules()},
            )
            cuda_layout(model, self.device)
            if self.compile:
                model.compile()
            return model
        return held.receive(arrays)

    def evaluate(self, state: State, data: ClientData) -> dict[str, float | list[float]]:
        """Test metrics of the global model, on the device, without autograd, in large batches."""
        return classification_metrics(self.receive(state, "evaluate"), data["x"], data["y"], precision=self.precision)

    def average(self, state: State, replies: Sequence[Reply], info: RoundInfo) -> State:
        """FedAvg (McMahan et al., 2017, Algorithm 1): the example-weighted mean of the client models."""
        models = [with_prefix(r.arrays, MODEL) for r in replies]
        mean = weighted_mean(models, [r.num_examples for r in replies])
        return {**state, **{MODEL + k: v for k, v in mean.items()}}


@dataclass(frozen=True)
class ResidentModel(Generic[M]):
    """A model kept on the device (:meth:`GlobalModel.receive`), with what a fresh build of it has besides its weights."""

    model: M
    requires_grad: dict[str, bool]
    training: dict[str, bool]

    def receive(self, arrays: State) -> M:
        """The model with the ``model.``-named tensors of ``arrays`` copied in (strictly, in place), as freshly built."""
        load_model_arrays(self.model, arrays)
        for name, parameter in self.model.named_parameters():
            parameter.grad = None
            parameter.requires_grad_(self.requires_grad[name])
        for name, module in self.model.named_modules():
            module.training = self.training[name]
        return self.model


def cuda_layout(model: nn.Module, device: torch.device) -> nn.Module:
    """On CUDA, ``model``'s 4-d weights in the channels-last layout (in place); elsewhere ``model`` as it is.

    cuDNN's tensor-core convolutions read and write NHWC: with the weights channels-last, a convolution of a
    contiguous batch returns channels-last activations and the next layers stay there, so bf16 training
    (``run.precision``) saves a transpose around every convolution. The copy_ of each
    broadcast into the model keeps the layout. The numbers are those of the contiguous layout up to the
    kernels' summation order; the CPU keeps the contiguous layout (its numbers unchanged).
    """
    if device.type == "cuda" and any(p.ndim == 4 for p in model.parameters()):
        model.to(memory_format=torch.channels_last)  # type: ignore[call-overload]  # Module.to takes memory_format; its stub overloads omit it
    return model


def round_lr(lr: float, decay: float, round_: int) -> float:
    """The client learning rate of a (1-based) round: lr * decay^(round - 1) (FedBM's code decays 0.99 per round)."""
    return lr * decay ** max(round_ - 1, 0)


def sgd(model: nn.Module, lr: float, momentum: float, weight_decay: float) -> torch.optim.SGD:
    """FedAvg's local SGD (fused kernels on CUDA: :func:`~fedprior.algorithms.pieces.optimizer_kernels.fused_on_cuda`)."""
    parameters = list(model.parameters())
    return torch.optim.SGD(parameters, lr=lr, momentum=momentum, weight_decay=weight_decay, fused=fused_on_cuda(parameters))


def model_task(task: Task, model: str) -> Callable[[], nn.Module]:
    from fedprior.models import build_model

    build_model(model, task)  # fail early, with the config field in the message, on a wrong shape
    return lambda: build_model(model, task)


def local_sgd_update(net: GlobalModel, runtime: Runtime, settings: LocalSgd, make_loss: Callable[[nn.Module, State], LossFn] | None = None) -> ClientUpdate:
    """The FedAvg client: ``runtime.local_epochs`` of SGD with ``settings``' lr, lr decay, momentum and weight decay, in mini-batches
    of ``runtime.batch_size``, from the received model; ``make_loss(global_model, client_state)`` may change the local loss.

    The client state comes back unchanged (a method that keeps one wraps this update, as MOON does). ``info.local_steps``, where
    set, caps its mini-batch steps (partial work under a deadline: an algorithm built on it declares ``local_step_budget``).
    """

    def client_update(message: Broadcast, state: State, data: ClientData, info: ClientInfo) -> tuple[Reply, State]:
        local = net.receive(message.arrays)  # on an accelerator the resident model, the broadcast copied in
        loss_fn = make_loss(net.receive(message.arrays, "global"), state) if make_loss else cross_entropy_loss
        x, y = data["x"].to(net.device), data["y"].to(net.device)  # once per update
        metrics = train_epochs(
            local,
            x,
            y,
            epochs=runtime.local_epochs,
            batch_size=runtime.batch_size,
            optimizer=sgd(local, round_lr(settings.lr, settings.lr_decay, info.round), settings.momentum, settings.weight_decay),
            generator=info.generator(),
            loss_fn=loss_fn,
            precision=net.precision,
            max_steps=info.local_steps,
        )
        return Reply(model_arrays(local, resident=True), num_examples=int(data["x"].shape[0]), metrics=metrics), state  # on the run's device

    return client_update
