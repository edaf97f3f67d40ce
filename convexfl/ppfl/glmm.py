r"""Generalised linear mixed models as PPFL problems (paper Thm 3, App. A.2; ``docs/math.md`` §2).

The mixed model
---------------
Client (group) ``i`` has samples ``j = 1..m_i`` with fixed-effect features
:math:`u_{ij} ∈ R^p` and random-effect features :math:`z_{ij} ∈ R^q`;

.. math::

    η_{ij} = u_{ij}^\top β + z_{ij}^\top b_i ,\qquad b_i \sim N(0, Ψ),

and the response follows the family with canonical parameter :math:`η` and dispersion
:math:`σ^2` (Gaussian: the residual variance; Bernoulli: 1). With the variances known, the
fixed effects and the predicted random effects (BLUPs in the linear case; the joint MAP /
h-likelihood estimates otherwise) minimise

.. math::

    J(β, b) = \frac{1}{σ^2}\sum_{i,j} s_{ij}\, φ(η_{ij}, y_{ij})
              + \frac12 \sum_i b_i^\top Ψ^{-1} b_i ,

``φ`` the per-sample negative log-likelihood of :mod:`convexfl._kernels` (``½ r²`` for the
Gaussian, so the first term is :math:`\sum r^2/(2σ^2)`), ``s_ij`` optional sample weights.
For the Gaussian family these are Henderson's mixed-model equations: ``β̂`` is the GLS
estimate and ``b̂_i`` the BLUP.

The PPFL problem (the equivalence)
----------------------------------
Write :math:`Ψ = σ_b^2 Ψ_0` with :math:`σ_b^2 = \mathrm{tr}(Ψ)/q` (so a scalar ``cov_re`` is
:math:`σ_b^2` and :math:`Ψ_0 = I`). Take

* K = q canonical models, the rows of :math:`Θ = Ψ_0^{1/2}` (fixed, not learned), so
  :math:`b_i = Θ^\top π_i` and :math:`b_i^\top Ψ^{-1} b_i = \|π_i\|^2 / σ_b^2`: the penalty on
  the memberships stays isotropic;
* the fixed effects as the shared part :math:`ω = β` (the paper's "consistent components of
  the membership vectors");
* memberships unconstrained (no simplex), the parameter form (12), :math:`a_{ij} = 1`
  (``i ≠ j``), :math:`p_i = m_i / M`, and

.. math::

    \boxed{λ = \frac{σ^2 / σ_b^2}{2\, N M}}\qquad(λ a_{ij} = \frac{σ^2}{2 N M σ_b^2}).

**Derivation.** With all :math:`a_{ij} = 1`,
:math:`\sum_{i,j}\|π_i - π_j\|^2 = 2N\sum_i\|π_i - \bar π\|^2`, so the PPFL penalty is
:math:`λN\sum_i\|π_i - \bar π\|^2`. Multiplying ``J`` by :math:`σ^2/M` gives the data term
:math:`\sum_i p_i f_i = (1/M)\sum_{ij} s_{ij}φ` plus
:math:`(σ^2/(2Mσ_b^2))\sum_i\|π_i\|^2`. Both problems are invariant to moving a common
:math:`c` from the memberships into the fixed effects provided every random-effect column lies
in the span of the fixed-effect columns (``z_ijᵀΘᵀc = u_ijᵀRΘᵀc`` with :math:`U R = Z`;
this holds for random intercepts and slopes whose variables are also fixed effects, and is
checked). The GLMM optimum has :math:`\bar π = 0` (shifting the mean into ``β`` lowers
:math:`\sum\|π_i\|^2 = \sum\|π_i - \bar π\|^2 + N\|\bar π\|^2`), where
:math:`\sum_i\|π_i\|^2 = \sum_i\|π_i - \bar π\|^2`. Hence
:math:`\min F = (σ^2/M) \min J` with :math:`λN = σ^2/(2Mσ_b^2)`, and the GLMM estimates are
read from any PPFL minimiser by centring: :math:`π_i ← π_i - \bar π`,
:math:`ω ← ω + RΘ^\top\bar π`; then :math:`β̂ = ω`, :math:`b̂_i = Θ^\top π_i` and
:math:`β̂ + b̂_i` (on the random columns) are the personal coefficients.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import as_float_array, as_int, as_scalar, check_groups
from ._model import PPFLProblem, get_family, phi
from .exact import solve_memberships

__all__ = ["fit_mixed_model", "MixedModelResult", "glmm_lambda", "glmm_objective"]


def glmm_lambda(sigma2, sigma_b2, n_groups, n_samples):
    r"""The PPFL λ of the GLMM equivalence: :math:`λ = (σ^2/σ_b^2) / (2 N M)` with
    ``a_ij = 1``, ``N`` groups and ``M`` samples (see the module docstring)."""
    return as_scalar(sigma2, "sigma2", low=0.0, low_inclusive=False) / (
        as_scalar(sigma_b2, "sigma_b2", low=0.0, low_inclusive=False)
        * 2.0 * as_int(n_groups, "n_groups", low=1) * as_int(n_samples, "n_samples", low=1))


@dataclass
class MixedModelResult:
    """Fixed and random effects of a (G)LMM solved as a PPFL problem.

    Attributes
    ----------
    fixed_effects : ndarray (p,)
        ``β̂``.
    random_effects : ndarray (N, q)
        ``b̂_i``, groups in sorted order (``groups``).
    groups : ndarray (N,)
    family : str
    sigma2, sigma_b2 : float
    cov_re : ndarray (q, q)
        ``Ψ``.
    lam : float
        The PPFL λ used (``glmm_lambda``).
    canonical_models : ndarray (q, q)
        ``Θ = Ψ_0^{1/2}``.
    memberships : ndarray (N, q)
        Centred ``π_i`` (``b_i = Θᵀπ_i``).
    objective : float
        The PPFL objective at the solution.
    glmm_objective : float
        ``J(β̂, b̂)``; equals ``objective · M / σ²``.
    n_iter : int
    converged : bool
    problem : PPFLProblem
    """

    fixed_effects: np.ndarray
    random_effects: np.ndarray
    groups: np.ndarray
    family: str
    sigma2: float
    sigma_b2: float
    cov_re: np.ndarray
    lam: float
    canonical_models: np.ndarray
    memberships: np.ndarray
    objective: float
    glmm_objective: float
    n_iter: int
    converged: bool
    problem: PPFLProblem

    @property
    def personal_coefficients(self):
        """``(β̂, b̂_i)`` stacked per group, shape (N, p + q); the random columns' total
        coefficient is ``β̂`` on the matching fixed column plus ``b̂_i``."""
        return np.hstack([np.tile(self.fixed_effects, (len(self.groups), 1)),
                          self.random_effects])


def _check_cov_re(cov_re, q):
    C = np.asarray(cov_re, dtype=float)
    if C.ndim == 0:
        return as_scalar(float(C), "cov_re", low=0.0, low_inclusive=False) * np.eye(q)
    C = as_float_array(C, "cov_re", ndim=2)
    if C.shape != (q, q):
        raise ValueError(f"cov_re: expected a scalar or shape ({q}, {q}), got {C.shape}")
    if not np.allclose(C, C.T, rtol=1e-10, atol=1e-14 * np.abs(C).max()):
        raise ValueError("cov_re: must be symmetric")
    if np.linalg.eigvalsh(C)[0] <= 0:
        raise ValueError("cov_re: must be positive definite")
    return 0.5 * (C + C.T)


def _sqrtm(C):
    ev, V = np.linalg.eigh(C)
    return (V * np.sqrt(ev)) @ V.T


def _span_map(X_fixed, X_random):
    """``R`` with ``X_fixed R = X_random``, or ValueError when a random column is outside
    the span of the fixed columns."""
    R, *_ = np.linalg.lstsq(X_fixed, X_random, rcond=None)
    resid = np.linalg.norm(X_fixed @ R - X_random, axis=0)
    scale = np.linalg.norm(X_random, axis=0) + 1e-300
    if np.any(resid > 1e-8 * scale):
        bad = np.flatnonzero(resid > 1e-8 * scale).tolist()
        raise ValueError(f"X_random: columns {bad} are not in the span of X_fixed; the "
                         "equivalence needs every random effect to have its fixed effect "
                         "(e.g. a fixed intercept for a random intercept)")
    return R


def glmm_objective(y, X_fixed, X_random, groups, beta, b, sigma2, cov_re, *,
                   family="gaussian", sample_weight=None):
    r"""``J(β, b) = (1/σ²) Σ s φ(η, y) + ½ Σ_i b_iᵀΨ⁻¹b_i`` (groups in sorted order)."""
    fam = get_family(family)
    y = fam.targets(as_float_array(y, "y", ndim=1))
    Xf = as_float_array(X_fixed, "X_fixed", ndim=2)
    Xr = as_float_array(X_random, "X_random", ndim=2)
    _, user = np.unique(np.asarray(groups), return_inverse=True)
    b = np.atleast_2d(np.asarray(b, dtype=float))
    eta = Xf @ np.asarray(beta, dtype=float) + np.sum(Xr * b[user], axis=1)
    s = np.ones_like(y) if sample_weight is None else np.asarray(sample_weight, dtype=float)
    Psi = _check_cov_re(cov_re, Xr.shape[1])
    prior = 0.5 * np.sum(b * np.linalg.solve(Psi, b.T).T)
    return float(s @ phi(fam.code, eta, y)[0]) / sigma2 + float(prior)


def fit_mixed_model(y, X_fixed, X_random, groups, sigma2=1.0, cov_re=1.0, *,
                    family="gaussian", sample_weight=None, tol=1e-13, max_iter=100):
    r"""Fixed effects and predicted random effects of a (G)LMM with known variances, by
    solving the equivalent PPFL problem (see the module docstring for the construction and
    the constant ``λ = (σ²/σ_b²)/(2NM)``).

    Parameters
    ----------
    y : array (M,)
        Response (binomial: 0/1 or ±1).
    X_fixed : array (M, p)
        Fixed-effect design (include the intercept column yourself).
    X_random : array (M, q)
        Random-effect design; each column must lie in the span of ``X_fixed``.
    groups : array (M,)
        Group (client) of each sample.
    sigma2 : float
        Residual variance σ² (Gaussian) or dispersion (binomial: 1 for the likelihood).
    cov_re : float or array (q, q)
        ``σ_b²`` (isotropic ``Ψ = σ_b² I``) or the covariance ``Ψ`` of ``b_i``.
    family : {"gaussian", "binomial", "poisson"}
    sample_weight : array (M,), optional
    tol, max_iter : Newton's tolerance and iteration cap.

    Returns
    -------
    MixedModelResult
        ``.fixed_effects`` (p,), ``.random_effects`` (N, q) in sorted group order.

    Notes
    -----
    The solve is :func:`convexfl.ppfl.solve_memberships` on the PPFL objective (the
    membership block with the shared part, which is jointly convex for (12)); statsmodels'
    ``MixedLM`` with its own variance estimates plugged in (``sigma2=res.scale``,
    ``cov_re=res.cov_re``) gives the same ``fe_params`` and ``random_effects``.
    """
    fam = get_family(family)
    Xf = as_float_array(X_fixed, "X_fixed", ndim=2)
    Xr = as_float_array(X_random, "X_random", ndim=2)
    if Xr.shape[0] != Xf.shape[0]:
        raise ValueError(f"X_random: has {Xr.shape[0]} rows but X_fixed has {Xf.shape[0]}")
    sigma2 = as_scalar(sigma2, "sigma2", low=0.0, low_inclusive=False)
    Psi = _check_cov_re(cov_re, Xr.shape[1])
    sigma_b2 = float(np.trace(Psi)) / Psi.shape[0]
    Theta = _sqrtm(Psi / sigma_b2)
    R = _span_map(Xf, Xr)
    n_groups = len(check_groups(groups, Xf.shape[0])[0])
    problem = PPFLProblem(Xr, y, groups, n_components=Xr.shape[1], X_shared=Xf,
                          family=fam, form="parameter", affinity="uniform", simplex=False,
                          sample_weight=sample_weight,
                          lam=glmm_lambda(sigma2, sigma_b2, n_groups, Xf.shape[0]))
    sol = solve_memberships(problem, Theta, np.zeros(Xf.shape[1]), include_shared=True,
                            tol=tol, max_iter=max_iter)
    centre = sol.Pi.mean(axis=0)
    Pi, omega = sol.Pi - centre, sol.omega + R @ (Theta.T @ centre)
    b = Pi @ Theta
    return MixedModelResult(
        fixed_effects=omega, random_effects=b, groups=problem.user_labels, family=fam.name,
        sigma2=sigma2, sigma_b2=sigma_b2, cov_re=Psi, lam=problem.lam,
        canonical_models=Theta, memberships=Pi,
        objective=problem.objective(Theta, omega, Pi),
        glmm_objective=glmm_objective(y, Xf, Xr, groups, omega, b, sigma2, Psi, family=fam,
                                      sample_weight=sample_weight),
        n_iter=sol.n_iter, converged=sol.status == "optimal", problem=problem)
