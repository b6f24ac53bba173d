"""Datasets: loaders returning images, labels and class names."""

from fedprior.data.dataset import Dataset
from fedprior.data.registry import DATASETS, load_dataset

__all__ = ["DATASETS", "Dataset", "load_dataset"]
