"""Shared pieces the methods build on: test metrics from logits, communication bytes, the shared networks."""

import pytest
import torch

from fedprior.algorithms.base import Task
from fedprior.algorithms.fedavg import fedavg
from fedprior.algorithms.pieces.metrics import logit_metrics
from fedprior.algorithms.pieces.tensors import MODEL, payload_bytes
from fedprior.models.convnet import ConvNet
from fedprior.models.norm import NORMS, norm2d
from fedprior.models.resnet import ResNet18
from fedprior.runtime.round_loop import RoundLoop
from fedprior.runtime.simulation import simulate
from tests.support.toy_data import toy_images


def test_logit_metrics_on_a_hand_computed_case():
    # labels 0,0,1,2 ; predictions 0,1,1,1 -> class 0: P=1 R=.5 F1=2/3; class 1: P=1/3 R=1 F1=.5; class 2: F1=0
    logits = torch.tensor([[5.0, 0, 0], [0, 5.0, 0], [0, 5.0, 0], [0, 5.0, 0]])
    y = torch.tensor([0, 0, 1, 2])
    m = logit_metrics(logits, y)
    assert m["accuracy"] == pytest.approx(0.5)
    assert m["macro_f1"] == pytest.approx((2 / 3 + 0.5 + 0) / 3)
    assert m["class_accuracy"] == pytest.approx([0.5, 1.0, 0.0])
    assert m["loss"] == pytest.approx(float(torch.nn.functional.cross_entropy(logits, y)))


def test_every_round_records_the_bytes_its_clients_sent_and_received_in_total():
    task = Task(num_classes=3, input_shape=(1, 8, 8), class_names=("a", "b", "c"), num_clients=4)
    algo = fedavg(task, local_epochs=1, batch_size=8, model="cnn", lr=0.1)
    data = [toy_images(16, seed=c) for c in range(4)]
    result = simulate(algo, lambda c: data[c], 4, toy_images(20, 9), RoundLoop(seed=0, rounds=2, fraction=0.5))
    model_bytes = sum(v.numel() * v.element_size() for k, v in result.state.items() if k.startswith(MODEL))
    assert model_bytes > 1000
    for record in result.progress.history:
        assert len(record["clients"]) == 2  # fraction 0.5 of 4 clients: the totals are 2 x the model
        assert record["download_bytes"] == 2 * model_bytes and record["upload_bytes"] == 2 * model_bytes
        assert record["upload_bytes_by_client"] == {str(c): model_bytes for c in record["clients"]}
    assert payload_bytes({"a": torch.zeros(3, dtype=torch.float64), "b": torch.zeros(2, 2, dtype=torch.int8)}) == 28


def test_resnet18_has_the_standard_size_and_splits_into_body_and_head():
    net = ResNet18(3, 10)
    assert sum(p.numel() for p in net.parameters()) == 11_173_962  # the CIFAR ResNet-18
    x = torch.randn(2, 3, 32, 32)
    assert net.embed(x).shape == (2, 512) and torch.allclose(net(x), net.head(net.embed(x)))
    encoder = ResNet18(64, 0, width=16, norm="gn")  # MFCL: a discriminator on 64-channel representations
    assert encoder(torch.randn(2, 64, 16, 16)).shape == (2, 128)


def test_the_imagenet_stem_is_the_fedbm_authors_resnet18_at_a_fifteenth_of_the_cifar_forms_flops_on_128x128_images():
    from torch.utils.flop_counter import FlopCounterMode

    net = ResNet18(3, 10, stem="imagenet")
    assert sum(p.numel() for p in net.parameters()) == 11_181_642  # torchvision's ResNet-18 body (7x7 stem) + a 10-class head
    assert net.stem(torch.randn(1, 3, 128, 128)).shape == (1, 64, 32, 32)  # stride 2, then the max pool's stride 2
    assert net.embed(torch.randn(2, 3, 128, 128)).shape == (2, 512)

    def forward_flops(stem: str) -> int:
        with torch.device("meta"):
            model, x = ResNet18(3, 8, stem=stem), torch.empty(1, 3, 128, 128)
        with FlopCounterMode(display=False) as counter:
            model(x)
        return counter.get_total_flops()

    imagenet, cifar = forward_flops("imagenet"), forward_flops("cifar")
    assert 1.1e9 < imagenet < 1.3e9 and 17e9 < cifar < 19e9  # per image, forward: 2 x 0.59 and 2 x 8.9 GMAC
    assert 14 < cifar / imagenet < 16
    with pytest.raises(ValueError, match="unknown stem 'tiny'; accepted: cifar, imagenet"):
        ResNet18(3, 10, stem="tiny")


@pytest.mark.parametrize("norm", NORMS)
def test_convnet_and_its_normalizations(norm):
    net = ConvNet(1, 10, width=8, norm=norm)
    assert net(torch.randn(4, 1, 28, 28)).shape == (4, 10) and net.feature_dim == 32
    layer = norm2d(norm, 8)
    if norm == "bn-batch":  # no running statistics: eval mode still normalizes with the batch's own
        x = 3 + 2 * torch.randn(16, 8, 4, 4)
        out = layer.eval()(x)
        assert out.mean().abs() < 1e-5 and layer.running_mean is None
    with pytest.raises(ValueError, match="accepted"):
        norm2d("nope", 8)
