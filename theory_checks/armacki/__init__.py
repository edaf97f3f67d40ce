"""Checks of Armacki, Bajovic, Jakovetic & Kar, *Personalized FL via Convex Clustering*."""

from . import (  # noqa: F401
    appc_wider,
    consensus,
    conservative,
    convention,
    pdmm_printed,
    pdmm_rate,
    remark1,
    squared_penalty,
    thm1,
    thm2,
    thm3,
    thm4,
)
