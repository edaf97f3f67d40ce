"""Tests for convexfl.ckt: PerFed-CKT's linear-regression analysis (paper Sec. 4, App. B).

What is established here (see the module docstring of convexfl.ckt.linear for the derivations):
* (14) is the minimiser of (13); (12) is exact Gaussian conditioning (brute force, prior
  variance -> infinity);
* the closed-form conditional risk agrees with Monte Carlo, both given the data and averaged
  over fresh data drawn from the generative model;
* Theorem 4.2 AS PRINTED is not the risk minimiser (its weights do not sum to one); with the
  dimensionally consistent B_k (sigma^2 + A_k + beta*upsilon_k^2) and alpha_kk included it is
  exactly the posterior mean and attains the Bayes risk; the alpha_kk-excluded reading needs a
  different lambda and different weights.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convexfl import ckt

HYP = settings(deadline=None, derandomize=True, max_examples=12)

UPS5 = [0.3, 0.5, 1.0, 2.0, 0.8]


@pytest.fixture(scope="module")
def iso():
    return ckt.make_linear_setting(5, 3, 20, upsilon=UPS5, sigma=1.0, n_public=6,
                                   random_state=0, isotropic=True)


@pytest.fixture(scope="module")
def gen():
    return ckt.make_linear_setting(4, 3, 8, upsilon=[0.3, 0.6, 1.2, 0.4], sigma=0.7,
                                   n_public=2, random_state=1)


# ------------------------------------------------------------------------------------ setting


def test_isotropic_setting_exact(iso):
    eye = np.eye(iso.dim)
    assert np.allclose(iso.XtX, iso.beta * eye, atol=1e-12 * iso.beta, rtol=0)
    assert np.allclose(iso.PtP, iso.nu * eye, atol=1e-12 * iso.nu, rtol=0)
    assert (iso.beta, iso.nu) == (20.0, 6.0)
    assert iso.X.shape == (5, 20, 3) and iso.y.shape == (5, 20) and iso.w.shape == (5, 3)
    with pytest.raises(ValueError):
        iso.X[0, 0, 0] = 1.0  # read-only
    # the true models are theta + upsilon_k * N(0, I)
    s = ckt.make_linear_setting(2, 1, 1, upsilon=[1e-9, 1e-9], sigma=1e-9, n_public=1,
                                random_state=0)
    assert np.allclose(s.w, s.theta, atol=1e-7) and np.allclose(ckt.local_estimates(s), s.w)


def test_setting_reproducible():
    a = ckt.make_linear_setting(3, 2, 4, upsilon=0.5, sigma=1.0, n_public=2, random_state=7)
    b = ckt.make_linear_setting(3, 2, 4, upsilon=0.5, sigma=1.0, n_public=2, random_state=7)
    assert np.array_equal(a.y, b.y) and np.array_equal(a.P, b.P)


# ---------------------------------------------------------------------------------- estimator


def test_ckt_lambda_zero_is_local_estimate(gen):
    w_hat = ckt.local_estimates(gen)
    alpha = np.array([0.1, 0.2, 0.3, 0.4])
    for k in range(gen.n_clients):
        out = ckt.ckt_estimator(gen.XtX[k], w_hat, k, 0.0, alpha, gen.PtP)
        assert np.allclose(out, w_hat[k], rtol=1e-12, atol=1e-12)


def test_ckt_solves_objective_13(gen):
    # (14) must minimise ||X_k w - y_k||^2 + lam ||P sum_i alpha_i w_hat_i - P w||^2:
    # an independent stacked least-squares solve.
    w_hat = ckt.local_estimates(gen)
    alpha, lam, k = np.array([0.5, 0.1, 0.3, 0.1]), 2.5, 2
    A = np.vstack([gen.X[k], np.sqrt(lam) * gen.P])
    b = np.concatenate([gen.y[k], np.sqrt(lam) * gen.P @ (alpha @ w_hat)])
    ref = np.linalg.lstsq(A, b, rcond=None)[0]
    out = ckt.ckt_estimator(gen.XtX[k], w_hat, k, lam, alpha, gen.PtP)
    assert np.allclose(out, ref, rtol=1e-10, atol=1e-10)
    # lam -> infinity with P^T P nonsingular: the distillation target itself
    s = ckt.make_linear_setting(3, 2, 5, upsilon=1.0, sigma=1.0, n_public=4, random_state=2)
    wh = ckt.local_estimates(s)
    a = np.array([0.2, 0.3, 0.5])
    assert np.allclose(ckt.ckt_estimator(s.XtX[0], wh, 0, 1e12, a, s.PtP), a @ wh, atol=1e-9)


# ---------------------------------------------------------------------------------- posterior


def _brute_force_posterior(setting, k, tau2):
    """E[w_k | y_1..y_K] and Cov with a proper prior theta ~ N(0, tau2 I), from the joint
    Gaussian of u = (theta, zeta_1..zeta_K, z_1..z_K), without any of the paper's formulas."""
    K, n, d = setting.X.shape
    dim_u = d + K * d + K * n
    var = np.concatenate([np.full(d, tau2), np.repeat(setting.upsilon ** 2, d),
                          np.full(K * n, setting.sigma ** 2)])
    B = np.zeros((K * n, dim_u))  # y = B u
    for i in range(K):
        rows = slice(i * n, (i + 1) * n)
        B[rows, :d] = setting.X[i]
        B[rows, d + i * d: d + (i + 1) * d] = setting.X[i]
        B[rows, d + K * d + i * n: d + K * d + (i + 1) * n] = np.eye(n)
    c = np.zeros((d, dim_u))  # w_k = c u
    c[:, :d] = np.eye(d)
    c[:, d + k * d: d + (k + 1) * d] = np.eye(d)
    Cyy = (B * var) @ B.T
    Cwy = (c * var) @ B.T
    mean = Cwy @ np.linalg.solve(Cyy, setting.y.reshape(-1))
    cov = (c * var) @ c.T - Cwy @ np.linalg.solve(Cyy, Cwy.T)
    return mean, cov


@pytest.mark.parametrize("k", [0, 3])
def test_posterior_mean_equals_brute_force_conditioning(gen, k):
    parts = ckt.posterior_mean(gen.XtX, ckt.local_estimates(gen), k, gen.upsilon, gen.sigma,
                               return_parts=True)
    t1, t2 = 1e4, 1e5
    m1, c1 = _brute_force_posterior(gen, k, t1)
    m2, c2 = _brute_force_posterior(gen, k, t2)
    # the proper-prior answer approaches the flat-prior one like 1/tau^2 ...
    e1, e2 = np.linalg.norm(m1 - parts.mean), np.linalg.norm(m2 - parts.mean)
    assert e2 < e1 / 5
    # ... and Richardson extrapolation to tau^2 = infinity matches to high precision
    m_inf = (t2 * m2 - t1 * m1) / (t2 - t1)
    c_inf = (t2 * c2 - t1 * c1) / (t2 - t1)
    scale = np.linalg.norm(parts.mean)
    assert np.linalg.norm(m_inf - parts.mean) <= 1e-7 * scale
    assert np.allclose(c_inf, parts.cov, rtol=1e-6, atol=1e-8)


def test_posterior_isotropic_form_and_printed_45(iso):
    # Isotropic posterior mean = c_k w_hat_k + (1-c_k) theta_bar, c_k = (A+bu)/(s2+A+bu).
    # The printed (45), with sigma^2 + A*beta*upsilon_k^2, is not it; with the
    # dimensionally consistent sigma^2 + A + beta*upsilon_k^2 (sum over ALL i) it is.
    w_hat = ckt.local_estimates(iso)
    s2, b = iso.sigma ** 2, iso.beta
    den = s2 + b * iso.upsilon ** 2
    for k in range(iso.n_clients):
        p = ckt.posterior_mean(iso.XtX, w_hat, k, iso.upsilon, iso.sigma, return_parts=True)
        others = np.arange(iso.n_clients) != k
        A = 1.0 / np.sum(1.0 / den[others])
        bu = b * iso.upsilon[k] ** 2
        theta_bar = A * (w_hat[others] / den[others, None]).sum(axis=0)
        c = (A + bu) / (s2 + A + bu)
        assert np.allclose(p.theta_bar_minus_k, theta_bar, rtol=1e-12)
        assert np.allclose(p.mean, c * w_hat[k] + (1 - c) * theta_bar, rtol=1e-12, atol=1e-12)
        sum_all = (w_hat / den[:, None]).sum(axis=0)
        printed = w_hat[k] / (1 + s2 / bu) + A * s2 / (s2 + A * bu) * sum_all
        fixed = w_hat[k] / (1 + s2 / bu) + A * s2 / (s2 + A + bu) * sum_all
        assert np.allclose(fixed, p.mean, rtol=1e-12, atol=1e-12)
        assert np.linalg.norm(printed - p.mean) > 1e-3 * np.linalg.norm(p.mean)
        # the printed variance of varsigma_k is right
        assert np.allclose(p.cov, np.eye(iso.dim) / (b / (A + bu) + b / s2), rtol=1e-12)


# ---------------------------------------------------------------------------- risk: exact vs MC


@pytest.mark.parametrize("condition_on", ["paper", "all"])
@pytest.mark.parametrize("metric", ["prediction", "parameter"])
@pytest.mark.parametrize("which", ["gen", "iso"])
def test_exact_risk_matches_monte_carlo(condition_on, metric, which, gen, iso, request):
    s = gen if which == "gen" else iso
    K = s.n_clients
    rng = np.random.default_rng(5)
    alpha = rng.dirichlet(np.ones(K)) * 0.8  # weights need not sum to one for the formula
    lam, k = 1.7, 1
    exact = ckt.conditional_risk(k, lam, alpha, s, condition_on=condition_on, metric=metric)
    mc = ckt.monte_carlo_risk(k, lam, alpha, s, n_draws=40_000, random_state=11,
                              condition_on=condition_on, metric=metric)
    assert abs(mc.estimate - exact) <= 4 * mc.std_error
    assert mc.ci_low < mc.estimate < mc.ci_high
    terms = ckt.conditional_risk(k, lam, alpha, s, condition_on=condition_on, metric=metric,
                                 return_terms=True)
    assert terms.total == pytest.approx(exact)
    assert terms.aggregation >= 0 and (condition_on == "paper" or terms.aggregation == 0)


def test_risk_matches_generative_simulation(gen):
    # Independent of the posterior algebra: draw fresh data from the generative model (theta
    # fixed), compute the realised test loss of w_tilde, and compare its average with the
    # average of the conditional risk over the same data sets (tower property; exact for a
    # shift-equivariant estimator, i.e. sum(alpha) = 1, under the flat prior).
    rng = np.random.default_rng(3)
    K, n, d = gen.X.shape
    k, lam = 0, 3.0
    alpha = np.array([0.2, 0.5, 0.1, 0.2])
    G, Q = gen.XtX, gen.PtP
    diffs = []
    for _ in range(1500):
        w = gen.theta + gen.upsilon[:, None] * rng.standard_normal((K, d))
        y = np.einsum("knd,kd->kn", gen.X, w) + gen.sigma * rng.standard_normal((K, n))
        w_hat = np.stack([np.linalg.lstsq(gen.X[i], y[i], rcond=None)[0] for i in range(K)])
        wt = ckt.ckt_estimator(G[k], w_hat, k, lam, alpha, Q)
        z = gen.sigma * rng.standard_normal(n)
        loss = np.sum((gen.X[k] @ wt - (gen.X[k] @ w[k] + z)) ** 2)
        diffs.append(loss - ckt.conditional_risk(k, lam, alpha, gen, w_hat=w_hat))
    diffs = np.asarray(diffs)
    assert abs(diffs.mean()) <= 4 * diffs.std(ddof=1) / np.sqrt(diffs.size)


# ------------------------------------------------------------------------------ Theorem 4.2


@st.composite
def isotropic_instances(draw):
    K = draw(st.integers(2, 6))
    d = draw(st.integers(1, 3))
    ups = draw(st.lists(st.floats(0.1, 3.0), min_size=K, max_size=K))
    sigma = draw(st.floats(0.2, 3.0))
    beta = draw(st.floats(0.5, 50.0))
    nu = draw(st.floats(0.5, 50.0))
    k = draw(st.integers(0, K - 1))
    seed = draw(st.integers(0, 2 ** 16))
    s = ckt.make_linear_setting(K, d, d + 2, upsilon=ups, sigma=sigma, n_public=d,
                                random_state=seed, isotropic=True, beta=beta, nu=nu)
    return s, k


@HYP
@given(isotropic_instances())
def test_corrected_included_closed_form_is_posterior_mean_and_minimiser(inst):
    # Reading "alpha_kk included" + B_k with sigma^2 + A_k + beta*upsilon_k^2: exact.
    s, k = inst
    cmp = ckt.compare_theorem_4_2(s, k, n_starts=3)
    assert cmp.isotropic
    cf = cmp.closed_form("corrected", "included")
    assert cf.alpha_sum == pytest.approx(1.0, abs=1e-12)
    assert cf.lam == pytest.approx(s.sigma ** 2 / (s.upsilon[k] ** 2 * s.nu), rel=1e-12)
    assert cf.dist_to_posterior_mean <= 1e-9 * (1 + np.linalg.norm(cmp.posterior_mean))
    assert cf.risk == pytest.approx(cmp.risk_posterior_mean, rel=1e-10)
    # the numerical minimiser finds the same (Bayes) risk, never less
    assert cmp.risk_numerical >= cmp.risk_posterior_mean * (1 - 1e-12)
    assert cmp.rel_gap_numerical_to_bayes <= 1e-9
    # printed alphas have the right SHAPE (proportional to 1/(sigma^2+beta*upsilon_i^2), i in
    # [K]); renormalising them to sum 1, as the paper's (1) demands, gives the corrected form.
    printed = cmp.closed_form("printed", "included")
    assert np.allclose(printed.alpha / printed.alpha_sum, cf.alpha, rtol=1e-12)
    assert printed.lam == cf.lam


@HYP
@given(isotropic_instances())
def test_printed_closed_form_excess_risk_is_exactly_the_normalisation_error(inst):
    # As printed, sum_i alpha_ki = (s2 + A + bu)/(s2 + A*bu) =: f != 1 in general; then
    # w_tilde - mu = (f-1)(1-a)(alpha^c_kk w_hat_k + s^c theta_bar) with a = beta/(beta+lam nu),
    # so the excess conditional risk is beta (f-1)^2 (1-a)^2 ||...||^2 > 0 whenever f != 1
    # (and it grows with ||theta||: the printed estimator is not shift-equivariant).
    s, k = inst
    cmp = ckt.compare_theorem_4_2(s, k, n_starts=1)
    pr = cmp.closed_form("printed", "included")
    co = cmp.closed_form("corrected", "included")
    th = ckt.theorem_4_2(k, s.upsilon, s.sigma, s.beta, s.nu)
    bu = s.beta * s.upsilon[k] ** 2
    f = (s.sigma ** 2 + th.A + bu) / (s.sigma ** 2 + th.A * bu)
    assert pr.alpha_sum == pytest.approx(f, rel=1e-12)
    parts = ckt.posterior_mean(s.XtX, ckt.local_estimates(s), k, s.upsilon, s.sigma,
                               return_parts=True)
    a = s.beta / (s.beta + pr.lam * s.nu)
    target = co.alpha[k] * ckt.local_estimates(s)[k] + (1 - co.alpha[k]) * parts.theta_bar_minus_k
    predicted_excess = s.beta * (f - 1) ** 2 * (1 - a) ** 2 * float(target @ target)
    assert pr.excess_over_bayes == pytest.approx(predicted_excess, rel=1e-6, abs=1e-9)
    if abs(f - 1) > 1e-3:
        assert pr.risk > cmp.risk_numerical


@HYP
@given(isotropic_instances())
def test_excluded_reading_unique_minimiser(inst):
    # With alpha_kk = 0 the minimiser is unique: lam = beta s2/(nu (A + bu)),
    # alpha_ki = A/(s2 + beta upsilon_i^2); the printed lam and alphas are both different.
    s, k = inst
    num = ckt.minimise_risk(k, s, alpha_kk="zero", n_starts=3)
    cor = ckt.theorem_4_2(k, s.upsilon, s.sigma, s.beta, s.nu, alpha_kk="excluded",
                          form="corrected")
    bayes = ckt.bayes_risk(k, s)
    assert num.risk == pytest.approx(bayes, rel=1e-9)
    assert ckt.conditional_risk(k, cor.lam, cor.alpha, s) == pytest.approx(bayes, rel=1e-10)
    assert num.lam == pytest.approx(cor.lam, rel=1e-3)
    assert np.allclose(num.alpha, cor.alpha, atol=1e-4)
    printed = ckt.theorem_4_2(k, s.upsilon, s.sigma, s.beta, s.nu, alpha_kk="excluded")
    assert printed.lam > cor.lam * (1 + 1e-9)  # sigma^2/(upsilon_k^2 nu) drops A_k > 0
    bu = s.beta * s.upsilon[k] ** 2
    # sum_{i != k} B_k/(s2 + beta upsilon_i^2) = B_k/A_k = (s2 + bu)/(s2 + A bu): 1 only if A = 1
    assert printed.alpha_sum == pytest.approx((s.sigma ** 2 + bu) / (s.sigma ** 2 + cor.A * bu),
                                              rel=1e-12)
    assert ckt.conditional_risk(k, printed.lam, printed.alpha, s) > bayes * (1 + 1e-9)


def test_compare_report_numbers(iso):
    # Pinned instance (K=5, upsilon=UPS5, sigma=1, beta=20, nu=6, k=0), prediction metric:
    # the printed form is 15-25 % worse than the minimum; excluded reading is far worse.
    cmp = ckt.compare_theorem_4_2(iso, 0)
    assert cmp.isotropic and cmp.numerical.success
    assert cmp.printed.form == "printed" and cmp.printed.alpha_kk == "included"
    assert cmp.printed.alpha_sum == pytest.approx(0.875361, abs=1e-6)
    assert 0.05 < cmp.printed.rel_gap_to_numerical < 1.0
    assert cmp.closed_form("printed", "excluded").rel_gap_to_numerical > 1.0
    assert abs(cmp.closed_form("corrected", "excluded").rel_gap_to_numerical) < 1e-10
    assert cmp.numerical_dist_to_posterior_mean < 1e-5
    assert "printed" in cmp.summary()


def test_outside_assumptions_reported(gen):
    cmp = ckt.compare_theorem_4_2(gen, 1)
    assert not cmp.isotropic and cmp.isotropy_deviation > 0.1
    tol = 1e-9 * cmp.risk_posterior_mean
    assert cmp.risk_numerical >= cmp.risk_posterior_mean - tol
    for cf in cmp.closed_forms:
        assert cf.risk >= cmp.risk_numerical - tol
    simplex = ckt.minimise_risk(1, gen, alpha_constraint="simplex")
    assert simplex.risk >= cmp.risk_numerical - tol  # smaller feasible set
    assert np.all(simplex.alpha >= 0) and simplex.alpha.sum() == pytest.approx(1.0)


# ------------------------------------------------------------------------------- bad inputs


def _bad_calls(s):
    w_hat = ckt.local_estimates(s)
    K = w_hat.shape[0]
    a = np.full(K, 1.0 / K)
    nan_w = w_hat.copy()
    nan_w[0, 0] = np.nan
    inf_q = s.PtP.copy()
    inf_q[0, 0] = np.inf
    return [
        ("w_hat", lambda: ckt.ckt_estimator(s.XtX[0], nan_w, 0, 1.0, a, s.PtP)),
        ("PtP", lambda: ckt.ckt_estimator(s.XtX[0], w_hat, 0, 1.0, a, inf_q)),
        ("XtX_k", lambda: ckt.ckt_estimator(-s.XtX[0], w_hat, 0, 1.0, a, s.PtP)),
        ("lam_k", lambda: ckt.ckt_estimator(s.XtX[0], w_hat, 0, -1.0, a, s.PtP)),
        ("alpha_k", lambda: ckt.ckt_estimator(s.XtX[0], w_hat, 0, 1.0, a[:-1], s.PtP)),
        ("k", lambda: ckt.ckt_estimator(s.XtX[0], w_hat, K, 1.0, a, s.PtP)),
        ("sigma", lambda: ckt.posterior_mean(s.XtX, w_hat, 0, s.upsilon, 0.0)),
        ("upsilon", lambda: ckt.posterior_mean(s.XtX, w_hat, 0, -s.upsilon, 1.0)),
        ("XtX", lambda: ckt.posterior_mean(s.XtX[0], w_hat, 0, s.upsilon, 1.0)),
        ("beta", lambda: ckt.theorem_4_2(0, s.upsilon, 1.0, 0.0, 1.0)),
        ("nu", lambda: ckt.theorem_4_2(0, s.upsilon, 1.0, 1.0, float("nan"))),
        ("alpha_kk", lambda: ckt.theorem_4_2(0, s.upsilon, 1.0, 1.0, 1.0, alpha_kk="both")),
        ("form", lambda: ckt.theorem_4_2(0, s.upsilon, 1.0, 1.0, 1.0, form="fixed")),
        ("lam_k", lambda: ckt.conditional_risk(0, float("inf"), a, s)),
        ("condition_on", lambda: ckt.conditional_risk(0, 1.0, a, s, condition_on="x")),
        ("metric", lambda: ckt.conditional_risk(0, 1.0, a, s, metric="x")),
        ("w_hat", lambda: ckt.conditional_risk(0, 1.0, a, s, w_hat=w_hat[:, :1])),
        ("n_draws", lambda: ckt.monte_carlo_risk(0, 1.0, a, s, n_draws=1)),
        ("n_starts", lambda: ckt.minimise_risk(0, s, n_starts=0)),
        ("alpha_constraint", lambda: ckt.minimise_risk(0, s, alpha_constraint="box")),
        ("n_samples", lambda: ckt.make_linear_setting(3, 4, 2, upsilon=1.0, sigma=1.0,
                                                      n_public=4)),
        ("n_public", lambda: ckt.make_linear_setting(3, 2, 4, upsilon=1.0, sigma=1.0,
                                                     n_public=1, isotropic=True)),
        ("beta", lambda: ckt.make_linear_setting(3, 2, 4, upsilon=1.0, sigma=1.0, n_public=2,
                                                 beta=2.0)),
        ("upsilon", lambda: ckt.make_linear_setting(3, 2, 4, upsilon=[1.0, 2.0], sigma=1.0,
                                                    n_public=2)),
        ("sigma", lambda: ckt.make_linear_setting(3, 2, 4, upsilon=1.0, sigma=float("nan"),
                                                  n_public=2)),
        ("n_clients", lambda: ckt.make_linear_setting(1, 2, 4, upsilon=1.0, sigma=1.0,
                                                      n_public=2)),
    ]


def test_bad_inputs_name_the_argument(gen):
    for name, call in _bad_calls(gen):
        with pytest.raises(ValueError, match=rf"^{name}\b"):
            call()
