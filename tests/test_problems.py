import numpy as np
import pytest
from helpers import LOSS_NAMES, make_loss
from hypothesis import given
from hypothesis import strategies as st

import convexfl as cfl


def test_lambda_conventions_convert_both_ways():
    assert cfl.from_paper_lambda(0.1, 60, "eq3") == pytest.approx(12.0)
    assert cfl.from_paper_lambda(0.1, 60, "eq14") == pytest.approx(0.2)
    assert cfl.to_paper_lambda(12.0, 60, "eq3") == pytest.approx(0.1)
    with pytest.raises(ValueError, match="form: expected one of"):
        cfl.from_paper_lambda(0.1, 60, "eq99")


def test_eq3_convention_is_the_printed_objective_times_n():
    loss = make_loss("logistic", n_users=5, seed=1)
    g = cfl.graphs.complete(5)
    lam_p = 0.03
    X = np.random.default_rng(0).standard_normal((5, loss.dim))
    printed = loss.value(X) / 5 + lam_p * sum(
        np.linalg.norm(X[i] - X[j]) for i in range(5) for j in range(5) if i != j)
    prob = cfl.SumOfNorms(loss, g, lam_p, convention="eq3")
    assert prob.lam == pytest.approx(2 * 5 * lam_p)
    assert prob.objective(X) == pytest.approx(5 * printed, rel=1e-12)


@pytest.mark.parametrize("name", LOSS_NAMES)
@given(seed=st.integers(0, 1000))
def test_objective_is_invariant_under_user_permutation(name, seed):
    rng = np.random.default_rng(seed)
    loss = make_loss(name, n_users=4, seed=seed)
    X = rng.standard_normal((4, loss.dim))
    perm = rng.permutation(4)
    if name == "quadratic":
        permuted = cfl.losses.Quadratic(loss.points[perm])
    else:
        Xs = [loss.F[loss.ptr[i]:loss.ptr[i + 1]] for i in perm]
        ys = [loss.y[loss.ptr[i]:loss.ptr[i + 1]] for i in perm]
        if name == "squared_hinge":
            Xs = [x[:, :-1] for x in Xs]
        permuted = type(loss).from_users(Xs, ys, c=loss.c)
    g = cfl.graphs.complete(4)
    a = cfl.SumOfNorms(loss, g, 0.7).objective(X)
    b = cfl.SumOfNorms(permuted, g, 0.7).objective(X[perm])
    assert a == pytest.approx(b, rel=1e-12)


@given(seed=st.integers(0, 1000), shift=st.floats(-50, 50))
def test_quadratic_objective_is_translation_invariant(seed, shift):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((6, 2))
    X = rng.standard_normal((6, 2))
    g = cfl.graphs.complete(6)
    c = np.array([shift, -2 * shift])
    a = cfl.SumOfNorms(cfl.losses.Quadratic(A), g, 0.3).objective(X)
    b = cfl.SumOfNorms(cfl.losses.Quadratic(A + c), g, 0.3).objective(X + c)
    assert a == pytest.approx(b, rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("name", LOSS_NAMES)
def test_reduced_objective_equals_son_at_clustered_points(name):
    loss = make_loss(name, n_users=6, seed=2)
    g = cfl.graphs.complete(6)
    labels = np.array([0, 0, 1, 1, 2, 2])
    red = cfl.Reduced(loss, g, labels, lam=0.4)
    W = np.random.default_rng(3).standard_normal((3, loss.dim))
    X = red.expand(W)
    assert red.inner.objective(W) == pytest.approx(
        cfl.SumOfNorms(loss, g, 0.4).objective(X), rel=1e-12)
    assert red.objective(X) == pytest.approx(red.inner.objective(W), rel=1e-12)
    # the same partition at another λ shares the reduced graph and loss, and is the
    # reduced problem built afresh there
    moved = red.with_lam(1.3)
    fresh = cfl.Reduced(loss, g, labels, lam=1.3)
    assert moved.inner.graph is red.inner.graph and moved.inner.loss is red.inner.loss
    assert moved.lam == moved.inner.lam == 1.3 and red.lam == 0.4
    assert moved.inner.objective(W) == pytest.approx(fresh.inner.objective(W), rel=1e-12)
    with pytest.raises(ValueError, match="lam: must be >= 0"):
        red.with_lam(-1.0)
    with pytest.raises(ValueError, match="graph: required when lam > 0"):
        cfl.oracle(loss, labels).with_lam(0.5)


def test_problem_argument_errors():
    loss = make_loss("quadratic", n_users=4)
    with pytest.raises(ValueError, match="lam: must be >= 0"):
        cfl.SumOfNorms(loss, cfl.graphs.complete(4), -1.0)
    with pytest.raises(ValueError, match="lam: must be finite"):
        cfl.SumOfNorms(loss, cfl.graphs.complete(4), np.inf)
    with pytest.raises(TypeError, match="lam: expected a real number"):
        cfl.SumOfNorms(loss, cfl.graphs.complete(4), "1")
    with pytest.raises(ValueError, match="graph: has 5 nodes but the loss has 4 users"):
        cfl.SumOfNorms(loss, cfl.graphs.complete(5), 1.0)
    with pytest.raises(TypeError, match="loss: expected a convexfl.losses loss"):
        cfl.SumOfNorms(np.zeros((4, 2)), cfl.graphs.complete(4), 1.0)
    with pytest.raises(ValueError, match="gamma: must be >= 0"):
        cfl.SquaredPenalty(loss, cfl.graphs.complete(4), -0.1)
    with pytest.raises(ValueError, match="partition: does not cover every user"):
        cfl.oracle(loss, [[0, 1], [2]])
    with pytest.raises(ValueError, match="partition: clusters overlap"):
        cfl.oracle(loss, [[0, 1], [1, 2, 3]])
    with pytest.raises(ValueError, match="partition: expected one label per user"):
        cfl.oracle(loss, [0, 1])
    with pytest.raises(ValueError, match="X: expected shape"):
        cfl.SumOfNorms(loss, cfl.graphs.complete(4), 1.0).objective(np.zeros((3, 3)))
