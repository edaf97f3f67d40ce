"""numba kernels for the per-user losses: one place for every loss formula.

Every loss of :mod:`convexfl.losses` is described by the arrays of :class:`LossArrays`:

- ``code``: which loss (constants below);
- ``F`` (M, d): one row per sample (for the quadratic loss, one row ``a_i`` per user);
- ``y`` (M,): targets; ``coef`` (M,): the weight of each sample's term;
- ``ptr`` (N + 1,): user ``i`` owns rows ``ptr[i]:ptr[i+1]``;
- ``ridge`` (N, d): the diagonal of the ridge term, ``(1/2) Σ_k ridge[i, k] x_k²``;
- ``offset`` (N,): a constant added to ``f_i``; ``delta``: the Huber threshold.

With ``t = <F_j, x>`` the generalised linear losses are

    f_i(x) = Σ_{j ∈ user i} coef_j φ(t_j, y_j) + ½ Σ_k ridge_ik x_k² + offset_i

and the quadratic loss is ``f_i(x) = (coef_i / 2) ‖x − F_i‖² + offset_i``. The solvers call
these kernels directly; the Python classes only validate and dispatch.

The small per-user functions (``phi``, ``user_value``, ``user_grad``,
``user_value_grad_hess``) are inlined into their callers (``inline="always"``): a call that
passes the loss arrays costs ~170 ns (a reference count for each array), more than the
quadratic loss itself. Measured on 5000 users, d = 2: :func:`values` 1.0 → 0.013 ms,
:func:`grads` 1.2 → 0.05 ms; the make_moons 551-λ path 17.2–18.7 s → 14.4–17.7 s (3 runs
each). ``user_prox`` is not inlined: its Newton loop, inlined in its five callers, made the
first ``method="admm"`` call with an empty numba cache compile for 50 s instead of 40 s
(33 s with nothing inlined).

The kernels whose inner loops run over the ``d`` coordinates of a model or flow
(:func:`edge_norms`; the flow search's ``flow_residual``, ``potential_step`` and
``smooth_flows``; SSNAL's ``psi_grad``, ``psi_value`` and ``hess_vec``; ADMM's ``admm_run``)
run, for ``d = 2`` and ``3``, a copy of their body compiled with ``d`` a constant (an
inlined body called with the literal), where the compiler unrolls those loops and keeps the
coordinates in registers; other ``d`` run the same body with ``d`` read from the array.
Each kernel spells its three calls: numba refuses a generic dispatcher (a factory's
closure calling ``body(*args, 2)``). The arithmetic is the same, in the same order: the
results are identical. Measured (2026-11-29, min of interleaved rounds in one process):
SSNAL's ``hess_vec`` at kNN10 N = 5·10⁴, d = 3 (3·10⁵ edges) 13.2 → 6.9 ms, ``psi_grad``
15.8 → 11.3 ms, ``psi_value`` 7.4 → 6.0 ms; ``admm_run`` on make_moons n = 5000 (d = 2)
2.08 → 1.34 ms per iteration (kNN10 N = 2·10⁴, d = 3: 5.5 → 5.4 ms, bound by memory); the
n = 5000 make_moons path's certificates replayed 1.34 → 1.21 s (median of 8), the path
itself 2.34 → 2.00 s (median of 6, minimum 1.95 → 1.71 s). The price is compilation: the
first solves on an empty numba cache took 93 s instead of 77 s.
"""

from __future__ import annotations

import os

import numpy as np

if "NUMBA_CACHE_DIR" not in os.environ:
    os.environ["NUMBA_CACHE_DIR"] = os.path.join(
        os.path.expanduser("~"), ".cache", "convexfl", "numba")

from numba import njit

QUADRATIC = 0
LEAST_SQUARES = 1
LOGISTIC = 2
SQUARED_HINGE = 3
HUBER = 4
POISSON = 5

# sup of φ'' over t (the factor of the Lipschitz constant); inf where unbounded
PHI_CURVATURE_SUP = {LEAST_SQUARES: 1.0, LOGISTIC: 0.25, SQUARED_HINGE: 2.0, HUBER: 1.0,
                     POISSON: np.inf}


@njit(cache=True, inline="always")
def phi(code, t, y, delta):
    """Return ``(φ(t, y), ∂φ/∂t, ∂²φ/∂t²)`` of one sample's term."""
    if code == LEAST_SQUARES:
        r = t - y
        return 0.5 * r * r, r, 1.0
    if code == LOGISTIC:
        z = -y * t
        if z > 0.0:
            v = z + np.log1p(np.exp(-z))
            s = 1.0 / (1.0 + np.exp(-z))
        else:
            e = np.exp(z)
            v = np.log1p(e)
            s = e / (1.0 + e)
        return v, -y * s, s * (1.0 - s)
    if code == SQUARED_HINGE:
        r = 1.0 - y * t
        if r > 0.0:
            return r * r, -2.0 * y * r, 2.0
        return 0.0, 0.0, 0.0
    if code == HUBER:
        r = t - y
        if abs(r) <= delta:
            return 0.5 * r * r, r, 1.0
        return delta * abs(r) - 0.5 * delta * delta, delta * np.sign(r), 0.0
    # POISSON (log link): φ = exp(t) − y t
    e = np.exp(t)
    return e - y * t, e - y, e


@njit(cache=True, inline="always")
def user_value(code, F, y, coef, ptr, ridge, offset, delta, i, x):
    """``f_i(x)``."""
    d = x.shape[0]
    v = offset[i]
    if code == QUADRATIC:
        s = 0.0
        for k in range(d):
            r = x[k] - F[i, k]
            s += r * r
        return v + 0.5 * coef[i] * s
    for k in range(d):
        v += 0.5 * ridge[i, k] * x[k] * x[k]
    for j in range(ptr[i], ptr[i + 1]):
        t = 0.0
        for k in range(d):
            t += F[j, k] * x[k]
        v += coef[j] * phi(code, t, y[j], delta)[0]
    return v


@njit(cache=True, inline="always")
def user_grad(code, F, y, coef, ptr, ridge, delta, i, x, out):
    """Write ``∇f_i(x)`` into ``out``."""
    d = x.shape[0]
    if code == QUADRATIC:
        for k in range(d):
            out[k] = coef[i] * (x[k] - F[i, k])
        return
    for k in range(d):
        out[k] = ridge[i, k] * x[k]
    for j in range(ptr[i], ptr[i + 1]):
        t = 0.0
        for k in range(d):
            t += F[j, k] * x[k]
        g = coef[j] * phi(code, t, y[j], delta)[1]
        for k in range(d):
            out[k] += g * F[j, k]


@njit(cache=True, inline="always")
def user_value_grad_hess(code, F, y, coef, ptr, ridge, offset, delta, i, x, g, H):
    """Return ``f_i(x)`` and write ``∇f_i(x)`` into ``g`` and ``∇²f_i(x)`` into ``H``."""
    d = x.shape[0]
    H[:, :] = 0.0
    if code == QUADRATIC:
        s = 0.0
        for k in range(d):
            r = x[k] - F[i, k]
            s += r * r
            g[k] = coef[i] * r
            H[k, k] = coef[i]
        return offset[i] + 0.5 * coef[i] * s
    v = offset[i]
    for k in range(d):
        v += 0.5 * ridge[i, k] * x[k] * x[k]
        g[k] = ridge[i, k] * x[k]
        H[k, k] = ridge[i, k]
    for j in range(ptr[i], ptr[i + 1]):
        t = 0.0
        for k in range(d):
            t += F[j, k] * x[k]
        p0, p1, p2 = phi(code, t, y[j], delta)
        v += coef[j] * p0
        for k in range(d):
            g[k] += coef[j] * p1 * F[j, k]
        w2 = coef[j] * p2
        if w2 != 0.0:
            for a in range(d):
                fa = w2 * F[j, a]
                for b in range(a, d):
                    H[a, b] += fa * F[j, b]
    for a in range(d):
        for b in range(a):
            H[a, b] = H[b, a]
    return v


@njit(cache=True)
def values(code, F, y, coef, ptr, ridge, offset, delta, X):
    """``[f_i(x_i)]_i`` for every user."""
    n = X.shape[0]
    out = np.empty(n)
    for i in range(n):
        out[i] = user_value(code, F, y, coef, ptr, ridge, offset, delta, i, X[i])
    return out


@njit(cache=True)
def grads(code, F, y, coef, ptr, ridge, delta, X):
    """``[∇f_i(x_i)]_i`` stacked as an (N, d) array."""
    out = np.empty_like(X)
    for i in range(X.shape[0]):
        user_grad(code, F, y, coef, ptr, ridge, delta, i, X[i], out[i])
    return out


@njit(cache=True, inline="always")
def quadratic_prox(c, a, v, rho, out):
    """``out = argmin_x (c/2)‖x − a‖² + (ρ/2)‖x − v‖² = (c a + ρ v)/(c + ρ)``, the quadratic
    loss's prox (its ``c = coef_i``, ``a = F_i``), written into the caller's array."""
    for k in range(v.shape[0]):
        out[k] = (c * a[k] + rho * v[k]) / (c + rho)


@njit(cache=True)
def user_prox(code, F, y, coef, ptr, ridge, offset, delta, i, v, rho, x0, tol, max_iter):
    """``argmin_x f_i(x) + (ρ/2)‖x − v‖²`` by safeguarded Newton; returns (x, n_iter, ok).

    Newton steps on the ρ-strongly convex model with Armijo backtracking; stops when the
    gradient norm is ``≤ tol``. For the quadratic loss the closed form is returned; for
    least squares the first Newton step is exact.
    """
    d = v.shape[0]
    x = np.empty(d)
    if code == QUADRATIC:
        quadratic_prox(coef[i], F[i], v, rho, x)
        return x, 0, True
    x[:] = x0
    g = np.empty(d)
    H = np.empty((d, d))
    for it in range(max_iter + 1):
        fx = user_value_grad_hess(code, F, y, coef, ptr, ridge, offset, delta, i, x, g, H)
        gn = 0.0
        hx = fx
        for k in range(d):
            r = x[k] - v[k]
            g[k] += rho * r
            H[k, k] += rho
            hx += 0.5 * rho * r * r
            gn += g[k] * g[k]
        if np.sqrt(gn) <= tol:
            return x, it, True
        if it == max_iter:
            break
        p = -np.linalg.solve(H, g)
        slope = 0.0
        for k in range(d):
            slope += g[k] * p[k]
        step = 1.0
        xn = np.empty(d)
        accepted = False
        for _ in range(60):
            for k in range(d):
                xn[k] = x[k] + step * p[k]
            hn = user_value(code, F, y, coef, ptr, ridge, offset, delta, i, xn)
            for k in range(d):
                r = xn[k] - v[k]
                hn += 0.5 * rho * r * r
            if hn <= hx + 1e-4 * step * slope or abs(hn - hx) <= 1e-15 * (1.0 + abs(hx)):
                accepted = True
                break
            step *= 0.5
        x[:] = xn
        if not accepted:
            break
    return x, max_iter, False


@njit(cache=True)
def prox_all(code, F, y, coef, ptr, ridge, offset, delta, V, rho, X0, tol, max_iter):
    """Apply :func:`user_prox` to every row of ``V`` (``rho`` has one entry per user)."""
    out = np.empty_like(V)
    ok_all = True
    iters = 0
    for i in range(V.shape[0]):
        x, it, ok = user_prox(code, F, y, coef, ptr, ridge, offset, delta, i, V[i],
                              rho[i], X0[i], tol, max_iter)
        out[i] = x
        ok_all = ok_all and ok
        iters = max(iters, it)
    return out, iters, ok_all


@njit(cache=True)
def edge_norms(X, edges):
    """``‖x_i − x_j‖`` for every edge ``(i, j)`` (no (E, d) temporary)."""
    d = X.shape[1]
    if d == 2:
        return _edge_norms(X, edges, 2)
    if d == 3:
        return _edge_norms(X, edges, 3)
    return _edge_norms(X, edges, d)


@njit(inline="always")
def _edge_norms(X, edges, d):
    out = np.empty(edges.shape[0])
    for e in range(edges.shape[0]):
        i = edges[e, 0]
        j = edges[e, 1]
        s = 0.0
        for k in range(d):
            t = X[i, k] - X[j, k]
            s += t * t
        out[e] = np.sqrt(s)
    return out


@njit(cache=True)
def first_appearance_labels(lab, n_values):
    """Labels ``0..K−1`` numbered by first appearance in ``lab`` (integers in
    ``[0, n_values)``): one pass, where ``np.unique`` sorts twice."""
    remap = np.full(n_values, -1, dtype=np.int64)
    out = np.empty(lab.shape[0], dtype=np.int64)
    k = 0
    for i in range(lab.shape[0]):
        v = lab[i]
        if remap[v] < 0:
            remap[v] = k
            k += 1
        out[i] = remap[v]
    return out


@njit(cache=True)
def grouped(labels, k):
    """``(order, starts)``: the indices ``0..n−1`` grouped by their label in ``[0, k)``, label
    ``c``'s being ``order[starts[c]:starts[c + 1]]`` in increasing order (a stable counting
    sort: one pass to count, one to place, where ``np.argsort(kind="stable")`` sorts)."""
    starts = np.zeros(k + 1, np.int64)
    for i in range(labels.shape[0]):
        starts[labels[i] + 1] += 1
    for c in range(k):
        starts[c + 1] += starts[c]
    fill = starts[:-1].copy()
    order = np.empty(labels.shape[0], np.int64)
    for i in range(labels.shape[0]):
        c = labels[i]
        order[fill[c]] = i
        fill[c] += 1
    return order, starts
