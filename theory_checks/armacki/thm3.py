"""Theorem 3 (paper (25)–(27)): λ in the closed-form interval recovers the partition.

Instances: equal cluster sizes (:func:`theory_checks._common.planted_quadratic`) and unequal
ones (:func:`planted_unequal`, where the ``max_k Σ_{l≠k} n_l`` of the interval's upper end and
the ``ε_k / n_k`` of its lower end differ from cluster to cluster). Non-uniform user weights
``f_i = (w_i/2)‖x − a_i‖²`` are reported separately: there ``∇f_i − ∇f_j`` is no longer
constant, ε_k = ∞ (weights differing inside a cluster) or δ_kl = 0 (differing across), and the
theorem's interval is empty — it says nothing. The exact recovery interval
(:func:`convexfl.bounds.recovery_interval`) is reported next to it: not empty with weights
constant inside clusters; with weights differing inside, it can be empty (no λ recovers).
"""

from __future__ import annotations

import numpy as np

import convexfl as cfl

from .._common import (
    figure_path,
    finish,
    planted_quadratic,
    pyplot,
    rng_for,
    save_counterexample,
    son,
)
from ..registry import Control, outcome, register, verdict

ID = "armacki.thm3"


def planted_unequal(rng: np.random.Generator):
    """K ∈ {2, 3, 4} clusters of 2–9 points (not all the same size) in d ∈ {2, 3}, uniform
    in unit balls around centres ≥ sep apart, sep = u · (6 + 4 (N − n_min)/n_min) with
    u ∈ [1.2, 2]: enough for a non-empty Theorem-3 interval (δ ≥ sep − 2, ε_k ≤ 2)."""
    k, d = int(rng.integers(2, 5)), int(rng.integers(2, 4))
    sizes = rng.integers(2, 10, size=k)
    while np.all(sizes == sizes[0]):
        sizes = rng.integers(2, 10, size=k)
    n = int(sizes.sum())
    sep = (6.0 + 4.0 * (n - sizes.min()) / sizes.min()) * float(rng.uniform(1.2, 2.0))
    A, _ = cfl.datasets.planted_points(k, 1, d, separation=sep, radius=0.0,
                                       random_state=int(rng.integers(2**31)))
    truth = np.repeat(np.arange(k), sizes)
    v = rng.standard_normal((n, d))
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return A[truth] + v * rng.uniform(size=(n, 1)) ** (1.0 / d), truth


def weighted(rng: np.random.Generator, *, within: bool):
    """An unequal-size instance with user weights in [0.5, 2]: constant inside each cluster
    (``within=False``) or differing inside clusters (``within=True``)."""
    A, truth = planted_unequal(rng)
    w = rng.uniform(0.5, 2.0, size=truth.max() + 1)[truth]
    if within:
        w = rng.uniform(0.5, 2.0, size=len(A))
    return cfl.SumOfNorms(cfl.losses.Quadratic(A, w), cfl.graphs.complete(len(A)), 0.0), truth


def check(prob, partition, lam: float | None = None, *, tol: float = 1e-9) -> dict:
    """Solve ``prob`` at ``lam`` (default: the middle of the Theorem-3 interval) and report
    whether the planted ``partition`` is recovered, with margins.

    Returns a dict: ``interval`` (lo, hi), ``lam``, ``position`` (0 at lo, 1 at hi),
    ``recovered``, ``n_clusters``, ``min_centroid_distance``, ``max_within_spread``,
    ``kkt_residual``.
    """
    bound = cfl.bounds.theorem3_interval(prob, partition)
    lam = 0.5 * (bound.lo + bound.hi) if lam is None else float(lam)
    res = cfl.solve(prob.with_lam(lam), tol=tol)
    labels = np.asarray(cfl._validation.check_partition(partition, prob.n_users))
    k = labels.max() + 1
    centres = np.array([res.X[labels == c].mean(axis=0) for c in range(k)])
    spread = max(np.abs(res.X[labels == c] - centres[c]).max() for c in range(k))
    dists = [np.linalg.norm(centres[a] - centres[b]) for a in range(k) for b in range(a + 1, k)]
    width = bound.hi - bound.lo
    return {"interval": (bound.lo, bound.hi), "lam": lam,
            "position": (lam - bound.lo) / width if width > 0 else float("nan"),
            "recovered": cfl.clusters.same_partition(res.labels(), labels),
            "n_clusters": res.n_clusters, "min_centroid_distance": min(dists, default=np.inf),
            "max_within_spread": float(spread), "kkt_residual": res.kkt_residual,
            "fuse_tol": res.fuse_tol, "converged": res.converged}


@register(ID, paper="Armacki et al.", equation="Thm 3, (25)-(27)",
          claim="Every λ in [max_k ε_k/n_k, min_{k≠l}(δ_kl − ε_k − ε_l)/(2 max_k Σ_{l≠k} n_l)] "
                "makes the (SON) solution equal to the clustered reduced solution (exact "
                "recovery of the partition).",
          assumptions="quadratic loss with equal user weights (ε_k = cluster diameter, δ_kl = "
                      "gap: exact), equal and unequal cluster sizes, complete uniform graph, "
                      "non-empty interval, (SON) λ convention")
def run(quick: bool, seed: int, out):
    n_inst = 6 if quick else 40
    rows = []
    for t in range(n_inst):
        rng = rng_for(seed, 3, t)
        A, truth = planted_quadratic(rng) if t % 2 == 0 else planted_unequal(rng)
        for pos in (0.02, 0.5, 0.98):
            b = cfl.bounds.theorem3_interval(son(A), truth)
            r = check(son(A), truth, b.lo + pos * (b.hi - b.lo))
            rows.append((A, truth, r))
    ok = [r["recovered"] and r["converged"] for _, _, r in rows]
    unequal = [r for _, truth, r in rows if len(set(np.bincount(truth))) > 1]
    margins = {
        "min_centroid_distance": min(r["min_centroid_distance"] for *_, r in rows),
        "unequal_size_pairs": len(unequal),
        "unequal_size_pairs_recovered": sum(bool(r["recovered"]) for r in unequal),
        "cluster_sizes_seen": sorted({int(n) for _, truth, _ in rows
                                      for n in np.bincount(truth)}),
        "max_within_spread": max(r["max_within_spread"] for *_, r in rows),
        "max_kkt_residual": max(r["kkt_residual"] for *_, r in rows),
        "min_relative_width": min((r["interval"][1] - r["interval"][0]) / r["interval"][1]
                                  for *_, r in rows),
    }
    cex = None
    if not all(ok):
        A, truth, _ = rows[ok.index(False)]
        cex = save_counterexample(out, ID, A=A, truth=truth)
    weights = [_weighted_row(rng_for(seed, 34, t), within=bool(t % 2))
               for t in range(1 if quick else 4)]
    margins["weighted_instances"] = len(weights)
    margins["weighted_theorem3_empty"] = sum(w["t3_empty"] for w in weights)
    margins["weighted_exact_recovery_nonempty"] = sum(not w["exact_empty"] for w in weights)
    # control: λ far above the interval (past the closed-form fusion bound) fuses everything
    ctrl_rec = []
    for t in range(3):
        A, truth = (planted_quadratic if t % 2 == 0 else planted_unequal)(rng_for(seed, 33, t))
        g = A.mean(axis=0) - A
        lam_fuse = max(np.linalg.norm(g[i] - g[j]) for i in range(len(A))
                       for j in range(len(A))) / len(A)
        res = cfl.solve(son(A, 1.01 * lam_fuse))
        ctrl_rec.append(cfl.clusters.same_partition(res.labels(), truth))
    control = Control("λ = 1.01 × the closed-form consensus bound max‖g_i − g_j‖/N (above the "
                      "interval): recovery must fail (one cluster)",
                      verdict(ctrl_rec), {"instances": 3, "recovered": int(sum(ctrl_rec))})
    fig, rel = figure_path(out, ID)
    _plot(rows, fig)
    return outcome(ID, outcome=verdict(ok), margins=margins, instances=len(rows), seed=seed,
                   control=control, figure=rel, counterexample=cex,
                   details=f"{sum(ok)}/{len(ok)} (instance, λ) pairs recovered the planted "
                           "partition; λ placed at 2 %, 50 % and 98 % of each interval; "
                           f"instances alternate equal and unequal cluster sizes (sizes seen: "
                           f"{margins['cluster_sizes_seen']}; unequal-size pairs recovered: "
                           f"{margins['unequal_size_pairs_recovered']}/{len(unequal)}). "
                           "Non-uniform user "
                           "weights (w_i ∈ [0.5, 2]): " + "; ".join(w["text"] for w in weights)
                           + ". The theorem's interval is empty on "
                           f"{margins['weighted_theorem3_empty']}/{len(weights)} weighted "
                           "instances — it does not apply. The exact recovery interval is "
                           "non-empty on " + ", ".join(
                               f"{sum(not w['exact_empty'] for w in weights if w['within'] == v)}"
                               f"/{sum(w['within'] == v for w in weights)} with weights "
                               f"{'differing' if v else 'constant'} inside clusters"
                               for v in (False, True))
                           + " (empty: the within-cluster flows become feasible only after "
                           "the centroids merge, so the planted partition is never the "
                           "solution's).")


def _weighted_row(rng, *, within):
    prob, truth = weighted(rng, within=within)
    t3 = cfl.bounds.theorem3_interval(prob, truth)
    ex = cfl.bounds.recovery_interval(prob, truth, compare=False, n_grid=10)
    eps, delta = t3.inputs["eps"], t3.inputs["delta"]
    text = (f"weights {'differing inside' if within else 'constant inside, differing across'} "
            f"clusters (sizes {np.bincount(truth).tolist()}): max ε_k = {np.max(eps):.3g}, "
            f"min δ_kl = {np.min(delta):.3g}, Theorem-3 interval "
            f"{'empty' if t3.is_empty else f'[{t3.lo:.3g}, {t3.hi:.3g}]'}, exact recovery "
            f"interval [{ex.lo:.4g}, {ex.hi:.4g}) ({ex.kind})")
    return {"t3_empty": t3.is_empty, "exact_empty": ex.is_empty, "within": within,
            "text": text}


def _plot(rows, path):
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    for i, (_, _, r) in enumerate(rows):
        lo, hi = r["interval"]
        ax.plot([i, i], [lo, hi], color="#999", lw=3, solid_capstyle="butt")
        ax.plot(i, r["lam"], "o", color="#1a7f37" if r["recovered"] else "#cf222e", ms=4)
    ax.set_yscale("log")
    finish(fig, ax, path, xlabel="instance × λ position", ylabel="λ (SON convention)",
           title="Theorem 3 intervals (grey) and tested λ (green = recovered)")
