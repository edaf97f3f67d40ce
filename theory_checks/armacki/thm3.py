"""Theorem 3 (paper (25)–(27)): λ in the closed-form interval recovers the partition."""

from __future__ import annotations

import numpy as np

import convexfl as cfl

from .._common import figure_path, planted_quadratic, pyplot, rng_for, save_counterexample, son
from ..registry import Control, outcome, register, verdict

ID = "armacki.thm3"


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
          assumptions="quadratic loss (ε_k = cluster diameter, δ_kl = gap: exact), complete "
                      "uniform graph, non-empty interval, (SON) λ convention")
def run(quick: bool, seed: int, out):
    n_inst = 6 if quick else 40
    rows = []
    for t in range(n_inst):
        rng = rng_for(seed, 3, t)
        A, truth = planted_quadratic(rng)
        for pos in (0.02, 0.5, 0.98):
            b = cfl.bounds.theorem3_interval(son(A), truth)
            r = check(son(A), truth, b.lo + pos * (b.hi - b.lo))
            rows.append((A, truth, r))
    ok = [r["recovered"] and r["converged"] for _, _, r in rows]
    margins = {
        "min_centroid_distance": min(r["min_centroid_distance"] for *_, r in rows),
        "max_within_spread": max(r["max_within_spread"] for *_, r in rows),
        "max_kkt_residual": max(r["kkt_residual"] for *_, r in rows),
        "min_relative_width": min((r["interval"][1] - r["interval"][0]) / r["interval"][1]
                                  for *_, r in rows),
    }
    cex = None
    if not all(ok):
        A, truth, _ = rows[ok.index(False)]
        cex = save_counterexample(out, ID, A=A, truth=truth)
    # control: λ far above the interval (past the closed-form fusion bound) fuses everything
    ctrl_rec = []
    for t in range(3):
        A, truth = planted_quadratic(rng_for(seed, 33, t))
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
                           "partition; λ placed at 2 %, 50 % and 98 % of each interval.")


def _plot(rows, path):
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    for i, (_, _, r) in enumerate(rows):
        lo, hi = r["interval"]
        ax.plot([i, i], [lo, hi], color="#999", lw=3, solid_capstyle="butt")
        ax.plot(i, r["lam"], "o", color="#1a7f37" if r["recovered"] else "#cf222e", ms=4)
    ax.set_yscale("log")
    ax.set_xlabel("instance × λ position")
    ax.set_ylabel("λ (SON convention)")
    ax.set_title("Theorem 3 intervals (grey) and tested λ (green = recovered)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
