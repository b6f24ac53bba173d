"""The tables of numbers in docs/*.md and README.md that tests/test_docs_numbers.py does not check against a JSON file, each with why.

Keyed by (file, header line). A table of numbers (a header line, a ``|---|`` line, a body that holds a digit) is either
mapped in tests/test_docs_numbers.py (each number checked against the committed JSON it quotes) or listed here with a
one-line reason: configuration or defaults (the code's declarations, not results), the paper's numbers, a walk of the
paper against the code, or a result too costly to rerun whose commands and commits the page names (the reason says
which). Issue 52 item 5 decided the tables that had no committed source: rerun and committed (benchmarks/docs_runs.py),
or dropped for a few sentences naming the commit whose page has them; none is exempt for that reason any more.
"""

from __future__ import annotations

CONFIG = "configuration: fields, defaults and switches (the code's declarations, not results)"
WALK = "the paper walked line by line against the code (equation and line numbers, constants; not results)"

EXEMPT: dict[tuple[str, str], str] = {
    # docs/fedbm.md
    ("docs/fedbm.md", "| paper | fedprior | format |"): "the datasets and their formats (image sizes; not results)",
    ("docs/fedbm.md", "| row | algorithm | distinctive step (tested on a hand-made case) |"): "the rows' algorithms and equations (not results)",
    ("docs/fedbm.md", "| table | rows | switch |"): CONFIG,
    ("docs/fedbm.md", "| line | paper | fedprior: file, function | when, where | as the paper, or the deviation |"): WALK,
    ("docs/fedbm.md", "| field | default | note |"): CONFIG,
    ("docs/fedbm.md", "| # | step | paper | the code | fedprior | same or differs |"): WALK,
    # docs/feddb.md
    ("docs/feddb.md", "| module | what it is |"): "the modules and the paper's equations they implement (not results)",
    ("docs/feddb.md", "| field | meaning |"): CONFIG,
    ("docs/feddb.md", "| field | default | note |"): CONFIG,
    ("docs/feddb.md", "| paper | what it does | file: function | when, where, with what | status |"): WALK,
    ("docs/feddb.md", "| baseline | rows it changes | status |"): "the baselines' algorithm lines (not results)",
    ("docs/feddb.md", "| control (rows; needed: the gated claim's paper gap) | question | steps, and what is matched |"): "the controls' step "
    "counts, computed from the presets (checked by tests/algorithms/test_central.py; not results)",
    # docs/flower.md
    ("docs/flower.md", "| | in-process (`local`) | Flower |"): "the two runtimes compared in words (not results)",
    # docs/fst-cbdg.md
    ("docs/fst-cbdg.md", "| recipe | settings | used by |"): CONFIG,
    ("docs/fst-cbdg.md", "| field | values | note |"): CONFIG,
    ("docs/fst-cbdg.md", "| line | the paper | where in fedprior | when | as the paper? |"): WALK,
    # docs/mfcl.md
    ("docs/mfcl.md", "| stage | rounds | who works | what is sent |"): CONFIG,
    ("docs/mfcl.md", "| # | paper | code | when, where, on what | status |"): WALK,
    ("docs/mfcl.md", "| baseline | per iteration | per round | status |"): "the baselines' losses and settings (the paper's and the presets'; not results)",
    ("docs/mfcl.md", "| # | step | paper | fedprior | same or differs |"): WALK,
    ("docs/mfcl.md", "| field / fact | value | note |"): CONFIG,
    ("docs/mfcl.md", "| algorithm | paper | notes |"): "the algorithms and the paper's tables they serve (not results)",
    # docs/privacy-robustness.md
    ("docs/privacy-robustness.md", "| step | equation | where |"): "the mechanisms' equations and where the code has them (not results)",
    ("docs/privacy-robustness.md", "| field | meaning | default |"): CONFIG,
    ("docs/privacy-robustness.md", "| `federation.sampler` | sampling that runs | neighbouring relation | accounted as (`pld`; `rdp`) |"): CONFIG,
    ("docs/privacy-robustness.md", "| run (seed 0, 20 rounds) | final accuracy | epsilon at delta 1e-5 |"): "three 20-round runs "
    "(2026-11-28 at bc88588, 2026-12-07 at c9153d1; 4-13 min each here), their commands and commits beside the table: printouts not kept, not rerun for their cost "
    "(issue 52 item 5); the DP row's epsilon is the worked example's above it and `--dry-run`'s",
    ("docs/privacy-robustness.md", "| option | default | meaning |"): CONFIG,
    ("docs/privacy-robustness.md", "| `aggregation_rule` | the new global model | paper |"): CONFIG,
    ("docs/privacy-robustness.md", "| `attack` | a malicious client replies | default s |"): CONFIG,
    # docs/runs.md
    ("docs/runs.md", "| file | what |"): "a run folder's files (not results)",
    ("docs/runs.md", "| verdict | when |"): "the verdicts' definitions (not results)",
    ("docs/runs.md", "| sampler | which m clients | asks the clients |"): CONFIG,
    # docs/runtime.md
    ("docs/runtime.md", "| field | default | what it does |"): CONFIG,
    ("docs/runtime.md", "| work | threads |"): CONFIG,
    ("docs/runtime.md", "| step | what | limit, s |"): "the device script's steps and their time limits (configuration, not results)",
    # docs/scale-audit.md
    ("docs/scale-audit.md", "| structure | where | order | note |"): "the data structures' growth orders (an audit of the code, not results)",
    # docs/server-optimizers.md
    ("docs/server-optimizers.md", "| algorithm | `server_optimizer` | server step |"): "the server steps' equations (not results)",
    ("docs/server-optimizers.md", "| rule | server_lr | server_momentum | beta1 | beta2 | tau |"): CONFIG,
    # docs/synthetic.md
    # docs/feature-shift.md
    ("docs/feature-shift.md", "| value | domains | source |"): CONFIG,
    ("docs/feature-shift.md", "| name | files in `data.root` | domains | images |"): "the multi-domain datasets and their files (not results)",
    # docs/huggingface.md
    ("docs/huggingface.md", "| | fedprior | flwr-datasets 0.6.1 |"): "the two libraries' definitions of IID, Dirichlet and shards in words (not results)",
    # docs/system-heterogeneity.md
    ("docs/system-heterogeneity.md", "| what | rule | recorded as |"): "the system model's rules and where they are recorded (not results)",
    ("docs/system-heterogeneity.md", "| field | fedbuff | fedasync | meaning |"): CONFIG,
    # README.md
    ("README.md", "| method | paper | status |"): "the methods and their status in words (the results it quotes are in the docs pages, checked there)",
    ("README.md", "| name | where fedprior looks | |"): "the datasets and where they are looked for (not results)",
}
