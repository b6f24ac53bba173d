"""Local training's step budget (``max_steps``, a straggler's partial work): the full update's first steps, no more."""

import torch

from fedprior.algorithms.pieces.local_training import train_epochs


def trained(epochs: int, max_steps: int | None) -> tuple[torch.nn.Module, dict[str, float]]:
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    x, y = torch.randn(10, 4, generator=torch.Generator().manual_seed(1)), torch.arange(10) % 3
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    metrics = train_epochs(model, x, y, epochs=epochs, batch_size=4, optimizer=optimizer, generator=torch.Generator().manual_seed(2), max_steps=max_steps)
    return model, metrics


def same(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    return all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters(), strict=True))


def test_a_budget_of_one_epochs_steps_is_that_epoch():
    one, metrics = trained(1, None)
    budgeted, budget_metrics = trained(3, 3)  # 10 examples in batches of 4: 3 steps an epoch
    assert same(one, budgeted) and budget_metrics == metrics


def test_a_budget_stops_within_an_epoch_and_none_or_a_large_one_is_the_full_update():
    full, metrics = trained(3, None)
    assert metrics["steps"] == 9.0
    assert same(full, trained(3, 9)[0]) and same(full, trained(3, 50)[0])
    part, part_metrics = trained(3, 5)
    assert part_metrics["steps"] == 5.0 and not same(part, full) and not same(part, trained(2, None)[0])
    untouched, zero = trained(3, 0)
    torch.manual_seed(0)
    assert zero["steps"] == 0.0 and same(untouched, torch.nn.Linear(4, 3))
