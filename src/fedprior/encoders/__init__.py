"""Frozen encoders (CLIP, text encoders, the offline CLIP stand-in) and the feature cache."""
