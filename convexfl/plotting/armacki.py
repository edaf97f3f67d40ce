"""The Armacki et al. figures: Sec. V (Figs. 2-3), App. C (Figs. 5-6)."""

from __future__ import annotations

import math

import numpy as np

from ._base import _CLUSTER_COLOURS, _axes, _finish, _plt
from .paths import plot_fl_curves, plot_n_clusters


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
    from ..problems import from_paper_lambda

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
    from ..clusters import n_clusters

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
