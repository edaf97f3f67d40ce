"""What every figure shares: lazy matplotlib, axes, saving, the λ-interval strip and colours."""

from __future__ import annotations

import math
import os

import numpy as np

# name in Bound.related / label / colour, in drawing order (widest first)
INTERVAL_STYLE = {
    "recovery_interval": ("exact recovery interval", "#2ca02c"),
    "theorem1_2": ("Theorems 1+2 at w*(λ)", "#1f77b4"),
    "conservative": ("conservative (23)/(24)", "#9467bd"),
    "theorem3": ("Theorem 3 (27)", "#ff7f0e"),
}


_CLUSTER_COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b",
                    "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"]


def _plt():
    try:
        import matplotlib
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError("convexfl.plotting needs matplotlib, which is not installed: "
                          "pip install 'convexfl[plot]'") from exc
    import sys

    # headless by default (scripts, CI, the report); keep Jupyter's inline backend and any
    # backend the user chose (MPLBACKEND or pyplot already imported)
    if ("ipykernel" not in sys.modules and "matplotlib.pyplot" not in sys.modules
            and not os.environ.get("MPLBACKEND")):
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _finish(fig, out):
    if out is not None:
        fig.savefig(out, dpi=150, bbox_inches="tight")
    return fig


def _axes(ax, figsize):
    plt = _plt()
    if ax is None:
        fig, ax = plt.subplots(figsize=figsize, layout="constrained")
    else:
        fig = ax.figure
    return fig, ax


def _fmt(x):
    if isinstance(x, float) and math.isinf(x):
        return "∞"
    return f"{x:.4g}"


def _interval_rows(recovery, bounds):
    rows = []
    if recovery is not None:
        rows.append(("recovery_interval", recovery))
        for key in ("theorem1_2", "conservative", "theorem3"):
            if key in recovery.related:
                rows.append((key, recovery.related[key]))
    for label, b in (bounds or {}).items():
        rows.append((label, b))
    return rows


def _draw_interval_strip(ax, rows, lo_x, hi_x, lam_hat=math.nan):
    """One horizontal bar per interval (top row first) on a log λ axis."""
    labels = []
    n = len(rows)
    for idx, (key, b) in enumerate(rows):
        y = n - 1 - idx
        label, colour = INTERVAL_STYLE.get(key, (key, _CLUSTER_COLOURS[idx % 10]))
        labels.append(f"{label} ({b.kind})")
        if b.is_empty:
            why = (f" (lower end {_fmt(b.lo)} ≥ upper end {_fmt(b.hi)})"
                   if np.isfinite(b.lo) and np.isfinite(b.hi) else
                   (f" (lower end {_fmt(b.lo)})" if not np.isfinite(b.hi) and
                    np.isfinite(b.lo) else ""))
            ax.text(math.sqrt(lo_x * hi_x), y, "empty" + why, ha="center", va="center",
                    fontsize=7, color=colour)
            continue
        a = b.lo if b.lo > 0 else lo_x
        c = b.hi if np.isfinite(b.hi) else hi_x
        ax.plot([max(a, lo_x), min(c, hi_x)], [y, y], color=colour, lw=7,
                solid_capstyle="butt")
        ax.text(min(c, hi_x), y + 0.33, f"[{_fmt(b.lo)}, {_fmt(b.hi)})  ", fontsize=6.5,
                ha="right", va="bottom", color=colour)
    if np.isfinite(lam_hat):
        ax.axvline(lam_hat, color="0.3", ls="--", lw=1)
    ax.set_yticks(range(n))
    ax.set_yticklabels(labels[::-1], fontsize=7)
    ax.set_ylim(-0.6, n - 0.1)
    ax.grid(True, axis="x", alpha=0.3)
