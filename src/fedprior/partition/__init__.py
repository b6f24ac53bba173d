"""Partitions of a training set over clients (NumPy), their statistics, and the ``[partition]`` config section with its one ``make_partitioner``."""

from fedprior.partition.base import Partition, Partitioner
from fedprior.partition.factory import make_partitioner

__all__ = ["Partition", "Partitioner", "make_partitioner"]
