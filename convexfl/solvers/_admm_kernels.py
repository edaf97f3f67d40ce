"""numba kernels of the network-lasso ADMM (Hallac, Leskovec & Boyd 2015).

State, all float64 and O(N·d + E·d): ``X`` (N, d); per edge ``e = (i, j)`` the copies
``Zi[e] ≈ x_i``, ``Zj[e] ≈ x_j`` and the scaled duals ``Ui[e]``, ``Uj[e]``; ``degree`` (N,)
the number of edges at each node.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .. import _kernels as K


@njit(cache=True)
def admm_run(n_steps, code, F, y, coef, ptr, ridge, offset, delta, edges, cap, degree, X, Zi,
             Zj, Ui, Uj, fused, rho, alpha, newton_tol, newton_max_iter):
    """Run ``n_steps`` ADMM iterations in place.

    x-update (per user, :func:`convexfl._kernels.user_prox`):
        ``x_i = argmin f_i(x) + (ρ/2) Σ_{e∋i} ‖x − z_ie + u_ie‖²``
        ``    = prox_{f_i/(ρ deg_i)}(mean_e (z_ie − u_ie))``;
    edge update (closed form, with over-relaxation ``x̂ = α x + (1 − α) z``):
        ``a = x̂_i + u_i``, ``b = x̂_j + u_j``, ``θ = max(1 − c_e/(ρ‖a − b‖), ½)``,
        ``z_i = θ a + (1 − θ) b``, ``z_j = (1 − θ) a + θ b`` (exactly equal when θ = ½);
    dual update ``u ← u + x̂ − z``.

    The sums ``Σ_{e∋i} (z_ie − u_ie)`` of the next x-update are gathered in the edge loop
    (into an (N, d) array), so that no pass visits the edges node by node: at 2·10⁴ users
    and 1.7·10⁵ edges (make_moons, kNN 15) those scattered reads took 5.2–5.8 ms of an
    11.5–15 ms iteration.

    Returns ``(r, s, x_norm, z_norm, u_norm, newton_ok)`` of the last iteration: the primal
    residual ``‖x_i − z_ie‖`` over all copies, the dual residual ``ρ‖Aᵀ(z − z_old)‖`` (per
    node sums), the norms for the relative tests.
    """
    d = X.shape[1]
    if d == 2:
        return _admm_run(n_steps, code, F, y, coef, ptr, ridge, offset, delta, edges, cap,
                         degree, X, Zi, Zj, Ui, Uj, fused, rho, alpha, newton_tol,
                         newton_max_iter, 2)
    if d == 3:
        return _admm_run(n_steps, code, F, y, coef, ptr, ridge, offset, delta, edges, cap,
                         degree, X, Zi, Zj, Ui, Uj, fused, rho, alpha, newton_tol,
                         newton_max_iter, 3)
    return _admm_run(n_steps, code, F, y, coef, ptr, ridge, offset, delta, edges, cap,
                     degree, X, Zi, Zj, Ui, Uj, fused, rho, alpha, newton_tol,
                     newton_max_iter, d)


@njit(inline="always")
def _admm_run(n_steps, code, F, y, coef, ptr, ridge, offset, delta, edges, cap, degree, X, Zi,
              Zj, Ui, Uj, fused, rho, alpha, newton_tol, newton_max_iter, d):
    """:func:`admm_run` with the dimension ``d`` (a constant where the caller passes one)."""
    n = X.shape[0]
    n_edges = edges.shape[0]
    v = np.empty(d)
    a = np.empty(d)
    b = np.empty(d)
    dz = np.zeros((n, d))
    zu = np.zeros((n, d))  # Σ_{e∋i} (z_ie − u_ie)
    for e in range(n_edges):
        i = edges[e, 0]
        j = edges[e, 1]
        for k in range(d):
            zu[i, k] += Zi[e, k] - Ui[e, k]
            zu[j, k] += Zj[e, k] - Uj[e, k]
    r2 = 0.0
    s2 = 0.0
    xn2 = 0.0
    zn2 = 0.0
    un2 = 0.0
    newton_ok = True
    for _step in range(n_steps):
        # x-update
        for i in range(n):
            deg = degree[i]
            if deg == 0:
                continue
            for k in range(d):
                v[k] = zu[i, k] / deg
            if code == K.QUADRATIC:  # in place, no call: make_moons n = 5000 (44k edges)
                # 2.7–2.8 → 1.6–1.9 ms per iteration (the call passed every loss array)
                K.quadratic_prox(coef[i], F[i], v, rho * deg, X[i])
                continue
            x, _, ok = K.user_prox(code, F, y, coef, ptr, ridge, offset, delta, i, v,
                                   rho * deg, X[i], newton_tol, newton_max_iter)
            if not ok:
                newton_ok = False
            for k in range(d):
                X[i, k] = x[k]
        # edge and dual updates (the residuals only at the last step: they are returned)
        last = _step == n_steps - 1
        if last:
            dz[:, :] = 0.0
        zu[:, :] = 0.0
        r2 = 0.0
        for e in range(n_edges):
            i = edges[e, 0]
            j = edges[e, 1]
            nrm = 0.0
            for k in range(d):
                a[k] = alpha * X[i, k] + (1.0 - alpha) * Zi[e, k] + Ui[e, k]
                b[k] = alpha * X[j, k] + (1.0 - alpha) * Zj[e, k] + Uj[e, k]
                t = a[k] - b[k]
                nrm += t * t
            # z_i = θ a + (1 − θ) b, z_j = (1 − θ) a + θ b; θ = ½ exactly where ρ‖a − b‖ ≤ 2c
            th = 1.0 - cap[e] / max(rho * np.sqrt(nrm), 2.0 * cap[e])
            fused[e] = th == 0.5
            for k in range(d):
                zi = th * a[k] + (1.0 - th) * b[k]
                zj = (1.0 - th) * a[k] + th * b[k]
                if last:
                    dz[i, k] += zi - Zi[e, k]
                    dz[j, k] += zj - Zj[e, k]
                    ri = X[i, k] - zi
                    rj = X[j, k] - zj
                    r2 += ri * ri + rj * rj
                Zi[e, k] = zi
                Zj[e, k] = zj
                Ui[e, k] = a[k] - zi  # u + x̂ − z, with a = x̂ + u
                Uj[e, k] = b[k] - zj
                zu[i, k] += 2.0 * zi - a[k]  # z − u
                zu[j, k] += 2.0 * zj - b[k]
    s2 = 0.0
    for i in range(n):
        for k in range(d):
            s2 += dz[i, k] * dz[i, k]
    xn2 = 0.0
    for i in range(n):
        deg = degree[i]
        for k in range(d):
            xn2 += deg * X[i, k] * X[i, k]
    zn2 = 0.0
    un2 = 0.0
    for e in range(n_edges):
        for k in range(d):
            zn2 += Zi[e, k] * Zi[e, k] + Zj[e, k] * Zj[e, k]
            un2 += Ui[e, k] * Ui[e, k] + Uj[e, k] * Uj[e, k]
    return (np.sqrt(r2), rho * np.sqrt(s2), np.sqrt(xn2), np.sqrt(zn2), rho * np.sqrt(un2),
            newton_ok)
