"""ResNet-18: the standard size, its split into body and head, the ImageNet stem FedBM's authors use."""

import pytest
import torch

from fedprior.models.resnet import ResNet18


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
