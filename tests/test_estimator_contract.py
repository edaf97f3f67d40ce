"""The existing estimators follow scikit-learn's contract (issue 17, item 1): PPFL failed
37 of 48 checks and CGPFLClassifier could not even be cloned; `groups` is now an optional
keyword (None: one client) that metadata routing can carry."""

from __future__ import annotations

import numpy as np
import pytest
import sklearn
from helpers import failed_sklearn_checks
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.model_selection import GridSearchCV, KFold

import convexfl as cfl
from convexfl.cgpfl import CGPFLClassifier
from convexfl.ppfl import PPFL

# rounds only changes the run time of the checks. PPFL(family="binomial") is not listed:
# it is a regressor of probabilities for 0/1 labels, and the generic checks (for estimators
# that are not classifiers) pass three-valued y, which the family refuses by name.
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
