r"""Standard units: every problem is solved and certified at unit scale, reported in yours.

(SON) is equivariant under changes of units: for the quadratic loss, points ``a → t a + b``
and ``λ → t λ`` give ``X → t X + b``; for least squares, targets ``y → t y`` and ``λ → t λ``
give ``X → t X``; for every linear model, features ``a → a/t`` and ``λ → λ/t`` give
``X → t X``. A solver's tolerances, a conic solver's gap, a fusion tolerance are numbers, and
numbers do not transform: at data scale 1e-12 an absolute tolerance of 1e-10 fuses
everything. So every loss has a **standard form** (:attr:`convexfl.losses.Loss.standard`):
an affine change of variable ``x = c + s z`` and an objective scale ``σ`` with

.. math::

    f_i(c + s z) = σ f'_i(z), \qquad F_λ(c + s Z) = σ F'_{λ'}(Z), \quad λ' = λ s/σ ,

where ``f'`` has centred data of unit spread. :func:`convexfl.solve`,
:func:`convexfl.certificates.kkt_residual` and the bounds of :mod:`convexfl.bounds` work on
the standard problem and report in the user's units: ``X = c + s Z``, flows and gradients
times ``σ/s``, fusion tolerances times ``s``, λ times ``σ/s``. Normalised quantities (the KKT
residual) are unit-free and unchanged. Rescaling or shifting the data therefore changes no
decision a solver, a certificate or a bound takes (to rounding).
"""

from __future__ import annotations

import dataclasses
import numbers
from dataclasses import dataclass

import numpy as np

from ._validation import as_float_array, check_matrix_rows
from .problems import Reduced, SquaredPenalty, SumOfNorms

__all__ = ["Units", "standardise"]

CURVATURE_OPTIONS = ("rho", "eta", "eta_z")  # ADMM's and PDMM's ρ, PDMM's Bregman η
ROUNDING_TOL = 1e-12  # standard-unit change of X in the round trip that calls for a new check


@dataclass(frozen=True)
class Units:
    """The change of units ``x = shift + scale · z``, objective ``= fscale · F'``.

    Attributes
    ----------
    shift : ndarray (d,)
    scale : float
        ``s``: lengths in the user's units per standard unit.
    fscale : float
        ``σ``: objective values in the user's units per standard unit.
    """

    shift: np.ndarray
    scale: float
    fscale: float

    @classmethod
    def identity(cls, dim: int) -> Units:
        return cls(np.zeros(dim), 1.0, 1.0)

    @property
    def is_identity(self) -> bool:
        return self.scale == 1.0 and self.fscale == 1.0 and not np.any(self.shift)

    @property
    def grad(self) -> float:
        """``σ/s``: gradients, flows and λ in the user's units per standard unit."""
        return self.fscale / self.scale

    def x_to(self, X):
        """Models in standard units: ``(X − c)/s``."""
        return (X - self.shift) / self.scale

    def x_from(self, Z):
        """Models in the user's units: ``c + s Z``."""
        return self.shift + self.scale * Z

    def certificate_from(self, cert, objective: float):
        """A :class:`~convexfl.certificates.Certificate` of the standard problem, in the
        user's units (``objective`` recomputed there by the caller)."""
        g = self.grad
        return dataclasses.replace(
            cert, kkt_abs=cert.kkt_abs * g, kkt_abs_lower=cert.kkt_abs_lower * g,
            objective=objective, fuse_tol=cert.fuse_tol * self.scale,
            grad_norm=cert.grad_norm * g, grad_scale=cert.grad_scale * g,
            flows=None if cert.flows is None else cert.flows * g)

    def solution_to(self, sol):
        """A :class:`~convexfl.solvers.Solution` (a warm start) in standard units."""
        return self._solution(sol, self.x_to, 1.0 / self.grad, 1.0 / self.scale)

    def solution_from(self, sol, prob):
        """A solution of the standard problem, in the user's units for ``prob``.

        Where the user's floating-point numbers cannot hold the solution to full precision
        (data far from the origin relative to their spread), the certificate is recomputed
        from the ``X`` actually returned, and ``converged`` judged on it."""
        out = self._solution(sol, self.x_from, self.grad, self.scale)
        out.objective = prob.objective(out.X)
        out.certificate = self.certificate_from(sol.certificate, out.objective)
        out.lam = prob.lam if sol.lam is not None else None
        if np.max(np.abs(self.x_to(out.X) - sol.X), initial=0.0) > ROUNDING_TOL:
            from .certificates import kkt_residual
            out.certificate = kkt_residual(prob, out.X, fuse_tol=out.fuse_tol, flows=out.flows)
            out.kkt_residual = out.certificate.kkt_residual
            if out.converged and out.kkt_residual > out.kkt_tol:
                out.converged, out.status = False, "not_converged"
                out.message = (f"the solution in standard units is certified, but rounded to "
                               f"your units (data offset {np.linalg.norm(self.shift):.3g} "
                               f"for a spread of {self.scale:.3g}) its certified KKT residual "
                               f"is {out.kkt_residual:.2e} > kkt_tol={out.kkt_tol:.1e}")
        for key in ("W", "X_last"):   # models in the history
            if key in out.history:
                out.history[key] = self.x_from(out.history[key])
        if "objective" in out.history:
            out.history["objective"] = [v * self.fscale for v in out.history["objective"]]
        if "rho" in out.history:  # ADMM's penalty: a curvature
            out.history["rho"] = [v * self.grad / self.scale for v in out.history["rho"]]
        return out

    def _solution(self, sol, x_map, g, length):
        return dataclasses.replace(
            sol, X=x_map(sol.X), fuse_tol=sol.fuse_tol * length,
            lam=None if sol.lam is None else sol.lam * g,
            flows=None if sol.flows is None else sol.flows * g, history=dict(sol.history))


def standardise(prob):
    """``(units, standard problem)`` for a SumOfNorms, SquaredPenalty or Reduced problem
    (anything else, or a problem already in standard units: the identity and ``prob``)."""
    loss = getattr(prob, "loss", None)
    if not isinstance(prob, (SumOfNorms, SquaredPenalty, Reduced)):
        return None, prob
    units, std = loss.standard
    if units.is_identity:
        return units, prob
    if isinstance(prob, SumOfNorms):
        return units, SumOfNorms(std, prob.graph, prob.lam * units.scale / units.fscale)
    if isinstance(prob, SquaredPenalty):
        return units, SquaredPenalty(std, prob.graph,
                                     prob.gamma * units.scale ** 2 / units.fscale)
    return units, Reduced(std, prob.graph, prob.labels, prob.lam * units.scale / units.fscale)


def options_to(units: Units, prob, options: dict) -> dict:
    """A solver's options in standard units: warm starts (``X0``, ``flows0``,
    ``warm_start``; each validated first, so a bad one is refused under its own name) and
    the proximal weights of :data:`CURVATURE_OPTIONS` (curvatures: times ``s²/σ``)."""
    from .solvers.base import Solution

    out = dict(options)
    for key in CURVATURE_OPTIONS:
        value = out.get(key)
        if isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_)):
            out[key] = value * units.scale / units.grad
    if out.get("X0") is not None:
        out["X0"] = units.x_to(check_matrix_rows(out["X0"], prob.n_users, prob.dim, "X0"))
    if out.get("flows0") is not None:
        out["flows0"] = as_float_array(out["flows0"], "flows0", ndim=2) / units.grad
    if isinstance(out.get("warm_start"), Solution):
        out["warm_start"] = units.solution_to(out["warm_start"])
    return out
