r"""The conservative bounds (23)/(24) of Armacki et al. App. A: λ-independent ends λ̲, λ̄
of an interval on which Theorems 1 and 2 hold, the worst case over the set
``W = {w : Σ_k Σ_{i∈C_k} f_i(w_k) ≤ Σ_i f_i(y*)}`` (complete uniform graph only).
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from .._validation import check_partition
from ..problems import SumOfNorms
from ._base import (
    Bound,
    _affine_parts,
    _common_grads,
    _pair_lipschitz,
    _pairwise_max,
    _require_complete_uniform,
    _single_threaded,
)
from .fusion import _minimisers, check_method


@_single_threaded
def conservative_interval(prob: SumOfNorms, partition, *, how: str = "auto",
                          n_samples: int = 200, random_state=0, method: str = "cvxpy",
                          solver_options=None) -> Bound:
    r"""The λ-independent bounds (23)/(24) of Armacki et al. App. A:

    .. math::

        \underline λ = \max_k \max_{i,j∈C_k} \max_{w∈\mathcal W}
                        \frac{\|∇f_i(w_k) - ∇f_j(w_k)\|}{n_k}, \qquad
        \overline λ = \frac{\min_{k≠l} \min_{w∈\mathcal W} \|∇g_k(w_k) - ∇g_l(w_k)\|}
                           {2\max_k \sum_{l≠k} n_l},

    over :math:`\mathcal W = \{w : \sum_k \sum_{i∈C_k} f_i(w_k) ≤ \sum_i f_i(y^*)\}`
    (``y*`` the global model), which contains ``w*(λ)`` for every λ ≥ 0. Both quantities
    depend on ``w_k`` alone, so the max/min is over the projection
    ``W_k = {w : F_k(w) ≤ F_k^* + Δ}``, ``F_k = Σ_{i∈C_k} f_i``,
    ``Δ = Σ_i f_i(y*) − Σ_k F_k^*``. Every λ in ``[λ̲, λ̄)`` satisfies Theorems 1 and 2.

    Parameters
    ----------
    how : {"auto", "certified", "estimate"}
        - quadratic and least-squares losses (``"auto"``): **exact** — ``W_k`` is an
          ellipsoid and ``∇f_i − ∇f_j`` affine, so each max is a trust-region subproblem
          and each min a convex one, both solved exactly;
        - other losses (``"auto"`` or ``"certified"``): **certified bound** — ``W_k`` is
          enclosed in its exact bounding box (2d convex programs), then in the ball around
          the box centre ``c`` of radius ``r``, and
          ``‖∇f_i(w) − ∇f_j(w)‖ ≤ ‖∇f_i(c) − ∇f_j(c)‖ + max(L_i, L_j) r`` (and the
          reverse inequality for λ̄). The result is a sub-interval of the true one;
        - ``"estimate"``: sampled points of ``W_k`` (random rays from ``w_k†`` to the
          boundary of ``W_k``); a not-guaranteed, usually wider interval.
    n_samples, random_state
        For ``how="estimate"``.
    method, solver_options
        The solver and its options for the cluster minimisers where neither a closed form
        nor Newton finds them (:func:`~convexfl.bounds.fusion_threshold`).

    Returns
    -------
    Bound
        The interval ``[λ̲, λ̄)`` (``lo > hi``: empty), with ``inputs`` holding ``Δ``, the
        per-cluster quantities and the enclosures.
    """
    _require_complete_uniform(prob, "the conservative bounds (23)/(24)")
    if how not in ("auto", "certified", "estimate"):
        raise ValueError(f"how: expected 'auto', 'certified' or 'estimate', got {how!r}")
    check_method(method)
    loss = prob.loss
    labels = check_partition(partition, prob.n_users)
    K, n = int(labels.max()) + 1, prob.n_users
    sizes = np.bincount(labels)
    members = [np.flatnonzero(labels == k) for k in range(K)]
    denom = 2.0 * float(np.max(n - sizes)) if K > 1 else math.nan
    agg = loss.aggregate(labels)
    ystar = _minimisers(loss, np.zeros(n, dtype=int), method, solver_options)[0]
    Wdag = _minimisers(loss, labels, method, solver_options)
    f_global = float(np.sum(loss.values(np.tile(ystar, (n, 1)))))
    Fk_star = agg.values(Wdag)
    delta = max(f_global - float(np.sum(Fk_star)), 0.0)
    inputs = {"Delta": delta, "global_value": f_global, "cluster_minima": Fk_star,
              "sizes": sizes, "w_dagger": Wdag, "y_star": ystar, "how": how}
    parts = _affine_parts(loss)
    lower = np.zeros(K)          # per-cluster max over W_k of the Theorem-1 quantity
    upper = np.full((K, K), math.inf)   # min over W_k of ‖∇g_k − ∇g_l‖ (ordered pairs)
    if parts is not None and how != "estimate":
        kind = "exact"
        H, h = parts
        Hbar = np.stack([H[m].mean(axis=0) for m in members])
        hbar = np.stack([h[m].mean(axis=0) for m in members])
        for k, m in enumerate(members):
            Q = H[m].sum(axis=0)
            q, V = np.linalg.eigh(Q)
            if q.min() <= 1e-14 * max(q.max(), 1.0):
                raise ValueError(f"partition: cluster {k}'s loss is not strictly convex, so W_k "
                                 "is unbounded and (23) is infinite; add a ridge term (c > 0)")
            T = math.sqrt(2.0 * delta) * (V / np.sqrt(q)) @ V.T
            c = Wdag[k]
            best = 0.0
            for a in range(len(m)):
                for b in range(a + 1, len(m)):
                    M = H[m[a]] - H[m[b]]
                    e = M @ c - (h[m[a]] - h[m[b]])
                    best = max(best, _ball_norm_extrema(M @ T, e)[1])
            lower[k] = best / len(m)
            for l_ in range(K):
                if l_ != k:
                    M = Hbar[k] - Hbar[l_]
                    e = M @ c - (hbar[k] - hbar[l_])
                    upper[k, l_] = _ball_norm_extrema(M @ T, e)[0]
        note = ("exact: W_k is an ellipsoid and ∇f_i − ∇f_j affine (trust-region "
                "subproblems solved exactly)")
    elif how == "estimate":
        kind = "estimate"
        pts = _sample_sublevel(agg, Wdag, Fk_star + delta, n_samples, random_state)
        for k, m in enumerate(members):
            P = pts[k]
            for x in P:
                G = _common_grads(loss, x)
                lower[k] = max(lower[k], _pairwise_max(G[m]) / len(m))
                if K > 1:
                    means = np.zeros((K, loss.dim))
                    np.add.at(means, labels, G)
                    means /= sizes[:, None]
                    dd = np.linalg.norm(means - means[k], axis=1)
                    for l_ in range(K):
                        if l_ != k:
                            upper[k, l_] = min(upper[k, l_], dd[l_])
        inputs["n_samples"] = n_samples
        note = (f"estimate from {n_samples} sampled points per cluster in W_k (rays from "
                "w_k† to the boundary): λ̲ may be under- and λ̄ over-estimated")
    else:
        kind = "certified bound"
        try:
            centres, radii = _sublevel_boxes(agg, K, f_global, Fk_star)
            enclosure = "the ball around the exact bounding box of W_k"
        except Exception as exc:  # noqa: BLE001 - any solver failure: use strong convexity
            mu = agg.strong_convexity
            centres = Wdag
            with np.errstate(divide="ignore"):
                radii = np.where(mu > 0, np.sqrt(2.0 * delta / np.where(mu > 0, mu, 1.0)),
                                 math.inf)
            enclosure = ("the strong-convexity ball ‖w − w_k†‖ ≤ √(2Δ/μ_k) (the bounding-box "
                         f"programs failed: {type(exc).__name__})")
        inputs["enclosing_centres"], inputs["enclosing_radii"] = centres, radii
        inputs["enclosure"] = enclosure
        L = loss.lipschitz
        for k, m in enumerate(members):
            c, r = centres[k], radii[k]
            G = _common_grads(loss, c)
            best = 0.0
            for a in range(len(m)):
                for b in range(a + 1, len(m)):
                    best = max(best, float(np.linalg.norm(G[m[a]] - G[m[b]]))
                               + _pair_lipschitz(loss, m[a], m[b]) * r)
            lower[k] = best / len(m)
            if K > 1:
                means = np.zeros((K, loss.dim))
                np.add.at(means, labels, G)
                means /= sizes[:, None]
                Lbar = np.array([L[mm].mean() for mm in members])
                for l_ in range(K):
                    if l_ != k:
                        upper[k, l_] = max(float(np.linalg.norm(means[k] - means[l_]))
                                           - max(Lbar[k], Lbar[l_]) * r, 0.0)
        note = (f"certified: W_k enclosed in {enclosure}, gradient differences bounded with "
                "the Lipschitz constants (a sub-interval of the true [λ̲, λ̄))")
    lo = float(lower.max())
    hi = float(upper.min()) / denom if K > 1 else math.inf
    inputs.update(per_cluster_lower=lower, pair_upper=upper)
    return Bound("conservative_interval", kind, lo, hi, inputs=inputs, note=note)


def _ball_norm_extrema(A, e):
    r"""``(min, max)`` of ``‖A u + e‖`` over ``‖u‖ ≤ 1``, exactly.

    The minimum is a convex problem; the maximum of a convex quadratic over a ball is a
    trust-region subproblem with hidden convexity: in the eigenbasis of ``AᵀA = V S Vᵀ``,
    ``u = V v`` with ``v_i = t_i / (σ − s_i)``, ``t = VᵀAᵀe``, and ``σ ≥ s_max`` the root of
    ``Σ t_i² / (σ − s_i)² = 1`` (the "hard case" fills the top eigenspace).
    """
    A = np.atleast_2d(np.asarray(A, float))
    e = np.asarray(e, float)
    s, V = np.linalg.eigh(A.T @ A)
    s = np.maximum(s, 0.0)
    t = V.T @ (A.T @ e)
    ee = float(e @ e)
    scale = float(s.max(initial=0.0)) + float(np.linalg.norm(t)) + math.sqrt(ee) + 1e-300
    zero_s = s <= 1e-14 * scale

    def value(v):
        return math.sqrt(max(float(s @ (v * v) + 2 * t @ v) + ee, 0.0))

    # minimum
    v0 = np.where(zero_s, 0.0, -t / np.where(zero_s, 1.0, s))
    if np.linalg.norm(v0) <= 1.0:
        vmin = value(v0)
    else:
        lo, hi = 0.0, float(np.linalg.norm(t)) + 1.0
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            if np.sum((t / (s + mid)) ** 2) > 1.0:
                lo = mid
            else:
                hi = mid
        vmin = value(-t / (s + hi))
    # maximum (on the sphere)
    smax = float(s.max(initial=0.0))
    top = s >= smax - 1e-12 * scale
    tn = float(np.linalg.norm(t))
    if tn <= 1e-300:
        vmax = math.sqrt(max(smax + ee, 0.0))
    else:
        t_top = float(np.linalg.norm(t[top]))
        rest = ~top
        v_rest = np.zeros_like(t)
        v_rest[rest] = t[rest] / (smax - s[rest])
        if t_top <= 1e-12 * tn and np.sum(v_rest ** 2) <= 1.0:  # hard case
            v = v_rest.copy()
            idx = np.flatnonzero(top)[0]
            v[idx] = math.sqrt(max(1.0 - float(np.sum(v_rest ** 2)), 0.0))
            vmax = value(v)
        else:
            lo, hi = smax, smax + tn
            for _ in range(200):
                mid = 0.5 * (lo + hi)
                den = mid - s
                if mid <= lo or np.any(den <= 0) or np.sum((t / den) ** 2) > 1.0:
                    lo = mid
                else:
                    hi = mid
            vmax = value(t / (hi - s))
    return vmin, vmax


def _sublevel_boxes(agg, K, level, Fk_star):
    """Exact bounding boxes of ``W_k = {F_k ≤ level − Σ_{l≠k} F_l^*}`` (2d convex programs
    per cluster, one cvxpy model with a DPP objective), as (centres, radii) of enclosing
    balls; a relative margin covers the solver's accuracy."""
    import cvxpy as cp

    d = agg.dim
    Wv = cp.Variable((K, d))
    C = cp.Parameter((K, d))
    lev = float(level) * (1 + 1e-9) + 1e-12
    prob = cp.Problem(cp.Maximize(cp.sum(cp.multiply(C, Wv))), [agg.cvxpy_value(Wv) <= lev])
    lo, hi = np.zeros((K, d)), np.zeros((K, d))
    for k in range(K):
        for c in range(d):
            for sign, out in ((1.0, hi), (-1.0, lo)):
                M = np.zeros((K, d))
                M[k, c] = sign
                C.value = M
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    prob.solve(solver="CLARABEL")
                if prob.status != "optimal" or Wv.value is None:
                    from ..solvers import SolverError
                    raise SolverError(f"bounding box of W_k: cvxpy returned {prob.status}")
                out[k, c] = float(prob.value) * sign
    span = hi - lo
    margin = 1e-6 * (1.0 + np.abs(np.r_[lo, hi]).max()) + 1e-6 * span
    lo, hi = lo - margin, hi + margin
    centres = 0.5 * (lo + hi)
    radii = 0.5 * np.linalg.norm(hi - lo, axis=1)
    return centres, radii


def _sample_sublevel(agg, centres, levels, n_samples, random_state):
    """Points of ``{F_k ≤ level_k}`` on random rays from ``centres[k]``: for each ray the
    boundary distance by bisection, then points at fractions 1/4 … 1 of it."""
    from sklearn.utils import check_random_state

    rng = check_random_state(random_state)
    K, d = centres.shape
    n_rays = max(1, int(n_samples) // 4)
    out = [[] for _ in range(K)]
    for _ in range(n_rays):
        V = rng.standard_normal((K, d))
        V /= np.linalg.norm(V, axis=1, keepdims=True)
        lo, hi = np.zeros(K), np.ones(K)
        for _ in range(60):  # expand until outside
            inside = agg.values(centres + hi[:, None] * V) <= levels
            if not np.any(inside):
                break
            hi[inside] *= 2.0
        for _ in range(50):
            mid = 0.5 * (lo + hi)
            inside = agg.values(centres + mid[:, None] * V) <= levels
            lo = np.where(inside, mid, lo)
            hi = np.where(inside, hi, mid)
        for frac in (0.25, 0.5, 0.75, 1.0):
            P = centres + (frac * lo)[:, None] * V
            for k in range(K):
                out[k].append(P[k])
    return [np.array(p) for p in out]
