"""The scikit-learn front door (issue 17, item 1): ConvexClustering and the sum-of-norms
personalised models follow the estimator contract and give the certified answers."""

from __future__ import annotations

import numpy as np
import pytest
import sklearn
from helpers import failed_sklearn_checks
from sklearn.base import clone
from sklearn.exceptions import NotFittedError
from sklearn.model_selection import GridSearchCV, GroupKFold, KFold

import convexfl as cfl
from convexfl.estimators import ConvexClustering, SumOfNormsClassifier, SumOfNormsRegressor

ESTIMATORS = [ConvexClustering(n_lambdas=8), SumOfNormsRegressor(), SumOfNormsClassifier(),
              SumOfNormsClassifier(loss="squared_hinge"), SumOfNormsRegressor(loss="huber")]


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=lambda e: repr(e))
def test_check_estimator_passes_every_check(estimator):
    assert not failed_sklearn_checks(estimator)


def test_convex_clustering_matches_solve_and_bounds():
    A, truth = cfl.datasets.planted_points(3, 8, 2, separation=20.0, random_state=0)
    est = ConvexClustering(lam=0.26, graph="complete", tol=1e-8).fit(A)
    prob = cfl.SumOfNorms(cfl.losses.Quadratic(A), cfl.graphs.complete(len(A)), 0.26)
    ref = cfl.solve(prob, method="cvxpy")
    assert cfl.clusters.same_partition(est.labels_, truth)
    np.testing.assert_allclose(est.centers_, ref.X, atol=1e-6)
    assert est.certificate_.kkt_residual <= 1e-8 and est.n_clusters_ == 3
    assert est.lam_ == 0.26 and est.path_ is None and est.n_features_in_ == 2
    np.testing.assert_array_equal(est.predict(A), est.labels_)
    np.testing.assert_array_equal(est.fit_predict(A), est.labels_)


def test_n_clusters_and_the_default_choose_lambda_on_the_path():
    A, truth = cfl.datasets.planted_points(3, 10, 2, separation=12.0, random_state=1)
    est = ConvexClustering(n_clusters=3, k=8).fit(A)
    assert est.n_clusters_ == 3 and cfl.clusters.same_partition(est.labels_, truth)
    assert est.path_ is not None and est.path_.lambdas[0] == 0.0
    default = ConvexClustering(k=8).fit(A)  # the most persistent partition
    assert cfl.clusters.same_partition(default.labels_, truth)
    # units: λ is in the data's units, the labels are not
    big = ConvexClustering(n_clusters=3, k=8).fit(1e6 * A + 3e7)
    np.testing.assert_array_equal(big.labels_, est.labels_)
    assert big.lam_ == pytest.approx(1e6 * est.lam_, rel=1e-6)


def test_bad_parameters_are_refused_by_name():
    A = np.random.default_rng(0).standard_normal((10, 2))
    with pytest.raises(ValueError, match="lam, n_clusters"):
        ConvexClustering(lam=0.1, n_clusters=2).fit(A)
    with pytest.raises(ValueError, match="^lam"):
        ConvexClustering(lam=-1.0).fit(A)
    with pytest.raises(ValueError, match="^graph"):
        ConvexClustering(graph="star").fit(A)
    with pytest.raises(TypeError, match="^verbose"):
        ConvexClustering(verbose="yes").fit(A)
    with pytest.raises(ValueError, match="^loss"):
        SumOfNormsRegressor(loss="hinge").fit(A, A[:, 0])
    with pytest.raises(NotFittedError):
        SumOfNormsRegressor().predict(A)
    reg = SumOfNormsRegressor().fit(A, A[:, 0], groups=np.arange(10) % 2)
    with pytest.raises(ValueError, match="^groups.*not seen"):
        reg.predict(A, groups=np.full(10, 7))


def _personalised_regression(seed=0, users=6, m=30):
    rng = np.random.default_rng(seed)
    truth = np.repeat([0, 1], users // 2)
    W = np.array([[2.0, -1.0], [-2.0, 1.0]])[truth]
    groups = np.repeat(np.arange(users), m)
    X = rng.standard_normal((users * m, 2))
    y = np.einsum("ij,ij->i", X, W[groups]) + 0.1 * rng.standard_normal(users * m)
    return X, y, groups, truth


def test_regressor_recovers_the_planted_groups_and_matches_the_problem():
    X, y, groups, truth = _personalised_regression()
    est = SumOfNormsRegressor(lam=0.2, fit_intercept=False, c=0.0, tol=1e-8).fit(X, y, groups)
    assert cfl.clusters.same_partition(est.labels_, truth)
    loss = cfl.losses.LeastSquares.from_groups(X, y, groups)
    prob = cfl.SumOfNorms(loss, cfl.graphs.complete(6), 0.2)
    np.testing.assert_allclose(est.coef_, cfl.solve(prob, method="cvxpy").X, atol=1e-6)
    assert est.score(X, y, groups) > 0.9  # λ still pulls the two clusters' models together
    assert est.score(X, y, groups) > SumOfNormsRegressor(lam=0.2).fit(X, y).score(X, y)


def test_clone_and_grid_search_over_lambda_with_routed_groups():
    X, y, groups, _ = _personalised_regression(seed=1)
    est = SumOfNormsRegressor(fit_intercept=False)
    twin = clone(est.set_params(lam=0.3))
    assert twin.get_params() == est.get_params() and twin is not est
    with sklearn.config_context(enable_metadata_routing=True):
        routed = (SumOfNormsRegressor(fit_intercept=False)
                  .set_fit_request(groups=True).set_score_request(groups=True))
        search = GridSearchCV(routed, {"lam": [0.01, 0.2, 50.0]},
                              cv=KFold(3, shuffle=True, random_state=0))
        search.fit(X, y, groups=groups)
    # within-user folds: every user is seen in training; λ = 50 fuses all users into one
    # model, which cannot fit two opposite groups
    assert search.best_params_["lam"] in (0.01, 0.2)
    assert search.cv_results_["mean_test_score"][2] < 0.5 < search.best_score_


def test_classifier_per_user_and_metadata_free_default():
    X, y, groups, truth = cfl.datasets.planted_classification(2, 3, 40, 2, flip=0.0,
                                                              random_state=2)
    est = SumOfNormsClassifier(lam=0.05, c=0.01).fit(X, y, groups)
    assert est.score(X, y, groups) > 0.9 and set(est.classes_) == set(np.unique(y))
    proba = est.predict_proba(X, groups)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    assert np.array_equal(est.predict(X, groups), est.classes_[proba.argmax(axis=1)])
    with pytest.raises(ValueError, match="Only binary"):
        SumOfNormsClassifier().fit(X, np.arange(len(y)) % 3, groups)


def test_an_uncertified_solve_warns():
    A, _ = cfl.datasets.planted_points(3, 8, 2, separation=20.0, random_state=0)
    with pytest.warns(sklearn.exceptions.ConvergenceWarning, match="not certified"):
        ConvexClustering(lam=0.26, method="admm", tol=1e-300).fit(A)


def test_group_kfold_is_honest_about_unseen_users():
    """Folds that hold out whole users cannot be predicted: the error says so."""
    X, y, groups, _ = _personalised_regression(seed=2)
    fold = next(GroupKFold(3).split(X, y, groups))
    est = SumOfNormsRegressor().fit(X[fold[0]], y[fold[0]], groups[fold[0]])
    with pytest.raises(ValueError, match="not seen in fit"):
        est.predict(X[fold[1]], groups[fold[1]])


def test_grid_search_over_lambda_for_convex_clustering():
    from sklearn.metrics import adjusted_rand_score

    A, truth = cfl.datasets.planted_points(3, 10, 2, separation=12.0, random_state=4)

    def ari(estimator, X, y):
        return adjusted_rand_score(y, estimator.predict(X))
    # on each training fold the planted partition is recovered exactly for λ in about
    # [0.25, 0.47] (recovery_interval); far below every point is its own cluster, far above
    # one cluster remains
    search = GridSearchCV(ConvexClustering(graph="complete"), {"lam": [1e-4, 0.35, 1e3]},
                          scoring=ari, cv=KFold(3, shuffle=True, random_state=0)).fit(A, truth)
    assert search.best_params_["lam"] == 0.35 and search.best_score_ > 0.9


def test_verbose_shows_the_paths_progress_and_is_silent_by_default(capsys):
    A, _ = cfl.datasets.planted_points(3, 10, 2, separation=12.0, random_state=1)
    ConvexClustering(k=8).fit(A)
    assert capsys.readouterr().err == ""
    loud = ConvexClustering(k=8, verbose=True).fit(A)
    err = capsys.readouterr().err
    assert f"{len(loud.path_.lambdas)}/{len(loud.path_.lambdas)}" in err
