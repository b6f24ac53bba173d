"""How far FedBN's clients' batch-norm statistics differ between domains: the mechanism behind fedbn-table3's two verdicts.

``python benchmarks/fedbn_bn_statistics.py RUNS`` reads the FedBN cells of ``fedbn-table3`` in ``RUNS`` (a ``fedprior table
fedbn-table3 --embedded --out RUNS`` folder, or ``benchmarks/paper_tables.py``'s ``--runs/fedbn-table3``), each cell's final
checkpoint, where every client's kept BN layers are its state, and writes ``benchmarks/results/fedbn_bn_statistics.json``:
per column, seed and BN layer, the spread of the running means between domains (the sd over the domains of their clients'
mean running mean, averaged over channels) and within them (the sd over a domain's clients, averaged over channels and the
domains of two or more clients). Where the domains' statistics hardly differ, a client's own BN has little to correct.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from shared import command_line, machine

from fedprior.partition.domains import client_domains
from fedprior.runtime.checkpoint import load_checkpoint

COLUMNS = {"rotation_4": 4, "style": 5}
RESULT = Path(__file__).resolve().parent / "results" / "fedbn_bn_statistics.json"


def spreads(folder: Path, domains: int) -> dict[str, dict[str, float]]:
    """Per BN layer: the between-domain and within-domain sd of the clients' running means (channel-averaged)."""
    clients = load_checkpoint(folder / "checkpoint.safetensors").clients
    ids = sorted(clients)
    owner = client_domains(len(ids), domains)[ids]
    out = {}
    for key in sorted(k for k in clients[ids[0]] if k.endswith("running_mean")):
        means = np.stack([np.asarray(clients[c][key]) for c in ids])  # clients x channels
        per_domain = np.stack([means[owner == d].mean(0) for d in range(domains)])
        within = [means[owner == d].std(0).mean() for d in range(domains) if (owner == d).sum() > 1]
        out[key.removesuffix(".running_mean")] = {
            "between_domains": round(float(per_domain.std(0).mean()), 4),
            "within_domains": round(float(np.mean(within)), 4),
        }
    return out


def main() -> int:
    runs = Path(sys.argv[1])
    found = {f"{column} seed {seed}": spreads(runs / f"FedBN--{column}--seed{seed}", k) for column, k in COLUMNS.items() for seed in range(3)}
    RESULT.write_text(json.dumps({"command": command_line(), "machine": machine(), "runs": str(runs), "spreads": found}, indent=1) + "\n")
    for name, layers in found.items():
        print(name, "; ".join(f"{layer}: between {v['between_domains']:.3f}, within {v['within_domains']:.3f}" for layer, v in layers.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
