"""Raw pixels: the linear evaluation of the images themselves, nothing trained (a control of the MFCL paper's Tables 2, 3 and 7).

A self-supervised method earns its number only if its features beat what a linear
classifier reaches on the pixels alone (a control row of a paper table, beside the untrained
network: docs/runs.md, "Paper tables"). This algorithm has no rounds and no clients: its only
evaluation scores the flattened [0, 1] pixels by the same linear evaluation as MFCL and
its baselines (``linear_eval``, :mod:`fedprior.algorithms.pieces.linear_eval`; features
standardized with the training pool's statistics).

No paper equation: raw pixels are a control. What it computes, and where: the linear evaluation of the
flattened pixels, :func:`~fedprior.algorithms.engines.self_supervised.linear_evaluate` with the identity as
features, i.e. :func:`~fedprior.algorithms.pieces.linear_eval.dense_evaluation` (``linear_eval = train-test``)
or :func:`~fedprior.algorithms.pieces.linear_eval.linear_evaluation` (``test-2fold``).
"""

from __future__ import annotations

from torch import nn

from fedprior.algorithms.base import Algorithm, ClientData, RoundInfo, Runtime, State, Task
from fedprior.algorithms.engines.self_supervised import evaluation_inputs, linear_evaluate
from fedprior.algorithms.pieces.hyperparameters import LinearEval
from fedprior.errors import ConfigError


def raw_pixels(task: Task, runtime: Runtime, *, linear_eval: LinearEval = "train-test") -> Algorithm:
    """Raw pixels: the linear evaluation of the flattened [0, 1] pixels, nothing trained (a control of the MFCL paper's Tables 2, 3, 7)."""
    if len(task.input_shape) != 3:
        raise ConfigError(f"algorithm.name: raw-pixels reads images (C, H, W); the data gives {task.input_shape} (set encoder.name = 'none')")

    def init(info: RoundInfo) -> State:
        return {}

    def evaluate(state: State, data: ClientData) -> dict[str, float | list[float]]:
        return linear_evaluate(lambda x: x, nn.Identity(), data, task, runtime.device, linear_eval)

    return Algorithm.evaluation_only("raw-pixels", init, evaluate, evaluation_inputs=evaluation_inputs(linear_eval))
