"""The GLMM equivalence of PPFL (paper Thm 3): oracle comparisons with statsmodels' MixedLM
(linear case, REML variances plugged in) and with an independent penalised-likelihood fit
(logistic case, fixed variances)."""

import os
import warnings

import numpy as np
import pytest
from scipy.optimize import minimize

import convexfl as cfl
from convexfl.ppfl import fit_mixed_model, glmm_lambda

sm = pytest.importorskip("statsmodels.api")


def _mixedlm(y, X, Z, groups, method="lbfgs"):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = sm.MixedLM(y, X, groups=groups, exog_re=Z).fit(reml=True, method=method)
    assert res.converged
    return res


def _compare(y, X, Z, groups, res):
    out = fit_mixed_model(y, X, Z, groups, sigma2=res.scale, cov_re=np.asarray(res.cov_re))
    blups = np.array([np.asarray(res.random_effects[g]) for g in out.groups])
    fe = float(np.max(np.abs(out.fixed_effects - np.asarray(res.fe_params))))
    re = float(np.max(np.abs(out.random_effects - blups)))
    print(f"max |Δ fixed effects| = {fe:.2e}, max |Δ BLUPs| = {re:.2e}")
    assert out.converged
    assert out.random_effects.shape == (len(np.unique(groups)), Z.shape[1])
    assert fe <= 1e-6 and re <= 1e-6
    return out


@pytest.fixture(scope="module")
def grunfeld():
    d = sm.datasets.grunfeld.load_pandas().data
    X = sm.add_constant(d[["value", "capital"]]).to_numpy(dtype=float)
    return d["invest"].to_numpy(dtype=float), X, d["firm"].to_numpy()


@pytest.fixture(scope="module")
def dietox():
    import pandas as pd
    import statsmodels
    path = os.path.join(os.path.dirname(statsmodels.__file__), "regression", "tests",
                        "results", "dietox.csv")
    if not os.path.exists(path):
        pytest.skip("statsmodels' bundled dietox.csv is not present")
    d = pd.read_csv(path)
    X = sm.add_constant(d[["Time"]]).to_numpy(dtype=float)
    return d["Weight"].to_numpy(dtype=float), X, d["Pig"].to_numpy()


@pytest.mark.parametrize("random", ["intercept", "slope"])
def test_grunfeld_matches_mixedlm(grunfeld, random):
    y, X, g = grunfeld
    Z = X[:, :1] if random == "intercept" else X[:, :2]  # random intercept / + slope on value
    res = _mixedlm(y, X, Z, g)
    out = _compare(y, X, Z, g, res)
    # the PPFL objective is the GLMM objective scaled by σ²/M (the equivalence)
    assert out.objective * len(y) / res.scale == pytest.approx(out.glmm_objective, rel=1e-10)


@pytest.mark.parametrize("random", ["intercept", "slope"])
def test_dietox_matches_mixedlm(dietox, random):
    y, X, g = dietox
    Z = X[:, :1] if random == "intercept" else X
    _compare(y, X, Z, g, _mixedlm(y, X, Z, g))


def test_lambda_constant_is_exact(grunfeld):
    """λ = (σ²/σ_b²)/(2NM): the solution moves when λ is off by a factor 2."""
    y, X, g = grunfeld
    res = _mixedlm(y, X, X[:, :1], g)
    n, m = len(np.unique(g)), len(y)
    sigma_b2 = float(np.asarray(res.cov_re)[0, 0])
    out = fit_mixed_model(y, X, X[:, :1], g, sigma2=res.scale, cov_re=sigma_b2)
    assert out.lam == pytest.approx(res.scale / sigma_b2 / (2 * n * m), rel=1e-14)
    assert out.lam == glmm_lambda(res.scale, sigma_b2, n, m)
    wrong = fit_mixed_model(y, X, X[:, :1], g, sigma2=2 * res.scale, cov_re=sigma_b2)
    blups = np.array([np.asarray(res.random_effects[k]) for k in out.groups])
    assert np.max(np.abs(wrong.random_effects - blups)) > 1.0


def _logistic_mixed_data(seed=0, n_groups=12, m=30):
    rng = np.random.default_rng(seed)
    groups = np.repeat(np.arange(n_groups), m)
    x = rng.normal(size=n_groups * m)
    X = np.c_[np.ones_like(x), x, rng.normal(size=x.size)]
    Psi = np.array([[0.8, 0.3], [0.3, 0.5]])
    b = rng.multivariate_normal(np.zeros(2), Psi, size=n_groups)
    eta = X @ np.array([-0.3, 1.0, 0.5]) + np.sum(X[:, :2] * b[groups], axis=1)
    y = (rng.uniform(size=x.size) < 1 / (1 + np.exp(-eta))).astype(float)
    return y, X, X[:, :2], groups, Psi


def _independent_logistic_map(y, X, Z, groups, Psi):
    """argmin Σ log(1 + exp(−ℓη)) + ½ Σ b_iᵀΨ⁻¹b_i by scipy (written here, independently)."""
    ell = 2 * y - 1
    n, p, q = groups.max() + 1, X.shape[1], Z.shape[1]
    Pinv = np.linalg.inv(Psi)

    def fun(v):
        beta, b = v[:p], v[p:].reshape(n, q)
        eta = X @ beta + np.sum(Z * b[groups], axis=1)
        z = -ell * eta
        val = np.sum(np.logaddexp(0, z)) + 0.5 * np.sum(b * (b @ Pinv))
        r = -ell / (1 + np.exp(-z))
        gb = np.zeros((n, q))
        np.add.at(gb, groups, r[:, None] * Z)
        return val, np.concatenate([X.T @ r, (gb + b @ Pinv).ravel()])

    out = minimize(fun, np.zeros(p + n * q), jac=True, method="BFGS",
                   options={"gtol": 1e-11, "maxiter": 10000})
    return out.x[:p], out.x[p:].reshape(n, q)


@pytest.mark.parametrize("cov", ["matrix", "scalar"])
def test_logistic_mixed_model_matches_penalised_likelihood(cov):
    y, X, Z, g, Psi = _logistic_mixed_data()
    Psi = Psi if cov == "matrix" else 0.6 * np.eye(2)
    out = fit_mixed_model(y, X, Z, g, sigma2=1.0,
                          cov_re=Psi if cov == "matrix" else 0.6, family="binomial")
    beta, b = _independent_logistic_map(y, X, Z, g, Psi)
    print(f"logistic GLMM ({cov} Ψ): max |Δβ| = {np.max(np.abs(out.fixed_effects - beta)):.2e},"
          f" max |Δb| = {np.max(np.abs(out.random_effects - b)):.2e}")
    assert out.converged
    np.testing.assert_allclose(out.fixed_effects, beta, atol=1e-6)
    np.testing.assert_allclose(out.random_effects, b, atol=1e-6)
    assert out.objective * len(y) == pytest.approx(out.glmm_objective, rel=1e-10)
    # the penalty on the memberships is isotropic: b_i = Θᵀπ_i with Θ = Ψ₀^{1/2}
    np.testing.assert_allclose(out.canonical_models @ out.canonical_models,
                               Psi / out.sigma_b2, atol=1e-12)
    np.testing.assert_allclose(out.memberships.mean(axis=0), 0.0, atol=1e-10)


def test_reachable_from_the_package(grunfeld):
    y, X, g = grunfeld
    out = cfl.ppfl.fit_mixed_model(y, X, X[:, :1], g, 2000.0, 5000.0)
    assert out.fixed_effects.shape == (3,) and out.random_effects.shape == (len(np.unique(g)), 1)
    assert list(out.groups) == sorted(np.unique(g))


def test_bad_input_names_the_argument(grunfeld):
    y, X, g = grunfeld
    with pytest.raises(ValueError, match="X_random"):
        fit_mixed_model(y, X[:, :1], X[:, 1:2], g, 1.0, 1.0)  # slope without fixed slope
    with pytest.raises(ValueError, match="cov_re"):
        fit_mixed_model(y, X, X[:, :2], g, 1.0, np.array([[1.0, 2.0], [2.0, 1.0]]))
    with pytest.raises(ValueError, match="cov_re"):
        fit_mixed_model(y, X, X[:, :2], g, 1.0, np.eye(3))
    with pytest.raises(ValueError, match="cov_re"):
        fit_mixed_model(y, X, X[:, :1], g, 1.0, -1.0)
    with pytest.raises(ValueError, match="sigma2"):
        fit_mixed_model(y, X, X[:, :1], g, 0.0, 1.0)
    with pytest.raises(ValueError, match="X_random"):
        fit_mixed_model(y, X, X[:5, :1], g, 1.0, 1.0)
    with pytest.raises(ValueError, match="groups"):
        fit_mixed_model(y, X, X[:, :1], g[:5], 1.0, 1.0)
    with pytest.raises(ValueError, match="family"):
        fit_mixed_model(y, X, X[:, :1], g, 1.0, 1.0, family="gamma")
    with pytest.raises(ValueError, match="y"):
        fit_mixed_model(y, X, X[:, :1], g, 1.0, 1.0, family="binomial")
