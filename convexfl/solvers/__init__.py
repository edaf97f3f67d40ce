"""Solvers: one entry point, :func:`solve`, and one result type, :class:`Solution`.

Methods
-------
``"cvxpy"``
    The reference (:mod:`convexfl.solvers.reference`): cvxpy + Clarabel, exact to
    interior-point accuracy, for every problem and loss.

Every method returns a :class:`Solution` whose ``kkt_residual`` is recomputed from ``X`` by
:mod:`convexfl.certificates`, so that no solver is trusted on its own word.
"""

from __future__ import annotations

from .base import IncompatibleLossError, Solution, SolverError
from .reference import solve_reference

__all__ = ["solve", "Solution", "SolverError", "IncompatibleLossError", "METHODS"]

METHODS = {"cvxpy": solve_reference}


def solve(prob, method: str = "cvxpy", **options) -> Solution:
    """Solve a convexfl problem.

    Parameters
    ----------
    prob : SumOfNorms, SquaredPenalty or Reduced
    method : str
        One of :data:`METHODS` (``"cvxpy"``; later issues add fast methods).
    **options
        Passed to the method; all accept ``tol`` and ``max_iter``.

    Returns
    -------
    Solution
    """
    try:
        fn = METHODS[method]
    except (KeyError, TypeError):
        raise ValueError(f"method: expected one of {sorted(METHODS)}, got {method!r}") from None
    return fn(prob, **options)
