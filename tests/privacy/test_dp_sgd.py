"""DP-SGD on one client (fedprior.privacy.dp_sgd): per-example clipping, the noise's std, the client's epsilon against Opacus's accountant."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from fedprior.errors import ConfigError
from fedprior.privacy.dp_sgd import DpSgd, clip_factors, epsilon, lots, train_private

pytest.importorskip("opacus")

EMPTY = torch.zeros((0, 3), dtype=torch.float64)


def generator(seed: int, device: str = "cpu") -> torch.Generator:
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    return g


def hand_batch(seed: int = 0, n: int = 6) -> tuple[nn.Linear, torch.Tensor, torch.Tensor]:
    torch.manual_seed(seed)
    model = nn.Linear(4, 3)
    x = torch.randn(n, 4) * torch.tensor([[0.1], [1.0], [3.0], [10.0], [0.5], [30.0]])[:n]  # gradients of very different norms
    return model, x, torch.arange(n) % 3


def per_example_clipped_mean(model: nn.Linear, x: torch.Tensor, y: torch.Tensor, clip: float) -> dict[str, torch.Tensor]:
    """sum_i clip(g_i) / n, each g_i from its own backward pass: Abadi et al. 2016, Algorithm 1 without the noise."""
    total = {name: torch.zeros_like(p) for name, p in model.named_parameters()}
    for i in range(x.shape[0]):
        model.zero_grad()
        F.cross_entropy(model(x[i : i + 1]), y[i : i + 1]).backward()
        norm = math.sqrt(sum(float(p.grad.norm() ** 2) for p in model.parameters()))
        for name, p in model.named_parameters():
            total[name] += p.grad * min(1.0, clip / (norm + 1e-6))
    return {name: t / x.shape[0] for name, t in total.items()}


def test_clip_factors_clip_each_example_to_c_over_all_parameters():
    grads = [torch.tensor([[3.0, 0.0], [0.3, 0.0], [0.0, 0.0]]), torch.tensor([[4.0], [0.4], [0.0]])]  # norms 5, 0.5, 0
    factors = clip_factors(grads, 1.0)
    torch.testing.assert_close(factors, torch.tensor([1 / (5 + 1e-6), 1.0, 1.0]))


def test_one_step_is_the_mean_of_the_per_example_clipped_gradients_on_a_hand_made_batch():
    model, x, y = hand_batch()
    start = {k: v.clone() for k, v in model.state_dict().items()}
    clip = 2.0
    expected = per_example_clipped_mean(model, x, y, clip)
    norms = []
    for i in range(x.shape[0]):
        model.zero_grad()
        F.cross_entropy(model(x[i : i + 1]), y[i : i + 1]).backward()
        norms.append(math.sqrt(sum(float(p.grad.norm() ** 2) for p in model.parameters())))
    assert min(norms) < clip < max(norms)  # the batch has examples on both sides of C
    # n <= B: q = 1, every example in the one lot; noise 0; lr 1: w - w' is the step's gradient
    _, history = train_private(
        model, x, y, dp=DpSgd(0.0, clip, lr=1.0), epochs=1, batch_size=8, history=EMPTY, lots_generator=generator(0), noise_generator=generator(1)
    )
    for name, p in model.state_dict().items():
        torch.testing.assert_close(start[name] - p, expected[name], rtol=1e-5, atol=1e-7)
    assert history.tolist() == [[0.0, 1.0, 1.0]]
    assert not any(hasattr(p, "grad_sample") for p in model.parameters())  # Opacus's hooks and attributes are gone


def test_the_noise_on_the_mean_gradient_has_std_sigma_c_over_the_expected_lot_size():
    torch.manual_seed(0)
    model = nn.Linear(200, 50)
    x, y = torch.randn(12, 200), torch.arange(12) % 50
    sigma, clip = 2.0, 0.7
    steps = {}
    for z in (0.0, sigma):
        trained = nn.Linear(200, 50)
        trained.load_state_dict(model.state_dict())
        train_private(
            trained, x, y, dp=DpSgd(z, clip, lr=1.0), epochs=1, batch_size=16, history=EMPTY, lots_generator=generator(0), noise_generator=generator(7)
        )
        steps[z] = {k: model.state_dict()[k] - v for k, v in trained.state_dict().items()}
    noise = {k: steps[sigma][k] - steps[0.0][k] for k in steps[0.0]}  # the same lot (its generator), so the difference is the noise / L
    _, _, expected_lot = lots(12, 16)
    std = torch.cat([v.flatten() for v in noise.values()]).std()
    assert abs(float(std) / (sigma * clip / expected_lot) - 1) < 0.05  # 10,050 draws: the std within 5%
    # exactly Opacus's draw: N(0, (sigma C)^2) from the noise generator, parameter by parameter, over L
    g = generator(7)
    for name in ("weight", "bias"):
        draw = torch.normal(0, sigma * clip, size=model.state_dict()[name].shape, generator=g)
        torch.testing.assert_close(noise[name], draw / expected_lot, rtol=1e-4, atol=1e-6)


def test_lots_are_opacus_data_loaders():
    assert lots(100, 32) == (4, 0.25, 25)
    assert lots(10, 32) == (1, 1.0, 10)
    assert lots(65, 32) == (3, 1 / 3, 21)


def test_the_clients_epsilon_equals_opacus_rdp_accountant_computed_directly():
    from opacus.accountants.analysis import rdp
    from opacus.accountants.rdp import RDPAccountant

    torch.manual_seed(0)
    model = nn.Linear(4, 3)
    n, batch, epochs, sigma, delta = 40, 8, 2, 1.1, 1e-5
    x, y = torch.randn(n, 4), torch.arange(n) % 3
    history = EMPTY
    for round_ in range(3):  # three rounds the client takes part in compose in its history
        metrics, history = train_private(
            model,
            x,
            y,
            dp=DpSgd(sigma, 1.0, lr=0.1),
            epochs=epochs,
            batch_size=batch,
            history=history,
            lots_generator=generator(round_),
            noise_generator=generator(100 + round_),
        )
    steps = 3 * epochs * math.ceil(n / batch)
    assert metrics["steps"] == epochs * math.ceil(n / batch)
    q = 1 / math.ceil(n / batch)
    orders = RDPAccountant.DEFAULT_ALPHAS
    direct, _ = rdp.get_privacy_spent(orders=orders, rdp=rdp.compute_rdp(q=q, noise_multiplier=sigma, steps=steps, orders=orders), delta=delta)
    assert epsilon(history, delta) == pytest.approx(float(direct), rel=1e-12)
    assert history.tolist() == [[sigma, q, float(steps)]]
    assert 1 < epsilon(history, delta) < 20 and epsilon(EMPTY, delta) == 0.0


def test_the_same_generators_give_the_same_model():
    out = []
    for _ in range(2):
        model, x, y = hand_batch(n=6)
        train_private(model, x, y, dp=DpSgd(1.0, 1.0, lr=0.1), epochs=2, batch_size=2, history=EMPTY, lots_generator=generator(3), noise_generator=generator(4))
        out.append(model.state_dict())
    assert all(torch.equal(out[0][k], out[1][k]) for k in out[0])
    model, x, y = hand_batch(n=6)
    train_private(model, x, y, dp=DpSgd(1.0, 1.0, lr=0.1), epochs=2, batch_size=2, history=EMPTY, lots_generator=generator(3), noise_generator=generator(5))
    assert not torch.equal(model.weight, out[0]["weight"])


def test_an_empty_lot_steps_on_the_noise_alone():
    model, x, y = hand_batch(n=6)
    start = model.weight.detach().clone()
    # q = 1 / 6 over 6 examples: some lot of a few epochs is empty (probability (5/6)^6 = 0.33 a lot)
    metrics, history = train_private(
        model, x, y, dp=DpSgd(1.0, 1.0, lr=0.1), epochs=5, batch_size=1, history=EMPTY, lots_generator=generator(0), noise_generator=generator(1)
    )
    assert history.tolist() == [[1.0, 1 / 6, 30.0]] and math.isfinite(metrics["train_loss"])
    replay = generator(0)  # Opacus's sampler's draws: some lot was empty
    assert any(not (torch.rand(6, generator=replay) < 1 / 6).any() for _ in range(30))
    assert torch.isfinite(model.weight).all() and not torch.equal(model.weight, start)


def test_without_opacus_the_error_is_one_line_with_the_install_command(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "opacus", None)
    model, x, y = hand_batch()
    with pytest.raises(
        ConfigError, match=r'^privacy.dp: \'sample\' trains with Opacus\'s DP-SGD; install it: pip install -c requirements.lock -e "\.\[opacus\]"$'
    ):
        train_private(model, x, y, dp=DpSgd(1.0, 1.0, lr=0.1), epochs=1, batch_size=2, history=EMPTY, lots_generator=generator(0), noise_generator=generator(1))
