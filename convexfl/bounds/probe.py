r"""A partition at λ: the (RED) solution ``w*(λ)`` with its distinctness certified, the
quantities of Theorems 1 and 2 at it, and the exact certificate's within-cluster flows
``ρ_k(λ)``, computed once per λ and cached (:class:`_Probe`).

While the centroids are distinct (RED) is smooth, so damped Newton from a nearby solution
(:func:`_newton_distinct`) certifies the unique solution; a merge is certified on (RED)
itself; the solver is the fallback.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components
from scipy.spatial.distance import cdist, pdist

from .._validation import check_partition
from ..losses import uniqueness_caveat
from ..problems import Reduced
from ..units import standardise
from ._base import _check_son, _common_grads, _pairwise_max
from .fusion import _minmax_flow


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
    from ..solvers import solve
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
        from ..solvers import SolverError, solve
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
        from ..solvers import SolverError, solve

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
