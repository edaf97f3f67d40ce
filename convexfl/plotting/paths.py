"""Figures of solution paths and λ-intervals: cluster counts, clusterpaths, dendrograms,
accuracy curves, separators. λ axes in the (SON) convention.
"""

from __future__ import annotations

import math

import numpy as np

from ._base import (
    _CLUSTER_COLOURS,
    INTERVAL_STYLE,
    _axes,
    _draw_interval_strip,
    _finish,
    _fmt,
    _interval_rows,
    _plt,
)


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
