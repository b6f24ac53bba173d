"""Model registry: name -> constructor from a Task's input shape and class count."""

from __future__ import annotations

from typing import Callable

from torch import nn

from fedprior.algorithms.base import Task
from fedprior.errors import ConfigError
from fedprior.models.cnn import SmallCNN
from fedprior.models.convnet import ConvNet
from fedprior.models.resnet import ResNet18


def _square_images(task: Task, name: str) -> tuple[int, int]:
    """(channels, side) of the task's images, or a ConfigError naming the model."""
    if len(task.input_shape) != 3 or task.input_shape[1] != task.input_shape[2]:
        raise ConfigError(f"algorithm.model: '{name}' needs square images (C, H, H), the data gives {task.input_shape}")
    return task.input_shape[0], task.input_shape[1]


def _cnn(task: Task) -> nn.Module:
    channels, side = _square_images(task, "cnn")
    return SmallCNN(channels, side, task.num_classes)


def _convnet(task: Task) -> nn.Module:
    """The embedded settings' network (FedBM's embedded tables): ConvNet width 32, depth 3, BatchNorm."""
    return ConvNet(_square_images(task, "convnet")[0], task.num_classes, width=32, depth=3, norm="bn")


def _convnet_small(task: Task) -> nn.Module:
    """ConvNet width 16, depth 3: the 2-core embedded settings (FedBM's presets), about 2.5x faster than 'convnet'."""
    return ConvNet(_square_images(task, "convnet-small")[0], task.num_classes, width=16, depth=3, norm="bn")


def _resnet18(task: Task) -> nn.Module:
    """FedBM's backbone (fedbm.txt Sec. IV-A2), CIFAR form, BatchNorm."""
    return ResNet18(_square_images(task, "resnet18")[0], task.num_classes)


def _linear(task: Task) -> nn.Module:
    if len(task.input_shape) != 1:
        raise ConfigError(
            f"algorithm.model: 'linear' needs feature vectors; the data gives {task.input_shape} "
            "(set encoder.name to a frozen encoder)"
        )
    return nn.Linear(task.input_shape[0], task.num_classes)


MODELS: dict[str, Callable[[Task], nn.Module]] = {"cnn": _cnn, "linear": _linear, "convnet": _convnet, "convnet-small": _convnet_small,
                                                 "resnet18": _resnet18}
"""Every network here but 'cnn' and 'linear' splits into ``embed`` and ``head`` (body/head methods need it)."""


def build_model(name: str, task: Task) -> nn.Module:
    if name not in MODELS:
        raise ConfigError(f"algorithm.model: unknown model '{name}'; accepted: {', '.join(MODELS)}")
    return MODELS[name](task)
