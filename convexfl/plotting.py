r"""Figures of solution paths and λ-bounds (matplotlib, imported lazily, ``Agg`` backend).

Every function draws what :mod:`convexfl.path` and :mod:`convexfl.bounds` computed — no
computing here — and returns the matplotlib ``Figure``; pass ``out="file.png"`` to save it.
All λ axes are in the canonical (SON) convention (the paper's eq. (3) λ is
``λ_SON / (2N)``; :func:`plot_separators` prints both).

- :func:`plot_n_clusters` — number of clusters vs λ, with the theorem intervals and the exact
  recovery interval shaded and λ̂ marked;
- :func:`plot_intervals` — the λ-intervals alone (no path), as bars on a λ axis;
- :func:`plot_clusterpath` — the users' models as λ grows, in two coordinates (Hocking et al.);
- :func:`plot_dendrogram` — the merge tree, heights = fusion λ;
- :func:`plot_fl_curves` — average test accuracy and within-cluster model distance vs λ
  (Armacki et al. Figs. 2 and 3);
- :func:`plot_separators` — data and the distinct classifiers at several λ (their Fig. 6);
- the notebooks' figures, one function each (``plot_armacki_sec5``, ``plot_pdmm_gap``,
  ``plot_membership_heatmaps``, ``plot_ckt_toy``, ``plot_accuracy_vs_k``, …), drawn from the
  results of :mod:`convexfl.experiments`; :func:`study_figures` draws all of one experiment.

Needs the ``plot`` extra: ``pip install 'convexfl[plot]'``.
"""

from __future__ import annotations

import math
import os

import numpy as np

__all__ = ["plot_n_clusters", "plot_intervals", "plot_clusterpath", "plot_dendrogram",
           "plot_fl_curves", "plot_separators", "INTERVAL_STYLE"]

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


def plot_n_clusters(path, recovery=None, *, bounds=None, partition_size=None, ax=None,
                    title=None, out=None):
    """Number of clusters vs λ (log axis), with the λ-intervals below it.

    Parameters
    ----------
    path : SolutionPath
    recovery : Bound, optional
        The result of :func:`convexfl.bounds.recovery_interval`: it is shaded on the plot and
        drawn, with its ``related`` theorem intervals, as bars in a strip below (an empty
        interval is written "empty").
    bounds : dict of Bound, optional
        Further intervals ``{label: Bound}`` for the strip.
    partition_size : int, optional
        A horizontal guide at this number of clusters (e.g. the planted K).
    ax : matplotlib Axes, optional
        Draw only the cluster counts (and the shading) on this axes.
    """
    plt = _plt()
    rows = _interval_rows(recovery, bounds)
    lams = np.asarray(path.lambdas, float)
    k = np.asarray(path.n_clusters)
    pos = lams > 0
    lam_hat = getattr(path, "lam_hat", math.nan)
    finite = [v for _, b in rows for v in (b.lo, b.hi) if np.isfinite(v) and v > 0]
    lo_x = min([lams[pos].min()] + finite) / 1.5 if pos.any() else 1e-3
    hi_x = max([lams.max()] + finite) * 1.5 if lams.size else 1.0
    strip = None
    if ax is None:
        if rows:
            fig, (ax, strip) = plt.subplots(
                2, 1, figsize=(8.0, 4.6 + 0.28 * len(rows)), sharex=True, layout="constrained",
                gridspec_kw={"height_ratios": [3.2, 0.45 + 0.3 * len(rows)]})
        else:
            fig, ax = plt.subplots(figsize=(8.0, 4.2), layout="constrained")
    else:
        fig = ax.figure
    ax.set_xscale("log")
    ax.step(lams[pos], k[pos], where="post", color="k", lw=1.6, zorder=5)
    ax.plot(lams[pos], k[pos], "o", color="k", ms=3, zorder=6, label="path (grid λ)")
    if recovery is not None and not recovery.is_empty:
        a = recovery.lo if recovery.lo > 0 else lo_x
        c = recovery.hi if np.isfinite(recovery.hi) else hi_x
        ax.axvspan(a, c, color=INTERVAL_STYLE["recovery_interval"][1], alpha=0.15, lw=0,
                   label="exact recovery interval")
    if np.isfinite(lam_hat):
        ax.axvline(lam_hat, color="0.3", ls="--", lw=1, label=f"λ̂ = {lam_hat:.4g} (exact)")
    if partition_size is not None:
        ax.axhline(partition_size, color="0.55", ls=":", lw=1,
                   label=f"{partition_size} planted clusters")
    ax.set_xlim(lo_x, hi_x)
    ax.set_ylim(0, max(int(k.max()) if k.size else 1, 1) * 1.06 + 0.5)
    from matplotlib.ticker import MaxNLocator
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("number of clusters")
    if lams.size and lams[0] == 0:
        ax.text(0.01, 0.02, f"at λ = 0: {int(k[0])} clusters (off the log axis)",
                transform=ax.transAxes, fontsize=7.5, color="0.35")
    ax.legend(fontsize=7.5, loc="lower left", bbox_to_anchor=(0.0, 0.06), framealpha=0.9)
    ax.grid(True, which="major", alpha=0.3)
    ax.set_title(title or f"Cluster structure along the path ({path.method}; λ in the SON "
                 "convention)", fontsize=10)
    if strip is not None:
        _draw_interval_strip(strip, rows, lo_x, hi_x, lam_hat)
        strip.set_xlabel("λ (SON convention, log scale)")
    else:
        ax.set_xlabel("λ (SON convention, log scale)")
    return _finish(fig, out)


def plot_intervals(recovery, *, bounds=None, ax=None, title=None, out=None):
    """The exact recovery interval, the theorem intervals and λ̂ as horizontal bars on a
    log λ axis (no path needed). ``recovery`` is a :func:`convexfl.bounds.recovery_interval`
    result; its ``related`` Bounds are drawn too, and ``bounds`` adds ``{label: Bound}``."""
    rows = _interval_rows(recovery, bounds)
    fig, ax = _axes(ax, (7.5, 1.0 + 0.45 * len(rows)))
    fb = recovery.related.get("fusion_threshold")
    lam_hat = fb.value if fb is not None else math.nan
    finite = [v for _, b in rows for v in (b.lo, b.hi) if np.isfinite(v) and v > 0]
    if np.isfinite(lam_hat):
        finite.append(lam_hat)
    lo_x = min(finite) / 3 if finite else 1e-3
    hi_x = max(finite) * 3 if finite else 1.0
    ax.set_xscale("log")
    ax.set_xlim(lo_x, hi_x)
    _draw_interval_strip(ax, rows, lo_x, hi_x, lam_hat)
    if np.isfinite(lam_hat):
        ax.text(lam_hat, len(rows) - 0.35, f" λ̂ = {lam_hat:.4g}", fontsize=7, color="0.3")
    ax.set_xlabel("λ (SON convention, log scale)")
    ax.set_title(title or "λ-intervals for the partition (bars; empty ones are written)",
                 fontsize=10)
    return _finish(fig, out)


def plot_clusterpath(path, *, dims=(0, 1), truth=None, ax=None, title=None, out=None):
    """The clusterpath (Hocking et al. 2011): each user's model ``x_i(λ)`` in the
    coordinates ``dims`` as λ grows — lines from the local models (λ = smallest, dots) to
    the global model (λ ≥ λ̂, star). Colours follow ``truth`` (planted clusters) when given,
    else the clusters at the middle of the path.
    """
    fig, ax = _axes(ax, (5.5, 5.0))
    X = np.asarray(path.X)
    if X.shape[2] < 2:
        raise ValueError("path: the clusterpath needs models of dimension ≥ 2")
    a, b = dims
    colour_of = (np.asarray(truth) if truth is not None else
                 path.labels[len(path) // 2])
    for i in range(X.shape[1]):
        c = _CLUSTER_COLOURS[int(colour_of[i]) % 10]
        ax.plot(X[:, i, a], X[:, i, b], "-", color=c, lw=0.9, alpha=0.75)
        ax.plot(X[0, i, a], X[0, i, b], "o", color=c, ms=4)
    ax.plot(X[-1, 0, a], X[-1, 0, b], "*", color="k", ms=12,
            label=f"λ = {path.lambdas[-1]:.3g} ({int(path.n_clusters[-1])} cluster"
                  f"{'s' if path.n_clusters[-1] != 1 else ''})")
    ax.plot([], [], "o", color="0.4", ms=4, label=f"λ = {path.lambdas[0]:.3g} "
                                                  f"({int(path.n_clusters[0])} clusters)")
    ax.set_xlabel(f"model coordinate {a}")
    ax.set_ylabel(f"model coordinate {b}")
    ax.set_aspect("equal", adjustable="datalim")
    ax.legend(fontsize=8, loc="best")
    ax.grid(True, alpha=0.3)
    ax.set_title(title or "Clusterpath: models as λ grows", fontsize=10)
    return _finish(fig, out)


def plot_dendrogram(path, *, truth=None, recovery=None, ax=None, title=None, out=None,
                    log=True):
    """The merge tree of the path (:meth:`SolutionPath.linkage`), heights = the λ at which
    groups fuse for good; λ̂ and the exact recovery interval are marked. Leaves are
    coloured by ``truth`` when given."""
    from scipy.cluster.hierarchy import dendrogram

    fig, ax = _axes(ax, (8.0, 4.4))
    Z = path.linkage().copy()
    positive = Z[Z[:, 2] > 0, 2]
    floor = positive.min() / 2.0 if positive.size else 1e-6
    if log:
        Z[:, 2] = np.maximum(Z[:, 2], floor)
    n = path.labels.shape[1]
    dendrogram(Z, ax=ax, color_threshold=0, above_threshold_color="0.25",
               labels=[str(i) for i in range(n)], leaf_font_size=7 if n <= 60 else 5)
    top = float(Z[:, 2].max()) * 1.35
    if log:
        ax.set_yscale("log")
        ax.set_ylim(floor, top)
    else:
        ax.set_ylim(0, top)
    if truth is not None:
        truth = np.asarray(truth)
        for tick in ax.get_xticklabels():
            tick.set_color(_CLUSTER_COLOURS[int(truth[int(tick.get_text())]) % 10])
    lam_hat = getattr(path, "lam_hat", math.nan)
    if np.isfinite(lam_hat):
        ax.axhline(lam_hat, color="0.3", ls="--", lw=1, label=f"λ̂ = {lam_hat:.4g} (exact)")
    if recovery is not None and not recovery.is_empty:
        ax.axhspan(max(recovery.lo, floor), min(recovery.hi, top),
                   color=INTERVAL_STYLE["recovery_interval"][1], alpha=0.18,
                   label=f"exact recovery interval [{_fmt(recovery.lo)}, {_fmt(recovery.hi)})")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7.5, loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=2,
                  frameon=False)
    ax.set_ylabel("fusion λ (SON)" + (", log scale" if log else ""))
    ax.set_xlabel("user" + (" (coloured by planted cluster)" if truth is not None else ""))
    ax.set_title(title or "Dendrogram of the solution path (heights: first grid λ from which "
                 "the groups stay fused)", fontsize=9.5, pad=22)
    return _finish(fig, out)


def plot_fl_curves(metrics, *, comparators=None, extra_curves=None, lam_scale=1.0,
                   lam_label="λ (SON convention)", title=None, out=None):
    """Armacki et al. Figs. 2 and 3: average test accuracy vs λ and average within-cluster
    model distance vs λ (from :func:`convexfl.path.fl_metrics`).

    Parameters
    ----------
    metrics : dict
        ``lambdas``, ``accuracy``, ``within_distance``.
    comparators : dict, optional
        Horizontal lines ``{name: accuracy}`` (global, local, oracle).
    extra_curves : dict, optional
        ``{name: (lambdas, accuracy, within_distance)}`` (e.g. the squared penalty).
    lam_scale : float
        Multiply λ by this for the axis (e.g. ``1/(2N)`` for the paper's eq. (3)).
    """
    plt = _plt()
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.0), layout="constrained")
    lam = np.asarray(metrics["lambdas"]) * lam_scale
    pos = lam > 0
    a1.plot(lam[pos], metrics["accuracy"][pos], "o-", ms=3, color="k",
            label="sum-of-norms (SON)")
    a2.plot(lam[pos], metrics["within_distance"][pos], "o-", ms=3, color="k",
            label="sum-of-norms (SON)")
    for idx, (name, (lx, acc, dist)) in enumerate((extra_curves or {}).items()):
        lx = np.asarray(lx) * lam_scale
        c = _CLUSTER_COLOURS[(idx + 1) % 10]
        a1.plot(lx[lx > 0], np.asarray(acc)[lx > 0], "s--", ms=3, color=c, label=name)
        a2.plot(lx[lx > 0], np.asarray(dist)[lx > 0], "s--", ms=3, color=c, label=name)
    styles = ["--", ":", "-."]
    for idx, (name, acc) in enumerate((comparators or {}).items()):
        a1.axhline(acc, ls=styles[idx % 3], color=_CLUSTER_COLOURS[(idx + 4) % 10], lw=1.2,
                   label=f"{name} ({acc:.3f})")
    for ax in (a1, a2):
        ax.set_xscale("log")
        ax.set_xlabel(lam_label + ", log scale")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    a1.set_ylabel("average test accuracy")
    a2.set_ylabel("average within-cluster ‖x_i − x_j‖")
    a1.set_title("Accuracy vs λ (cf. paper Fig. 2)", fontsize=10)
    a2.set_title("Within-cluster model distance vs λ (cf. Fig. 3)", fontsize=10)
    if title:
        fig.suptitle(title, fontsize=11)
    return _finish(fig, out)


def plot_separators(path, points, point_cluster, *, point_labels=None, lambdas=None,
                    oracle_models=None, kind="hinge", ncols=4, title=None, out=None):
    """Armacki et al. Fig. 6: for several λ, the 2-D data and the distinct classifiers of
    the solution (full lines) against the per-cluster optimal separators (dashed).

    Parameters
    ----------
    path : SolutionPath
        Models ``x = [w, b]`` (``kind="hinge"``: ``⟨w, a⟩ − b = 0``) or ``x = w``
        (``kind="linear"``: ``⟨w, a⟩ = 0``), features in R².
    points, point_cluster : arrays
        Data to draw and its cluster; ``point_labels`` (±1) picks the markers.
    lambdas : sequence of float, optional
        The λ to show (nearest grid λ; default: 8 spread over the path, largest first).
    oracle_models : array (K, d), optional
        The dashed separators.
    """
    plt = _plt()
    pts = np.asarray(points, float)
    pc = np.asarray(point_cluster)
    if pts.ndim != 2 or pts.shape[1] != 2:
        raise ValueError(f"points: expected an (n, 2) array, got shape {pts.shape}")
    if lambdas is None:
        idx = np.unique(np.linspace(0, len(path) - 1, 8).round().astype(int))[::-1]
    else:
        idx = [path.index_at(lam) for lam in lambdas]
    nrows = math.ceil(len(idx) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.3 * ncols, 3.2 * nrows),
                             layout="constrained", squeeze=False)
    lo, hi = pts.min(axis=0), pts.max(axis=0)
    pad = 0.08 * (hi - lo)
    lo, hi = lo - pad, hi + pad
    n_users = path.labels.shape[1]

    def line(ax, x, **kw):
        w = x[:2]
        b = x[2] if (kind == "hinge" and len(x) > 2) else 0.0
        if abs(w[1]) >= abs(w[0]):
            xs = np.linspace(lo[0], hi[0], 2)
            ax.plot(xs, (b - w[0] * xs) / w[1], **kw)
        elif abs(w[0]) > 0:
            ys = np.linspace(lo[1], hi[1], 2)
            ax.plot((b - w[1] * ys) / w[0], ys, **kw)

    for ax in axes.ravel()[len(idx):]:
        ax.axis("off")
    for ax, r in zip(axes.ravel(), idx, strict=False):
        for k in np.unique(pc):
            sel = pc == k
            col = _CLUSTER_COLOURS[int(k) % 10]
            if point_labels is None:
                ax.scatter(pts[sel, 0], pts[sel, 1], s=3, color=col, alpha=0.35, lw=0)
            else:
                yl = np.asarray(point_labels)
                for lab, mk in ((1, "o"), (-1, "x")):
                    s2 = sel & (yl == lab)
                    ax.scatter(pts[s2, 0], pts[s2, 1], s=4 if mk == "o" else 5, color=col,
                               alpha=0.35, marker=mk, lw=0.6 if mk == "x" else 0)
        if oracle_models is not None:
            for k, x in enumerate(np.asarray(oracle_models)):
                line(ax, x, color=_CLUSTER_COLOURS[k % 10], ls="--", lw=1.0)
        C = path.centroids(r)
        for c in C:
            line(ax, c, color="k", lw=1.6)
        ax.set_xlim(lo[0], hi[0])
        ax.set_ylim(lo[1], hi[1])
        ax.set_xticks([])
        ax.set_yticks([])
        lam = float(path.lambdas[r])
        ax.set_title(f"λ = {lam:.3g}  (eq.(3): {lam / (2 * n_users):.3g})\n"
                     f"{len(C)} distinct model{'s' if len(C) != 1 else ''}", fontsize=8.5)
    fig.suptitle(title or "Distinct models along the path (full) vs per-cluster optimal "
                 "separators (dashed)", fontsize=10)
    return _finish(fig, out)


# =============================================================================================
# Figures of the notebooks (``notebooks/``, GitHub issue 10). Each draws what one function of
# :mod:`convexfl.experiments` computed (its result dict) and returns the Figure.
# =============================================================================================

__all__ += ["plot_armacki_sec5", "plot_armacki_sec5_recovery", "plot_model_panels",
            "plot_armacki_appc_panels", "plot_armacki_appc_squared", "plot_armacki_appc_path",
            "plot_pdmm_gap", "plot_ari_paths", "plot_membership_heatmaps", "plot_glmm_agreement",
            "plot_ckt_toy", "plot_theorem_4_2", "plot_accuracy_vs_k", "plot_method_accuracies"]


def plot_armacki_sec5(res, *, out=None):
    """Armacki et al. Figs. 2 and 3 from :func:`convexfl.experiments.armacki_sec5_study`:
    accuracy and within-cluster distance vs λ (SON) and γ (squared penalty), both in the
    paper's units (eq. (3)/(4): divided by 2N), with the global, local and oracle accuracies
    and the paper's peak accuracies written next to ours."""
    s = res["summary"]
    n = s["n_users"]
    metrics = {"lambdas": np.asarray(res["lambdas"]), "accuracy": np.asarray(res["son_accuracy"]),
               "within_distance": np.asarray(res["son_distance"])}
    fig = plot_fl_curves(
        metrics,
        comparators={"global (1)": res["global_accuracy"], "local (2)": res["local_accuracy"],
                     "oracle": res["oracle_accuracy"]},
        extra_curves={"squared penalty (4), x = γ": (res["gammas"], res["sq_accuracy"],
                                                     res["sq_distance"])},
        lam_scale=1.0 / (2 * n), lam_label="λ or γ in the paper's units (eq. (3)/(4))",
        title=f"Armacki et al. Sec. V on our ellipses: {n} users, "
              f"{res['summary'].get('method', '')} for (SON), cvxpy for (4)")
    a1, a2 = fig.axes[:2]
    a1.text(0.98, 0.72, "peak accuracy, SON / (4)\npaper: 86.8 % / 86.6 %\n"
            f"ours: {100 * s['peak_accuracy_son']:.1f} % / "
            f"{100 * s['peak_accuracy_squared']:.1f} %", transform=a1.transAxes, fontsize=8,
            va="center", ha="right", bbox={"fc": "white", "ec": "0.7", "alpha": 0.9})
    lam_hat = s["lam_hat"] / (2 * n)
    for ax in (a1, a2):
        ax.axvline(lam_hat, color="0.3", ls="--", lw=0.9)
    a2.text(lam_hat, 0.97, " λ̂", transform=a2.get_xaxis_transform(), fontsize=8, va="top")
    a2.set_yscale("symlog", linthresh=1e-3)
    a2.set_ylim(0, None)
    return _finish(fig, out)


def plot_armacki_sec5_recovery(res, *, out=None):
    """Number of clusters along λ (SON) for Sec. V with the exact recovery interval of the
    planted partition, the theorem intervals, λ̂, and the paper's reported recovery interval
    converted under both readings of its convention (eq. (3): ×2N; eq. (14): ×2)."""
    s = res["summary"]
    n = s["n_users"]
    fig = plot_n_clusters(res["path"], res["recovery"], partition_size=3,
                          title=f"Sec. V: clusters along the path ({n} users; λ in the SON "
                                "convention)")
    ax = fig.axes[0]
    lo, hi = (0.0892, 0.0919)
    xmin, xmax = ax.get_xlim()
    notes = []
    for f, name, col in ((2 * n, "eq. (3)", "#d62728"), (2.0, "eq. (14)", "#ff7f0e")):
        a, b = lo * f, hi * f
        if xmin <= a and b <= xmax:
            ax.axvspan(a, b, color=col, alpha=0.6, lw=2.5, ec=col,
                       label=f"paper's (0.0892, 0.0919) read as {name}: ({a:.3g}, {b:.3g})")
        else:
            notes.append(f"read as {name}: ({a:.3g}, {b:.3g}), off the axis")
    ax.set_xlim(xmin, xmax)
    if notes:
        ax.text(0.99, 0.97, "paper's recovery interval (0.0892, 0.0919)\n" + "\n".join(notes),
                transform=ax.transAxes, ha="right", va="top", fontsize=7.5, color="#d62728")
    ax.legend(fontsize=7, loc="lower left", bbox_to_anchor=(0.0, 0.06), framealpha=0.9)
    return _finish(fig, out)


def _hinge_line(ax, x, lo, hi, **kw):
    """The line ⟨w, a⟩ − b = 0 of ``x = [w, b]`` inside the box ``lo``–``hi``."""
    w, b = x[:2], x[2]
    if abs(w[1]) >= abs(w[0]) and abs(w[1]) > 0:
        xs = np.linspace(lo[0], hi[0], 2)
        ax.plot(xs, (b - w[0] * xs) / w[1], **kw)
    elif abs(w[0]) > 0:
        ys = np.linspace(lo[1], hi[1], 2)
        ax.plot((b - w[1] * ys) / w[0], ys, **kw)


def plot_model_panels(panels, points, point_cluster, point_labels, *, oracle_models=None,
                      ncols=4, title=None, out=None):
    """Hinge classifiers ``x = [w, b]`` over the 2-D data, one panel per entry of
    ``panels`` (a list of ``(title, models (M, 3))``; full black lines), with the
    per-cluster optimal separators dashed (``oracle_models``)."""
    plt = _plt()
    pts = np.asarray(points, float)
    pc = np.asarray(point_cluster)
    yl = np.asarray(point_labels)
    nrows = math.ceil(len(panels) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.2 * ncols, 3.25 * nrows),
                             layout="constrained", squeeze=False)
    lo, hi = pts.min(axis=0), pts.max(axis=0)
    pad = 0.05 * (hi - lo)
    lo, hi = lo - pad, hi + pad
    for ax in axes.ravel()[len(panels):]:
        ax.axis("off")
    for ax, (name, models) in zip(axes.ravel(), panels, strict=False):
        for k in np.unique(pc):
            col = _CLUSTER_COLOURS[int(k) % 10]
            for lab, mk in ((1, "o"), (-1, "x")):
                sel = (pc == k) & (yl == lab)
                ax.scatter(pts[sel, 0], pts[sel, 1], s=4, color=col, alpha=0.3, marker=mk,
                           lw=0.6 if mk == "x" else 0)
        if oracle_models is not None:
            for k, x in enumerate(np.asarray(oracle_models)):
                _hinge_line(ax, x, lo, hi, color=_CLUSTER_COLOURS[k % 10], ls="--", lw=1.1)
        models = np.asarray(models)
        lw = 1.6 if len(models) <= 5 else 0.6
        for x in models:
            _hinge_line(ax, x, lo, hi, color="k", lw=lw, alpha=1.0 if len(models) <= 5 else 0.6)
        ax.set_xlim(lo[0], hi[0])
        ax.set_ylim(lo[1], hi[1])
        ax.set_xticks([])
        ax.set_yticks([])
        ax.set_title(name, fontsize=8.5)
    if title:
        fig.suptitle(title, fontsize=10)
    return _finish(fig, out)


def plot_armacki_appc_panels(res, form="eq3", *, out=None):
    """Armacki et al. Fig. 6 for (SON): the distinct models at the paper's λ_p converted with
    ``form`` ("eq3": λ_SON = 2Nλ_p; "eq14": 2λ_p), from
    :func:`convexfl.experiments.armacki_appc_study`."""
    from .problems import from_paper_lambda

    path = res["panels"][form]
    data = res["data"]
    n = res["summary"]["n_users"]
    panels = []
    for lp in res["lam_paper"]:
        lam = from_paper_lambda(lp, n, form)
        r = path.index_at(lam)
        C = path.centroids(r)
        panels.append((f"λ_p = {lp:g} → λ_SON = {lam:.4g}\n{len(C)} distinct model"
                       f"{'s' if len(C) != 1 else ''}", C))
    conv = "eq. (3): λ_SON = 2Nλ_p" if form == "eq3" else "eq. (14): λ_SON = 2λ_p"
    return plot_model_panels(
        panels, data["pool_X"], data["pool_cluster"], data["pool_y"],
        oracle_models=res["oracle_models"],
        title=f"Sum-of-norms (3), App. C setting ({n} users), paper's λ read as {conv}; "
              "dashed: per-cluster optimal separators", out=out)


def plot_armacki_appc_squared(res, *, out=None):
    """Fig. 6 for the squared penalty (4) at γ_SON = 2Nγ_p: every user's model (never fused)."""
    from .clusters import n_clusters

    data = res["data"]
    n = res["summary"]["n_users"]
    panels = [(f"γ_p = {gp:g} → γ_SON = {g:.4g}\n{n_clusters(X)} distinct model"
               f"{'s' if n_clusters(X) != 1 else ''}", X)
              for gp, g, X in zip(res["lam_paper"], res["squared"]["gammas"],
                                  res["squared"]["models"], strict=True)]
    return plot_model_panels(
        panels, data["pool_X"], data["pool_cluster"], data["pool_y"],
        oracle_models=res["oracle_models"],
        title=f"Squared penalty (4), App. C setting ({n} users), γ read as eq. (4) "
              "(γ_SON = 2Nγ_p); thin lines: the users' models", out=out)


def plot_armacki_appc_path(res, *, out=None):
    """App. C: clusters along the path with the exact recovery interval and the theorem
    intervals, and the paper's eight λ_p marked under both readings."""
    n = res["summary"]["n_users"]
    path = res["path"]
    fig = plot_n_clusters(path, res["recovery"], partition_size=3,
                          title=f"App. C: clusters along the path ({n} users, λ in the SON "
                                "convention); ticks: the paper's λ_p")
    ax = fig.axes[0]
    ytop = ax.get_ylim()[1]
    xmin, xmax = ax.get_xlim()
    ticks = {name: [lp * f for lp in res["lam_paper"]]
             for f, name in ((2 * n, "eq. (3)"), (2.0, "eq. (14)"))}
    shown = [x for xs in ticks.values() for x in xs if x <= 100 * xmax]
    xmax = max([xmax] + shown) * 1.5
    lam_hat = float(path.lam_hat)
    if np.isfinite(lam_hat):  # one cluster for every λ ≥ λ̂ (exact), beyond the grid
        ax.plot([lam_hat, xmax], [1, 1], color="k", lw=1.6, ls=(0, (4, 2)),
                label="1 cluster for λ ≥ λ̂ (exact)")
    off = []
    for (name, xs), col, y in zip(ticks.items(), ("#d62728", "#ff7f0e"), (0.93, 0.86),
                                  strict=True):
        inside = [x for x in xs if x <= xmax]
        ax.plot(inside, [y * ytop] * len(inside), "|", color=col, ms=10, mew=2,
                label=f"paper's λ_p read as {name}")
        off += [f"{x:.3g}" for x in xs if x > xmax]
    ax.set_xlim(xmin, xmax)
    if off:
        ax.text(0.99, 0.78, "off the axis (λ_SON): " + ", ".join(off), transform=ax.transAxes,
                ha="right", fontsize=7, color="0.3")
    ax.legend(fontsize=7, loc="lower left", bbox_to_anchor=(0.0, 0.06), framealpha=0.9)
    return _finish(fig, out)


def plot_pdmm_gap(curves, *, n_users=None, out=None):
    """Armacki et al. Fig. 5: PDMM's optimality gap ``F(x^t) − F*`` against t, one curve per
    λ (:func:`convexfl.experiments.armacki_pdmm_gap`), with a ``1/t`` guide."""
    fig, ax = _axes(None, (7.0, 4.2))
    floor = np.inf
    for idx, (form, c) in enumerate(curves.items()):
        gap = np.asarray(c["gap"], float)
        pos = gap[gap > 0]
        floor = min(floor, pos.min() if pos.size else 1e-16)
        it = np.asarray(c["iterations"])
        name = "eq. (3)" if form == "eq3" else "eq. (14)" if form == "eq14" else form
        ax.loglog(it, np.maximum(gap, 1e-16), color=_CLUSTER_COLOURS[idx], lw=1.2,
                  label=f"λ_p = {c['lam_paper']:g} read as {name}: λ_SON = {c['lam']:.3g} "
                        f"({c['n_clusters']} cluster{'s' if c['n_clusters'] != 1 else ''} "
                        "at the optimum)")
        g0 = gap[0]
        ax.loglog(it, g0 / it, color=_CLUSTER_COLOURS[idx], ls=":", lw=0.8)
    ax.plot([], [], color="0.4", ls=":", lw=0.8, label="1/t guide")
    ax.set_ylim(max(floor / 3, 1e-14), None)
    ax.set_xlabel("PDMM iteration t")
    ax.set_ylabel("F(x^t) − F*  (SON objective" + (f"; eq. (3)'s is this / {n_users})"
                                                   if n_users else ")"))
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=7.5)
    ax.set_title("PDMM (paper Alg. 1): ρ = η = 10, τ = 4/5, ν = 1/5, 40 % of users per "
                 "iteration, zero start", fontsize=9.5)
    return _finish(fig, out)


def plot_ari_paths(runs, *, out=None):
    """Convex clustering of scikit-learn data: number of clusters and adjusted Rand index
    with the true labels along each path (``runs``: name → :func:`convexfl.experiments.
    convex_clustering` result), λ relative to λ̂."""
    plt = _plt()
    fig, axes = plt.subplots(1, len(runs), figsize=(4.2 * len(runs), 3.6), layout="constrained",
                             squeeze=False)
    for ax, r in zip(axes[0], runs.values(), strict=True):
        p = r["path"]
        lam = np.asarray(p.lambdas) / p.lam_hat
        pos = lam > 0
        ax.semilogx(lam[pos], np.asarray(r["ari"])[pos], "o-", ms=3, color="#1f77b4",
                    label="adjusted Rand index")
        ax.set_ylim(-0.05, 1.05)
        ax.set_xlabel("λ / λ̂ (log scale)")
        ax.set_ylabel("ARI with the true labels", color="#1f77b4")
        ax2 = ax.twinx()
        ax2.step(lam[pos], np.asarray(p.n_clusters)[pos], where="post", color="k", lw=1.2)
        ax2.set_yscale("log")
        ax2.set_ylabel("number of clusters (log)")
        kt = len(np.unique(r["labels"]))
        ax2.axhline(kt, color="0.5", ls=":", lw=1)
        ax.set_title(f"{r['description']}\nbest ARI {np.max(r['ari']):.2f}; "
                     f"{kt} true classes (dotted)", fontsize=8.5)
        ax.grid(True, alpha=0.3)
    return _finish(fig, out)


def plot_membership_heatmaps(snapshots, client_group, *, label_groups=None, out=None):
    """PPFL membership vectors during training (Di et al. Fig. 6): one heatmap
    (clients × canonical models) per recorded round; clients ordered by id, their label
    group marked on the left."""
    plt = _plt()
    rounds = sorted(snapshots)
    g = np.asarray(client_group)
    fig, axes = plt.subplots(1, len(rounds), figsize=(1.9 * len(rounds) + 1.2, 5.2),
                             layout="constrained", squeeze=False)
    im = None
    for ax, r in zip(axes[0], rounds, strict=True):
        P = np.asarray(snapshots[r])
        im = ax.imshow(P, aspect="auto", cmap="viridis", vmin=0, vmax=1,
                       interpolation="nearest")
        ax.set_xticks(range(P.shape[1]))
        ax.set_xticklabels([f"θ{k + 1}" for k in range(P.shape[1])], fontsize=8)
        ax.set_title("before training" if r == 0 else f"after round {r}", fontsize=9)
        for b in np.flatnonzero(np.diff(g)) + 0.5:
            ax.axhline(b, color="w", lw=1.2)
        if ax is axes[0][0]:
            ax.set_ylabel("client (grouped by label group)")
            ticks = [float(np.mean(np.flatnonzero(g == k))) for k in np.unique(g)]
            ax.set_yticks(ticks)
            names = ([f"group {k}: {'/'.join(map(str, label_groups[k]))}" for k in np.unique(g)]
                     if label_groups is not None else [f"group {k}" for k in np.unique(g)])
            ax.set_yticklabels(names, fontsize=7, rotation=90, va="center")
        else:
            ax.set_yticks([])
    fig.colorbar(im, ax=axes[0].tolist(), shrink=0.8, label="membership π_ik")
    fig.suptitle("PPFL membership vectors during training (digits, label-group split)",
                 fontsize=10)
    return _finish(fig, out)


def plot_glmm_agreement(fits, summary_rows=None, *, out=None):
    """PPFL vs statsmodels MixedLM: predicted random effects (BLUPs) and fixed effects, one
    panel per fit (:func:`convexfl.experiments.ppfl_glmm`)."""
    plt = _plt()
    fig, axes = plt.subplots(1, len(fits), figsize=(3.6 * len(fits), 3.6), layout="constrained",
                             squeeze=False)
    rows = {r["fit"]: r for r in (summary_rows or [])}
    for ax, (key, f) in zip(axes[0], fits.items(), strict=True):
        a = np.asarray(f["mixedlm_random"])
        b = np.asarray(f["ppfl_random"])
        for j in range(a.shape[1]):
            ax.plot(a[:, j], b[:, j], "o", ms=4, alpha=0.8,
                    label="random intercept" if j == 0 else "random slope")
        lim = [min(a.min(), b.min()), max(a.max(), b.max())]
        ax.plot(lim, lim, "k-", lw=0.7)
        r = rows.get(key)
        if r:
            ax.text(0.03, 0.97, f"max |Δ BLUP| = {r['max_abs_diff_blups']:.1e}\n"
                    f"max |Δ fixed| = {r['max_abs_diff_fixed']:.1e}", transform=ax.transAxes,
                    va="top", fontsize=7.5)
        ax.set_xlabel("statsmodels MixedLM (REML) BLUP")
        ax.set_ylabel("PPFL solution b̂_i")
        ax.set_title(f"{key.split('/')[0]}: random {r['random_effects']}" if r else key,
                     fontsize=9)
        ax.legend(fontsize=7, loc="lower right")
        ax.grid(True, alpha=0.3)
    fig.suptitle("PPFL's GLMM equivalence (Thm 3) against statsmodels", fontsize=10)
    return _finish(fig, out)


_CKT_METHODS = {"fedavg": "FedAvg", "codistill": "KT w/o clustering",
                "codistill_clustered": "KT with clustering",
                "closed_form_uniform": "(14) one-shot, uniform α",
                "closed_form_clustered": "(14) one-shot, clustered α", "local": "local"}


def plot_ckt_toy(example, *, out=None):
    """PerFed-CKT Fig. 1 from a :class:`convexfl.ckt.ToyExample`: (a) true models and the
    FedAvg model, (b) KT without clustering, (c) KT with clustering, in the model plane
    (★ true model, ○ the client's model, arrow from one to the other), and (d) every
    method's distance to the true models (log scale)."""
    plt = _plt()
    fig, axes = plt.subplots(2, 2, figsize=(11, 8.6), layout="constrained")
    axes = axes.ravel()
    w = example.setting.w
    panels = [("(a) true models and FedAvg", "fedavg"), ("(b) KT w/o clustering", "codistill"),
              ("(c) KT with clustering", "codistill_clustered")]
    allpts = np.vstack([w] + [example.models[m] for _, m in panels])
    lo, hi = allpts.min(axis=0), allpts.max(axis=0)
    for ax, (name, m) in zip(axes[:3], panels, strict=True):
        est = example.models[m]
        for k in range(3):
            col = _CLUSTER_COLOURS[k]
            ax.plot(*w[k], "*", color=col, ms=14, mec="k", mew=0.5, label=f"client {k}: true")
            ax.plot(*est[k], "o", color=col, ms=8, mfc="none", mew=1.8,
                    label=f"client {k}: {_CKT_METHODS[m]}")
            if np.linalg.norm(est[k] - w[k]) > 0.02 * (hi - lo).max():
                ax.annotate("", xy=est[k], xytext=w[k],
                            arrowprops={"arrowstyle": "->", "color": col, "lw": 0.9})
        ax.margins(0.08)
        ax.set_aspect("equal", adjustable="datalim")
        ax.set_title(name, fontsize=9.5)
        ax.set_xlabel("w[0]")
        ax.set_ylabel("w[1]")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=6.5, loc="lower right", ncol=1)
    ax = axes[3]
    methods = [m for m in _CKT_METHODS if m in example.distances]
    width = 0.8 / len(methods)
    for j, m in enumerate(methods):
        d = np.maximum(np.asarray(example.distances[m]), 1e-6)
        ax.bar(np.arange(3) + (j - (len(methods) - 1) / 2) * width, d, width,
               label=_CKT_METHODS[m], color=_CLUSTER_COLOURS[(j + 3) % 10])
    ax.set_yscale("log")
    ax.set_xticks(range(3))
    ax.set_xticklabels([f"client {k}" for k in range(3)])
    ax.set_ylabel("‖w_k(method) − w_k‖ (log scale)")
    ax.set_title("(d) distance of each client's model to its true model", fontsize=9.5)
    ax.legend(fontsize=7, ncol=2, loc="upper left")
    ax.set_ylim(None, ax.get_ylim()[1] * 30)
    ax.grid(True, axis="y", alpha=0.3)
    fig.suptitle("PerFed-CKT toy example (Fig. 1): d = 2, ζ_k std (2, 5, 200), λ = 50",
                 fontsize=10)
    return _finish(fig, out)


def plot_theorem_4_2(summary, *, out=None):
    """PerFed-CKT Theorem 4.2: relative excess of the conditional test risk over its
    numerical minimum for the printed closed form (both readings of α_kk) and the corrected
    one, and the sum of the printed weights α (:func:`convexfl.experiments.ckt_theorem_4_2`)."""
    plt = _plt()
    rows = summary["instances"]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10.5, 3.8), layout="constrained")
    x = np.arange(len(rows))
    for key, name, mk in (("printed_included", "printed, α_kk included", "o"),
                          ("printed_excluded", "printed, α_kk excluded", "s"),
                          ("corrected_included", "corrected B_k, α_kk included", "^")):
        y = [max(r[key]["rel_gap_to_numerical"] or 0.0, 1e-17) for r in rows]
        a1.semilogy(x, y, mk, label=name)
    a1.set_xlabel("random isotropic instance")
    a1.set_ylabel("relative excess risk over the minimum")
    a1.set_title("Risk of the closed form vs the exact minimiser", fontsize=9.5)
    a1.legend(fontsize=7.5)
    a1.grid(True, which="both", alpha=0.25)
    a2.plot(x, [r["printed_included"]["alpha_sum"] for r in rows], "o", label="printed")
    a2.plot(x, [r["corrected_included"]["alpha_sum"] for r in rows], "^", label="corrected")
    a2.axhline(1.0, color="0.4", ls=":", lw=1)
    a2.set_xlabel("random isotropic instance")
    a2.set_ylabel("Σ_i α_ki* (objective (1) needs 1)")
    a2.set_title("Sum of the closed-form weights", fontsize=9.5)
    a2.legend(fontsize=7.5)
    a2.grid(True, alpha=0.3)
    fig.suptitle("PerFed-CKT Theorem 4.2 (λ_k* = σ²/(υ_k²ν), α_ki* = B_k/(σ² + βυ_i²))",
                 fontsize=10)
    return _finish(fig, out)


def plot_accuracy_vs_k(res, *, out=None):
    """CGPFL Fig. 3: mean test accuracy against K (K = 1 is pFedMe), CGPFL-Heur's choice
    (red star), and the two terms of e(K) of (12) (:func:`convexfl.experiments.
    cgpfl_accuracy_vs_k`)."""
    plt = _plt()
    s = res["summary"]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10.5, 3.8), layout="constrained")
    ks, acc = np.asarray(res["ks"]), np.asarray(res["accuracy"])
    a1.plot(ks, acc, "o-", color="k", label="CGPFL, fixed K")
    if 1 in ks:
        a1.axhline(acc[list(ks).index(1)], color="#1f77b4", ls="--", lw=1,
                   label="pFedMe (K = 1)")
    a1.plot(res["heur_k"], res["heur_accuracy"], "*", color="#d62728", ms=16,
            label=f"CGPFL-Heur: K = {res['heur_k']}")
    a1.axvline(s["true_k"], color="0.6", ls=":", lw=1, label=f"planted groups ({s['true_k']})")
    a1.set_xlabel("K (number of generalised models)")
    a1.set_ylabel("mean test accuracy")
    a1.set_title(f"Accuracy vs K ({s['data']}, {s['rounds']} rounds)", fontsize=9)
    a1.legend(fontsize=7.5)
    a1.grid(True, alpha=0.3)
    h = res["heuristic"]
    hk = np.asarray(h["ks"])
    a2.plot(hk, h["complexity"], "s--", ms=4, label="√(dK log(em/d)/m)")
    a2.plot(hk, s["mu"] * np.asarray(h["cost"]), "d--", ms=4, label=f"μ·cost (μ = {s['mu']:g})")
    a2.plot(hk, h["e"], "o-", color="k", label="e(K)")
    a2.plot(res["heur_k"], np.asarray(h["e"])[list(hk).index(res["heur_k"])], "*",
            color="#d62728", ms=16)
    a2.set_xlabel("K")
    a2.set_title("CGPFL-Heur's criterion (12) after the first round", fontsize=9)
    from matplotlib.ticker import MaxNLocator
    for ax in (a1, a2):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    a2.legend(fontsize=7.5)
    a2.grid(True, alpha=0.3)
    return _finish(fig, out)


def plot_method_accuracies(rows, *, description="", out=None):
    """The torch comparison table as bars: mean test accuracy ± std over clients, with the
    initial accuracy marked and the numbers sent written on each bar."""
    fig, ax = _axes(None, (7.5, 0.45 * len(rows) + 1.4))
    y = np.arange(len(rows))[::-1]
    acc = [r["mean_test_accuracy"] for r in rows]
    ax.barh(y, acc, xerr=[r["std_test_accuracy"] for r in rows], color="#9ecae1",
            ecolor="0.3", capsize=3)
    ax.plot([r["initial_test_accuracy"] for r in rows], y, "|", color="#d62728", ms=14, mew=2)
    x_text = max(r["initial_test_accuracy"] for r in rows) + 0.03
    for yi, r in zip(y, rows, strict=True):
        ax.text(x_text, yi, f"{r['mean_test_accuracy']:.3f}   ({r['numbers_sent']:.3g} "
                f"numbers sent, {r['seconds']:.1f} s)", va="center", fontsize=7.5,
                bbox={"fc": "white", "ec": "none", "alpha": 0.6, "pad": 1})
    ax.set_yticks(y)
    ax.set_yticklabels([r["method"] for r in rows], fontsize=8)
    ax.set_xlim(0, 1)
    ax.set_xlabel("mean test accuracy over clients (± std); red tick: before training")
    ax.grid(True, axis="x", alpha=0.3)
    ax.set_title(description or "torch back-ends on the digits split", fontsize=9, loc="left")
    return _finish(fig, out)


def _convex_clustering_figures(res, out_dir):
    files = [("convex_clustering_ari.png", lambda o: plot_ari_paths(res["runs"], out=o))]
    for name, r in res["runs"].items():
        # colour by class index 0..K−1 (digit labels 0/1/4/7 would give look-alike colours)
        r = dict(r, labels=np.unique(r["labels"], return_inverse=True)[1])
        files.append((f"convex_clustering_{name}_clusterpath.png",
                      lambda o, r=r: plot_clusterpath(
                          r["path"], truth=r["labels"],
                          title=f"Clusterpath: {r['description']}\n(kNN Gaussian weights; "
                                "coloured by true label; coordinates 0 and 1)", out=o)))
        files.append((f"convex_clustering_{name}_dendrogram.png",
                      lambda o, r=r: plot_dendrogram(
                          r["path"], truth=r["labels"],
                          title=f"Dendrogram: {r['description']}", out=o)))
    return files


#: experiment name → function ``(result, out_dir) -> [(file name, draw(out_path))]``
_STUDY_FIGURES = {
    "armacki_sec5": lambda r, d: [
        ("armacki_sec5_accuracy_distance.png", lambda o: plot_armacki_sec5(r, out=o)),
        ("armacki_sec5_recovery.png", lambda o: plot_armacki_sec5_recovery(r, out=o))],
    "armacki_appc": lambda r, d: [
        ("armacki_appc_son_eq3.png", lambda o: plot_armacki_appc_panels(r, "eq3", out=o)),
        ("armacki_appc_son_eq14.png", lambda o: plot_armacki_appc_panels(r, "eq14", out=o)),
        ("armacki_appc_squared_penalty.png", lambda o: plot_armacki_appc_squared(r, out=o)),
        ("armacki_appc_path.png", lambda o: plot_armacki_appc_path(r, out=o))],
    "armacki_pdmm": lambda r, d: [
        ("armacki_pdmm_gap.png", lambda o: plot_pdmm_gap(
            r["curves"], n_users=r["summary"]["n_users"], out=o))],
    "convex_clustering": _convex_clustering_figures,
    "ppfl_memberships": lambda r, d: [
        ("ppfl_memberships.png", lambda o: plot_membership_heatmaps(
            r["snapshots"], r["client_group"], label_groups=r["label_groups"], out=o))],
    "ppfl_glmm": lambda r, d: [
        ("ppfl_glmm.png", lambda o: plot_glmm_agreement(r["fits"], r["summary"]["fits"],
                                                        out=o))],
    "ckt_toy": lambda r, d: [
        ("ckt_toy.png", lambda o: plot_ckt_toy(r["examples"][0], out=o))],
    "ckt_theorem_4_2": lambda r, d: [
        ("ckt_theorem_4_2.png", lambda o: plot_theorem_4_2(r["summary"], out=o))],
    "cgpfl_k": lambda r, d: [
        ("cgpfl_accuracy_vs_k.png", lambda o: plot_accuracy_vs_k(r, out=o))],
    "torch_digits": lambda r, d: [
        ("torch_digits.png", lambda o: plot_method_accuracies(
            r["rows"], description=r["summary"]["description"], out=o))],
}


def study_figures(name, result, out_dir) -> list:
    """Draw every figure of experiment ``name`` (a key of
    :func:`convexfl.experiments.sizes`) from its ``result`` into ``out_dir`` and return the
    PNG paths. The notebooks and the report sections both call this, so a figure is drawn by
    one piece of code."""
    from pathlib import Path

    plt = _plt()
    if name not in _STUDY_FIGURES:
        raise ValueError(f"name: expected one of {sorted(_STUDY_FIGURES)}, got {name!r}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for fname, draw in _STUDY_FIGURES[name](result, out_dir):
        fig = draw(out_dir / fname)
        plt.close(fig)
        paths.append(out_dir / fname)
    return paths


__all__ += ["study_figures"]
