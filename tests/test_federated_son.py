"""Federated sum-of-norms ADMM (convexfl.federated.son_admm) against the cvxpy reference, with
dropouts, and Flower-vs-in-process equivalence for son_admm and the other federated
algorithms (PPFL, CGPFL, PerFed-CKT co-distillation)."""

import numpy as np
import pytest

import convexfl as cfl
from convexfl import graphs, losses, problems, solvers
from convexfl.federated import run_federated, son_admm, son_client_data

flwr = pytest.importorskip("flwr")
from test_flower import assert_same_run  # noqa: E402

from convexfl.federated import flower  # noqa: E402

N = 7


def _quadratic():
    rng = np.random.default_rng(0)
    A = np.vstack([rng.normal(size=(4, 2)), rng.normal(size=(3, 2)) + 3])
    return problems.SumOfNorms(losses.Quadratic(A), graphs.complete(N), 0.3)


def _logistic():
    rng = np.random.default_rng(0)
    Xs = [rng.normal(size=(10, 3)) + (i % 2) for i in range(N)]
    ys = [np.where(rng.random(10) < 0.5, 1.0, -1.0) for _ in range(N)]
    return problems.SumOfNorms(losses.Logistic.from_users(Xs, ys, c=0.1), graphs.complete(N), 0.05)


CASES = {"quadratic": (_quadratic, 1.0), "logistic": (_logistic, 0.5)}


@pytest.fixture(scope="module", params=list(CASES))
def case(request):
    make, rho = CASES[request.param]
    prob = make()
    return prob, rho, solvers.solve(prob, "cvxpy").objective


def _run(prob, rho, **options):
    alg = son_admm(prob, rho=rho, certify_every=100)
    return run_federated(alg, son_client_data(prob), rounds=400, random_state=0, progress=False,
                         **options)


def _check_optimal(prob, X, f_ref):
    kkt = cfl.certificates.kkt_residual(prob, X).kkt_residual
    gap = abs(prob.objective(X) - f_ref) / abs(f_ref)
    assert kkt <= 1e-5, kkt
    assert gap <= 1e-6, gap
    return kkt, gap


def test_full_participation_reaches_the_cvxpy_solution(case):
    prob, rho, f_ref = case
    res = _run(prob, rho)
    kkt, gap = _check_optimal(prob, res.server_state["X"], f_ref)
    assert res.history.records[-1].metrics["kkt"] == pytest.approx(kkt)
    print(f"\nfull participation: kkt={kkt:.1e} gap={gap:.1e}")


def test_dropouts_still_reach_the_cvxpy_solution(case):
    prob, rho, f_ref = case
    res = _run(prob, rho, dropout=0.3)
    assert 0.2 < sum(len(r.dropped) for r in res.history) / (400 * N) < 0.4
    kkt, gap = _check_optimal(prob, res.server_state["X"], f_ref)
    print(f"\ndropout 0.3: kkt={kkt:.1e} gap={gap:.1e}")


def test_son_admm_metrics_and_payloads():
    prob = _quadratic()
    res = run_federated(son_admm(prob, certify_every=2), son_client_data(prob), rounds=3,
                        random_state=0, progress=False)
    assert "kkt" in res.history.initial_metrics
    assert ["kkt" in r.metrics for r in res.history] == [False, True, False]
    # one (deg_i, d) payload down and one d-vector up per client and round
    assert res.history.totals()["vectors_down"] == 3 * N * (N - 1)
    assert res.history.totals()["vectors_up"] == 3 * N
    with pytest.raises(ValueError):
        son_admm(prob, rho=0.0)


# ----------------------------------------------------------------------------- Flower


def _same_under_flower(alg_factory, data, **options):
    reference = run_federated(alg_factory(), data, progress=False, **options)
    result = flower.run_in_memory(alg_factory(), data, **options)
    assert_same_run(result, reference)
    return reference


def test_son_admm_under_flower():
    prob = _logistic()
    ref = _same_under_flower(lambda: son_admm(prob, rho=0.5, certify_every=4),
                             son_client_data(prob), rounds=8, participation=0.6, dropout=0.3,
                             random_state=4)
    assert sum(len(r.dropped) for r in ref.history) > 0


@pytest.mark.parametrize("solver", ["rbcd", "alternating"])
def test_ppfl_under_flower(solver):
    from convexfl.ppfl import PPFLProblem, alternating, rbcd

    rng = np.random.default_rng(0)
    X = rng.normal(size=(5 * 8, 4))
    prob = PPFLProblem(X[:, :3], rng.integers(0, 2, 40).astype(float), np.repeat(np.arange(5), 8),
                       n_components=2, X_shared=X[:, 3:], family="binomial", lam=0.3)
    init = prob.initial_point(np.random.default_rng(1), 1.0)
    make = rbcd if solver == "rbcd" else alternating
    _same_under_flower(lambda: make(prob, init=init, theta_step=1.0, pi_step=5.0, record=False),
                       prob.client_data(), rounds=4, participation=0.6, dropout=0.3,
                       random_state=3)


def test_cgpfl_under_flower():
    from convexfl import cgpfl
    from convexfl.datasets import clustered_mlr

    data = list(clustered_mlr(6, 2, 5, 3, n_samples=20, scale=4.0, client_spread=0.3,
                              random_state=0))
    _same_under_flower(lambda: cgpfl.cgpfl(5, 3, n_clusters=2, lam=5.0, lr=0.02, inner_steps=2,
                                           local_steps=2, batch_size=8),
                       data, rounds=3, participation=0.6, dropout=0.3, random_state=5)


def test_codistillation_under_flower():
    from convexfl import ckt

    rng = np.random.default_rng(3)
    data = []
    for k in range(6):
        W = (5.0 if k < 3 else -5.0) * np.eye(3)[:, :1] + 0.3 * rng.normal(size=(3, 1))
        Xk = rng.normal(size=(15, 3))
        data.append((Xk, (Xk @ W + 0.1 * rng.normal(size=(15, 1)))[:, 0]))
    public = rng.normal(size=(7, 3))
    _same_under_flower(lambda: ckt.codistillation(public, n_clusters=2, lam=1.0, batch_size=5,
                                                  public_batch_size=4),
                       data, rounds=3, participation=0.6, dropout=0.3, random_state=0)
