"""Model registry: name -> constructor from a Task's input shape and class count (and, for some, options such as ``norm``)."""

from __future__ import annotations

from typing import Callable

from torch import nn

from fedprior.algorithms.base import Task
from fedprior.errors import ConfigError
from fedprior.models.cnn import SmallCNN


def _cnn(task: Task) -> nn.Module:
    if len(task.input_shape) != 3 or task.input_shape[1] != task.input_shape[2]:
        raise ConfigError(f"algorithm.model: 'cnn' needs square images (C, H, H), the data gives {task.input_shape}")
    return SmallCNN(task.input_shape[0], task.input_shape[1], task.num_classes)


def _linear(task: Task) -> nn.Module:
    if len(task.input_shape) != 1:
        raise ConfigError(
            f"algorithm.model: 'linear' needs feature vectors; the data gives {task.input_shape} "
            "(set encoder.name to a frozen encoder)"
        )
    return nn.Linear(task.input_shape[0], task.num_classes)


def _images(task: Task, name: str) -> tuple[int, ...]:
    if len(task.input_shape) != 3:
        raise ConfigError(f"algorithm.model: '{name}' needs images (C, H, W), the data gives {task.input_shape}")
    return task.input_shape


def _convnet(task: Task, norm: str = "bn", width: int = 32) -> nn.Module:
    """The small CNN of the embedded settings (models/convnet.py), depth 3."""
    from fedprior.models.convnet import ConvNet

    return ConvNet(_images(task, "convnet")[0], task.num_classes, width=width, depth=3, norm=norm)


def _wrn28_2(task: Task, norm: str = "bn-batch") -> nn.Module:
    """WRN-28-2 (models/wrn.py), FedDB's network."""
    from fedprior.models.wrn import WideResNet

    return WideResNet(_images(task, "wrn28-2")[0], task.num_classes, depth=28, widen=2, norm=norm)


MODELS: dict[str, Callable[..., nn.Module]] = {"cnn": _cnn, "linear": _linear, "convnet": _convnet, "wrn28-2": _wrn28_2}


def build_model(name: str, task: Task, **options) -> nn.Module:
    """The network ``name`` for ``task``; ``options`` (e.g. ``norm``, ``width``) go to constructors that take them."""
    if name not in MODELS:
        raise ConfigError(f"algorithm.model: unknown model '{name}'; accepted: {', '.join(MODELS)}")
    return MODELS[name](task, **options)
