r"""PDMM for (SON) in a federated server–users setting (Armacki et al., Algorithm 1; the
parallel direction method of multipliers of Wang, Banerjee & Luo, NIPS 2014).

Splitting (paper eq. (14)): ``min Σ_i f_i(x_i) + Σ_p λ w_p ‖z_p‖`` s.t.
``x_{a_p} − x_{b_p} − z_p = 0`` for every pair ``p``:

- ``splitting="ordered"`` (the paper's): one ``z`` per **ordered** pair, ``(i, j)`` and
  ``(j, i)`` for every edge, each with weight ``w_p = w_ij / 2`` so that the objective is
  exactly (SON) (λ in the canonical SON convention; the paper's eq. (14) λ is ``λ_SON / 2``,
  see :func:`convexfl.problems.from_paper_lambda`). User ``i`` owns the ``z_ij``.
- ``splitting="upper"``: one ``z`` per edge ``i < j`` (weight ``w_ij``), owned by ``i``.

Per iteration t: a random set S_P of ``fraction · N`` users; each updates ``x_i`` and the
``z``'s it owns by minimising the augmented Lagrangian in that block with everything else at
iterate t, using the auxiliary duals ``μ̂`` and a Bregman term ``(η/2)‖· − ·^t‖²``
(``z``-update = block soft-thresholding; ``x``-update = a proximal step of ``f_i``, closed
form for the quadratic loss, safeguarded Newton otherwise). Then the duals of the pairs
owned by S_P (S_D): ``μ ← μ + τρ r``, ``μ̂ ← μ − νρ r`` with ``r = x_a − x_b − z``.

**Generic vs printed update.** The ``x_i``-update here contains *every* constraint in which
``x_i`` appears: ``(i, j)`` with ``+x_i`` and ``(j, i)`` with ``−x_i`` (docs/math.md §1.5, generic
PDMM). The paper's printed eq. (16) lists only the ``(i, j)`` terms; with ordered pairs the
omitted ``(j, i)`` terms are the mirror constraints, which the generic update includes.
``x_update="printed"`` runs eq. (16) as printed (for the check ``armacki.pdmm_printed``, which
measures what it converges to); its fixed points satisfy (KKT) blockwise at λ/2 only, so its
iterates are not certified for ``prob`` (expect ``converged=False``; ``history["X_last"]``
holds them).

**Messages** (the paper's accounting, per iteration): uplink = the primal blocks updated
(``x``'s and ``z``'s, S_P), downlink = S_P + S_D vectors of size d. ``history`` records them
with the objective ``F(x^t)`` of every iteration.

**Freezing** (the paper's closing remark): with ``freeze_after=k``, a ``z_p`` that came out
exactly 0 in ``k`` consecutive updates is frozen at 0; its owner stops updating and sending
it (one uplink message saved per selected owner and frozen pair) and uses its own ``x`` in
place of the other user's in later updates, so the server need not send it ``x_j`` (one
downlink message saved); the server keeps updating the pair's dual.
``history["uplink_saved"]`` and ``["downlink_saved"]`` count the messages this avoids. This
is a heuristic: a frozen pair that should separate later stays fused in PDMM's iterates,
and on the paper's problem with ``splitting="upper"`` the iterates' objective can stall or
rise after freezing (the final certificate still judges the returned result).

Paper defaults (App. C): ``rho=10, eta=10, tau=0.8, nu=0.2, fraction=0.4`` and a zero start
(:data:`PAPER_DEFAULTS`). Stopping is on the certificate (as for every convexfl method); the
returned ``X`` is the certified candidate (clustered by PDMM's exact zeros ``z = 0``, refined
by Newton on the reduced problem when ``polish=True``); the per-iteration history is PDMM's
own iterates.
"""

from __future__ import annotations

import numpy as np
from sklearn.utils import check_random_state

from .._validation import as_int, as_scalar
from ..certificates import normalised
from . import _pdmm_kernels
from ._common import Run, check_bool, son_dispatch, user_minimisers
from ._common_kernels import gradient_residual
from ._pdmm_kernels import pdmm_residuals
from .admm import reduced_merges
from .base import SolverError

__all__ = ["solve_pdmm", "PAPER_DEFAULTS"]

PAPER_DEFAULTS = {"rho": 10.0, "eta": 10.0, "tau": 0.8, "nu": 0.2, "fraction": 0.4,
                  "splitting": "ordered", "zero_start": True}


def solve_pdmm(prob, *, tol: float = 1e-6, max_iter: int = 5000, rho: float = 10.0,
               eta: float = 10.0, eta_z: float | None = None, tau: float = 0.8,
               nu: float = 0.2, fraction: float = 0.4, splitting: str = "ordered",
               freeze_after: int | None = None, zero_start: bool = True,
               x_update: str = "generic", random_state=None, check_every: int = 50,
               polish: bool = True,
               record_objective: bool = True, X0=None, flows0=None, warm_start=None,
               newton_tol: float = 1e-10, newton_max_iter: int = 30):
    """Solve (SON) by PDMM (see the module docstring).

    Parameters
    ----------
    prob : SumOfNorms or Reduced
    tol, max_iter : float, int
        The certified KKT target and the limit on PDMM iterations, as for every
        method (:mod:`convexfl.solvers`).
    rho : float
        Augmented-Lagrangian penalty ρ > 0 (paper: 10).
    eta, eta_z : float
        Bregman weights η_i of the x-updates and η_ij of the z-updates (≥ 0; paper: 10;
        ``eta_z`` defaults to ``eta``).
    tau, nu : float
        Dual damping τ > 0 and backward step ν ≥ 0 (paper: 4/5 and 1/5).
    fraction : float
        Share of users in S_P per iteration, ``0 < fraction ≤ 1`` (paper: 0.4).
    splitting : {"ordered", "upper"}
        One ``z`` per ordered pair (the paper's) or per edge ``i < j``.
    freeze_after : int, optional
        Freeze ``z_p`` at 0 after this many consecutive exact zeros (None: never).
    zero_start : bool
        Start every variable at 0 (the paper's); otherwise at the local models.
    x_update : {"generic", "printed"}
        ``"generic"``: every constraint containing ``x_i`` (converges to (SON) at λ);
        ``"printed"``: only the ``(i, j)`` terms, as in the paper's eq. (16) (ordered
        splitting only; not a solver of (SON) at λ — see the module docstring).
    random_state : int, Generator or None
        Seeds the choice of S_P.
    check_every : int
        Iterations between looks at the residuals (and possible certificates).
    polish : bool or "small"
        Refine the certified candidate by Newton on its reduced problem (``"small"``: only
        reduced problems with ``K·d ≤ 300``; see :func:`~convexfl.solvers.admm.solve_admm`).
    record_objective : bool
        Record ``F(x^t)`` at every iteration (``history["objective"]``).
    X0, flows0, warm_start
        Warm start (models, edge flows — split equally over the ordered pairs — or a
        ``Solution``); overrides ``zero_start``.
    newton_tol, newton_max_iter
        Local Newton solves of the x-updates.
    """
    opts = dict(tol=tol, max_iter=max_iter, rho=rho, eta=eta, eta_z=eta_z, tau=tau, nu=nu,
                fraction=fraction, splitting=splitting, freeze_after=freeze_after,
                zero_start=zero_start, x_update=x_update, random_state=random_state,
                check_every=check_every,
                polish=polish, record_objective=record_objective, X0=X0, flows0=flows0,
                warm_start=warm_start, newton_tol=newton_tol, newton_max_iter=newton_max_iter)
    return son_dispatch(prob, "pdmm", _solve_son, opts)


def _csr(n, keys, vals, extra=None):
    order = np.argsort(keys, kind="stable")
    ptr = np.concatenate([[0], np.cumsum(np.bincount(keys, minlength=n))]).astype(np.int64)
    out = [np.ascontiguousarray(vals[order], dtype=np.int64)]
    if extra is not None:
        out.append(np.ascontiguousarray(extra[order], dtype=np.int64))
    return (ptr, *out)


def _solve_son(prob, *, tol, max_iter, rho, eta, eta_z, tau, nu, fraction, splitting,
               freeze_after, zero_start, x_update, random_state, check_every, polish,
               record_objective,
               X0, flows0, warm_start, newton_tol, newton_max_iter):
    run = Run(prob, "pdmm", merges=reduced_merges, tol=tol, max_iter=max_iter, polish=polish,
              X0=X0, flows0=flows0, warm_start=warm_start)
    rho = as_scalar(rho, "rho", low=0.0, low_inclusive=False)
    eta = as_scalar(eta, "eta", low=0.0)
    eta_z = eta if eta_z is None else as_scalar(eta_z, "eta_z", low=0.0)
    tau = as_scalar(tau, "tau", low=0.0, low_inclusive=False)
    nu = as_scalar(nu, "nu", low=0.0)
    fraction = as_scalar(fraction, "fraction", low=0.0, low_inclusive=False, high=1.0)
    if splitting not in ("ordered", "upper"):
        raise ValueError(f"splitting: expected 'ordered' or 'upper', got {splitting!r}")
    if x_update not in ("generic", "printed"):
        raise ValueError(f"x_update: expected 'generic' or 'printed', got {x_update!r}")
    if x_update == "printed" and splitting != "ordered":
        raise ValueError("x_update: 'printed' (the paper's eq. (16)) needs "
                         f"splitting='ordered', got splitting={splitting!r}")
    freeze_after = 0 if freeze_after is None else as_int(freeze_after, "freeze_after", low=1)
    zero_start = check_bool(zero_start, "zero_start")
    try:
        rng = check_random_state(random_state)
    except ValueError as exc:
        raise ValueError(f"random_state: {exc}") from None
    check_every = as_int(check_every, "check_every", low=1)
    record_objective = check_bool(record_objective, "record_objective")
    newton_tol = as_scalar(newton_tol, "newton_tol", low=0.0, low_inclusive=False)
    newton_max_iter = as_int(newton_max_iter, "newton_max_iter", low=1)
    done = run.closed_form()
    if done is not None:
        return done

    tol, max_iter, X0, flows0 = run.tol, run.max_iter, run.X0, run.flows0
    graph, loss = prob.graph, prob.loss

    n, d = prob.n_users, prob.dim
    E = graph.n_edges
    ei, ej = graph.edges[:, 0], graph.edges[:, 1]
    ecap = prob.lam * graph.weights
    if splitting == "ordered":
        pa, pb = np.r_[ei, ej], np.r_[ej, ei]
        cap = np.r_[ecap, ecap] / 2.0
    else:
        pa, pb, cap = ei.copy(), ej.copy(), ecap.copy()
    pa = np.ascontiguousarray(pa, dtype=np.int64)
    pb = np.ascontiguousarray(pb, dtype=np.int64)
    P = pa.shape[0]
    pidx = np.arange(P)
    if x_update == "generic":
        nptr, npair, nsign = _csr(n, np.r_[pa, pb], np.r_[pidx, pidx],
                                  np.r_[np.ones(P, np.int64), -np.ones(P, np.int64)])
    else:   # eq. (16): x_i sees only the pairs (i, j) it heads
        nptr, npair, nsign = _csr(n, pa, pidx, np.ones(P, np.int64))
    optr, opair = _csr(n, pa, pidx)

    if X0 is not None:
        X = np.array(X0, dtype=float)
    elif zero_start:
        X = np.zeros((n, d))
    else:
        X = user_minimisers(loss)
    Z = np.ascontiguousarray(X[pa] - X[pb]) if X0 is not None else np.zeros((P, d))
    MU = np.zeros((P, d))
    if flows0 is not None:
        if splitting == "ordered":
            MU = np.r_[flows0, -flows0] / 2.0
        else:
            MU = flows0.copy()
    MUH = MU.copy()
    zero_count = np.zeros(P, np.int64)
    frozen = np.zeros(P, np.uint8)
    n_sel = max(1, int(round(fraction * n)))
    arrays = loss.arrays
    hist = {"objective": [], "uplink": [], "downlink": [], "uplink_saved": [],
            "downlink_saved": [], "check_iter": [], "kkt_proxy": [], "certify_at": [],
            "certified_kkt": [], "n_frozen": []}

    def flows_of(MU):
        return MU[:E] - MU[E:] if splitting == "ordered" else MU

    def fused_edges(Z):
        zero = ~np.any(Z != 0.0, axis=1)
        return zero[:E] & zero[E:] if splitting == "ordered" else zero

    it = 0
    converged = False
    trigger = max(1e-2, tol)
    warm = X0 is not None and flows0 is not None
    while it < max_iter:
        T = 1 if (warm and it == 0) else min(check_every, max_iter - it)
        sel = np.empty((T, n_sel), np.int64)
        for t in range(T):
            sel[t] = rng.choice(n, n_sel, replace=False)
        obj = np.zeros(T)
        up = np.zeros(T, np.int64)
        down = np.zeros(T, np.int64)
        ups = np.zeros(T, np.int64)
        downs = np.zeros(T, np.int64)
        # looked up at each call: theory_checks.armacki.pdmm_rate wraps it to observe PDMM
        _pdmm_kernels.pdmm_run(*arrays, pa, pb, cap, nptr, npair, nsign, optr, opair, sel, X,
                               Z, MU, MUH, zero_count, frozen, freeze_after, rho, eta, eta_z,
                               tau, nu, newton_tol, newton_max_iter, graph.edges, ecap,
                               record_objective, obj, up, down, ups, downs)
        it += T
        if record_objective:
            hist["objective"].extend(obj.tolist())
        hist["uplink"].extend(up.tolist())
        hist["downlink"].extend(down.tolist())
        hist["uplink_saved"].extend(ups.tolist())
        hist["downlink_saved"].extend(downs.tolist())
        if not (np.all(np.isfinite(X)) and np.all(np.isfinite(Z))
                and np.all(np.isfinite(MU))):
            raise SolverError(f"pdmm diverged: non-finite iterates at iteration {it} (the "
                              f"damping tau={tau}, nu={nu} or rho={rho} is outside the range "
                              "where PDMM converges; the paper uses tau=0.8, nu=0.2, rho=10)")
        flows = flows_of(MU)
        gres, gnorm = gradient_residual(arrays[0], *arrays[1:6], arrays[7], X, graph.edges,
                                        flows)
        r, zn = pdmm_residuals(pa, pb, X, Z)
        proxy = max(normalised(gres, gnorm), r / max(1.0, zn, float(np.linalg.norm(X))))
        hist["check_iter"].append(it)
        hist["kkt_proxy"].append(proxy)
        hist["n_frozen"].append(int(frozen.sum()))
        if proxy <= trigger or (warm and it == 1):
            if run.certify(hist, it, fused_edges(Z), X, flows):
                converged = True
                break
            trigger = min(trigger, proxy) / 10.0
    hist["messages"] = {"uplink": int(np.sum(hist["uplink"])),
                        "downlink": int(np.sum(hist["downlink"])),
                        "uplink_saved": int(np.sum(hist["uplink_saved"])),
                        "downlink_saved": int(np.sum(hist["downlink_saved"]))}
    hist["X_last"] = X
    return run.solution((fused_edges(Z), X, flows_of(MU)), converged=converged, n_iter=it,
                        history=hist)
