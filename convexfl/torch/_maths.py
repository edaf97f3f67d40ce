r"""Small server-side formulas (numpy) used by the deep trainers.

Reused from the convex modules rather than rewritten: the entropic mirror step
(:func:`convexfl.ppfl.mirror_step`), k-means++ (:func:`convexfl._kmeans.kmeans`) and the
Hungarian alignment of clusters (``convexfl.cgpfl._align``) and the network-lasso edge step
of the federated sum-of-norms ADMM (:mod:`convexfl.federated.son`). Written here because the
convex module has it only as a dense N×N Laplacian (:class:`convexfl.ppfl.PPFLProblem`):
the PPFL penalty gradient from an **edge list**. It acts on per-client quantities of size
N×K (never N×N), on the server, in float64.
"""

from __future__ import annotations

import numpy as np

from ..federated.son import block_soft_threshold, network_lasso_edge_update

__all__ = [
    "block_soft_threshold",
    "kmeans",
    "laplacian_gradient",
    "laplacian_penalty",
    "network_lasso_edge_update",
]


def laplacian_gradient(Pi, edges, weights) -> np.ndarray:
    r"""Rows of :math:`L\Pi`: :math:`(L\Pi)_i = \sum_j a_{ij}(\pi_i - \pi_j)` from an edge list.

    The PPFL regulariser :math:`(\lambda/2)\sum_{i,j} a_{ij}\|\pi_i-\pi_j\|^2`
    (ordered pairs) equals :math:`\lambda\,\mathrm{tr}(\Pi^T L \Pi)`; its gradient in
    :math:`\pi_i` is :math:`2\lambda (L\Pi)_i`.

    Parameters
    ----------
    Pi : array (N, K)
    edges : int array (E, 2)
        Unordered pairs ``i < j``.
    weights : array (E,)
        Affinities ``a_ij > 0``.
    """
    Pi = np.asarray(Pi, dtype=np.float64)
    out = np.zeros_like(Pi)
    if len(edges) == 0:
        return out
    i, j = edges[:, 0], edges[:, 1]
    D = weights[:, None] * (Pi[i] - Pi[j])
    np.add.at(out, i, D)
    np.add.at(out, j, -D)
    return out


def laplacian_penalty(Pi, edges, weights) -> float:
    r""":math:`\sum_{i,j} a_{ij}\|\pi_i-\pi_j\|^2` over ordered pairs (= 2 × the edge sum)."""
    Pi = np.asarray(Pi, dtype=np.float64)
    if len(edges) == 0:
        return 0.0
    diff = Pi[edges[:, 0]] - Pi[edges[:, 1]]
    return float(2.0 * np.sum(weights * np.sum(diff * diff, axis=1)))


def kmeans(points, n_clusters: int, seed: int, n_init: int = 3):
    """k-means++ of the rows of ``points`` (:func:`convexfl._kmeans.kmeans`), with
    ``n_clusters`` clipped to the number of distinct rows.

    Returns
    -------
    labels : int array (m,)
    means : array (k, d)
        Cluster means computed from the labels.
    """
    from .._kmeans import kmeans as _kmeans

    X = np.asarray(points, dtype=np.float64)
    k = max(1, min(int(n_clusters), len(np.unique(X, axis=0))))
    return _kmeans(X, k, seed=seed, n_init=n_init)
