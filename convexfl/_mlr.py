r"""ℓ2-regularised multinomial logistic regression (MLR): the one place its formulas live.

A model is a flat vector :math:`\theta \in \mathbb{R}^{D}`, :math:`D = (p + 1) C`, read as the
matrix :math:`[W; b^T]` of shape ``(p + 1, C)`` (features × classes, the last row the
intercepts). With :math:`\tilde x = (x, 1)`, the logits are :math:`z = \tilde x^T [W; b^T]` and,
for one client's samples :math:`(x_j, y_j)_{j=1}^{m}` with labels :math:`y_j \in \{0..C-1\}`,

.. math::

    f(\theta) = \frac1m \sum_{j=1}^m \Big(\log\sum_{c} e^{z_{jc}} - z_{j y_j}\Big)
                + \frac{\ell_2}{2}\|W\|_F^2 ,\qquad
    \nabla_{[W;b^T]} f = \frac1m \tilde X^T(\operatorname{softmax}(Z) - Y) + \ell_2 [W; 0],

(intercepts not penalised). The Hessian of the cross-entropy in the logits,
:math:`\operatorname{diag}(p) - pp^T`, is :math:`\preceq \tfrac12 I`, so
:math:`\nabla f` is Lipschitz with :math:`L \le \tfrac{1}{2m}\lambda_{\max}(\tilde X^T\tilde X) +
\ell_2` (:func:`lipschitz`).

Client data for the MLR algorithms (:mod:`convexfl.baselines`, :mod:`convexfl.cgpfl`) is any
object with ``X_train, y_train`` (and optionally ``X_test, y_test``) attributes, e.g.
:class:`convexfl.datasets.ClientSplit`, or a tuple ``(X, y)`` / ``(X, y, X_test, y_test)``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from . import _kernels  # noqa: F401  (the package's numba set-up: NUMBA_CACHE_DIR)
from ._validation import as_float_array

__all__ = ["n_params", "as_matrix", "logits", "softmax", "value_grad", "value", "grad",
           "lipschitz", "predict", "accuracy", "client_arrays", "held_out_arrays", "evaluate"]


def n_params(n_features: int, n_classes: int) -> int:
    """:math:`D = (p + 1) C`."""
    return (n_features + 1) * n_classes


def as_matrix(theta: np.ndarray, n_classes: int) -> np.ndarray:
    """The ``(p + 1, C)`` view of a flat model."""
    return theta.reshape(-1, n_classes)


def logits(theta: np.ndarray, X: np.ndarray, n_classes: int) -> np.ndarray:
    """:math:`Z = X W + 1 b^T`, shape (m, C)."""
    M = as_matrix(theta, n_classes)
    return X @ M[:-1] + M[-1]


def softmax(Z: np.ndarray) -> np.ndarray:
    """Row-wise softmax, stabilised by the row maximum."""
    E = np.exp(Z - Z.max(axis=1, keepdims=True))
    return E / E.sum(axis=1, keepdims=True)


@njit(cache=True)
def _kernel(theta, X, y, n_classes, l2, g):
    """Value of f; its gradient written into ``g`` (flat, same layout as theta)."""
    m, p = X.shape
    C = n_classes
    z = np.empty(C)
    g[:] = 0.0
    val = 0.0
    for j in range(m):
        zmax = -np.inf
        for c in range(C):
            t = theta[p * C + c]
            for f in range(p):
                t += X[j, f] * theta[f * C + c]
            z[c] = t
            zmax = max(zmax, t)
        s = 0.0
        for c in range(C):
            s += np.exp(z[c] - zmax)
        lse = zmax + np.log(s)
        val += lse - z[y[j]]
        for c in range(C):
            r = np.exp(z[c] - lse) - (1.0 if c == y[j] else 0.0)
            g[p * C + c] += r
            for f in range(p):
                g[f * C + c] += X[j, f] * r
    reg = 0.0
    for k in range(p * C):
        reg += theta[k] * theta[k]
        g[k] = g[k] / m + l2 * theta[k]
    for c in range(C):
        g[p * C + c] /= m
    return val / m + 0.5 * l2 * reg


def value_grad(theta: np.ndarray, X: np.ndarray, y: np.ndarray, n_classes: int,
               l2: float) -> tuple[float, np.ndarray]:
    """:math:`f(\\theta)` and :math:`\\nabla f(\\theta)` (flat), see the module docstring
    (numba kernel; ``X`` float64, ``y`` int64)."""
    g = np.empty(theta.shape[0])
    return float(_kernel(theta, X, y, n_classes, l2, g)), g


def value(theta, X, y, n_classes, l2) -> float:
    """:math:`f(\\theta)`."""
    return value_grad(theta, X, y, n_classes, l2)[0]


def grad(theta, X, y, n_classes, l2) -> np.ndarray:
    """:math:`\\nabla f(\\theta)` (flat)."""
    return value_grad(theta, X, y, n_classes, l2)[1]


def lipschitz(X: np.ndarray, l2: float) -> float:
    r""":math:`L = \tfrac{1}{2m}\lambda_{\max}(\tilde X^T\tilde X) + \ell_2`, an upper bound on the
    Lipschitz constant of :math:`\nabla f` (the same for every class block)."""
    Xt = np.hstack([X, np.ones((X.shape[0], 1))])
    return 0.5 * float(np.linalg.eigvalsh(Xt.T @ Xt / X.shape[0])[-1]) + l2


def predict(theta: np.ndarray, X: np.ndarray, n_classes: int) -> np.ndarray:
    """Predicted labels (argmax of the logits)."""
    return np.argmax(logits(theta, X, n_classes), axis=1)


def accuracy(theta: np.ndarray, X: np.ndarray, y: np.ndarray, n_classes: int) -> float:
    """Fraction of correct predictions (NaN for an empty set)."""
    if X.shape[0] == 0:
        return float("nan")
    return float(np.mean(predict(theta, X, n_classes) == y))


# ------------------------------------------------------------------------------ client data


def _labels(y, name: str, n_rows: int, n_classes: int) -> np.ndarray:
    y = np.asarray(y)
    if y.ndim != 1 or y.shape[0] != n_rows:
        raise ValueError(f"{name}: expected shape ({n_rows},), got {y.shape}")
    if y.size and (y.dtype.kind not in "iu" and not np.all(np.equal(np.mod(y, 1), 0))):
        raise ValueError(f"{name}: labels must be integers in 0..{n_classes - 1}")
    y = y.astype(np.int64)
    if y.size and (y.min() < 0 or y.max() >= n_classes):
        raise ValueError(f"{name}: labels must be in 0..{n_classes - 1}, "
                         f"got range [{y.min()}, {y.max()}]")
    return y


def _parts(client_data):
    if hasattr(client_data, "X_train"):
        return (client_data.X_train, client_data.y_train,
                getattr(client_data, "X_test", None), getattr(client_data, "y_test", None))
    if isinstance(client_data, (tuple, list)) and len(client_data) in (2, 4):
        return tuple(client_data) + (None, None) * (len(client_data) == 2)
    raise ValueError("client_data: each entry must have X_train/y_train attributes or be a "
                     "tuple (X, y) or (X, y, X_test, y_test)")


def client_arrays(client_data, n_features: int, n_classes: int):
    """Validated training arrays ``(X, y)`` of one client (``X`` (m, p) float, ``y`` int)."""
    X, y, _, _ = _parts(client_data)
    X = as_float_array(X, "client_data.X_train", ndim=2)
    if X.shape[1] != n_features:
        raise ValueError(f"client_data.X_train: expected {n_features} columns, got {X.shape[1]}")
    return X, _labels(y, "client_data.y_train", X.shape[0], n_classes)


def held_out_arrays(client_data, n_features: int, n_classes: int):
    """Validated test arrays of one client, or the training arrays when it has none."""
    _, _, Xt, yt = _parts(client_data)
    if Xt is None:
        return client_arrays(client_data, n_features, n_classes)
    Xt = as_float_array(Xt, "client_data.X_test", ndim=2, allow_empty=True)
    if Xt.shape[1] != n_features:
        raise ValueError(f"client_data.X_test: expected {n_features} columns, got {Xt.shape[1]}")
    return Xt, _labels(yt, "client_data.y_test", Xt.shape[0], n_classes)


def evaluate(models: np.ndarray, client_data, n_features: int, n_classes: int) -> dict:
    """Test accuracy of one model per client (``models`` shape (N, D)).

    Returns ``accuracy`` (pooled: correct / test samples), ``mean_client_accuracy``,
    ``client_accuracy`` (N,) and ``client_n_test`` (N,).
    """
    correct, counts, accs = [], [], []
    for theta, cd in zip(models, client_data, strict=True):
        Xt, yt = held_out_arrays(cd, n_features, n_classes)
        hits = int(np.sum(predict(theta, Xt, n_classes) == yt)) if Xt.shape[0] else 0
        correct.append(hits)
        counts.append(Xt.shape[0])
        accs.append(hits / Xt.shape[0] if Xt.shape[0] else float("nan"))
    counts = np.asarray(counts)
    return {
        "accuracy": float(np.sum(correct) / max(counts.sum(), 1)),
        "mean_client_accuracy": float(np.nanmean(accs)),
        "client_accuracy": np.asarray(accs),
        "client_n_test": counts,
    }
