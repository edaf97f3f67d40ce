r"""Smooth convex per-user losses ``f_i``.

A loss object holds the data of all N users and evaluates every ``f_i`` at once:
``values(X)`` is ``[f_i(x_i)]_i`` for ``X`` of shape (N, d), ``grad(X)`` stacks the
gradients. Each loss also gives its Lipschitz constants ``L_i`` (of ``∇f_i``), strong
convexity constants ``μ_i`` (0 when there is none) and the proximal map of one user,

.. math::

    \operatorname{prox}_i(v; ρ) = \arg\min_x f_i(x) + \tfrac{ρ}{2}\|x - v\|^2 ,

in closed form for the quadratic loss and by safeguarded Newton otherwise (one exact step
for least squares).

Federated data enter as ``(X, y, groups)``: there is **one user per distinct group label,
in sorted label order** (``np.unique``); ``loss.user_labels[i]`` is user ``i``'s label.
The generalised linear losses are sample means with optional per-sample weights ``s_j``
and a ridge term:

.. math::

    f_i(x) = \frac{1}{m_i} \sum_{j \in \text{user } i} s_j\, φ(\langle a_j, x\rangle, y_j)
             + \frac{c}{2}\|x\|^2 ,

with ``m_i`` the number of samples of user ``i`` (weights do not change the normaliser).
The formulas of every ``φ`` live once, in :mod:`convexfl._kernels`.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from . import _kernels as K
from ._flow_kernels import sums_by_label
from ._validation import (
    as_float_array,
    as_int,
    as_scalar,
    check_groups,
    check_labels_pm1,
    check_matrix_rows,
    check_partition,
)

__all__ = [
    "Huber",
    "LeastSquares",
    "Logistic",
    "Loss",
    "Poisson",
    "Quadratic",
    "SquaredHinge",
    "uniqueness_caveat",
]


class Loss:
    """Base class: N users' smooth convex losses stored as the arrays of :mod:`_kernels`."""

    name = "loss"
    code = -1

    def _set_arrays(self, F, y, coef, ptr, ridge, offset, delta, user_labels):
        self.F, self.y, self.coef = F, y, coef
        self.ptr = np.ascontiguousarray(ptr, dtype=np.int64)
        self.ridge, self.offset, self.delta = ridge, offset, float(delta)
        self.user_labels = user_labels

    # -- shape -----------------------------------------------------------------------
    @property
    def n_users(self) -> int:
        return self.ridge.shape[0]

    @property
    def dim(self) -> int:
        """Dimension d of each user's model."""
        return self.ridge.shape[1]

    @property
    def arrays(self):
        """``(code, F, y, coef, ptr, ridge, offset, delta)`` for the numba kernels."""
        return (self.code, self.F, self.y, self.coef, self.ptr, self.ridge, self.offset,
                self.delta)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(n_users={self.n_users}, dim={self.dim})"

    # -- evaluation ------------------------------------------------------------------
    def values(self, X) -> np.ndarray:
        """``[f_i(x_i)]_i``, shape (N,)."""
        X = check_matrix_rows(X, self.n_users, self.dim, copy=False)
        return K.values(*self.arrays, X)

    def value(self, X) -> float:
        """``Σ_i f_i(x_i)``."""
        return float(np.sum(self.values(X)))

    def grad(self, X) -> np.ndarray:
        """``[∇f_i(x_i)]_i``, shape (N, d)."""
        X = check_matrix_rows(X, self.n_users, self.dim, copy=False)
        code, F, y, coef, ptr, ridge, _, delta = self.arrays
        return K.grads(code, F, y, coef, ptr, ridge, delta, X)

    def hessian(self, i: int, x) -> np.ndarray:
        """``∇²f_i(x)`` (a generalised Hessian where ``φ''`` jumps), shape (d, d)."""
        x = as_float_array(x, "x", ndim=1)
        if x.shape[0] != self.dim:
            raise ValueError(f"x: expected length {self.dim}, got {x.shape[0]}")
        i = as_int(i, "i")
        if not 0 <= i < self.n_users:
            raise ValueError(f"i: user index must be in 0..{self.n_users - 1}, got {i}")
        g, H = np.empty(self.dim), np.empty((self.dim, self.dim))
        K.user_value_grad_hess(*self.arrays, i, x, g, H)
        return H

    def prox(self, V, rho, X0=None, *, tol: float = 1e-12, max_iter: int = 50):
        """Row-wise ``argmin_x f_i(x) + (ρ_i/2)‖x − v_i‖²``.

        Parameters
        ----------
        V : array (N, d)
        rho : float or array (N,)
            Positive proximal weights.
        X0 : array (N, d), optional
            Newton starting points (default ``V``).
        tol : float
            Gradient-norm tolerance of the Newton iteration.

        Returns
        -------
        ndarray (N, d)

        Raises
        ------
        RuntimeError
            If Newton did not reach ``tol`` within ``max_iter`` steps.
        """
        V = check_matrix_rows(V, self.n_users, self.dim, "V")
        rho = as_float_array(rho, "rho", ndim=(0, 1))
        if rho.ndim == 1 and rho.shape[0] != self.n_users:
            raise ValueError(f"rho: expected a number or {self.n_users} weights (one per "
                             f"user), got {rho.shape[0]}")
        rho = np.broadcast_to(rho, (self.n_users,)).copy()
        if np.any(rho <= 0):
            raise ValueError("rho: proximal weights must be > 0")
        X0 = V if X0 is None else check_matrix_rows(X0, self.n_users, self.dim, "X0")
        tol = as_scalar(tol, "tol", low=0.0, low_inclusive=False)
        max_iter = as_int(max_iter, "max_iter", low=1)
        out, _, ok = K.prox_all(*self.arrays, V, rho, X0, tol, max_iter)
        if not ok:
            raise RuntimeError(f"prox: Newton did not reach tol={tol} in {max_iter} steps")
        return out

    # -- constants -------------------------------------------------------------------
    @cached_property
    def lipschitz(self) -> np.ndarray:
        """Lipschitz constants ``L_i`` of ``∇f_i`` (``inf`` where unbounded), shape (N,)."""
        raise NotImplementedError

    @cached_property
    def strong_convexity(self) -> np.ndarray:
        """Strong convexity constants ``μ_i`` (0 when not strongly convex), shape (N,)."""
        raise NotImplementedError

    def strictly_convex_at(self, X) -> np.ndarray:
        r"""Whether each ``f_i`` is strictly convex on a neighbourhood of ``x_i``, shape (N,).

        The test is on the Hessian: ``∇²f_i`` is positive definite near ``x_i`` (smallest
        eigenvalue above ``1e-10`` times the largest), counting only the samples whose
        curvature ``φ''`` stays positive near ``x_i`` — a squared-hinge sample on or past its
        margin and a Huber sample in its linear part count as flat.

        If it holds for every user at a solution ``X`` of (SON) (or of (4); for (RED), of the
        aggregated loss at the centroids), ``X`` is the **only** solution: the solution set is
        convex and the objective is strictly convex near ``X``. This is Remark 1 of Armacki
        et al. (strictly convex ``f_i`` ⇒ a unique solution, hence a well-defined cluster
        structure) in local form. Where it fails, (SON) may have other solutions with other
        partitions (``theory_checks.armacki.remark1`` exhibits one): least squares with fewer
        samples than features, a squared-hinge user whose samples are all past the margin.
        A user with a ridge ``c > 0`` on every coordinate is strictly convex whatever the
        conditioning of its Hessian: that holds exactly, without eigenvalues (statsmodels'
        scotland data, ``COUTAX`` ~ 10³, gave Hessians with eigenvalues 10⁻³ and 4·10⁸,
        which the relative test alone called flat).
        """
        X = check_matrix_rows(X, self.n_users, self.dim)
        H = self._hessians_near(X)
        eig = np.linalg.eigvalsh(H)
        flat = eig[:, 0] <= 1e-10 * np.maximum(eig[:, -1], np.finfo(float).tiny)
        return ~flat | np.all(self.ridge > 0, axis=1)

    def _hessians_near(self, X) -> np.ndarray:
        """The users' Hessians at ``X`` with kinked samples counted as flat, (N, d, d)."""
        raise NotImplementedError

    # -- standard units --------------------------------------------------------------
    _standard = False  # True for a loss in standard units (and for its aggregates)

    @cached_property
    def standard(self):
        r"""``(units, loss)``: this loss in standard units (:mod:`convexfl.units`).

        With ``units = (c, s, σ)`` the standard loss satisfies ``f_i(c + s z) = σ f'_i(z)``
        exactly, and its data are centred and of unit spread: the same standard loss (to
        rounding) comes out of any rescaled or shifted copy of the data that (SON) is
        equivariant under. A loss already in standard units is its own standard form.
        """
        from .units import Units
        form = None if self._standard else self._standardised()
        if form is None:
            return Units.identity(self.dim), self
        shift, scale, fscale, out = form
        out._standard = True
        return Units(shift, scale, fscale), out

    def _standardised(self):
        """``(c, s, σ, standard loss)`` (see :attr:`standard`), or None for a loss without
        a standard form (it is then used in its own units)."""
        return None

    # -- structure -------------------------------------------------------------------
    def aggregate(self, partition) -> Loss:
        """The loss of the reduced problem: user ``k`` gets ``Σ_{i ∈ C_k} f_i``.

        ``partition`` is a label per user or a list of index lists; clusters are numbered
        in order of first appearance.
        """
        raise NotImplementedError

    def cvxpy_value(self, Xvar):
        """A cvxpy expression of ``Σ_i f_i(x_i)`` for the (N, d) variable ``Xvar``."""
        raise NotImplementedError


class Quadratic(Loss):
    r"""Convex clustering of points: ``f_i(x) = (w_i/2)‖x − a_i‖²``.

    Parameters
    ----------
    A : array (N, d)
        One point per user.
    weights : array (N,), optional
        Positive user weights ``w_i`` (default 1). ``L_i = μ_i = w_i``.
    """

    name = "quadratic"
    code = K.QUADRATIC

    def __init__(self, A, weights=None):
        A = as_float_array(A, "A", ndim=2)
        n = A.shape[0]
        w = np.ones(n) if weights is None else as_float_array(weights, "weights", ndim=1)
        if w.shape[0] != n:
            raise ValueError(f"weights: expected length {n} (one per row of A), "
                             f"got {w.shape[0]}")
        if np.any(w <= 0):
            raise ValueError("weights: user weights must be > 0")
        self._set_arrays(A, np.zeros(n), w, np.arange(n + 1), np.zeros_like(A),
                         np.zeros(n), 0.0, np.arange(n))

    @property
    def points(self) -> np.ndarray:
        """The points ``a_i``, shape (N, d)."""
        return self.F

    @cached_property
    def lipschitz(self):
        return self.coef.copy()

    @cached_property
    def strong_convexity(self):
        return self.coef.copy()

    def _hessians_near(self, X):
        return self.coef[:, None, None] * np.eye(self.dim)

    def strictly_convex_at(self, X) -> np.ndarray:
        """``∇²f_i = c_i I`` everywhere: strictly convex iff ``c_i > 0`` (no eigenvalues)."""
        check_matrix_rows(X, self.n_users, self.dim)
        return self.coef > 0

    def aggregate(self, partition):
        labels = check_partition(partition, self.n_users)
        k = labels.max() + 1
        w = np.bincount(labels, weights=self.coef, minlength=k)
        centre = sums_by_label(self.coef[:, None] * self.F, labels, k) / w[:, None]
        spread = 0.5 * self.coef * np.sum((self.F - centre[labels]) ** 2, axis=1)
        out = Quadratic(centre, w)
        out.offset = np.bincount(labels, weights=spread + self.offset, minlength=k)
        out._standard = self._standard
        return out

    def _standardised(self):
        """Centre ``c`` = the weighted mean of the points, ``s`` = their largest distance
        from it, ``σ = s²``: ``(w/2)‖c + s z − a‖² = s² (w/2)‖z − (a − c)/s‖²``."""
        c = self.coef @ self.F / self.coef.sum()
        s = _positive(float(np.max(np.linalg.norm(self.F - c, axis=1))))
        out = Quadratic((self.F - c) / s, self.coef)
        out.offset = self.offset / (s * s)
        out.user_labels = self.user_labels
        return c, s, s * s, out

    def cvxpy_value(self, Xvar):
        import cvxpy as cp
        return (0.5 * cp.sum(cp.multiply(self.coef[:, None], cp.square(Xvar - self.F)))
                + float(np.sum(self.offset)))


class _GLM(Loss):
    """Sample-mean generalised linear losses ``(1/m_i) Σ_j s_j φ(⟨a_j, x⟩, y_j) + ridge``."""

    labels_pm1 = False
    penalise_last = True  # False for the squared hinge: no ridge on the offset b

    def __init__(self, X, y, groups, *, c: float = 0.0, sample_weight=None, **kw):
        X = as_float_array(X, "X", ndim=2)
        y = as_float_array(y, "y", ndim=1)
        if y.shape[0] != X.shape[0]:
            raise ValueError(f"y: has {y.shape[0]} entries but X has {X.shape[0]} rows")
        self._check_targets(y)
        c = as_scalar(c, "c", low=0.0)
        s = (np.ones_like(y) if sample_weight is None
             else as_float_array(sample_weight, "sample_weight", ndim=1))
        if s.shape[0] != y.shape[0]:
            raise ValueError(f"sample_weight: has {s.shape[0]} entries but X has "
                             f"{X.shape[0]} rows")
        if np.any(s < 0):
            raise ValueError("sample_weight: weights must be >= 0")
        user_labels, user_index = check_groups(groups, X.shape[0])
        delta = self._delta(**kw)
        order = np.argsort(user_index, kind="stable")
        counts = np.bincount(user_index, minlength=len(user_labels))
        ptr = np.concatenate([[0], np.cumsum(counts)])
        F = self._features(X[order])
        coef = s[order] / counts[user_index[order]]
        ridge = np.tile(self._ridge_mask(F.shape[1]) * c, (len(user_labels), 1))
        self.c = c
        self._set_arrays(np.ascontiguousarray(F), y[order], coef, ptr, ridge,
                         np.zeros(len(user_labels)), delta, user_labels)

    @classmethod
    def from_groups(cls, X, y, groups, *, c: float = 0.0, sample_weight=None, **kw):
        """Build the loss from stacked samples: one user per distinct label of ``groups``,
        users in sorted label order."""
        return cls(X, y, groups, c=c, sample_weight=sample_weight, **kw)

    @classmethod
    def from_users(cls, Xs, ys, *, c: float = 0.0, sample_weights=None, **kw):
        """Build the loss from per-user lists ``Xs[i]`` (m_i, p), ``ys[i]`` (m_i,)."""
        if len(Xs) == 0 or len(Xs) != len(ys):
            raise ValueError(f"Xs, ys: expected equal, non-zero numbers of users, got "
                             f"{len(Xs)} and {len(ys)}")
        n_features = None
        for i, (Xi, yi) in enumerate(zip(Xs, ys, strict=True)):
            Xi = as_float_array(Xi, f"Xs[{i}]", ndim=2, allow_empty=True)
            if Xi.shape[0] == 0:
                raise ValueError(f"Xs: user {i} is empty (no samples)")
            n_features = Xi.shape[1] if n_features is None else n_features
            if Xi.shape[1] != n_features:
                raise ValueError(f"Xs: user {i} has {Xi.shape[1]} features, user 0 has "
                                 f"{n_features}")
            if np.shape(yi) != (Xi.shape[0],):
                raise ValueError(f"ys: user {i} has {Xi.shape[0]} samples in Xs but ys[{i}] "
                                 f"has shape {np.shape(yi)}")
        groups = np.concatenate([np.full(len(np.asarray(yi)), i) for i, yi in enumerate(ys)])
        sw = None if sample_weights is None else np.concatenate(sample_weights)
        return cls(np.concatenate([np.asarray(x, dtype=float) for x in Xs]),
                   np.concatenate([np.asarray(v, dtype=float) for v in ys]), groups, c=c,
                   sample_weight=sw, **kw)

    @property
    def n_samples(self) -> np.ndarray:
        """Samples per user ``m_i``."""
        return np.diff(self.ptr)

    def _delta(self):
        return 0.0

    def _check_targets(self, y):
        if self.labels_pm1:
            check_labels_pm1(y)

    def _features(self, X):
        return X

    def _ridge_mask(self, d):
        return np.ones(d)

    def _grams(self):
        """Per-user ``Σ_j coef_j a_j a_jᵀ``, shape (N, d, d)."""
        G = np.empty((self.n_users, self.dim, self.dim))
        for i in range(self.n_users):
            Fi = self.F[self.ptr[i]:self.ptr[i + 1]]
            G[i] = (Fi * self.coef[self.ptr[i]:self.ptr[i + 1], None]).T @ Fi
        return G

    @cached_property
    def lipschitz(self):
        sup = K.PHI_CURVATURE_SUP[self.code]
        top = np.linalg.eigvalsh(self._grams())[:, -1]
        with np.errstate(invalid="ignore"):
            lip = np.where(top > 0, sup * top, 0.0)
        return lip + self.ridge.max(axis=1)

    @cached_property
    def strong_convexity(self):
        return self.ridge.min(axis=1)

    def _hessians_near(self, X):
        users = np.repeat(np.arange(self.n_users), self.n_samples)
        t = np.einsum("jk,jk->j", self.F, X[users])
        Fw = self.F * (self.coef * self._curvature_near(t))[:, None]
        H = np.zeros((self.n_users, self.dim, self.dim))
        np.add.at(H, users, Fw[:, :, None] * self.F[:, None, :])
        H[:, np.arange(self.dim), np.arange(self.dim)] += self.ridge
        return H

    def _curvature_near(self, t) -> np.ndarray:
        """``φ''`` of every sample at ``t = ⟨a_j, x⟩``, 0 where it is 0 arbitrarily near."""
        raise NotImplementedError

    def aggregate(self, partition):
        labels = check_partition(partition, self.n_users)
        k = labels.max() + 1
        sample_cluster = np.repeat(labels, self.n_samples)
        order = np.argsort(sample_cluster, kind="stable")
        out = object.__new__(type(self))
        out.c = getattr(self, "c", 0.0)
        ridge = np.zeros((k, self.dim))
        np.add.at(ridge, labels, self.ridge)
        counts = np.bincount(sample_cluster, minlength=k)
        out._set_arrays(self.F[order], self.y[order], self.coef[order],
                        np.concatenate([[0], np.cumsum(counts)]), ridge,
                        np.bincount(labels, weights=self.offset, minlength=k), self.delta,
                        np.arange(k))
        out._standard = self._standard
        return out

    scales_targets = False  # True where φ(t, y) is homogeneous of degree 2 in (t, y, δ)

    def _standardised(self):
        """Features of unit RMS ``t`` and, where ``φ`` allows it (least squares, Huber),
        targets of unit RMS ``ŷ``: ``x = (ŷ/t) z``, ``σ = ŷ²``, so that
        ``φ(⟨a, x⟩, y) = ŷ² φ(⟨a/t, z⟩, y/ŷ)`` (with ``δ/ŷ`` for Huber) and the ridge becomes
        ``c/t²``."""
        t = _positive(float(np.sqrt(np.mean(self.F ** 2))))
        yhat = _positive(float(np.sqrt(np.mean(self.y ** 2)))) if self.scales_targets else 1.0
        s, sigma = yhat / t, yhat * yhat
        out = object.__new__(type(self))
        out.c = getattr(self, "c", 0.0) / (t * t)
        out._set_arrays(self.F / t, self.y / yhat, self.coef, self.ptr, self.ridge / (t * t),
                        self.offset / sigma, self.delta / yhat, self.user_labels)
        return np.zeros(self.dim), s, sigma, out

    def cvxpy_value(self, Xvar):
        import cvxpy as cp
        import scipy.sparse as sp
        rows = np.arange(self.F.shape[0])
        select = sp.csr_matrix((np.ones_like(rows, dtype=float),
                                (rows, np.repeat(np.arange(self.n_users), self.n_samples))),
                               shape=(self.F.shape[0], self.n_users))
        t = cp.sum(cp.multiply(self.F, select @ Xvar), axis=1)
        ridge = 0.5 * cp.sum(cp.multiply(self.ridge, cp.square(Xvar)))
        return self.coef @ self._cvxpy_phi(t) + ridge + float(np.sum(self.offset))


class LeastSquares(_GLM):
    r"""``f_i(x) = (1/2m_i) Σ_j s_j (⟨a_j, x⟩ − b_j)² + (c/2)‖x‖²``."""

    name = "least_squares"
    code = K.LEAST_SQUARES
    scales_targets = True

    @cached_property
    def strong_convexity(self):
        G = self._grams()
        G[:, np.arange(self.dim), np.arange(self.dim)] += self.ridge
        return np.maximum(np.linalg.eigvalsh(G)[:, 0], 0.0)

    def _curvature_near(self, t):
        return np.ones_like(t)

    def _cvxpy_phi(self, t):
        import cvxpy as cp
        return 0.5 * cp.square(t - self.y)


class Logistic(_GLM):
    r"""``f_i(x) = (1/m_i) Σ_j s_j log(1 + exp(−ℓ_j ⟨a_j, x⟩)) + (c/2)‖x‖²``, ``ℓ_j ∈ {−1, +1}``.

    No intercept is added: append a column of ones to ``X`` for one.
    """

    name = "logistic"
    code = K.LOGISTIC
    labels_pm1 = True

    def _curvature_near(self, t):
        s = 0.5 * (1.0 + np.tanh(0.5 * self.y * t))
        return s * (1.0 - s)

    def _cvxpy_phi(self, t):
        import cvxpy as cp
        return cp.logistic(-cp.multiply(self.y, t))


class SquaredHinge(_GLM):
    r"""The squared hinge of Armacki et al. Sec. V, with ``x = [w, b] ∈ R^{p+1}``:

    .. math::

        f_i(x) = \frac{c}{2}\|w\|^2 + \frac{1}{m_i}\sum_j s_j
                 \max\{0, 1 - ℓ_j(\langle w, a_j\rangle - b)\}^2 ,

    the ridge on ``w`` only and the classifier ``sign(⟨w, a⟩ − b)``. Internally the features
    are ``[a_j, −1]`` so that ``⟨[a_j, −1], x⟩ = ⟨w, a_j⟩ − b``. The paper uses c = 1e-3.
    """

    name = "squared_hinge"
    code = K.SQUARED_HINGE
    labels_pm1 = True

    def _features(self, X):
        return np.hstack([X, -np.ones((X.shape[0], 1))])

    def _ridge_mask(self, d):
        mask = np.ones(d)
        mask[-1] = 0.0
        return mask

    def decision_function(self, x, A):
        """``⟨w, a⟩ − b`` for the rows ``a`` of ``A`` and the model ``x = [w, b]``."""
        x = as_float_array(x, "x", ndim=1)
        if x.shape[0] != self.dim:
            raise ValueError(f"x: expected length {self.dim} (weights and offset), "
                             f"got {x.shape[0]}")
        A = as_float_array(A, "A", ndim=2)
        if A.shape[1] != self.dim - 1:
            raise ValueError(f"A: expected {self.dim - 1} columns (features), got {A.shape[1]}")
        return A @ x[:-1] - x[-1]

    def _curvature_near(self, t):
        return np.where(1.0 - self.y * t > _KINK, 2.0, 0.0)

    def _cvxpy_phi(self, t):
        import cvxpy as cp
        return cp.square(cp.pos(1 - cp.multiply(self.y, t)))


class Huber(_GLM):
    r"""Robust regression: ``f_i(x) = (1/m_i) Σ_j s_j h_δ(⟨a_j, x⟩ − b_j) + (c/2)‖x‖²`` with
    ``h_δ(r) = r²/2`` for ``|r| ≤ δ`` and ``δ|r| − δ²/2`` otherwise.
    """

    name = "huber"
    code = K.HUBER
    scales_targets = True

    def _delta(self, delta: float = 1.0):
        return as_scalar(delta, "delta", low=0.0, low_inclusive=False)

    def _curvature_near(self, t):
        return np.where(np.abs(t - self.y) < self.delta * (1.0 - _KINK), 1.0, 0.0)

    def _cvxpy_phi(self, t):
        import cvxpy as cp
        return 0.5 * cp.huber(t - self.y, self.delta)


class Poisson(_GLM):
    r"""Poisson regression with log link: ``f_i(x) = (1/m_i) Σ_j s_j (exp⟨a_j, x⟩ − y_j ⟨a_j, x⟩)
    + (c/2)‖x‖²`` (the negative log-likelihood up to ``log y_j!``), ``y_j ≥ 0``.

    Its gradient is not globally Lipschitz: ``lipschitz`` is ``inf``.
    """

    name = "poisson"
    code = K.POISSON

    def _check_targets(self, y):
        if np.any(y < 0):
            raise ValueError("y: Poisson counts must be >= 0")

    def _curvature_near(self, t):
        return np.exp(t)

    def _cvxpy_phi(self, t):
        import cvxpy as cp
        return cp.exp(t) - cp.multiply(self.y, t)


_KINK = 1e-7  # a sample this close to the squared hinge's or Huber's kink counts as flat


def uniqueness_caveat(loss: Loss, X) -> str:
    """``""`` when :meth:`Loss.strictly_convex_at` certifies that the solution ``X`` is the
    only one; otherwise a sentence saying which users' ``f_i`` are flat near it."""
    flat = np.flatnonzero(~loss.strictly_convex_at(X))
    if flat.size == 0:
        return ""
    shown = ", ".join(map(str, flat[:8].tolist())) + (", ..." if flat.size > 8 else "")
    return (f"the solution is not certified unique: f_i is not strictly convex near it for "
            f"{flat.size} of {loss.n_users} users ({shown}), so other solutions, with other "
            "cluster structures, may exist (Armacki et al., Remark 1); more samples per user "
            "or a ridge c > 0 restores uniqueness")


def _positive(scale: float) -> float:
    """A scale to divide by: ``scale`` when it is positive and finite, else 1."""
    return scale if 0.0 < scale < np.inf else 1.0
