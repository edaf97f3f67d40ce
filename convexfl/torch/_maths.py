r"""Small server-side formulas (numpy) used by the deep trainers.

Reused from the convex modules rather than rewritten: the entropic mirror step
(:func:`convexfl.ppfl.mirror_step`), k-means++ (:func:`convexfl._kmeans.kmeans`) and the
Hungarian alignment of clusters (``convexfl.cgpfl._align``). Written here because the convex
modules have them only in forms that do not fit (a dense N×N Laplacian in
:class:`convexfl.ppfl.PPFLProblem`; the network-lasso edge step inside the numba kernel of
:mod:`convexfl.solvers.admm`): the PPFL penalty gradient from an **edge list**, and the
block soft-thresholding edge step of network-lasso ADMM on numpy arrays. They act on
per-client quantities of size N×K or E×d (never N×N), on the server, in float64.
"""

from __future__ import annotations

import numpy as np

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


def block_soft_threshold(V, threshold) -> np.ndarray:
    r"""Row-wise block soft-thresholding :math:`v\,\max(0, 1 - t/\|v\|)`.

    The prox of :math:`t\|\cdot\|`; a row with :math:`\|v\| \le t` becomes exactly zero.

    Parameters
    ----------
    V : array (E, d)
    threshold : float or array (E,)
    """
    V = np.asarray(V, dtype=np.float64)
    t = np.broadcast_to(np.asarray(threshold, dtype=np.float64), V.shape[:1])
    norms = np.linalg.norm(V, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where(norms > t, 1.0 - t / np.where(norms > 0, norms, 1.0), 0.0)
    return V * scale[:, None]


def network_lasso_edge_update(Zi, Zj, Ui, Uj, Hi, Hj, lam_w, rho):
    r"""Edge step of network-lasso ADMM (Hallac et al. 2015) for :math:`\lambda w\|z_{ij}-z_{ji}\|`.

    With :math:`a = h_i + u_{ij}` and :math:`b = h_j + u_{ji}`:
    :math:`(z_{ij}, z_{ji}) = \arg\min \lambda w\|z_{ij}-z_{ji}\| + (\rho/2)(\|z_{ij}-a\|^2
    + \|z_{ji}-b\|^2)`, i.e. the mean :math:`m=(a+b)/2` plus/minus half of the block
    soft-thresholded difference :math:`S_{2\lambda w/\rho}(a-b)`; then the scaled duals
    :math:`u_{ij} \mathrel{+}= h_i - z_{ij}`, :math:`u_{ji} \mathrel{+}= h_j - z_{ji}`.
    A thresholded difference is exactly zero, so ``z_ij == z_ji`` bitwise on fused edges.

    Returns
    -------
    Zi, Zj, Ui, Uj : arrays (E, d)
    """
    A, B = Hi + Ui, Hj + Uj
    M = 0.5 * (A + B)
    D = block_soft_threshold(A - B, 2.0 * np.asarray(lam_w) / rho)
    Zi, Zj = M + 0.5 * D, M - 0.5 * D
    return Zi, Zj, Ui + Hi - Zi, Uj + Hj - Zj


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
