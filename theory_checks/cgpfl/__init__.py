"""Checks of *Personalized FL with Clustered Generalization* (CGPFL)."""

from . import heuristic, k1_pfedme, kmeans_inner  # noqa: F401
