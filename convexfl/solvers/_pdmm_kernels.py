"""numba kernel of PDMM (Armacki et al. Algorithm 1, generic block updates).

Pairs ``p`` carry the constraint ``x_{a_p} − x_{b_p} − z_p = 0`` with penalty weight
``c_p = λ w_p``. ``nptr/npair/nsign``: node → the pairs it appears in (+1 as ``a``, −1 as
``b``); ``optr/opair``: owner → the pairs it owns (the user that updates ``z_p``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .. import _kernels as K
from ._common_kernels import reduced_value


@njit(cache=True)
def pdmm_run(code, F, y, coef, ptr, ridge, offset, delta, pa, pb, cap, nptr, npair, nsign,
             optr, opair, sel, X, Z, MU, MUH, zero_count, frozen, freeze_after, rho, eta_x,
             eta_z, tau, nu, newton_tol, newton_max_iter, edges, ecap, record, obj, up, down,
             up_saved, down_saved):
    """Run ``sel.shape[0]`` PDMM iterations in place; ``sel[t]`` lists the users of S_P.

    Per iteration t (Jacobi: every block sees the iterate t):
    - x_i (i ∈ S_P): argmin f_i(x) + Σ_{p∋i} [±μ̂_pᵀx + (ρ/2)‖±x ∓ x_other − z_p‖²]
      + (η_x/2)‖x − x_i‖² — every constraint containing x_i (the generic update);
    - z_p (p owned by i ∈ S_P, not frozen): block soft-threshold of
      ``(ρ(x_a − x_b) + μ̂_p + η_z z_p)/(ρ + η_z)`` at ``c_p/(ρ + η_z)``;
    - duals of the same pairs (S_D): ``μ ← μ + τρ r``, ``μ̂ = μ − νρ r``, r = x_a − x_b − z_p.
    Frozen pairs (z stayed exactly 0 for ``freeze_after`` updates) keep z = 0 (not updated,
    not sent: one uplink message saved) and their owner uses its own x in place of the other
    user's (x_j need not be sent to it: one downlink message saved); the server still
    updates their duals.
    """
    n, d = X.shape
    T = sel.shape[0]
    Xn = X.copy()
    v = np.empty(d)
    w = np.empty(d)
    for t in range(T):
        u_cnt = 0
        d_cnt = 0
        u_sv = 0
        d_sv = 0
        # x-updates (from iterate t)
        for q in range(sel.shape[1]):
            i = sel[t, q]
            nb = 0
            for k in range(d):
                v[k] = eta_x * X[i, k]
            for s in range(nptr[i], nptr[i + 1]):
                p = npair[s]
                if nsign[s] > 0:
                    j = pb[p]
                    if frozen[p]:
                        for k in range(d):
                            v[k] += rho * X[i, k] - MUH[p, k]
                    else:
                        for k in range(d):
                            v[k] += rho * (X[j, k] + Z[p, k]) - MUH[p, k]
                else:
                    j = pa[p]
                    for k in range(d):
                        v[k] += rho * (X[j, k] - Z[p, k]) + MUH[p, k]
                nb += 1
            wt = rho * nb + eta_x
            for k in range(d):
                v[k] /= wt
            if code == K.QUADRATIC:  # in place, as in admm_run
                K.quadratic_prox(coef[i], F[i], v, wt, Xn[i])
            else:
                x, _, _ = K.user_prox(code, F, y, coef, ptr, ridge, offset, delta, i, v, wt,
                                      X[i], newton_tol, newton_max_iter)
                for k in range(d):
                    Xn[i, k] = x[k]
            u_cnt += 1
        # z-updates (from iterate t) — written in place: z_p is read only by its own update
        for q in range(sel.shape[1]):
            i = sel[t, q]
            for s in range(optr[i], optr[i + 1]):
                p = opair[s]
                if frozen[p]:
                    u_sv += 1
                    d_sv += 1
                    continue
                a = pa[p]
                b = pb[p]
                nrm = 0.0
                for k in range(d):
                    w[k] = (rho * (X[a, k] - X[b, k]) + MUH[p, k] + eta_z * Z[p, k]) / (rho + eta_z)
                    nrm += w[k] * w[k]
                nrm = np.sqrt(nrm)
                thr = cap[p] / (rho + eta_z)
                if nrm <= thr:
                    for k in range(d):
                        Z[p, k] = 0.0
                    zero_count[p] += 1
                    if freeze_after > 0 and zero_count[p] >= freeze_after:
                        frozen[p] = 1
                else:
                    sc = 1.0 - thr / nrm
                    for k in range(d):
                        Z[p, k] = sc * w[k]
                    zero_count[p] = 0
                u_cnt += 1
        for q in range(sel.shape[1]):
            i = sel[t, q]
            for k in range(d):
                X[i, k] = Xn[i, k]
        # dual updates of the selected users' pairs (S_D)
        for q in range(sel.shape[1]):
            i = sel[t, q]
            for s in range(optr[i], optr[i + 1]):
                p = opair[s]
                a = pa[p]
                b = pb[p]
                for k in range(d):
                    r = X[a, k] - X[b, k] - Z[p, k]
                    MU[p, k] += tau * rho * r
                    MUH[p, k] = MU[p, k] - nu * rho * r
                d_cnt += 1
        up[t] = u_cnt
        down[t] = u_cnt + d_cnt
        up_saved[t] = u_sv
        down_saved[t] = d_sv
        if record:
            obj[t] = reduced_value(code, F, y, coef, ptr, ridge, offset, delta, edges, ecap, X)


@njit(cache=True)
def pdmm_residuals(pa, pb, X, Z):
    """``‖x_a − x_b − z_p‖`` over all pairs and ``‖Z‖``."""
    r2 = 0.0
    z2 = 0.0
    for p in range(pa.shape[0]):
        for k in range(X.shape[1]):
            r = X[pa[p], k] - X[pb[p], k] - Z[p, k]
            r2 += r * r
            z2 += Z[p, k] * Z[p, k]
    return np.sqrt(r2), np.sqrt(z2)
