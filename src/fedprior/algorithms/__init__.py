"""Federated algorithms: factories returning pure functions (see base.py).

``base`` (the Algorithm contract) and ``registry`` (name -> factory); ``pieces/`` (what a
paper defines, reusable); ``engines/`` (the shared training of each family); one module
per method beside them (``fedavg``, ``feddb``, ``fedbm``, ``mfcl``, ``fst_cbdg``, ...).
Importing this package imports no torch (the registry imports each method on first use).
"""
