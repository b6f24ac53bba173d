"""What ``fedprior run ... --dry-run`` prints: the config as TOML, then the partition's statistics as TOML comments.

The whole output stays a valid TOML file: ``fedprior run NAME --dry-run > mine.toml`` saves a
config that ``fedprior run mine.toml`` runs unchanged.
"""

from __future__ import annotations

import shlex
from typing import Any

import numpy as np

from fedprior.experiments.config import ExperimentConfig

ROLE_NAMES = {"train": "images", "labeled": "labeled", "unlabeled": "unlabeled"}


def config_header(source: str, overrides: list[str], imports: list[str] | None = None, algorithm: str | None = None) -> str:
    """The comment lines leading a printed config: where it comes from and how to run it."""
    options = [*(["--algorithm", algorithm] if algorithm is not None else []), *(arg for o in overrides for arg in ("--set", o))]
    options += [arg for m in imports or [] for arg in ("--import", m)]
    command = shlex.join(["fedprior", "run", source, *options])
    return (
        f"the config of `{command}`, every field (a field left out of a file takes its default)\n"
        "save it as FILE.toml, edit it if you like, and run it with `fedprior run FILE.toml`"
    )


def spread(values: list[int] | np.ndarray) -> str:
    values = np.asarray(values)
    return f"min {int(values.min()):,}, median {float(np.median(values)):,g}, max {int(values.max()):,}"


def statistics_lines(config: ExperimentConfig, plan: dict[str, Any]) -> list[str]:
    """The dry run's statistics, one comment line each (``plan``: :func:`fedprior.experiments.dry_run.dry_run`)."""
    from fedprior.experiments.dry_run import LEFT_OUT, left_out_text

    p, f = config.partition, config.federation
    left_out = left_out_text({key: plan[key] for key in LEFT_OUT})
    lines = [
        "dry run: nothing trained, no run directory written",
        f"{plan['dataset']}: {plan['train_images']:,} training images" + (f" ({left_out})" if left_out else "") + f"; the clients draw on {plan['pool']:,}",
    ]
    if plan["centralized"]:
        lines.append(f"centralized baseline ({config.algorithm.name}): one client holds them all")
    else:
        shown = ", ".join(f"{key}={value}" for key, value in p.scheme_parameters().items())
        scenario = f"scenario {p.scenario}, " if p.scenario else ""
        split = ""
        if p.num_labeled:
            unlabeled = f"{p.num_unlabeled:,} of the other images" if p.num_unlabeled else "all the other images"
            inside = "; each client's unlabeled set also holds its labeled images, unlabeled" if p.labeled_in_unlabeled else ""
            split = f"; {p.num_labeled:,} labeled images and {unlabeled} unlabeled, each set split on its own{inside}"
        lines.append(
            f"partition: {p.scheme} ({scenario}{shown or 'no parameter'}), seed {config.run.seed}, {plan['num_clients']} clients, "
            f"{sampled_text(f.sampler, f.num_clients, f.fraction)}{split}"
        )
    width = max(len(ROLE_NAMES.get(role, role)) for role in plan["roles"])
    for role, summary in plan["roles"].items():
        empty = f"; {summary['empty_clients']} empty clients" if summary["empty_clients"] else ""
        betas = f"; beta_cib {summary['beta_cib']:.3f}, beta_hetero {summary['beta_hetero']:.3f} bits" if summary["beta_cib"] is not None else ""
        lines.append(
            f"  {ROLE_NAMES.get(role, role):<{width}}  {summary['num_samples']:,} images; per client {spread(summary['client_sizes'])}; "
            f"classes per client {spread(summary['classes_per_client'])} of {summary['num_classes']}{empty}{betas}"
        )
    lines += privacy_lines(config)
    return [f"# {line}" for line in lines]


def sampled_text(sampler: str, num_clients: int, fraction: float) -> str:
    """'10 sampled per round', or Poisson sampling's 'each joins a round with probability 0.1 (10 expected)'."""
    from fedprior.runtime.sampling import clients_per_round

    if sampler == "poisson":
        return f"each joins a round with probability {fraction:g} ({fraction * num_clients:g} expected)"
    return f"{clients_per_round(num_clients, fraction)} sampled per round"


def privacy_lines(config: ExperimentConfig) -> list[str]:
    """With DP on: the epsilon the planned rounds would spend (and what bound it is), and the rounds ``privacy.max_epsilon`` allows."""
    privacy, f = config.privacy, config.federation
    if privacy.dp == "none":
        return []
    from fedprior.privacy.budget import planned
    from fedprior.privacy.config import accounting

    accounted = accounting(privacy, f.sampler, f.num_clients, f.fraction)
    spent, allowed = planned(accounted, privacy.max_epsilon, f.rounds)
    line = f"privacy: epsilon {spent:.4g} at delta {privacy.delta:g} after the {f.rounds} planned rounds ({accounted.label()})"
    if privacy.max_epsilon is not None:
        stop = (
            "all of them" if allowed == f.rounds else f"{allowed} of them (epsilon {accounted.epsilon(allowed):.4g}); the run stops before round {allowed + 1}"
        )
        line += f"; privacy.max_epsilon = {privacy.max_epsilon:g} allows {stop}"
    return [line]
