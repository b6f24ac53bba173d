"""Test metrics from logits, on a hand-computed case."""

import pytest
import torch

from fedprior.algorithms.pieces.metrics import logit_metrics


def test_logit_metrics_on_a_hand_computed_case():
    # labels 0,0,1,2 ; predictions 0,1,1,1 -> class 0: P=1 R=.5 F1=2/3; class 1: P=1/3 R=1 F1=.5; class 2: F1=0
    logits = torch.tensor([[5.0, 0, 0], [0, 5.0, 0], [0, 5.0, 0], [0, 5.0, 0]])
    y = torch.tensor([0, 0, 1, 2])
    m = logit_metrics(logits, y)
    assert m["accuracy"] == pytest.approx(0.5)
    assert m["macro_f1"] == pytest.approx((2 / 3 + 0.5 + 0) / 3)
    assert m["class_accuracy"] == pytest.approx([0.5, 1.0, 0.0])
    assert m["loss"] == pytest.approx(float(torch.nn.functional.cross_entropy(logits, y)))
