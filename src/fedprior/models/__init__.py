"""Networks the methods train."""

from fedprior.models.registry import MODELS, build_model

__all__ = ["MODELS", "build_model"]
