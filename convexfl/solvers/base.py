"""The result object every solver returns, and the errors solvers raise."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..certificates import Certificate
from ..clusters import components
from ..clusters import labels as cluster_labels

__all__ = ["IncompatibleLossError", "NonUniqueWarning", "Solution", "SolverError"]


def _same(kept, X) -> bool:
    """Whether ``X`` still holds the values of ``kept``, a private copy taken earlier (an
    ``X`` changed in place or replaced is not the same; a copy costs less than a digest:
    5000 × 2 models, 121 µs for blake2b against 4 µs to copy and 7 µs to compare)."""
    return kept is not None and kept.shape == np.shape(X) and np.array_equal(kept, X)


class SolverError(RuntimeError):
    """A solver failed or returned an inaccurate status."""


class IncompatibleLossError(TypeError):
    """A solver was given a loss it cannot handle (the message says what it needs)."""


class NonUniqueWarning(UserWarning):
    """A certified solution that may not be the only one: some ``f_i`` is not strictly
    convex near it (:meth:`convexfl.losses.Loss.strictly_convex_at`), so another solution,
    with another cluster structure, may exist (Armacki et al., Remark 1)."""


@dataclass
class Solution:
    """A solution with its provenance and certificate.

    Attributes
    ----------
    X : ndarray (N, d)
        The users' models.
    objective : float
        The problem's objective at ``X`` (one formula: ``prob.objective``).
    kkt_residual : float
        The normalised KKT residual of ``X`` (``convexfl.certificates``), recomputed from
        ``X`` — not the solver's own stopping quantity.
    converged : bool
        ``kkt_residual ≤ kkt_tol`` for the returned ``X`` (and the method did not fail).
        Which stage produced that ``X`` is in :attr:`stage`.
    n_iter : int
    time_s : float
        Wall-clock time of the solve (certificate excluded).
    method : str
    lam : float or None
        λ in the canonical (SON) convention (``None`` for the squared penalty).
    lam_convention : str
        Always ``"son"`` (see :mod:`convexfl.problems`).
    certificate : Certificate
    fuse_tol : float
        Pairs closer than this are fused (used by :meth:`labels`).
    kkt_tol : float
        The KKT level ``converged`` was judged against.
    status, message : str
        The solver's status; ``message`` says why when not converged, and how when the
        answer came from a final polish after the iterations had stopped.
    stage : str
        Which stage produced ``X``: ``"iterations"`` (a candidate of the method's own
        iterations certified), ``"warm partition"`` (the warm start's partition certified
        before any iteration; when it is a solution at another λ and had to be repaired
        first, ``history["warm_repair"]`` holds the repair's rounds), ``"coarsening"`` (a
        reduced problem of a coarsening attempt),
        ``"partition repair"`` (``method="auto"``: its ADMM stage's partition split along
        saturated flows and polished, ``history["repair"]``), ``"final polish"`` (after the
        method stopped — iteration limit or divergence — Newton on its last partition),
        ``"closed form"`` (λ = 0 or no edges), ``"interior point"`` or ``"interior point +
        polish"`` (the cvxpy reference); on a path, ``"fused above λ̂"`` (the global model
        at λ ≥ λ̂, certified by the flow that proves λ̂: :func:`convexfl.son_path`).
    history : dict
        Method-specific per-iteration records.
    flows : ndarray (E, d) or None
        Edge flows ``u_ij = λ w_ij s_ij`` from the solver's duals, when it has them.
    flow_slope : ndarray (E, d) or None
        The slope of the flows in λ when the solve was warm-started from a solution with
        the same partition at another λ: a warm start taken from this solution
        extrapolates its flows linearly in λ (a path's next certificate then starts close).
        Where the flows are linear in λ (two clusters, or ``d = 1``) it is exact: within
        ``w_e`` on the fused edges, with the divergence of the exact flows' rate of change,
        so the extrapolations stay within capacity and keep the residual; elsewhere the
        difference ``(flows − flows_warm)/(λ − λ_warm)`` (``history["flow_slope"]`` says
        which).
    graph : Graph or None
        The problem's graph (for :meth:`labels` on sparse graphs).
    """

    X: np.ndarray
    objective: float
    kkt_residual: float
    converged: bool
    n_iter: int
    time_s: float
    method: str
    lam: float | None
    certificate: Certificate
    fuse_tol: float
    kkt_tol: float
    status: str = ""
    message: str = ""
    lam_convention: str = "son"
    history: dict = field(default_factory=dict)
    flows: np.ndarray | None = None
    graph: object = field(default=None, repr=False)
    flow_slope: np.ndarray | None = field(default=None, repr=False)
    stage: str = ""
    _labels: tuple | None = field(default=None, init=False, repr=False, compare=False)
    _certified_x: np.ndarray | None = field(default=None, init=False, repr=False,
                                            compare=False)

    def __post_init__(self):
        self._certified_x = np.array(self.X, dtype=float)  # a copy: see labels()

    def labels(self, tol: float | None = None) -> np.ndarray:
        """Cluster labels of the users (see :func:`convexfl.clusters.labels`); on a sparse
        problem graph only its edges fuse (``graph`` holds it), and at :attr:`fuse_tol`
        those are the edges the certificate treated as fused (``certificate.fused``, the
        same edges up to the rounding of a distance equal to ``fuse_tol``) while ``X`` is
        the array the solver returned. Computed once per ``X`` (its values: an ``X``
        changed in place or replaced is clustered again) and ``tol``."""
        tol = self.fuse_tol if tol is None else tol
        cached = self._labels
        if cached is not None and cached[1] == tol and _same(cached[0], self.X):
            return cached[2].copy()
        certified = _same(self._certified_x, self.X)
        g = self.graph
        sparse = g is not None and g.n_edges < g.n_nodes * (g.n_nodes - 1) // 2
        fused = self.certificate.fused if self.certificate is not None else None
        if (sparse and fused is not None and certified
                and tol == self.fuse_tol == self.certificate.fuse_tol
                and fused.shape == (g.n_edges,) and self.X.shape[0] == g.n_nodes):
            out = components(g.n_nodes, g.edges, fused)
        else:
            out = cluster_labels(self.X, tol=tol, graph=g if sparse else None)
        key = self._certified_x if certified else np.array(self.X, dtype=float)
        self._labels = (key, tol, out)
        return out.copy()

    @property
    def n_clusters(self) -> int:
        return int(self.labels().max()) + 1

    def __repr__(self) -> str:
        return (f"Solution(method={self.method!r}, converged={self.converged}, "
                f"stage={self.stage!r}, "
                f"objective={self.objective:.10g}, kkt_residual={self.kkt_residual:.2e}, "
                f"n_clusters={self.n_clusters}, n_iter={self.n_iter}, "
                f"time_s={self.time_s:.3g})")
