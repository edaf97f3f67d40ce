r"""The exact fusion threshold λ̂ (docs/math.md §1.4) and the two computations it rests on,
shared by the rest of :mod:`convexfl.bounds`:

- the cluster minimisers ``w_k† = argmin Σ_{i∈C_k} f_i`` (one cluster: the global model
  ``y*``), by a closed form, damped Newton, or the cvxpy reference;
- the min-max flow SOCP ``ρ = min max_e ‖u_e‖/w_e`` routing given node imbalances (Clarabel):
  at ``−∇f_i(y*)`` it is λ̂; inside each cluster it is the partition certificate's ρ_k(λ).
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from .._validation import as_int, check_partition
from ..problems import SumOfNorms, oracle
from ._base import Bound, _affine_parts, _check_son, _pairwise_max


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


def check_method(method) -> str:
    """``method``, a solver of :data:`convexfl.solvers.METHODS`, or raise naming it."""
    from ..solvers import METHODS

    if not isinstance(method, str) or method not in METHODS:
        raise ValueError(f"method: expected one of {sorted(METHODS)}, got {method!r}")
    return method


def _minimisers(loss, labels, method="cvxpy", solver_options=None):
    """``w_k† = argmin Σ_{i∈C_k} f_i`` per cluster, shape (K, d), computed in standard units
    (:mod:`convexfl.units`): in closed form for affine gradients, else by Newton, and where
    Newton fails by ``method`` on the oracle problem (then Newton from its answer)."""
    from ..solvers import solve

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
        sol = solve(oracle(loss, labels), method=method, **(solver_options or {}))
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
        from ..solvers import SolverError
        raise SolverError(f"min-max flow SOCP: Clarabel returned {status}")
    u = np.asarray(sol.x)[1:].reshape(E, d)
    return float(np.max(np.linalg.norm(u, axis=1) / np.asarray(weights, float))), u


SPLIT_RTOL = 1e-9  # the widest relative bracket [cut, flow] taken as λ̂ from a split
SPLIT_FLOW_ITER = 200  # flow-search iterations for the bracket's upper end


def _split_bracket(prob: SumOfNorms, y, G, split):
    """``(cut, up, u)``, a bracket ``cut ≤ λ̂ ≤ up`` from a two-cluster solution ``split``
    certified just below λ̂, with ``u`` a flow routing ``−g`` exactly within ``up · w``; or
    ``None`` when ``split`` is not a certified two-cluster solution.

    Lower end, any cut ``S``: every flow routing ``−g`` sends ``Σ_{i∈S} g_i`` across the cut's
    edges, so ``λ̂ ≥ ‖Σ_{i∈S} g_i‖ / w(δS)``. When the two clusters of ``split`` fuse
    directly (the generic last merge) this is λ̂ itself (it is where the reduced two-cluster
    problem fuses). Upper end: the cut's edges saturated along ``−Σ_S g`` (out of ``S``) and
    held there, the flows inside the two clusters found by the certificate's flow search
    (:func:`~convexfl.certificates._min_residual`, from the certified flows of ``split``),
    then the least-squares (potential) correction of what imbalance is left: a flow that
    routes ``−g`` to rounding, whose largest ``‖u_e‖/w_e`` is ``up``. (Inside the clusters
    the flows have slack, so the search is quick; over all edges from the potential flow it
    stalls, λ̂ being a degenerate point: measured on make_moons n = 5000, relative gap 2e-2
    after 1000 iterations.)
    """
    from ..certificates import _min_residual, _potential_solver, elimination_order

    graph = prob.graph
    if not _is_split(prob, split):
        return None
    S = split.labels() == 0
    i, j = graph.edges.T
    cut = S[i] != S[j]
    c, g_S = _cut(graph, G, S)
    norm = float(np.linalg.norm(g_S))
    if norm == 0.0:
        return None
    u = np.empty_like(G, shape=(graph.n_edges, G.shape[1]))
    out_of_S = np.where(S[i[cut]], 1.0, -1.0)  # edge (i, j) leaves S when i ∈ S
    u[cut] = -(out_of_S * c * graph.weights[cut])[:, None] * (g_S / norm)
    inside = ~cut
    imbalance = _imbalance(G, graph.edges[cut], u[cut])
    u[inside] = _min_residual(imbalance, graph.edges[inside], graph.weights[inside], c,
                              np.asarray(split.flows, float)[inside], 1e-3,
                              SPLIT_FLOW_ITER, rank=elimination_order(graph))[3]
    u += _potential_solver(prob.n_users, graph.edges, graph.weights,
                           rank=elimination_order(graph))[0](_imbalance(G, graph.edges, u))
    return c, float(np.max(np.linalg.norm(u, axis=1) / graph.weights)), u


def _is_split(prob, split):
    """Whether ``split`` is a certified two-cluster solution with flows on a connected graph."""
    return (split.converged and split.flows is not None and split.n_clusters == 2
            and prob.graph.is_connected)


def _cut(graph, G, S):
    """``(‖Σ_{i∈S} g_i‖ / w(δS), Σ_{i∈S} g_i)`` for the users ``S`` (a boolean mask)."""
    i, j = graph.edges.T
    g_S = G[S].sum(axis=0)
    return float(np.linalg.norm(g_S)) / float(graph.weights[S[i] != S[j]].sum()), g_S


def split_cut(prob: SumOfNorms, split) -> float | None:
    """The cut ``‖Σ_{i∈S} g_i‖ / w(δS)`` between the clusters of a certified two-cluster
    solution ``split`` (``g_i = ∇f_i(y*)``, ``y*`` the global model), a λ in the (SON)
    convention: a certified lower bound on λ̂ (every flow routing ``−g`` sends
    ``Σ_{i∈S} g_i`` across the cut), and λ̂ itself when the two clusters fuse directly
    (:func:`fusion_threshold` with ``split`` proves it, at a flow search's cost; this is
    one pass over the users). None when ``split`` is not a certified two-cluster solution
    on a connected graph."""
    _check_son(prob)
    _check_split(prob, split)
    if not _is_split(prob, split):
        return None
    y = _minimisers(prob.loss, np.zeros(prob.n_users, np.int64))[0]
    return _cut(prob.graph, prob.loss.grad(np.tile(y, (prob.n_users, 1))),
                split.labels() == 0)[0]


def _imbalance(G, edges, u):
    """``G + B u`` (the certificate's :func:`~convexfl._flow_kernels.flow_residual`)."""
    from .._flow_kernels import flow_residual

    return flow_residual(np.ascontiguousarray(G, dtype=float), np.ascontiguousarray(edges),
                         np.ascontiguousarray(u, dtype=float))


def fusion_threshold(prob: SumOfNorms, *, method: str = "cvxpy", solver_options=None,
                     split=None, max_socp_size=None) -> Bound:
    r"""The exact fusion threshold λ̂: all ``x_i`` coincide iff ``λ ≥ λ̂``.

    With ``y*`` the global model and ``g_i = ∇f_i(y*)`` (``Σ_i g_i = 0``), the fused ``X``
    solves (KKT) iff a flow with capacities ``λ w_ij`` routes ``−g``:

    .. math::

        \hat λ = \min\{λ : ∃ u \text{ antisymmetric on } E,\ \|u_{ij}\| ≤ λ w_{ij},\
                 \textstyle\sum_j u_{ij} = -g_i\ ∀ i\},

    a min-max flow SOCP (solved with Clarabel to 1e-11). Works for any loss and graph; if
    ``Σ f_i`` has several minimisers, this is the threshold for the computed ``y*``.

    Parameters
    ----------
    prob : SumOfNorms
    method, solver_options
        The solver (:data:`convexfl.solvers.METHODS`) and its options for the cluster
        minimisers where neither a closed form nor Newton finds them (default: the cvxpy
        reference).
    split : Solution, optional
        A certified two-cluster solution at a λ just below λ̂ (on a path: the last one
        before the models fuse). λ̂ is then bracketed without the SOCP (measured on the
        make_moons path, n = 5000: 0.1 s against 4 s): the cut between its clusters gives
        ``λ̂ ≥ ‖Σ_{i∈S} g_i‖ / w(δS)`` and a flow routing ``−g`` within ``up · w`` gives
        ``λ̂ ≤ up`` (:func:`_split_bracket`). When ``up`` is within ``SPLIT_RTOL`` (1e-9,
        relative) of the cut, the cut is λ̂ (``inputs["method"] = "split"``, the bracket in
        ``related``); otherwise (the two clusters do not fuse directly) the SOCP decides.
    max_socp_size : int, optional
        The largest SOCP (``E·d`` flow unknowns) solved; above it (and when ``split`` does
        not decide) the answer is the interval ``[lower, upper]`` of the closed-form
        certified bounds below, kind ``"certified bound"``, whose ``inputs["_flow"]`` is
        the least-squares flow (it proves ``upper``). Default: no limit. Clarabel's time and
        memory grow fast with the size (kNN 10 graphs, 2-core machine: diabetes 442 × 10,
        3·10⁴ unknowns, 5.6 s; breast_cancer 569 × 30, 1.2·10⁵, 15 s; digits 1797 × 64,
        7.9·10⁵, more than 4 minutes and 9 GB).

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
    check_method(method)
    if max_socp_size is not None:
        max_socp_size = as_int(max_socp_size, "max_socp_size", low=0)
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
    _check_split(prob, split)
    bracket = None if split is None else _split_bracket(prob, Y[0], G, split)
    if bracket is not None and bracket[1] - bracket[0] <= SPLIT_RTOL * bracket[0]:
        return _from_split(Y[0], G, balance, *bracket)
    large = max_socp_size is not None and graph.n_edges * prob.dim > max_socp_size
    if not large:
        rho, u = _minmax_flow(n, graph.edges, graph.weights, G * -1.0, balance_tol=1e-6,
                              scale=gscale if gscale > 0 else 1.0)
    # the flow routes −g: node balance Σ_e(±u_e) = −g_i
    deg = graph.degree
    gn = np.linalg.norm(G, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        low = float(np.max(np.where(deg > 0, gn / np.where(deg > 0, deg, 1), 0.0)))
    flow = None
    if graph.is_complete_uniform:
        up = _pairwise_max(G) / n
        up_note = "max_{i,j} ‖g_i − g_j‖ / N (the flow (g_j − g_i)/N)"
    else:
        from ..certificates import _potential_solver
        # the least-squares flow with g + B u = mean(g) = 0 on each component
        flow = _potential_solver(n, graph.edges, graph.weights)[0](G) if graph.n_edges else None
        up = (float(np.max(np.linalg.norm(flow, axis=1) / graph.weights)) if graph.n_edges
              else math.inf)
        up_note = "max_e ‖u_e‖/w_e of the least-squares (potential) flow"
    inputs = {"y_star": Y[0] if graph.is_connected else Y, "grad_norms": gn,
              "balance_residual": balance, "n_components": graph.n_components,
              "graph": graph.kind, "method": "socp", "_flow": None if large else u}
    if large:
        return _bracket(prob, G, inputs, low, bracket, flow)
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


def _bracket(prob, G, inputs, low, split_bracket, u=None):
    """The :class:`Bound` ``[lower, upper]`` of :func:`fusion_threshold` without its SOCP:
    ``lower = max_i ‖g_i‖/deg_i`` and ``upper = max_e ‖u_e‖/w_e`` of the least-squares
    (potential) flow ``u`` routing ``−g`` (``inputs["_flow"]``: it certifies the fused
    models for every ``λ ≥ upper``; computed here unless given), narrowed by a split's
    ``(cut, up, u)`` when given."""
    from ..certificates import _potential_solver

    graph = prob.graph
    size = graph.n_edges * prob.dim
    if u is None:
        u = _potential_solver(prob.n_users, graph.edges, graph.weights)[0](G)
    up = float(np.max(np.linalg.norm(u, axis=1) / graph.weights))
    if split_bracket is not None:
        low = max(low, split_bracket[0])
        if split_bracket[1] < up:
            up, u = split_bracket[1], split_bracket[2]
    inputs.update(method="closed-form bounds (the SOCP was above max_socp_size)", _flow=u)
    if not graph.is_connected:
        inputs["per_component"] = up
        return Bound("fusion_threshold", "certified bound", math.inf, math.inf, inputs=inputs,
                     note=f"the graph has {graph.n_components} connected components: models "
                          "in different components never coincide; every component is fused "
                          f"for λ ≥ {up:.6g} (certified by inputs['_flow']; the SOCP, {size} "
                          "unknowns, was not solved)")
    return Bound("fusion_threshold", "certified bound", low, up, inputs=inputs,
                 note=f"λ̂ ∈ [{low:.6g}, {up:.6g}], closed-form certified bounds; the flow "
                      f"inputs['_flow'] certifies the fused models for λ ≥ {up:.6g}. The exact "
                      f"SOCP ({size} unknowns) was not solved")


def _check_split(prob, split):
    from ..solvers.base import Solution

    if split is None:
        return
    if not isinstance(split, Solution):
        raise TypeError(f"split: expected a convexfl Solution (a two-cluster solution of "
                        f"prob), got {type(split).__name__}")
    if np.shape(split.X) != (prob.n_users, prob.dim) or (
            split.flows is not None and np.shape(split.flows) != (prob.graph.n_edges, prob.dim)):
        raise ValueError(f"split: a solution of another problem (X {np.shape(split.X)}, "
                         f"expected {(prob.n_users, prob.dim)} and flows on its "
                         f"{prob.graph.n_edges} edges)")


def _from_split(y, G, balance, cut, up, u):
    """The :class:`Bound` λ̂ = ``cut`` of a closed bracket from :func:`_split_bracket`."""
    inputs = {"y_star": y, "grad_norms": np.linalg.norm(G, axis=1),
              "balance_residual": balance, "n_components": 1, "method": "split",
              "bracket": (cut, up), "_flow": u}
    related = {
        "lower": Bound("fusion_threshold_lower", "certified bound", cut, cut,
                       note="‖Σ_{i∈S} g_i‖ / w(δS), the cut between the split's clusters"),
        "upper": Bound("fusion_threshold_upper", "certified bound", up, up,
                       note="max_e ‖u_e‖/w_e of a flow routing −g (inputs['_flow'])")}
    return Bound("fusion_threshold", "exact", cut, cut, inputs=inputs, related=related,
                 note=f"the cut of a two-cluster split (docs/math.md §1.4): λ̂ ∈ [{cut:.12g}, "
                      f"{up:.12g}], relative width {(up - cut) / cut:.1e}; all models "
                      "coincide iff λ ≥ value")
