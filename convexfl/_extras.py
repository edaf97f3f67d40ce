"""Optional extras: which are installed, and one clear refusal when a job needs one.

A missing extra is never a finding: the job either runs without it (saying what it
skipped) or stops before computing, naming the extra to install.
"""

from __future__ import annotations

import importlib

EXTRAS = {"plot": "matplotlib", "stats": "statsmodels", "torch": "torch", "flower": "flwr"}


def missing(*extras: str) -> list[str]:
    """The extras among ``extras`` whose package cannot be imported."""
    out = []
    for extra in extras:
        try:
            importlib.import_module(EXTRAS[extra])
        except ImportError:
            out.append(extra)
    return out


def require(what: str, *extras: str) -> None:
    """Raise ``ValueError`` naming the extras ``what`` needs and how to install them."""
    lack = missing(*extras)
    if lack:
        names = ", ".join(f"{e} ({EXTRAS[e]})" for e in lack)
        raise ValueError(f"{what}: the extra(s) {names} not installed; pip install "
                         f"'convexfl[{','.join(lack)}]'")
