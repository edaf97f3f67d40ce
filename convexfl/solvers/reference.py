r"""The cvxpy reference solver: exact (to interior-point accuracy), slow, trusted.

One cvxpy model is built per (loss, graph) pair and kept; λ (or γ) is a
``cp.Parameter(nonneg=True)`` and the model is DPP, so re-solving at another λ (a path)
does not re-canonicalise. (SON) is written with edge variables,

.. math::

    \min_{X, Z} \sum_i f_i(x_i) + λ \sum_e w_e \|z_e\| \quad \text{s.t.}\quad Z = D X ,

so the duals ``ν`` of ``Z = DX`` are the edge flows ``u_e = λ w_e s_e`` of (KKT) (cvxpy's
sign: ``u = −ν``), handed to the certificate as a starting point.

Clarabel is the default (tight tolerances ``tol``); SCS is the fallback (``solver="SCS"``),
less accurate. A status other than ``optimal`` raises :class:`SolverError`.
"""

from __future__ import annotations

import time
import warnings
import weakref

import numpy as np

from .._validation import as_int, as_scalar
from ..certificates import kkt_residual
from ..clusters import labels as cluster_labels
from ..problems import Reduced, SquaredPenalty, SumOfNorms, scale_of
from ._common import check_bool, cluster_means, expanded
from ._common import polish as newton_on_reduced
from .base import Solution, SolverError

__all__ = ["ReferenceModel", "solve_reference"]

_MODELS: dict = {}
_MAX_MODELS = 8
_FALLBACK_TOLS = (1e-8, 1e-7, 1e-6)  # Clarabel tolerances tried after 'optimal_inaccurate'


class ReferenceModel:
    """A cvxpy model of (SON) or the squared penalty for one (loss, graph), λ a Parameter."""

    def __init__(self, loss, graph, penalty: str = "son"):
        import cvxpy as cp

        self.penalty = penalty
        n, d = loss.n_users, loss.dim
        self.X = cp.Variable((n, d), name="X")
        self.lam = cp.Parameter(nonneg=True, name="lam")
        f = loss.cvxpy_value(self.X)
        self.link = None
        if graph.n_edges == 0:
            self.problem = cp.Problem(cp.Minimize(f))
            return
        D = graph.incidence
        if penalty == "son":
            Z = cp.Variable((graph.n_edges, d), name="Z")
            self.link = Z == D @ self.X
            pen = graph.weights @ cp.norm(Z, 2, axis=1)
            self.problem = cp.Problem(cp.Minimize(f + self.lam * pen), [self.link])
        else:
            pen = graph.weights @ cp.sum(cp.square(D @ self.X), axis=1)
            self.problem = cp.Problem(cp.Minimize(f + self.lam * pen))
        assert self.problem.is_dcp(dpp=True)

    @classmethod
    def cached(cls, loss, graph, penalty: str = "son") -> ReferenceModel:
        """The model for this (loss, graph, penalty), built once while both objects live."""
        key = (id(loss), id(graph), penalty)
        entry = _MODELS.get(key)
        if entry is not None and entry[0]() is loss and entry[1]() is graph:
            return entry[2]
        model = cls(loss, graph, penalty)
        if len(_MODELS) >= _MAX_MODELS:
            _MODELS.pop(next(iter(_MODELS)))
        _MODELS[key] = (weakref.ref(loss), weakref.ref(graph), model)
        return model

    def solve(self, lam: float, *, tol: float, max_iter: int, solver: str,
              accept_inaccurate: bool = False):
        """Solve at ``lam``; return ``(X, flows, n_iter, status)`` or raise SolverError
        (``optimal_inaccurate`` is returned, not raised, with ``accept_inaccurate``)."""
        import cvxpy as cp

        self.lam.value = lam
        opts = ({"tol_gap_abs": tol, "tol_gap_rel": tol, "tol_feas": tol, "max_iter": max_iter}
                if solver == "CLARABEL" else
                {"eps_abs": tol, "eps_rel": tol, "max_iters": max_iter})
        try:
            with warnings.catch_warnings():  # the status is checked below
                warnings.filterwarnings("ignore", message="Solution may be inaccurate")
                # no warm start: the result is a function of (problem, λ, options) only,
                # not of the solves before it (reproducible paths and resumed runs)
                self.problem.solve(solver=solver, warm_start=False, **opts)
        except cp.error.SolverError as exc:
            raise SolverError(f"cvxpy/{solver} failed: {exc}") from None
        status = self.problem.status
        inaccurate_ok = (accept_inaccurate and status == cp.OPTIMAL_INACCURATE
                         and self.X.value is not None)
        if status != cp.OPTIMAL and not inaccurate_ok:
            hint = {"user_limit": f"the iteration limit max_iter={max_iter} was reached",
                    "optimal_inaccurate": "the solver could not reach tol; loosen tol or "
                                          "rescale the data",
                    "unbounded": "the objective is unbounded below",
                    "infeasible": "the problem was declared infeasible (numerical trouble)"}
            err = SolverError(f"cvxpy/{solver} returned status {status!r} (not 'optimal'): "
                              f"{hint.get(status, 'the solve failed')}")
            err.status = status
            raise err
        flows = None
        if self.link is not None and self.link.dual_value is not None:
            flows = -np.asarray(self.link.dual_value)
        n_iter = int(self.problem.solver_stats.num_iters or 0)
        return np.asarray(self.X.value), flows, n_iter, status


def solve_reference(prob, *, tol: float = 1e-8, max_iter: int = 500, solver: str = "CLARABEL",
                    kkt_tol: float | None = None, fuse_tol: float | None = None,
                    do_polish: bool = True, accept_inaccurate: bool = False) -> Solution:
    """Solve ``prob`` with cvxpy (see module docstring).

    Parameters
    ----------
    prob : SumOfNorms, SquaredPenalty or Reduced
    tol : float
        Clarabel's gap and feasibility tolerances (SCS's eps). If Clarabel fails short of
        ``tol`` (e.g. ``optimal_inaccurate``; not at the iteration limit), the solve is
        repeated at the looser of 1e-8, 1e-7, 1e-6 (the one used is recorded in
        ``history["solver_tol"]``) before the polish; ``converged`` is still judged against
        ``kkt_tol`` by the certificate.
    max_iter : int
        The conic solver's iteration limit.
    solver : {"CLARABEL", "SCS"}
    kkt_tol : float, optional
        ``converged`` requires ``kkt_residual ≤ kkt_tol`` (default ``max(10 tol, 1e-9)``,
        reached after polishing).
    fuse_tol : float, optional
        Pairs closer than this are fused (default ``1e-5 · (1 + max ‖x_i‖)``: interior-point
        iterates are never exactly fused).
    do_polish : bool
        Refine the interior-point ``X`` by Newton on the reduced problem of its clusters
        (:func:`polish`); kept only when it lowers the certified KKT residual.
    accept_inaccurate : bool
        Keep Clarabel's first answer even when its status is ``optimal_inaccurate`` (no
        ladder of looser tolerances): the polish and the certificate then decide
        ``converged``, and ``status`` says ``"optimal_inaccurate"``. For problems Clarabel
        cannot finish at any tolerance (measured: logistic SON, 200 users × 20 samples,
        d = 10, complete graph).
    """
    tol = as_scalar(tol, "tol", low=0.0, low_inclusive=False)
    max_iter = as_int(max_iter, "max_iter", low=1)
    solver = str(solver).upper()
    if solver not in ("CLARABEL", "SCS"):
        raise ValueError(f"solver: expected 'CLARABEL' or 'SCS', got {solver!r}")
    kkt_tol = max(10 * tol, 1e-9) if kkt_tol is None else as_scalar(kkt_tol, "kkt_tol")
    if isinstance(prob, Reduced):
        inner = solve_reference(prob.inner, tol=tol, max_iter=max_iter, solver=solver,
                                kkt_tol=kkt_tol, fuse_tol=fuse_tol, do_polish=do_polish,
                                accept_inaccurate=accept_inaccurate)
        return expanded(prob, inner)
    if isinstance(prob, SumOfNorms):
        model, lam = ReferenceModel.cached(prob.loss, prob.graph, "son"), prob.lam
    elif isinstance(prob, SquaredPenalty):
        model, lam = ReferenceModel.cached(prob.loss, prob.graph, "squared"), prob.gamma
    else:
        raise TypeError(f"prob: the cvxpy reference solves SumOfNorms, SquaredPenalty or "
                        f"Reduced, got {type(prob).__name__}")
    start = time.perf_counter()
    # Clarabel sometimes cannot reach tight gap/feasibility tolerances (status
    # 'optimal_inaccurate', even at its default 1e-8 on well-posed problems); the polish step
    # recovers full precision from a looser solution, and the certificate is the arbiter
    # either way (``converged`` is still judged against kkt_tol).
    accept_inaccurate = check_bool(accept_inaccurate, "accept_inaccurate")
    ladder = [tol] + ([t for t in _FALLBACK_TOLS if t > tol]
                      if solver == "CLARABEL" and not accept_inaccurate else [])
    for attempt, tol_used in enumerate(ladder):
        try:
            X, flows, n_iter, status = model.solve(lam, tol=tol_used, max_iter=max_iter,
                                                   solver=solver,
                                                   accept_inaccurate=accept_inaccurate)
            break
        except SolverError as exc:
            if attempt == len(ladder) - 1 or getattr(exc, "status", None) == "user_limit":
                raise
    elapsed = time.perf_counter() - start
    ftol = 1e-5 * scale_of(X) if fuse_tol is None else as_scalar(fuse_tol, "fuse_tol")
    cert, polished = None, False
    if isinstance(prob, SumOfNorms) and do_polish:
        Xp = polish(prob, X, fuse_tol=ftol)
        if Xp is not None:
            cert, X_raw, X, polished = (kkt_residual(prob, Xp, fuse_tol=ftol, flows=flows),
                                        X, Xp, True)
            if cert.kkt_residual > kkt_tol:  # polish did not settle it: keep the better one
                cert_raw = kkt_residual(prob, X_raw, fuse_tol=ftol, flows=flows)
                if cert_raw.kkt_abs < cert.kkt_abs:
                    X, cert, polished = X_raw, cert_raw, False
    if cert is None:
        cert = kkt_residual(prob, X, fuse_tol=ftol, flows=flows)
    ok = cert.kkt_residual <= kkt_tol
    return Solution(
        X=X, objective=cert.objective, kkt_residual=cert.kkt_residual, converged=ok,
        n_iter=n_iter, time_s=elapsed, method=f"cvxpy/{solver.lower()}",
        lam=prob.lam if isinstance(prob, SumOfNorms) else None, certificate=cert,
        fuse_tol=ftol, kkt_tol=kkt_tol, status=status,
        message="" if ok else ("solver reported optimal"
                               + ("" if tol_used == tol else
                                  f" (at tol={tol_used:g}, looser than the requested {tol:g})")
                               + f" but the certified KKT residual "
                               f"{cert.kkt_residual:.2e} exceeds kkt_tol={kkt_tol:.1e}"),
        flows=flows, history={"polished": polished, "solver_tol": tol_used},
        graph=prob.graph, stage="interior point + polish" if polished else "interior point")


def polish(prob: SumOfNorms, X, *, fuse_tol: float):
    """Refine an interior-point ``X`` by Newton's method on the reduced problem of its clusters.

    Interior-point primal iterates are accurate only to about the square root of the solver's
    tolerance (the objective is flat to second order), so their KKT residual stalls near
    1e-5. Given the clusters of ``X`` (pairs within ``fuse_tol``), the reduced problem (RED) is
    smooth while its centroids stay distinct; a few Newton steps (the fast solvers'
    :func:`convexfl.solvers._common.polish`) solve it to machine precision. Returns the
    expanded centroids, or ``None`` if Newton fails (then the caller keeps ``X``).
    """

    lab = cluster_labels(X, tol=fuse_tol)
    lab, W, ok, _ = newton_on_reduced(prob, lab, cluster_means(X, lab))
    return W[lab] if ok else None
