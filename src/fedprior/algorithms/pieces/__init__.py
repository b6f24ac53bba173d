"""Reusable pieces of the algorithms: each computes one thing a paper defines, none knows a method.

Pseudo-labels and APP-U (``pseudo_labels``), DMA (``dma``), the prior-bias diagnostics
(``bias``), LKCC (``lkcc``) and CGDE (``cgde``), contrastive losses (``contrastive``),
class-balanced losses (``class_balance``), linear evaluation (``linear_eval``), metrics,
named-tensor helpers (``tensors``), the optimizer-state codec (``optimizer_state``), the
forward-pass precision (``precision``), the mini-batch SGD loop (``local_training``), the
server optimizers on the pseudo-gradient (``server_optimizers``: FedAvgM, FedAdagrad, FedAdam, FedYogi), the
evaluation of personalized models (``personal``), and the hyperparameters more than one
method takes (``hyperparameters``). A piece imports other pieces only: never an engine
(``fedprior.algorithms.engines``) or a method module.
"""
