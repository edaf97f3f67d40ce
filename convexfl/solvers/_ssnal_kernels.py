"""numba kernels of SSNAL for the quadratic loss (convex clustering).

With ``T_e = y_e + σ (x_i − x_j)`` and the capacity ``c_e = λ w_e`` of edge ``e = (i, j)``:

- ``ψ(X) = Σ_i (c_i/2)‖x_i − a_i‖² + Σ_e m_e(T_e) − ‖Y‖²/(2σ)`` with
  ``m(T) = ‖T‖²/(2σ)`` when ``‖T‖ ≤ c`` and ``(c‖T‖ − c²/2)/σ`` otherwise;
- ``∇ψ(X) = C(X − A) + Dᵀ Π_c(T)``;
- generalised Hessian ``C + σ Dᵀ J D`` with ``J_e = I`` inside the ball and
  ``(c/‖T‖)(I − T̂T̂ᵀ)`` outside (:func:`hess_terms`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .._flow_kernels import _root
from ._block_ldl import edge_block


@njit(inline="always")
def _edge_arg(Y, X, sigma, cap, e, i, j, T, row, d):
    """Write ``T_e = y_e + σ (x_i − x_j)`` into ``T[row]``; return ``(‖T_e‖, 2σ m_e(T_e),
    ‖y_e‖²)``: ``2σ m = ‖T‖²`` inside the ball, ``c(2‖T‖ − c)`` outside, chosen by a
    select rather than a branch (edges cross the balls in no order the branch predictor
    learns: kNN10 N = 5·10⁴, d = 3, half the edges outside at random, ψ 3.1 → 1.3 ms and
    its gradient 4.0 → 2.5 ms, one process)."""
    t2 = 0.0
    y2 = 0.0
    for k in range(d):
        t = Y[e, k] + sigma * (X[i, k] - X[j, k])
        T[row, k] = t
        t2 += t * t
        y2 += Y[e, k] * Y[e, k]
    t = np.sqrt(t2)
    c = cap[e]
    return t, t2 if t <= c else c * (2.0 * t - c), y2


@njit(cache=True)
def psi_grad(A, coef, edges, cap, X, Y, sigma, G, P, tnorm):
    """Return ψ(X); write ∇ψ into ``G``, ``Π_c(T)`` into ``P`` and ``‖T_e‖`` into ``tnorm``
    (capacities ``cap`` > 0: λ > 0 and a graph's weights are)."""
    d = X.shape[1]
    if d == 2:
        return _psi_grad(A, coef, edges, cap, X, Y, sigma, G, P, tnorm, 2)
    if d == 3:
        return _psi_grad(A, coef, edges, cap, X, Y, sigma, G, P, tnorm, 3)
    return _psi_grad(A, coef, edges, cap, X, Y, sigma, G, P, tnorm, d)


@njit(inline="always")
def _psi_grad(A, coef, edges, cap, X, Y, sigma, G, P, tnorm, d):
    """:func:`psi_grad` with the dimension ``d`` (a constant where the caller passes one)."""
    val = 0.0
    for i in range(X.shape[0]):
        for k in range(d):
            r = X[i, k] - A[i, k]
            G[i, k] = coef[i] * r
            val += 0.5 * coef[i] * r * r
    moreau = 0.0
    ysq = 0.0
    for e in range(edges.shape[0]):
        i = edges[e, 0]
        j = edges[e, 1]
        t, m2, y2 = _edge_arg(Y, X, sigma, cap, e, i, j, P, e, d)
        moreau += m2
        ysq += y2
        tnorm[e] = t
        s = cap[e] / max(t, cap[e])  # 1 inside the ball (exactly), c/‖T‖ outside
        for k in range(d):
            p = s * P[e, k]
            P[e, k] = p
            G[i, k] += p
            G[j, k] -= p
    return val + (moreau - ysq) / (2.0 * sigma)


@njit(cache=True)
def psi_value(A, coef, edges, cap, X, Y, sigma):
    """ψ(X) alone (the line search's)."""
    d = X.shape[1]
    if d == 2:
        return _psi_value(A, coef, edges, cap, X, Y, sigma, 2)
    if d == 3:
        return _psi_value(A, coef, edges, cap, X, Y, sigma, 3)
    return _psi_value(A, coef, edges, cap, X, Y, sigma, d)


@njit(inline="always")
def _psi_value(A, coef, edges, cap, X, Y, sigma, d):
    """:func:`psi_value` with the dimension ``d`` (a constant where the caller passes one)."""
    val = 0.0
    for i in range(X.shape[0]):
        for k in range(d):
            r = X[i, k] - A[i, k]
            val += 0.5 * coef[i] * r * r
    moreau = 0.0
    ysq = 0.0
    T = np.empty((1, d))
    for e in range(edges.shape[0]):
        _, m2, y2 = _edge_arg(Y, X, sigma, cap, e, edges[e, 0], edges[e, 1], T, 0, d)
        moreau += m2
        ysq += y2
    return val + (moreau - ysq) / (2.0 * sigma)


@njit(cache=True)
def hess_terms(edges, cap, P, tnorm, sigma, s, Q):
    """The edge terms of the generalised Hessian ``C + σ Dᵀ J D`` at the last
    :func:`psi_grad` (``P`` holds Π_c(T)): ``σ J_e = s_e I − Q_e Q_eᵀ`` with ``s_e = σ``,
    ``Q_e = 0`` inside the ball and ``s_e = σc/‖T‖``, ``Q_e = √(σ/(c‖T‖)) P_e`` outside
    (``P_e = c T̂``). ``s_e`` is the block's largest eigenvalue, the edge weight of the
    isotropic ``C + σ L_w``. Written into ``s`` (m,) and ``Q`` (m, d)."""
    d = P.shape[1]
    for e in range(edges.shape[0]):
        c = cap[e]
        t = tnorm[e]
        if t <= c:
            s[e] = sigma
            for k in range(d):
                Q[e, k] = 0.0
        else:
            s[e] = sigma * c / t
            r = np.sqrt(sigma / (c * t))
            for k in range(d):
                Q[e, k] = r * P[e, k]


@njit(cache=True)
def hess_vec(coef, edges, s, Q, V, out):
    """``out = (C + σ Dᵀ J D) V`` from the edge terms of :func:`hess_terms`."""
    d = V.shape[1]
    if d == 2:
        _hess_vec(coef, edges, s, Q, V, out, 2)
    elif d == 3:
        _hess_vec(coef, edges, s, Q, V, out, 3)
    else:
        _hess_vec(coef, edges, s, Q, V, out, d)


@njit(inline="always")
def _hess_vec(coef, edges, s, Q, V, out, d):
    """:func:`hess_vec` with the dimension ``d`` (a constant where the caller passes one).
    The same arithmetic inside and outside the ball (``Q_e = 0`` inside), without a branch:
    kNN10 N = 5·10⁴, d = 3, half of the 3·10⁵ edges outside at random, 4.0 → 1.7 ms
    against the branch on ‖T‖ that read ``cap``, ``tnorm`` and ``P`` (one process)."""
    for i in range(V.shape[0]):
        for k in range(d):
            out[i, k] = coef[i] * V[i, k]
    for e in range(edges.shape[0]):
        i = edges[e, 0]
        j = edges[e, 1]
        q = 0.0
        for k in range(d):
            q += Q[e, k] * (V[i, k] - V[j, k])
        for k in range(d):
            w = s[e] * (V[i, k] - V[j, k]) - q * Q[e, k]
            out[i, k] += w
            out[j, k] -= w


@njit(cache=True)
def hess_blocks(s, Q, out):
    """The ``d × d`` edge blocks ``σ J_e = s_e I − Q_e Q_eᵀ`` of the generalised Hessian
    (:func:`hess_terms`) into ``out`` (m, d, d)."""
    m, d = Q.shape
    Q = Q.reshape((m, d, 1))
    for e in range(m):
        for a in range(d):
            for b in range(d):
                out[e, a, b] = edge_block(s, Q, e, a, b)


@njit(cache=True)
def diagonal_blocks(coef, edges, s, Q, index, k):
    """The ``d × d`` diagonal blocks ``c_u I + Σ_{e ∋ u} (s_e I − Q_e Q_eᵀ)`` (``Q`` (m, d,
    r)) of the users with ``index ≥ 0`` (renumbered ``index``, ``k`` of them)."""
    d = Q.shape[1]
    if d == 2:
        return _diagonal_blocks_d(coef, edges, s, Q, index, k, 2)
    if d == 3:
        return _diagonal_blocks_d(coef, edges, s, Q, index, k, 3)
    return _diagonal_blocks_d(coef, edges, s, Q, index, k, d)


@njit(inline="always")
def _diagonal_blocks_d(coef, edges, s, Q, index, k, d):
    """:func:`diagonal_blocks` with ``d`` a constant where the caller passes one (kNN10
    N = 5·10⁴, d = 3, a λ = 3 system of SSNAL, one process: 26–50 → 10–11 ms from
    materialised blocks; it is part of every "sparsified" set-up, 110–150 per solve
    there)."""
    n = coef.shape[0]
    diag = np.zeros((k, d, d))
    block = np.empty((d, d))
    for e in range(s.shape[0]):
        iu = index[edges[e, 0]]
        ju = index[edges[e, 1]]
        if iu < 0 and ju < 0:
            continue
        for a in range(d):
            for b in range(d):
                block[a, b] = edge_block(s, Q, e, a, b)
        for a in range(d):
            for b in range(d):
                if iu >= 0:
                    diag[iu, a, b] += block[a, b]
                if ju >= 0:
                    diag[ju, a, b] += block[a, b]
    for u in range(n):
        if index[u] >= 0:
            for a in range(d):
                diag[index[u], a, a] += coef[u]
    return diag


@njit(cache=True)
def strong_edges_by_level(n, edges, wts, coef, ratio, ratio_max, max_users):
    """``(keep, big)`` of :meth:`~convexfl.solvers.ssnal._Precond.strong_edges` in one pass
    of union–find. An edge's level is the number of fourfold raises of ``ratio`` (up to the
    first at or above ``ratio_max``) at which ``w_e ≥ r · min(c_i, c_j)`` still holds (−1:
    not even at ``ratio``); the edges at level ``ℓ`` or above form a graph ``G_ℓ`` whose
    components refine those of ``G_{ℓ−1}``. Raising the ratio inside the components that
    are too large (more than ``max_users``) and keeping the others keeps exactly the edges
    whose component in ``G_level`` is small, and those at the top level; ``big`` marks the
    users whose component in the top level's graph is too large. The edges are joined from
    the top level down, each level's edges tested once all of its edges are in. kNN10
    N = 5·10⁴, d = 3, λ = 3 (SSNAL's weights, same answers): 16–24 → 7–12 ms against a
    ``masked_components`` pass per raise."""
    top = 0
    r = ratio
    while r < ratio_max:
        r *= 4.0
        top += 1
    m = edges.shape[0]
    level = np.empty(m, np.int64)
    counts = np.zeros(top + 2, np.int64)  # by level + 1
    for e in range(m):
        c = min(coef[edges[e, 0]], coef[edges[e, 1]])
        lv = -1
        r = ratio
        while lv < top and wts[e] >= r * c:
            lv += 1
            r *= 4.0
        level[e] = lv
        counts[lv + 1] += 1
    first = np.zeros(top + 2, np.int64)  # the edges by decreasing level
    for b in range(top, -1, -1):
        first[b] = first[b + 1] + counts[b + 1]
    order = np.empty(m, np.int64)
    fill = first.copy()
    for e in range(m):
        b = level[e] + 1
        order[fill[b]] = e
        fill[b] += 1
    parent = np.arange(n)
    size = np.ones(n, np.int64)
    keep = np.zeros(m, np.bool_)
    big = np.zeros(n, np.bool_)
    for b in range(top + 1, 0, -1):  # level b − 1
        at = order[first[b]:first[b] + counts[b]]
        for e in at:
            u = _root(parent, edges[e, 0])
            v = _root(parent, edges[e, 1])
            if u != v:
                if size[u] < size[v]:
                    u, v = v, u
                parent[v] = u
                size[u] += size[v]
        if b == top + 1:
            for u in range(n):
                big[u] = size[_root(parent, u)] > max_users
        for e in at:
            keep[e] = b == top + 1 or size[_root(parent, edges[e, 0])] <= max_users
    return keep, big
