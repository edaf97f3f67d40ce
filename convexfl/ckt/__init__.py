r"""PerFed-CKT: the linear-regression analysis (Cho, Wang, Chiruvolu, Joshi, Sec. 4, App. B).

This package implements, with numpy/scipy only, the Bayesian linear-regression model the paper
uses to motivate clustered knowledge transfer, the CKT estimator (14), the Bayes-optimal
estimator (12), the printed closed form of Theorem 4.2, the *exact* conditional test risk of
(15) in closed form, a numerical minimiser of that risk, a Monte Carlo estimate of it, and a
comparison report (:func:`compare_theorem_4_2`) that a theory check can call.

The package is cut by subject: :mod:`.linear` (the model, the estimators, Theorem 4.2 and the
findings on the printed formulas), :mod:`.risk` (the exact conditional risk, its minimiser,
Monte Carlo, the comparison), :mod:`.codistill` (clustered co-distillation, paper
Algorithm 1, on the federated runtime) and :mod:`.toy` (the toy example of Fig. 1).
"""

from __future__ import annotations

from .codistill import codistillation, codistillation_cost
from .linear import (
    LinearSetting,
    PosteriorParts,
    Theorem42,
    ckt_estimator,
    local_estimates,
    make_linear_setting,
    posterior_mean,
    theorem_4_2,
)
from .risk import (
    ClosedFormEvaluation,
    MonteCarloRisk,
    RiskMinimum,
    RiskTerms,
    Theorem42Comparison,
    bayes_risk,
    compare_theorem_4_2,
    conditional_risk,
    minimise_risk,
    monte_carlo_risk,
)
from .toy import ToyExample, toy_example

__all__ = [
    "ClosedFormEvaluation",
    "LinearSetting",
    "MonteCarloRisk",
    "PosteriorParts",
    "RiskMinimum",
    "RiskTerms",
    "Theorem42",
    "Theorem42Comparison",
    "ToyExample",
    "bayes_risk",
    "ckt_estimator",
    "codistillation",
    "codistillation_cost",
    "compare_theorem_4_2",
    "conditional_risk",
    "local_estimates",
    "make_linear_setting",
    "minimise_risk",
    "monte_carlo_risk",
    "posterior_mean",
    "theorem_4_2",
    "toy_example",
]
