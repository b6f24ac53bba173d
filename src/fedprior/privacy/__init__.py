"""Client-level differential privacy as a run option: the ``[privacy]`` config section and its accountant.

The mechanism (DP-FedAvg's clipping and noise) is an algorithm piece,
:mod:`fedprior.algorithms.pieces.differential_privacy`; this package holds what a run adds around it: the
settings (:mod:`fedprior.privacy.config`) and the privacy accounting by dp-accounting's RDP accountant
(:mod:`fedprior.privacy.accountant`).
"""
