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
from ..certificates import normalised
from ..problems import Reduced
from ._admm_kernels import admm_run
from ._common import (
    COARSEN_MIN,
    Run,
    check_bool,
    cluster_means,
    merge_solver,
    son_dispatch,
    user_minimisers,
)
from ._common_kernels import gradient_residual

__all__ = ["solve_admm", "reduced_merges"]


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
        Coarsening attempts (:meth:`~convexfl.solvers._common.Certifier.coarsen`): once the
        exactly fused partition has at most ``N/4`` clusters, and each time it has halved
        them since, solve its reduced problem for its merges, repair it where it fails, and
        certify (at most ``COARSEN_FAILS`` failed attempts). Default: on from ``N ≥ 2000``
        users (needs ``polish``).

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


MERGES_MAX_ITER = 1000  # ADMM iterations of reduced_merges' inner solve


def reduced_merges(prob, labels, W, max_size=None, warm=None, coarsening=False):
    """The merges of the partition ``labels`` of (SON) ``prob`` at its λ: the reduced
    problem (K super-users, ``K·d ≤ max_size`` when given) solved to ``1e-9`` for its exact
    fusions (the merges are a candidate's: the caller polishes and certifies them).

    The inner solve is the one :func:`~convexfl.solvers._common.merge_solver` names, ADMM
    where it names none (a coarsening attempt, ``max_size=None``: its capped iterations
    are the bounded cost).

    ADMM's certificates are polished by Newton only (no merges inside), and only from a
    ``warm`` start or in a ``coarsening`` attempt (:meth:`Certifier.coarsen
    <convexfl.solvers._common.Certifier.coarsen>`); its exact fusions are taken after
    ``MERGES_MAX_ITER`` iterations. From cold, ADMM's early exact fusions join clusters
    that are apart at the solution, which no polish undoes: on the make_moons n = 5000
    path, λ = 0.4 from λ = 0.2's solution (197 super-users), the inner solve's 13
    certificates (11 polishes of ~20 Newton steps) took 147–176 ms of its 190–230 ms, none
    certified, and its 1000 iterations ended at 81 clusters, a wrong fusion included;
    without them it took 41 ms and ended at 83, one merge short of the answer's 82 (in the
    path 212 → 48 ms; that λ with the day's certificate changes, four solves each,
    alternating: 242–330 → 129–200 ms; a kNN10 mixture path, N = 2000, 20 λ from 0.3 to 6:
    17.4 s either way, measured with the coarsening attempts unpolished as well).
    Measured on a kNN10 mixture path (N = 3000, d = 3, 40 λ from 0.3 to 6, every λ
    certified), whose many-cluster λ ask for merges of reduced problems of up to 1471
    super-users: 5000 iterations there took the merges 91 s of the path's 199 s, 1000
    iterations 54.5 s of 177 s. ``warm``: a
    candidate ``(X, flows)`` of ``prob`` (in a repair, the candidate whose clusters
    ``labels`` split), from which the inner solve starts: its cluster means and
    its flows summed over each pair of clusters
    (:meth:`~convexfl.graphs.Graph.reduce_flows`, feasible for the reduced capacities).
    Measured on the make_moons n = 5000 path: see docs/solvers.md, "Partition repair".

    SSNAL (larger reduced problems, quadratic loss) runs with its certifier given no merges
    either. It too starts from ``warm`` (since 2026-11-28, seventh session): on the
    n = 2·10⁴ repair of λ = 0.2 its merges in rounds 2–4 took 0.43–0.56 s each instead of
    0.88–0.92 s, and that λ 6.0–6.1 → 4.6 s (two runs each), the same partitions; once,
    long before, a warm start had been slower there (20.0 s instead of 15.8 s, with
    the SSNAL and repair of that day). ADMM's 1000 iterations leave their fusions
    inexact at those sizes: on the make_moons n = 2·10⁴ path the repair of λ = 0.2 (the
    ADMM stage's 1451 clusters → 1571) and of λ = 0.4 from λ = 0.2's solution (1571 →
    501) certify in 5 and 3 rounds with SSNAL's merges (1.4–2.0 s each at ~1600
    super-users), and not at all with ADMM's (docs/solvers.md, "Partition repair").

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
    if merge_solver(prob, k) == "ssnal":
        from .ssnal import _solve_son as ssnal_son
        from .ssnal import solve_ssnal

        inner = ssnal_son(red.inner, **dict(solve_ssnal.__kwdefaults__, tol=1e-9,
                                            merges=None, **_reduced_start(prob, red, warm)))
    else:
        inner = _solve_son(red.inner, **dict(solve_admm.__kwdefaults__, tol=1e-9,
                                             max_iter=MERGES_MAX_ITER, merges=None,
                                             polish=warm is not None or coarsening,
                                             **_reduced_start(prob, red, warm)))
    if not np.all(np.isfinite(inner.X)):
        return None, None
    merged = inner.labels()[red.labels]
    return merged, cluster_means(inner.X[red.labels], merged)


def _reduced_start(prob, red, warm):
    """The reduced problem's ``X0`` and ``flows0`` from a candidate ``warm = (X, flows)`` of
    ``prob``: its cluster means and its flows summed over each pair of clusters
    (:meth:`~convexfl.graphs.Graph.reduce_flows`); none without flows."""
    if warm is None or warm[1] is None:
        return {}
    X, flows = warm
    return {"X0": cluster_means(X, red.labels, red.n_clusters),
            "flows0": prob.graph.reduce_flows(red.labels, flows)}


def _solve_son(prob, *, tol, max_iter, rho, alpha, adaptive_rho, mu, tau_incr, polish,
               check_every, X0, flows0, warm_start, newton_tol, newton_max_iter,
               record_objective, coarsen, merges):
    run = Run(prob, "admm", merges=merges, tol=tol, max_iter=max_iter, polish=polish, X0=X0,
              flows0=flows0, warm_start=warm_start)
    rho, alpha, adaptive_rho, mu, tau_incr, check_every = check_options(
        rho, alpha, adaptive_rho, mu, tau_incr, check_every)
    newton_tol = as_scalar(newton_tol, "newton_tol", low=0.0, low_inclusive=False)
    newton_max_iter = as_int(newton_max_iter, "newton_max_iter", low=1)
    record_objective = check_bool(record_objective, "record_objective")
    coarsen = (prob.n_users >= COARSEN_MIN if coarsen is None
               else check_bool(coarsen, "coarsen"))
    done = run.closed_form() or run.warm_partition()
    if done is not None:
        return done

    state = _NumbaState(prob, run.X0, run.flows0, rho, alpha, newton_tol, newton_max_iter)
    converged, it, hist, stage, message = iterate(
        run, state, check_every=check_every, adaptive_rho=adaptive_rho, mu=mu,
        tau_incr=tau_incr, coarsen=coarsen, record_objective=record_objective,
        warm=run.X0 is not None and run.flows0 is not None)
    note = "" if state.newton_ok else "some local Newton solves did not reach newton_tol"
    return run.solution(state.candidate(), converged=converged, n_iter=it, history=hist,
                        stage=stage, message=message, unconverged_note=note)


def check_options(rho, alpha, adaptive_rho, mu, tau_incr, check_every):
    """The ADMM options of every back-end, checked (each error names its option)."""
    if rho is not None:
        rho = as_scalar(rho, "rho", low=0.0, low_inclusive=False)
    alpha = as_scalar(alpha, "alpha", low=0.0, low_inclusive=False)
    if alpha >= 2.0:
        raise ValueError(f"alpha: over-relaxation must be in (0, 2), got {alpha}")
    adaptive_rho = check_bool(adaptive_rho, "adaptive_rho")
    mu = as_scalar(mu, "mu", low=1.0, low_inclusive=False)
    tau_incr = as_scalar(tau_incr, "tau_incr", low=1.0, low_inclusive=False)
    check_every = as_int(check_every, "check_every", low=1)
    return rho, alpha, adaptive_rho, mu, tau_incr, check_every


def start_point(prob, X0, rho):
    """The first iterate and ρ: ``X0`` (isolated users at their minimisers) or the local
    models ``argmin f_i``; ρ as given, else ``4 mean_e(λ w_e) / mean_e ‖x_i − x_j‖``
    (clipped to [1e-6, 1e6])."""
    if X0 is None:
        X = user_minimisers(prob.loss)  # start at the local models
    else:
        X = np.array(X0, dtype=float)
        iso = np.bincount(prob.graph.edges.ravel(), minlength=prob.n_users) == 0
        if np.any(iso):
            X[iso] = user_minimisers(prob.loss, X)[iso]
    if rho is None:
        spread = float(prob.graph.distances(X).mean())
        cap = prob.lam * prob.graph.weights
        rho = float(np.clip(4.0 * cap.mean() / max(spread, 1e-12), 1e-6, 1e6))
    return X, rho


class _NumbaState:
    """The ADMM iterates of :func:`convexfl.solvers._admm_kernels.admm_run` (numpy, numba)
    for :func:`iterate`."""

    def __init__(self, prob, X0, flows0, rho, alpha, newton_tol, newton_max_iter):
        self.prob, self.alpha = prob, alpha
        self.newton = (newton_tol, newton_max_iter)
        edges = prob.graph.edges
        self.cap = prob.lam * prob.graph.weights
        self.degree = np.bincount(edges.ravel(), minlength=prob.n_users)
        self.X, self.rho = start_point(prob, X0, rho)
        self.Zi = np.ascontiguousarray(self.X[edges[:, 0]])
        self.Zj = np.ascontiguousarray(self.X[edges[:, 1]])
        if flows0 is not None:
            self.Ui = np.ascontiguousarray(flows0 / self.rho)
            self.Uj = -self.Ui
        else:
            self.Ui = np.zeros_like(self.Zi)
            self.Uj = np.zeros_like(self.Zj)
        self.fused = np.zeros(prob.graph.n_edges, np.uint8)
        self.newton_ok = True

    def step(self, n_steps):
        arrays = self.prob.loss.arrays
        r, s, xn, zn, un, nok = admm_run(n_steps, *arrays, self.prob.graph.edges, self.cap,
                                          self.degree, self.X, self.Zi, self.Zj,
                                          self.Ui, self.Uj, self.fused, self.rho,
                                          self.alpha, *self.newton)
        self.newton_ok = self.newton_ok and nok
        gres, gnorm = gradient_residual(arrays[0], *arrays[1:6], arrays[7], self.X,
                                        self.prob.graph.edges, self.flows())
        finite = bool(np.isfinite(r) and np.isfinite(s))
        return r / max(xn, zn, 1e-300), s / max(un, 1e-300), normalised(gres, gnorm), finite

    def flows(self):
        return 0.5 * self.rho * (self.Ui - self.Uj)

    def fused_mask(self):
        return self.fused.astype(bool)

    def candidate(self):
        return self.fused_mask(), self.X, self.flows()

    def scale_rho(self, factor):
        self.rho *= factor
        self.Ui /= factor
        self.Uj /= factor


def iterate(run, state, *, check_every, adaptive_rho, mu, tau_incr, coarsen, warm,
            record_objective=False, stall_iter=None, resume=None):
    """The ADMM outer loop, shared by the back-ends (numba here, torch in
    :mod:`convexfl.solvers.torch_admm`): ``state.step(n)`` runs ``n`` iterations and returns
    the relative primal and dual residuals, the stationarity proxy of the flows and whether
    the iterates are finite; ``state.candidate()`` gives ``(fused, X, flows)`` as numpy
    arrays; ``state.scale_rho(f)`` multiplies ρ by ``f`` (scaled duals divided by it).

    A candidate is certified (``run.certify``) when the three residuals are below a trigger
    (``max(1e-2, tol)`` at first, a tenth of the residuals after each failed certificate,
    the next attempt at least twice as many iterations later), and also when its partition
    is new and small (``run.certifier.untried``), a check that leaves the trigger and the
    gap as they were (measured: when each such check lowered the trigger tenfold, the
    reduced problem of make_moons n = 5000 at λ = 0.4 went through 11 of them before
    iteration 890 and was next checked at its limit, 5000); ρ is balanced while
    ``it < max_iter/2``. With ``stall_iter``, the loop also stops when the residuals have
    not improved by 10 % in that many iterations (rounding in reduced precision).
    ``resume``: ``(n_iter, history)`` of earlier iterations of this run that this call goes
    on from (counted against ``max_iter``; the trigger starts afresh).

    Returns ``(converged, n_iter, history, stage, message)``.
    """
    tol, max_iter = run.tol, run.max_iter
    if resume is None:
        hist = {"iter": [], "r": [], "s": [], "rho": [], "kkt_proxy": [], "certify_at": [],
                "certified_kkt": []}
        if record_objective:
            hist["objective"] = []
        it = 0
    else:
        it, hist = resume
    trigger = max(1e-2, tol)
    next_cert = it + 1 if warm else it
    gap = 2 * check_every
    best, best_at = np.inf, it
    freeze_at = max_iter // 2
    while it < max_iter:
        steps = 1 if (warm and not hist["iter"]) else min(check_every, max_iter - it)
        r_rel, s_rel, proxy, finite = state.step(steps)
        it += steps
        hist["iter"].append(it)
        hist["r"].append(r_rel)
        hist["s"].append(s_rel)
        hist["rho"].append(state.rho)
        hist["kkt_proxy"].append(proxy)
        if record_objective:
            hist["objective"].append(run.prob.objective(state.candidate()[1]))
        if not finite:
            return False, it, hist, "iterations", "diverged (non-finite iterates)"
        worst = max(r_rel, s_rel, proxy)
        due = it >= next_cert and worst <= trigger
        if due or run.certifier.untried(state.fused_mask(), stable=True):
            if run.certify(hist, it, *state.candidate()):
                return True, it, hist, "iterations", ""
            if due:  # a new partition's check leaves the residuals' schedule alone
                trigger = worst / 10.0
                next_cert = it + gap
                gap = min(2 * gap, 2000)
        if coarsen and run.coarsen(hist, it, *state.candidate()):
            return True, it, hist, "coarsening", ""
        if worst < 0.9 * best:
            best, best_at = worst, it
        elif stall_iter is not None and it - best_at >= stall_iter:
            return False, it, hist, "iterations", (
                f"stalled: the ADMM residuals have not improved by 10% in {it - best_at} "
                f"iterations (best {best:.2e} at iteration {best_at})")
        if adaptive_rho and it < freeze_at:
            if r_rel > mu * s_rel:
                state.scale_rho(tau_incr)
            elif s_rel > mu * r_rel:
                state.scale_rho(1.0 / tau_incr)
    return False, it, hist, "iterations", ""
