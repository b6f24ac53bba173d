"""The FLOP counting of benchmarks/paper_scale.py (fedprior.runtime.flops) checked against hand computations."""

import torch
from torch import nn

from fedprior.algorithms.base import Task
from fedprior.models import build_model
from fedprior.runtime.flops import FlopTally, peak_tflops


def conv_forward(cin: int, cout: int, k: int, h: int, w: int, n: int) -> int:
    """A Conv2d's forward FLOPs: one multiply-add (2 FLOPs) per weight per output position per image."""
    return 2 * cin * cout * k * k * h * w * n


def test_one_conv_forward_is_the_hand_count():
    conv = nn.Conv2d(3, 16, 3, padding=1, bias=False)
    with torch.no_grad(), FlopTally() as tally:
        conv(torch.zeros(4, 3, 32, 32))
    assert tally.total() == conv_forward(3, 16, 3, 32, 32, 4)


def test_forward_and_backward_of_a_convnet_batch_counts_each_conv_by_hand():
    """First conv: forward + weight gradient (the images need no gradient): 2x the forward.
    A later conv: forward + weight gradient + input gradient: 3x; the linear head likewise 3x its 2*N*in*out."""
    task = Task(num_classes=10, input_shape=(3, 32, 32), class_names=tuple("abcdefghij"), num_clients=1)
    model = build_model("convnet", task, width=8)
    n = 4
    with FlopTally() as tally:
        model(torch.randn(n, 3, 32, 32)).sum().backward()
    counts = tally.by_module()
    assert counts["ConvNet.body.0"] == 2 * conv_forward(3, 8, 3, 32, 32, n)
    assert counts["ConvNet.body.4"] == 3 * conv_forward(8, 16, 3, 16, 16, n)  # after one 2x2 max pool
    assert counts["ConvNet.body.8"] == 3 * conv_forward(16, 32, 3, 8, 8, n)
    assert counts["ConvNet.head"] == 3 * 2 * n * 32 * 10
    assert tally.total() == sum(counts[k] for k in ("ConvNet.body.0", "ConvNet.body.4", "ConvNet.body.8", "ConvNet.head"))


def test_no_peak_on_the_cpu():
    assert peak_tflops(torch.device("cpu"), "bf16") is None


def test_totals_without_the_module_tracker_are_the_same_and_allow_autograd_grad():
    """FedMatch computes its gradients with torch.autograd.grad, which FlopCounterMode's module tracker breaks; without it
    the total is the same."""
    task = Task(num_classes=10, input_shape=(3, 32, 32), class_names=tuple("abcdefghij"), num_clients=1)
    model = build_model("convnet", task, width=8)
    x = torch.randn(4, 3, 32, 32)
    with FlopTally() as tracked:
        model(x).sum().backward()
    with FlopTally(by_module=False) as untracked:
        model(x).sum().backward()
    assert untracked.total() == tracked.total() > 0
    with FlopTally(by_module=False) as untracked:
        torch.autograd.grad(model(x).sum(), list(model.parameters()))
    assert untracked.total() == tracked.total()  # the same forward and backward, by autograd.grad
