"""Bytes sent in a round, as totals over the round's clients, and the upgrade of records written before they were.

A round record (a line of ``metrics.jsonl``, an entry of a checkpoint's history) counts:

- ``download_bytes``: server -> clients, the broadcast's tensors times the sampled clients
  (each sampled client receives the broadcast, whether or not it answers);
- ``upload_bytes``: clients -> server, the tensors of every reply that came back, summed;
- ``upload_bytes_by_client``: the same by client id (a reply's size differs between clients
  for some methods, e.g. MFCL's representations);
- ``selection_download_bytes``, in rounds whose sampler asked clients for their loss
  (``federation.sampler = 'power-of-choice'``): the server state sent to each candidate (one float comes back
  from each), apart from ``download_bytes``, which the sampled clients' broadcasts alone make.

The summary (``result.json``) sums the rounds' records (:func:`communication`), so its ``download_bytes`` and
``upload_bytes`` are the run's totals in the same unit. Until this module, a record held
``download_bytes`` per client and ``upload_bytes`` as the by-client mapping; such a record is
recognised by that mapping (the marker: ``upload_bytes`` is a dict) and converted on load
(:func:`upgrade_record`), so an old checkpoint resumes, and an old ``metrics.jsonl`` reads, with totals.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def round_traffic(broadcast_bytes: int, sampled: Iterable[int], uploads: Mapping[int, int]) -> dict[str, Any]:
    """A round's byte counts: ``broadcast_bytes`` to each of ``sampled``, ``uploads`` (client id -> bytes) back."""
    by_client = {str(c): int(uploads[c]) for c in sorted(uploads)}
    return {
        "download_bytes": int(broadcast_bytes) * len(list(sampled)),
        "upload_bytes": sum(by_client.values()),
        "upload_bytes_by_client": by_client,
    }


def upgrade_record(record: dict[str, Any]) -> dict[str, Any]:
    """``record`` with per-client byte counts (written before rounds counted totals) converted to totals; others as they are."""
    uploads = record.get("upload_bytes")
    if not isinstance(uploads, dict):  # a current record (an int), or a record without bytes (an unreached round)
        return record
    by_client = {str(c): int(b) for c, b in uploads.items()}
    return {
        **record,
        "download_bytes": int(record.get("download_bytes", 0)) * len(record.get("clients", [])),
        "upload_bytes": sum(by_client.values()),
        "upload_bytes_by_client": by_client,
    }


def upgrade_records(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """:func:`upgrade_record` of each record."""
    return [upgrade_record(r) for r in records]


def communication(history: list[dict[str, Any]]) -> dict[str, Any]:
    """Bytes sent over the run: server -> clients (each sampled client receives the broadcast) and clients -> server.

    The sums of the rounds' records, which hold each round's totals over its clients
    (records of an older fedprior, per client, are converted first: :func:`upgrade_record`).
    ``stage_communication`` splits them by stage, with the number of (round, client)
    participations, so per-round and per-client figures (the MFCL paper's Table 8) follow; ``selection_download_bytes``
    (Power-of-Choice's candidates' copies of the state) is summed where rounds have it.
    """
    stages: dict[str, dict[str, int]] = {}
    selection = [int(r["selection_download_bytes"]) for r in history if "selection_download_bytes" in r]
    for r in upgrade_records(history):
        entry = stages.setdefault(r.get("stage", ""), {"participations": 0, "download_bytes": 0, "upload_bytes": 0})
        entry["participations"] += len(r.get("clients", []))
        entry["download_bytes"] += int(r.get("download_bytes", 0))
        entry["upload_bytes"] += int(r.get("upload_bytes", 0))
    return {
        "download_bytes": sum(e["download_bytes"] for e in stages.values()),
        "upload_bytes": sum(e["upload_bytes"] for e in stages.values()),
        **({"selection_download_bytes": sum(selection)} if selection else {}),
        "stage_communication": stages,
    }
