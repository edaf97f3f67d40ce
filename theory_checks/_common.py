"""Helpers shared by the checks: instance generators, solving, figures."""

from __future__ import annotations

from pathlib import Path

import numpy as np

import convexfl as cfl


def rng_for(seed: int, *tags: int) -> np.random.Generator:
    return np.random.default_rng([seed, *tags])


def planted_quadratic(rng: np.random.Generator, *, min_gap_factor: float = 1.0):
    """A random well-separated quadratic instance: K ∈ {2, 3, 4} clusters of 3–6 points in
    d ∈ {2, 3}, separation large enough for a non-empty Theorem-3 interval."""
    k = int(rng.integers(2, 5))
    m = int(rng.integers(3, 7))
    d = int(rng.integers(2, 4))
    n = k * m
    sep = min_gap_factor * (4.0 + 8.0 * (n - m) / m) * float(rng.uniform(1.2, 2.0))
    A, truth = cfl.datasets.planted_points(k, m, d, separation=sep, radius=1.0,
                                           random_state=int(rng.integers(2**31)))
    return A, truth


def son(A, lam=0.0):
    return cfl.SumOfNorms(cfl.losses.Quadratic(A), cfl.graphs.complete(len(A)), lam)


def figure_path(out: Path, check_id: str) -> tuple[Path, str]:
    rel = f"figures/{check_id}.png"
    return Path(out) / rel, rel


def save_counterexample(out: Path, check_id: str, **arrays) -> str:
    rel = f"counterexamples/{check_id}.npz"
    path = Path(out) / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, **arrays)
    return rel


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def finish(fig, ax, path, *, xlabel: str, ylabel: str | None = None, title: str,
           legend=None, **legend_options) -> None:
    """Label ``ax``, draw its legend (font size ``legend``; ``None``: no legend) with each
    label once, save ``fig`` as a PNG at ``path`` and close it: the last lines of every
    check's figure."""
    ax.set_xlabel(xlabel)
    if ylabel is not None:
        ax.set_ylabel(ylabel)
    ax.set_title(title)
    if legend is not None:
        handles, labels = ax.get_legend_handles_labels()
        unique = dict(zip(labels, handles, strict=True))
        ax.legend(unique.values(), unique.keys(), fontsize=legend, **legend_options)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    pyplot().close(fig)
