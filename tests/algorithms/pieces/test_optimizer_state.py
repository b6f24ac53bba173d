"""The optimizer-state codec: SGD momentum and Adam round-trip exactly; the two older key layouts still load."""

import pytest
import torch
from torch import nn

from fedprior.algorithms.pieces.optimizer_state import load_optimizer_state, optimizer_state, store_optimizer_state

X = torch.tensor([[1.0, -2.0, 0.5], [0.0, 1.0, -1.0], [2.0, 0.5, 0.25], [-1.0, -1.0, 1.0]])


def small_model() -> nn.Module:
    """Two layers (dotted parameter names ``0.weight`` ... ``1.bias``) with hand-set weights."""
    model = nn.Sequential(nn.Linear(3, 2), nn.Linear(2, 1))
    with torch.no_grad():
        model[0].weight.copy_(torch.tensor([[0.1, -0.2, 0.3], [0.4, 0.5, -0.6]]))
        model[0].bias.copy_(torch.tensor([0.05, -0.05]))
        model[1].weight.copy_(torch.tensor([[0.7, -0.8]]))
        model[1].bias.copy_(torch.tensor([0.1]))
    return model


def make(kind: str, model: nn.Module) -> torch.optim.Optimizer:
    if kind == "sgd":
        return torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4, nesterov=True)
    return torch.optim.Adam(model.parameters(), lr=0.01, betas=(0.5, 0.999))


def step(model: nn.Module, optimizer: torch.optim.Optimizer) -> None:
    optimizer.zero_grad()
    model(X).pow(2).mean().backward()
    optimizer.step()


def continued(kind: str, saved_as, prefix: str = "opt.") -> tuple[dict, dict]:
    """Two steps, save (``saved_as`` maps the saved state to the dict to load), a third step on the original and on a
    fresh optimizer that loaded it: both models' parameters."""
    model = small_model()
    optimizer = make(kind, model)
    step(model, optimizer)
    step(model, optimizer)
    saved = saved_as(optimizer_state(optimizer, model), model)
    copy = small_model()
    copy.load_state_dict(model.state_dict())
    fresh = make(kind, copy)
    load_optimizer_state(fresh, copy, saved, prefix)
    step(model, optimizer)
    step(copy, fresh)
    return model.state_dict(), copy.state_dict()


@pytest.mark.parametrize("kind", ["sgd", "adam"])
def test_round_trip_continues_exactly(kind):
    model = small_model()
    optimizer = make(kind, model)
    step(model, optimizer)
    state = optimizer_state(optimizer, model)
    keys = {"sgd": ("momentum_buffer",), "adam": ("step", "exp_avg", "exp_avg_sq")}[kind]
    assert set(state) == {f"opt.{p}:{k}" for p in ("0.weight", "0.bias", "1.weight", "1.bias") for k in keys}
    assert all(v.device.type == "cpu" and v.is_contiguous() for v in state.values())
    expected, got = continued(kind, lambda saved, model: saved)
    assert all(torch.equal(expected[k], got[k]) for k in expected)


def test_a_parameter_without_state_starts_fresh_and_a_prefix_keeps_optimizers_apart():
    model = small_model()
    optimizer = make("adam", model)
    assert optimizer_state(optimizer, model) == {}  # no step yet
    step(model, optimizer)
    state = optimizer_state(optimizer, model, prefix="generator_adam.")
    assert all(k.startswith("generator_adam.") for k in state)
    fresh = make("adam", model)
    load_optimizer_state(fresh, model, state)  # the default prefix finds nothing
    assert len(fresh.state) == 0
    load_optimizer_state(fresh, model, state, prefix="generator_adam.")
    assert len(fresh.state) == 4 and int(fresh.state[model[0].weight]["step"]) == 1


def old_mfcl_layout(saved: dict, model: nn.Module) -> dict:
    """``opt.<parameter>.<key>``: what MFCL's discriminator state looked like (algorithms/optim_state.py)."""
    return {k.replace(":", "."): v for k, v in saved.items()}


def old_fedbm_layout(saved: dict, model: nn.Module) -> dict:
    """``generator_adam.<parameter>.exp_avg`` / ``.exp_avg_sq`` and one shared float ``generator_adam.step`` (fedbm.adam_arrays)."""
    out = {}
    for name, _ in model.named_parameters():
        out[f"generator_adam.{name}.exp_avg"] = saved[f"opt.{name}:exp_avg"]
        out[f"generator_adam.{name}.exp_avg_sq"] = saved[f"opt.{name}:exp_avg_sq"]
        out["generator_adam.step"] = saved[f"opt.{name}:step"].float()
    return out


@pytest.mark.parametrize(("layout", "prefix"), [(old_mfcl_layout, "opt."), (old_fedbm_layout, "generator_adam.")])
def test_old_layouts_load_and_continue_exactly(layout, prefix):
    expected, got = continued("adam", layout, prefix)
    assert all(torch.equal(expected[k], got[k]) for k in expected)


def test_old_mfcl_keys_written_literally_load():
    """A state as the former codec wrote it, key by key, for one parameter."""
    model = nn.Linear(1, 1, bias=False)
    old = {"opt.weight.step": torch.tensor(3.0), "opt.weight.exp_avg": torch.tensor([[0.25]]), "opt.weight.exp_avg_sq": torch.tensor([[0.5]])}
    optimizer = make("adam", model)
    load_optimizer_state(optimizer, model, old)
    entry = optimizer.state[model.weight]
    assert float(entry["step"]) == 3.0 and float(entry["exp_avg"]) == 0.25 and float(entry["exp_avg_sq"]) == 0.5


def test_storing_replaces_old_entries_and_keeps_other_keys():
    model = small_model()
    optimizer = make("adam", model)
    step(model, optimizer)
    current = optimizer_state(optimizer, model)
    old = old_mfcl_layout(current, model)
    state = {"disc.w": torch.zeros(1), **old, "opt.0.weight:stale": torch.zeros(1)}
    stored = store_optimizer_state(state, optimizer, model)
    assert set(stored) == {"disc.w", "opt.0.weight:stale", *current}
    assert all(torch.equal(stored[k], v) for k, v in current.items())
