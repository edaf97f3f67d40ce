"""The existing estimators follow scikit-learn's contract (issue 17, item 1): PPFL failed
37 of 48 checks and CGPFLClassifier could not even be cloned; `groups` is now an optional
keyword (None: one client) that metadata routing can carry."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import sklearn
from helpers import failed_sklearn_checks
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.utils.estimator_checks import check_estimator

import convexfl as cfl
from convexfl.cgpfl import CGPFLClassifier
from convexfl.ppfl import PPFL

# rounds only changes the run time of the checks. PPFL(family="binomial") is not listed:
# it is a regressor of probabilities for 0/1 labels, and the generic checks (for estimators
# that are not classifiers) pass three-valued y, which the family refuses by name (the
# last test asserts that this refusal is the only cause of its failures).
ESTIMATORS = [PPFL(rounds=30), PPFL(family="poisson", rounds=30), CGPFLClassifier(),
              CGPFLClassifier(n_clusters=1, rounds=10)]


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=repr)
def test_check_estimator(estimator):
    assert not failed_sklearn_checks(estimator)


def _federated_regression(seed=0):
    rng = np.random.default_rng(seed)
    groups = np.repeat(np.arange(8), 40)
    W = np.where(np.arange(8)[:, None] < 4, [[2.0, -1.0]], [[-2.0, 1.0]])
    X = rng.standard_normal((320, 2))
    y = np.einsum("ij,ij->i", X, W[groups]) + 0.1 * rng.standard_normal(320)
    return X, y, groups


def test_ppfl_clone_grid_search_and_groups():
    X, y, groups = _federated_regression()
    est = PPFL(n_components=2, rounds=60, random_state=0)
    assert clone(est).get_params() == est.get_params()
    with pytest.raises(NotFittedError):
        est.predict(X)
    with sklearn.config_context(enable_metadata_routing=True):
        routed = (PPFL(n_components=2, rounds=60, random_state=0)
                  .set_fit_request(groups=True).set_score_request(groups=True))
        search = GridSearchCV(routed, {"lam": [1e-4, 1e3]},
                              cv=KFold(3, shuffle=True, random_state=0)).fit(X, y, groups=groups)
    assert search.best_score_ > 0.8
    model = search.best_estimator_
    assert model.n_features_in_ == 2 and model.score(X, y, groups) > 0.8
    with pytest.raises(ValueError, match="^groups"):
        model.predict(X, groups=np.full(len(X), 99))


def test_cgpfl_clone_and_grid_search():
    X, y, groups, _ = cfl.datasets.planted_classification(2, 3, 40, 2, flip=0.0,
                                                          random_state=3)
    est = CGPFLClassifier(n_clusters=2, rounds=20, random_state=0)
    twin = clone(est)
    assert twin.get_params() == est.get_params() and twin is not est
    with sklearn.config_context(enable_metadata_routing=True):
        routed = clone(est).set_fit_request(groups=True).set_score_request(groups=True)
        search = GridSearchCV(routed, {"lam": [1.0, 15.0]},
                              cv=KFold(3, shuffle=True, random_state=0)).fit(X, y, groups=groups)
    assert search.best_score_ > 0.7
    fitted = search.best_estimator_
    assert fitted.decision_function(X, groups).shape == (len(X),)  # binary: one logit


def test_ppfl_warns_when_its_rounds_run_out_before_tol():
    X, y, groups = _federated_regression(seed=1)
    with pytest.warns(ConvergenceWarning, match="did not reach tol"):
        PPFL(n_components=2, rounds=3, tol=1e-12, random_state=0).fit(X, y, groups)


@pytest.mark.parametrize("solver, tol", [("alternating", 1e-2), ("rbcd", 1e-2)])
def test_ppfl_meeting_tol_in_its_last_round_does_not_warn(solver, tol):
    X, y, groups = _federated_regression(seed=1)
    kw = dict(n_components=2, solver=solver, tol=tol, random_state=0)
    t = PPFL(rounds=500, **kw).fit(X, y, groups).n_iter_
    assert t < 500
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        assert PPFL(rounds=t, **kw).fit(X, y, groups).n_iter_ == t
    with pytest.warns(ConvergenceWarning, match="did not reach tol"):
        PPFL(rounds=t - 1, **kw).fit(X, y, groups)


def test_binomial_ppfl_fails_only_the_checks_that_feed_it_non_binary_labels():
    """PPFL(family="binomial") is not a classifier (it predicts P(y = 1), scored by R²), so
    check_estimator runs the generic checks on it, and those fit with y in {0, 1, 2, 3}. The
    family refuses such labels by name; every check it fails fails on that refusal and no
    other (the same checks pass for the Gaussian and Poisson families above)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(PPFL(family="binomial", rounds=30), on_fail=None)
    failed = [r for r in results if r["status"] == "failed"]
    assert sum(r["status"] == "passed" for r in results) >= 26
    for r in failed:
        chain, e = [], r["exception"]
        while e is not None:
            chain.append(str(e))
            e = e.__cause__ or e.__context__
        assert any("y: binomial labels must be 0/1" in m for m in chain), (r["check_name"],
                                                                          chain)
