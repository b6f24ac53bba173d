"""Scoring the test set is not part of training: how often a run evaluates must not move its numbers.

FedDB's D13 (docs/feddb.md) compares the embedded tables' test every 5th round with the paper's every round; that
comparison reads only the "best accuracy" over the evaluated rounds if an evaluation draws no random number and
changes no state. This checks it for every registered algorithm: two rounds evaluated after each, and the same two
rounds evaluated only after the last, end in the same global state, bit for bit.
"""

import pytest
import torch

from fedprior.experiments.build import build_experiment
from fedprior.experiments.config import load_config
from fedprior.runtime.round_loop import RoundLoop
from fedprior.runtime.simulation import simulate
from tests.support.algorithm_setups import SETUPS, SMALL


def final_state(name: str, evaluate_every: int) -> dict[str, torch.Tensor]:
    preset, overrides = SETUPS[name]
    config_name, config = load_config(preset, [*overrides, *SMALL, "federation.rounds=2"])
    experiment = build_experiment(config_name, config)
    loop = RoundLoop(seed=0, rounds=2, fraction=config.federation.fraction, evaluate_every=evaluate_every)
    return simulate(experiment.algorithm, experiment.client_data, experiment.task.num_clients, experiment.test, loop).state


@pytest.mark.parametrize("name", sorted(SETUPS))
def test_evaluating_every_round_leaves_the_training_as_it_is(shared_cache, name):
    every_round, last_only = final_state(name, 1), final_state(name, 2)
    assert every_round.keys() == last_only.keys()
    differing = [key for key in every_round if not torch.equal(every_round[key], last_only[key])]
    assert not differing, f"{name}: evaluating after round 1 changed {differing[:5]}"
