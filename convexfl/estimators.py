r"""scikit-learn estimators for sum-of-norms models: the front door.

:class:`ConvexClustering` clusters the rows of ``X`` (one point per user, the quadratic
loss); :class:`SumOfNormsRegressor` and :class:`SumOfNormsClassifier` fit one linear model
per user (``groups``) pulled together by the sum-of-norms penalty. All of them solve

.. math::

    \min_{x_1..x_N} \sum_i f_i(x_i) + λ \sum_{(i,j)∈E} w_{ij} \|x_i - x_j\|      \tag{SON}

with ``λ`` in the canonical (SON) convention, in the units of your data, by
:func:`convexfl.solve` (``method="auto"``: certified, fast), and keep the certificate
(``certificate_``). A solve that does not reach its certified tolerance issues a
:class:`sklearn.exceptions.ConvergenceWarning`. They follow scikit-learn's contract
(``get_params``/``clone``, ``check_estimator``, ``GridSearchCV`` over ``lam``); ``groups``
is a keyword of ``fit``/``predict``/``score`` that metadata routing can carry
(``set_fit_request(groups=True)``).
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, ClusterMixin, RegressorMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.metaestimators import available_if
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted

from . import graphs as graph_builders
from . import losses
from ._validation import as_int, as_scalar, check_groups, users_of, validate_estimator_data
from .graphs import Graph
from .problems import SumOfNorms
from .solvers import solve

__all__ = ["ConvexClustering", "SumOfNormsClassifier", "SumOfNormsRegressor"]


def _check_lam(lam):
    return None if lam is None else as_scalar(lam, "lam", low=0.0)


def _warn_unconverged(sol, what):
    if not sol.converged:
        warnings.warn(f"{what}: the solve at λ = {sol.lam:.6g} is not certified "
                      f"({sol.message})", ConvergenceWarning, stacklevel=3)


def _user_graph(graph, n, points, k, phi):
    """The graph on ``n`` users: ``"complete"``, ``"knn"`` on ``points`` (k capped at
    ``n − 1``), or a :class:`~convexfl.graphs.Graph`."""
    if isinstance(graph, Graph):
        if graph.n_nodes != n:
            raise ValueError(f"graph: has {graph.n_nodes} nodes for {n} users")
        return graph
    if graph == "complete" or n < 3:
        return graph_builders.complete(n)
    if graph == "knn":
        k = as_int(k, "k", low=1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # disconnected: reported below
            return graph_builders.knn(points, k=min(k, n - 1), phi=phi)
    raise ValueError(f"graph: expected 'knn', 'complete' or a convexfl Graph, got {graph!r}")


class ConvexClustering(ClusterMixin, BaseEstimator):
    r"""Convex clustering of the rows of ``X``, certified.

    .. math::

        \min_U \tfrac12 \sum_i \|u_i - x_i\|^2 + λ \sum_{(i,j)∈E} w_{ij}\|u_i - u_j\| ,

    λ in the (SON) convention and the units of ``X``. Rows whose ``u_i`` coincide form a
    cluster.

    Parameters
    ----------
    lam : float, optional
        λ ≥ 0. Give ``lam`` or ``n_clusters``, not both. With neither: the cluster count
        that persists over the longest λ-range of the path (grid up to the exact fusion
        threshold λ̂, or up to its certified upper bound where λ̂'s SOCP would be large:
        :func:`convexfl.path.trace.default_grid`), other than all-separate and all-fused
        when another exists.
    n_clusters : int, optional
        Choose λ on the path where there are exactly this many clusters (refined by
        bisection between grid points). If the path skips it (several merges at one λ), the
        nearest λ with fewer clusters is used and a ``UserWarning`` says so.
    graph : {"knn", "complete"} or Graph, default="knn"
        The pairs penalised: symmetrised k-nearest neighbours of the rows, every pair, or a
        :class:`convexfl.graphs.Graph` on the rows.
    k : int, default=10
        Neighbours for ``graph="knn"`` (at most ``n_samples − 1``).
    phi : float, optional
        Gaussian weights ``w_ij = exp(−φ‖z_i − z_j‖²)`` on the standardised rows ``z`` (the
        data centred, their largest distance from the centre 1), so φ does not depend on the
        units of ``X``; ``None``: ``w_ij = 1``.
    method : str, default="auto"
        Solver (:data:`convexfl.solvers.METHODS`).
    tol : float, default=1e-6
        Certified KKT residual of every solve.
    n_lambdas : int, default=30
        Grid size of the path (when ``lam`` is not given).
    verbose : bool, default=False
        A progress bar over the path's λ (tqdm, on stderr); long fits (digits, 1797 × 64:
        ~50 s on a 2-core machine) are otherwise silent.

    Attributes
    ----------
    labels_ : ndarray (n_samples,)
        Cluster of each row, numbered by first appearance.
    centers_ : ndarray (n_samples, n_features)
        ``u_i`` of each row (equal within a cluster).
    cluster_centers_ : ndarray (n_clusters_, n_features)
        One row per cluster (used by :meth:`predict`).
    n_clusters_ : int
    lam_ : float
        The λ solved at (SON convention, your units).
    path_ : SolutionPath or None
        The λ-path when ``lam`` was not given.
    certificate_ : Certificate
        The KKT certificate of ``centers_``.
    solution_ : Solution
    graph_ : Graph
    n_features_in_ : int
    """

    def __init__(self, lam=None, *, n_clusters=None, graph="knn", k=10, phi=None,
                 method="auto", tol=1e-6, n_lambdas=30, verbose=False):
        self.lam = lam
        self.n_clusters = n_clusters
        self.graph = graph
        self.k = k
        self.phi = phi
        self.method = method
        self.tol = tol
        self.n_lambdas = n_lambdas
        self.verbose = verbose

    def fit(self, X, y=None):
        """Cluster the rows of ``X`` (``y`` is ignored)."""
        X = validate_estimator_data(self, X, dtype=np.float64, ensure_min_samples=1)
        lam = _check_lam(self.lam)
        if lam is not None and self.n_clusters is not None:
            raise ValueError("lam, n_clusters: give at most one of them")
        loss = losses.Quadratic(X)
        units, std = loss.standard
        phi = None if self.phi is None else as_scalar(self.phi, "phi", low=0.0)
        self.graph_ = _user_graph(self.graph, X.shape[0], std.points, self.k, phi)
        prob = SumOfNorms(loss, self.graph_, 0.0 if lam is None else lam)
        self.path_ = None
        if lam is None and X.shape[0] > 1 and self.graph_.n_edges:
            lam = self._lam_from_path(prob)
        sol = solve(prob.with_lam(lam or 0.0), method=self.method, tol=self.tol)
        _warn_unconverged(sol, "ConvexClustering")
        self.solution_, self.certificate_, self.lam_ = sol, sol.certificate, float(sol.lam)
        self.labels_ = sol.labels()
        self.centers_ = sol.X
        self.n_clusters_ = int(self.labels_.max()) + 1
        self.cluster_centers_ = self.centers_[np.unique(self.labels_, return_index=True)[1]]
        return self

    def _lam_from_path(self, prob):
        from .path import son_path

        n_lambdas = as_int(self.n_lambdas, "n_lambdas", low=3)
        if not isinstance(self.verbose, (bool, np.bool_)):
            raise TypeError(f"verbose: expected True or False, got {self.verbose!r}")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # non-monotone notes: in path_.meta
            self.path_ = son_path(prob, n_lambdas=n_lambdas, method=self.method, tol=self.tol,
                                  progress=bool(self.verbose))
        counts, lams = self.path_.n_clusters, self.path_.lambdas
        if self.n_clusters is None:
            return _most_persistent(counts, lams, prob.n_users)
        k = as_int(self.n_clusters, "n_clusters", low=1)
        hits = np.flatnonzero(counts == k)
        if hits.size:
            return float(lams[hits[len(hits) // 2]])
        return self._bisect_for(prob, k, counts, lams)

    def _bisect_for(self, prob, k, counts, lams):
        """λ with ``k`` clusters between the grid points that skip it (geometric bisection);
        else the nearest λ with fewer clusters."""
        fewer = np.flatnonzero(counts < k)
        if fewer.size == 0:
            warnings.warn(f"n_clusters: {k} clusters are never reached (at most λ̂ gives "
                          f"{int(counts.min())}: the graph has {self.graph_.n_components} "
                          "components); using the largest λ", UserWarning, stacklevel=3)
            return float(lams[-1])
        hi = float(lams[fewer[0]])
        lo = float(lams[fewer[0] - 1]) if fewer[0] > 0 else 0.0
        for _ in range(40):
            mid = math.sqrt(lo * hi) if lo > 0 else 0.5 * hi
            got = solve(prob.with_lam(mid), method=self.method, tol=self.tol).n_clusters
            if got == k:
                return mid
            lo, hi = (mid, hi) if got > k else (lo, mid)
            if hi - lo <= 1e-9 * hi:
                break
        got = solve(prob.with_lam(hi), method=self.method, tol=self.tol).n_clusters
        warnings.warn(f"n_clusters: {k} clusters are skipped by the path (several merges at "
                      f"λ ≈ {hi:.6g}); using {got} clusters", UserWarning, stacklevel=3)
        return hi

    def predict(self, X):
        """The cluster of the nearest cluster centre, for each row of ``X`` (an
        out-of-sample assignment: new rows are not added to the convex problem)."""
        check_is_fitted(self, "cluster_centers_")
        X = validate_estimator_data(self, X, dtype=np.float64, reset=False)
        d = ((X[:, None, :] - self.cluster_centers_[None, :, :]) ** 2).sum(axis=2)
        return np.argmin(d, axis=1)


def _most_persistent(counts, lams, n):
    """The middle λ of the cluster count that persists over the longest λ-range (from its
    first grid point to the next count's; the last count, reached at λ̂, for ever: on a
    disconnected graph it is the number of components), preferring counts other than ``n``
    (all separate) and 1 (all fused)."""
    starts = np.r_[0, np.flatnonzero(np.diff(counts) != 0) + 1]
    ends = np.r_[lams[starts[1:]], math.inf]  # the last count (from λ̂ on) persists for ever
    inner = [r for r in range(len(starts)) if counts[starts[r]] not in (n, 1)]
    r = max(inner or range(len(starts)), key=lambda r: ends[r] - lams[starts[r]])
    last = starts[r + 1] - 1 if r + 1 < len(starts) else len(counts) - 1
    return float(0.5 * (lams[starts[r]] + lams[last]))


class _SumOfNormsLinear(BaseEstimator):
    """One linear model per user (``groups``) under the sum-of-norms penalty."""

    _losses: dict = {}

    def __init__(self, lam=0.1, *, loss=None, c=1e-3, fit_intercept=True, graph="complete",
                 method="auto", tol=1e-6):
        self.lam = lam
        self.loss = loss
        self.c = c
        self.fit_intercept = fit_intercept
        self.graph = graph
        self.method = method
        self.tol = tol

    def _design(self, X):
        return np.c_[X, np.ones(X.shape[0])] if self.fit_intercept else X

    def _fit_targets(self, y):
        return np.asarray(y, dtype=np.float64)

    def fit(self, X, y, groups=None):
        """Fit one model per distinct label of ``groups`` (``None``: one user, i.e. the
        global model)."""
        X, y = validate_estimator_data(self, X, y, dtype=np.float64, y_numeric=not self._classifier)
        lam = _check_lam(self.lam)
        if not isinstance(self.fit_intercept, (bool, np.bool_)):
            raise TypeError(f"fit_intercept: expected True or False, got {self.fit_intercept!r}")
        groups = np.zeros(X.shape[0], int) if groups is None else groups
        self.groups_, _ = check_groups(groups, X.shape[0])
        name = self.loss or next(iter(self._losses))
        if name not in self._losses:
            raise ValueError(f"loss: expected one of {sorted(self._losses)}, got {name!r}")
        c = as_scalar(self.c, "c", low=0.0)
        loss = self._losses[name].from_groups(self._design(X), self._fit_targets(y), groups,
                                              c=c)
        graph = _user_graph(self.graph, loss.n_users, None, 1, None)
        sol = solve(SumOfNorms(loss, graph, lam), method=self.method, tol=self.tol)
        _warn_unconverged(sol, type(self).__name__)
        self.solution_, self.certificate_, self.lam_ = sol, sol.certificate, float(sol.lam)
        self.coef_ = sol.X
        self.labels_ = sol.labels()
        self.n_clusters_ = int(self.labels_.max()) + 1
        return self

    def _scores(self, X, groups):
        check_is_fitted(self, "coef_")
        X = validate_estimator_data(self, X, dtype=np.float64, reset=False)
        user = users_of(groups, self.groups_, X.shape[0])
        D = self._design(X)
        if self.loss == "squared_hinge":
            D = np.c_[D, -np.ones(D.shape[0])]
        return np.einsum("ij,ij->i", D, self.coef_[user])


class SumOfNormsRegressor(RegressorMixin, _SumOfNormsLinear):
    r"""Personalised linear regression: one model per user, fused by sum-of-norms.

    ``f_i`` is the mean least-squares (or Huber, δ = 1) loss of user ``i``'s samples plus
    ``(c/2)‖x_i‖²`` (the intercept, when fitted, is the last coefficient and is penalised
    too); λ (SON convention, your units) pulls the users' models together, and users whose
    models coincide form a cluster (``labels_``).

    Parameters
    ----------
    lam : float, default=0.1
    loss : {"least_squares", "huber"}, optional
        Default (None): least squares.
    c : float, default=1e-3
        Ridge (makes every ``f_i`` strongly convex: the certificate then bounds the distance
        to the unique solution).
    fit_intercept : bool, default=True
    graph : "complete" or Graph, default="complete"
        Graph on the users (in sorted group order).
    method, tol
        As for :func:`convexfl.solve`.

    Attributes
    ----------
    coef_ : ndarray (n_users, n_features [+ 1])
    groups_ : ndarray (n_users,)
        The group labels, sorted: user ``i`` is ``groups_[i]``.
    labels_, n_clusters_, lam_, certificate_, solution_, n_features_in_
    """

    _classifier = False
    _losses = {"least_squares": losses.LeastSquares, "huber": losses.Huber}

    def predict(self, X, groups=None):
        """Predictions of each row's user model (``groups=None``: the only user)."""
        return self._scores(X, groups)

    def score(self, X, y, groups=None, sample_weight=None):
        """R² of :meth:`predict`."""
        from sklearn.metrics import r2_score
        return r2_score(y, self.predict(X, groups), sample_weight=sample_weight)


class SumOfNormsClassifier(ClassifierMixin, _SumOfNormsLinear):
    r"""Personalised binary classification: one linear classifier per user, fused by
    sum-of-norms (logistic loss or the squared hinge of Armacki et al. Sec. V).

    Parameters and attributes as :class:`SumOfNormsRegressor`, with
    ``loss : {"logistic", "squared_hinge"}`` (default None: logistic) and ``classes_`` (two
    labels; the second is the positive class).
    """

    _classifier = True
    _losses = {"logistic": losses.Logistic, "squared_hinge": losses.SquaredHinge}

    def _fit_targets(self, y):
        check_classification_targets(y)
        self.classes_ = np.unique(y)
        k = len(self.classes_)
        if k != 2:
            raise ValueError(f"y: Only binary classification is supported; got {k} "
                             f"class{'' if k == 1 else 'es'} ({self.classes_[:5].tolist()})")
        return np.where(y == self.classes_[1], 1.0, -1.0)

    def _design(self, X):
        if self.loss == "squared_hinge":  # it has its own offset b
            return X
        return super()._design(X)

    def decision_function(self, X, groups=None):
        """``⟨x_user, a⟩`` (+ intercept) of each row; positive means ``classes_[1]``."""
        return self._scores(X, groups)

    def predict(self, X, groups=None):
        """The class of each row under its user's model."""
        check_is_fitted(self, "coef_")
        return self.classes_[(self.decision_function(X, groups) > 0).astype(int)]

    @available_if(lambda self: self.loss != "squared_hinge")
    def predict_proba(self, X, groups=None):
        """Logistic probabilities (not for the squared hinge, which has none)."""
        check_is_fitted(self, "coef_")
        p = 1.0 / (1.0 + np.exp(-self.decision_function(X, groups)))
        return np.c_[1 - p, p]

    def score(self, X, y, groups=None, sample_weight=None):
        """Accuracy of :meth:`predict`."""
        from sklearn.metrics import accuracy_score
        return accuracy_score(y, self.predict(X, groups), sample_weight=sample_weight)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        return tags

