"""Checks of Di, Yang, Ye & Chang, *PPFL* (population personalised FL) for GLMs.

- :mod:`.glmm` — Theorem 3 / App. A.2: PPFL reproduces a linear mixed model (statsmodels'
  MixedLM as the oracle);
- :mod:`.simplex` — the mirror step (21)–(24) with Remark 2's floor keeps every membership on
  the simplex;
- :mod:`.convergence` — Sec. 3.2's criteria and the sub-linear rate of Theorems 1–2;
- :mod:`.limits` — K = 1 is FedAvg / the pooled GLM, λ → ∞ equalises connected memberships.
"""

from . import convergence, glmm, limits, simplex  # noqa: F401
