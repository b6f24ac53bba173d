"""Federated algorithms: factories returning pure functions (see base.py)."""
