import numpy as np
import pytest
from helpers import LOSS_NAMES, make_loss
from hypothesis import given
from hypothesis import strategies as st
from scipy.optimize import approx_fprime

import convexfl as cfl

seeds = st.integers(0, 10_000)


@pytest.mark.parametrize("name", LOSS_NAMES)
@given(seed=seeds)
def test_gradient_matches_finite_differences(name, seed):
    loss = make_loss(name, seed=seed)
    X = np.random.default_rng(seed + 1).standard_normal((loss.n_users, loss.dim))
    G = loss.grad(X)
    for i in range(loss.n_users):
        def f(x, i=i):
            Y = X.copy()
            Y[i] = x
            return loss.values(Y)[i]
        fd = approx_fprime(X[i], f, 1e-7)
        np.testing.assert_allclose(G[i], fd, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", LOSS_NAMES)
@given(seed=seeds)
def test_hessian_matches_gradient_differences(name, seed):
    loss = make_loss(name, seed=seed)
    x = np.random.default_rng(seed + 2).standard_normal(loss.dim)
    H = loss.hessian(1, x)
    np.testing.assert_allclose(H, H.T)
    assert np.linalg.eigvalsh(H).min() >= -1e-12
    if name == "squared_hinge" or name == "huber":
        return  # piecewise: finite differences may straddle a kink of φ''
    X = np.tile(x, (loss.n_users, 1))
    eps = 1e-6
    for k in range(loss.dim):
        Xp, Xm = X.copy(), X.copy()
        Xp[1, k] += eps
        Xm[1, k] -= eps
        col = (loss.grad(Xp)[1] - loss.grad(Xm)[1]) / (2 * eps)
        np.testing.assert_allclose(H[:, k], col, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", LOSS_NAMES)
@given(seed=seeds, rho=st.floats(0.01, 100.0))
def test_prox_solves_its_optimality_condition(name, seed, rho):
    loss = make_loss(name, seed=seed)
    V = 2 * np.random.default_rng(seed + 3).standard_normal((loss.n_users, loss.dim))
    P = loss.prox(V, rho)
    np.testing.assert_allclose(loss.grad(P) + rho * (P - V), 0.0, atol=1e-9)


@pytest.mark.parametrize("name", LOSS_NAMES)
@given(seed=seeds)
def test_lipschitz_and_strong_convexity_constants_hold(name, seed):
    loss = make_loss(name, seed=seed)
    rng = np.random.default_rng(seed + 4)
    X, Y = rng.standard_normal((2, loss.n_users, loss.dim))
    gx, gy = loss.grad(X), loss.grad(Y)
    dist = np.linalg.norm(X - Y, axis=1)
    assert np.all(np.linalg.norm(gx - gy, axis=1) <= loss.lipschitz * dist * (1 + 1e-9))
    mono = np.sum((gx - gy) * (X - Y), axis=1)
    assert np.all(mono >= loss.strong_convexity * dist**2 * (1 - 1e-9) - 1e-12)


def test_constants_of_known_losses():
    A = np.arange(6.0).reshape(3, 2)
    q = cfl.losses.Quadratic(A, weights=[1.0, 2.0, 3.0])
    np.testing.assert_array_equal(q.lipschitz, [1, 2, 3])
    np.testing.assert_array_equal(q.strong_convexity, [1, 2, 3])
    X = np.eye(2)[[0, 1, 0]] * 3.0
    ls = cfl.losses.LeastSquares.from_groups(np.vstack([X, X]), np.zeros(6), [0] * 3 + [1] * 3)
    # Gram/m = diag(18, 9)/3 = diag(6, 3)
    np.testing.assert_allclose(ls.lipschitz, [6, 6])
    np.testing.assert_allclose(ls.strong_convexity, [3, 3])
    assert np.all(np.isinf(make_loss("poisson").lipschitz))
    sh = make_loss("squared_hinge", c=0.5)
    np.testing.assert_array_equal(sh.strong_convexity, 0.0)  # offset b is not penalised
    np.testing.assert_array_equal(make_loss("logistic", c=0.5).strong_convexity, 0.5)


@pytest.mark.parametrize("name", LOSS_NAMES)
def test_cvxpy_expression_equals_value(name):
    import cvxpy as cp
    loss = make_loss(name, seed=3)
    X = np.random.default_rng(5).standard_normal((loss.n_users, loss.dim))
    var = cp.Variable(X.shape)
    var.value = X
    assert loss.cvxpy_value(var).value == pytest.approx(loss.value(X), rel=1e-10)


@pytest.mark.parametrize("name", LOSS_NAMES)
def test_aggregate_sums_the_members(name):
    loss = make_loss(name, n_users=5, seed=7)
    labels = np.array([1, 0, 1, 2, 0])
    agg = loss.aggregate(labels)  # clusters numbered by first appearance: 1→0, 0→1, 2→2
    W = np.random.default_rng(1).standard_normal((3, loss.dim))
    first = np.array([0, 1, 0, 2, 1])
    X = W[first]
    per_cluster = np.bincount(first, weights=loss.values(X))
    np.testing.assert_allclose(agg.values(W), per_cluster, rtol=1e-12)
    np.testing.assert_allclose(agg.grad(W), np.array(
        [loss.grad(X)[first == k].sum(axis=0) for k in range(3)]), rtol=1e-12, atol=1e-14)


def test_squared_hinge_is_the_papers_form():
    a = np.array([[1.0, 2.0], [-1.0, 0.5], [0.3, -0.2]])
    ell = np.array([1.0, -1.0, 1.0])
    c = 1e-3
    loss = cfl.losses.SquaredHinge.from_groups(a, ell, [0, 0, 0], c=c)
    w, b = np.array([0.4, -0.7]), 0.25
    x = np.r_[w, b]
    expected = c / 2 * w @ w + np.mean(np.maximum(0, 1 - ell * (a @ w - b)) ** 2)
    assert loss.value(x[None]) == pytest.approx(expected, rel=1e-14)
    np.testing.assert_allclose(loss.decision_function(x, a), a @ w - b)


def test_users_are_sorted_group_labels_and_weights_scale_terms():
    X = np.array([[1.0], [2.0], [3.0], [4.0]])
    y = np.array([1.0, 2.0, 3.0, 4.0])
    loss = cfl.losses.LeastSquares.from_groups(X, y, ["b", "a", "b", "a"],
                                               sample_weight=[1, 2, 3, 4])
    np.testing.assert_array_equal(loss.user_labels, ["a", "b"])
    x = np.array([[0.5], [0.5]])
    # user "a": samples 2 and 4 with weights 2 and 4, mean over m = 2
    fa = (2 * 0.5 * (1.0 - 2) ** 2 + 4 * 0.5 * (2.0 - 4) ** 2) / 2
    assert loss.values(x)[0] == pytest.approx(fa)
    same = cfl.losses.LeastSquares.from_users([X[[1, 3]], X[[0, 2]]], [y[[1, 3]], y[[0, 2]]],
                                              sample_weights=[[2, 4], [1, 3]])
    np.testing.assert_allclose(same.values(x), loss.values(x))


def test_strictly_convex_at_flags_exactly_the_flat_users():
    """Remark 1's hypothesis, tested locally: the Hessian near x_i, kinks counted as flat."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((20, 3))
    g = np.repeat(np.arange(4), 5)
    at = np.zeros((4, 3))
    ls = cfl.losses.LeastSquares.from_groups(X, rng.standard_normal(20), g)
    assert ls.strictly_convex_at(at).all()                           # 5 samples, 3 features
    two = cfl.losses.LeastSquares.from_groups(X[:8], rng.standard_normal(8),
                                              np.repeat(np.arange(4), 2))
    assert not two.strictly_convex_at(at).any()                      # 2 samples, 3 features
    y = np.where(rng.uniform(size=20) < 0.5, -1.0, 1.0)
    logit = cfl.losses.Logistic.from_groups(X, y, g)                 # no ridge, full rank
    assert logit.strictly_convex_at(at).all() and not logit.strong_convexity.any()
    flat = X.copy()
    flat[:5, 2] = 0.0                                                # user 0 never sees x_3
    assert cfl.losses.Logistic.from_groups(flat, y, g).strictly_convex_at(at).tolist() == \
        [False, True, True, True]
    # squared hinge (ridge on w only): flat along b where every sample is past the margin
    hinge = cfl.losses.SquaredHinge.from_groups(X, np.ones(20), g, c=0.1)
    assert hinge.strictly_convex_at(np.zeros((4, 4))).all()          # every sample active
    assert not hinge.strictly_convex_at(np.tile([0, 0, 0, -5.0], (4, 1))).any()
    huber = cfl.losses.Huber.from_groups(X, X[:, 0], g, delta=0.5)
    e1 = np.tile([1.0, 0, 0], (4, 1))
    assert huber.strictly_convex_at(e1).all()                        # every residual 0
    assert not huber.strictly_convex_at(100 * e1).any()              # every residual linear
    assert cfl.losses.Quadratic(X).strictly_convex_at(X).all()
    # a ridge makes every user strictly convex, however ill-conditioned (features ~ 10⁴)
    big = np.c_[X[:8, :2], 1e4 * rng.uniform(1, 2, 8)]
    ridged = cfl.losses.LeastSquares.from_groups(big, rng.standard_normal(8),
                                                 np.repeat(np.arange(4), 2), c=1e-3)
    eig = np.linalg.eigvalsh(ridged._hessians_near(at))
    assert np.all(eig[:, 0] <= 1e-10 * eig[:, -1])  # the relative test alone says flat
    assert ridged.strictly_convex_at(at).all()
