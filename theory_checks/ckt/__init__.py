"""Checks of Cho, Wang, Chiruvolu & Joshi, *PerFed-CKT* (linear-regression analysis)."""

from . import thm42, toy  # noqa: F401
