"""Partitions of a training set over clients (NumPy only), and their statistics."""

from fedprior.partition.base import Partition, Partitioner
from fedprior.partition.factory import make_partitioner

__all__ = ["Partition", "Partitioner", "make_partitioner"]
