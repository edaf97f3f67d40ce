"""Helpers the experiments share: grids, seeds, JSON-ready values, table rows."""

from __future__ import annotations

import numpy as np

from .._validation import as_float_array, as_int
from ..solvers import METHODS


def default_method() -> str:
    """The fastest registered method that handles every loss (cvxpy until faster land)."""
    for m in ("admm", "cvxpy"):
        if m in METHODS:
            return m
    return "cvxpy"


def _grid(values, name: str) -> np.ndarray:
    """A non-empty 1-D grid of finite values ``>= 0`` (λ or γ), or raise naming ``name``."""
    grid = as_float_array(values, name, ndim=1)
    if np.any(grid < 0):
        raise ValueError(f"{name}: must be >= 0, got {grid[grid < 0][:3].tolist()}")
    return grid


def _seed(random_state, name: str = "random_state") -> int:
    """The experiments below take an int seed (they re-derive several streams from it)."""
    return as_int(0 if random_state is None else random_state, name, low=0, high=2**32 - 1)


def _finite(x):
    """A float for JSON: ``None`` stands for ±inf / NaN."""
    x = float(x)
    return x if np.isfinite(x) else None


def _row(quantity, paper, ours, convention="", note="") -> dict:
    """One row of a "paper vs ours" table."""
    return {"quantity": quantity, "paper": paper, "ours": ours, "convention": convention,
            "note": note}


def _interval(b) -> dict:
    """A :class:`convexfl.bounds.Bound` interval as ``{lo, hi, kind, empty}`` (JSON-ready)."""
    return {"lo": _finite(b.lo), "hi": _finite(b.hi), "kind": b.kind,
            "empty": bool(b.is_empty)}


def _interval_text(b) -> str:
    """``"[lo, hi) (kind)"`` or ``"empty (kind)"`` for a Bound interval."""
    if b.is_empty:
        return f"empty ({b.kind})"
    return f"[{b.lo:.4g}, {b.hi:.4g}) ({b.kind})"


def _jsonready(obj):
    """Numpy arrays/scalars to lists/floats, non-finite floats to ``None``, recursively."""
    if isinstance(obj, dict):
        return {str(k): _jsonready(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonready(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _jsonready(obj.tolist())
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return _finite(obj)
    return obj


def format_rows(rows) -> str:
    """A "paper vs ours" table (``summary["paper_vs_ours"]``) as Markdown."""
    def cell(v):
        if isinstance(v, float):
            return f"{v:.4g}"
        if isinstance(v, dict):
            return "; ".join(f"{k}: {cell(x)}" for k, x in v.items())
        if isinstance(v, (list, tuple)):
            return "[" + ", ".join(cell(x) for x in v) + "]"
        return str(v).replace("|", "/")
    lines = ["| quantity | paper | ours | convention | note |", "|---|---|---|---|---|"]
    lines += [f"| {cell(r['quantity'])} | {cell(r['paper'])} | {cell(r['ours'])} | "
              f"{cell(r['convention'])} | {cell(r['note'])} |" for r in rows]
    return "\n".join(lines)
