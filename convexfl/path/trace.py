"""Tracing a path: the default λ grid and :func:`son_path` (warm starts, checkpoints, λ̂)."""

from __future__ import annotations

import hashlib
import inspect
import math
import os
import time
import warnings

import numpy as np

from .._validation import as_float_array, as_int, as_scalar
from ..bounds import fusion_threshold
from ..bounds.fusion import split_cut
from ..problems import SumOfNorms
from .interpolate import Segment, cluster_exact
from .result import SolutionPath
from .store import _base, _check_checkpoint, _finished, _load_path

GRID_SOCP_MAX = 50_000  # default_grid solves λ̂'s SOCP up to this many flow unknowns (E·d)


def default_grid(prob: SumOfNorms, n_lambdas: int = 30, *, lam_min_ratio: float = 1e-3,
                 include_zero: bool = True):
    """``[0,] λ̂·geomspace(lam_min_ratio, 1, n)``: a geometric grid ending at the exact fusion
    threshold λ̂ (:func:`convexfl.bounds.fusion_threshold`), or, where its SOCP would have
    more than ``GRID_SOCP_MAX`` unknowns (``E·d``), at λ̂'s certified upper bound (the models
    are fused there, certified by the least-squares flow).

    Returns
    -------
    grid : ndarray
    fusion : Bound
        λ̂ with its provenance, exact or an interval of certified bounds (for a
        disconnected graph the grid ends at the λ above which every component is fused).
    """

    n_lambdas = as_int(n_lambdas, "n_lambdas", low=2)
    lam_min_ratio = as_scalar(lam_min_ratio, "lam_min_ratio", low=0.0, low_inclusive=False,
                              high=1.0)
    fb = fusion_threshold(prob, max_socp_size=GRID_SOCP_MAX)
    top = fb.hi if np.isfinite(fb.hi) else float(fb.inputs["per_component"])
    n_geo = n_lambdas - 1 if include_zero else n_lambdas
    if top <= 0:
        grid = np.zeros(1)
    else:
        grid = np.geomspace(top * lam_min_ratio, top, n_geo)
        if include_zero:
            grid = np.r_[0.0, grid]
    return grid, fb


def _fingerprint(prob: SumOfNorms, method: str, options: dict) -> str:
    h = hashlib.sha256()
    for arr in prob.loss.arrays[1:]:
        h.update(np.ascontiguousarray(arr).tobytes() if isinstance(arr, np.ndarray)
                 else repr(arr).encode())
    h.update(str(prob.loss.arrays[0]).encode())
    h.update(type(prob.loss).__name__.encode())
    h.update(np.ascontiguousarray(prob.graph.edges).tobytes())
    h.update(np.ascontiguousarray(prob.graph.weights).tobytes())
    h.update(method.encode())
    h.update(repr(sorted((k, repr(v)) for k, v in options.items())).encode())
    return h.hexdigest()[:24]


def _warm_kwargs(fn, prev, X_last, flows_last) -> dict:
    """The warm-start keywords for ``fn``: ``warm_start=`` a previous Solution, else ``X0=``
    (and ``flows0=``), as far as its signature shows them. A method that only has
    ``**options`` (e.g. a lazy wrapper) is offered ``warm_start=`` (or ``X0``/``flows0`` on a
    resume); :func:`son_path` drops them if the method refuses them."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return {}
    open_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    if prev is not None and ("warm_start" in params or open_kw):
        return {"warm_start": prev}
    out = {}
    X = prev.X if prev is not None else X_last
    flows = prev.flows if prev is not None else flows_last
    if X is not None and ("X0" in params or open_kw):
        out["X0"] = X
    if flows is not None and ("flows0" in params or open_kw):
        out["flows0"] = flows
    return out


def _solve_warm(solve, prob, method, opts, warm, meta):
    """``solve`` with the warm-start keywords; if the method refuses them (a TypeError that
    names one), solve cold and note it. Returns ``(solution, warm_ok)``."""
    try:
        return solve(prob, method=method, **opts, **warm), True
    except TypeError as exc:
        if not warm or not any(k in str(exc) for k in warm):
            raise
        meta["notes"].append(f"method {method!r} does not accept {sorted(warm)}: solved "
                             "without warm starts")
        return solve(prob, method=method, **opts), False


def son_path(prob: SumOfNorms, lambdas=None, *, method: str = "auto", n_lambdas: int = 30,
             lam_min_ratio: float = 1e-3, include_zero: bool = True, warm_start: bool = True,
             fuse_tol: float | None = None, checkpoint=None, progress: bool | None = None,
             **solver_options) -> SolutionPath:
    r"""Warm-started solution path of (SON) over a grid of λ (SON convention).

    .. math::

        X^*(λ) = \arg\min_X \sum_i f_i(x_i) + λ \sum_{(i,j)∈E} w_{ij}\|x_i - x_j\| .

    Parameters
    ----------
    prob : SumOfNorms
        The loss and graph (its own λ is ignored).
    lambdas : array, optional
        λ ≥ 0 (sorted increasingly, duplicates dropped). Default: :func:`default_grid`
        (``0`` then ``n_lambdas − 1`` geometric points ending at the exact λ̂).
    method : str
        Any :data:`convexfl.solvers.METHODS` key (default ``"auto"``; ``"cvxpy"`` is the
        slow reference cross-check); ``solver_options`` are passed through.
    warm_start : bool
        Start each solve from the previous one when the method accepts ``warm_start=``
        (a Solution) or ``X0=``/``flows0=`` (checked with :func:`inspect.signature`).
        With warm starts (and the default ``fuse_tol``), a partition that has held for
        ``k ≥ 2`` λ with two clusters (or ``d = 1``) is tried ``k`` λ ahead: when the
        solution there has the same partition, the λ in between are certified by
        interpolation (:mod:`convexfl.path.interpolate`: the candidate between the two
        solutions and its explicit flows, whose residual is computed at every λ and must be
        within the solver's ``tol``); else the jump is halved, and its solution kept for
        when the path reaches it. They are listed in ``meta["interpolated"]``, with
        ``n_iter = 0``. A partition kept over a long stretch is so covered with a number of
        solves logarithmic in its length (make_moons n = 5000, 551 λ: 158 of the 169
        two-cluster λ, 0.31 → 0.07 s). A two-cluster partition's jump goes straight to the
        last λ below the cut between its clusters (λ̂ when they fuse directly); λ̂ is then
        proved from that solution, and the λ above it are certified with the global model
        and no solve (stage ``"fused above λ̂"``; :func:`_toward_fusion`).
    fuse_tol : float, optional
        Fusion distance for the clusters (default: each solution's own ``fuse_tol``).
    checkpoint : path-like, optional
        ``<checkpoint>.npz`` / ``.json`` are rewritten atomically after every finished λ
        (a corrupt or foreign pair is refused with an error naming it; a record whose
        models, objective or residual are not finite is recomputed, with a warning);
        if they exist (same problem, method, options and grid) the path resumes after the
        last finished λ without redoing it.
    progress : bool, optional
        A tqdm progress bar (default: when there are more than 20 λ).

    Returns
    -------
    SolutionPath
        Its ``meta["notes"]`` say when the cluster count is not monotone (a
        ``UserWarning`` is also issued) or a solve did not converge.
    """
    from ..solvers import METHODS, solve

    if not isinstance(prob, SumOfNorms):
        raise TypeError(f"prob: expected a SumOfNorms problem, got {type(prob).__name__}")
    if method not in METHODS:
        raise ValueError(f"method: expected one of {sorted(METHODS)}, got {method!r}")
    if fuse_tol is not None:
        fuse_tol = as_scalar(fuse_tol, "fuse_tol", low=0.0)
    fusion = None
    if lambdas is None:
        grid, fusion = default_grid(prob, n_lambdas, lam_min_ratio=lam_min_ratio,
                                    include_zero=include_zero)
    else:
        grid = np.unique(as_float_array(lambdas, "lambdas", ndim=1))
        if grid[0] < 0:
            raise ValueError(f"lambdas: must be >= 0, got {grid[0]}")
    if checkpoint is not None:
        _check_checkpoint(checkpoint)
    fp = _fingerprint(prob, method, solver_options)
    done = None
    if checkpoint is not None and os.path.exists(_base(checkpoint) + ".npz"):
        done = _load_path(SolutionPath, checkpoint, "checkpoint")
        if done.meta.get("fingerprint") != fp:
            raise ValueError(f"checkpoint: {_base(checkpoint)} belongs to another problem, "
                             "method or solver options (fingerprint mismatch); remove it or "
                             "choose another name")
        if done.grid is None or len(done.grid) != len(grid) or \
                not np.allclose(done.grid, grid, rtol=1e-12, atol=0):
            raise ValueError(f"checkpoint: {_base(checkpoint)} was computed on another λ grid")
    n, d = prob.n_users, prob.dim
    R = len(grid)
    lam_hat = math.nan
    if fusion is not None and fusion.is_number:
        lam_hat = fusion.value
    elif done is not None:
        lam_hat = done.lam_hat
    meta = {"fingerprint": fp, "solver_options": {k: repr(v) for k, v in
                                                  solver_options.items()},
            "n_users": n, "dim": d, "loss": type(prob.loss).__name__,
            "graph": prob.graph.kind, "warm_start": bool(warm_start), "notes": []}
    cols = {"X": np.zeros((R, n, d)), "labels": np.zeros((R, n), np.int64),
            "n_clusters": np.zeros(R, np.int64), "objective": np.zeros(R),
            "kkt_residual": np.zeros(R), "n_iter": np.zeros(R, np.int64),
            "time_s": np.zeros(R), "converged": np.zeros(R, bool), "fuse_tol": np.zeros(R)}
    start = 0
    X_last = flows_last = None
    if done is not None:
        start = _finished(done)
        if start < len(done):
            warnings.warn(f"checkpoint: {_base(checkpoint)}.npz holds a non-finite record at "
                          f"λ = {done.lambdas[start]:.6g}; it and the {len(done) - start - 1} "
                          "after it are recomputed", UserWarning, stacklevel=2)
        for name in cols:
            cols[name][:start] = getattr(done, name)[:start]
        meta["notes"] = list(done.meta.get("notes", []))
        meta["interpolated"] = [lam for lam in done.meta.get("interpolated", [])
                                if start and lam <= grid[start - 1]]
        meta["resumed_at"] = start
        if start:
            X_last = done.X[start - 1]
            flows_last = done.meta.get("_last_flows") if start == len(done) else None
    fn = METHODS[method]
    show = (R > 20) if progress is None else bool(progress)
    from tqdm.auto import tqdm

    def snapshot(r_done, flows, copy=True):
        sp = SolutionPath(lambdas=grid[:r_done].copy(),
                          **{k: v[:r_done].copy() if copy else v[:r_done]
                             for k, v in cols.items()},
                          method=method, grid=grid, lam_hat=lam_hat, meta=dict(meta))
        if flows is not None:
            sp.meta["_last_flows"] = flows
        return sp

    interpolated = meta.setdefault("interpolated", [])

    def record(r, sol, wall):
        """Store the solution ``sol`` of λ = grid[r]."""
        tol_r = sol.fuse_tol if fuse_tol is None else fuse_tol
        same = (prev is not None and sol.X is prev.X and tol_r == cols["fuse_tol"][r - 1])
        lab = cols["labels"][r - 1] if same else sol.labels(tol_r)
        _put(cols, r, sol.X, lab, sol.objective, sol.kkt_residual, sol.n_iter,
             sol.time_s if sol.time_s else wall, sol.converged, tol_r)
        if not sol.converged:
            meta["notes"].append(f"λ = {grid[r]:.6g}: not converged ({sol.message})")
        if checkpoint is not None:
            snapshot(r + 1, sol.flows).save(checkpoint)
        bar.update(1)
        bar.set_postfix(clusters=int(cols["n_clusters"][r]))

    def solve_at(r, warm_from):
        """``(solution, wall seconds)`` at λ = grid[r], warm-started from ``warm_from``."""
        nonlocal warm_start
        t0 = time.perf_counter()
        warm = _warm_kwargs(fn, warm_from, X_last, flows_last) if warm_start else {}
        sol, accepted = _solve_warm(solve, prob.with_lam(float(grid[r])), method,
                                    solver_options, warm, meta)
        warm_start = warm_start and accepted
        return sol, time.perf_counter() - t0

    prev = split = kkt_tol = fused_penalty = None
    stable, max_gap = 0, R  # λ recorded with prev's partition; the longest jump worth trying
    cut = None  # (λ̂ or the cut of the last two-cluster partition, that partition's edges)
    ahead = {}  # grid index → (solution, wall seconds) solved ahead of the loop
    bar = tqdm(total=R, initial=start, disable=not show, desc="son_path", unit="λ")
    try:
        r = start
        while r < R:
            lam = float(grid[r])
            t0 = time.perf_counter()
            fused_run = False
            reach = stable
            if cut is not None and cols["n_clusters"][r - 1] == 2 and lam < cut[0]:
                reach = int(np.searchsorted(grid, cut[0])) - r  # up to the last λ below it
            gap = min(reach, max_gap, R - r, min(ahead, default=R) - r + 1)
            if r in ahead:  # solved as the end of a jump that did not certify
                sol, wall = ahead.pop(r)
            elif warm_start and r > start and _stays_fused(prev, cols["n_clusters"][r - 1],
                                                          prob, lam):
                if fused_penalty is None:
                    fused_penalty = prob.graph.penalty(prev.X)
                sol = _fused_at(prev, prob.with_lam(lam), fused_penalty)
                wall = time.perf_counter() - t0
                fused_run = True
            elif (warm_start and r > start and fusion is not None and lam >= fusion.hi
                  and (above := _fused_above(prev, prob.with_lam(lam), fusion)) is not None):
                sol, wall = above, time.perf_counter() - t0
            elif (warm_start and fuse_tol is None and gap >= 2
                  and _interpolable(prob, prev, cols["n_clusters"][r - 1])):
                b = r - 1 + gap
                sol_b, wall_b = ahead.pop(b) if b in ahead else solve_at(b, prev)
                done = _interpolate(prob, prev, sol_b, grid[r:b])
                if done is None:  # another partition or a residual above tol: halve
                    ahead[b] = (sol_b, wall_b)
                    max_gap = gap // 2
                    continue
                for q, (X, objective, kkt, seconds) in enumerate(done, start=r):
                    _put(cols, q, X, cols["labels"][r - 1], objective, kkt, 0, seconds, True,
                         cols["fuse_tol"][r - 1])
                    interpolated.append(float(grid[q]))
                    if checkpoint is not None:
                        snapshot(q + 1, None).save(checkpoint)
                    bar.update(1)
                stable += len(done)
                r, sol, wall = b, sol_b, wall_b
            else:
                sol, wall = solve_at(r, prev)
            if not fused_run:
                fused_penalty = None
            record(r, sol, wall)
            if _same_partition(prev, sol):
                stable += 1
            else:
                stable, max_gap = 1, R
            prev, X_last, flows_last = sol, sol.X, sol.flows
            kkt_tol = sol.kkt_tol
            if sol.converged and cols["n_clusters"][r] == 2:
                split = sol  # the last two-cluster solution: λ̂ from its cut
                fusion, cut = _toward_fusion(prob, sol, grid, r, fusion, cut)
                lam_hat = fusion.value if fusion is not None and fusion.is_number else lam_hat
            r += 1
    finally:
        bar.close()
    if fusion is None or not fusion.is_number:  # exact from the split where it decides
        fusion = _fusion_threshold(prob, split, None if fusion is None else GRID_SOCP_MAX)
    if fusion is not None:
        lam_hat = fusion.value if fusion.is_number else math.nan
        meta["fusion_threshold"] = fusion.to_dict()
        if kkt_tol is not None:  # something was solved in this call
            _fuse_above(prob, grid, cols, fusion, kkt_tol, meta)
    path = snapshot(R, None, copy=False)  # the columns are not written after this
    path.meta.pop("_last_flows", None)
    if not path.monotone:
        ev = path.splits[0]
        msg = (f"the cluster structure is not monotone along the path: a cluster splits "
               f"between λ = {ev['lam_lo']:.6g} and {ev['lam_hi']:.6g} "
               f"({len(path.splits)} split event(s)); possible with general weights, or a sign "
               "that fuse_tol is too loose for the solver's accuracy")
        if msg not in path.meta["notes"]:
            path.meta["notes"].append(msg)
        warnings.warn(msg, UserWarning, stacklevel=2)
    if np.isfinite(lam_hat) and grid[-1] >= lam_hat and path.n_clusters[-1] != 1 and \
            prob.graph.is_connected:
        path.meta["notes"].append(f"the last λ ≥ λ̂ = {lam_hat:.6g} but the solution has "
                                  f"{int(path.n_clusters[-1])} clusters at fuse_tol: solver "
                                  "accuracy")
    if checkpoint is not None:
        path.save(checkpoint)
    return path


def _put(cols, r, X, labels, objective, kkt, n_iter, seconds, converged, fuse_tol):
    """Write the record of λ = grid[r] into the path's columns."""
    cols["X"][r] = X
    cols["labels"][r] = labels
    cols["n_clusters"][r] = int(labels.max()) + 1
    cols["objective"][r] = objective
    cols["kkt_residual"][r] = kkt
    cols["n_iter"][r] = n_iter
    cols["time_s"][r] = seconds
    cols["converged"][r] = converged
    cols["fuse_tol"][r] = fuse_tol


def _same_partition(a, b):
    """Whether the certificates of ``a`` and ``b`` treat the same edges as fused."""
    fa = None if a is None else a.certificate.fused
    fb = b.certificate.fused
    return fa is not None and fb is not None and np.array_equal(fa, fb)


def _interpolable(prob, sol, n_clusters):
    """Whether a stretch starting at ``sol`` is worth certifying by interpolation
    (:mod:`convexfl.path.interpolate`): ``sol`` certified with its flows, its clusters' models
    exactly equal, and two clusters or ``d = 1``, where the interpolation is the solution in
    between for the quadratic loss (and in ``d = 1`` for any affine gradient). With more
    clusters in ``d ≥ 2`` the directions between them turn with λ: measured on the
    make_moons n = 5000 path, the interpolation over three steps of 0.2 left residuals of
    1e-2 (6 clusters) and 2e-2 (11 clusters), so it is not tried there."""
    return (sol is not None and sol.converged and sol.flows is not None
            and (n_clusters == 2 or prob.dim == 1) and cluster_exact(prob, sol))


def _interpolate(prob, a, b, lambdas):
    """``[(X, objective, kkt_residual, seconds)]`` at each of ``lambdas`` (strictly between
    ``a.lam`` and ``b.lam``) by the :class:`~convexfl.path.interpolate.Segment` from ``a``
    to ``b``, or ``None`` when there is none or some λ is not certified within
    ``b.kkt_tol``."""
    segment = Segment.between(prob, a, b)
    if segment is None:
        return None
    out = []
    for lam in lambdas:
        t0 = time.perf_counter()
        at = segment.at(float(lam))
        if at is None or at[3] > b.kkt_tol:
            return None
        X, objective, _, kkt, _ = at
        out.append((X, objective, kkt, time.perf_counter() - t0))
    return out


def _stays_fused(prev, n_clusters, prob, lam):
    """Whether ``prev`` (the solution at the previous, smaller λ) is certified with every
    component of the graph fused: then it is the solution at ``lam`` too (:func:`_fused_at`)."""
    return (prev is not None and prev.converged and prev.lam is not None and lam >= prev.lam
            and n_clusters == prob.graph.n_components)


def _fused_at(prev, prob, penalty):
    """The certified solution of ``prob`` from a certified solution fused in every component
    at a smaller λ: the same models and the same flows. With every edge fused, the gradients
    ``∇f_i(x_i)`` do not depend on λ, and flows with ``‖u_e‖ ≤ λ' w_e`` satisfy
    ``‖u_e‖ ≤ λ w_e`` for ``λ ≥ λ'``: the certified KKT residual stays a certified bound, with
    the same flows (the argument that fusion persists above λ̂). The objective at the new λ
    is ``F_λ(X) = F_λ'(X) + (λ − λ') P(X)``, with ``penalty`` ``P(X) = Σ w_ij ‖x_i − x_j‖``
    (models fused within ``fuse_tol`` may add a tiny penalty), computed once for the run of
    such λ. No solve: 337 of the 551 λ of the make_moons path (``benchmarks.versus``) are of
    this kind."""
    from dataclasses import replace

    objective = prev.objective + (prob.lam - prev.lam) * penalty
    return replace(prev, lam=prob.lam, objective=objective, n_iter=0, time_s=0.0,
                   certificate=replace(prev.certificate, objective=objective),
                   stage="warm partition",
                   message="fused at the previous λ: the same models and flows certify "
                           "every larger λ")


def _toward_fusion(prob, split, grid, r, fusion, cut):
    """``(fusion, cut)`` after the certified two-cluster solution ``split`` at ``grid[r]``.

    ``cut``: ``(λ̂, None)`` once λ̂ is known exactly, else ``(c, fused)``, the cut ``c`` of a
    two-cluster partition (:func:`~convexfl.bounds.fusion.split_cut`, computed once per
    partition: its certificate's ``fused`` edges) — a certified lower bound on λ̂, and λ̂
    itself when the two clusters fuse directly. The path jumps from a two-cluster λ to the
    last λ below it (:mod:`convexfl.path.interpolate` certifies those between; past it, as
    before, the jumps double). At that last λ, λ̂ is computed from ``split``
    (:func:`~convexfl.bounds.fusion_threshold`: its bracket, no SOCP) and the λ above it
    are certified without a solve (:func:`_fused_above`). Measured on the make_moons
    n = 5000 path: its two-cluster stretch and the λ above λ̂ took 16 solves (the jumps
    doubled, went past λ̂ and were halved back), now 2."""
    if fusion is not None and fusion.is_number:
        return fusion, (fusion.value, None)
    fused = split.certificate.fused
    if cut is None or cut[1] is None or not np.array_equal(cut[1], fused):
        c = split_cut(prob, split)
        cut = None if c is None else (c, fused)
    if cut is not None and grid[r] < cut[0] <= grid[min(r + 1, len(grid) - 1)]:
        try:
            bound = fusion_threshold(prob, split=split, max_socp_size=0)
        except Exception:  # noqa: BLE001 - λ̂ is then computed after the path, as before
            return fusion, cut
        if bound.is_number:
            return bound, (bound.value, None)
    return fusion, cut


def _fused_above(prev, prob, fusion):
    """The certified solution of ``prob`` at ``λ ≥ fusion.hi`` (λ̂, or its certified upper
    bound) without a solve: every model at the global model ``y*``, certified from the flow
    that proves that bound (it routes ``−g`` within ``fusion.hi · w``, so within ``λ w``);
    ``prev`` gives the solver's fields. None when there is no such flow (a disconnected
    graph) or that certificate is above ``prev.kkt_tol`` (the path then solves)."""
    from dataclasses import replace

    from ..certificates import kkt_residual

    if fusion.inputs.get("_flow") is None or not prob.graph.is_connected:
        return None
    start = time.perf_counter()
    X = np.tile(np.asarray(fusion.inputs["y_star"], float), (prob.n_users, 1))
    cert = kkt_residual(prob, X, fuse_tol=prev.fuse_tol, flows=fusion.inputs.get("_flow"),
                        target=prev.kkt_tol)
    if cert.kkt_residual > prev.kkt_tol:
        return None
    return replace(prev, X=X, objective=cert.objective, kkt_residual=cert.kkt_residual,
                   converged=True, n_iter=0, time_s=time.perf_counter() - start,
                   lam=prob.lam, certificate=cert, flows=cert.flows, status="converged",
                   message=f"λ ≥ {fusion.hi:.12g} ≥ λ̂: the global model, certified by the "
                           "flow that proves it", history={"fused_above": fusion.hi},
                   flow_slope=None, stage="fused above λ̂")


def _fusion_threshold(prob, split, max_socp_size=None):
    """λ̂ after a path: from the cut of its last two-cluster solution ``split`` when that
    closes the bracket, else the SOCP up to ``max_socp_size`` (:func:`fusion_threshold`;
    above it, the certified bounds); ``None`` with a warning when none can be computed (λ̂
    is optional on a given grid)."""
    try:
        return fusion_threshold(prob, split=split, max_socp_size=max_socp_size)
    except Exception as exc:  # noqa: BLE001
        warnings.warn(f"son_path: the fusion threshold could not be computed ({exc})",
                      UserWarning, stacklevel=3)
        return None


def _fuse_above(prob, grid, cols, fusion, kkt_tol, meta):
    """At λ ≥ λ̂ the fused ``X = 1 y*ᵀ`` is optimal; interior-point iterates near λ̂ are not
    quite fused (λ̂ is a degenerate point). For every record at λ ≥ λ̂ with more than one
    cluster or not converged, certify the fused candidate, starting from the flow that
    proves λ̂, and keep it when its certified KKT residual is not worse than the record's
    (or than ``kkt_tol``)."""
    from ..certificates import kkt_residual

    lam_hat = fusion.hi  # the models are fused above it (λ̂ itself when exact)
    if not (np.isfinite(lam_hat) and prob.graph.is_connected):
        return
    X = np.tile(np.asarray(fusion.inputs["y_star"], float), (prob.n_users, 1))
    todo = (grid >= lam_hat) & ((cols["n_clusters"] > 1) | ~cols["converged"])
    for r in np.flatnonzero(todo):
        lam = float(grid[r])
        cert = kkt_residual(prob.with_lam(lam), X, fuse_tol=cols["fuse_tol"][r],
                            flows=fusion.inputs.get("_flow"))
        if cert.kkt_residual > max(cols["kkt_residual"][r], kkt_tol):
            continue
        meta["notes"].append(f"λ = {lam:.6g} ≥ λ̂: the solver's iterate was not fused "
                             f"(KKT {cols['kkt_residual'][r]:.2e}); the fused global model is "
                             f"certified instead (KKT {cert.kkt_residual:.2e})")
        cols["X"][r] = X
        cols["labels"][r] = 0
        cols["n_clusters"][r] = 1
        cols["objective"][r] = cert.objective
        cols["kkt_residual"][r] = cert.kkt_residual
        cols["converged"][r] = cert.kkt_residual <= kkt_tol
