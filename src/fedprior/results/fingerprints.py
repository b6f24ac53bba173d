"""Fingerprints of a run's numbers, to tell bit for bit whether a rerun gives the run it reran.

A run's summary (result.json) keeps the test accuracy of the evaluated rounds, which a
difference in the last bits of a training loss may not move for many rounds (an accuracy
changes only when a prediction flips). So the summary also keeps, per round, a short digest
of every float the round's record holds (test metrics, the clients' mean training losses;
not the seconds), and a SHA-256 of the final state: two runs with the same fingerprints
gave the same floats in every round and ended in the same tensors, and the first round
whose digest differs is the first round whose numbers differ (``fedprior table --verify``).
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Mapping
from typing import Any

ROUND_DIGEST_HEX = 16
"""Hex digits kept of each round's SHA-256: 64 bits, enough to tell two rounds apart, 16 characters a round in result.json."""


def floats(value: Any, prefix: str = "") -> list[tuple[str, float]]:
    """Every float in ``value`` (nested mappings and lists) by dotted key, in sorted-key order; keys naming seconds left out."""
    if isinstance(value, Mapping):
        return [pair for key in sorted(value, key=str) if "seconds" not in str(key) for pair in floats(value[key], f"{prefix}.{key}" if prefix else str(key))]
    if isinstance(value, list | tuple):
        return [pair for index, item in enumerate(value) for pair in floats(item, f"{prefix}[{index}]")]
    return [(prefix, value)] if isinstance(value, float) else []


def round_digest(record: Mapping[str, Any]) -> str:
    """A short SHA-256 of a round record's floats, each as its key and its 8 bytes (0.0 and -0.0 differ, as do two NaNs' bits)."""
    digest = hashlib.sha256()
    for key, value in floats(record):
        digest.update(key.encode() + b"=" + struct.pack("<d", value))
    return digest.hexdigest()[:ROUND_DIGEST_HEX]


def state_sha256(server: Mapping[str, Any], clients: Mapping[int, Mapping[str, Any]]) -> str:
    """SHA-256 of a run state's tensors: the server's, then each client's by client id, each by sorted key (name, dtype, shape, bytes)."""
    import torch

    digest = hashlib.sha256()
    # client by client, each read when its turn comes (a client-state store keeps them on disk: runtime/client_store.py)
    for owner, tensors in [("server", server), *((f"client{c}", clients[c]) for c in sorted(clients))]:
        for key in sorted(tensors):
            tensor = tensors[key].detach().cpu().contiguous()
            digest.update(f"{owner}/{key}/{tensor.dtype}/{tuple(tensor.shape)}".encode())
            digest.update(tensor.view(-1).view(torch.uint8).numpy().tobytes() if tensor.numel() else b"")
    return digest.hexdigest()


def numbers(value: Any, skipped: tuple[str, ...], prefix: str = "") -> dict[str, Any]:
    """Every number (int, float, bool) in ``value`` (nested mappings and lists) by dotted key (``rounds[6].train_loss``);
    strings left out, and every key containing one of ``skipped`` (timings, where the run ran)."""
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if not any(skip in str(key) for skip in skipped):
                out.update(numbers(item, skipped, f"{prefix}.{key}" if prefix else str(key)))
        return out
    if isinstance(value, list | tuple):
        return {k: v for index, item in enumerate(value) for k, v in numbers(item, skipped, f"{prefix}[{index}]").items()}
    return {prefix: value} if isinstance(value, bool | int | float) else {}


def same(a: Any, b: Any) -> bool:
    """Equal, floats bit for bit (0.0 and -0.0 differ; a NaN equals a NaN, both read back from JSON)."""
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, float) and isinstance(b, float) and struct.pack("<d", a) == struct.pack("<d", b)
    return type(a) is type(b) and a == b


def first_difference(recorded: list[str], now: list[str]) -> int | None:
    """The index of the first entry where two lists of round digests differ (one ending early counts); None if equal."""
    for index, (a, b) in enumerate(zip(recorded, now, strict=False)):
        if a != b:
            return index
    return None if len(recorded) == len(now) else min(len(recorded), len(now))
