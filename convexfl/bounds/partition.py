r"""The exact certificate of a partition at λ (docs/math.md §1.4), for any graph: the (RED)
centroids are distinct and every within-cluster flow ratio ``ρ_k(λ) ≤ λ``."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..problems import SumOfNorms
from ._base import Bound, _lam_arg
from .probe import _kind, _Probe, _red_note


@dataclass(frozen=True)
class PartitionCertificate(Bound):
    """The exact certificate of a partition at λ (a :class:`Bound` whose ``.value`` is
    ``max_k ρ_k(λ)``).

    Attributes
    ----------
    lam : float
        λ (SON convention).
    rho : ndarray (K,)
        ``ρ_k(λ)``, the least max flow-to-capacity ratio inside cluster ``k``
        (``nan`` where a neighbouring centroid coincides, ``inf`` where no flow exists).
    distinct : bool
        The (RED) centroids are pairwise distinct.
    recovered : bool
        ``distinct`` and ``ρ_k(λ) ≤ λ`` for every k: the clustered (RED) solution solves
        (SON) with exactly this partition (the unique solution for strictly convex f_i).
    W : ndarray (K, d)
        The (RED) solution ``w*(λ)``.
    """

    lam: float = math.nan
    rho: np.ndarray = None
    distinct: bool = False
    recovered: bool = False
    W: np.ndarray = None

    def __repr__(self) -> str:
        return (f"PartitionCertificate(λ={self.lam:.6g}, recovered={self.recovered}, "
                f"distinct={self.distinct}, max ρ_k={self.lo:.6g}, kind={self.kind})")


def partition_certificate(prob: SumOfNorms, partition, lam: float | None = None, *,
                          method: str = "cvxpy", solver_options=None,
                          _probe=None) -> PartitionCertificate:
    r"""The exact partition certificate (docs/math.md §1.4) of ``partition`` at λ, any graph.

    With ``w*(λ)`` solving (RED) and the ``w_k*`` pairwise distinct, ``X = clustered(w*)``
    solves (SON) **iff** for every cluster the within-cluster flow problem

    .. math::

        ρ_k(λ) = \min \max_{(i,j)∈E_k} \frac{\|u_{ij}\|}{w_{ij}} \ \text{s.t.}\
        \sum_{j∈C_k} u_{ij} = -∇f_i(w_k^*) - λ \sum_{l≠k}\sum_{j∈C_l} w_{ij} r_{kl}
        \quad (i∈C_k)

    has ``ρ_k(λ) ≤ λ`` (``r_kl = (w_k* − w_l*)/‖w_k* − w_l*‖``). Each ρ_k is a small SOCP
    (Clarabel). When the clustered solution is the only one — every ``f_i`` strictly convex
    near it (:meth:`convexfl.losses.Loss.strictly_convex_at`; Remark 1) — this decides exact
    recovery of the partition; otherwise another solution may have another partition.

    Returns
    -------
    PartitionCertificate
        kind ``"exact"`` when the (RED) solution is certified (``inputs["red_kkt_residual"]``)
        and the (SON) solution unique, else ``"estimate"`` with the reason in the note.
    """
    probe = _probe or _Probe(prob, partition, method=method, solver_options=solver_options)
    lam = _lam_arg(prob, lam)
    rec = probe.at(lam, theorems=False)
    reasons = []
    if not rec["distinct"]:
        reasons.append("two (RED) centroids coincide (the partition is coarsened)")
    bad = np.flatnonzero(~(rec["rho"] <= lam + 1e-9 * (1 + lam)))
    if len(bad):
        reasons.append("ρ_k(λ) > λ for clusters " + ", ".join(map(str, bad.tolist())) +
                       " (they split)")
    rho_max = float(np.nanmax(rec["rho"])) if np.any(~np.isnan(rec["rho"])) else math.nan
    return PartitionCertificate(
        "partition_certificate", "estimate" if rec["caveat"] else _kind(rec), rho_max, rho_max,
        inputs={"lam": lam, "rho": rec["rho"], "margins": lam - rec["rho"],
                "distinct": rec["distinct"], "recovered": rec["recovered"],
                "min_centroid_distance": rec["min_centroid_distance"],
                "red_kkt_residual": rec["red_kkt"], "red_fuse_tol": rec["red_fuse_tol"],
                "balance_residual": rec["balance_residual"], "sizes": probe.sizes,
                "reasons": reasons},
        note=("recovered" if rec["recovered"] else "not recovered: " + "; ".join(reasons))
        + _red_note(rec) + (f" [estimate: {rec['caveat']}]" if rec["caveat"] else ""),
        lam=lam, rho=rec["rho"], distinct=rec["distinct"],
        recovered=rec["recovered"], W=rec["W"])
