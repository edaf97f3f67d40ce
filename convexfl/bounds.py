r"""λ-ranges for exact cluster recovery and consensus, each tagged with how exact it is.

Every function returns a :class:`Bound`: a number (``.value``) or an interval (``.lo``,
``.hi``), with ``.kind`` one of

- ``"exact"`` — the true quantity (closed form, or a convex program solved to certificate;
  for a search along λ, exact up to its stated tolerance and assumption);
- ``"certified bound"`` — rigorous but possibly loose;
- ``"estimate"`` — e.g. sampled or from a local search; not guaranteed.

All λ are in the canonical (SON) convention of :mod:`convexfl.problems`,

.. math::

    F_λ(X) = \sum_i f_i(x_i) + λ \sum_{(i,j)∈E} w_{ij}\,\|x_i - x_j\| ,

and the reduced problem (RED) of a partition ``C_1..C_K`` (``n_k = |C_k|``,
``W_kl = Σ_{i∈C_k, j∈C_l} w_ij``) is

.. math::

    \min_{w_1..w_K} \sum_k \sum_{i∈C_k} f_i(w_k) + λ \sum_{k<l} W_{kl} \|w_k - w_l\| .

What is here (docs/math.md §1.3–1.4):

==========================  ===============================================================
:func:`theorem1_threshold`  λ₁(C; λ) of Theorem 1 (paper (6)) at ``w*(λ)``
:func:`theorem2_threshold`  λ₂(C; λ) of Theorem 2 (paper (13)) at ``w*(λ)``
:func:`theorem12_interval`  the set of λ where both theorems' conditions hold
:func:`conservative_interval`  λ̲, λ̄ of (23)/(24), worst case over the set ``W``
:func:`theorem3_constants`  ε_k, δ_kl of Assumption 3 (25)–(26)
:func:`theorem3_interval`   Theorem 3's interval (27)
:func:`theorem4_radii`      Theorem 4's separation radii ε_k/μ and δ_kl/L
:func:`fusion_threshold`    λ̂, exact (a min-max flow SOCP), with closed-form bounds
:func:`partition_certificate`  the exact certificate ρ_k(λ) ≤ λ of a partition at λ
:func:`recovery_interval`   the exact λ-interval on which a partition is recovered
==========================  ===============================================================

Theorems 1–4 and (23)/(24) are stated for the complete uniform graph (every ``w_ij = 1``);
their functions refuse other graphs. :func:`fusion_threshold`, :func:`partition_certificate`
and :func:`recovery_interval` hold for any graph.
"""

from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components
from scipy.spatial.distance import cdist, pdist

from ._validation import as_int, as_scalar, check_partition
from .losses import LeastSquares, Quadratic, uniqueness_caveat
from .problems import Reduced, SumOfNorms, oracle
from .units import standardise

__all__ = ["Bound", "PartitionCertificate", "KINDS", "theorem1_threshold",
           "theorem2_threshold", "theorem12_interval", "conservative_interval",
           "theorem3_constants", "theorem3_interval", "theorem4_radii", "fusion_threshold",
           "partition_certificate", "recovery_interval", "summary"]

KINDS = ("exact", "certified bound", "estimate")


@dataclass(frozen=True)
class Bound:
    """A number or an interval of λ with its provenance.

    Attributes
    ----------
    name : str
        What it is (e.g. ``"theorem3_interval"``).
    kind : {"exact", "certified bound", "estimate"}
    lo, hi : float
        The interval (``lo == hi == value`` for a number). ``lo > hi`` means empty.
    convention : str
        The λ convention (``"son"``; Theorem 4's radii are distances, not λ).
    inputs : dict
        The quantities it was computed from (e.g. ε_k, δ_kl).
    note : str
    related : dict
        Other :class:`Bound` objects returned alongside (e.g. the closed-form bounds next to
        the exact λ̂, the theorem intervals next to the exact recovery interval).
    """

    name: str
    kind: str
    lo: float
    hi: float
    convention: str = "son"
    inputs: dict = field(default_factory=dict)
    note: str = ""
    related: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"kind: expected one of {KINDS}, got {self.kind!r}")

    @property
    def value(self) -> float:
        """The number, for a bound that is one (``lo == hi``)."""
        if self.lo != self.hi:
            raise AttributeError(f"{self.name} is an interval: use .lo and .hi")
        return self.lo

    @property
    def is_number(self) -> bool:
        return self.lo == self.hi

    @property
    def is_empty(self) -> bool:
        return self.lo > self.hi

    def contains(self, lam: float) -> bool:
        return self.lo <= lam <= self.hi

    def __repr__(self) -> str:
        body = f"{self.lo:.6g}" if self.lo == self.hi else f"[{self.lo:.6g}, {self.hi:.6g}]"
        return f"Bound({self.name}: {body}, {self.kind}, λ convention {self.convention})"

    def to_dict(self) -> dict:
        """A JSON-ready dict (arrays as lists, ``inf`` as the string ``"inf"``)."""
        out = {"name": self.name, "kind": self.kind, "convention": self.convention,
               "note": self.note}
        if self.is_number:
            out["value"] = _jsonable(self.lo)
        else:
            out.update(lo=_jsonable(self.lo), hi=_jsonable(self.hi), empty=self.is_empty)
        out["inputs"] = _jsonable(self.inputs)
        if self.related:
            out["related"] = {k: v.to_dict() for k, v in self.related.items()}
        return out


def _jsonable(obj):
    """Convert numpy scalars/arrays, nested containers and non-finite floats for JSON."""
    if isinstance(obj, Bound):
        return obj.to_dict()
    if isinstance(obj, dict):  # keys starting with "_" are private (large arrays)
        return {str(k): _jsonable(v) for k, v in obj.items() if not str(k).startswith("_")}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _jsonable(obj.tolist())
    if isinstance(obj, (np.bool_, bool)):
        return bool(obj)
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        x = float(obj)
        if math.isnan(x):
            return "nan"
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
        return x
    return obj


def _weakest(*kinds) -> str:
    return max(kinds, key=KINDS.index)


# ---------------------------------------------------------------------------------------------
# checks and small numerical helpers
# ---------------------------------------------------------------------------------------------

def _single_threaded(fn):
    """Run ``fn`` with OpenMP limited to one thread.

    The many tiny problems of a λ-search (cluster labelling through scikit-learn's radius
    graph, small SOCPs) are dominated by OpenMP thread wake-ups on a busy machine; one thread
    is several times faster for them and changes no result.
    """
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from threadpoolctl import threadpool_limits
        with threadpool_limits(limits=1, user_api="openmp"):
            return fn(*args, **kwargs)
    return wrapper


def _check_son(prob):
    if not isinstance(prob, SumOfNorms):
        raise TypeError(f"prob: expected a SumOfNorms problem, got {type(prob).__name__}")
    return prob


def _require_complete_uniform(prob, what):
    _check_son(prob)
    if not prob.graph.is_complete_uniform:
        raise ValueError(f"prob: {what} holds for the complete uniform graph (every w_ij = 1); "
                         f"this graph is {prob.graph.kind!r} — use recovery_interval / "
                         "partition_certificate, which hold for any graph")


def _lam_arg(prob, lam):
    return prob.lam if lam is None else as_scalar(lam, "lam", low=0.0)


def _common_grads(loss, x) -> np.ndarray:
    """``[∇f_i(x)]_i`` at one common point ``x`` (N, d)."""
    return loss.grad(np.tile(np.asarray(x, float), (loss.n_users, 1)))


def _affine_parts(loss):
    """``(H, h)`` with ``∇f_i(x) = H_i x − h_i`` for the quadratic and least-squares losses,
    else ``None``."""
    n, d = loss.n_users, loss.dim
    if isinstance(loss, Quadratic):
        H = loss.coef[:, None, None] * np.eye(d)[None]
        return H, loss.coef[:, None] * loss.F
    if isinstance(loss, LeastSquares):
        H = loss._grams()
        H[:, np.arange(d), np.arange(d)] += loss.ridge
        h = np.zeros((n, d))
        for i in range(n):
            sl = slice(loss.ptr[i], loss.ptr[i + 1])
            h[i] = (loss.coef[sl] * loss.y[sl]) @ loss.F[sl]
        return H, h
    return None


def _same_matrix(A, B) -> bool:
    return bool(np.allclose(A, B, rtol=1e-12, atol=1e-14 * np.abs(A).max()))


def _data_lipschitz(loss) -> np.ndarray:
    """Lipschitz constants of the data part of ``∇f_i`` (ridge excluded), shape (N,)."""
    return np.maximum(loss.lipschitz - loss.ridge.max(axis=1), 0.0)


def _pair_lipschitz(loss, i, j) -> float:
    """A Lipschitz constant of ``∇f_i − ∇f_j``: the Hessians lie in ``[0, L_i]`` and
    ``[0, L_j]``, so their difference has norm ``≤ max(L_i, L_j)`` (ridge terms cancel when
    equal)."""
    if np.array_equal(loss.ridge[i], loss.ridge[j]):
        ld = _data_lipschitz(loss)
        return float(max(ld[i], ld[j]))
    return float(max(loss.lipschitz[i], loss.lipschitz[j]))


def _minimise_users(loss, X0=None, *, tol=1e-13, max_iter=100):
    """``argmin f_k`` for every user of ``loss`` by damped Newton with backtracking.

    Returns ``(X, ok)``; ``ok`` is False when some gradient did not reach
    ``tol · (1 + ‖∇f‖ at the start)``.
    """
    K, d = loss.n_users, loss.dim
    X = np.zeros((K, d)) if X0 is None else np.array(X0, dtype=float)
    G = loss.grad(X)
    g0 = 1.0 + np.linalg.norm(G, axis=1)
    v = loss.values(X)
    for _ in range(max_iter):
        gn = np.linalg.norm(G, axis=1)
        todo = gn > tol * g0
        if not np.any(todo):
            return X, True
        P = np.zeros_like(X)
        for k in np.flatnonzero(todo):
            H = loss.hessian(k, X[k])
            damp = 1e-12 * (1.0 + np.abs(H).max())
            try:
                P[k] = -np.linalg.solve(H + damp * np.eye(d), G[k])
            except np.linalg.LinAlgError:
                P[k] = -G[k]
        slope = np.sum(G * P, axis=1)
        t = np.ones(K)
        for _ in range(60):
            Xn = X + t[:, None] * P
            vn = loss.values(Xn)
            bad = todo & (vn > v + 1e-4 * t * slope + 1e-15 * np.abs(v))
            if not np.any(bad):
                break
            t[bad] *= 0.5
        X, v = Xn, vn
        Gn = loss.grad(X)
        if np.all(np.linalg.norm(Gn, axis=1)[todo] >= gn[todo]) and np.all(t[todo] < 1e-12):
            G = Gn
            break
        G = Gn
    return X, bool(np.all(np.linalg.norm(G, axis=1) <= tol * g0))


def _minimisers(loss, labels, method="cvxpy", solver_options=None):
    """``w_k† = argmin Σ_{i∈C_k} f_i`` per cluster (cvxpy reference, then Newton polish),
    shape (K, d); computed in standard units (:mod:`convexfl.units`)."""
    from .solvers import solve

    units, std = loss.standard
    if not units.is_identity:
        return units.x_from(_minimisers(std, labels, method, solver_options))
    agg = loss.aggregate(labels)
    parts = _affine_parts(agg)
    if parts is not None:
        H, h = parts
        try:
            return np.stack([np.linalg.solve(H[k], h[k]) for k in range(agg.n_users)])
        except np.linalg.LinAlgError:
            pass
    X, ok = _minimise_users(agg)
    if not ok:
        sol = solve(oracle(loss, labels), method="cvxpy", **(solver_options or {}))
        X0 = sol.history.get("W", X)
        X, _ = _minimise_users(agg, X0)
    return X


def _minmax_flow(n, edges, weights, B, *, balance_tol=1e-8, scale=None):
    r"""``ρ = min max_e ‖u_e‖ / w_e`` s.t. ``Σ_{e=(i,·)} u_e − Σ_{e=(·,i)} u_e = B_i`` (every
    node), solved as an SOCP with Clarabel.

    Returns ``(ρ, u)``; ``ρ = inf`` (``u = None``) when a connected component of the edges
    has ``‖Σ B‖`` above ``balance_tol · scale`` (no flow exists). Otherwise each
    component's sum is projected out first (it is the residual of the problem that produced
    ``B``). The SOCP is solved for ``B / scale``, ``scale`` the size of the terms that ``B``
    balances (default ``1 + max ‖B_i‖``, for ``B`` in standard units; :func:`fusion_threshold`
    passes the gradients' size): Clarabel's tolerances are absolute.
    """
    B = np.array(B, dtype=float)
    if scale is None:
        scale = 1.0 + float(np.max(np.linalg.norm(B, axis=1), initial=0.0))
    rho, u = _minmax_flow_unit(n, edges, weights, B / scale, balance_tol)
    return rho * scale, (None if u is None else u * scale)


def _minmax_flow_unit(n, edges, weights, B, balance_tol):
    """:func:`_minmax_flow` for ``B`` of order 1 (Clarabel's tolerances are absolute)."""
    import clarabel

    d = B.shape[1]
    tol = balance_tol
    E = len(edges)
    if E == 0:
        return (0.0 if np.all(np.linalg.norm(B, axis=1) <= tol) else math.inf), np.zeros((0, d))
    edges = np.asarray(edges, dtype=np.int64)
    adj = sp.coo_matrix((np.ones(E), (edges[:, 0], edges[:, 1])), shape=(n, n))
    n_comp, comp = connected_components(adj, directed=False)
    sums = np.zeros((n_comp, d))
    np.add.at(sums, comp, B)
    if np.any(np.linalg.norm(sums, axis=1) > tol):
        return math.inf, None
    counts = np.bincount(comp, minlength=n_comp)
    B -= (sums / counts[:, None])[comp]
    keep = np.ones(n, bool)
    keep[np.unique(comp, return_index=True)[1]] = False  # one redundant node per component
    row_of = -np.ones(n, np.int64)
    row_of[keep] = np.arange(int(keep.sum()))
    nvar = 1 + E * d
    rows, cols, vals = [], [], []
    for sign, end in ((1.0, 0), (-1.0, 1)):
        node = edges[:, end]
        ok = keep[node]
        for c in range(d):
            rows.append(row_of[node[ok]] * d + c)
            cols.append(1 + np.flatnonzero(ok) * d + c)
            vals.append(np.full(int(ok.sum()), sign))
    m_eq = int(keep.sum()) * d
    b_eq = B[keep].ravel()
    # second-order cones: (w_e t, u_e) for every edge; Clarabel's form is A z + s = b
    base = m_eq + np.arange(E) * (d + 1)
    rows.append(base)
    cols.append(np.zeros(E, np.int64))
    vals.append(-np.asarray(weights, float))
    for c in range(d):
        rows.append(base + 1 + c)
        cols.append(1 + np.arange(E) * d + c)
        vals.append(-np.ones(E))
    A = sp.csc_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                      shape=(m_eq + E * (d + 1), nvar))
    b = np.concatenate([b_eq, np.zeros(E * (d + 1))])
    q = np.zeros(nvar)
    q[0] = 1.0
    P = sp.csc_matrix((nvar, nvar))
    cones = ([clarabel.ZeroConeT(m_eq)] if m_eq else []) + \
        [clarabel.SecondOrderConeT(d + 1)] * E
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    settings.tol_gap_abs = settings.tol_gap_rel = settings.tol_feas = 1e-11
    settings.max_iter = 200
    sol = clarabel.DefaultSolver(P, q, A, b, cones, settings).solve()
    status = str(sol.status)
    if "Solved" not in status:
        from .solvers import SolverError
        raise SolverError(f"min-max flow SOCP: Clarabel returned {status}")
    u = np.asarray(sol.x)[1:].reshape(E, d)
    return float(np.max(np.linalg.norm(u, axis=1) / np.asarray(weights, float))), u


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


def _pairwise_max(G) -> float:
    return float(pdist(G).max()) if len(G) > 1 else 0.0


def _newton_distinct(prob, W0, *, max_iter=60):
    r"""Minimise (SON) ``prob`` (here: (RED) on super-users) by damped Newton, keeping every
    pair of rows distinct: on that region the objective is smooth,

    .. math::

        ∇ = ∇f_k(w_k) + λ\sum_l W_{kl} \frac{w_k - w_l}{\|w_k - w_l\|}, \qquad
        ∇^2 \ni \frac{λ W_{kl}}{\|w_k - w_l\|}\Big(I - \hat r \hat r^\top\Big).

    Returns ``(W, kkt)`` with ``kkt = ‖∇‖ / (1 + ‖∇f(W)‖)`` when it is ``≤ 1e-11`` and
    the rows are distinct, else None. Very near a merge the curvature ``λW_kl/‖w_k − w_l‖``
    puts rounding above 1e-11; Newton then stalls, and W is accepted when ``kkt ≤ 1e-8``
    and ``‖∇‖ ≤ μ r_min/4`` (μ-strongly convex ``f``, closest rows ``r_min`` apart): the
    unique solution lies within ``‖∇‖/μ`` of W, so its rows are distinct too.
    """
    loss, graph = prob.loss, prob.graph
    K, d = W0.shape
    a, b = graph.edges[:, 0], graph.edges[:, 1]
    wts = prob.lam * graph.weights
    scale = 1.0 + float(np.abs(W0).max())

    def grad_hess(W):
        G = loss.grad(W)
        gf = float(np.linalg.norm(G))
        diff = W[a] - W[b]
        r = np.linalg.norm(diff, axis=1)
        if np.any(r <= 1e-12 * scale):
            return None
        r_min = float(r.min(initial=math.inf))
        unit = diff / r[:, None]
        np.add.at(G, a, wts[:, None] * unit)
        np.subtract.at(G, b, wts[:, None] * unit)
        Hf = np.zeros((K, K, d, d))
        for k in range(K):
            Hf[k, k] = loss.hessian(k, W[k])
        blocks = (wts / r)[:, None, None] * (np.eye(d) - unit[:, :, None] * unit[:, None, :])
        np.add.at(Hf, (a, a), blocks)
        np.add.at(Hf, (b, b), blocks)
        np.add.at(Hf, (a, b), -blocks)
        np.add.at(Hf, (b, a), -blocks)
        return G, Hf.transpose(0, 2, 1, 3).reshape(K * d, K * d), gf, r_min

    W = np.array(W0, dtype=float)
    f0 = prob.objective(W)
    mu = float(np.min(loss.strong_convexity))
    previous = math.inf
    for _ in range(max_iter):
        out = grad_hess(W)
        if out is None:
            return None
        G, H, gf, r_min = out
        gnorm = float(np.linalg.norm(G))
        kkt = gnorm / (1.0 + gf)
        stalled = kkt > 0.5 * previous and kkt <= 1e-8
        if kkt <= 1e-11 or (stalled and gnorm <= 0.25 * mu * r_min):
            return W, kkt
        previous = kkt
        try:
            step = -np.linalg.solve(H + 1e-14 * np.abs(H).max() * np.eye(K * d),
                                    G.ravel()).reshape(K, d)
        except np.linalg.LinAlgError:
            return None
        slope = float(np.sum(G * step))
        if not slope < 0:
            return None
        t = 1.0
        while t > 1e-10:
            Wn = W + t * step
            fn = prob.objective(Wn)
            if fn <= f0 + 1e-4 * t * slope + 1e-15 * abs(f0):
                break
            t *= 0.5
        else:
            return None
        W, f0 = Wn, fn
    return None


# ---------------------------------------------------------------------------------------------
# evaluation of a partition at λ: (RED), Theorem 1/2 quantities, the exact certificate
# ---------------------------------------------------------------------------------------------

def solve_red_with(prob, method, options):
    from .solvers import solve
    return solve(prob, method=method, **options)


def _kind(rec) -> str:
    """``"exact"`` when the (RED) solution behind a number is certified, and so is whether
    its centroids are distinct; else ``"estimate"``."""
    return "exact" if rec["red_converged"] and rec["distinct_certified"] else "estimate"


def _red_note(rec) -> str:
    if not rec["red_converged"]:
        return f" [estimate: the (RED) solution is not certified (KKT {rec['red_kkt']:.1e})]"
    if not rec["distinct_certified"]:
        return (" [estimate: two (RED) centroids are within the solver's fuse_tol "
                f"({rec['red_fuse_tol']:.1e}), and neither their distinctness nor their "
                "merge could be certified]")
    return ""


class _Probe:
    """Everything about a partition at a given λ, computed once per λ and cached.

    It works on the standard problem (:mod:`convexfl.units`) and answers in the user's
    units: :meth:`at` and :meth:`set_fusion` take λ in the user's (SON) units, and the
    records :meth:`at` returns hold λ, models, gradients and distances in them too.
    """

    def __init__(self, prob, partition, *, method="cvxpy", solver_options=None):
        self.units, prob = standardise(_check_son(prob))
        self.prob = prob
        self.loss, self.graph = prob.loss, prob.graph
        self.labels = check_partition(partition, prob.n_users)
        self.K = int(self.labels.max()) + 1
        self.sizes = np.bincount(self.labels)
        self.members = [np.flatnonzero(self.labels == k) for k in range(self.K)]
        self.red = Reduced(prob.loss, prob.graph, self.labels, 0.0)
        self.method, self.options = method, dict(solver_options or {})
        e = self.graph.edges
        a, b = self.labels[e[:, 0]], self.labels[e[:, 1]]
        within = a == b
        local = np.empty(prob.n_users, np.int64)
        for m in self.members:
            local[m] = np.arange(len(m))
        self.within = []
        for k in range(self.K):
            sel = within & (a == k)
            self.within.append((local[e[sel]], self.graph.weights[sel]))
        onehot = sp.csr_matrix((np.ones(prob.n_users), (np.arange(prob.n_users), self.labels)),
                               shape=(prob.n_users, self.K))
        self.node_w = np.asarray((self.graph.adjacency @ onehot).todense())  # (N, K)
        self._cache = {}
        self.n_solves = 0
        self.uncertain = []  # λ (user's units) where distinct vs merged was not certified

    def solve_red(self, lam):
        """(RED) at λ. An interior-point run that stops at 'optimal_inaccurate' is retried
        with a looser tolerance: the polish and the recomputed KKT certificate, not the
        interior-point tolerance, decide the accuracy (``converged`` is recorded)."""
        from .solvers import SolverError, solve
        self.n_solves += 1
        prob = self.red.inner.with_lam(lam)
        try:
            return solve(prob, method=self.method, **self.options)
        except SolverError:
            if self.method != "cvxpy":
                raise
            tol = self.options.get("tol", 1e-8)
            for loose in (tol * 10, tol * 100):
                try:
                    return solve(prob, method=self.method, **{**self.options, "tol": loose})
                except SolverError:
                    continue
            raise

    def at(self, lam, *, theorems=True, flows=True) -> dict:
        """The record at λ (user's units)."""
        return self._in_user_units(self._at(float(lam) / self.units.grad, theorems, flows))

    def _in_user_units(self, rec) -> dict:
        u = self.units
        per = {"lam": u.grad, "thm1_per_cluster": u.grad, "thm1": u.grad, "thm2": u.grad,
               "rho": u.grad, "G": u.grad, "balance_residual": u.grad,
               "min_centroid_distance": u.scale, "red_fuse_tol": u.scale}
        out = {k: v * per[k] if k in per else v for k, v in rec.items()}
        out["W"] = u.x_from(rec["W"])
        return out

    def _at(self, lam, theorems=True, flows=True) -> dict:
        """The record at λ in standard units (cached)."""
        rec = self._cache.get(lam)
        if rec is None:
            rec = self._fused(lam) or self._warm(lam) or self._cold(lam)
            W = rec["W"]
            dist = pdist(W) if self.K > 1 else np.zeros(0)
            rec["lam"] = lam
            rec["min_centroid_distance"] = float(dist.min()) if dist.size else math.inf
            rec["G"] = self.loss.grad(W[self.labels])
            rec["caveat"] = uniqueness_caveat(self.loss, W[self.labels])  # Remark 1
            self._cache[lam] = rec
        if theorems and "thm1" not in rec:
            self._theorems(rec)
        if flows and "rho" not in rec:
            self._flows(rec)
        return rec

    def set_fusion(self, lam_hat, y_star):
        """Record the exact fusion threshold: for λ ≥ λ̂ the (SON) solution is fused at the
        global model ``y*``, hence so is the (RED) solution (no solve needed)."""
        self.lam_hat = float(lam_hat) / self.units.grad
        self.y_star = self.units.x_to(np.asarray(y_star, float))

    def _fused(self, lam):
        if getattr(self, "lam_hat", None) is None or not lam >= self.lam_hat \
                or self.y_star.ndim != 1:
            return None
        return {"W": np.tile(self.y_star, (self.K, 1)), "red_converged": True,
                "red_kkt": 0.0, "red_fuse_tol": 0.0, "distinct": self.K == 1,
                "distinct_certified": True, "red_method": "fused (λ ≥ λ̂)"}

    def _cold(self, lam):
        sol = self.solve_red(lam)
        if not sol.converged and self.method == "cvxpy":
            # one tighter retry: near a merge the default tolerance may leave two centroids
            # apart that should coincide (or the reverse); the certificate decides
            tight = dict(self.options, tol=min(self.options.get("tol", 1e-8), 1e-10))
            try:
                again = solve_red_with(self.red.inner.with_lam(lam), self.method, tight)
                if again.kkt_residual < sol.kkt_residual:
                    sol = again
            except Exception:  # noqa: BLE001 - keep the first solution, flagged unconverged
                pass
        rec = {"W": np.asarray(sol.X), "red_converged": bool(sol.converged),
               "red_kkt": float(sol.kkt_residual), "red_fuse_tol": float(sol.fuse_tol),
               "distinct": bool(int(sol.labels().max()) + 1 == self.K),
               "distinct_certified": True, "red_method": sol.method}
        return rec if rec["distinct"] else self._settle_merge(lam, rec)

    def _settle_merge(self, lam, rec):
        """The solver fused centroids closer than its ``fuse_tol``: that is no proof. Near
        a merge they are apart by less than that on a λ-range of relative width ~1e-5, so
        certify one side: Newton from the solver's centroids (or from ADMM's, whose fusions
        are exact) reaching distinct ones (the unique solution), or the merged partition's
        exact certificate (:meth:`_merged`).
        Neither: the record says ``distinct_certified = False``."""
        from .solvers import SolverError, solve

        inner = self.red.inner.with_lam(lam)
        starts = [(rec["red_method"], rec["W"])]
        try:  # exact fusions and a far smaller fuse_tol than an interior point's
            starts.append(("admm", solve(inner, method="admm", tol=1e-10).X))
        except SolverError:
            pass
        for name, W0 in starts:
            out = _newton_distinct(inner, W0)
            if out is not None:
                return {"W": out[0], "red_converged": True, "red_kkt": out[1],
                        "red_fuse_tol": 0.0, "distinct": True, "distinct_certified": True,
                        "red_method": f"newton from {name} (centroids apart)"}
        merged = self._merged(lam, rec["W"])
        if merged is not None:
            return merged
        self.uncertain.append(lam * self.units.grad)
        return {**rec, "distinct_certified": False}

    def _warm(self, lam):
        """(RED) by Newton from the nearest cached solution with distinct centroids.

        While the centroids are distinct (RED) is smooth and strictly convex (strictly convex
        f_i), so a point with a vanishing gradient and distinct centroids is its unique
        solution: the distinctness is then certified. When Newton does not reach such a point
        the centroids may have merged: :meth:`_merged` tries to certify that, else None (the
        caller falls back to the solver)."""
        near = [r for r in self._cache.values() if r["distinct"] and r["lam"] > 0]
        if not near or lam <= 0:
            return None
        ref = min(near, key=lambda r: abs(math.log(r["lam"] / lam)))
        out = _newton_distinct(self.red.inner.with_lam(lam), ref["W"])
        if out is None:
            return self._merged(lam, ref["W"])
        W, kkt = out
        return {"W": W, "red_converged": True, "red_kkt": kkt, "red_fuse_tol": 0.0,
                "distinct": True, "distinct_certified": True,
                "red_method": "newton (warm start)"}

    def _merged(self, lam, Wref):
        """Certify that (RED) merges the closest centroids of ``Wref`` at λ: the merged
        partition of the super-users is checked with the exact certificate on (RED) itself
        (Newton on the coarser (RED), flow SOCP inside each merged group). Returns the
        record, or None when the candidate is not certified."""
        if self.K < 2:
            return None
        D = cdist(Wref, Wref)
        np.fill_diagonal(D, math.inf)
        groups = connected_components(sp.csr_matrix(D <= 2.0 * D.min()), directed=False)[1]
        groups = check_partition(groups, self.K)
        if int(groups.max()) + 1 == self.K:
            return None
        sub = _Probe(self.red.inner, groups)
        W0 = np.zeros((sub.K, Wref.shape[1]))
        np.add.at(W0, groups, Wref)
        W0 /= sub.sizes[:, None]
        out = _newton_distinct(sub.red.inner.with_lam(lam), W0)
        if out is None:
            return None
        rec = {"lam": lam, "W": out[0], "distinct": True}
        rec["G"] = sub.loss.grad(out[0][sub.labels])
        sub._flows(rec)
        if not rec["recovered"]:
            return None
        return {"W": out[0][groups], "red_converged": True, "red_kkt": out[1],
                "red_fuse_tol": 0.0, "distinct": False, "distinct_certified": True,
                "red_method": "newton + certificate of the merged (RED) partition"}

    def _theorems(self, rec):
        G, W = rec["G"], rec["W"]
        rec["thm1_per_cluster"] = np.array([_pairwise_max(G[m]) / len(m) for m in self.members])
        rec["thm1"] = float(rec["thm1_per_cluster"].max())
        if self.K < 2:
            rec["thm2"] = math.inf
            return
        denom = 2.0 * float(np.max(self.prob.n_users - self.sizes))
        best = math.inf
        for k in range(self.K):
            Gk = _common_grads(self.loss, W[k])
            means = np.zeros((self.K, self.loss.dim))
            np.add.at(means, self.labels, Gk)
            means /= self.sizes[:, None]
            diff = np.linalg.norm(means - means[k], axis=1)
            diff[k] = math.inf
            best = min(best, float(diff.min()))
        rec["thm2"] = best / denom

    def _flows(self, rec):
        lam, W, G = rec["lam"], rec["W"], rec["G"]
        K = self.K
        rho = np.full(K, math.nan)
        if K > 1:
            diff = W[:, None, :] - W[None, :, :]
            nrm = np.linalg.norm(diff, axis=2)
            with np.errstate(invalid="ignore", divide="ignore"):
                R = np.where(nrm[..., None] > 0, diff / nrm[..., None], 0.0)
            cross = self.node_w.copy()
            cross[np.arange(len(self.labels)), self.labels] = 0.0
            # clusters whose (adjacent) neighbour centroids coincide have no r_kl
            touching = [np.any((cross[m].sum(axis=0) > 0) & (nrm[k] == 0) &
                               (np.arange(K) != k)) for k, m in enumerate(self.members)]
            B = -G - lam * np.einsum("il,ild->id", cross, R[self.labels])
        else:
            touching = [False]
            B = -G
        balance = 0.0
        for k, m in enumerate(self.members):
            balance = max(balance, float(np.linalg.norm(B[m].sum(axis=0))))
            if touching[k]:
                continue
            edges, w = self.within[k]
            rho[k], _ = _minmax_flow(len(m), edges, w, B[m])
        rec["rho"] = rho
        rec["balance_residual"] = balance
        tol = 1e-9 * (1.0 + lam)
        rec["flows_ok"] = bool(np.all(rho <= lam + tol))
        rec["recovered"] = rec["flows_ok"] and rec["distinct"]

    def certified_bracket(self, lam) -> list[float]:
        """``[a, b]`` (user's units): the largest λ ≤ ``lam`` where the centroids were
        certified distinct and the smallest λ ≥ ``lam`` where their merge was certified."""
        g = self.units.grad
        done = [(key * g, r["distinct"]) for key, r in self._cache.items()
                if r["distinct_certified"]]
        below = [x for x, apart in done if apart and x <= lam]
        above = [x for x, apart in done if not apart and x >= lam]
        return [max(below, default=0.0), min(above, default=math.inf)]

    def recovered(self, lam) -> bool:
        return self.at(lam, theorems=False)["recovered"]

    def distinct(self, lam) -> bool:
        return self.at(lam, theorems=False, flows=False)["distinct"]

    def flows_ok(self, lam) -> bool:
        return self.at(lam, theorems=False)["flows_ok"]

    def theorem1_holds(self, lam) -> bool:
        return self.at(lam, flows=False)["thm1"] <= lam * (1 + 1e-12)

    def theorem2_holds(self, lam) -> bool:
        return lam < self.at(lam, flows=False)["thm2"]


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
# the conservative bounds (23)/(24)
# ---------------------------------------------------------------------------------------------

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

    Returns
    -------
    Bound
        The interval ``[λ̲, λ̄)`` (``lo > hi``: empty), with ``inputs`` holding ``Δ``, the
        per-cluster quantities and the enclosures.
    """
    _require_complete_uniform(prob, "the conservative bounds (23)/(24)")
    if how not in ("auto", "certified", "estimate"):
        raise ValueError(f"how: expected 'auto', 'certified' or 'estimate', got {how!r}")
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
                    from .solvers import SolverError
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


# ---------------------------------------------------------------------------------------------
# the fusion threshold λ̂
# ---------------------------------------------------------------------------------------------

def fusion_threshold(prob: SumOfNorms, *, method: str = "cvxpy", solver_options=None) -> Bound:
    r"""The exact fusion threshold λ̂: all ``x_i`` coincide iff ``λ ≥ λ̂``.

    With ``y*`` the global model and ``g_i = ∇f_i(y*)`` (``Σ_i g_i = 0``), the fused ``X``
    solves (KKT) iff a flow with capacities ``λ w_ij`` routes ``−g``:

    .. math::

        \hat λ = \min\{λ : ∃ u \text{ antisymmetric on } E,\ \|u_{ij}\| ≤ λ w_{ij},\
                 \textstyle\sum_j u_{ij} = -g_i\ ∀ i\},

    a min-max flow SOCP (solved with Clarabel to 1e-11). Works for any loss and graph; if
    ``Σ f_i`` has several minimisers, this is the threshold for the computed ``y*``.

    Returns
    -------
    Bound
        ``.value = λ̂``, kind ``"exact"``; ``related["lower"]``/``related["upper"]`` are
        closed-form certified bounds: ``max_i ‖g_i‖ / deg_i ≤ λ̂`` (``= max‖g_i‖/(N−1)`` on
        the complete uniform graph) and ``λ̂ ≤ max_{i,j} ‖g_i − g_j‖ / N`` on the complete
        uniform graph (``u_ij = (g_j − g_i)/N`` is feasible), else the same bound from the
        least-squares (potential) flow. A disconnected graph gives ``λ̂ = inf`` (models in
        different components never coincide, generically) with ``inputs["per_component"]``:
        the λ above which every component is fused. ``inputs["_flow"]`` is the optimal flow
        (E, d): with ``u_e`` it certifies the fused solution at any λ ≥ λ̂
        (:func:`convexfl.certificates.kkt_residual` accepts it as ``flows``).
    """
    _check_son(prob)
    loss, graph = prob.loss, prob.graph
    n = prob.n_users
    comp = graph.component_labels if graph.n_edges else np.arange(n)
    comp = check_partition(comp, n)
    Y = _minimisers(loss, comp, method, solver_options)  # one global model per component
    G = loss.grad(Y[comp])
    sums = np.zeros((int(comp.max()) + 1, prob.dim))
    np.add.at(sums, comp, G)
    balance = float(np.linalg.norm(sums, axis=1).max())
    gscale = float(np.max(np.linalg.norm(G, axis=1), initial=0.0))
    rho, u = _minmax_flow(n, graph.edges, graph.weights, G * -1.0, balance_tol=1e-6,
                          scale=gscale if gscale > 0 else 1.0)
    # the flow routes −g: node balance Σ_e(±u_e) = −g_i
    deg = graph.degree
    gn = np.linalg.norm(G, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        low = float(np.max(np.where(deg > 0, gn / np.where(deg > 0, deg, 1), 0.0)))
    if graph.is_complete_uniform:
        up = _pairwise_max(G) / n
        up_note = "max_{i,j} ‖g_i − g_j‖ / N (the flow (g_j − g_i)/N)"
    else:
        from .certificates import _potential_solver
        # the least-squares flow with g + B u = mean(g) = 0 on each component
        flow = _potential_solver(n, graph.edges, graph.weights)(G) if graph.n_edges else None
        up = (float(np.max(np.linalg.norm(flow, axis=1) / graph.weights)) if graph.n_edges
              else math.inf)
        up_note = "max_e ‖u_e‖/w_e of the least-squares (potential) flow"
    inputs = {"y_star": Y[0] if graph.is_connected else Y, "grad_norms": gn,
              "balance_residual": balance, "n_components": graph.n_components,
              "graph": graph.kind, "_flow": u}
    if not graph.is_connected:
        inputs["per_component"] = rho
        return Bound("fusion_threshold", "exact", math.inf, math.inf, inputs=inputs,
                     note=f"the graph has {graph.n_components} connected components: models "
                          "in different components never coincide (unless the components' "
                          "global models happen to be equal); every component is fused for "
                          f"λ ≥ {rho:.6g} (inputs['per_component'])",
                     related={"lower": Bound("fusion_lower", "certified bound", low, low),
                              "upper": Bound("fusion_upper", "certified bound", up, up)})
    related = {
        "lower": Bound("fusion_threshold_lower", "certified bound", low, low,
                       note="max_i ‖g_i‖ / deg_i (each user's flow capacity)"),
        "upper": Bound("fusion_threshold_upper", "certified bound", up, up, note=up_note)}
    return Bound("fusion_threshold", "exact", rho, rho, inputs=inputs,
                 note="min-max flow SOCP at the global model (docs/math.md §1.4); all models "
                      "coincide iff λ ≥ value", related=related)


# ---------------------------------------------------------------------------------------------
# the exact partition certificate and the exact recovery interval
# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PartitionCertificate(Bound):
    """The exact certificate of a partition at λ (a :class:`Bound` whose ``.value`` is
    ``max_k ρ_k(λ)``).

    Attributes
    ----------
    lam : float
        λ (SON convention).
    rho : ndarray (K,)
        ``ρ_k(λ)``, the least max flow-to-capacity ratio inside cluster ``k``
        (``nan`` where a neighbouring centroid coincides, ``inf`` where no flow exists).
    distinct : bool
        The (RED) centroids are pairwise distinct.
    recovered : bool
        ``distinct`` and ``ρ_k(λ) ≤ λ`` for every k: the clustered (RED) solution solves
        (SON) with exactly this partition (the unique solution for strictly convex f_i).
    W : ndarray (K, d)
        The (RED) solution ``w*(λ)``.
    """

    lam: float = math.nan
    rho: np.ndarray = None
    distinct: bool = False
    recovered: bool = False
    W: np.ndarray = None

    def __repr__(self) -> str:
        return (f"PartitionCertificate(λ={self.lam:.6g}, recovered={self.recovered}, "
                f"distinct={self.distinct}, max ρ_k={self.lo:.6g}, kind={self.kind})")


def partition_certificate(prob: SumOfNorms, partition, lam: float | None = None, *,
                          method: str = "cvxpy", solver_options=None,
                          _probe=None) -> PartitionCertificate:
    r"""The exact partition certificate (docs/math.md §1.4) of ``partition`` at λ, any graph.

    With ``w*(λ)`` solving (RED) and the ``w_k*`` pairwise distinct, ``X = clustered(w*)``
    solves (SON) **iff** for every cluster the within-cluster flow problem

    .. math::

        ρ_k(λ) = \min \max_{(i,j)∈E_k} \frac{\|u_{ij}\|}{w_{ij}} \ \text{s.t.}\
        \sum_{j∈C_k} u_{ij} = -∇f_i(w_k^*) - λ \sum_{l≠k}\sum_{j∈C_l} w_{ij} r_{kl}
        \quad (i∈C_k)

    has ``ρ_k(λ) ≤ λ`` (``r_kl = (w_k* − w_l*)/‖w_k* − w_l*‖``). Each ρ_k is a small SOCP
    (Clarabel). When the clustered solution is the only one — every ``f_i`` strictly convex
    near it (:meth:`convexfl.losses.Loss.strictly_convex_at`; Remark 1) — this decides exact
    recovery of the partition; otherwise another solution may have another partition.

    Returns
    -------
    PartitionCertificate
        kind ``"exact"`` when the (RED) solution is certified (``inputs["red_kkt_residual"]``)
        and the (SON) solution unique, else ``"estimate"`` with the reason in the note.
    """
    probe = _probe or _Probe(prob, partition, method=method, solver_options=solver_options)
    lam = _lam_arg(prob, lam)
    rec = probe.at(lam, theorems=False)
    reasons = []
    if not rec["distinct"]:
        reasons.append("two (RED) centroids coincide (the partition is coarsened)")
    bad = np.flatnonzero(~(rec["rho"] <= lam + 1e-9 * (1 + lam)))
    if len(bad):
        reasons.append("ρ_k(λ) > λ for clusters " + ", ".join(map(str, bad.tolist())) +
                       " (they split)")
    rho_max = float(np.nanmax(rec["rho"])) if np.any(~np.isnan(rec["rho"])) else math.nan
    return PartitionCertificate(
        "partition_certificate", "estimate" if rec["caveat"] else _kind(rec), rho_max, rho_max,
        inputs={"lam": lam, "rho": rec["rho"], "margins": lam - rec["rho"],
                "distinct": rec["distinct"], "recovered": rec["recovered"],
                "min_centroid_distance": rec["min_centroid_distance"],
                "red_kkt_residual": rec["red_kkt"], "red_fuse_tol": rec["red_fuse_tol"],
                "balance_residual": rec["balance_residual"], "sizes": probe.sizes,
                "reasons": reasons},
        note=("recovered" if rec["recovered"] else "not recovered: " + "; ".join(reasons))
        + _red_note(rec) + (f" [estimate: {rec['caveat']}]" if rec["caveat"] else ""),
        lam=lam, rho=rec["rho"], distinct=rec["distinct"],
        recovered=rec["recovered"], W=rec["W"])


def _default_grid(prob, n_grid, lam_hat=None):
    n_grid = as_int(n_grid, "n_grid", low=3)
    if lam_hat is None:
        fb = fusion_threshold(prob)
        lam_hat = fb.value if np.isfinite(fb.value) else fb.inputs["per_component"]
    if not lam_hat > 0:
        return np.array([0.0])
    return np.geomspace(lam_hat * 1e-4, lam_hat, n_grid)


def _bisect(pred, a, b, rtol, *, a_true):
    """Shrink ``[a, b]`` (``pred(a) == a_true``, ``pred(b) != a_true``) to ``b − a ≤ rtol b``;
    return ``(a, b, evaluations)``. Geometric midpoints when ``a > 0``."""
    n = 0
    if a <= 0:
        for _ in range(60):
            m = b / 4.0
            n += 1
            if pred(m) == a_true:
                a = m
                break
            b = m
        else:
            return 0.0, b, n
    for _ in range(200):
        if b - a <= rtol * b:
            break
        m = math.sqrt(a * b)
        if not a < m < b:
            m = 0.5 * (a + b)
        n += 1
        if pred(m) == a_true:
            a = m
        else:
            b = m
    return a, b, n


def _two_sided(p_low, p_up, grid, rtol):
    r"""Locate ``{λ : p_low(λ) and p_up(λ)}`` assuming ``p_up`` holds on ``[0, hi)`` only and
    ``p_low`` on ``[lo, ∞)`` only (within ``[0, hi)``), so that the set is ``[lo, hi)``.

    ``p_up`` is evaluated on the grid and its switch refined by bisection; then ``p_low`` on
    the grid points below ``hi`` (and just below ``hi`` when none holds), its switch refined
    by bisection. Works for intervals narrower than the grid spacing. Returns
    ``(lo, hi, info)`` with ``lo ≥ hi`` meaning empty, and ``info["violations"]`` listing
    grid points that contradict the assumption.
    """
    grid = np.asarray(grid, float)
    up = np.array([bool(p_up(x)) for x in grid])
    n_eval = len(grid)
    violations = []
    if up.all():
        i_hi, hi_a, hi = len(grid), float(grid[-1]), math.inf
    else:
        i_hi = int(np.argmin(up))           # first grid point where p_up fails
        if np.any(up[i_hi:]):
            violations.append("the upper condition holds again above its first failure at "
                              f"λ = {grid[i_hi]:.6g}")
        if i_hi == 0:
            if not p_up(0.0):
                return math.inf, -math.inf, {"grid": grid, "n_evaluations": n_eval + 1,
                                             "violations": violations,
                                             "reason": "the upper condition fails at λ = 0"}
            hi_a, hi, k = _bisect(p_up, 0.0, float(grid[0]), rtol, a_true=True)
        else:
            hi_a, hi, k = _bisect(p_up, float(grid[i_hi - 1]), float(grid[i_hi]), rtol,
                                  a_true=True)
        n_eval += k + 1
    below = grid[:i_hi]
    low = np.array([bool(p_low(x)) for x in below])
    n_eval += len(below)
    info = {"grid": grid, "upper_on_grid": up, "lower_on_grid": low,
            "hi_bracket": [hi_a, hi]}
    if low.any():
        j = int(np.argmax(low))
        if not np.all(low[j:]):
            violations.append("the lower condition fails again above its first success at "
                              f"λ = {below[j]:.6g}")
        a_, b_ = (float(below[j - 1]) if j > 0 else 0.0), float(below[j])
    else:
        top = hi_a if np.isfinite(hi_a) else float(grid[-1])
        n_eval += 1
        if top <= 0 or not p_low(top):
            info.update(n_evaluations=n_eval, violations=violations,
                        reason="the lower condition fails everywhere below hi")
            return math.inf, -math.inf, info
        a_, b_ = (float(below[-1]) if len(below) and below[-1] < top else 0.0), top
    if a_ == 0.0 and p_low(0.0):
        lo, lo_a = 0.0, 0.0
    else:
        lo_a, lo, k = _bisect(lambda x: not p_low(x), a_, b_, rtol, a_true=True)
        n_eval += k
    info.update(lo_bracket=[lo_a, lo], n_evaluations=n_eval, violations=violations)
    return lo, hi, info


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
