"""Random PPFL-GLM instances and the bookkeeping shared by the PPFL checks."""

from __future__ import annotations

import logging

import numpy as np

from convexfl.federated import run_federated
from convexfl.ppfl import PPFLProblem, alternating, default_steps, rbcd

FAMILIES = ("gaussian", "binomial", "poisson")


def glm_data(rng: np.random.Generator, family: str, *, n_clients=None, m=None, dim=None,
             n_components=None, unequal=True):
    """Federated GLM data whose clients mix ``K`` canonical coefficient vectors.

    Client ``i`` has ``β_i = Σ_k w_ik θ_k`` (``w_i`` Dirichlet(½)) and ``m_i`` samples
    ``x ~ N(0, s²I)`` (``s = ½`` for Poisson), ``y`` from the family with mean
    ``g⁻¹(β_iᵀx)`` (Gaussian noise 0.3; binomial logit scaled by 2; Poisson rate clipped).

    Returns ``X, y, groups, K``.
    """
    N = int(rng.integers(4, 9)) if n_clients is None else n_clients
    d = int(rng.integers(2, 5)) if dim is None else dim
    K = int(rng.integers(2, 4)) if n_components is None else n_components
    base = int(rng.integers(15, 40)) if m is None else m
    sizes = (rng.integers(max(base // 2, 5), 2 * base, N) if unequal
             else np.full(N, base))
    groups = np.repeat(np.arange(N), sizes)
    X = rng.normal(size=(groups.size, d)) * (0.5 if family == "poisson" else 1.0)
    beta = rng.dirichlet(0.5 * np.ones(K), size=N) @ rng.normal(size=(K, d))
    t = np.sum(X * beta[groups], axis=1)
    if family == "gaussian":
        y = t + 0.3 * rng.normal(size=t.size)
    elif family == "binomial":
        y = (rng.uniform(size=t.size) < 1.0 / (1.0 + np.exp(-2.0 * t))).astype(float)
    else:
        y = rng.poisson(np.exp(np.clip(t, -5.0, 3.0))).astype(float)
    return X, y, groups, K


def glm_problem(rng: np.random.Generator, family: str, *, lam=None, affinity="uniform",
                alpha=1e-2, form=None, **kw) -> PPFLProblem:
    """A random :class:`~convexfl.ppfl.PPFLProblem` (parameter form (12), or the output form
    (11) for half the non-Gaussian draws), λ log-uniform in [1e-3, 0.3] unless given."""
    X, y, groups, K = glm_data(rng, family, **kw)
    if form is None:
        form = "output" if family != "gaussian" and rng.uniform() < 0.5 else "parameter"
    lam = float(10 ** rng.uniform(-3, -0.5)) if lam is None else lam
    if isinstance(affinity, str) and affinity == "random":
        affinity = random_affinity(rng, groups.max() + 1)
    return PPFLProblem(X, y, groups, n_components=K, family=family, form=form, lam=lam,
                       affinity=affinity, alpha=alpha)


def random_affinity(rng: np.random.Generator, n: int, n_parts: int = 1) -> np.ndarray:
    """A symmetric non-negative affinity on ``n`` clients with ``n_parts`` connected
    components (contiguous blocks; each a random graph plus a path, so connected)."""
    A = np.zeros((n, n))
    for block in np.array_split(np.arange(n), n_parts):
        k = block.size
        W = rng.uniform(0.1, 1.0, size=(k, k)) * (rng.uniform(size=(k, k)) < 0.5)
        W = np.triu(W, 1)
        W[np.arange(k - 1), np.arange(1, k)] += 0.5
        A[np.ix_(block, block)] = W + W.T
    return A


def make_algorithm(problem, solver, init, **kw):
    """:func:`~convexfl.ppfl.rbcd` (Algorithm 1) or :func:`~convexfl.ppfl.alternating`
    (Algorithm 3)."""
    return (rbcd if solver == "rbcd" else alternating)(problem, init=init, **kw)


def auto_steps(problem, init):
    """The package's heuristic ``(η_Θ, η_π)`` at ``init`` (:func:`default_steps`)."""
    return default_steps(problem, *init)


def run_with_callback(problem, alg, rounds, seed, callback, participation=1.0):
    """Run ``alg`` on ``problem``'s clients; ``callback(server_state)`` after every round
    (its return value is ignored: the run never stops early)."""
    def each_round(record, server_state, client_states):
        callback(server_state)
        return False

    # a diverging run makes clients fail (non-finite replies); the caller counts the failures
    # from the history, so the runtime's per-client warnings are silenced here
    log = logging.getLogger("convexfl.federated.runtime")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        with np.errstate(all="ignore"):
            return run_federated(alg, problem.client_data(), rounds=rounds,
                                 random_state=seed, participation=participation,
                                 progress=False, callback=each_round)
    finally:
        log.setLevel(level)
