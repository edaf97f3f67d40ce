r"""PPFL (Di, Yang, Ye, Chang): population personalised federated learning for GLMs.

K canonical models ``Θ``, an optional shared part ``ω`` and a membership vector
``π_i ∈ Δ_K`` per client; objective (``docs/math.md`` §2, λ over ordered pairs)

.. math::

    \min_{Θ, ω, Π}\ \sum_i p_i f_i(Θ, ω, π_i) + \frac{α}{2}(\|Θ\|_F^2 + \|ω\|^2)
    + \frac{λ}{2}\sum_{i,j} a_{ij}\|π_i - π_j\|^2 ,\qquad π_i ∈ Δ_K,

``p_i = m_i/M`` and ``f_i`` the client's mean negative log-likelihood (Gaussian, Bernoulli or
Poisson) under the parameter mixture (12) ``β_i = Θᵀπ_i`` or the output mixture (11)
``E[y] = Σ_k π_ik g⁻¹(θ_kᵀx)``.

Contents
--------
* :class:`PPFL` — the estimator (``fit(X, y, groups)``; ``memberships_``,
  ``canonical_models_``, ``personal_coefficients_``).
* :func:`rbcd`, :func:`alternating` — the paper's Algorithms 1 and 3 as
  :class:`convexfl.federated.Algorithm` objects (run by
  :func:`convexfl.federated.run_federated`); :func:`criteria` (Sec. 3.2).
* :func:`solve_theta`, :func:`solve_memberships`, :func:`exact_bcd` — exact centralised
  solvers of the convex blocks.
* :func:`fit_mixed_model` — a (G)LMM with known variances solved as a PPFL problem
  (Theorem 3), with :func:`glmm_lambda` the constant ``λ = (σ²/σ_b²)/(2NM)``.
* :class:`PPFLProblem`, :func:`mirror_step`, :func:`cosine_label_affinity`,
  :func:`laplacian_matrix`.

The paper's model uses ``L = D − A`` and the entropic mirror step; the authors' public code
uses ``D`` in the penalty's gradient and a double exponential in the mirror step, offered as
``laplacian="degree_only"``.
"""

from ._model import (
                     FAMILIES,
                     FORMS,
                     LAPLACIANS,
                     MIRRORS,
                     PPFLProblem,
                     cosine_label_affinity,
                     get_family,
                     label_histograms,
                     laplacian_matrix,
                     mirror_step,
)
from .algorithms import alternating, client_terms, criteria, default_steps, rbcd
from .estimator import PPFL
from .exact import BlockSolution, exact_bcd, solve_memberships, solve_theta
from .glmm import MixedModelResult, fit_mixed_model, glmm_lambda, glmm_objective

__all__ = ["PPFL", "PPFLProblem", "rbcd", "alternating", "criteria", "default_steps",
           "client_terms", "solve_theta", "solve_memberships", "exact_bcd", "BlockSolution",
           "fit_mixed_model", "MixedModelResult", "glmm_lambda", "glmm_objective",
           "mirror_step", "cosine_label_affinity", "label_histograms", "laplacian_matrix",
           "get_family", "FAMILIES", "FORMS", "LAPLACIANS", "MIRRORS"]
