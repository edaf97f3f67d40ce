r"""Network-lasso ADMM (Hallac, Leskovec & Boyd, KDD 2015) for (SON).

.. math::

    \min_X \sum_i f_i(x_i) + λ \sum_{(i,j)∈E} w_{ij}\|x_i - x_j\|
    \quad\text{as}\quad
    \min \sum_i f_i(x_i) + λ\sum_e w_e\|z_{ie} - z_{je}\|
    \ \text{ s.t. } x_i = z_{ie},\ x_j = z_{je}\ \ (e = (i,j)),

λ in the canonical (SON) convention. Every edge keeps copies ``z_ie``, ``z_je`` and scaled
duals ``u_ie``, ``u_je``; per iteration each user solves its local proximal problem
(closed form for the quadratic loss, safeguarded Newton — :func:`convexfl._kernels.user_prox`
— otherwise), each edge a closed-form block soft-threshold, and the duals move by the
residuals. Over-relaxation (``alpha``) and residual-balancing ``ρ`` (Boyd et al. 2011, §3.4.1)
are on by default. Memory is O(N·d + E·d).

**Stopping on the certificate.** Iterate changes are only used to decide *when* to check: the
solver stops when a candidate built from its exactly fused edges (block soft-thresholding
gives exact zeros) passes :func:`convexfl.certificates.kkt_residual` below ``tol``. The
certificate gets the ADMM flows ``u_e = ρ (u_ie − u_je)/2`` (→ ``λ w_e s_e`` at convergence)
as its starting point. With ``polish=True`` (default) a candidate that does not yet pass is
refined by Newton's method on the reduced problem of its partition (exact once the partition
is right), see :mod:`convexfl.solvers._common`.

Warm starts: ``X0`` and ``flows0`` (e.g. ``warm_start=`` a previous :class:`Solution` of any
method, whose flows are moved to the new λ, see :mod:`convexfl.solvers._common`); the copies
start at ``z = x`` and the scaled duals at ``±flows/ρ`` — a fixed point when the warm start
is optimal. The warm start's partition is re-optimised and certified before any iteration.
"""

from __future__ import annotations

import numpy as np

from .._validation import as_int, as_scalar
from ..problems import Reduced
from ._admm_kernels import admm_run
from ._common import COARSEN_MIN, Run, check_bool, cluster_means, son_dispatch, user_minimisers
from ._common_kernels import gradient_residual

__all__ = ["solve_admm", "reduced_merges"]


def _node_incidence(n, edges):
    """CSR node → (edge, side) lists."""
    m = edges.shape[0]
    nodes = np.r_[edges[:, 0], edges[:, 1]]
    eidx = np.r_[np.arange(m), np.arange(m)]
    side = np.r_[np.zeros(m, np.int64), np.ones(m, np.int64)]
    order = np.argsort(nodes, kind="stable")
    nptr = np.concatenate([[0], np.cumsum(np.bincount(nodes, minlength=n))]).astype(np.int64)
    return nptr, eidx[order].astype(np.int64), side[order]


def solve_admm(prob, *, tol: float = 1e-6, max_iter: int = 20000, rho: float | None = None,
               alpha: float = 1.6, adaptive_rho: bool = True, mu: float = 10.0,
               tau_incr: float = 2.0, polish: bool = True, check_every: int = 10,
               X0=None, flows0=None, warm_start=None, newton_tol: float = 1e-10,
               newton_max_iter: int = 30, record_objective: bool = False,
               coarsen: bool | None = None):
    """Solve (SON) by the network-lasso ADMM.

    Parameters
    ----------
    prob : SumOfNorms or Reduced
    tol, max_iter : float, int
        The certified KKT target and the limit on ADMM iterations, as for every
        method (:mod:`convexfl.solvers`).
    rho : float, optional
        Initial penalty ρ > 0 (each user's local problem has weight ``ρ · deg_i``). Default:
        four times the scale of the edge flows over the scale of the edge differences at
        the start, ``4 mean_e(λ w_e) / mean_e ‖x_i − x_j‖`` (clipped to [1e-6, 1e6]).
        Measured: quadratic complete N = 400, 20 iterations (80 from ρ = 1); logistic
        complete N = 200, 30 iterations (100 from ρ = 1).
    alpha : float
        Over-relaxation, ``0 < alpha < 2`` (1 = none).
    adaptive_rho : bool
        Residual balancing: ρ ×/÷ ``tau_incr`` when the primal and dual residuals differ by
        more than ``mu`` (scaled duals rescaled accordingly); frozen after half of
        ``max_iter`` so that the iteration converges.
    mu, tau_incr : float
        Residual-balancing parameters (> 1).
    polish : bool or "small"
        Refine candidates by Newton on the reduced problem before certifying; ``"small"``:
        only reduced problems with ``K·d ≤ 300`` (cheap: no final polish of a large
        partition, no coarsening), as in the first stage of ``method="auto"``.
    check_every : int
        Iterations per compiled chunk (residuals and ρ are looked at between chunks).
    X0, flows0, warm_start
        Warm start: models (N, d), edge flows (E, d), or a previous ``Solution``.
    newton_tol, newton_max_iter
        Local Newton solves (ignored for the quadratic loss: closed form).
    record_objective : bool
        Also record the objective at each check (costs one objective evaluation).
    coarsen : bool, optional
        Coarsening attempts (:meth:`~convexfl.solvers._common.Certifier.coarsen`): each time
        the exactly fused partition has halved its number of clusters, solve its reduced
        problem for its merges and certify (at most a quarter of the run's time). Default: on
        from ``N ≥ 2000`` users (needs ``polish``).

    Returns
    -------
    Solution
        ``history`` holds per check: ``iter``, ``r`` and ``s`` (relative primal and dual
        residuals), ``rho``, ``kkt_proxy`` (stationarity of the ADMM flows), and the
        certificate attempts.
    """
    opts = dict(tol=tol, max_iter=max_iter, rho=rho, alpha=alpha, adaptive_rho=adaptive_rho,
                mu=mu, tau_incr=tau_incr, polish=polish, check_every=check_every, X0=X0,
                flows0=flows0, warm_start=warm_start, newton_tol=newton_tol,
                newton_max_iter=newton_max_iter, record_objective=record_objective,
                coarsen=coarsen, merges=reduced_merges)
    return son_dispatch(prob, "admm", _solve_son, opts)


def reduced_merges(prob, labels, W, max_size=None):
    """The merges of the partition ``labels`` of (SON) ``prob`` at its λ: the reduced
    problem (K super-users, ``K·d ≤ max_size`` when given) solved by ADMM to ``1e-9``,
    its certificates polished by Newton only (no merges inside).

    The solution of (SON) lies in the subspace of every coarser partition, so where a
    candidate only lacks merges this is the exact partition. Newton alone
    (:func:`convexfl.solvers._common.polish`) approaches each merge at a kink, where it
    converges only linearly and can merge two centroids that end up close but apart.
    Every :class:`~convexfl.solvers._common.Certifier` of a fast solver is given this solve.

    Returns
    -------
    (labels, W) : the merged partition and its cluster means, or ``(None, None)`` when
    there is nothing to merge (one cluster, or none fused), the problem is too large or the
    inner solve fails.
    """
    k = int(labels.max()) + 1
    too_big = max_size is not None and k * prob.dim > max_size
    if k == 1 or k == prob.n_users or too_big:
        return None, None
    red = Reduced(prob.loss, prob.graph, labels, prob.lam)
    opts = dict(solve_admm.__kwdefaults__, tol=1e-9, max_iter=5000, merges=None)
    inner = _solve_son(red.inner, **opts)
    if not np.all(np.isfinite(inner.X)):
        return None, None
    merged = inner.labels()[red.labels]
    return merged, cluster_means(inner.X[red.labels], merged)


def _solve_son(prob, *, tol, max_iter, rho, alpha, adaptive_rho, mu, tau_incr, polish,
               check_every, X0, flows0, warm_start, newton_tol, newton_max_iter,
               record_objective, coarsen, merges):
    run = Run(prob, "admm", merges=merges, tol=tol, max_iter=max_iter, polish=polish, X0=X0,
              flows0=flows0, warm_start=warm_start)
    if rho is not None:
        rho = as_scalar(rho, "rho", low=0.0, low_inclusive=False)
    alpha = as_scalar(alpha, "alpha", low=0.0, low_inclusive=False)
    if alpha >= 2.0:
        raise ValueError(f"alpha: over-relaxation must be in (0, 2), got {alpha}")
    adaptive_rho = check_bool(adaptive_rho, "adaptive_rho")
    mu = as_scalar(mu, "mu", low=1.0, low_inclusive=False)
    tau_incr = as_scalar(tau_incr, "tau_incr", low=1.0, low_inclusive=False)
    check_every = as_int(check_every, "check_every", low=1)
    newton_tol = as_scalar(newton_tol, "newton_tol", low=0.0, low_inclusive=False)
    newton_max_iter = as_int(newton_max_iter, "newton_max_iter", low=1)
    record_objective = check_bool(record_objective, "record_objective")
    coarsen = (prob.n_users >= COARSEN_MIN if coarsen is None
               else check_bool(coarsen, "coarsen"))
    done = run.closed_form() or run.warm_partition()
    if done is not None:
        return done

    tol, max_iter, X0, flows0 = run.tol, run.max_iter, run.X0, run.flows0
    loss, graph = prob.loss, prob.graph
    d = prob.dim
    edges = graph.edges
    cap = prob.lam * graph.weights
    nptr, nedge, nside = _node_incidence(prob.n_users, edges)
    arrays = loss.arrays
    if X0 is None:
        X = user_minimisers(loss)  # start at the local models
    else:
        X = np.array(X0, dtype=float)
        iso = np.diff(nptr) == 0
        if np.any(iso):
            X[iso] = user_minimisers(loss, X)[iso]
    if rho is None:
        spread = float(graph.distances(X).mean())
        rho = float(np.clip(4.0 * cap.mean() / max(spread, 1e-12), 1e-6, 1e6))
    Zi = np.ascontiguousarray(X[edges[:, 0]])
    Zj = np.ascontiguousarray(X[edges[:, 1]])
    if flows0 is not None:
        Ui = np.ascontiguousarray(flows0 / rho)
        Uj = -Ui
    else:
        Ui = np.zeros((graph.n_edges, d))
        Uj = np.zeros((graph.n_edges, d))
    fused = np.zeros(graph.n_edges, np.uint8)
    hist = {"iter": [], "r": [], "s": [], "rho": [], "kkt_proxy": [], "certify_at": [],
            "certified_kkt": []}
    if record_objective:
        hist["objective"] = []
    warm = X0 is not None and flows0 is not None
    trigger = max(1e-2, tol)
    next_cert = 1 if warm else 0
    gap = 2 * check_every
    it = 0
    converged = False
    stage = "iterations"
    message = ""
    newton_ok_all = True
    freeze_at = max_iter // 2
    while it < max_iter:
        steps = 1 if (warm and it == 0) else min(check_every, max_iter - it)
        r, s, xn, zn, un, nok = admm_run(steps, *arrays, edges, cap, nptr, nedge, nside, X,
                                          Zi, Zj, Ui, Uj, fused, rho, alpha, newton_tol,
                                          newton_max_iter)
        newton_ok_all = newton_ok_all and nok
        it += steps
        r_rel = r / max(xn, zn, 1e-300)
        s_rel = s / max(un, 1e-300)
        flows = 0.5 * rho * (Ui - Uj)
        gres, gnorm = gradient_residual(arrays[0], *arrays[1:6], arrays[7], X, edges, flows)
        proxy = gres / (1.0 + gnorm)
        hist["iter"].append(it)
        hist["r"].append(r_rel)
        hist["s"].append(s_rel)
        hist["rho"].append(rho)
        hist["kkt_proxy"].append(proxy)
        if record_objective:
            hist["objective"].append(prob.objective(X))
        if not (np.isfinite(r) and np.isfinite(s)):
            message = "diverged (non-finite iterates)"
            break
        if (it >= next_cert and max(r_rel, s_rel, proxy) <= trigger) \
                or run.certifier.untried(fused.astype(bool), stable=True):
            if run.certify(hist, it, fused.astype(bool), X, flows):
                converged = True
                break
            trigger = min(trigger, max(r_rel, s_rel, proxy)) / 10.0
            next_cert = it + gap
            gap = min(2 * gap, 2000)
        if coarsen and run.coarsen(hist, it, fused.astype(bool), X, flows):
            converged, stage = True, "coarsening"
            break
        if adaptive_rho and it < freeze_at:
            if r_rel > mu * s_rel:
                rho *= tau_incr
                Ui /= tau_incr
                Uj /= tau_incr
            elif s_rel > mu * r_rel:
                rho /= tau_incr
                Ui *= tau_incr
                Uj *= tau_incr
    note = "" if newton_ok_all else "some local Newton solves did not reach newton_tol"
    return run.solution((fused.astype(bool), X, 0.5 * rho * (Ui - Uj)), converged=converged,
                        n_iter=it, history=hist, stage=stage, message=message,
                        unconverged_note=note)
