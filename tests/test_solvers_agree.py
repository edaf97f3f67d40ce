"""Every fast method agrees with the cvxpy reference on every loss, complete and kNN graphs."""

import numpy as np
import pytest
from helpers import LOSS_NAMES, make_loss
from hypothesis import given, settings
from hypothesis import strategies as st

import convexfl as cfl

N_USERS = 7


def graph_of(kind, n, seed=0):
    if kind == "complete":
        return cfl.graphs.complete(n)
    pts = np.random.default_rng(seed).standard_normal((n, 2))
    return cfl.graphs.knn(pts, 3, warn_disconnected=False)


_REFS = {}


def reference(name, kind, lam, seed=3):
    key = (name, kind, lam, seed)
    if key not in _REFS:
        loss = make_loss(name, n_users=N_USERS, dim=3, seed=seed)
        prob = cfl.SumOfNorms(loss, graph_of(kind, N_USERS, seed), lam)
        _REFS[key] = (prob, cfl.solve(prob, method="cvxpy", tol=1e-9))
    return _REFS[key]


def assert_agrees(res, ref, tol=1e-6):
    assert res.converged, res.message
    assert res.kkt_residual <= tol
    gap = (res.objective - ref.objective) / max(1.0, abs(ref.objective))
    assert abs(gap) <= 1e-6, gap
    assert cfl.clusters.same_partition(res.labels(), ref.labels())


METHODS = ["admm", "pdmm"]


@pytest.mark.parametrize("kind", ["complete", "knn"])
@pytest.mark.parametrize("name", LOSS_NAMES)
@pytest.mark.parametrize("method", METHODS)
def test_fast_methods_agree_with_reference(method, name, kind):
    prob, ref = reference(name, kind, 0.3)
    res = cfl.solve(prob, method=method, tol=1e-7, random_state=0) if method == "pdmm" \
        else cfl.solve(prob, method=method, tol=1e-7)
    assert_agrees(res, ref, 1e-7)
    assert res.method == method and res.lam == prob.lam and res.time_s > 0
    assert res.fuse_tol > 0 and res.flows.shape == (prob.graph.n_edges, prob.dim)


@pytest.mark.parametrize("kind", ["complete", "knn"])
def test_ssnal_and_auto_agree_on_quadratic(kind):
    prob, ref = reference("quadratic", kind, 0.3)
    for method in ("ssnal", "auto"):
        res = cfl.solve(prob, method=method, tol=1e-7)
        assert res.method == "ssnal"
        assert_agrees(res, ref, 1e-7)


@settings(max_examples=6)
@given(seed=st.integers(0, 10_000), lam=st.floats(0.02, 2.0), knn=st.booleans())
def test_random_quadratic_instances_agree(seed, lam, knn):
    rng = np.random.default_rng(seed)
    A = np.r_[rng.standard_normal((5, 2)), rng.standard_normal((5, 2)) + 3.0]
    graph = (cfl.graphs.knn(A, 3, phi=0.5, warn_disconnected=False) if knn
             else cfl.graphs.complete(10))
    prob = cfl.SumOfNorms(cfl.losses.Quadratic(A), graph, lam)
    ref = cfl.solve(prob, method="cvxpy", tol=1e-9)
    for method in ("ssnal", "admm"):
        assert_agrees(cfl.solve(prob, method=method, tol=1e-7), ref, 1e-7)


@pytest.mark.parametrize("method", ["admm", "pdmm", "ssnal"])
def test_reduced_problems_are_solved_on_the_inner_problem(method):
    loss = make_loss("quadratic", n_users=6, seed=5)
    for red in (cfl.global_model(loss), cfl.local_models(loss),
                cfl.oracle(loss, [0, 0, 1, 1, 2, 2])):
        ref = cfl.solve(red, method="cvxpy", tol=1e-9)
        res = cfl.solve(red, method=method, tol=1e-8)
        assert res.converged and res.X.shape == (6, loss.dim)
        np.testing.assert_allclose(res.X, ref.X, atol=1e-6)
    loss = make_loss("logistic", n_users=6, seed=5)
    red = cfl.Reduced(loss, cfl.graphs.complete(6), [0, 0, 1, 1, 2, 2], 0.05)
    if method != "ssnal":
        ref = cfl.solve(red, method="cvxpy", tol=1e-9)
        res = cfl.solve(red, method=method, tol=1e-8)
        assert res.converged
        np.testing.assert_allclose(res.X, ref.X, atol=1e-6)


@pytest.mark.parametrize("method", ["admm", "pdmm", "ssnal"])
def test_lambda_zero_is_separable(method):
    loss = make_loss("quadratic", n_users=5, seed=2)
    res = cfl.solve(cfl.SumOfNorms(loss, cfl.graphs.complete(5), 0.0), method=method)
    assert res.converged and res.n_iter == 0
    np.testing.assert_allclose(res.X, loss.points)


@pytest.mark.parametrize("method", ["admm", "pdmm", "ssnal"])
def test_squared_penalty_is_refused_with_a_clear_error(method):
    loss = make_loss("quadratic", n_users=4, seed=2)
    with pytest.raises(TypeError, match="squared penalty is smooth"):
        cfl.solve(cfl.SquaredPenalty(loss, cfl.graphs.complete(4), 1.0), method=method)


def test_warm_start_across_methods_and_lambdas():
    prob, ref = reference("logistic", "complete", 0.3)
    admm = cfl.solve(prob, method="admm", tol=1e-8)
    pd = cfl.solve(prob, method="pdmm", warm_start=admm, tol=1e-8)
    assert pd.converged and pd.n_iter <= 2
    # a nearby λ warm-started from this one: flows rescaled, converges
    res = cfl.solve(prob.with_lam(0.33), method="admm", warm_start=admm, tol=1e-8)
    assert res.converged


def test_unknown_method_is_refused():
    prob, _ = reference("quadratic", "complete", 0.3)
    with pytest.raises(ValueError, match="method"):
        cfl.solve(prob, method="nope")


@settings(max_examples=5)
@given(seed=st.integers(0, 10_000), lam=st.floats(0.02, 1.0),
       name=st.sampled_from(LOSS_NAMES), kind=st.sampled_from(["complete", "knn"]),
       method=st.sampled_from(METHODS))
def test_random_instances_of_every_loss_agree(seed, lam, name, kind, method):
    loss = make_loss(name, n_users=N_USERS, dim=3, seed=seed)
    prob = cfl.SumOfNorms(loss, graph_of(kind, N_USERS, seed), lam)
    ref = cfl.solve(prob, method="cvxpy", tol=1e-9)
    assert ref.converged, ref.message
    opts = {"random_state": 0} if method == "pdmm" else {}
    assert_agrees(cfl.solve(prob, method=method, tol=1e-7, **opts), ref, 1e-7)


@settings(max_examples=4, deadline=None)
@given(seed=st.integers(0, 10_000), name=st.sampled_from(LOSS_NAMES),
       kind=st.sampled_from(["complete", "knn"]), method=st.sampled_from(["admm", "ssnal"]),
       lam0=st.floats(0.02, 0.5))
def test_warm_started_paths_agree_with_cold_references(seed, name, kind, method, lam0):
    """Along a λ path every warm start (moved or extrapolated flows, merged warm partitions,
    n_iter = 0 exits) gives the reference's solution."""
    if method == "ssnal":
        name = "quadratic"
    loss = make_loss(name, n_users=N_USERS, dim=3, seed=seed)
    graph = graph_of(kind, N_USERS, seed)
    prev = None
    for lam in lam0 * np.array([1.0, 1.3, 1.6, 2.5, 4.0]):
        prob = cfl.SumOfNorms(loss, graph, float(lam))
        ref = cfl.solve(prob, method="cvxpy", tol=1e-9)
        assert ref.converged, ref.message
        prev = cfl.solve(prob, method=method, tol=1e-7, warm_start=prev)
        assert_agrees(prev, ref, 1e-7)
