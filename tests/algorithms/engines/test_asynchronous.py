"""The asynchronous server's rules by hand, and its clock through the state (what a checkpoint holds)."""

from __future__ import annotations

import pytest
import torch

from fedprior.algorithms.engines.asynchronous import ServerRule, decode_clock, encode_clock, encode_held, held_updates
from fedprior.algorithms.pieces.async_schedule import Schedule


def test_the_buffered_step_by_hand():
    """x + eta_g sum_i c_i s(tau_i) Delta_i: x = 1, Delta = 2 (fresh) and 4 (3 versions old, s = 1/2), eta_g = 0.5."""
    model = {"w": torch.tensor([1.0]), "steps": torch.tensor(7)}
    arrivals = [({"w": torch.tensor([2.0]), "steps": torch.tensor(9)}, 10, 0), ({"w": torch.tensor([4.0]), "steps": torch.tensor(3)}, 30, 3)]
    uniform = ServerRule("buffered", "polynomial", 0.5, server_lr=0.5).apply(model, arrivals)
    assert uniform["w"].item() == 1 + 0.5 * (0.5 * 2 + 0.5 * 0.5 * 4) and uniform["steps"].item() == 9  # integers: the first arrival's
    examples = ServerRule("buffered", "polynomial", 0.5, server_lr=0.5, weighting="examples").apply(model, arrivals)
    assert examples["w"].item() == 1 + 0.5 * (0.25 * 2 + 0.75 * 0.5 * 4)
    assert ServerRule("buffered").apply(model, [])["w"].item() == 1.0  # no update arrived: the model stays


def test_the_mixing_step_by_hand_and_what_each_rule_holds_of_a_reply():
    """(1 - alpha s) x + alpha s x_new: x = 1, x_new = 3, alpha = 0.6, 3 versions old under the polynomial (s = 1/2)."""
    model = {"w": torch.tensor([1.0])}
    assert ServerRule("mixing", "polynomial", 0.5, alpha=0.6).apply(model, [({"w": torch.tensor([3.0])}, 5, 3)])["w"].item() == pytest.approx(
        0.7 * 1 + 0.3 * 3, rel=1e-7
    )
    reply = {"w": torch.tensor([3.0])}
    assert ServerRule("buffered").kept(reply, model)["w"].item() == 2.0  # its change of the model it downloaded
    assert ServerRule("mixing").kept(reply, model)["w"].item() == 3.0  # the model itself


def test_the_clock_and_the_held_updates_go_through_the_state_unchanged():
    schedule = Schedule(2, 3, 9, lambda client, version: 0.5 + client / 3)
    clock = schedule.advance(schedule.advance(schedule.start(1), 1).after, 1).after
    assert decode_clock(encode_clock(clock)) == clock
    held = {4: ({"model.w": torch.tensor([1.5])}, 12), 11: ({"model.w": torch.tensor([-2.0])}, 3)}
    back = held_updates({**encode_clock(clock), **encode_held(held), "model.w": torch.zeros(1)})
    assert back.keys() == held.keys() and all(torch.equal(back[o][0]["model.w"], held[o][0]["model.w"]) and back[o][1] == held[o][1] for o in held)
