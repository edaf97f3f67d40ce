r"""The exact λ-interval on which a partition is recovered, for any loss and graph (the
partition certificate located along λ), compared with the theorems' intervals; and
:func:`summary`, every bound as a JSON-ready dict."""

from __future__ import annotations

import math

import numpy as np

from .._validation import as_int, as_scalar
from ..problems import SumOfNorms
from ._base import Bound, _check_son, _single_threaded
from .conservative import conservative_interval
from .fusion import fusion_threshold
from .probe import _Probe
from .search import _default_grid, _two_sided
from .theorems import theorem3_interval, theorem4_radii, theorem12_interval


def _certified_merge_bracket(probe, hi, rtol, max_refine=6):
    """``[a, b]`` around the upper end ``hi`` of a recovery interval: the (RED) centroids
    certified distinct at ``a`` and certified merged at ``b``. A bisection point near the
    merge may stay uncertain (Newton stalls on the tiny distances, the solver's fuse_tol
    decided), so points between the certified ones are added until ``b − a ≤ 2 rtol b``
    (at most ``max_refine`` rounds)."""
    below, above = probe.certified_bracket(hi)
    for _ in range(max_refine):
        if above - below <= 2 * rtol * above or not np.isfinite(above):
            break
        for frac in (0.25, 0.75):
            probe.distinct(below + frac * (above - below))
        below, above = probe.certified_bracket(0.5 * (below + above))
    return below, above


@_single_threaded
def recovery_interval(prob: SumOfNorms, partition, *, n_grid: int = 16, rtol: float = 1e-6,
                      compare: bool = True, n_check: int = 4, method: str = "cvxpy",
                      solver_options=None) -> Bound:
    r"""The exact λ-interval on which ``partition`` is the cluster structure of the (SON)
    solution, for any loss and graph; ``"estimate"`` where the solution inside it is not
    certified unique (some ``f_i`` not strictly convex near it; Remark 1).

    Recovery at λ is decided exactly by :func:`partition_certificate`: the (RED) centroids
    are distinct (condition D) and ``ρ_k(λ) ≤ λ`` for every cluster (condition F). Both
    are evaluated on a geometric grid of ``n_grid`` λ in ``[10⁻⁴ λ̂, λ̂]``
    (λ̂ = :func:`fusion_threshold`, above which everything is fused and no solve is needed;
    midpoints of the theorem intervals are added when available): ``hi`` is where D first
    fails, refined by bisection, then ``lo`` is where F first holds below ``hi`` (looked for
    just below ``hi`` when no grid point has it), refined by bisection. The ends are exact to
    relative width ``rtol``; an interval narrower than the grid spacing is still found.
    (RED) is solved by Newton from the nearest solved λ while the centroids stay distinct (a
    point with zero gradient and distinct centroids is the unique solution), a merge is
    certified on (RED) itself, and the solver (``method``) is the fallback.

    **Assumption (monotonicity).** D holds exactly on ``[0, hi)`` (centroids, once merged,
    stay merged) and F exactly on ``[lo, hi)`` (clusters, once formed, do not split). Both
    hold for the quadratic loss on well-separated data but can fail for general weights. They
    are *checked*: D and F on every grid point and recovery at ``n_check`` further points
    inside ``(lo, hi)``; a violation makes the result an ``"estimate"`` and ``note`` lists it.

    Returns
    -------
    Bound
        ``[lo, hi)`` with kind ``"exact"`` (up to ``rtol``) when the check passes; an empty
        Bound (``lo = inf``, ``hi = −inf``) when F never holds before D fails. ``related``
        holds ``"fusion_threshold"`` and, for the complete uniform graph and
        ``compare=True``, ``"theorem1_2"``, ``"theorem3"`` and ``"conservative"``.
    """
    _check_son(prob)
    rtol = as_scalar(rtol, "rtol", low=0.0, low_inclusive=False)
    n_check = as_int(n_check, "n_check", low=0)
    probe = _Probe(prob, partition, method=method, solver_options=solver_options)
    fb = fusion_threshold(prob, method=method, solver_options=solver_options)
    related = {"fusion_threshold": fb}
    K = probe.K
    lam_hat = fb.value if np.isfinite(fb.value) else fb.inputs["per_component"]
    if np.isfinite(fb.value):
        probe.set_fusion(fb.value, fb.inputs["y_star"])
    grid = list(_default_grid(prob, n_grid, lam_hat))
    if compare and prob.graph.is_complete_uniform and K >= 2:
        related.update(_comparisons(prob, probe, grid, rtol))
        for b in related.values():
            if b.name != "fusion_threshold" and not b.is_empty and np.isfinite(b.hi) \
                    and b.lo > 0:
                grid.append(math.sqrt(b.lo * b.hi))
    grid = np.unique(np.asarray(grid))
    if K == 1:
        # one cluster: recovered iff fused, i.e. λ ≥ λ̂ (connected graph)
        return Bound("recovery_interval", "exact", fb.value, math.inf,
                     inputs={"sizes": probe.sizes}, related=related,
                     note="one cluster: recovered exactly when all models fuse, λ ≥ λ̂")
    lo, hi, info = _two_sided(probe.flows_ok, probe.distinct, grid, rtol)
    info.update(sizes=probe.sizes, rtol=rtol)
    if lo >= hi:
        info["n_red_solves"] = probe.n_solves
        info["uncertain"] = sorted(set(probe.uncertain))
        if info["uncertain"] and np.isfinite(hi):
            info["hi_certified_bracket"] = _certified_merge_bracket(probe, hi, rtol)
            if info["hi_certified_bracket"][1] <= lo:  # merged, certified, before ρ_k ≤ λ
                info["uncertain"] = []
        ok = not info["violations"] and not info["uncertain"]
        note = ("empty: the within-cluster flows become feasible (ρ_k ≤ λ) only after the "
                "(RED) centroids have merged")
        if info["violations"]:
            note += "; NOT monotone: " + "; ".join(info["violations"])
        if info["uncertain"]:
            note += ("; estimate: whether the (RED) centroids are distinct could not be "
                     "certified at λ = " + ", ".join(f"{x:.9g}" for x in info["uncertain"]))
        return Bound("recovery_interval", "exact" if ok else "estimate", math.inf, -math.inf,
                     inputs=info, related=related, note=note)
    checks = []
    if n_check and np.isfinite(hi) and hi > lo:
        a = lo if lo > 0 else hi * 1e-6
        for x in np.geomspace(a, hi, n_check + 2)[1:-1]:
            checks.append([float(x), bool(probe.recovered(float(x)))])
    if not all(v for _, v in checks):
        info["violations"].append("some inner points are not recovered: " +
                                  str([x for x, v in checks if not v]))
    info["uncertain"] = sorted(set(probe.uncertain))
    kind = "exact"
    note = ("exact up to rtol by the partition certificate; assumes (RED)'s centroids stay "
            "distinct exactly on [0, hi) and the within-cluster flows are feasible exactly on "
            f"[lo, ∞) — checked at {len(grid)} grid points and {len(checks)} inner points")
    if info["uncertain"] and np.isfinite(hi):
        below, above = _certified_merge_bracket(probe, hi, rtol)
        info["hi_certified_bracket"] = [below, above]
        if above - below <= 2 * rtol * above:
            hi = 0.5 * (below + above)  # the merge is certified to lie in [below, above]
        elif below > lo:
            hi, kind = below, "certified bound"
            note = (f"certified bound: the (RED) centroids merge between {below:.9g} and "
                    f"{above:.9g} (inputs['hi_certified_bracket']); inside that bracket "
                    "neither their distinctness nor their merge could be certified, so hi is "
                    "its certified lower end; " + note)
        else:
            kind = "estimate"
            note = ("estimate: whether the (RED) centroids are distinct could not be "
                    "certified at λ = " + ", ".join(f"{x:.9g}" for x in info["uncertain"]) +
                    " (inputs['uncertain']); " + note)
    if info["violations"]:
        kind = "estimate"
        note = "NOT monotone: " + "; ".join(info["violations"]) + \
            " — the interval returned is where the conditions first switch"
    caveat = next((r["caveat"] for r in probe._cache.values()  # Remark 1, inside [lo, hi)
                   if r["caveat"] and lo <= r["lam"] * probe.units.grad < hi), "")
    if caveat:
        kind, note = "estimate", f"estimate: {caveat}; " + note
    info.update(checks=checks, n_red_solves=probe.n_solves,
                monotone_checked=not info["violations"])
    return Bound("recovery_interval", kind, lo, hi, inputs=info, related=related, note=note)


def _comparisons(prob, probe, grid, rtol):
    out = {}
    try:
        out["theorem1_2"] = theorem12_interval(prob, probe.labels, rtol=rtol, _probe=probe,
                                               _grid=grid)
    except (ValueError, NotImplementedError) as exc:  # pragma: no cover - defensive
        out["theorem1_2_error"] = Bound("theorem1_2", "estimate", math.inf, -math.inf,
                                        note=str(exc))
    out["theorem3"] = theorem3_interval(prob, probe.labels)
    try:
        out["conservative"] = conservative_interval(prob, probe.labels)
    except (ValueError, RuntimeError) as exc:
        out["conservative"] = Bound("conservative_interval", "estimate", math.inf, -math.inf,
                                    note=f"not available: {exc}")
    return out


def summary(prob: SumOfNorms, partition=None, **kw) -> dict:
    """Every bound for ``prob`` (and ``partition`` when given) as a JSON-ready dict."""
    fb = fusion_threshold(prob)
    out = {"lam_convention": "son", "n_users": prob.n_users, "dim": prob.dim,
           "loss": type(prob.loss).__name__, "graph": prob.graph.kind,
           "fusion_threshold": fb.to_dict()}
    if partition is not None:
        rec = recovery_interval(prob, partition, **kw)
        out["recovery_interval"] = rec.to_dict()
        if prob.graph.is_complete_uniform:
            try:
                out["theorem4_radii"] = theorem4_radii(prob, partition).to_dict()
            except ValueError as exc:
                out["theorem4_radii"] = {"error": str(exc)}
    return out
