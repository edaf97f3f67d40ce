"""Machinery shared by the fast solvers (ADMM, PDMM, SSNAL); nothing here solves (SON).

- :func:`son_dispatch`: ``Reduced`` problems are (SON) problems on ``prob.inner``: solve it
  and expand; ``SquaredPenalty`` is refused with a clear message.
- :class:`Run`: what every fast solver does around its iterations — the shared options
  checked, the warm start taken, λ = 0 or a graph without edges answered in closed form
  (``x_i = argmin f_i``, :func:`user_minimisers`), candidates certified, the last one
  polished, the :class:`Solution` built.
- :class:`Certifier`: the certified stopping test. From the edges a solver has **exactly**
  fused (its edge variables are block soft-thresholded, so fusion is an exact zero), build the
  partition (connected components), the clustered ``X`` (cluster means) and certify it with
  :func:`convexfl.certificates.kkt_residual`, the solver's flows ``u_e = λ w_e s_e`` as the
  warm start. If that is not yet below ``tol``, optionally *polish*: Newton's method on the
  reduced problem (RED) of the partition (:func:`polish`; smooth while the centroids stay
  apart), merging clusters whose centroids meet, then certify again. The solver stops only
  when a candidate is certified.
- Merges: where Newton alone does not certify, the certifier asks for the merges of a
  partition from its reduced problem solved iteratively. It is *given* that solve
  (``merges=``, :func:`convexfl.solvers.admm.reduced_merges`, the one place a reduced
  problem is solved for its merges): this module sits below every solver.
- Partition repair (:meth:`Certifier.repair`, :func:`repair`; ``auto`` between its ADMM
  and SSNAL stages): a partition that does not certify is split along the edges its
  certificate's flows saturate (:func:`split_saturated`), polished and certified again.
- Warm starts along a path (:meth:`Certifier.warm`): the previous solution's partition is
  re-optimised at the new λ and certified before any iteration (Newton, then its merges);
  its flows are moved to the new λ (:func:`_moved_flows`: extrapolated along
  ``Solution.flow_slope`` when the previous step kept its partition; otherwise its
  certificate also starts from the flows scaled with λ, :func:`flow_guesses`). Measured on
  the make_moons 551-λ path (n = 5000): 500 of the 551 λ need no iteration, ~10 ms each.

``fuse_tol``: candidates are exactly clustered (rows of a cluster are bitwise equal), so the
certificate and ``Solution.labels`` use ``fuse_tol = FUSE_RTOL · (1 + max_i ‖x_i‖)`` with
``FUSE_RTOL = 1e-10``: only exact fusions count, distinct clusters are never merged by the
tolerance.
"""

from __future__ import annotations

import time

import numpy as np

from .._flow_kernels import project_flows, sums_by_label
from .._kernels import QUADRATIC
from .._validation import as_float_array, as_int, as_scalar, check_matrix_rows
from ..certificates import (
    PatternLU,
    factor_spd,
    grounded_laplacian,
    kkt_residual,
    pcg,
    repeated_solves,
)
from ..clusters import components
from ..problems import Reduced, SquaredPenalty, SumOfNorms, scale_of
from ._common_kernels import (
    NEWTON_CONVERGED,
    NEWTON_MERGE,
    armijo_step,
    dense_newton,
    minimise_users,
    reduced_grad_hess,
    reduced_hess_vec,
)
from .base import Solution

FUSE_RTOL = 1e-10
POLISH_MAX = 6000  # largest reduced Newton system (K·d) polished
MERGES_ADMM_MAX = 2000  # reduced problems (K·d) up to this size are solved for their merges
MERGE_MAX = 8000  # ...and larger ones with the quadratic loss up to this size (merge_solver)
MERGE_SHARE = 0.25  # ...when their clusters are at most this share of the users
COARSEN_MIN = 2000  # solvers try coarsening (Certifier.coarsen) from this many users on
DENSE_MAX = 2500  # reduced Newton systems up to this size are solved densely
SMALL_NEWTON = 300  # reduced Newton systems this small are dense and cheap at any density
# sparse reduced Newton systems of the quadratic loss with more parameters per user than this
# are solved by CG preconditioned with the isotropic (C + L_w̃) ⊗ I (polish): ConvexClustering()
# on 5-Gaussian mixtures, N = 600 (centres 2·N(0, I), noise 0.7, seed 0), two rounds, with
# the LU → the isotropic CG: d = 4 16.1–16.9 → 13.0–15.5 s, d = 6 14.0–15.9 → 5.8–7.8 s,
# d = 8 15.9–16.6 → 6.5–7.8 s (same K and λ, every path λ certified); but d = 3 11.3–11.6 →
# 14.4–14.9 s, so d ≤ 3 keeps the LU
POLISH_ISOTROPIC_DIM = 3
POLISH_CG_MAX = 200  # ...in at most this many CG iterations per Newton step
POLISH_STEPS = 30  # Newton steps the polishes during the iterations may take at first...
POLISH_STEPS_PER_CHECK = 10  # ...and more for each candidate checked (final polish: no limit)
SMALL_POLISH_STEPS = 100  # a small reduced problem (K·d ≤ SMALL_NEWTON) at least this many
POLISH_DENSE_MAX = 1000  # larger dense Newton systems are polished only at the end; a
# budgeted Newton step costs one step per POLISH_DENSE_MAX unknowns
REPOLISH_GAIN = 0.5  # a partition is polished again by a candidate whose residual is at
# most this fraction of the least of its earlier candidates' (Certifier.__call__)
COARSEN_FAILS = 3  # coarsening attempts that may fail before a solver stops trying
REPAIR_ROUNDS = 8  # split-and-polish rounds of a partition repair (Certifier.repair)
SATURATION_RTOL = 1e-3  # a flow within this of its capacity is saturated (split_saturated)
REPAIR_FLOW_RTOL = 0.1  # the split's flows: upper and lower bound within this of each other
REPAIR_FLOW_ITER = 5000  # ...within this many flow iterations (kkt_residual's default)
REPAIR_PROGRESS = 0.5  # a repair stops when a round does not reduce the residual this much
SLOPE_FLOW_ITER = 50  # flow iterations of the search for an exact flow slope (_exact_slope)
REPAIR_NEWTON_STEPS = 30  # Newton steps of each polish in a repair round
WARM_REPAIR_ROUNDS = 3  # rounds of the repair of a failed warm partition (the warm one first)


def check_common(tol, max_iter):
    tol = as_scalar(tol, "tol", low=0.0, low_inclusive=False)
    max_iter = as_int(max_iter, "max_iter", low=1)
    return tol, max_iter


def check_bool(value, name):
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name}: expected True or False, got {type(value).__name__}")
    return bool(value)


def check_polish(value):
    """``polish``: True, False, or ``"small"`` (polish only reduced problems with
    ``K·d ≤ SMALL_NEWTON``; no final polish, no coarsening)."""
    if isinstance(value, str) and value == "small":
        return value
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"polish: expected True, False or 'small', got {value!r}")
    return bool(value)


def son_dispatch(prob, method: str, fn, opts):
    """Return ``fn(prob, **opts)`` for (SON) and the expanded inner solution for (RED)."""
    if isinstance(prob, Reduced):
        opts = dict(opts)
        for key in ("X0", "flows0", "warm_start"):
            if opts.get(key) is not None:
                raise ValueError(f"{key}: warm starts of a Reduced problem must be given for "
                                 "prob.inner (solve prob.inner directly)")
        return expanded(prob, fn(prob.inner, **opts))
    if isinstance(prob, SquaredPenalty):
        raise TypeError(f"prob: method {method!r} solves SumOfNorms (and Reduced) problems; "
                        "the squared penalty is smooth — use method='cvxpy' for it")
    if not isinstance(prob, SumOfNorms):
        raise TypeError(f"prob: expected SumOfNorms or Reduced, got {type(prob).__name__}")
    return fn(prob, **opts)


def expanded(prob: Reduced, inner: Solution) -> Solution:
    """The solution of ``prob.inner`` as one of the (RED) problem ``prob``: every user gets
    its cluster's model (``history["W"]``: the clusters' models), the objective of ``prob``,
    its graph (so that :meth:`Solution.labels` fuses users along ``prob.graph``); the
    certificate and ``kkt_residual`` stay those of ``prob.inner``, and there are no user
    flows."""
    inner.history["W"] = inner.X
    inner.X = prob.expand(inner.X)
    inner.objective = prob.objective(inner.X)
    inner.flows = inner.flow_slope = None
    inner.graph = prob.graph
    return inner


def warm_start_arrays(prob: SumOfNorms, X0, flows0, warm_start):
    """Validate ``X0`` (N, d) and ``flows0`` (E, d) (or take them from a ``Solution``)."""
    if warm_start is not None:
        if not isinstance(warm_start, Solution):
            raise TypeError(f"warm_start: expected a Solution, got {type(warm_start).__name__}")
        if X0 is None:
            X0 = warm_start.X
        if flows0 is None and warm_start.flows is not None:
            flows0 = _moved_flows(prob, warm_start)
    if X0 is not None:
        X0 = check_matrix_rows(X0, prob.n_users, prob.dim, "X0")
    if flows0 is not None:
        flows0 = as_float_array(flows0, "flows0", ndim=2)
        if flows0.shape != (prob.graph.n_edges, prob.dim):
            raise ValueError(f"flows0: expected shape {(prob.graph.n_edges, prob.dim)}, "
                             f"got {flows0.shape}")
        # onto the capacities (e.g. after a change of λ); in place: flows0 is a fresh copy
        flows0 = project_flows(flows0, prob.lam * prob.graph.weights)
    return X0, flows0


def _fused_edges(prob: SumOfNorms, X):
    return prob.graph.distances(X) <= fuse_tol_of(X)


def _fused_of(prob: SumOfNorms, sol: Solution):
    """The edges fused in a solution of ``prob``'s graph: those its certificate treated as
    fused (``certificate.fused``), else those within :func:`fuse_tol_of` of its ``X``."""
    fused = None if sol.certificate is None else sol.certificate.fused
    if fused is None or fused.shape != (prob.graph.n_edges,):
        return _fused_edges(prob, sol.X)
    return fused


def _comparable(prob: SumOfNorms, sol: Solution) -> bool:
    return (sol.lam is not None and sol.lam != prob.lam and prob.lam > 0 and sol.lam > 0
            and sol.flows is not None and sol.X.shape == (prob.n_users, prob.dim)
            and np.shape(sol.flows) == (prob.graph.n_edges, prob.dim))


def _moved_flows(prob: SumOfNorms, sol: Solution):
    """A previous solution's flows moved to this λ. With a :attr:`Solution.flow_slope`:
    extrapolated linearly in λ. Otherwise, on its non-fused edges ``u_e = λ w_e s_e`` with
    ``s_e`` kept (scaled by the ratio of the λ); on its fused edges the flows balance the
    gradients, which do not scale with λ, so they are kept as they are. (Capacities are
    enforced afterwards.)"""
    flows = np.array(sol.flows, dtype=float)
    if not _comparable(prob, sol):
        return flows
    if sol.flow_slope is not None:
        return flows + (prob.lam - sol.lam) * sol.flow_slope
    flows[~_fused_of(prob, sol)] *= prob.lam / sol.lam
    return flows


def flow_guesses(prob: SumOfNorms, warm: Solution | None, flows0):
    """The flows the certificate of a warm partition starts from (:meth:`Certifier.warm`):
    ``flows0`` (:func:`_moved_flows`) and, when that is not an extrapolation along
    :attr:`Solution.flow_slope`, the warm solution's flows all scaled by the ratio of the
    λ, stacked ``(2, E, d)``; :func:`~convexfl.certificates.kkt_residual` tries them in
    that order (each projected, then one projection step) and takes the first that
    certifies, else starts its search from the better.

    Neither guess is right in general. A fused cluster's flows route its users' gradients,
    which do not scale with λ, and what enters it across its boundary, which does; scaled
    flows also keep the saturated edges at their capacity. Measured along the make_moons
    path (n = 2·10⁴, λ = 4.2 → 4.4, 33 clusters), the projected guesses left residuals of
    18 (kept) and 3.1 (scaled), and the certificate took 222 and 12 flow iterations. On a
    kept partition the slope's extrapolation is the only guess: offering the scaled flows
    there as well took the 169 two-cluster λ of the n = 5000 path from 1.7 to 4.0 s (the
    certificates took them, and the slopes that followed were worse)."""
    if flows0 is None or warm is None or warm.flow_slope is not None \
            or not _comparable(prob, warm):
        return flows0
    scaled = np.array(warm.flows, dtype=float) * (prob.lam / warm.lam)
    return np.stack([flows0, project_flows(scaled, prob.lam * prob.graph.weights)])


def _flow_slope(prob: SumOfNorms, warm: Solution | None, X, flows, fused, target, history,
                certified_as_extrapolated=False):
    """The slope of the flows in λ when ``warm`` has the partition of ``X``, for the next
    λ's extrapolation (:func:`_moved_flows`). ``history["flow_slope"]`` says which:

    - "kept": ``warm.flow_slope``, where the flows are linear in λ on the partition (two
      clusters, or ``d = 1``) and the certificate took the extrapolation as it was (no
      flow iterations);
    - "exact": where they are linear otherwise, a slope ``v`` whose divergence is that of
      the exact flows, ``−dG/dλ`` (:func:`_exact_slope`), within the capacities ``w``
      on the fused edges, so the extrapolations of the whole stretch keep the residual
      ``G + Bᵀu`` of this λ. The difference of two certified flows is off by the change of
      their residuals over ``λ − λ_warm``: measured on the make_moons n = 5000
      two-cluster stretch, its extrapolation's residual grew by 0.75 of the certificate's
      target per step of 0.2, so every other certificate needed a projection step;
    - "not found": the difference below, where that search failed at this λ or earlier
      on this stretch (it is not repeated);
    - "difference": ``(flows − flows_warm)/(λ − λ_warm)``, where no edge is fused (every
      flow is then ``λ w_e s_e``) or the flows are not linear in λ (three clusters or
      more in ``d ≥ 2``: the extrapolation of even an exact slope is first order only;
      measured on that path at six clusters, λ = 5.8–7.4, each search took 45–65 ms, and
      the certificate after it one projection step, 15 ms, instead of two to five,
      20–40 ms)."""
    if warm is None or flows is None or fused is None or not _comparable(prob, warm):
        return None
    if not np.array_equal(_fused_of(prob, warm), fused):
        return None
    linear = prob.dim == 1 or components(prob.n_users, prob.graph.edges, fused).max() == 1
    if linear and fused.any() and certified_as_extrapolated and warm.flow_slope is not None \
            and warm.history.get("flow_slope") != "not found":
        history["flow_slope"] = "kept"
        return warm.flow_slope
    slope = (flows - warm.flows) / (prob.lam - warm.lam)
    if not (linear and fused.any()):  # no fused edge: the cut's flows are λ w_e s_e
        history["flow_slope"] = "difference"
        return slope
    if warm.history.get("flow_slope") == "not found":  # this stretch: searched in vain
        history["flow_slope"] = "not found"
        return slope
    exact = _exact_slope(prob, warm, X, flows, fused, slope, target)
    history["flow_slope"] = "not found" if exact is None else "exact"
    return slope if exact is None else exact


def _exact_slope(prob: SumOfNorms, warm: Solution, X, flows, fused, slope, target):
    """A slope ``v`` with ``‖v_e‖ ≤ w_e`` on the fused edges whose divergence there is that
    of the exact flows' rate of change, to within ``target / (10 λ)``; ``None`` when none
    is found.

    On a kept partition the certificate's fixed part ``G(λ) = ∇f(X(λ)) + Bᵀu_cut(λ)`` (the
    cut's flows are ``λ w_e s_e``) moves with λ, and the flows balancing it move as
    ``u(λ) = u_a + (λ − λ_a) v`` with ``B_F v = −dG/dλ`` on the fused edges ``F`` — to
    first order, exactly when ``X(λ)`` is affine (two clusters, or ``d = 1``, where no
    cluster direction turns). With ``‖v_e‖ ≤ w_e`` every such flow is within the
    capacities, ``‖u_a + (λ − λ_a) v_e‖ ≤ λ_a w_e + (λ − λ_a) w_e``, and the residual
    ``R = G + Bᵀu`` stays what it is at ``λ_a``. The difference ``s`` of two certified
    flows has ``B_F s = −ΔG/Δλ + ΔR/Δλ``: its divergence is off by the change of the
    residuals, so the target divergence is ``B_F s − ΔR/Δλ`` (computed from both solutions'
    ``R``), and ``v`` comes from the certificate's flow search
    (:func:`~convexfl.certificates._min_residual`, on its cached factor) started at ``s``.
    Its residual adds ``(λ − λ_a)‖B_F(v − v*)‖`` to the extrapolations', so ``target``
    (the certificate's, absolute) over ``10 λ`` keeps them within a tenth of it over a
    stretch as long as λ itself."""
    from .._flow_kernels import flow_residual
    from ..certificates import _min_residual, elimination_order

    def residual(sol_X, sol_flows):
        grad = np.ascontiguousarray(prob.loss.grad(sol_X), dtype=float)
        return flow_residual(grad, prob.graph.edges, np.ascontiguousarray(sol_flows))

    at = np.flatnonzero(fused)
    edges = prob.graph.edges.take(at, axis=0)
    s_at = slope.take(at, axis=0)
    drift = (residual(X, flows) - residual(warm.X, warm.flows)) / (prob.lam - warm.lam)
    div = flow_residual(-drift, edges, s_at)  # B_F s − ΔR/Δλ
    goal = target / (10 * max(prob.lam, 1.0))
    up, _, _, v = _min_residual(-div, edges, prob.graph.weights[at], 1.0, s_at, 1e-3,
                                SLOPE_FLOW_ITER, goal, elimination_order(prob.graph))
    if up > goal:
        return None
    slope = slope.copy()
    slope[at] = v
    return slope


def isotropic_matrix(coef, edges, w, n, users=None):
    """``C + L_w`` (sparse CSR, ``n × n``): ``diag(coef)`` plus the Laplacian of the edges
    with weights ``w``; with ``users`` (a mask), its rows and columns of those users, built
    on them alone (:func:`~convexfl.certificates.grounded_laplacian`: their weighted
    degrees count every edge, also those to the other users)."""
    users = np.ones(n, dtype=bool) if users is None else users
    return grounded_laplacian(n, edges, w, users, shift=coef[users]).T  # symmetric: CSR


def _isotropic_newton_step(coef, edges, cap, W, grad, rtol):
    """The Newton step ``−H⁻¹∇`` of a reduced problem of the quadratic loss at ``W``
    (:func:`reduced_hess_vec`) by CG preconditioned with ``M = (C + L_w̃) ⊗ I``,
    ``w̃_e = c_e/‖w_a − w_b‖``: the edge blocks ``w̃_e (I − ûûᵀ)`` of ``H`` with their
    missing direction restored, so ``C ⊗ I ⪯ H ⪯ M``, and ``M`` factorises on the ``K``
    clusters alone (its LU does not grow with ``d²`` as the Hessian's does)."""
    dist = np.linalg.norm(W[edges[:, 0]] - W[edges[:, 1]], axis=1)
    solve = repeated_solves(factor_spd(isotropic_matrix(coef, edges, cap / dist, W.shape[0])))
    out = np.empty_like(W)

    def matvec(V):
        reduced_hess_vec(coef, edges, cap, W, V, out)
        return out

    return pcg(matvec, -grad, solve, rtol, POLISH_CG_MAX)[0]


def fuse_tol_of(X) -> float:
    return FUSE_RTOL * scale_of(X)


def user_minimisers(loss, X0=None, tol=1e-12):
    """``x_i = argmin f_i`` for every user (Newton by proximal-point rounds)."""
    X0 = np.zeros((loss.n_users, loss.dim)) if X0 is None else np.ascontiguousarray(X0)
    X, _ = minimise_users(*loss.arrays, X0, tol, 50)
    return X


def cluster_means(X, labels, k=None):
    k = int(labels.max()) + 1 if k is None else k
    W = sums_by_label(np.ascontiguousarray(X, dtype=float), labels, k)
    W /= np.bincount(labels, minlength=k)[:, None]
    return W


def split_saturated(prob: SumOfNorms, X, cert, rtol=SATURATION_RTOL):
    """The partition of ``X`` with its clusters split along the edges whose certified
    flows are saturated, ``‖u_e‖ ≥ (1 − rtol) λ w_e``; ``None`` when nothing splits.

    The flows of :func:`~convexfl.certificates.kkt_residual` minimise ``‖G + B u‖`` over
    the capacity balls; its dual is ``min_z ½‖z − G‖² + Σ_e λ w_e ‖z_i − z_j‖`` with
    ``z = G + B u`` at the optimum, and ``z_i ≠ z_j`` across an edge only where its flow is
    saturated. Within a fused cluster the minimal residual ``z`` is the steepest-descent
    direction of the objective (its least-norm subgradient), so the components of the
    unsaturated edges are the pieces that descent moves apart (a refinement of them where
    a saturated edge has ``z_i = z_j``; the next polish merges those again)."""
    edges = prob.graph.edges
    cap = prob.lam * prob.graph.weights
    fused = prob.graph.distances(X) <= cert.fuse_tol
    slack = np.linalg.norm(cert.flows, axis=1) < (1.0 - rtol) * cap
    before = components(prob.n_users, edges, fused)
    after = components(prob.n_users, edges, fused & slack)
    return after if after.max() > before.max() else None


_LAST_REDUCED: list = [None]  # the last reduced problem built by _reduced (it holds its
# loss and graph alive until the next)


def _reduced(prob: SumOfNorms, labels) -> Reduced:
    """``Reduced(prob.loss, prob.graph, labels, prob.lam)``; along a path the partition
    often stays while λ moves, and the last one's reduced graph and loss are then reused
    (:meth:`Reduced.with_lam`; building them is ~1 ms at 5000 users)."""
    last = _LAST_REDUCED[0]
    if (last is not None and last.loss is prob.loss and last.graph is prob.graph
            and np.array_equal(last.labels, labels)):
        red = last.with_lam(prob.lam)
    else:
        red = Reduced(prob.loss, prob.graph, labels, prob.lam)
    _LAST_REDUCED[0] = red
    return red


def polish(prob: SumOfNorms, labels, W0, *, gtol_rel=1e-12, max_iter=30, max_rounds=12,
           merge_rtol=1e-9, max_steps=None, dense_max=DENSE_MAX):
    """Newton's method on the reduced problem (RED) of ``labels``, started at ``W0``.

    Sparse Hessian (dense when small: then the iterations are one compiled loop,
    :func:`~convexfl.solvers._common_kernels.dense_newton`; measured on the make_moons
    n = 5000 path, processes alternating, its polishes (816 Newton steps, 754 of them on
    K < 100 clusters) 0.23–0.34 → 0.14–0.16 s); Armijo backtracking; clusters whose
    centroids meet (distance ≤ 1e-9 · scale) are merged and Newton restarts. At most
    ``max_steps`` Newton steps in all (at least one); a dense Newton system larger than
    ``dense_max`` is not attempted. Returns ``(labels, W, ok, steps)``; the limits are
    counts, never times, so that the same input always gives the same answer.
    """
    d = prob.dim
    labels = np.asarray(labels, dtype=np.int64)
    W = np.asarray(W0, dtype=float)
    steps = 0
    for _ in range(max_rounds):
        red = _reduced(prob, labels)
        # Reduced renumbers clusters by first appearance: map W0 accordingly
        order = np.empty(red.n_clusters, np.int64)
        order[red.labels] = labels  # the old label of each new one
        W = np.ascontiguousarray(W[order])
        labels = red.labels
        inner = red.inner
        arrays = inner.loss.arrays
        edges = inner.graph.edges
        cap = prob.lam * inner.graph.weights
        k = inner.n_users
        if edges.shape[0] == 0:
            W = user_minimisers(inner.loss, W)
            return labels, W, True, steps
        n = k * d
        # dense storage only for dense graphs: a dense factorisation of a sparse matrix
        # fills in with decaying (subnormal) numbers and becomes very slow
        dense = n <= SMALL_NEWTON or (n <= DENSE_MAX and edges.shape[0] > k * k / 8)
        too_costly = (n > dense_max if dense
                      else edges.shape[0] > 40 * k or n > POLISH_MAX)
        if too_costly:  # leave it to the solver
            return labels, W, False, steps
        merge_tol = merge_rtol * scale_of(W)
        left = np.iinfo(np.int64).max if max_steps is None else max(max(max_steps, 1) - steps, 0)
        if dense:
            W, status, taken = dense_newton(*arrays, edges, cap, W, gtol_rel, merge_tol,
                                            max_iter, left)
            steps += taken
            if status != NEWTON_MERGE:
                return labels, W, status == NEWTON_CONVERGED, steps
            labels, W = _merge_met(labels, W, inner, merge_tol)
            continue
        isotropic = arrays[0] == QUADRATIC and d > POLISH_ISOTROPIC_DIM
        n_trip = 0 if isotropic else k * d * d + 4 * edges.shape[0] * d * d
        Hd = np.empty((0, 0))
        rows = np.empty(n_trip, np.int64)
        cols = np.empty(n_trip, np.int64)
        vals = np.empty(n_trip)
        grad = np.empty((k, d))
        system = None  # (triplets, PatternLU) of the sparse Newton systems: one pattern
        merged = False
        ok = False
        t_start = 1.0
        gnorm0 = None  # the first gradient's norm (isotropic)
        for _ in range(max_iter):
            val, nt, rmin = reduced_grad_hess(*arrays, edges, cap, W, grad, Hd, rows, cols,
                                              vals)
            if rmin <= merge_tol:
                labels, W = _merge_met(labels, W, inner, merge_tol)
                merged = True
                break
            gsum = np.linalg.norm(grad)
            if gsum <= gtol_rel * (1.0 + np.abs(W).max() + np.abs(cap).max()):
                ok = True
                break
            if max_steps is not None and steps >= max(max_steps, 1):
                return labels, W, False, steps
            steps += 1
            try:
                if isotropic:  # inexact Newton: CG to η = min(0.1, ‖∇‖/‖∇₀‖)·‖∇‖
                    gnorm0 = gsum if gnorm0 is None else gnorm0
                    step = _isotropic_newton_step(arrays[3], edges, cap, W, grad,
                                                  min(0.1, gsum / gnorm0))
                else:
                    reg = 1e-13 * (1.0 + np.abs(vals[:nt]).max())
                    if system is None or system[0] != nt:  # H + reg·I, duplicates summed
                        diag = np.arange(n)
                        system = nt, PatternLU(n, np.r_[rows[:nt], diag],
                                               np.r_[cols[:nt], diag])
                    step = -system[1].factor(np.r_[vals[:nt], np.full(n, reg)])(grad.ravel())
            except (np.linalg.LinAlgError, RuntimeError, ValueError):
                return labels, W, False, steps
            step = step.reshape(k, d)
            if not np.all(np.isfinite(step)):
                return labels, W, False, steps
            slope = float(np.sum(grad * step))
            # start from twice the last accepted step: near a merge the steps stay short
            # (‖w_a − w_b‖ has no radial curvature) and backtracking from 1 each time cost
            # ~8 evaluations per step
            W_next, t = armijo_step(*arrays, edges, cap, W, np.ascontiguousarray(step), val,
                                    slope, t_start)
            if t == 0.0:
                return labels, W, False, steps
            t_start = min(1.0, 2.0 * t)
            W = W_next
        if not merged:
            return labels, W, ok, steps
    return labels, W, False, steps


def _merge_met(labels, W, inner, merge_tol):
    """``(labels, W)`` with the clusters of the reduced problem ``inner`` whose models are
    within ``merge_tol`` across one of its edges merged (at their mean)."""
    lab_k = components(inner.n_users, inner.graph.edges, inner.graph.distances(W) <= merge_tol)
    return lab_k[labels], cluster_means(W, lab_k)


def merge_solver(prob: SumOfNorms, k: int) -> str | None:
    """The solve of the reduced problem of a partition into ``k`` clusters for its merges
    (:func:`~convexfl.solvers.admm.reduced_merges`) when a candidate is polished or
    repaired: ``"admm"`` when ``K·d ≤ MERGES_ADMM_MAX``; ``"ssnal"`` with the quadratic
    loss up to ``K·d ≤ MERGE_MAX`` when ``K ≤ MERGE_SHARE · N``; else ``None`` (no merges).
    A reduced problem of nearly as many clusters as users is not cheaper than the problem
    itself: kNN10 mixture N = 3000, d = 3, λ = 0.3 (K = 2124), ``auto`` took 3.4 s with
    SSNAL after its ADMM stage and 11.6 s when that stage's partition was repaired (three
    rounds of SSNAL merges); make_moons n = 2·10⁴, λ = 0.2 and 0.4 (K = 1571 and 472 of
    20000) are repaired (docs/solvers.md, "Partition repair")."""
    size = k * prob.dim
    if size <= MERGES_ADMM_MAX:
        return "admm"
    if prob.loss.code == QUADRATIC and size <= MERGE_MAX and k <= MERGE_SHARE * prob.n_users:
        return "ssnal"
    return None


class Certifier:
    """Build, polish and certify candidates; keeps timing and counts.

    ``merges(prob, labels, W, max_size, warm, coarsening)`` is the reduced-problem solve
    that gives the merges of a partition (:func:`convexfl.solvers.admm.reduced_merges`);
    ``None``: Newton only (the certifier of that inner solve itself).
    """

    def __init__(self, prob: SumOfNorms, tol: float, *, polish: bool, cert_max_iter=1000,
                 warm_from: Solution | None = None, merges=None):
        self.prob, self.tol, self.do_polish = prob, tol, polish
        self.merges = merges  # (prob, labels, W, max_size) -> (labels, W) or (None, None)
        self.warm_from = warm_from  # the warm start's Solution (for Solution.flow_slope)
        self.cert_max_iter = cert_max_iter
        self.time = 0.0
        self.count = 0
        self.step_checks = 0  # checks of Newton steps' candidates (``step`` of __call__)
        self.best = None  # (kkt, X, cert, certified flows, fuse_tol)
        self.last_polished = None  # hash of the last partition polished without success
        self.polished_kkt = np.inf  # the least residual of its candidates so far
        self.last_seen = None  # hash of the partition at the last call of untried()
        self.last_candidate = None  # hash of the partition of the last candidate checked
        self.coarse_k = prob.n_users / 2  # clusters at the last coarsening attempt (first: N/4)
        self.coarsen_fails = 0
        self.polish_steps = 0  # Newton steps of the polishes during the iterations
        self.last = None  # (X, Certificate) of the last candidate certified
        self.warm_repair = 0  # rounds of the repair that certified the warm partition

    def _certify(self, X, flows, target=None, **search):
        """Certify ``X`` (``search``: the flow search's ``rtol``, ``max_iter``), keep the
        best candidate."""
        ftol = fuse_tol_of(X)
        search.setdefault("max_iter", self.cert_max_iter)
        cert = kkt_residual(self.prob, X, fuse_tol=ftol, flows=flows, target=target,
                            **search)
        self.last = (X, cert)
        if self.best is None or cert.kkt_residual < self.best[0]:
            self.best = (cert.kkt_residual, X, cert, cert.flows, ftol)
        return cert

    def __call__(self, fused_mask, X, flows, *, force_polish=False, step=False):
        """Certify the candidate of ``fused_mask`` (edges exactly fused by the solver).

        A candidate that does not pass is polished (when ``polish`` or ``force_polish``)
        unless its partition is the one polished last time without success; a candidate
        whose reduced problem is small (``K·d ≤ SMALL_NEWTON``) is polished before its first
        certificate, so that one certificate serves (measured: SSNAL, complete graph N = 400,
        the K = 4 candidate needed two certificates of ~8 ms each, the first always
        failing at SSNAL's accuracy, the polish ~3 ms). A larger one is polished only when
        the previous candidate had its partition: SSNAL's candidates change partition at
        every outer iteration until nearly there (measured, kNN10 mixture, λ = 0.3, ``auto``:
        at N = 1000 four such polishes, 0.41 s, failed before the fifth candidate, the
        fourth's partition, certified; 0.82–0.95 → 0.21–0.34 s, N = 3000 1.21–1.51 →
        0.71–1.05 s, SSNAL alone 0.45–0.53 → 0.19–0.30 s and 1.10–1.34 → 0.86–0.96 s).

        Polishes during the iterations (not forced) share a budget of Newton steps,
        ``POLISH_STEPS`` plus ``POLISH_STEPS_PER_CHECK`` for each candidate checked so far,
        a step on ``K·d`` unknowns costing ``K·d // POLISH_DENSE_MAX`` of it (at least one:
        measured, kNN10 mixture, λ = 0.3, cold, min of 2, ``auto``: at N = 3000 SSNAL's first
        candidate, K = 1744, d = 3, took 30 unweighted steps, 0.94 s, and failed; 1.65–1.78
        → 1.03–1.07 s, N = 1000 0.90–0.94 → 0.62–0.67 s, the other mixtures, the make_moons
        n = 5000 path and the kNN N = 2·10⁴ λ = 0.3 solve unchanged within the noise),
        and skip dense Newton systems larger than ``POLISH_DENSE_MAX`` (measured: SSNAL on
        the complete graph, N = 400, d = 5, λ = 6/N, all 400 clusters distinct: a dense
        Newton polish of the 2000 unknowns took 6.3 s and failed, while the next outer
        iteration certified to 1e-9). A small reduced problem may take at least
        ``SMALL_POLISH_STEPS`` (its steps still count in the budget): measured on logistic
        SON, complete graph, N = 200, d = 10, λ = 0.0035, the first candidate (K = 19) needed
        51 steps to merge into the answer (K = 5) and certify; with the 40 of the budget the
        polishes fell short and ADMM ran to iteration 9650 (66 s instead of 1.1 s). The
        budget counts steps, not seconds: a budget in time made the answer depend on the
        machine's load and on numba's compile cache. A partition polished without success
        is polished again by a later candidate with at most ``REPOLISH_GAIN`` times the
        least residual of its earlier candidates (measured: a polish had merged two clusters
        that stay apart; the reduced problem of the make_moons n = 5000 repair at λ = 0.2,
        204 super-users, then certified at ADMM iteration 1740 instead of 5000).
        ``step``: the candidate of a Newton step inside a subproblem (SSNAL's endgame,
        checked at every step): polished only when small, and not counted in the budget
        (measured, kNN10 mixture N = 5000, λ = 1: with polishes such checks took the
        certifier from 0.3 to 1.6–1.9 s, two polishes of 19 and 20 steps on 5313 unknowns).
        Returns True when a candidate is certified below ``tol`` (kept in :attr:`best`).
        """
        start = time.perf_counter()
        self.count += 1
        self.step_checks += step
        prob = self.prob
        labels = components(prob.n_users, prob.graph.edges, fused_mask)
        W = cluster_means(X, labels)
        X = W[labels]
        key = hash(labels.tobytes())
        stable, self.last_candidate = key == self.last_candidate, key
        # a small reduced problem is polished first, with one certificate for both
        small = W.size <= SMALL_NEWTON
        allowed = (self.do_polish is True and (small or not step)) \
            or (self.do_polish == "small" and small)
        may_polish = force_polish or (allowed and key != self.last_polished
                                      and (small or stable))
        ok = (not (may_polish and small)
              and self._certify(X, flows, self.tol).kkt_residual <= self.tol)
        if not (ok or may_polish) and allowed and key == self.last_polished:
            may_polish = self.last[1].kkt_residual <= REPOLISH_GAIN * self.polished_kkt
        if not ok and may_polish:
            self.last_polished = key
            self.polished_kkt = np.inf
            if force_polish:
                ok = self._polish_and_certify(labels, W, flows,
                                              certified=None if small else X)
            else:
                budget = (POLISH_STEPS
                          + POLISH_STEPS_PER_CHECK * (self.count - self.step_checks)
                          - self.polish_steps)
                if small:
                    budget = max(budget, SMALL_POLISH_STEPS)
                weight = max(1, W.size // POLISH_DENSE_MAX)
                ok = budget >= weight and self._newton_and_certify(
                    labels, W, flows, max_steps=budget // weight, weight=weight,
                    dense_max=POLISH_DENSE_MAX, certified=None if small else X)
        if self.best is None:  # the polish gave no finite candidate
            self._certify(X, flows, self.tol)
        if key == self.last_polished:
            self.polished_kkt = min(self.polished_kkt, self.last[1].kkt_residual)
        self.time += time.perf_counter() - start
        return ok

    def _polish_and_certify(self, labels, W, flows, certified=None, max_steps=None,
                            warm_merges=False, split_from=None, merge_start=None):
        """Newton on the reduced problem of ``labels``; if that does not certify, the
        merges of ``labels`` from its reduced problem (:meth:`_merged`; with
        ``warm_merges``, its solve started from Newton's candidate; else from
        ``merge_start``, a candidate ``(X, flows)``, when given), then Newton again.
        (Solvers ask for merges on warm partitions and on their last candidate only: early
        candidates are rarely refinements of the solution, and an inner solve for each
        would cost more than the iterations it saves.)

        ``split_from``: the candidate ``(X, Certificate)`` whose clusters ``labels`` split
        (a repair's rounds after the first). Its pieces start at their cluster's mean, where
        Newton merges them back at its first step, so the merges come first, started from
        that candidate and its flows (Newton on ``labels`` only where there is nothing to
        merge). Measured on the make_moons n = 2·10⁴ repair of λ = 0.2: each such Newton
        merged the pieces back, 16–200 ms and a certificate for the candidate already
        certified."""
        if split_from is None:
            if self._newton_and_certify(labels, W, flows, certified=certified,
                                        max_steps=max_steps):
                return True
            warm = ((self.last[0], self.last[1].flows) if warm_merges and self.last
                    else merge_start)
        else:
            warm = (split_from[0], split_from[1].flows)
        merged, W_merged = self._merged(labels, W, warm=warm)
        if merged is None:
            return split_from is not None and self._newton_and_certify(
                labels, W, flows, certified=certified, max_steps=max_steps)
        return self._newton_and_certify(merged, W_merged, flows, max_steps=max_steps)

    def _newton_and_certify(self, labels, W, flows, *, max_steps=None, dense_max=DENSE_MAX,
                            certified=None, weight=1):
        """Newton on the reduced problem of ``labels`` from ``W`` (:func:`polish`, its
        limits ``max_steps`` and ``dense_max``; the steps taken under a limit count in
        :attr:`polish_steps`), then the certificate of its result, unless that is
        ``certified`` (the candidate already certified, which Newton left unchanged: e.g. a
        single cluster at its mean)."""
        lab2, W2, _, steps = polish(self.prob, labels, W,
                                    gtol_rel=min(1e-3 * self.tol, 1e-11),
                                    max_steps=max_steps, dense_max=dense_max)
        if max_steps is not None:
            self.polish_steps += steps * weight
        if not np.all(np.isfinite(W2)):
            return False
        if certified is not None and np.array_equal(W2[lab2], certified):
            return False
        return self._certify(W2[lab2], flows, self.tol).kkt_residual <= self.tol

    def coarsen(self, fused_mask, X, flows):
        """A coarsening attempt for large problems: when the solver's partition has at most
        half the clusters of the last attempt (the first: ``N/4``), and fewer than
        ``COARSEN_FAILS`` attempts have failed so far, solve its reduced problem for its
        merges (:meth:`_merged`, any size), polish and certify; where that fails and the
        merged partition is small enough for merges (:func:`merge_solver`), repair it
        (:meth:`_repair`: split along the saturated flows, merge, polish). Early in a run
        the solver's exact fusions are nearly a refinement of the solution, but often with
        a few wrong fusions, which the reduced problem cannot undo and the repair does.
        Measured with ``method="admm"`` (kNN10 mixture, λ = 10; make_moons n = 5000), before
        → after the repair and the first attempt at ``N/4`` instead of ``N/2``: N = 2·10⁴
        66.9 → 2.5 s (three failed attempts, then 5180 iterations, before); N = 5·10⁴
        > 900 s → 21.8 s; N = 10⁵ 62 → 37.8 s (the attempt at K = 41 566 super-users took
        28–34 s of solving for its merges); make_moons λ = 0.2 44–82 s → 0.94 s, λ = 1.0 not
        certified in 20000 iterations (41–57 s) → 0.29 s. Returns True when a candidate is
        certified."""
        labels = components(self.prob.n_users, self.prob.graph.edges, fused_mask)
        k = int(labels.max()) + 1
        if k > self.coarse_k / 2 or self.coarsen_fails >= COARSEN_FAILS:
            return False
        self.coarse_k = k
        start = time.perf_counter()
        self.count += 1
        merged, W = self._merged(labels, cluster_means(X, labels), any_size=True)
        self.last = None
        ok = merged is not None and self._newton_and_certify(merged, W, flows)
        if not ok and self.last is not None and merge_solver(self.prob, W.shape[0]):
            ok = self._repair(merged, W, flows, REPAIR_ROUNDS, polished=True) > 0
        self.coarsen_fails += not ok
        self.time += time.perf_counter() - start
        return ok

    def repair(self, labels, W, flows, rounds=REPAIR_ROUNDS):
        """Partition repair: polish and certify ``labels`` (:meth:`_polish_and_certify`);
        where that fails, split its clusters along the edges its certificate's flows
        saturate (:func:`split_saturated`) and start again, at most ``rounds`` times, while
        the reduced problem is solved for its merges (:func:`merge_solver`) and each round
        at least halves the certified residual
        (``REPAIR_PROGRESS``). A certificate that stopped as soon as it knew the candidate
        fails is first run on until its bounds agree to ``REPAIR_FLOW_RTOL`` (the split needs
        the least residual's flows); if that one passes, the repair ends there. After a split
        the partition is a refinement of one that was nearly right and needs few merges, so
        their solve starts from the candidate that was split and its flows (measured on
        make_moons n = 5000 at λ = 0.2, rounds 2 and 3: 129 → 20 ms and 282 → 36 ms; started
        so for the warm partition of λ = 0.4, which merges 197 clusters into 82, it took
        425 ms instead of 236 ms, so not there), and no Newton precedes them
        (``split_from`` of :meth:`_polish_and_certify`: it would merge the pieces back;
        λ = 0.2 alone at n = 5000, two runs each: 0.43–0.44 → 0.38–0.39 s). Returns the
        number of rounds when a candidate is certified, else 0."""
        start = time.perf_counter()
        self.count += 1
        done = self._repair(labels, W, flows, rounds)
        self.time += time.perf_counter() - start
        return done

    def _repair(self, labels, W, flows, rounds, polished=False):
        """The rounds of :meth:`repair`; ``polished``: the first round's polish and
        certificate were just done (:attr:`last` holds its candidate)."""
        done = 0
        previous = np.inf
        for r in range(1, rounds + 1):
            if merge_solver(self.prob, W.shape[0]) is None:
                break
            if not (polished and r == 1):
                split_from = self.last if r > 1 else None  # the candidate split last round
                self.last = None
                if self._polish_and_certify(labels, W, flows,
                                            max_steps=REPAIR_NEWTON_STEPS,
                                            warm_merges=r > 1, split_from=split_from):
                    done = r
                    break
            if self.last is None:
                break
            X, cert = self.last
            if not cert.exact:  # stopped once it knew the answer: the least residual's flows
                cert = self._certify(X, cert.flows, rtol=REPAIR_FLOW_RTOL,
                                     max_iter=REPAIR_FLOW_ITER)
                if cert.kkt_residual <= self.tol:  # the targeted search gave up too soon
                    done = r
                    break
            if cert.kkt_residual > REPAIR_PROGRESS * previous:
                break
            previous = cert.kkt_residual
            split = split_saturated(self.prob, X, cert)
            if split is None:
                break
            labels, W, flows = split, cluster_means(X, split), cert.flows
        return done

    def _merged(self, labels, W, any_size=False, warm=None):
        """The merges of the partition ``labels`` at this λ from its reduced problem
        (:func:`merge_solver`, or ``any_size``), by the solve this certifier was given
        (``merges``; none: no merges), started from ``warm``, a candidate ``(X, flows)``,
        when given. Returns ``(labels, W)`` or ``(None, None)``."""
        if self.merges is None or not (any_size or merge_solver(self.prob, W.shape[0])):
            return None, None
        return self.merges(self.prob, labels, W, None, warm, coarsening=any_size)

    def untried(self, fused_mask, stable=False):
        """True when the partition of ``fused_mask`` is new and its Newton system small
        (``K · d ≤ SMALL_NEWTON``): such a candidate is worth certifying however early,
        since Newton on its reduced problem merges what is left to merge. (Measured with
        the bound at ``POLISH_MAX`` instead: make_moons n = 5000 at λ = 0.025, K = 2854, took
        24 s instead of 11 s, every early polish wasted; kNN N = 1e4 at λ = 3, K = 4,
        certifies after one outer iteration either way.) With ``stable``, only when the
        partition is also the one of the previous call (for solvers whose early iterates
        pass through wrong partitions: ADMM, kNN N = 3000, went K = 63, 7, 5 in its first
        checks, each wrong one a polish and a certificate of ~40 ms)."""
        if not self.do_polish:
            return False
        labels = components(self.prob.n_users, self.prob.graph.edges, fused_mask)
        small = (int(labels.max()) + 1) * self.prob.dim <= SMALL_NEWTON
        key = hash(labels.tobytes())
        seen, self.last_seen = key == self.last_seen, key
        return small and key != self.last_polished and (seen or not stable)

    def warm(self, X0, flows0, fused=None):
        """Certify the warm start's partition re-optimised at this λ before any iteration
        (Newton on its reduced problem; if that fails, its merges from the reduced problem
        solved by ADMM, then Newton again): along a path the partition changes at few λ,
        and mostly by merges, so most λ need no iteration. When that fails and the warm
        start is a solution at another λ (:attr:`warm_from`), the partition is repaired
        from there (:meth:`_warm_repair`, its first round being this one). ``flows0``: one
        guess of the flows or several (:func:`flow_guesses`); ``fused``: the partition's
        fused edges when known (:func:`_fused_of`), else those of ``X0``.

        The repair measured on the make_moons n = 2·10⁴ path (warm starts from the path's
        solutions, same session): at λ = 0.8, 2.4 and 3.0 the warm partition is the
        answer but the certificate's targeted search gave up early, at 0.6 and 2.8 it is
        one split away; repaired here they took 1.39, 1.32, 0.66, 1.52 and 0.70 s, against
        4.22, 4.28, 3.65, 3.96 and 2.81 s through the ADMM stage and its repair, with the
        same partitions. A warm start at this very λ (the ADMM stage's candidate handed to
        SSNAL by ``method="auto"``) was repaired by the caller already where the repair
        takes it (``K·d ≤ 2000``); its partition is polished here only when small
        (``K·d ≤ SMALL_NEWTON``), else left to the solver's first candidate, whose polish has
        a step budget. Measured (kNN10 mixture, N = 1000, λ = 0.3, K = 719, d = 3, cold
        caches, min of 2): this polish without a step limit took 53 Newton steps (0.62 s)
        and failed, and SSNAL's first candidate, of the same partition, was polished again
        for 50 steps (0.59 s); ``auto`` went from 1.43–1.46 s to 0.95 s (SSNAL alone: 0.42 s),
        the other kNN mixtures (N ≤ 10⁴, λ ∈ {0.03, 0.3, 3}) and make_moons n = 5000 at
        λ = 0.2 and 0.4 unchanged within the noise."""
        start = time.perf_counter()
        self.count += 1
        prob = self.prob
        if fused is None:
            fused = _fused_edges(prob, X0)
        labels = components(prob.n_users, prob.graph.edges, fused)
        W = cluster_means(X0, labels)
        self.last = None
        other_lam = self.warm_from is not None and self.warm_from.lam != prob.lam
        if self.warm_from is not None and not other_lam and W.size > SMALL_NEWTON:
            self.time += time.perf_counter() - start
            return False  # the solver's first candidate is polished within its budget
        ok = self._polish_and_certify(labels, W, flows0,
                                      merge_start=self._merge_start(labels, W, flows0))
        if not ok and other_lam and self.merges is not None:
            ok = self._warm_repair(labels, W, flows0)
        self.time += time.perf_counter() - start
        return ok

    def _merge_start(self, labels, W, flows0):
        """Where the merges of a warm partition start (:meth:`warm`): from its cluster means
        and the warm start's moved flows (the first guess of ``flows0``) when SSNAL solves
        them (:func:`merge_solver`), else from cold. Measured on the make_moons n = 2·10⁴
        path at λ = 0.4 from λ = 0.2's solution (1571 clusters merged into 457, 2026-11-29):
        SSNAL from cold 1.15–1.27 s (257 Newton steps, its first outer iterations at
        σ ≈ 58 took 50, 17, 29 and 35), from these 0.61–0.64 s (127 steps), from Newton's
        candidate and its certificate's flows 1.06 s. ADMM's merges (``K·d ≤ 2000``) were
        slower from a start: the n = 5000 path's λ = 0.4, 425 ms against 236 ms from cold
        (docs/solvers.md, "Partition repair")."""
        if flows0 is None or merge_solver(self.prob, W.shape[0]) != "ssnal":
            return None
        flows = flows0 if flows0.ndim == 2 else flows0[0]
        return W[labels], flows

    def _warm_repair(self, labels, W, flows):
        """The repair of a failed warm partition (:meth:`warm`), at most
        ``WARM_REPAIR_ROUNDS`` rounds, by a certifier of its own: a repair that fails
        leaves this one as the warm round left it (its best candidate, its polishes' step
        budget), so the solver's iterations and a later repair start from their own
        partitions. Measured on kNN10 mixture N = 2000 (``tests/test_repair.py``'s
        ``mixture``), λ = 1.2 from the path's solution at 0.9 (K = 388 → 215): with all
        ``REPAIR_ROUNDS`` in this certifier the warm repair failed after three rounds
        (1.3 s), then ``auto``'s repair restarted from its best candidate and failed again
        (2.1 s against 0.8 s): 8.5–9.0 s against 5.7–6.1 s before warm repairs (6.46 s now)."""
        fixer = Certifier(self.prob, self.tol, polish=True, merges=self.merges)
        fixer.last = self.last
        self.warm_repair = fixer._repair(labels, W, flows, WARM_REPAIR_ROUNDS, polished=True)
        if self.warm_repair:
            self.best, self.last = fixer.best, fixer.last
        return self.warm_repair > 0


class Run:
    """One solve by a fast solver, around its own iterations.

    Checks the options every fast solver takes (``tol``, ``max_iter``, ``polish`` and the
    warm start ``X0``, ``flows0``, ``warm_start``: :func:`warm_start_arrays`), answers
    before any iteration where it can (:meth:`closed_form`, :meth:`warm_partition`),
    certifies the solver's candidates (:meth:`certify`, :meth:`coarsen`) and builds the
    :class:`Solution` (:meth:`solution`). ``merges`` is the reduced-problem solve the
    :class:`Certifier` is given.
    """

    def __init__(self, prob: SumOfNorms, method: str, *, merges, tol, max_iter, polish, X0,
                 flows0, warm_start):
        self.start = time.perf_counter()
        self.prob, self.method = prob, method
        self.tol, self.max_iter = check_common(tol, max_iter)
        self.polish = check_polish(polish)
        self.X0, self.flows0 = warm_start_arrays(prob, X0, flows0, warm_start)
        self.warm_fused = (_fused_of(prob, warm_start) if warm_start is not None and X0 is None
                           else None)
        self.flow_guesses = flow_guesses(prob, warm_start, self.flows0)
        self.certifier = Certifier(prob, self.tol, polish=self.polish, warm_from=warm_start,
                                   merges=merges)

    def closed_form(self):
        """λ = 0 or no edges: the problem separates into ``x_i = argmin f_i``; its
        :class:`Solution` (else ``None``)."""
        prob = self.prob
        if prob.lam != 0.0 and prob.graph.n_edges > 0:
            return None
        X = user_minimisers(prob.loss, self.X0,
                            tol=1e-13 * (1.0 + float(np.abs(prob.loss.F).max())))
        certifier = Certifier(prob, self.tol, polish=False)
        certifier._certify(X, np.zeros((prob.graph.n_edges, prob.dim)))
        return _solution(prob, certifier, converged=True, n_iter=0,
                         time_s=time.perf_counter() - self.start, method=self.method,
                         message="", history={"separable": True}, stage="closed form")

    def warm_partition(self):
        """The solution of a warm start whose partition, re-optimised, certifies at this λ
        (:meth:`Certifier.warm`), else ``None``."""
        certifier = self.certifier
        if self.X0 is None or not self.polish or not certifier.warm(self.X0, self.flow_guesses,
                                                                   self.warm_fused):
            return None
        history = {"warm_partition_certified": True}
        if certifier.warm_repair:
            history["warm_repair"] = certifier.warm_repair
        return _solution(self.prob, certifier, converged=True, n_iter=0,
                         time_s=time.perf_counter() - self.start, method=self.method,
                         message="", history=history, stage="warm partition")

    def certify(self, hist, it, fused, X, flows, step=False) -> bool:
        """Certify the candidate of iteration ``it`` (:class:`Certifier`; ``step``: of a
        Newton step inside it), recorded in ``hist["certify_at"]`` and
        ``hist["certified_kkt"]``."""
        hist["certify_at"].append(it)
        ok = self.certifier(fused, X, flows, step=step)
        hist["certified_kkt"].append(self.certifier.best[0])
        return ok

    def coarsen(self, hist, it, fused, X, flows) -> bool:
        """A coarsening attempt (:meth:`Certifier.coarsen`, with ``polish`` only); when it
        certifies, ``hist["coarsened_at"] = it``."""
        ok = self.polish is True and self.certifier.coarsen(fused, X, flows)
        if ok:
            hist["coarsened_at"] = it
        return ok

    def final_polish(self, last) -> bool:
        """Certify the ``last`` candidate ``(fused, X, flows)`` of iterations that stopped
        short, with a forced polish (when ``polish`` is True); True when it certifies."""
        self.certifier(*last, force_polish=self.polish is True)
        return self.certifier.best[0] <= self.tol

    def solution(self, last, *, converged, n_iter, history, stage="iterations", message="",
                 unconverged_note="", polished=False):
        """The :class:`Solution`. When the iterations did not converge, their ``last``
        candidate is first given the :meth:`final_polish` (``stage`` "final polish"; with
        ``polished``, it was given it already), ``message`` defaulting to the iteration
        limit and followed by ``unconverged_note`` if that does not certify either."""
        if not converged:
            stage = "final polish"
            converged = (self.certifier.best[0] <= self.tol if polished
                         else self.final_polish(last))
            message = message or f"iteration limit max_iter={self.max_iter} reached"
            if unconverged_note and not converged:
                message += "; " + unconverged_note
        return _solution(self.prob, self.certifier, converged=converged, n_iter=n_iter,
                         time_s=time.perf_counter() - self.start, method=self.method,
                         message=message, history=history, stage=stage,
                         final=("the final Newton polish of the last partition"
                                if self.polish is True else "the last candidate"))


def repair(prob: SumOfNorms, start: Solution, *, merges, tol, rounds=None):
    """Repair the partition of an uncertified ``start`` (:meth:`Certifier.repair`): its
    :class:`Solution` (``stage="partition repair"``, the method and iterations of
    ``start``, whose time it includes) when a repaired candidate certifies, else
    ``None``. ``rounds`` defaults to ``REPAIR_ROUNDS`` (0: no repair).
    ``history["repair"]`` records the rounds, the time and, for the solver that goes on,
    the best certified residual seen."""
    begin = time.perf_counter()
    certifier = Certifier(prob, tol, polish=True, merges=merges)
    labels = start.labels()
    rounds = certifier.repair(labels, cluster_means(start.X, labels), start.flows,
                              REPAIR_ROUNDS if rounds is None else rounds)
    spent = time.perf_counter() - begin
    start.history["repair"] = {"rounds": rounds, "time_s": spent, "certified": bool(rounds),
                               "kkt_residual": None if certifier.best is None
                               else certifier.best[0]}
    if not rounds:
        return None
    history = dict(start.history)
    return _solution(prob, certifier, converged=True, n_iter=start.n_iter,
                     time_s=start.time_s + spent, method=start.method, message="",
                     history=history, stage="partition repair")


def _solution(prob: SumOfNorms, certifier: Certifier, *, converged, n_iter, time_s, method,
              message, history, stage="iterations", final=None):
    """The :class:`Solution` of the certifier's best candidate. With ``stage="final
    polish"`` the ``message`` (why the iterations stopped) is kept even when the answer
    certified then, followed by that fact and where the answer came from (``final``)."""
    kkt, X, cert, flows, ftol = certifier.best
    converged = bool(converged and kkt <= certifier.tol)
    if not converged and not message:
        message = (f"certified KKT residual {kkt:.2e} above tol={certifier.tol:.1e}")
    if converged and stage == "final polish":
        message = (f"{message}; the answer comes from {final}, certified to {kkt:.2e} ≤ "
                   f"tol={certifier.tol:.1e}")
    elif converged:
        message = ""
    history["time_certify_s"] = certifier.time
    history["n_certify"] = certifier.count
    start = time.perf_counter()
    slope = _flow_slope(prob, certifier.warm_from, X, flows, cert.fused,
                        certifier.tol * (1 + cert.grad_norm), history, cert.flow_iterations == 0)
    return Solution(X=X, objective=cert.objective, kkt_residual=kkt, converged=converged,
                    n_iter=int(n_iter), time_s=time_s + time.perf_counter() - start,
                    method=method, lam=prob.lam, certificate=cert, fuse_tol=ftol,
                    kkt_tol=certifier.tol,
                    status="converged" if converged else "not_converged",
                    message=message, history=history, flows=flows, stage=stage,
                    graph=prob.graph, flow_slope=slope)
