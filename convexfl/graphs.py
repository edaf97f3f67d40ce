r"""Weighted graphs on the users: the pairs ``(i, j)``, ``i < j``, penalised by sum-of-norms.

A :class:`Graph` stores its edges as an (E, 2) integer array with ``i < j`` and positive
weights ``w_ij``; memory is O(E), never O(N²) for sparse graphs. Constructors:

- :func:`complete` — every pair, weight 1 (the setting of the Armacki et al. theorems);
- :func:`knn` — the symmetrised k-nearest-neighbour graph of points, with weights 1 or the
  Gaussian kernel ``w_ij = exp(−φ‖a_i − a_j‖²)`` (the convex-clustering standard of
  Chi & Lange 2015; Hocking et al. 2011);
- :func:`from_edges` — a user-given edge list.

Connectivity matters: a disconnected graph never fuses all models into one
(``Graph.is_connected``, ``Graph.n_components``).
"""

from __future__ import annotations

import warnings
from functools import cached_property

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from ._validation import as_float_array, as_int, as_scalar, check_partition

__all__ = ["Graph", "complete", "from_edges", "knn"]

MAX_COMPLETE_EDGES = 50_000_000


class Graph:
    """An undirected weighted graph on ``n_nodes`` users.

    Parameters
    ----------
    n_nodes : int
    edges : int array (E, 2)
        Pairs with ``i < j``, each at most once (a repeated pair is refused).
    weights : float array (E,)
        Positive, finite weights ``w_ij``.
    kind : str
        How the graph was built (for reports).
    """

    def __init__(self, n_nodes: int, edges, weights, kind: str = "custom"):
        self.n_nodes = as_int(n_nodes, "n_nodes", low=1)
        e = np.asarray(edges)
        if e.size and (e.ndim != 2 or e.shape[1] != 2):
            raise ValueError(f"edges: expected an (E, 2) array of node pairs, got shape {e.shape}")
        if e.size and e.dtype.kind not in "iu":
            raise TypeError(f"edges: node indices must be integers, got dtype {e.dtype}")
        self.edges = np.ascontiguousarray(e, dtype=np.int64).reshape(-1, 2)
        if self.n_edges and (self.edges.min() < 0 or self.edges.max() >= self.n_nodes
                             or np.any(self.edges[:, 0] >= self.edges[:, 1])):
            raise ValueError(f"edges: expected pairs (i, j) with 0 <= i < j < {self.n_nodes} "
                             "(use graphs.from_edges for unordered pairs)")
        _refuse_duplicates(self.edges, self.n_nodes)
        w = as_float_array(weights, "weights", ndim=1, allow_empty=True)
        if w.shape[0] != self.n_edges:
            raise ValueError(f"weights: expected {self.n_edges} entries (one per edge), "
                             f"got {w.shape[0]}")
        if np.any(w <= 0):
            raise ValueError("weights: edge weights must be > 0")
        self.weights = np.ascontiguousarray(w)
        self.kind = kind

    @property
    def n_edges(self) -> int:
        return self.edges.shape[0]

    def __repr__(self) -> str:
        return (f"Graph(kind={self.kind!r}, n_nodes={self.n_nodes}, n_edges={self.n_edges}, "
                f"connected={self.is_connected})")

    @cached_property
    def is_complete_uniform(self) -> bool:
        """Every pair present with weight 1 (the theorems' setting)."""
        n = self.n_nodes
        return self.n_edges == n * (n - 1) // 2 and bool(np.all(self.weights == 1.0))

    @cached_property
    def adjacency(self) -> sp.csr_matrix:
        """Symmetric weighted adjacency, sparse (N, N)."""
        i, j = self.edges.T
        a = sp.coo_matrix((np.r_[self.weights, self.weights], (np.r_[i, j], np.r_[j, i])),
                          shape=(self.n_nodes, self.n_nodes))
        return a.tocsr()

    @cached_property
    def incidence(self) -> sp.csr_matrix:
        """Edge–node incidence ``D`` (E, N): row ``e = (i, j)`` has +1 at ``i``, −1 at ``j``."""
        e = np.arange(self.n_edges)
        i, j = self.edges.T
        return sp.csr_matrix((np.r_[np.ones(self.n_edges), -np.ones(self.n_edges)],
                              (np.r_[e, e], np.r_[i, j])), shape=(self.n_edges, self.n_nodes))

    @cached_property
    def elimination_rank(self) -> np.ndarray:
        """Each node's place in an approximate-minimum-degree elimination order of the
        weighted Laplacian (qdldl's ordering of ``L_w + I``), computed once: the
        certificates factorise the grounded Laplacians of fused subgraphs in the order
        their nodes inherit from it (:class:`convexfl.certificates.OrderedLDL`)."""
        import qdldl

        from .certificates import grounded_laplacian

        n = self.n_nodes
        M = grounded_laplacian(n, self.edges, self.weights, np.ones(n, bool), upper=True)
        order = qdldl.Solver(M + sp.eye(n, format="csc"), upper=True).factors()[2]
        rank = np.empty(n, np.int64)
        rank[order] = np.arange(n)
        return rank

    @cached_property
    def _components(self):
        return connected_components(self.adjacency, directed=False)

    @property
    def n_components(self) -> int:
        return int(self._components[0])

    @property
    def component_labels(self) -> np.ndarray:
        return self._components[1]

    @property
    def is_connected(self) -> bool:
        return self.n_components == 1

    def require_connected(self, what: str) -> None:
        """Raise a ``ValueError`` explaining that ``what`` needs a connected graph."""
        if not self.is_connected:
            raise ValueError(f"graph: {what} needs a connected graph, but this one has "
                             f"{self.n_components} connected components")

    @cached_property
    def degree(self) -> np.ndarray:
        """Weighted degrees ``Σ_j w_ij``."""
        return np.asarray(self.adjacency.sum(axis=1)).ravel()

    def differences(self, X) -> np.ndarray:
        """``x_i − x_j`` for every edge, shape (E, d)."""
        return X[self.edges[:, 0]] - X[self.edges[:, 1]]

    def distances(self, X) -> np.ndarray:
        """``‖x_i − x_j‖`` for every edge, shape (E,)."""
        from ._kernels import edge_norms

        return edge_norms(np.ascontiguousarray(self._check(X)), self.edges)

    def penalty(self, X) -> float:
        """``Σ_{(i,j)∈E} w_ij ‖x_i − x_j‖``."""
        return float(self.weights @ self.distances(X))

    def squared_penalty(self, X) -> float:
        """``Σ_{(i,j)∈E} w_ij ‖x_i − x_j‖²``."""
        return float(self.weights @ np.sum(self.differences(self._check(X)) ** 2, axis=1))

    def _check(self, X) -> np.ndarray:
        X = as_float_array(X, "X", ndim=2, copy=False)  # read only
        if X.shape[0] != self.n_nodes:
            raise ValueError(f"X: expected {self.n_nodes} rows (one per node), got {X.shape[0]}")
        return X

    def reduce(self, partition) -> Graph:
        """The graph of the reduced problem: node ``k`` per cluster, ``W_kl = Σ w_ij`` over
        ``i ∈ C_k, j ∈ C_l`` (within-cluster edges drop out)."""
        labels = check_partition(partition, self.n_nodes)
        k, keep, key, pairs, at = self._reduced_pairs(labels)
        if at is None:
            w = np.bincount(key, weights=self.weights[keep], minlength=k * k)[pairs]
        else:
            w = np.bincount(at, weights=self.weights[keep], minlength=len(pairs))
        return Graph(k, np.c_[pairs // k, pairs % k], w, kind=f"reduced({self.kind})")

    def reduce_flows(self, partition, flows) -> np.ndarray:
        """Flows on the edges of :meth:`reduce`'s graph: ``u_kl = Σ ±u_ij`` over ``i ∈ C_k,
        j ∈ C_l`` (sign + where the edge runs from ``C_k`` to ``C_l``, ``k < l``), so that
        ``‖u_kl‖ ≤ Σ λw_ij = λW_kl`` when every ``‖u_ij‖ ≤ λw_ij``, and the reduced residual
        is the original one summed over each cluster. ``flows``: (E, d) of this graph."""
        labels = check_partition(partition, self.n_nodes)
        flows = as_float_array(flows, "flows", ndim=2, copy=False)
        if flows.shape[0] != self.n_edges:
            raise ValueError(f"flows: expected {self.n_edges} rows (one per edge), got "
                             f"{flows.shape[0]}")
        k, keep, key, pairs, at = self._reduced_pairs(labels)
        if at is None:
            at = np.searchsorted(pairs, key)
        sign = np.where(labels[self.edges[keep, 0]] < labels[self.edges[keep, 1]], 1.0, -1.0)
        signed = flows[keep] * sign[:, None]
        return np.stack([np.bincount(at, weights=signed[:, c], minlength=len(pairs))
                         for c in range(flows.shape[1])], axis=1)

    def _reduced_pairs(self, labels):
        """``(k, keep, key, pairs, at)``: the edges across clusters (``keep``), their key
        ``lo·k + hi`` of the cluster pair, the sorted distinct keys and each kept edge's
        position among them (None when counted by :func:`numpy.bincount` over all pairs)."""
        k = int(labels.max()) + 1
        a, b = labels[self.edges[:, 0]], labels[self.edges[:, 1]]
        keep = a != b
        lo, hi = np.minimum(a[keep], b[keep]), np.maximum(a[keep], b[keep])
        key = lo * np.int64(k) + hi
        if k * k <= 4 * key.size:  # few clusters: count every pair, no sort
            return k, keep, key, np.flatnonzero(np.bincount(key, minlength=k * k)), None
        pairs, at = np.unique(key, return_inverse=True)
        return k, keep, key, pairs, at

    def subgraph_edges(self, mask) -> Graph:
        """The graph with only the edges where ``mask`` is true."""
        return Graph(self.n_nodes, self.edges[mask], self.weights[mask], kind=self.kind)


def _refuse_duplicates(edges, n):
    """Raise naming the first pair that occurs twice. O(E) for lexicographically sorted
    edges (every constructor here makes them so), a sort otherwise."""
    key = edges[:, 0] * np.int64(n) + edges[:, 1]
    if key.size < 2 or np.all(np.diff(key) > 0):
        return
    key = np.sort(key)
    dup = key[1:][np.diff(key) == 0]
    if dup.size:
        i, j = divmod(int(dup[0]), n)
        raise ValueError(f"edges: the pair ({i}, {j}) occurs {int(np.sum(key == dup[0]))} "
                         "times; each pair may appear once (add duplicate weights together "
                         "first; a graph with repeated pairs would count them as more edges)")


def complete(n_users: int, weight: float = 1.0) -> Graph:
    """The complete graph on ``n_users`` with every ``w_ij = weight`` (default 1)."""
    n = as_int(n_users, "n_users", low=1)
    weight = as_scalar(weight, "weight", low=0.0, low_inclusive=False)
    n_edges = n * (n - 1) // 2
    if n_edges > MAX_COMPLETE_EDGES:
        raise ValueError(f"n_users: a complete graph on {n} users has {n_edges} edges, more "
                         f"than {MAX_COMPLETE_EDGES}; use graphs.knn for large N")
    i, j = np.triu_indices(n, k=1)
    return Graph(n, np.c_[i, j], np.full(n_edges, weight), kind="complete")


def knn(points, k: int = 10, phi: float | None = None, *, warn_disconnected: bool = True
        ) -> Graph:
    r"""Symmetrised k-nearest-neighbour graph (``i ~ j`` if either is among the other's k).

    Parameters
    ----------
    points : array (N, p)
        What the neighbours are measured on (the data ``a_i``, or any user features).
    k : int
        Neighbours per point, ``1 ≤ k ≤ N − 1``.
    phi : float, optional
        If given, Gaussian-kernel weights ``w_ij = exp(−φ ‖a_i − a_j‖²)``; else ``w_ij = 1``.

    Notes
    -----
    Built with scikit-learn's ``NearestNeighbors`` (a KD-/ball tree): O(N k) memory.
    A disconnected result is reported by a ``UserWarning`` (it can never fuse to a single
    cluster); ``Graph.n_components`` gives the count.
    """
    from sklearn.neighbors import NearestNeighbors

    P = as_float_array(points, "points", ndim=2)
    n = P.shape[0]
    if n < 2:
        raise ValueError(f"points: a k-nearest-neighbour graph needs at least 2 points, got {n}")
    k = as_int(k, "k", low=1, high=n - 1)
    if phi is not None:
        phi = as_scalar(phi, "phi", low=0.0)
    nn = NearestNeighbors(n_neighbors=k + 1).fit(P)
    _, idx = nn.kneighbors(P)
    rows = np.repeat(np.arange(n), k + 1)
    cols = idx.ravel()
    keep = rows != cols
    lo, hi = np.minimum(rows[keep], cols[keep]), np.maximum(rows[keep], cols[keep])
    pairs = np.unique(np.c_[lo, hi], axis=0)
    if phi is None:
        w = np.ones(len(pairs))
    else:
        w = np.exp(-phi * np.sum((P[pairs[:, 0]] - P[pairs[:, 1]]) ** 2, axis=1))
        if np.any(w <= 0):
            raise ValueError("phi: so large that some Gaussian weights underflow to 0; "
                             "use a smaller phi or rescale points")
    g = Graph(n, pairs, w, kind=f"knn(k={k}" + ("" if phi is None else f", phi={phi:g}") + ")")
    if warn_disconnected and not g.is_connected:
        warnings.warn(f"knn: the {k}-nearest-neighbour graph has {g.n_components} connected "
                      "components; its models can never fuse into one cluster", UserWarning,
                      stacklevel=2)
    return g


def from_edges(edges, weights=None, *, n_nodes: int | None = None) -> Graph:
    """A graph from a user-given edge list.

    Parameters
    ----------
    edges : int array (E, 2)
        Unordered pairs; each is stored as ``(min, max)``. Self-loops and duplicate pairs
        are refused.
    weights : array (E,), optional
        Positive weights (default 1).
    n_nodes : int, optional
        Number of users (default ``max index + 1``).
    """
    e = np.asarray(edges)
    if e.ndim != 2 or e.shape[1] != 2:
        raise ValueError(f"edges: expected an (E, 2) array of node pairs, got shape {e.shape}")
    if e.shape[0] == 0:
        raise ValueError("edges: is empty; a graph needs at least one edge")
    if e.dtype.kind not in "iu":
        if e.dtype.kind == "f" and np.all(np.isfinite(e)) and np.all(e == np.round(e)):
            raise TypeError("edges: node indices must be integers, got floats")
        raise TypeError(f"edges: node indices must be integers, got dtype {e.dtype}")
    e = e.astype(np.int64)
    n = int(e.max()) + 1 if n_nodes is None else as_int(n_nodes, "n_nodes", low=1)
    if e.min() < 0 or e.max() >= n:
        raise ValueError(f"edges: node indices must be in 0..{n - 1}, found "
                         f"{int(e.min())}..{int(e.max())}")
    if np.any(e[:, 0] == e[:, 1]):
        raise ValueError(f"edges: self-loop at node {int(e[e[:, 0] == e[:, 1]][0, 0])}")
    w = np.ones(e.shape[0]) if weights is None else as_float_array(weights, "weights", ndim=1)
    if w.shape[0] != e.shape[0]:
        raise ValueError(f"weights: expected {e.shape[0]} entries (one per edge), "
                         f"got {w.shape[0]}")
    if np.any(w <= 0):
        raise ValueError("weights: edge weights must be > 0")
    pairs = np.sort(e, axis=1)
    if len(np.unique(pairs, axis=0)) != len(pairs):
        raise ValueError("edges: contains a duplicate pair")
    order = np.lexsort((pairs[:, 1], pairs[:, 0]))
    return Graph(n, pairs[order], w[order], kind="custom")
