"""Model registry: name -> constructor from a Task's input shape and class count (and, for some, options such as ``norm``)."""

from __future__ import annotations

from collections.abc import Callable

from torch import nn

from fedprior.errors import ConfigError
from fedprior.models.cnn import SmallCNN
from fedprior.models.convnet import ConvNet
from fedprior.models.resnet import ResNet18
from fedprior.task import Task


def _square_images(task: Task, name: str) -> tuple[int, int]:
    """(channels, side) of the task's images, or a ConfigError naming the model."""
    if len(task.input_shape) != 3 or task.input_shape[1] != task.input_shape[2]:
        raise ConfigError(f"algorithm.model: '{name}' needs square images (C, H, H), the data gives {task.input_shape}")
    return task.input_shape[0], task.input_shape[1]


def _cnn(task: Task) -> nn.Module:
    channels, side = _square_images(task, "cnn")
    return SmallCNN(channels, side, task.num_classes)


def _resnet18(task: Task) -> nn.Module:
    """ResNet-18, CIFAR form (3x3 stem, full resolution), BatchNorm: for 32x32 images."""
    return ResNet18(_square_images(task, "resnet18")[0], task.num_classes)


def _resnet18_imagenet(task: Task) -> nn.Module:
    """ResNet-18 with the ImageNet stem (7x7 stride 2, max pool): the FedBM authors' network for 128x128 images."""
    return ResNet18(_square_images(task, "resnet18-imagenet")[0], task.num_classes, stem="imagenet")


def _linear(task: Task) -> nn.Module:
    if len(task.input_shape) != 1:
        raise ConfigError(f"algorithm.model: 'linear' needs feature vectors; the data gives {task.input_shape} (set encoder.name to a frozen encoder)")
    return nn.Linear(task.input_shape[0], task.num_classes)


def _convnet(task: Task, norm: str = "bn", width: int = 32) -> nn.Module:
    """The small CNN of the embedded settings (models/convnet.py), depth 3."""
    return ConvNet(_square_images(task, "convnet")[0], task.num_classes, width=width, depth=3, norm=norm)


def _convnet_small(task: Task, norm: str = "bn") -> nn.Module:
    """ConvNet width 16, depth 3: the 2-core embedded settings (FedBM's presets), about 2.5x faster than 'convnet'."""
    return ConvNet(_square_images(task, "convnet-small")[0], task.num_classes, width=16, depth=3, norm=norm)


def _wrn28_2(task: Task, norm: str = "bn-batch") -> nn.Module:
    """WRN-28-2 (models/wrn.py), FedDB's network."""
    from fedprior.models.wrn import WideResNet

    return WideResNet(_square_images(task, "wrn28-2")[0], task.num_classes, depth=28, widen=2, norm=norm)


MODELS: dict[str, Callable[..., nn.Module]] = {
    "cnn": _cnn,
    "linear": _linear,
    "convnet": _convnet,
    "convnet-small": _convnet_small,
    "resnet18": _resnet18,
    "resnet18-imagenet": _resnet18_imagenet,
    "wrn28-2": _wrn28_2,
}
"""Every network here but 'cnn' and 'linear' splits into ``embed`` and ``head`` (body/head methods need it)."""


def build_model(name: str, task: Task, **options) -> nn.Module:
    """The network ``name`` for ``task``; ``options`` (e.g. ``norm``, ``width``) go to constructors that take them."""
    if name not in MODELS:
        raise ConfigError(f"algorithm.model: unknown model '{name}'; accepted: {', '.join(MODELS)}")
    return MODELS[name](task, **options)
