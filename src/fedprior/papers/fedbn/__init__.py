"""FedBN (Li, Jiang, Zhang, Kamp, Dou, "FedBN: Federated Learning on Non-IID Features via Local Batch Normalization", ICLR 2021;
docs/feature-shift.md): its Table 3's trend as a grid, FedBN above FedAvg under feature shift, with a control that the shift matters.

The algorithm is :mod:`fedprior.algorithms.fedbn`; the feature-shift federations it runs on are ``partition.domains``
(:mod:`fedprior.partition.domains`).
"""

from fedprior.papers.fedbn.tables import FEDBN_TABLES

TABLES = FEDBN_TABLES
REPORT_EXTRAS: dict = {}
