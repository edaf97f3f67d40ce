r"""Theorems 1–4 of Armacki et al. for the complete uniform graph (every ``w_ij = 1``):

- Theorem 1 (paper (6)) and Theorem 2 (paper (13)) at ``w*(λ)`` solving (RED), and the set
  of λ where both hold;
- Theorem 3's constants ε_k, δ_kl of Assumption 3 (25)–(26) and its interval (27);
- Theorem 4's separation radii ε_k/μ and δ_kl/L of the local optima.

Each function refuses other graphs.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.spatial.distance import cdist, pdist

from .._validation import as_scalar, check_partition
from ..problems import SumOfNorms
from ._base import (
    Bound,
    _affine_parts,
    _common_grads,
    _lam_arg,
    _pairwise_max,
    _require_complete_uniform,
    _same_matrix,
    _single_threaded,
    _weakest,
)
from .fusion import _minimisers
from .probe import _kind, _Probe, _red_note
from .search import _default_grid, _two_sided

# ---------------------------------------------------------------------------------------------
# Theorems 1 and 2 at a λ, and the set of λ where both hold
# ---------------------------------------------------------------------------------------------

def theorem1_threshold(prob: SumOfNorms, partition, lam: float | None = None, *,
                       method: str = "cvxpy", solver_options=None) -> Bound:
    r"""Theorem 1 (paper (6)) at ``w* = w*(λ)`` solving (RED):

    .. math::

        λ_1(C; λ) = \max_k \max_{i,j∈C_k} \frac{\|∇f_i(w_k^*) - ∇f_j(w_k^*)\|}{n_k} ;

    if ``λ ≥ λ₁(C; λ)`` then ``x_i = w_k*`` (``i ∈ C_k``) solves (SON).

    Parameters
    ----------
    prob : SumOfNorms
        Complete uniform graph; its λ is used unless ``lam`` is given (SON convention).
    partition : labels or list of index lists
    lam : float, optional
    method, solver_options
        How (RED) is solved (:func:`convexfl.solve`).

    Returns
    -------
    Bound
        ``.value = λ₁(C; λ)``, kind ``"exact"`` (evaluated at the certified (RED) solution;
        ``inputs["red_kkt_residual"]``), ``inputs["satisfied"] = λ ≥ λ₁``.
    """
    _require_complete_uniform(prob, "Theorem 1")
    lam = _lam_arg(prob, lam)
    probe = _Probe(prob, partition, method=method, solver_options=solver_options)
    rec = probe.at(lam, flows=False)
    return Bound("theorem1_threshold", _kind(rec), rec["thm1"], rec["thm1"],
                 inputs={"lam": lam, "satisfied": rec["thm1"] <= lam * (1 + 1e-12),
                         "per_cluster": rec["thm1_per_cluster"], "w": rec["W"],
                         "red_kkt_residual": rec["red_kkt"], "sizes": probe.sizes},
                 note="λ₁(C; λ) of paper (6) at w*(λ) from (RED); Theorem 1 holds at λ iff "
                      "λ ≥ value" + _red_note(rec))


def theorem2_threshold(prob: SumOfNorms, partition, lam: float | None = None, *,
                       method: str = "cvxpy", solver_options=None) -> Bound:
    r"""Theorem 2 (paper (13)) at ``w* = w*(λ)`` solving (RED):

    .. math::

        λ_2(C; λ) = \frac{\min_{k≠l} \|∇g_k(w_k^*) - ∇g_l(w_k^*)\|}
                         {2 \max_k \sum_{l≠k} n_l},
        \qquad g_k = \frac{1}{n_k}\sum_{i∈C_k} f_i ;

    if ``λ < λ₂(C; λ)`` the ``w_k*`` are pairwise distinct.

    Returns
    -------
    Bound
        ``.value = λ₂(C; λ)`` (``inf`` for one cluster), kind ``"exact"``,
        ``inputs["satisfied"] = λ < λ₂``.
    """
    _require_complete_uniform(prob, "Theorem 2")
    lam = _lam_arg(prob, lam)
    probe = _Probe(prob, partition, method=method, solver_options=solver_options)
    rec = probe.at(lam, flows=False)
    return Bound("theorem2_threshold", _kind(rec), rec["thm2"], rec["thm2"],
                 inputs={"lam": lam, "satisfied": lam < rec["thm2"], "w": rec["W"],
                         "red_kkt_residual": rec["red_kkt"], "sizes": probe.sizes},
                 note="λ₂(C; λ) of paper (13) at w*(λ) from (RED); Theorem 2 holds at λ iff "
                      "λ < value" + _red_note(rec))


def _constant_theorem12(prob, labels):
    """Closed-form λ₁, λ₂ when every ``∇f_i − ∇f_j`` is constant (affine losses with equal
    Hessians, e.g. the quadratic loss with equal weights), else ``None``."""
    parts = _affine_parts(prob.loss)
    if parts is None:
        return None
    H, h = parts
    if not all(_same_matrix(H[0], H[i]) for i in range(1, len(H))):
        return None
    K = int(labels.max()) + 1
    sizes = np.bincount(labels)
    lam1 = max(_pairwise_max(h[labels == k]) / sizes[k] for k in range(K))
    if K < 2:
        return lam1, math.inf
    means = np.zeros((K, h.shape[1]))
    np.add.at(means, labels, h)
    means /= sizes[:, None]
    lam2 = float(pdist(means).min()) / (2.0 * float(np.max(len(labels) - sizes)))
    return float(lam1), lam2


@_single_threaded
def theorem12_interval(prob: SumOfNorms, partition, *, n_grid: int = 16, rtol: float = 1e-6,
                       method: str = "cvxpy", solver_options=None, _probe=None,
                       _grid=None) -> Bound:
    r"""The set of λ where Theorems 1 and 2 both hold: ``λ ≥ λ₁(C; λ)`` and ``λ < λ₂(C; λ)``.

    When every ``∇f_i − ∇f_j`` is constant (quadratic loss with equal weights; least squares
    with equal designs) both thresholds are constants and the interval ``[λ₁, λ₂)`` is a
    closed form (kind ``"exact"``). Otherwise they depend on ``w*(λ)``: each condition is
    evaluated on a geometric grid of ``n_grid`` λ up to λ̂ and its switch refined by
    bisection to ``rtol`` (:func:`_two_sided`); kind ``"exact"`` under the assumption,
    checked on the grid, that Theorem 1's condition holds exactly above ``lo`` and Theorem
    2's exactly below ``hi``, ``"estimate"`` (with the violations in ``note``) otherwise.
    """
    _require_complete_uniform(prob, "Theorems 1 and 2")
    labels = check_partition(partition, prob.n_users)
    const = _constant_theorem12(prob, labels)
    if const is not None:
        lo, hi = const
        return Bound("theorem12_interval", "exact", lo, hi,
                     inputs={"lam1": lo, "lam2": hi, "closed_form": True},
                     note="∇f_i − ∇f_j constant: λ₁ and λ₂ do not depend on λ; the set is "
                          "[λ₁, λ₂) (empty when λ₁ ≥ λ₂)")
    probe = _probe or _Probe(prob, partition, method=method, solver_options=solver_options)
    grid = _grid if _grid is not None else _default_grid(prob, n_grid)
    lo, hi, info = _two_sided(probe.theorem1_holds, probe.theorem2_holds, grid, rtol)
    ok = not info["violations"]
    kind = "exact" if ok else "estimate"
    note = ("{λ : λ₁(C;λ) ≤ λ < λ₂(C;λ)} with w*(λ) from (RED), located on a grid and "
            "refined by bisection; assumes λ ≥ λ₁(C;λ) exactly above lo and λ < λ₂(C;λ) "
            "exactly below hi (checked on the grid)")
    if not ok:
        note += " — NOT monotone: " + "; ".join(info["violations"])
    if lo >= hi:
        lo, hi = math.inf, -math.inf
    return Bound("theorem12_interval", kind, lo, hi,
                 inputs={"closed_form": False, "rtol": rtol, **info}, note=note)


# ---------------------------------------------------------------------------------------------
# Theorem 3 (ε_k, δ_kl) and Theorem 4
# ---------------------------------------------------------------------------------------------

def _phi_prime_range(loss):
    """Per-sample range ``[lo, hi]`` of ``φ'`` for losses with bounded ``φ'``, else None."""
    name = type(loss).__name__
    y = loss.y
    if name == "Logistic":   # φ' = −y σ(−y t) ∈ (−1, 0) for y = 1, (0, 1) for y = −1
        return np.minimum(0.0, -y), np.maximum(0.0, -y)
    if name == "Huber":
        return np.full_like(y, -loss.delta), np.full_like(y, loss.delta)
    return None


def _zonotope_norm_bound(G, lo, hi):
    """Upper bound on ``max ‖Σ_s θ_s g_s‖`` over ``θ_s ∈ [lo_s, hi_s]`` (rows ``g_s`` of G):
    the smaller of the triangle bound and the coordinate-box bound."""
    centre = ((lo + hi) / 2)[:, None] * G
    half = ((hi - lo) / 2)[:, None] * np.abs(G)
    c = centre.sum(axis=0)
    tri = float(np.linalg.norm(c) + np.sum(((hi - lo) / 2) * np.linalg.norm(G, axis=1)))
    box = float(np.linalg.norm(np.abs(c) + half.sum(axis=0)))
    return min(tri, box)


def _ray_growth(loss, i, j, rng, n_dirs=32):
    """A direction ``u`` along which ``‖∇f_i(tu) − ∇f_j(tu)‖`` provably grows without bound,
    or None.

    Squared hinge: for large t the active samples are those with ``y⟨F_s, u⟩ < 0`` and the
    gradient is ``t S_i(u) + O(1)`` with ``S_i(u) = Σ_active 2 coef F Fᵀ u + ridge∘u``; a
    nonzero ``S_i(u) − S_j(u)`` at a ``u`` with no ``⟨F_s, u⟩ = 0`` proves growth. Poisson:
    the difference contains ``coef_s e^{t⟨F_s, u⟩} F_s`` with a unique largest positive
    exponent (generic ``u``), which dominates.
    """
    name = type(loss).__name__
    d = loss.dim
    rows = {q: slice(loss.ptr[q], loss.ptr[q + 1]) for q in (i, j)}
    for _ in range(n_dirs):
        u = rng.standard_normal(d)
        u /= np.linalg.norm(u)
        if name == "SquaredHinge":
            slopes = []
            ok = True
            for q in (i, j):
                F, y, cf = loss.F[rows[q]], loss.y[rows[q]], loss.coef[rows[q]]
                t = F @ u
                if np.any(np.abs(t) <= 1e-9 * (1 + np.linalg.norm(F, axis=1))):
                    ok = False
                act = y * t < 0
                slopes.append(2 * (cf[act] * t[act]) @ F[act] + loss.ridge[q] * u)
            if ok and np.linalg.norm(slopes[0] - slopes[1]) > 1e-9 * (
                    1 + np.linalg.norm(slopes[0]) + np.linalg.norm(slopes[1])):
                return u
        elif name == "Poisson":
            F = np.vstack([loss.F[rows[i]], loss.F[rows[j]]])
            t = F @ u
            top = np.sort(t)[-2:] if len(t) > 1 else np.r_[-np.inf, t]
            if top[-1] > 0 and top[-1] - top[0] > 1e-9 * (1 + abs(top[-1])):
                s = int(np.argmax(t))
                if np.linalg.norm(F[s]) > 0:
                    return u
        elif not np.array_equal(loss.ridge[i], loss.ridge[j]):
            return u
    return None


def theorem3_constants(prob: SumOfNorms, partition, *, how: str = "auto",
                       region_radius: float | None = None, n_samples: int = 200,
                       random_state=0) -> dict:
    r"""ε_k and δ_kl of Assumption 3 (paper (25)–(26)):

    .. math::

        ε_k ≥ \sup_x \max_{i,j∈C_k} \|∇f_i(x) - ∇f_j(x)\|, \qquad
        δ_{kl} ≤ \inf_x \min_{i∈C_k, j∈C_l} \|∇f_i(x) - ∇f_j(x)\| .

    ``how="auto"`` gives the tightest rigorous values available:

    - quadratic / least squares (``∇f_i(x) = H_i x − h_i``): **exact**. ε_k is
      ``max ‖h_i − h_j‖`` when all ``H_i`` of the cluster agree and ``inf`` otherwise
      (``(H_i − H_j) x`` is unbounded); δ_kl is ``min dist(h_i − h_j, range(H_i − H_j))``;
    - logistic, Huber (bounded ``φ'``) with equal ridge terms: ε_k is a **certified bound**
      (the difference lies in a zonotope); δ_kl has no non-trivial certified lower bound:
      ``0``;
    - squared hinge, Poisson (unbounded ``φ'``): ε_k is **exactly** ``inf`` when a ray along
      which the difference grows is found (:func:`_ray_growth`), otherwise ``inf`` as the
      trivial certified bound; δ_kl = 0 (certified).

    ``how="estimate"``: sampled points (around ``y*`` and the cluster minimisers, at several
    radii, or in the ball ``‖x − y*‖ ≤ region_radius``): ε_k is then under- and δ_kl
    over-estimated.

    Returns
    -------
    dict
        ``eps`` (K,), ``delta`` (K, K) (``inf`` on the diagonal), ``eps_kind``,
        ``delta_kind``, ``note``, ``sizes``.
    """
    _require_complete_uniform(prob, "Theorem 3")
    if how not in ("auto", "estimate"):
        raise ValueError(f"how: expected 'auto' or 'estimate', got {how!r}")
    loss = prob.loss
    labels = check_partition(partition, prob.n_users)
    K = int(labels.max()) + 1
    sizes = np.bincount(labels)
    members = [np.flatnonzero(labels == k) for k in range(K)]
    eps = np.zeros(K)
    delta = np.full((K, K), math.inf)
    parts = _affine_parts(loss)
    if how == "estimate":
        if region_radius is not None:
            region_radius = as_scalar(region_radius, "region_radius", low=0.0,
                                      low_inclusive=False)
        from sklearn.utils import check_random_state
        rng = check_random_state(random_state)
        ystar = _minimisers(loss, np.zeros(prob.n_users, dtype=int))[0]
        Wdag = _minimisers(loss, labels)
        centres = np.vstack([ystar[None], Wdag])
        if region_radius is None:
            spread = 1.0 + float(np.max(np.linalg.norm(Wdag - ystar, axis=1)))
            radii = spread * np.array([0.1, 0.3, 1.0, 3.0, 10.0])
            where = "around y* and the cluster minimisers at radii " + \
                    ", ".join(f"{r:.3g}" for r in radii)
        else:
            centres, radii = ystar[None], np.array([region_radius])
            where = f"in the ball ‖x − y*‖ ≤ {region_radius:g}"
        pts = list(centres)
        per = max(1, int(n_samples) // (len(centres) * len(radii)))
        for c in centres:
            for r in radii:
                V = rng.standard_normal((per, loss.dim))
                V /= np.linalg.norm(V, axis=1, keepdims=True)
                s = r * rng.uniform(size=(per, 1)) ** (1.0 / loss.dim)
                pts.extend(c + s * V)
        for x in pts:
            G = _common_grads(loss, x)
            for k, m in enumerate(members):
                eps[k] = max(eps[k], _pairwise_max(G[m]))
                for l_ in range(k + 1, K):
                    dmin = float(cdist(G[m], G[members[l_]]).min())
                    delta[k, l_] = delta[l_, k] = min(delta[k, l_], dmin)
        return {"eps": eps, "delta": delta, "eps_kind": "estimate", "delta_kind": "estimate",
                "sizes": sizes, "n_points": len(pts),
                "note": f"estimate from {len(pts)} points {where}: ε_k is under-, δ_kl "
                        "over-estimated (the sup/inf are over all x)"}
    if parts is not None:
        H, h = parts
        notes = []
        for k, m in enumerate(members):
            if all(_same_matrix(H[m[0]], H[i]) for i in m[1:]):
                eps[k] = _pairwise_max(h[m])
            else:
                eps[k] = math.inf
                notes.append(f"cluster {k}: Hessians differ, (H_i − H_j) x is unbounded so "
                             "ε_k = inf")
        for k in range(K):
            for l_ in range(k + 1, K):
                best = math.inf
                for i in members[k]:
                    for j in members[l_]:
                        M, v = H[i] - H[j], h[i] - h[j]
                        if np.abs(M).max() <= 1e-14 * (1 + np.abs(H[i]).max()):
                            dist = float(np.linalg.norm(v))
                        else:
                            x = np.linalg.lstsq(M, v, rcond=None)[0]
                            dist = float(np.linalg.norm(M @ x - v))
                        best = min(best, dist)
                delta[k, l_] = delta[l_, k] = best
        return {"eps": eps, "delta": delta, "eps_kind": "exact", "delta_kind": "exact",
                "sizes": sizes,
                "note": "exact: ∇f_i − ∇f_j is affine; " + ("; ".join(notes) or
                                                            "ε_k = max ‖h_i − h_j‖")}
    rng = np.random.default_rng(0 if random_state is None else random_state)
    rng_phi = _phi_prime_range(loss)
    kinds, notes = [], []
    for k, m in enumerate(members):
        best, kind_k = 0.0, "exact"           # singletons: ε_k = 0 exactly
        for a in range(len(m)):
            for b in range(a + 1, len(m)):
                i, j = m[a], m[b]
                if rng_phi is not None and np.array_equal(loss.ridge[i], loss.ridge[j]):
                    sl = np.r_[loss.ptr[i]:loss.ptr[i + 1], loss.ptr[j]:loss.ptr[j + 1]]
                    sign = np.r_[np.ones(loss.ptr[i + 1] - loss.ptr[i]),
                                 -np.ones(loss.ptr[j + 1] - loss.ptr[j])]
                    Gs = (loss.coef[sl] * sign)[:, None] * loss.F[sl]
                    best = max(best, _zonotope_norm_bound(Gs, rng_phi[0][sl], rng_phi[1][sl]))
                    kind_k = "certified bound"
                    continue
                # unbounded φ' or unequal ridge terms: look for a ray of unbounded growth
                best = math.inf
                kind_k = "exact" if _ray_growth(loss, i, j, rng) is not None \
                    else "certified bound"
                break
            if math.isinf(best):
                break
        eps[k] = best
        kinds.append(kind_k)
        if math.isinf(best):
            notes.append(f"cluster {k}: ε_k = inf" + (
                " (proven: ‖∇f_i − ∇f_j‖ grows without bound along a ray)" if kind_k == "exact"
                else " (no finite bound available for this loss)"))
    for k in range(K):
        for l_ in range(k + 1, K):
            delta[k, l_] = delta[l_, k] = 0.0
    notes.append("δ_kl = 0: no non-trivial certified lower bound on inf_x ‖∇f_i − ∇f_j‖ "
                 "for this loss (use how='estimate' for a sampled value)")
    return {"eps": eps, "delta": delta, "eps_kind": _weakest(*kinds),
            "delta_kind": "certified bound", "sizes": sizes, "note": "; ".join(notes)}


def theorem3_interval(prob: SumOfNorms, partition, *, how: str = "auto",
                      region_radius: float | None = None, n_samples: int = 200,
                      random_state=0) -> Bound:
    r"""Theorem 3 (Armacki et al. (25)–(27)): every λ in

    .. math::

        \Big[\max_k \frac{ε_k}{n_k},\;
             \min_{k≠l} \frac{δ_{kl} - ε_k - ε_l}{2 \max_k \sum_{l≠k} n_l}\Big]

    satisfies Theorems 1 and 2, hence recovers ``partition``. For the quadratic loss with
    equal weights ``∇f_i − ∇f_j = a_j − a_i`` is constant, so ``ε_k`` is the diameter of
    ``{a_i : i ∈ C_k}`` and ``δ_kl`` the least distance between the clusters: the interval is
    exact (as a statement of the theorem; the true recovery interval is wider — see
    :func:`recovery_interval`). Other losses: see :func:`theorem3_constants` for how ε and
    δ are obtained and tagged; the interval's kind is the weakest of theirs. With
    ``how="auto"`` a loss without a finite ε or a positive δ gets an empty interval that
    says so (the theorem then does not apply); ``how="estimate"`` samples.
    """
    c = theorem3_constants(prob, partition, how=how, region_radius=region_radius,
                           n_samples=n_samples, random_state=random_state)
    eps, delta, sizes = c["eps"], c["delta"], c["sizes"]
    K = len(sizes)
    if K < 2:
        raise ValueError("partition: Theorem 3 needs at least two clusters")
    lo = float(np.max(eps / sizes))
    denom = 2.0 * float(np.max(prob.n_users - sizes))
    with np.errstate(invalid="ignore"):
        gaps = [delta[a, b] - eps[a] - eps[b] for a in range(K) for b in range(K) if a != b]
    hi = float(np.nanmin(np.where(np.isnan(gaps), -np.inf, gaps))) / denom
    kind = _weakest(c["eps_kind"], c["delta_kind"])
    return Bound("theorem3_interval", kind, lo, hi,
                 inputs={"eps": eps, "delta": delta, "sizes": sizes,
                         "eps_kind": c["eps_kind"], "delta_kind": c["delta_kind"]},
                 note=(c["note"] + "; " if c["note"] else "") +
                      "the theorem's interval, not the exact recovery interval")


def theorem4_radii(prob: SumOfNorms, partition, *, how: str = "auto", **kw) -> Bound:
    r"""Theorem 4: if every ``f_i`` is μ-strongly convex and L-smooth, the local optima
    ``x_i† = argmin f_i`` satisfy

    .. math::

        \|x_i^† - x_j^†\| ≤ \max_k ε_k / μ \ (i,j ∈ C_k), \qquad
        \|x_i^† - x_j^†\| ≥ \min_{k≠l} δ_{kl} / L \ (i∈C_k, j∈C_l).

    Returns
    -------
    Bound
        Not a λ: ``lo`` = the within-cluster radius ``ε̃ = max_k ε_k/μ``, ``hi`` = the
        between-cluster separation ``δ̃ = min δ_kl / L``; kind from ε, δ
        (:func:`theorem3_constants`). ``inputs`` has μ, L and the observed max within /
        min between distances of the local optima (``holds``).

    Raises
    ------
    ValueError
        If some ``f_i`` is not strongly convex (μ = 0) or L is infinite.
    """
    _require_complete_uniform(prob, "Theorem 4")
    loss = prob.loss
    mu = float(np.min(loss.strong_convexity))
    L = float(np.max(loss.lipschitz))
    if not mu > 0:
        raise ValueError("prob: Theorem 4 needs strongly convex f_i (μ > 0); this loss has "
                         "μ = 0 for some user (add a ridge term c > 0 on every coordinate)")
    if not np.isfinite(L):
        raise ValueError("prob: Theorem 4 needs L-smooth f_i; this loss has L = inf")
    c = theorem3_constants(prob, partition, how=how, **kw)
    labels = check_partition(partition, prob.n_users)
    K = int(labels.max()) + 1
    within = float(np.max(c["eps"])) / mu
    between = float(np.min(c["delta"][~np.eye(K, dtype=bool)])) / L if K > 1 else math.inf
    local = _minimisers(loss, np.arange(prob.n_users))
    D = cdist(local, local)
    same = labels[:, None] == labels[None, :]
    obs_within = float(D[same].max())
    obs_between = float(D[~same].min()) if K > 1 else math.inf
    kind = _weakest(c["eps_kind"], c["delta_kind"])
    return Bound("theorem4_radii", kind, within, between,
                 convention="distance between local optima (not a λ)",
                 inputs={"mu": mu, "L": L, "eps": c["eps"], "delta": c["delta"],
                         "observed_max_within": obs_within,
                         "observed_min_between": obs_between,
                         "holds": bool(obs_within <= within * (1 + 1e-9) + 1e-12 and
                                       obs_between >= between * (1 - 1e-9) - 1e-12)},
                 note="lo: max distance of local optima inside a cluster; hi: min distance "
                      "across clusters; " + c["note"])
