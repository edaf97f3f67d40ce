import numpy as np
import pytest
from helpers import LOSS_NAMES, make_loss, reference
from hypothesis import given
from hypothesis import strategies as st
from scipy.optimize import minimize

import convexfl as cfl
from convexfl.solvers.reference import ReferenceModel


def scipy_argmin(f_and_grad, x0):
    """Independent oracle: BFGS on a smooth function to a tight gradient tolerance."""
    r = minimize(f_and_grad, x0, jac=True, method="BFGS", options={"gtol": 1e-10,
                                                                     "maxiter": 10_000})
    return r.x


def member_sum(loss, members):
    def fg(x):
        X = np.tile(x, (loss.n_users, 1))
        return loss.values(X)[members].sum(), loss.grad(X)[members].sum(axis=0)
    return fg


@pytest.mark.parametrize("name", LOSS_NAMES)
def test_lambda_zero_gives_the_local_solutions(name):
    loss = make_loss(name, n_users=4, seed=11)
    res = reference(cfl.SumOfNorms(loss, cfl.graphs.complete(4), 0.0), tol=1e-9)
    assert res.converged and res.kkt_residual < 1e-8
    for i in range(4):
        xi = scipy_argmin(member_sum(loss, [i]), np.zeros(loss.dim))
        np.testing.assert_allclose(res.X[i], xi, atol=1e-6)
    local = reference(cfl.local_models(loss), tol=1e-9)
    np.testing.assert_allclose(local.X, res.X, atol=1e-7)


@pytest.mark.parametrize("name", LOSS_NAMES)
def test_global_and_oracle_comparators_match_independent_solutions(name):
    loss = make_loss(name, n_users=6, seed=12)
    glob = reference(cfl.global_model(loss), tol=1e-9)
    y = scipy_argmin(member_sum(loss, np.arange(6)), np.zeros(loss.dim))
    np.testing.assert_allclose(glob.X, np.tile(y, (6, 1)), atol=1e-6)
    assert glob.converged
    truth = np.array([0, 1, 0, 1, 2, 2])
    orc = reference(cfl.oracle(loss, truth), tol=1e-9)
    for k in range(3):
        wk = scipy_argmin(member_sum(loss, np.flatnonzero(truth == k)), np.zeros(loss.dim))
        np.testing.assert_allclose(orc.X[truth == k], np.tile(wk, (2, 1)), atol=1e-6)


@pytest.mark.parametrize("name", LOSS_NAMES)
def test_lambda_above_closed_form_fusion_bound_gives_consensus(name):
    """docs/math.md §1.4: λ ≥ max_ij ‖g_i − g_j‖/N with g_i = ∇f_i(y*) fuses everything."""
    loss = make_loss(name, n_users=5, seed=13)
    n = loss.n_users
    y = reference(cfl.global_model(loss), tol=1e-10).X
    g = loss.grad(y)
    upper = max(np.linalg.norm(g[i] - g[j]) for i in range(n) for j in range(n)) / n
    res = reference(cfl.SumOfNorms(loss, cfl.graphs.complete(n), upper * 1.0001), tol=1e-9)
    assert res.n_clusters == 1 and res.converged
    np.testing.assert_allclose(res.X, y, atol=1e-6)
    below = reference(cfl.SumOfNorms(loss, cfl.graphs.complete(n), 0.0), tol=1e-9)
    assert below.n_clusters == n


def theorem3_interval_by_hand(A, truth):
    """Independent restatement of docs/math.md §1.3, Theorem 3, for the quadratic loss."""
    k = truth.max() + 1
    n = len(A)
    sizes = np.bincount(truth)
    D = np.linalg.norm(A[:, None] - A[None], axis=2)
    eps = [D[np.ix_(truth == a, truth == a)].max() for a in range(k)]
    lo = max(eps[a] / sizes[a] for a in range(k))
    hi = min(D[np.ix_(truth == a, truth == b)].min() - eps[a] - eps[b]
             for a in range(k) for b in range(k) if a != b) / (2 * (n - sizes.min()))
    return lo, hi


@given(seed=st.integers(0, 10_000), t=st.floats(0.05, 0.95))
def test_theorem3_interval_recovers_the_planted_partition(seed, t):
    A, truth = cfl.datasets.planted_points(3, 5, 2, separation=25.0, radius=1.0,
                                           random_state=seed)
    lo, hi = theorem3_interval_by_hand(A, truth)
    assert lo < hi
    bound = cfl.bounds.theorem3_interval(
        cfl.SumOfNorms(cfl.losses.Quadratic(A), cfl.graphs.complete(15), 0.0), truth)
    assert bound.kind == "exact"
    assert (bound.lo, bound.hi) == pytest.approx((lo, hi), rel=1e-12)
    lam = lo + t * (hi - lo)
    res = reference(cfl.SumOfNorms(cfl.losses.Quadratic(A), cfl.graphs.complete(15), lam))
    assert res.converged
    assert cfl.clusters.same_partition(res.labels(), truth)


def test_theorem3_at_the_printed_eq3_scaling_does_not_recover():
    """Pins the convention: reading the SON interval as eq.-(3) λ fuses everything."""
    A, truth = cfl.datasets.planted_points(3, 5, 2, separation=25.0, random_state=1)
    lo, hi = theorem3_interval_by_hand(A, truth)
    lam_son = cfl.from_paper_lambda(0.5 * (lo + hi), 15, "eq3")  # = 2N × the SON value
    res = reference(cfl.SumOfNorms(cfl.losses.Quadratic(A), cfl.graphs.complete(15), lam_son))
    assert res.n_clusters == 1


def test_squared_penalty_matches_its_linear_system():
    A = np.random.default_rng(0).standard_normal((6, 2))
    g = cfl.graphs.complete(6)
    gamma = 0.3
    res = reference(cfl.SquaredPenalty(cfl.losses.Quadratic(A), g, gamma), tol=1e-10)
    L = np.diag(g.degree) - g.adjacency.toarray()
    np.testing.assert_allclose(res.X, np.linalg.solve(np.eye(6) + 2 * gamma * L, A), atol=1e-7)
    assert res.converged and res.lam is None


def test_model_is_built_once_and_reused_along_lambda():
    loss = make_loss("logistic", n_users=4, seed=3)
    g = cfl.graphs.complete(4)
    units, std = loss.standard  # the reference solves the standard problem (convexfl.units)
    m1 = ReferenceModel.cached(std, g)
    reference(cfl.SumOfNorms(loss, g, 0.1))
    reference(cfl.SumOfNorms(loss, g, 0.2))
    assert ReferenceModel.cached(std, g) is m1
    assert m1.lam.value == pytest.approx(0.2 / units.grad)


def test_failed_or_inaccurate_status_is_a_clear_error():
    A = np.random.default_rng(0).standard_normal((6, 2))
    prob = cfl.SumOfNorms(cfl.losses.Quadratic(A), cfl.graphs.complete(6), 0.3)
    with pytest.raises(cfl.SolverError, match="'user_limit'.*max_iter=2 was reached"):
        reference(prob, max_iter=2)
    with pytest.raises(cfl.SolverError, match="'optimal_inaccurate'"):
        reference(prob, solver="SCS", max_iter=3)


def test_accepted_inaccurate_answer_is_judged_by_its_certificate():
    A = np.random.default_rng(0).standard_normal((6, 2))
    prob = cfl.SumOfNorms(cfl.losses.Quadratic(A), cfl.graphs.complete(6), 0.3)
    res = reference(prob, solver="SCS", max_iter=3, accept_inaccurate=True)
    assert res.status == "optimal_inaccurate"
    assert res.converged == (res.kkt_residual <= res.kkt_tol)
    ref = reference(prob, tol=1e-9)
    if res.converged:  # polished from SCS's rough answer to the reference's optimum
        assert abs(res.objective - ref.objective) <= 1e-8 * abs(ref.objective)
    with pytest.raises(TypeError, match="accept_inaccurate"):
        reference(prob, accept_inaccurate="yes")


def test_scs_fallback_is_labelled_and_honest():
    A, _truth = cfl.datasets.planted_points(2, 4, 2, separation=20.0, random_state=0)
    prob = cfl.SumOfNorms(cfl.losses.Quadratic(A), cfl.graphs.complete(8), 0.5)
    ref = reference(prob, tol=1e-9)
    scs = reference(prob, solver="SCS", tol=1e-8, max_iter=100_000)
    assert scs.method == "cvxpy/scs"
    assert abs(scs.objective - ref.objective) <= 1e-5 * abs(ref.objective)
    assert scs.converged == (scs.kkt_residual <= scs.kkt_tol)


def test_solve_argument_errors():
    prob = cfl.SumOfNorms(make_loss("quadratic"), cfl.graphs.complete(4), 1.0)
    with pytest.raises(ValueError, match="method: expected one of"):
        cfl.solve(prob, method="magic")
    with pytest.raises(ValueError, match="tol: must be > 0"):
        reference(prob, tol=0.0)
    with pytest.raises(ValueError, match="solver: expected 'CLARABEL' or 'SCS'"):
        reference(prob, solver="ECOS")
    with pytest.raises(TypeError, match="prob: the cvxpy reference solves"):
        reference("not a problem")
