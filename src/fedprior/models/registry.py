"""Model registry: name -> constructor from a Task's input shape and class count."""

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


def _resnet18(task: Task) -> nn.Module:
    from fedprior.models.resnet import ResNet18

    if len(task.input_shape) != 3:
        raise ConfigError(f"algorithm.model: 'resnet18' needs images (C, H, W), the data gives {task.input_shape}")
    return ResNet18(task.input_shape[0], task.num_classes)


MODELS: dict[str, Callable[[Task], nn.Module]] = {"cnn": _cnn, "linear": _linear, "resnet18": _resnet18}


def build_model(name: str, task: Task) -> nn.Module:
    if name not in MODELS:
        raise ConfigError(f"algorithm.model: unknown model '{name}'; accepted: {', '.join(MODELS)}")
    return MODELS[name](task)
