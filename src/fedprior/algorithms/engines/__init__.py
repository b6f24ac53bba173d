"""The shared training engines, one per family of methods; each method module builds on one.

- ``supervised``: a whole network trained by local SGD and averaged (FedAvg's client loop
  and server; FedAvg, FedProx, SCAFFOLD, MOON, FedBM's baselines);
- ``body_training``: the local training under FedBM's common settings (FedBM and the
  baselines of its tables);
- ``semi_supervised``: the pseudo-labeling client and server of FedDB and its baselines
  (``fedmatch_local``: FedMatch's own local loop on it);
- ``linear_heads`` and ``supervised_heads``: many linear heads on frozen features trained
  at once as batched tensors (FST-CBDG, its supervised baselines);
- ``self_supervised``: two-view contrastive training with FedAvg and linear evaluation
  (MFCL's baselines).

An engine imports pieces (``fedprior.algorithms.pieces``) and other engines, never a method module.
"""
