"""FedMatch's mini-batch loop (``engines/fedmatch_local.py``) without host syncs (issue 19 item 2).

Each unlabeled batch's confident images are a mask over the batch instead of a selection.
For a network that treats images independently (no BatchNorm on batch statistics) and a
strong view that does, the masked loss is the loss of the selected images (the former
code, written out here as the reference): the same value and the same gradients.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from fedprior.algorithms.base import RoundInfo
from fedprior.algorithms.engines.fedmatch_local import unlabeled_batch_loss, vote
from fedprior.algorithms.engines.semi_supervised import Context, Training
from fedprior.algorithms.pieces.pseudo_labels import debias

INFO = RoundInfo(seed=0, stage="federated", round=1)


class RowWise:
    """A strong view that transforms each image on its own, with no draw: selecting rows commutes with it."""

    def strong(self, x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
        return 0.8 * x.flip(-1) + 0.1


def net(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Flatten(), nn.Linear(16, 12), nn.Tanh(), nn.Linear(12, 3))


def context(model: nn.Module, training: Training, x: torch.Tensor, helpers: list[nn.Module], appu: torch.Tensor | None) -> Context:
    ctx = Context(model, None, {}, INFO.for_client(0), training, RowWise(), torch.Generator(), torch.device("cpu"), x[:0], torch.zeros(0, dtype=torch.long), x)  # type: ignore[arg-type]
    ctx.extra["helpers"] = helpers
    ctx.appu = appu
    return ctx


def selected_loss(ctx: Context, x: torch.Tensor, consistency: float) -> tuple[torch.Tensor, int]:
    """The loss as the code computes it before issue 19: the confident rows selected (``nonzero``), then the same terms."""
    t = ctx.training
    loss = torch.zeros(())
    local = torch.softmax(ctx.model(x), dim=1)
    rule = debias(local.detach(), ctx.appu) if t.dpl and ctx.appu is not None else local.detach()
    mask = rule.max(1).values >= t.threshold
    confident = int(mask.sum())
    if confident:
        rows = mask.nonzero().flatten()
        helpers = [torch.softmax(h(x[rows]), dim=1).detach() for h in ctx.extra["helpers"]]
        if helpers and consistency > 0:
            log_local = torch.log(local[rows].clamp_min(1e-7))
            loss = loss + consistency * torch.stack([F.kl_div(log_local, p, reduction="batchmean") for p in helpers]).mean()
        votes = [debias(p, ctx.appu) for p in helpers] if t.dpl and ctx.appu is not None else helpers
        labels = vote(rule[rows], votes)
        total = F.cross_entropy(ctx.model(ctx.augment.strong(x[rows], ctx.generator)), labels, reduction="sum")
        loss = loss + t.unlabeled_weight * total / (confident if t.unlabeled_mean == "confident" else x.shape[0])
    return loss, confident


@pytest.mark.parametrize("mean", ["confident", "all"])
@pytest.mark.parametrize("dpl", [False, True])
@pytest.mark.parametrize("threshold", [0.36, 0.45, 0.99])
def test_the_masked_batch_loss_is_the_selected_images_loss(mean, dpl, threshold):
    x = torch.randn(24, 1, 4, 4, generator=torch.Generator().manual_seed(0))
    training = Training(epochs=1, threshold=threshold, unlabeled_weight=0.3, unlabeled_mean=mean, dpl=dpl)
    appu = torch.tensor([0.5, 0.3, 0.2])
    helpers = [net(1).eval(), net(2).eval()]
    model = net(0)
    grads = []
    values = []
    for compute in ("masked", "selected"):
        ctx = context(model, training, x, helpers, appu)
        if compute == "masked":
            loss, confident = unlabeled_batch_loss(ctx, x, consistency=0.7, l1=0.0, l2=0.0)
            confident = int(confident)
        else:
            loss, confident = selected_loss(ctx, x, consistency=0.7)
        values.append((float(loss.detach()), confident))
        grads.append(torch.autograd.grad(loss, list(model.parameters()), allow_unused=True) if loss.requires_grad else None)
    (masked, n_masked), (selected, n_selected) = values
    assert n_masked == n_selected
    assert masked == pytest.approx(selected, rel=1e-5, abs=1e-7)
    if n_selected:
        assert 0 < n_selected < 24 or threshold < 0.4, "the cases mix confident and other images"
        assert all(torch.allclose(a, b, rtol=1e-5, atol=1e-7) for a, b in zip(grads[0], grads[1], strict=True))
    else:  # nothing confident: the code adds no term; the masked terms are zero, and so are their gradients
        assert masked == 0.0 and all(g is None or float(g.abs().max()) == 0.0 for g in grads[0])


def test_the_code_loop_reads_nothing_back_and_sums_its_metrics_on_the_device():
    """Two epochs of the loop on the pretend device: no sync from fedmatch_local (the loop) at all."""
    from fedprior.algorithms.engines.fedmatch_local import code_training
    from fedprior.data.augment.fixmatch import FixMatchAugment
    from fedprior.models.decomposed import decompose
    from tests.support.pretend_device import DEVICE, PretendDevice

    g = torch.Generator().manual_seed(0)
    x_l, y_l, x_u = torch.randn(20, 1, 4, 4, generator=g), torch.randint(0, 3, (20,), generator=g), torch.randn(30, 1, 4, 4, generator=g)
    train = code_training(batch_size=10, supervised_weight=10.0, consistency=0.01, l1=1e-4, l2=10.0)
    training = Training(epochs=2, threshold=0.34, unlabeled_mean="confident")
    with PretendDevice() as record:
        model = decompose(net(0), psi_factor=0.2).to(DEVICE)
        ctx = Context(
            model,
            None,
            {},
            INFO.for_client(0),
            training,
            FixMatchAugment((0.5,), (0.25,)),
            torch.Generator().manual_seed(0),
            DEVICE,
            x_l.to(DEVICE),
            y_l.to(DEVICE),
            x_u.to(DEVICE),
        )  # type: ignore[arg-type]
        ctx.appu = torch.full((3,), 1 / 3).to(DEVICE)
        parameters = list(model.parameters())
        metrics = train(ctx, torch.optim.SGD(parameters, lr=1e-3), parameters)
        assert all(isinstance(v, torch.Tensor) and v.device == DEVICE for v in metrics.values())
    assert not [s for s in record.syncs if "fedmatch_local" in s or "augment" in s], record.syncs
    assert math.isfinite(float(metrics["loss_unlabeled"].elem))
