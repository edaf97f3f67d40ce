"""Data we did not write: the data sets bundled with scikit-learn and statsmodels, through
the front doors, certified (each found a fault when first run, 2026-11-28)."""

import warnings

import numpy as np
import pytest

import convexfl as cfl
from convexfl.estimators import ConvexClustering, SumOfNormsRegressor


def test_convex_clustering_of_wine_with_its_defaults_is_certified_at_every_lambda():
    """13 features on scales from 0.1 to 1700: the default path's polishes run the isotropic
    CG (d > 5); every λ of the path certified, and the fit's own solution too."""
    from sklearn.datasets import load_wine

    X = load_wine().data
    est = ConvexClustering().fit(X)
    assert np.all(est.path_.converged) and np.all(est.path_.kkt_residual <= est.tol)
    assert est.solution_.converged and est.certificate_.kkt_residual <= est.tol
    assert est.labels_.shape == (len(X),) and 1 < est.n_clusters_ < len(X)


@pytest.mark.parametrize("lam, n_clusters", [(3.0, 300), (10.0, 25)])
def test_ssnal_on_digits_takes_the_isotropic_newton_solver_and_certifies(lam, n_clusters):
    """64 pixels per image: ``"sparsified"`` kept one component of 64 × 64 blocks and raised
    MemoryError on the full set; ``"auto"`` now takes the isotropic LU above d = 5."""
    from sklearn.datasets import load_digits

    from convexfl.solvers.ssnal import newton_solver_for

    X = load_digits().data[:300].astype(float)
    graph = cfl.graphs.knn(X, 10, warn_disconnected=False)
    prob = cfl.SumOfNorms(cfl.losses.Quadratic(X), graph, lam)
    assert newton_solver_for(prob.n_users, prob.graph.n_edges, prob.dim) == "lu"
    sol = cfl.solve(prob, method="ssnal")
    assert sol.converged and sol.kkt_residual <= 1e-6 and sol.n_clusters == n_clusters


def test_a_ridged_regression_on_ill_scaled_data_is_certified_unique():
    """statsmodels' scotland (a council-tax column ~10³): with a ridge every user is strictly
    convex, so no NonUniqueWarning (it used to advise "a ridge c > 0" with c = 1e-3)."""
    sm = pytest.importorskip("statsmodels.api")

    data = sm.datasets.scotland.load_pandas().data
    X = data.drop(columns=["YES"]).to_numpy(float)
    y = data["YES"].to_numpy(float)
    groups = np.arange(len(y)) % 4
    with warnings.catch_warnings():
        warnings.simplefilter("error", cfl.NonUniqueWarning)
        est = SumOfNormsRegressor(1.0, c=1e-3).fit(X, y, groups=groups)
    assert est.solution_.converged
    with pytest.warns(cfl.NonUniqueWarning, match="Remark 1"):
        SumOfNormsRegressor(1.0, c=0.0).fit(X, y, groups=groups)  # 8 samples, 9 coefficients
