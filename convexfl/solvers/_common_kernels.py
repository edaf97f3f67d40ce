"""numba kernels shared by the fast solvers: reduced-problem Newton (polish), separable
minimisation and small helpers. Every loss formula comes from :mod:`convexfl._kernels`.

Nothing here is compiled at import: numba compiles (or loads from its cache) on first call,
inside ``solve()``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .. import _kernels as K


@njit(cache=True)
def minimise_users(code, F, y, coef, ptr, ridge, offset, delta, X0, tol, max_rounds):
    """``x_i = argmin f_i`` for every user by proximal-point rounds of Newton
    (:func:`convexfl._kernels.user_prox` with a vanishing weight); returns (X, ok)."""
    n, d = X0.shape
    X = X0.copy()
    g = np.empty(d)
    ok_all = True
    for i in range(n):
        x = X0[i].copy()
        ok = False
        for _ in range(max_rounds):
            K.user_grad(code, F, y, coef, ptr, ridge, delta, i, x, g)
            gn = 0.0
            for k in range(d):
                gn += g[k] * g[k]
            if np.sqrt(gn) <= tol:
                ok = True
                break
            x, _, _ = K.user_prox(code, F, y, coef, ptr, ridge, offset, delta, i, x, 1e-9,
                                  x, 0.1 * tol, 100)
        X[i] = x
        ok_all = ok_all and ok
    return X, ok_all


@njit(inline="always")
def _hess_add(dense, Hd, rows, cols, vals, nt, r, c, h):
    """Add ``h`` at ``(r, c)`` of a Hessian: into ``Hd`` when ``dense``, else as the COO
    triplet number ``nt``. Returns the next triplet number."""
    if dense:
        Hd[r, c] += h
        return nt
    rows[nt] = r
    cols[nt] = c
    vals[nt] = h
    return nt + 1


@njit(inline="always")
def _difference(W, i, j, u):
    """``u = w_i − w_j``; returns ``‖u‖``."""
    r = 0.0
    for a in range(W.shape[1]):
        u[a] = W[i, a] - W[j, a]
        r += u[a] * u[a]
    return np.sqrt(r)


@njit(cache=True)
def reduced_grad_hess(code, F, y, coef, ptr, ridge, offset, delta, edges, cap, W, grad,
                      Hd, rows, cols, vals):
    """Value, gradient (into ``grad``) and Hessian of the smooth reduced objective
    ``Σ_k f_k(w_k) + Σ_e c_e ‖w_a − w_b‖`` at ``W``. The Hessian is written densely into
    ``Hd`` when it has rows (shape (K·d, K·d)), else as COO triplets into rows/cols/vals,
    and not at all when those are empty too (the gradient only).

    Returns ``(value, n_triplets, min_distance)``. The Hessian has the users' d×d blocks
    and, per edge, ``(c_e/r)(I − ûûᵀ)`` on the diagonal blocks and its negative off them.
    """
    k, d = W.shape
    dense = Hd.shape[0] > 0
    hess = dense or rows.shape[0] > 0
    g = np.empty(d)
    H = np.empty((d, d))
    Hd[:, :] = 0.0
    val = 0.0
    nt = 0
    for c in range(k):
        val += K.user_value_grad_hess(code, F, y, coef, ptr, ridge, offset, delta, c, W[c],
                                      g, H)
        for a in range(d):
            grad[c, a] = g[a]
            for b in range(d if hess else 0):
                nt = _hess_add(dense, Hd, rows, cols, vals, nt, c * d + a, c * d + b, H[a, b])
    rmin = np.inf
    u = np.empty(d)
    for e in range(edges.shape[0]):
        i = edges[e, 0]
        j = edges[e, 1]
        r = _difference(W, i, j, u)
        if r < rmin:
            rmin = r
        if r == 0.0:
            continue
        val += cap[e] * r
        for a in range(d):
            u[a] /= r
            grad[i, a] += cap[e] * u[a]
            grad[j, a] -= cap[e] * u[a]
        if not hess:
            continue
        s = cap[e] / r
        for a in range(d):
            for b in range(d):
                h = s * ((1.0 if a == b else 0.0) - u[a] * u[b])
                nt = _hess_add(dense, Hd, rows, cols, vals, nt, i * d + a, i * d + b, h)
                nt = _hess_add(dense, Hd, rows, cols, vals, nt, j * d + a, j * d + b, h)
                nt = _hess_add(dense, Hd, rows, cols, vals, nt, i * d + a, j * d + b, -h)
                nt = _hess_add(dense, Hd, rows, cols, vals, nt, j * d + a, i * d + b, -h)
    return val, nt, rmin


@njit(cache=True)
def reduced_value(code, F, y, coef, ptr, ridge, offset, delta, edges, cap, W):
    """``Σ_k f_k(w_k) + Σ_e c_e ‖w_a − w_b‖``: the (SON) objective, of a reduced problem
    or not (``c_e = λ w_e``)."""
    k, d = W.shape
    val = 0.0
    for c in range(k):
        val += K.user_value(code, F, y, coef, ptr, ridge, offset, delta, c, W[c])
    for e in range(edges.shape[0]):
        r = 0.0
        for a in range(d):
            t = W[edges[e, 0], a] - W[edges[e, 1], a]
            r += t * t
        val += cap[e] * np.sqrt(r)
    return val


@njit(cache=True)
def gradient_residual(code, F, y, coef, ptr, ridge, delta, X, edges, flows):
    """``‖∇f(X) + Bᵀu‖_F`` and ``‖∇f(X)‖_F``: the (KKT) stationarity residual of flows
    ``u`` (not checked for feasibility); a cheap proxy, never a certificate."""
    G = K.grads(code, F, y, coef, ptr, ridge, delta, X)
    gn = 0.0
    for i in range(G.shape[0]):
        for a in range(G.shape[1]):
            gn += G[i, a] * G[i, a]
    for e in range(edges.shape[0]):
        for a in range(G.shape[1]):
            G[edges[e, 0], a] += flows[e, a]
            G[edges[e, 1], a] -= flows[e, a]
    r = 0.0
    for i in range(G.shape[0]):
        for a in range(G.shape[1]):
            r += G[i, a] * G[i, a]
    return np.sqrt(r), np.sqrt(gn)


@njit(cache=True)
def reduced_hess_vec(coef, edges, cap, W, V, out):
    """``H V`` into ``out`` for the Hessian of a reduced problem of the quadratic loss at
    ``W`` (:func:`reduced_grad_hess`, no edge of length 0): ``coef_k v_k`` for each
    cluster, and ``± (c_e/r)(δ − û ûᵀδ)`` for each edge, ``δ = v_a − v_b``,
    ``r û = w_a − w_b``."""
    k, d = W.shape
    for c in range(k):
        for a in range(d):
            out[c, a] = coef[c] * V[c, a]
    u = np.empty(d)
    for e in range(edges.shape[0]):
        i = edges[e, 0]
        j = edges[e, 1]
        r = _difference(W, i, j, u)
        ud = 0.0
        for a in range(d):
            u[a] /= r
            ud += u[a] * (V[i, a] - V[j, a])
        s = cap[e] / r
        for a in range(d):
            t = s * (V[i, a] - V[j, a] - ud * u[a])
            out[i, a] += t
            out[j, a] -= t


NEWTON_CONVERGED, NEWTON_MERGE, NEWTON_STOPPED = 0, 1, 2


@njit(cache=True)
def dense_newton(code, F, y, coef, ptr, ridge, offset, delta, edges, cap, W, gtol_rel,
                 merge_tol, max_iter, steps_left):
    """Newton's method on the smooth reduced objective of :func:`reduced_grad_hess` from
    ``W`` (copied), its dense Hessian (plus ``10⁻¹³(1 + max diag)·I``) factorised by
    Cholesky, and Armijo backtracking (:func:`armijo_step`) from the full step, then from
    twice the last accepted one: :func:`convexfl.solvers._common.polish`'s dense iterations
    as one compiled loop, at most ``max_iter`` iterations and ``steps_left`` steps.

    Returns ``(W, status, steps)``; ``status``: ``NEWTON_CONVERGED`` (gradient
    ``≤ gtol_rel·(1 + max|W| + max c)``), ``NEWTON_MERGE`` (two clusters at most
    ``merge_tol`` apart: the caller merges them) or ``NEWTON_STOPPED`` (a limit, a failed
    factorisation, a step that is not finite, or no decrease down to a step of 10⁻¹²)."""
    k, d = W.shape
    n = k * d
    W = W.copy()
    grad = np.empty((k, d))
    Hd = np.empty((n, n))
    no_rows = np.empty(0, np.int64)
    no_vals = np.empty(0)
    cap_max = 0.0
    for e in range(cap.shape[0]):
        cap_max = max(cap_max, abs(cap[e]))
    steps = 0
    t_start = 1.0
    g = grad.ravel()  # a view: reduced_grad_hess writes the gradient into grad
    z = np.empty(n)
    s = np.empty(n)
    for _ in range(max_iter):
        val, _, rmin = reduced_grad_hess(code, F, y, coef, ptr, ridge, offset, delta, edges,
                                         cap, W, grad, Hd, no_rows, no_rows, no_vals)
        if rmin <= merge_tol:
            return W, NEWTON_MERGE, steps
        gsum = 0.0
        w_max = 0.0
        for c in range(k):
            for a in range(d):
                gsum += grad[c, a] * grad[c, a]
                w_max = max(w_max, abs(W[c, a]))
        if np.sqrt(gsum) <= gtol_rel * (1.0 + w_max + cap_max):
            return W, NEWTON_CONVERGED, steps
        if steps >= steps_left:
            return W, NEWTON_STOPPED, steps
        steps += 1
        diag_max = 0.0
        for i in range(n):
            diag_max = max(diag_max, abs(Hd[i, i]))
        for i in range(n):
            Hd[i, i] += 1e-13 * (1.0 + diag_max)
        try:
            L = np.linalg.cholesky(Hd)
        except Exception:  # noqa: BLE001 - not positive definite in floating point
            return W, NEWTON_STOPPED, steps
        for i in range(n):  # L z = −g, then Lᵀ s = z
            acc = -g[i]
            for j in range(i):
                acc -= L[i, j] * z[j]
            z[i] = acc / L[i, i]
        slope = 0.0
        for i in range(n - 1, -1, -1):
            acc = z[i]
            for j in range(i + 1, n):
                acc -= L[j, i] * s[j]
            s[i] = acc / L[i, i]
            if not np.isfinite(s[i]):
                return W, NEWTON_STOPPED, steps
            slope += g[i] * s[i]
        Wn, t = armijo_step(code, F, y, coef, ptr, ridge, offset, delta, edges, cap, W,
                            s.reshape(k, d), val, slope, t_start)
        if t == 0.0:
            return W, NEWTON_STOPPED, steps
        t_start = min(1.0, 2.0 * t)
        W = Wn
    return W, NEWTON_STOPPED, steps


@njit(cache=True)
def armijo_step(code, F, y, coef, ptr, ridge, offset, delta, edges, cap, W, step, val, slope,
                t):
    """``(W + t·step, t)`` for the first ``t``, from the one given and halving, with
    ``F(W + t·step) ≤ val + 10⁻⁴ t·slope`` (or a change within 10⁻¹⁵ of ``val``: rounding),
    ``F`` the reduced objective (:func:`reduced_value`, ``val = F(W)``, ``slope`` its
    derivative along ``step``); ``(W, 0)`` once ``t`` falls below 10⁻¹²."""
    k, d = W.shape
    Wn = np.empty_like(W)
    while t >= 1e-12:
        for c in range(k):
            for a in range(d):
                Wn[c, a] = W[c, a] + t * step[c, a]
        vn = reduced_value(code, F, y, coef, ptr, ridge, offset, delta, edges, cap, Wn)
        if vn <= val + 1e-4 * t * slope or abs(vn - val) <= 1e-15 * abs(val):
            return Wn, t
        t *= 0.5
    return W, 0.0
