"""Checks of Armacki, Bajovic, Jakovetic & Kar, *Personalized FL via Convex Clustering*."""

from . import convention, remark1, squared_penalty, thm3, thm4  # noqa: F401
