"""The other papers' figures (PPFL, PerFed-CKT, CGPFL, convex clustering, torch) and
:func:`study_figures`, which draws every figure of one experiment.
"""

from __future__ import annotations

import numpy as np

from ._base import _CLUSTER_COLOURS, _axes, _finish, _plt
from .armacki import (
    plot_armacki_appc_panels,
    plot_armacki_appc_path,
    plot_armacki_appc_squared,
    plot_armacki_sec5,
    plot_armacki_sec5_recovery,
    plot_pdmm_gap,
)
from .paths import plot_clusterpath, plot_dendrogram


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
