"""Clusters of a solution, and partition comparison.

The clusters of ``X`` are the connected components of the graph of pairs
``{(i, j): ‖x_i − x_j‖ ≤ tol}`` (single linkage at distance ``tol``), numbered in order of
first appearance. ``tol`` should follow the solver's accuracy: a :class:`Solution` uses its
own ``fuse_tol``; the default here is ``DEFAULT_FUSE_RTOL · (1 + max_i ‖x_i‖)``
(= 1e-6 relative), the same default as :mod:`convexfl.certificates`. That default is for
answers fused only approximately (cvxpy, other packages); on an exactly fused answer it can
join clusters that are distinct but close: the certified solution of kNN10 N = 5·10⁴,
λ = 3 (``benchmarks.large_knn``) has 9241 clusters at its ``fuse_tol`` and 9055 at this
default. Take a solution's clusters from ``Solution.labels()``.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components
from scipy.spatial import cKDTree

from ._flow_kernels import masked_components
from ._validation import as_float_array, as_scalar, check_partition
from .certificates import DEFAULT_FUSE_RTOL
from .problems import scale_of

__all__ = ["adjusted_rand", "compare", "labels", "n_clusters", "same_partition", "separation"]


_LAST_COMPONENTS: list = [None]  # (n, edges, mask, labels) of the last components() call


def components(n: int, edges: np.ndarray, mask) -> np.ndarray:
    """Connected components of the graph on ``n`` nodes with the ``edges`` where ``mask``
    holds (labels ``0..K−1`` numbered by smallest node, a fresh array). The last call's
    answer is reused for the same ``edges`` (the same array) and an equal mask: along a path
    one partition is asked for several times per λ (the warm start, its slope, the
    labels), and a comparison costs a twentieth of a union–find over the edges."""
    mask = np.ascontiguousarray(mask, dtype=np.bool_)
    last = _LAST_COMPONENTS[0]
    if last is not None and last[0] == n and last[1] is edges and np.array_equal(last[2], mask):
        return last[3].copy()
    out = masked_components(n, edges, mask)[0]
    _LAST_COMPONENTS[0] = (n, edges, mask.copy(), out.copy())
    return out


def labels(X, tol: float | None = None, *, graph=None) -> np.ndarray:
    """Cluster labels ``0..K-1`` of the rows of ``X``.

    Parameters
    ----------
    X : array (N, d)
    tol : float, optional
        Fusion distance (default ``1e-6 · (1 + max_i ‖x_i‖)``).
    graph : convexfl.graphs.Graph, optional
        If given, only its edges can fuse: clusters are the components of
        ``{(i, j) ∈ E : ‖x_i − x_j‖ ≤ tol}`` (O(E) memory; the natural notion on sparse graphs,
        identical to the all-pairs one on a complete graph).

    Notes
    -----
    Without ``graph``, a KD-tree (scipy) finds the close pairs: memory grows with the
    number of pairs within ``tol``, i.e. with the squared sizes of the clusters.
    """
    X = as_float_array(X, "X", ndim=2)
    tol = DEFAULT_FUSE_RTOL * scale_of(X) if tol is None else as_scalar(tol, "tol", low=0.0)
    n = X.shape[0]
    if n == 1:
        return np.zeros(1, dtype=np.int64)
    if graph is not None:
        if graph.n_nodes != n:
            raise ValueError(f"graph: has {graph.n_nodes} nodes but X has {n} rows")
        # union-find over the close edges: components numbered by their smallest user,
        # which is the first-appearance order
        return components(n, graph.edges, graph.distances(X) <= tol)
    pairs = cKDTree(X).query_pairs(tol, output_type="ndarray")
    adj = sp.coo_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])), shape=(n, n))
    _, lab = connected_components(adj, directed=False)
    return check_partition(lab, n)


def n_clusters(X, tol: float | None = None) -> int:
    """Number of clusters of ``X`` at fusion distance ``tol``."""
    return int(labels(X, tol).max()) + 1


def separation(X, labels, graph) -> float:
    r"""The least distance between two clusters that an edge of ``graph`` joins,

    .. math::

        \operatorname{sep}(X) = \min_{(i,j) ∈ E,\ ℓ_i ≠ ℓ_j} \|x_i − x_j\| ,

    ``inf`` when no edge joins two clusters. On such an edge the (KKT) flow is
    ``λ w_ij (x_i − x_j)/‖x_i − x_j‖``: its direction, so the KKT residual, turns with a
    change of ``x_i − x_j`` of the order of the separation. A separation close to a
    solution's ``fuse_tol`` therefore means a numerically delicate answer: the models of
    those clusters must be placed to a small fraction of it to be certified (measured on
    kNN10 mixtures at N = 5·10⁴, docs/solvers.md, "The many-cluster regime").

    Parameters
    ----------
    X : array (N, d)
        Models, e.g. ``Solution.X``.
    labels : array (N,) of int
        Their partition, e.g. ``Solution.labels()``.
    graph : convexfl.graphs.Graph
        The problem's graph, on N users.
    """
    X = as_float_array(X, "X", ndim=2)
    n = X.shape[0]
    lab = np.asarray(labels)
    if lab.shape != (n,):
        raise ValueError(f"labels: expected shape ({n},) like the rows of X, got {lab.shape}")
    if graph.n_nodes != n:
        raise ValueError(f"graph: has {graph.n_nodes} nodes but X has {n} rows")
    i, j = graph.edges.T
    between = lab[i] != lab[j]
    if not np.any(between):
        return np.inf
    return float(np.linalg.norm(X[i[between]] - X[j[between]], axis=1).min())


def same_partition(a, b) -> bool:
    """Whether two labelings define the same partition (up to renaming)."""
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        raise ValueError(f"b: expected {a.shape[0]} labels like a, got shape {b.shape}")
    return bool(np.array_equal(check_partition(a, len(a)), check_partition(b, len(b))))


def adjusted_rand(a, b) -> float:
    """Adjusted Rand index (scikit-learn) of two labelings."""
    from sklearn.metrics import adjusted_rand_score

    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        raise ValueError(f"b: expected {a.shape[0]} labels like a, got shape {b.shape}")
    return float(adjusted_rand_score(a, b))


def compare(found, truth) -> dict:
    """Summary of a found partition against the truth: exact match, ARI, cluster counts."""
    found, truth = np.asarray(found), np.asarray(truth)
    if truth.shape != found.shape:
        raise ValueError(f"truth: expected shape {found.shape} like found, got {truth.shape}")
    return {"same_partition": same_partition(found, truth),
            "adjusted_rand": adjusted_rand(found, truth),
            "n_found": len(np.unique(found)), "n_true": len(np.unique(truth))}
