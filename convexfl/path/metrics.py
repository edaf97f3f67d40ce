"""Federated-learning metrics along a path (Armacki et al. Figs. 2-3)."""

from __future__ import annotations

import numpy as np

from .._validation import as_float_array
from .result import SolutionPath


def _predict(loss, x, A):
    if hasattr(loss, "decision_function"):
        return np.sign(loss.decision_function(x, A))
    return np.sign(A @ x)


def fl_metrics(path: SolutionPath, loss, test_X, test_y, test_cluster, user_cluster) -> dict:
    r"""Average test accuracy and average within-cluster model distance along a path.

    As in Armacki et al. Sec. V: user ``i`` of (true) cluster ``k`` is tested on the whole
    test set of cluster ``k`` with the classifier ``sign(⟨w, a⟩ − b)`` (squared hinge) or
    ``sign(⟨x, a⟩)`` (logistic); the accuracy is averaged over users (Fig. 2). The
    within-cluster distance is the mean of ``‖x_i − x_j‖`` over pairs ``i < j`` of the same
    true cluster (Fig. 3).

    Returns
    -------
    dict
        ``lambdas``, ``accuracy`` (R,), ``within_distance`` (R,), and the helpers
        ``accuracy_of(X)`` for comparators (global, local, oracle models).
    """
    test_X = as_float_array(test_X, "test_X", ndim=2)
    test_y = as_float_array(test_y, "test_y", ndim=1)
    test_cluster = np.asarray(test_cluster)
    user_cluster = np.asarray(user_cluster)
    if user_cluster.shape != (path.labels.shape[1],):
        raise ValueError(f"user_cluster: expected {path.labels.shape[1]} entries (one per "
                         f"user), got shape {user_cluster.shape}")
    if test_y.shape[0] != test_X.shape[0] or test_cluster.shape[0] != test_X.shape[0]:
        raise ValueError("test_y, test_cluster: need one entry per row of test_X")

    def accuracy_of(X):
        acc = []
        for i, k in enumerate(user_cluster):
            rows = test_cluster == k
            acc.append(np.mean(_predict(loss, X[i], test_X[rows]) == test_y[rows]))
        return float(np.mean(acc))

    pairs = np.array([(i, j) for i in range(len(user_cluster))
                      for j in range(i + 1, len(user_cluster))
                      if user_cluster[i] == user_cluster[j]])
    acc = np.array([accuracy_of(X) for X in path.X])
    if len(pairs):
        dist = np.array([np.mean(np.linalg.norm(X[pairs[:, 0]] - X[pairs[:, 1]], axis=1))
                         for X in path.X])
    else:
        dist = np.zeros(len(path))
    return {"lambdas": np.asarray(path.lambdas), "accuracy": acc, "within_distance": dist,
            "accuracy_of": accuracy_of}
