"""Solvers: one entry point, :func:`solve`, and one result type, :class:`Solution`.

Methods
-------
``"cvxpy"``
    The reference (:mod:`convexfl.solvers.reference`): cvxpy + Clarabel, exact to
    interior-point accuracy, for every problem and loss — the slow, independent
    cross-check (measured ~20 s at N = 200 on a complete graph where ``"auto"`` takes
    ~0.01–0.3 s; ``python -m benchmarks``).
``"admm"``
    Network-lasso ADMM (:mod:`convexfl.solvers.admm`): every loss, any graph; per-user
    proximal steps, closed-form edge updates, over-relaxation, residual balancing.
``"pdmm"``
    PDMM as in Armacki et al. Algorithm 1 (:mod:`convexfl.solvers.pdmm`): random user
    subsets, auxiliary duals, damping, Bregman terms, message accounting, z-freezing.
``"ssnal"``
    Semismooth-Newton augmented Lagrangian for convex clustering (quadratic loss only;
    :mod:`convexfl.solvers.ssnal`), the fastest here at certified accuracy.
``"torch"``
    The network-lasso ADMM of ``"admm"`` for the quadratic loss in PyTorch
    (:mod:`convexfl.solvers.torch_admm`), on ``device="cpu"``, ``"cuda"`` or ``"auto"``, in
    ``dtype`` float64 (default) or float32; its candidates are certified on the host like
    every method's. For a GPU: on the CPU the numba methods are faster. Needs the optional
    ``torch`` extra (``pip install 'convexfl[torch]'``); never chosen by ``"auto"``.
``"auto"`` (the default)
    For the quadratic loss: ``"ssnal"`` on dense graphs (at least a quarter of all pairs)
    and when a warm start is given (paths); on sparse graphs, first ``AUTO_ADMM_ITER`` = 100
    ADMM iterations (certified as they go; below ``AUTO_POLISH_BELOW`` = 5000 users a small
    partition stable over two checks is polished), then, if they did not certify, a repair
    of their partition (split along the certificate's saturated flows, polished, at most
    8 rounds while ``K·d ≤ 2000``: :meth:`~convexfl.solvers._common.Certifier.repair`,
    ``stage="partition repair"``), then ``"ssnal"`` warm-started from them.
    ``"admm"`` for the other losses
    (``"cvxpy"`` for the squared penalty). Measured by ``python -m benchmarks.auto_rule``
    on this 2-core machine, 2026-11-25 (time to KKT ≤ 1e-6; docs/solvers.md), from N
    clusters to one. Complete graph: N = 1000, SSNAL 0.2–0.9 s vs ADMM 0.8–7.9 s; N = 400,
    SSNAL 0.03–0.27 s vs ADMM 0.13–1.7 s; N = 150, ADMM/SSNAL from 0.18 to 11 (0.008–0.26 s
    either way). kNN10 mixture, N = 1e4: with 9929 clusters ADMM 29 s, SSNAL 3.4 s, the
    two stages 3.7 s; with 11, ADMM 1.5 s, SSNAL 3.6 s, the two stages 0.8 s; with 7, ADMM
    1.6 s, SSNAL 7.3 s, the two stages 1.9 s. N = 3000 with 2124 clusters: ADMM 24 s
    (uncertified), SSNAL 2.7 s, the two stages 2.2 s. Worst case measured for the two
    stages: N = 1000 with 719 clusters, 1.1 s against SSNAL's 0.6 s.

Every method works in the standard units of :mod:`convexfl.units` (data centred, of unit
spread; the solution is reported in yours), so its tolerances mean the same at any data scale
and offset. Options with units that you pass (warm starts, ADMM's and PDMM's ρ, PDMM's η)
are read in your units; defaults are in standard units.

All methods accept ``tol`` (the target **certified** KKT residual, normalised as in
:mod:`convexfl.certificates`) and ``max_iter`` (the method's iteration limit), and return a
:class:`Solution` whose ``kkt_residual`` is computed from ``X`` by
:mod:`convexfl.certificates`, so that no solver is trusted on its own word. A run that
stops without reaching ``tol`` has ``converged=False`` and says why in ``message``. A method
that cannot handle a loss raises :class:`IncompatibleLossError`. The fast methods compile
their numba kernels on first use (cached on disk afterwards), never at import.

Layout, read top-down (each module imports only those above it)
----------------------------------------------------------------
``base``
    :class:`Solution` and the errors.
``_common_kernels``, ``_admm_kernels``, ``_pdmm_kernels``, ``_ssnal_kernels``
    The numba kernels (arrays in, arrays out; every loss formula from
    :mod:`convexfl._kernels`).
``_common``
    What the fast solvers share: option checks, warm starts, the Newton polish on a
    reduced problem, the :class:`~convexfl.solvers._common.Certifier` (the certified
    stopping test) and :class:`~convexfl.solvers._common.Run` (the set-up and finish
    around a solver's iterations). It solves no (SON) problem itself: where a certifier
    needs the merges of a partition it calls the solve it was given.
``admm``
    Network-lasso ADMM, and :func:`~convexfl.solvers.admm.reduced_merges`, the one place
    a reduced problem is solved for its merges (ADMM to 1e-9, whose own certifier is given
    no merges, so the recursion stops there). ADMM passes it to its certifier.
``pdmm``, ``ssnal``
    The other fast solvers; they take ``reduced_merges`` from ``admm``.
``torch_admm``
    ADMM's iteration in PyTorch (quadratic loss), driven by ``admm``'s outer loop
    (:func:`~convexfl.solvers.admm.iterate`); imports torch, so it is loaded only when used.
``reference``
    cvxpy + Clarabel, polished by ``_common``'s Newton.
this module
    :func:`solve`, which loads a fast solver's module on first use (so that
    ``import convexfl`` does not import scikit-learn, which PDMM uses, nor torch).
"""

from __future__ import annotations

import contextlib
import warnings

import numpy as np

from ..losses import uniqueness_caveat
from ..problems import Reduced
from ..units import options_to, standardise
from .base import IncompatibleLossError, NonUniqueWarning, Solution, SolverError
from .reference import solve_reference

__all__ = ["solve", "Solution", "SolverError", "IncompatibleLossError", "NonUniqueWarning",
           "METHODS", "BLAS_THREADS"]


def _admm(prob, **options):
    from .admm import solve_admm
    return solve_admm(prob, **options)


def _pdmm(prob, **options):
    from .pdmm import solve_pdmm
    return solve_pdmm(prob, **options)


def _ssnal(prob, **options):
    from .ssnal import solve_ssnal
    return solve_ssnal(prob, **options)


def _torch(prob, **options):
    from .torch_admm import solve_torch
    return solve_torch(prob, **options)


def _auto(prob, **options):
    from .._kernels import QUADRATIC
    from ..problems import SquaredPenalty
    if isinstance(prob, SquaredPenalty):
        return solve_reference(prob, **options)
    loss = getattr(prob, "loss", None)
    if loss is None or loss.code != QUADRATIC:
        return _admm(prob, **options)
    if isinstance(prob, Reduced):  # its inner (SON) problem, expanded, as every method
        from ._common import son_dispatch
        return son_dispatch(prob, "auto", _auto, options)
    graph = getattr(prob, "graph", None)
    n = getattr(prob, "n_users", 0)
    if _uninformative(options.get("warm_start")) and options.get("X0") is None \
            and options.get("flows0") is None:
        options = {k: v for k, v in options.items() if k != "warm_start"}
    if graph is None or graph.n_edges >= 0.25 * n * (n - 1) / 2:
        return _ssnal(prob, **options)
    return _admm_then_ssnal(prob, **options)


def _uninformative(warm_start):
    """A warm start at λ = 0 (each model its own minimiser, no flows) holds nothing that the
    cold start lacks, and SSNAL from it skips the ADMM warm-up that serves the cold start
    (measured, make_moons n = 5000, λ = 0.2 after λ = 0 on a path: 7.8–8.6 s warm, 3.7–5.2 s
    cold with the warm-up)."""
    if warm_start is None or getattr(warm_start, "lam", None) != 0.0:
        return False
    flows = getattr(warm_start, "flows", None)
    return flows is None or not np.any(flows)


AUTO_ADMM_ITER = 100  # ADMM iterations before SSNAL on sparse graphs (method="auto")
AUTO_POLISH_BELOW = 5000  # ...polishing their small stable partitions below this many users


WARM_KEYS = ("X0", "flows0", "warm_start")


def _admm_then_ssnal(prob, **options):
    """``AUTO_ADMM_ITER`` ADMM iterations, certified as they go; if they do not certify,
    the repair of their partition (:func:`~convexfl.solvers._common.repair`; measured in
    docs/solvers.md, "Partition repair"), then SSNAL warm-started from their iterate and
    flows. ``history["admm_warm_up"]`` records the first stage, ``history["repair"]`` the
    repair; ``time_s`` counts all three. A warm start (``X0``, ``flows0``,
    ``warm_start``) goes to the ADMM stage, which first tries its partition at this λ
    (along a path that certifies most λ with no iteration, repairing it where it fails:
    :meth:`~convexfl.solvers._common.Certifier.warm`). Where it does not, SSNAL from the
    warm start itself was slow: make_moons n = 2·10⁴, λ = 0.4 from the solution at
    λ = 0.2, 654 s (its 200 outer iterations, then the final polish), against 60 s from
    cold through this ADMM stage; measured again 2026-11-27 (SSNAL's ``"sparsified"``
    Newton systems): 33.2 s from that warm start, 60.3 s from cold, 28.1 s through this
    stage (whose 100 iterations, 5.1 s, and failed repair, 3.4 s, leave KKT 0.23 but a
    start from which SSNAL needs 59 → 32 set-ups). Below ``AUTO_POLISH_BELOW`` users the ADMM
    stage polishes a small partition once it is stable across two checks, checked every 5
    iterations (``polish="small"``, ``check_every=5``); measured, kNN10 mixture, λ = 3, the
    loaded 2-core machine: N = 400 33 -> 15 ms, 1000 65 -> 55 ms, 3000 240 -> 150 ms with
    the polish, then 17 -> 14, 64 -> 53, 171 -> 148 ms with checks every 5 instead of 10; at
    N = 1e4 the polish made it slower, 1.15 -> 1.89 s (the certificate of an early ADMM
    candidate took ~1000 flow iterations), so not there."""
    from ._common import repair
    from .admm import reduced_merges

    first_opts = {k: options[k] for k in ("tol", *WARM_KEYS) if k in options}
    small = prob.n_users < AUTO_POLISH_BELOW
    warm = any(options.get(k) is not None for k in WARM_KEYS)
    polish = True if warm else "small" if small else False  # True: the warm partition
    first = _admm(prob, max_iter=AUTO_ADMM_ITER, polish=polish,
                  check_every=5 if small else 10, **first_opts)
    if first.converged:
        return first
    rounds = None if options.get("polish", True) is True else 0  # a repair polishes
    fixed = repair(prob, first, merges=reduced_merges, tol=first.kkt_tol, rounds=rounds)
    if fixed is not None:
        return fixed
    sol = _ssnal(prob, warm_start=first, **{k: v for k, v in options.items()
                                            if k not in WARM_KEYS})
    sol.history["admm_warm_up"] = {"n_iter": first.n_iter, "time_s": first.time_s,
                                   "kkt_residual": first.kkt_residual}
    sol.history["repair"] = first.history["repair"]
    sol.time_s += first.time_s + first.history["repair"]["time_s"]
    return sol


METHODS = {"cvxpy": solve_reference, "admm": _admm, "pdmm": _pdmm, "ssnal": _ssnal,
           "torch": _torch, "auto": _auto}


def solve(prob, method: str = "auto", **options) -> Solution:
    """Solve a convexfl problem.

    Parameters
    ----------
    prob : SumOfNorms, SquaredPenalty or Reduced
    method : str
        One of :data:`METHODS`: ``"auto"`` (default: the fast certified method for the
        problem), ``"admm"``, ``"pdmm"``, ``"ssnal"`` (quadratic loss), ``"torch"``
        (quadratic loss, ADMM in PyTorch on ``device=``; the ``torch`` extra), or
        ``"cvxpy"`` — the reference, an independent cross-check, orders of magnitude slower.
    **options
        Passed to the method; all accept ``tol`` and ``max_iter``.

    Returns
    -------
    Solution

    Warns
    -----
    NonUniqueWarning
        When the solution is certified but some ``f_i`` is not strictly convex near it: it
        may not be the only solution (:meth:`convexfl.losses.Loss.strictly_convex_at`).
    """
    try:
        fn = METHODS[method]
    except (KeyError, TypeError):
        raise ValueError(f"method: expected one of {sorted(METHODS)}, got {method!r}") from None
    units, std = standardise(prob)
    with _blas_limit():
        if units is None or units.is_identity:
            sol = fn(prob, **options)
        else:
            sol = units.solution_from(fn(std, **options_to(units, prob, options)), prob)
    _warn_if_not_unique(prob, sol)
    return sol


BLAS_THREADS = 1  # BLAS threads inside solve(); None: leave the BLAS library's own setting
_BLAS = []  # the threadpoolctl controller, made on first use


def _blas_limit():
    """A context with at most :data:`BLAS_THREADS` BLAS threads. The solvers' dense
    factorisations are small (N ≤ 4000): measured on this 2-core machine with another
    process busy, SSNAL on the complete graph N = 400 took 0.61 s with OpenBLAS's 2 threads
    (a 400 × 400 Cholesky waiting ~0.5 s on a descheduled thread) and 0.055 s with one;
    N = 1000: 0.41 s and 0.33 s (``python -m benchmarks.versus``). Set
    ``convexfl.solvers.BLAS_THREADS = None`` to keep the library's threads."""
    if BLAS_THREADS is None:
        return contextlib.nullcontext()
    if not _BLAS:
        from threadpoolctl import ThreadpoolController
        _BLAS.append(ThreadpoolController())
    return _BLAS[0].limit(limits=BLAS_THREADS, user_api="blas")


def _warn_if_not_unique(prob, sol):
    if not sol.converged:
        return
    loss, X = prob.loss, sol.X
    if isinstance(prob, Reduced) and "W" in sol.history:  # uniqueness of the centroids
        loss, X = prob.inner.loss, sol.history["W"]
    caveat = uniqueness_caveat(loss, X)
    if caveat:
        warnings.warn(caveat, NonUniqueWarning, stacklevel=3)
