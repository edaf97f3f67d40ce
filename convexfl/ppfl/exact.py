r"""Exact centralised solvers of PPFL's convex blocks (for checks and baselines).

* :func:`solve_theta` — ``min_{Θ, ω} F`` for fixed ``Π``. Convex for the parameter form (12)
  (``t̄`` is linear in ``(ω, Θ)``) and for the Gaussian family in either form; the
  output form (11) of the Bernoulli and Poisson families is not convex in ``Θ`` and is refused.
  Solved by damped Newton on the GLM with design ``[u_j, π_{i(j)} ⊗ x_j]``.
* :func:`solve_memberships` — ``min_Π F`` for fixed ``(Θ, ω)``, convex for both forms:
  over the product of simplices by cvxpy (Clarabel; for (11) the negative log-likelihood is
  written in the mean ``μ = Σ_k π_k g⁻¹(t_k)``, which is affine in ``π``), or, for
  unconstrained memberships (the GLMM equivalence), by damped Newton, optionally jointly
  with ``ω``.
* :func:`exact_bcd` — block coordinate descent with the two exact block solvers.

Newton uses a Jacobi-scaled least-squares solve, so singular Hessians (e.g. the shift
invariance of the Laplacian penalty) are handled with minimum-norm steps.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ._model import LAPLACIANS, check_choice, laplacian_matrix, phi

__all__ = ["solve_theta", "solve_memberships", "exact_bcd", "BlockSolution", "newton"]


@dataclass
class BlockSolution:
    """Result of an exact block solve.

    Attributes
    ----------
    Theta, omega, Pi : ndarray
        The point after the solve (the other blocks unchanged).
    objective : float
        ``F`` there (with the penalty the solve used).
    n_iter : int
    status : str
        ``"optimal"`` or the solver's status.
    history : list of float
        Objective after each sweep (:func:`exact_bcd` only).
    """

    Theta: np.ndarray
    omega: np.ndarray
    Pi: np.ndarray
    objective: float
    n_iter: int
    status: str
    history: list = field(default_factory=list)


# ----------------------------------------------------------------------------- Newton


def newton(fun, x0, *, tol=1e-12, max_iter=100):
    r"""Damped Newton for a smooth convex ``fun(x) -> (f, ∇f, ∇²f)``.

    Steps solve the Jacobi-scaled system by least squares (minimum-norm on the null space
    of a singular Hessian); Armijo backtracking. Stops when the Newton decrement
    :math:`δ^2 = -∇f^\top Δx` satisfies :math:`δ^2/2 ≤ \mathrm{tol} \cdot (1 + |f|)` (one
    more step is then taken as iterative refinement) or no decrease is possible.

    Returns
    -------
    x, n_iter, converged
    """
    x = np.array(x0, dtype=float)
    f, g, H = fun(x)
    refined = False
    for it in range(1, max_iter + 1):
        d = np.sqrt(np.abs(np.diag(H)))
        d[d == 0] = 1.0
        dx = -np.linalg.lstsq(H / np.outer(d, d), g / d, rcond=None)[0] / d
        dec2 = float(-g @ dx)
        small = dec2 <= 2 * tol * (1.0 + abs(f))
        if small and refined:
            return x, it - 1, True
        t, accepted = 1.0, False
        while t > 1e-12:
            fn, gn, Hn = fun(x + t * dx)
            if fn <= f + 1e-4 * t * min(-dec2, 0.0) + 1e-15 * (1.0 + abs(f)):
                accepted = True
                break
            t *= 0.5
        if not accepted:
            return x, it, small
        x, f, g, H = x + t * dx, fn, gn, Hn
        refined = small
    return x, max_iter, False


def glm_fun(code, Z, y, w, Q, offset=0.0):
    r"""``x ↦ Σ_j w_j φ(z_jᵀx + o_j, y_j) + ½ xᵀQx`` with gradient and Hessian."""
    def fun(x):
        t = Z @ x + offset
        v, d1, d2 = phi(code, t, y)
        Qx = Q @ x
        return (float(w @ v + 0.5 * x @ Qx), Z.T @ (w * d1) + Qx,
                (Z * (w * d2)[:, None]).T @ Z + Q)
    return fun


# ----------------------------------------------------------------------------- Θ-block


def theta_design(problem, Pi):
    """Design of ``t̄`` in ``x = [ω, vec Θ]`` (row-major Θ) for the parameter form."""
    Pm = Pi[problem.client_of_sample]
    kron = (Pm[:, :, None] * problem.F_P[:, None, :]).reshape(len(problem.y), -1)
    return np.hstack([problem.F_S, kron])


def solve_theta(problem, Pi, *, Theta0=None, omega0=None, tol=1e-12, max_iter=100):
    r"""Exact ``argmin_{Θ, ω} F(Θ, ω, Π)`` for fixed memberships.

    Raises
    ------
    ValueError
        For the output form (11) of a non-Gaussian family (the block is not convex).
    """
    if problem.form == "output" and problem.family.name != "gaussian":
        raise ValueError(f"form: the Θ-block of form='output' with family="
                         f"{problem.family.name!r} is not convex; no exact solver")
    K, dP, dS = problem.n_components, problem.d_personal, problem.d_shared
    Theta0 = np.zeros((K, dP)) if Theta0 is None else Theta0
    omega0 = np.zeros(dS) if omega0 is None else omega0
    Theta0, omega0, Pi = problem.check_point(Theta0, omega0, Pi)
    Z = theta_design(problem, Pi)
    fun = glm_fun(problem.family.code, Z, problem.y, problem.weights,
                  problem.alpha * np.eye(Z.shape[1]))
    x, n_iter, ok = newton(fun, np.concatenate([omega0, Theta0.ravel()]), tol=tol,
                           max_iter=max_iter)
    omega, Theta = x[:dS], x[dS:].reshape(K, dP)
    return BlockSolution(Theta, omega, Pi, problem.objective(Theta, omega, Pi), n_iter,
                         "optimal" if ok else "max_iter")


# ----------------------------------------------------------------------------- π-block


def solve_memberships(problem, Theta, omega=None, *, Pi0=None, laplacian="laplacian",
                      include_shared=False, tol=1e-12, max_iter=100, solver="CLARABEL"):
    r"""Exact ``argmin_Π F(Θ, ω, Π)`` (and over ``ω`` too with ``include_shared``).

    Over the simplices (``problem.simplex``) this is a convex program solved by cvxpy; for
    unconstrained memberships (parameter form) it is a GLM in ``[ω, vec Π]`` with the quadratic
    penalty ``λ vec(Π)ᵀ(L ⊗ I_K) vec(Π)``, solved by Newton.

    Parameters
    ----------
    laplacian : {"laplacian", "degree_only"}
        The penalty minimised.
    include_shared : bool
        Optimise ``ω`` jointly (unconstrained memberships only).
    """
    laplacian = check_choice(laplacian, "laplacian", LAPLACIANS)
    Theta, omega, Pi0 = problem.initial_point(np.random.default_rng(0), Theta=Theta,
                                              omega=omega, Pi=Pi0)
    if problem.simplex:
        if include_shared:
            raise ValueError("include_shared: only for unconstrained memberships")
        Pi, status = _memberships_cvxpy(problem, Theta, omega, laplacian, solver)
        return BlockSolution(Theta, omega, Pi, problem.objective(Theta, omega, Pi, laplacian),
                             1, status)
    omega, Pi, n_iter, ok = _memberships_newton(problem, Theta, omega, Pi0, laplacian,
                                                include_shared, tol, max_iter)
    return BlockSolution(Theta, omega, Pi, problem.objective(Theta, omega, Pi, laplacian),
                         n_iter, "optimal" if ok else "max_iter")


def membership_design(problem, Theta):
    """Design of ``t̄`` in ``vec Π`` (row-major) for the parameter form: sample ``j`` of
    client ``i`` has ``Θ x_j`` in block ``i``."""
    M, K, N = len(problem.y), problem.n_components, problem.n_clients
    Z = np.zeros((M, N * K))
    cols = problem.client_of_sample[:, None] * K + np.arange(K)[None, :]
    Z[np.arange(M)[:, None], cols] = problem.F_P @ Theta.T
    return Z


def _memberships_newton(problem, Theta, omega, Pi0, laplacian, include_shared, tol, max_iter):
    N, K, dS = problem.n_clients, problem.n_components, problem.d_shared
    Zp = membership_design(problem, Theta)
    Qp = 2.0 * problem.lam * np.kron(laplacian_matrix(problem.A, laplacian), np.eye(K))
    if include_shared:
        Z = np.hstack([problem.F_S, Zp])
        Q = np.zeros((dS + N * K, dS + N * K))
        Q[:dS, :dS] = problem.alpha * np.eye(dS)
        Q[dS:, dS:] = Qp
        x0, offset = np.concatenate([omega, Pi0.ravel()]), 0.0
    else:
        Z, Q, x0, offset = Zp, Qp, Pi0.ravel(), problem.F_S @ omega
    fun = glm_fun(problem.family.code, Z, problem.y, problem.weights, Q, offset)
    x, n_iter, ok = newton(fun, x0, tol=tol, max_iter=max_iter)
    if include_shared:
        omega, x = x[:dS], x[dS:]
    return omega, x.reshape(N, K), n_iter, ok


def _memberships_cvxpy(problem, Theta, omega, laplacian, solver):
    import cvxpy as cp
    import scipy.sparse as sp

    N, K, M = problem.n_clients, problem.n_components, len(problem.y)
    P = cp.Variable((N, K), nonneg=True)
    R = sp.csr_matrix((np.ones(M), (np.arange(M), problem.client_of_sample)), shape=(M, N))
    shared = problem.F_S @ omega
    T = problem.F_P @ Theta.T
    if problem.form == "parameter":
        tbar = shared + cp.sum(cp.multiply(R @ P, T), axis=1)
        data = problem.weights @ problem.loss._cvxpy_phi(tbar)
    else:
        mu = cp.sum(cp.multiply(R @ P, problem.family.mean(T + shared[:, None])), axis=1)
        data = problem.weights @ problem.family.cvxpy_nll_of_mean(mu, problem.y)
    Lm = laplacian_matrix(problem.A, laplacian)
    ev, V = np.linalg.eigh(Lm)
    half = (V * np.sqrt(np.clip(ev, 0.0, None))) @ V.T
    objective = data + problem.lam * cp.sum_squares(half @ P)
    prob = cp.Problem(cp.Minimize(objective), [cp.sum(P, axis=1) == 1])
    prob.solve(solver=solver)
    if prob.status not in ("optimal", "optimal_inaccurate"):
        raise RuntimeError(f"solve_memberships: cvxpy status {prob.status}")
    Pi = np.clip(P.value, 0.0, None)
    return Pi / Pi.sum(axis=1, keepdims=True), prob.status


# ----------------------------------------------------------------------------- BCD


def exact_bcd(problem, Theta, omega, Pi, *, max_iter=50, tol=1e-10, laplacian="laplacian"):
    r"""Block coordinate descent with exact block solves: ``(Θ, ω) ← solve_theta``,
    ``Π ← solve_memberships``, until the objective decreases by less than
    ``tol · (1 + |F|)``. The objective never increases (up to the solvers' accuracy)."""
    Theta, omega, Pi = problem.check_point(Theta, omega, Pi)
    history = [problem.objective(Theta, omega, Pi, laplacian)]
    status = "max_iter"
    n_iter = 0
    for n_iter in range(1, max_iter + 1):  # noqa: B007 (n_iter is reported)
        th = solve_theta(problem, Pi, Theta0=Theta, omega0=omega)
        Theta, omega = th.Theta, th.omega
        Pi = solve_memberships(problem, Theta, omega, Pi0=Pi, laplacian=laplacian).Pi
        history.append(problem.objective(Theta, omega, Pi, laplacian))
        if history[-2] - history[-1] <= tol * (1.0 + abs(history[-1])):
            status = "optimal"
            break
    return BlockSolution(Theta, omega, Pi, history[-1], n_iter, status, history)
