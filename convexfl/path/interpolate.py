r"""Certified interpolation between two solutions of a path that share a partition.

Between certified solutions ``a`` and ``b`` of (SON) at ``λ_a < λ_b`` with the same partition
(the same fused edges, each cluster's models exactly equal), take at
``λ = (1 − t) λ_a + t λ_b`` the candidate and flows

.. math::

    X(λ) = (1 − t) X_a + t X_b, \qquad
    u_e(λ) = (1 − t) u^a_e + t u^b_e \ \text{on the fused edges},

and on every other edge the flow that ``X(λ)`` fixes, ``u_e = λ w_e (x_i − x_j)/‖x_i − x_j‖``.
The fused flows are feasible, ``‖u_e(λ)‖ ≤ (1 − t) λ_a w_e + t λ_b w_e = λ w_e``, so the
residual ``R(λ) = ∇f(X(λ)) + Bᵀu(λ)`` of these explicit flows is a certified upper bound on
the KKT residual of ``X(λ)`` (:mod:`convexfl.certificates`), exactly as the certificate's own
upper bound is (and, like it, in standard units: :mod:`convexfl.units`). It is computed
at every λ, not assumed: ``Bᵀu`` over the fused edges is
linear in the flows (computed once per segment for ``a`` and ``b``), the rest costs one
gradient and a pass over the edges between clusters, O(N d + E_cross d) per λ against a
solve's certificate, which factorises and searches over all the fused edges.

Where the solutions on a fixed partition are affine in λ, ``X(λ)`` is the solution itself
(to rounding): the quadratic loss with two clusters (the clusters' Hessians are multiples of
the identity, so the direction between the two centroids stays that of their data means), and
any loss with an affine gradient in ``d = 1`` (the directions are ±1). Elsewhere the
directions between clusters turn with λ and ``X(λ)`` is a candidate whose residual says
whether it is within the tolerance (measured on make_moons, 200 users, kNN 10, 300 λ: least
squares with two clusters left 1.1e-6 over two steps, above 1e-6; logistic passed at 12 of
its 23 two-cluster λ). :func:`~convexfl.path.son_path` uses it to certify a stretch of λ from
its two ends.
"""

from __future__ import annotations

import numpy as np

from .._flow_kernels import flow_residual, moving_flows
from .._validation import as_scalar
from ..certificates import normalised
from ..clusters import components
from ..problems import SumOfNorms
from ..units import standardise


class Segment:
    """The interpolation between two certified solutions ``a`` and ``b`` (``a.lam < b.lam``)
    of ``prob`` with the same partition; build it with :meth:`between`."""

    def __init__(self, prob: SumOfNorms, a, b, fused):
        # computed in standard units (convexfl.units), as every certificate is
        units, std = standardise(prob)
        self.units = units if units is not None and not units.is_identity else None
        to_x = self.units.x_to if self.units else np.asarray
        g = self.units.grad if self.units else 1.0
        self.prob, self.std, self.lam_a, self.lam_b = prob, std, a.lam, b.lam
        self.Z_a, self.Z_b = to_x(a.X), to_x(b.X)
        self.flows_a, self.flows_b = a.flows / g, b.flows / g
        self.fuse_tol = a.fuse_tol / (self.units.scale if self.units else 1.0)
        edges, n, d = prob.graph.edges, prob.n_users, prob.dim
        cross = np.flatnonzero(~fused)
        self.cross = cross
        self.cross_edges = np.ascontiguousarray(edges.take(cross, axis=0))
        self.cross_weights = prob.graph.weights.take(cross)
        inside = np.ascontiguousarray(edges[fused])
        zero = np.zeros((n, d))
        self.push_a = flow_residual(zero, inside, np.ascontiguousarray(self.flows_a[fused]))
        self.push_b = flow_residual(zero, inside, np.ascontiguousarray(self.flows_b[fused]))

    @classmethod
    def between(cls, prob: SumOfNorms, a, b) -> Segment | None:
        """The segment from ``a`` to ``b``, or ``None`` when they do not qualify: both
        certified (``converged``), with flows and the same fused edges in their certificates,
        every cluster's models exactly equal (a polished solution's cluster means), and
        ``a.lam < b.lam``."""
        if not (a.converged and b.converged and a.lam is not None and b.lam is not None
                and a.lam < b.lam and a.flows is not None and b.flows is not None):
            return None
        fa, fb = a.certificate.fused, b.certificate.fused
        if fa is None or fb is None or not np.array_equal(fa, fb):
            return None
        if not (cluster_exact(prob, a) and cluster_exact(prob, b)):
            return None
        return cls(prob, a, b, fa)

    def at(self, lam: float, with_flows: bool = False):
        """``(X, objective, kkt_abs, kkt_residual, flows)`` of the candidate at ``lam`` (SON
        convention, in ``[a.lam, b.lam]``; all in your units), or ``None`` where two clusters
        meet there (a distance between clusters at most ``a``'s ``fuse_tol``: another
        partition). ``flows`` (all edges) only ``with_flows``, else ``None``."""
        lam = as_scalar(lam, "lam", low=self.lam_a, high=self.lam_b)
        t = (lam - self.lam_a) / (self.lam_b - self.lam_a)
        Z = (1.0 - t) * self.Z_a + t * self.Z_b
        grad = self.std.loss.grad(Z)
        i, j = self.cross_edges[:, 0], self.cross_edges[:, 1]
        diff = Z[i] - Z[j]
        dist = np.sqrt(np.einsum("ij,ij->i", diff, diff))
        if np.any(dist <= self.fuse_tol):
            return None
        g, s, X = 1.0, 1.0, Z  # flows and lengths per standard unit, X in your units
        if self.units:
            g, s, X = self.units.grad, self.units.scale, self.units.x_from(Z)
        R, u_cross = moving_flows(grad + (1.0 - t) * self.push_a + t * self.push_b, Z,
                                  self.cross_edges, lam / g * self.cross_weights, dist,
                                  np.zeros(dist.size, np.bool_))
        r = float(np.linalg.norm(R))
        kkt = normalised(r, float(np.linalg.norm(grad)))
        distances = np.zeros(self.prob.graph.n_edges)
        distances[self.cross] = dist * s
        objective = self.prob.with_lam(lam).objective(X, distances)
        flows = None
        if with_flows:
            flows = (1.0 - t) * self.flows_a + t * self.flows_b
            flows[self.cross] = u_cross
            flows *= g
        return X, objective, r * g, kkt, flows


def cluster_exact(prob: SumOfNorms, sol) -> bool:
    """Whether ``sol``'s models are exactly equal across every edge its certificate treats
    as fused (a polished solution's cluster means; an interior-point answer's are not)."""
    fused = sol.certificate.fused
    if fused is None:
        return False
    labels = components(prob.n_users, prob.graph.edges, fused)
    last = np.empty(int(labels.max()) + 1, np.int64)
    last[labels] = np.arange(labels.size)  # one user of each component
    return np.array_equal(sol.X, sol.X.take(last, axis=0).take(labels, axis=0))
