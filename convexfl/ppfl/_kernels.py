r"""numba kernels of PPFL's per-sample computations (the hot loops of every algorithm).

The per-sample negative log-likelihood ``φ(t, y)`` is :func:`convexfl._kernels.phi`; this
module adds the two prediction forms on top of it. For sample ``j`` with shared features
``u`` and personal features ``x``, client memberships ``π`` and ``T_k = x^⊤θ_k``
(``+ u^⊤ω`` in the output form):

* parameter form (12): ``t̄ = u^⊤ω + Σ_k π_k T_k``;
* output form (11): ``t̄ = g(Σ_k π_k g^{-1}(T_k))`` (:func:`mix`).

Kernels return ``t̄``, ``∂t̄/∂T_k``, ``∂t̄/∂π_k`` and ``∂t̄/∂(u^⊤ω)``; the chain rule with
``∂φ/∂t̄`` gives every gradient.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .. import _kernels as K


@njit(cache=True)
def phi_arrays(code, t, y):
    """``φ``, ``∂φ/∂t``, ``∂²φ/∂t²`` of every sample."""
    n = t.shape[0]
    v, d1, d2 = np.empty(n), np.empty(n), np.empty(n)
    for j in range(n):
        v[j], d1[j], d2[j] = K.phi(code, t[j], y[j], 0.0)
    return v, d1, d2


@njit(cache=True)
def _logsumexp(a):
    top = a.max()
    s = 0.0
    for k in range(a.shape[0]):
        s += np.exp(a[k] - top)
    return top + np.log(s)


@njit(cache=True)
def mix(code, T, pm, dT, dP, work):
    r"""Output mixture (11) of one sample: returns ``t̄ = g(Σ_k π_k g⁻¹(T_k))`` and writes
    ``∂t̄/∂T_k`` into ``dT`` and ``∂t̄/∂π_k`` into ``dP`` (``work``: scratch, shape (4, K)).

    Gaussian: ``t̄ = Σ π_k T_k``. Poisson: ``t̄ = log Σ π_k e^{T_k}``, ``∂t̄/∂T_k = w_k``
    (softmax weights), ``∂t̄/∂π_k = e^{T_k − t̄}``. Bernoulli, with ``μ = Σ π_k σ(T_k)`` and
    ``ν = Σ π_k σ(−T_k)`` (``= 1 − μ`` on the simplex), ``u_k = π_kσ(T_k)/μ``,
    ``v_k = π_kσ(−T_k)/ν``: ``t̄ = log μ − log ν``, ``∂t̄/∂T_k = u_k σ(−T_k) + v_k σ(T_k)``,
    ``∂t̄/∂π_k = σ(T_k)/μ − σ(−T_k)/ν``, all through ``log σ(±t) = −φ_logistic(t, ±1)``.
    Off the simplex these extensions differ from others by multiples of the all-ones
    direction, to which the entropic mirror step is blind.
    """
    n = T.shape[0]
    if code == K.LEAST_SQUARES:
        t = 0.0
        for k in range(n):
            t += pm[k] * T[k]
            dT[k] = pm[k]
            dP[k] = T[k]
        return t
    a, b, ls, lsn = work[0], work[1], work[2], work[3]
    if code == K.POISSON:
        for k in range(n):
            a[k] = np.log(pm[k]) + T[k]
        t = _logsumexp(a)
        for k in range(n):
            dT[k] = np.exp(a[k] - t)
            dP[k] = np.exp(T[k] - t)
        return t
    for k in range(n):
        ls[k] = -K.phi(K.LOGISTIC, T[k], 1.0, 0.0)[0]
        lsn[k] = -K.phi(K.LOGISTIC, T[k], -1.0, 0.0)[0]
        a[k] = np.log(pm[k]) + ls[k]
        b[k] = a[k] - ls[k] + lsn[k]
    la, lb = _logsumexp(a), _logsumexp(b)
    for k in range(n):
        dT[k] = np.exp(a[k] - la + lsn[k]) + np.exp(b[k] - lb + ls[k])
        dP[k] = np.exp(ls[k] - la) - np.exp(lsn[k] - lb)
    return la - lb


@njit(cache=True)
def sample_predictor(code, output, u, x, Theta, omega, pm, T, dT, dP, work):
    """``t̄`` of one sample (writes ``T``, ``dT``, ``dP``); returns ``(t̄, ∂t̄/∂(uᵀω))``."""
    s = 0.0
    for l in range(u.shape[0]):
        s += u[l] * omega[l]
    for k in range(Theta.shape[0]):
        T[k] = 0.0
        for l in range(x.shape[0]):
            T[k] += x[l] * Theta[k, l]
    if output:
        for k in range(T.shape[0]):
            T[k] += s
        t = mix(code, T, pm, dT, dP, work)
        return t, dT.sum()
    t = s
    for k in range(T.shape[0]):
        t += pm[k] * T[k]
        dT[k] = pm[k]
        dP[k] = T[k]
    return t, 1.0


@njit(cache=True)
def predict(code, output, F_S, F_P, cid, Theta, omega, Pi):
    """``t̄`` and ``∂t̄/∂π`` of every sample; sample ``j`` uses ``Pi[cid[j]]``."""
    m, n = F_P.shape[0], Theta.shape[0]
    tbar, dPs = np.empty(m), np.empty((m, n))
    T, dT, dP, work = np.empty(n), np.empty(n), np.empty(n), np.empty((4, n))
    for j in range(m):
        tbar[j] = sample_predictor(code, output, F_S[j], F_P[j], Theta, omega, Pi[cid[j]],
                                   T, dT, dP, work)[0]
        dPs[j] = dP
    return tbar, dPs


@njit(cache=True)
def terms(code, output, F_S, F_P, y, coef, cid, Theta, omega, Pi):
    """``Σ_j coef_j φ(t̄_j, y_j)`` and its gradients in ``Θ``, ``ω`` and ``Π`` (rows of the
    clients in ``cid``)."""
    m, n = F_P.shape[0], Theta.shape[0]
    gT, gw, gP = np.zeros_like(Theta), np.zeros_like(omega), np.zeros_like(Pi)
    T, dT, dP, work = np.empty(n), np.empty(n), np.empty(n), np.empty((4, n))
    value = 0.0
    for j in range(m):
        i = cid[j]
        t, dS = sample_predictor(code, output, F_S[j], F_P[j], Theta, omega, Pi[i], T, dT, dP,
                                 work)
        v, d1, _ = K.phi(code, t, y[j], 0.0)
        value += coef[j] * v
        g = coef[j] * d1
        for k in range(n):
            gP[i, k] += g * dP[k]
            gk = g * dT[k]
            for l in range(F_P.shape[1]):
                gT[k, l] += gk * F_P[j, l]
        for l in range(F_S.shape[1]):
            gw[l] += g * dS * F_S[j, l]
    return value, gT, gw, gP
