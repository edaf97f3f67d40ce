"""Network-lasso ADMM: options, stopping, warm starts, history."""

import numpy as np
import pytest
from helpers import make_loss, reference

import convexfl as cfl
from convexfl.solvers.admm import solve_admm


def problem(name="quadratic", n=8, lam=0.3, seed=1):
    loss = make_loss(name, n_users=n, dim=3, seed=seed)
    return cfl.SumOfNorms(loss, cfl.graphs.complete(n), lam)


def test_truncated_run_is_reported_as_not_converged():
    prob = problem("logistic")
    res = cfl.solve(prob, method="admm", max_iter=3, tol=1e-10, polish=False)
    assert not res.converged
    assert "iteration limit" in res.message and "max_iter=3" in res.message
    assert res.n_iter == 3 and res.status == "not_converged"
    assert res.kkt_residual > 1e-10  # the certificate, not the solver, says so


def test_warm_start_from_a_solution_converges_in_very_few_iterations():
    prob = problem("huber", lam=0.2)
    first = cfl.solve(prob, method="admm", tol=1e-9)
    assert first.converged
    again = cfl.solve(prob, method="admm", tol=1e-9, warm_start=first)
    assert again.converged and again.n_iter <= 2
    again = solve_admm(prob, tol=1e-9, X0=first.X, flows0=first.flows)
    assert again.converged and again.n_iter <= 2


def test_default_rho_makes_iterations_invariant_to_the_data_scale():
    """ρ defaults to (flow scale)/(difference scale): scaling the data and λ by s scales the
    ADMM iterates by s and leaves the iteration count alone."""
    A = np.random.default_rng(4).standard_normal((12, 2))
    runs = []
    for s in (1.0, 1e3):
        prob = cfl.SumOfNorms(cfl.losses.Quadratic(s * A), cfl.graphs.complete(12), 0.2 * s)
        runs.append(cfl.solve(prob, method="admm", tol=1e-9, polish=False))
    assert runs[0].converged and runs[1].converged
    assert runs[0].n_iter == runs[1].n_iter
    assert runs[1].history["rho"][0] == pytest.approx(runs[0].history["rho"][0], rel=1e-12)
    np.testing.assert_allclose(runs[1].X, 1e3 * runs[0].X, rtol=1e-6, atol=1e-6)


def test_without_polish_admm_converges_on_its_own():
    prob = problem("quadratic", lam=0.2)
    ref = reference(prob, tol=1e-9)
    res = cfl.solve(prob, method="admm", tol=1e-6, polish=False, max_iter=20000)
    assert res.converged and res.kkt_residual <= 1e-6
    assert abs(res.objective - ref.objective) <= 1e-6 * abs(ref.objective)


def test_history_and_options_are_recorded():
    prob = problem("least_squares")
    res = cfl.solve(prob, method="admm", adaptive_rho=False, alpha=1.0, rho=2.0,
                    record_objective=True, check_every=5)
    h = res.history
    assert len(h["iter"]) == len(h["r"]) == len(h["s"]) == len(h["objective"])
    np.testing.assert_allclose(h["rho"], 2.0, rtol=1e-12)  # in the user's units
    assert h["iter"][0] == 5 and h["certify_at"]
    assert h["time_certify_s"] >= 0 and h["n_certify"] >= 1


def test_fused_pairs_are_exact():
    rng = np.random.default_rng(0)
    A = np.r_[rng.standard_normal((5, 2)) * 0.3, rng.standard_normal((5, 2)) * 0.3 + 5.0]
    prob = cfl.SumOfNorms(cfl.losses.Quadratic(A), cfl.graphs.complete(10), 0.1)
    res = cfl.solve(prob, method="admm", tol=1e-8)
    assert 1 < res.n_clusters < 10
    lab = res.labels()
    for k in np.unique(lab):
        rows = res.X[lab == k]
        assert np.all(rows == rows[0])  # bitwise equal within a cluster
    assert res.fuse_tol < 1e-8


@pytest.mark.parametrize("option, value, exc", [
    ("rho", 0.0, ValueError), ("rho", -1.0, ValueError), ("alpha", 2.0, ValueError),
    ("alpha", 0.0, ValueError), ("tol", 0.0, ValueError), ("max_iter", 0, ValueError),
    ("max_iter", 2.5, TypeError), ("mu", 1.0, ValueError), ("tau_incr", 0.5, ValueError),
    ("polish", "yes", TypeError), ("adaptive_rho", 1, TypeError),
    ("check_every", 0, ValueError), ("newton_tol", 0.0, ValueError),
])
def test_bad_options_raise_errors_naming_the_argument(option, value, exc):
    with pytest.raises(exc, match=option):
        cfl.solve(problem(), method="admm", **{option: value})


def test_bad_warm_starts_are_refused():
    prob = problem()
    with pytest.raises(ValueError, match="X0"):
        solve_admm(prob, X0=np.zeros((3, 3)))
    with pytest.raises(ValueError, match="flows0"):
        solve_admm(prob, flows0=np.zeros((3, 3)))
    with pytest.raises(TypeError, match="warm_start"):
        solve_admm(prob, warm_start=np.zeros((8, 3)))
    with pytest.raises(ValueError, match="X0"):
        solve_admm(cfl.global_model(prob.loss), X0=np.zeros((1, 3)))


def test_every_loss_is_accepted_including_poisson():
    prob = problem("poisson", lam=0.1)
    res = cfl.solve(prob, method="admm", tol=1e-8)
    assert res.converged


def test_small_partitions_are_offered_once_stable():
    """``Certifier.untried(..., stable=True)`` (ADMM's early certificates) offers a small
    partition only at its second consecutive sighting; without ``stable`` at once; never
    without polishing."""
    from convexfl.solvers._common import Certifier

    A = np.r_[np.zeros((3, 2)), np.full((3, 2), 5.0)]
    prob = cfl.SumOfNorms(cfl.losses.Quadratic(A), cfl.graphs.complete(6), 0.1)
    two = np.all(A[prob.graph.edges[:, 0]] == A[prob.graph.edges[:, 1]], axis=1)
    one = np.ones_like(two)
    cert = Certifier(prob, 1e-6, polish=True)
    assert not cert.untried(two, stable=True)
    assert cert.untried(two, stable=True)
    assert not cert.untried(one, stable=True)
    assert cert.untried(one)
    assert not Certifier(prob, 1e-6, polish=False).untried(two)


def test_polish_small_polishes_only_small_reduced_problems():
    """``polish="small"``: a problem whose clusters are few certifies through a polish; one
    whose every user is its own cluster is never polished (its final candidate is certified
    as it is); any other value is refused by name."""
    rng = np.random.default_rng(4)
    A = np.r_[rng.normal(0, 0.1, (30, 2)), rng.normal(5, 0.1, (30, 2))]
    g = cfl.graphs.knn(A, 5, warn_disconnected=False)
    few = cfl.solve(cfl.SumOfNorms(cfl.losses.Quadratic(A), g, 1.0), method="admm",
                    polish="small")
    assert few.converged and few.n_clusters == 2
    B = rng.standard_normal((60, 6))  # 60 clusters × d = 6 > 300 unknowns: not small
    many = cfl.SumOfNorms(cfl.losses.Quadratic(B), cfl.graphs.complete(60), 1e-3)
    plain = cfl.solve(many, method="admm", polish=False, max_iter=10)
    small = cfl.solve(many, method="admm", polish="small", max_iter=10)
    assert small.kkt_residual == plain.kkt_residual
    with pytest.raises(TypeError, match="polish: expected True, False or 'small'"):
        cfl.solve(many, method="admm", polish="tiny")


def test_a_new_partitions_check_leaves_the_residual_schedule_alone():
    """Checks of new small partitions (``untried``) come whatever the residuals; they must
    not lower the residuals' trigger or stretch the gap between its checks. Scripted: the
    residuals fall tenfold every 100 iterations, twelve new partitions are offered first
    and the candidate certifies once the residuals are below 1e-5 (from iteration 500).
    When each offered check lowered the trigger tenfold, the first certificate came after
    the trigger had reached 1e-14, at iteration 2120."""
    from convexfl.solvers.admm import iterate

    class Certifier:
        offered = 0

        def untried(self, fused, stable=False):
            self.offered += 1
            return self.offered <= 12

    class Run:
        tol, max_iter, certifier = 1e-6, 5000, Certifier()

        def certify(self, hist, it, fused, X, flows):
            hist["certify_at"].append(it)
            return 10.0 ** (-it / 100) <= 1e-5

        def coarsen(self, *args):
            return False

    class State:
        it, rho = 0, 1.0

        def step(self, n):
            self.it += n
            res = 10.0 ** (-self.it / 100)
            return res, res, res, True

        def fused_mask(self):
            return np.zeros(1, bool)

        def candidate(self):
            return self.fused_mask(), np.zeros((2, 1)), np.zeros((1, 1))

    converged, it, hist, _, _ = iterate(Run(), State(), check_every=10, adaptive_rho=False,
                                        mu=10.0, tau_incr=2.0, coarsen=False, warm=False)
    assert converged and 500 <= it <= 520, hist["certify_at"]
    assert hist["certify_at"][:12] == list(range(10, 130, 10))


def _reduced_case(d=8, k=60, seed=5):
    """A sparse reduced problem of the quadratic loss: K clusters on a kNN graph in ``d``
    dimensions, all apart."""
    from convexfl.solvers import _common

    rng = np.random.default_rng(seed)
    A = rng.standard_normal((k, d))
    prob = cfl.SumOfNorms(cfl.losses.Quadratic(A), cfl.graphs.knn(A, 4), 0.05)
    return prob, _common


def test_the_reduced_hessian_product_is_the_hessians():
    """``reduced_hess_vec`` (the isotropic polish's CG) against the Hessian assembled by
    ``reduced_grad_hess`` (the LU polish's), on a random point and direction; without
    Hessian storage ``reduced_grad_hess`` gives the same value and gradient."""
    from convexfl.solvers._common_kernels import reduced_grad_hess, reduced_hess_vec

    prob, _ = _reduced_case()
    k, d = prob.n_users, prob.dim
    W = np.random.default_rng(1).standard_normal((k, d))
    V = np.random.default_rng(2).standard_normal((k, d))
    cap = prob.lam * prob.graph.weights
    n = k * d
    Hd = np.empty((n, n))
    grad = np.empty((k, d))
    val, _, rmin = reduced_grad_hess(*prob.loss.arrays, prob.graph.edges, cap, W, grad, Hd,
                                     np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0))
    only = np.empty((k, d))  # no Hessian storage at all: the value and gradient alone
    assert reduced_grad_hess(*prob.loss.arrays, prob.graph.edges, cap, W, only,
                             np.empty((0, 0)), np.empty(0, np.int64), np.empty(0, np.int64),
                             np.empty(0)) == (val, 0, rmin)
    np.testing.assert_array_equal(only, grad)
    out = np.empty((k, d))
    reduced_hess_vec(prob.loss.arrays[3], prob.graph.edges, cap, W, V, out)
    np.testing.assert_allclose(out.ravel(), Hd @ V.ravel(), rtol=1e-12, atol=1e-12)


def test_the_isotropic_polish_reaches_the_lu_polishs_answer(monkeypatch):
    """Above ``POLISH_ISOTROPIC_DIM`` parameters per user the sparse Newton systems of the
    quadratic loss are solved by preconditioned CG (inexact Newton); its answer is the exact
    LU's, and it certifies."""
    prob, _common = _reduced_case()
    assert prob.dim > _common.POLISH_ISOTROPIC_DIM
    labels = np.arange(prob.n_users)
    W0 = prob.loss.F + 0.01
    calls = []
    inner = _common._isotropic_newton_step
    monkeypatch.setattr(_common, "_isotropic_newton_step",
                        lambda *a: calls.append(1) or inner(*a))
    monkeypatch.setattr(_common, "DENSE_MAX", 0)  # the sparse systems
    monkeypatch.setattr(_common, "SMALL_NEWTON", 0)
    lab, W, ok, steps = _common.polish(prob, labels, W0, gtol_rel=1e-12)
    assert ok and len(calls) == steps > 0
    monkeypatch.setattr(_common, "POLISH_ISOTROPIC_DIM", prob.dim)
    lab_lu, W_lu, ok_lu, _ = _common.polish(prob, labels, W0, gtol_rel=1e-12)
    assert ok_lu and len(calls) == steps
    np.testing.assert_array_equal(lab, lab_lu)
    np.testing.assert_allclose(W, W_lu, atol=1e-10)
    assert cfl.certificates.kkt_residual(prob, W[lab]).kkt_residual <= 1e-9


@pytest.mark.parametrize("lam", [0.05, 0.4])
@pytest.mark.parametrize("loss", ["quadratic", "logistic"])
def test_the_compiled_dense_newton_is_the_sparse_lu_newton(monkeypatch, loss, lam):
    """The dense polish (one compiled loop, ``dense_newton``) against the sparse LU polish
    (Python loop, ``PatternLU``) from singletons: the same merges, labels and models, in as
    many steps, and both certify; at λ = 0.4 clusters meet on the way (merges between
    rounds). With a budget of one step the compiled loop takes one step and says it
    stopped."""
    from convexfl.solvers import _common

    if loss == "quadratic":
        prob, _ = _reduced_case(d=2, k=40)
        prob = prob.with_lam(lam)
    else:
        prob = cfl.SumOfNorms(make_loss("logistic", n_users=12, seed=3),
                              cfl.graphs.complete(12), lam / 8)
    labels = np.arange(prob.n_users)
    W0 = cfl.solve(prob.with_lam(0.0)).X
    dense = _common.polish(prob, labels, W0, gtol_rel=1e-12, max_iter=200)
    monkeypatch.setattr(_common, "DENSE_MAX", 0)
    monkeypatch.setattr(_common, "SMALL_NEWTON", 0)
    monkeypatch.setattr(_common, "POLISH_ISOTROPIC_DIM", prob.dim)
    sparse = _common.polish(prob, labels, W0, gtol_rel=1e-12, max_iter=200)
    assert dense[2] and sparse[2] and dense[3] == sparse[3] > 0
    np.testing.assert_array_equal(dense[0], sparse[0])
    np.testing.assert_allclose(dense[1], sparse[1], atol=1e-9)
    if lam == 0.4:
        assert dense[0].max() + 1 < prob.n_users  # merged on the way
    assert cfl.certificates.kkt_residual(prob, dense[1][dense[0]]).kkt_residual <= 1e-8
    monkeypatch.undo()
    one = _common.polish(prob, labels, W0, gtol_rel=1e-12, max_iter=200, max_steps=1)
    assert not one[2] and one[3] == 1 and not np.array_equal(one[1], W0)


@pytest.mark.parametrize("d", [1, 2, 3, 4])
@pytest.mark.parametrize("name", ["quadratic", "logistic"])
def test_the_admm_kernel_is_the_iteration_it_documents(name, d):
    """Three iterations of ``admm_run`` against the formulas of its docstring, written with
    numpy over an edge list (x-update from each node's incident copies, edge update with
    over-relaxation, dual update); the x-update's prox is the loss's own
    (:func:`convexfl._kernels.prox_all`). In every dimension: d = 2 and 3 run copies of the
    kernel compiled with d a constant, the others the general one."""
    from convexfl._kernels import prox_all
    from convexfl.solvers._admm_kernels import admm_run

    rng = np.random.default_rng(4)
    n = 9
    loss = make_loss(name, n_users=n, dim=d, seed=2)
    graph = cfl.graphs.knn(rng.standard_normal((n, 2)), 3)
    edges, cap = graph.edges, 0.4 * graph.weights
    rho, alpha = 1.3, 1.6
    X = rng.standard_normal((n, d))
    Zi, Zj = X[edges[:, 0]] + 0.1, X[edges[:, 1]] - 0.1
    Ui, Uj = 0.2 * rng.standard_normal(Zi.shape), 0.2 * rng.standard_normal(Zj.shape)
    degree = np.bincount(edges.ravel(), minlength=n)
    state = [a.copy() for a in (X, Zi, Zj, Ui, Uj)]
    arrays = loss.arrays
    for _ in range(3):  # the reference
        S = np.zeros((n, d))
        np.add.at(S, edges[:, 0], Zi - Ui)
        np.add.at(S, edges[:, 1], Zj - Uj)
        X = prox_all(*arrays, S / degree[:, None], rho * degree.astype(float), X, 1e-12,
                     50)[0]
        a = alpha * X[edges[:, 0]] + (1 - alpha) * Zi + Ui
        b = alpha * X[edges[:, 1]] + (1 - alpha) * Zj + Uj
        gap = np.linalg.norm(a - b, axis=1)
        theta = np.maximum(1 - cap / (rho * np.maximum(gap, 1e-300)), 0.5)[:, None]
        Zi, Zj = theta * a + (1 - theta) * b, (1 - theta) * a + theta * b
        Ui, Uj = a - Zi, b - Zj
    fused = np.zeros(len(edges), np.uint8)
    admm_run(3, *arrays, edges, cap, degree, *state, fused, rho, alpha, 1e-12, 50)
    for got, want in zip(state, (X, Zi, Zj, Ui, Uj), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(fused.astype(bool), theta[:, 0] == 0.5)
