"""Issue 11, item 2: hard numerics.

Every method registered in :data:`convexfl.solvers.METHODS` when the tests are collected is
run on small but hard instances — huge and tiny scales, d = 1, N = 2, coinciding points,
nearly collinear designs, λ at 0, at the fusion threshold λ̂ and far beyond, float32 input,
and logistic regression on separable data without a ridge (no minimiser exists). A method
may

* return a :class:`~convexfl.solvers.Solution` — then it must be honest: a solution reported
  as converged passes the certificate recomputed here from ``X`` alone, and one that is not
  says why in ``message``;
* stop with a :class:`~convexfl.solvers.SolverError` that says why; or
* refuse a loss it cannot handle with :class:`~convexfl.solvers.IncompatibleLossError`.

It may never report a convergence it did not reach: the certificate is the arbiter, and a
deliberately truncated run must come out as not converged.
"""

from __future__ import annotations

import numpy as np
import pytest

import convexfl as cfl
from convexfl.certificates import kkt_residual
from convexfl.solvers import METHODS, IncompatibleLossError, SolverError

L, G = cfl.losses, cfl.graphs
SOLVE_METHODS = sorted(METHODS)  # whatever is registered at collection time


def _points():
    rng = np.random.default_rng(0)
    return np.r_[rng.standard_normal((3, 2)), rng.standard_normal((3, 2)) + 5.0]


def _son(A, lam):
    A = np.asarray(A)
    return cfl.SumOfNorms(L.Quadratic(A), G.complete(len(A)), lam)


def _glm(cls, X, y, c, lam, m=6):
    groups = np.repeat(np.arange(len(y) // m), m)
    loss = cls.from_groups(X, y, groups, c=c)
    return cfl.SumOfNorms(loss, G.complete(loss.n_users), lam)


def _collinear(c):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((24, 1))
    X = np.c_[x, x + 1e-7 * rng.standard_normal((24, 1))]  # condition number ~1e7
    return _glm(L.LeastSquares, X, rng.standard_normal(24), c, 0.05)


def _logistic(c=0.1, separable=False, seed=2):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((24, 2))
    y = (np.sign(X[:, 0] + 1e-3) if separable
         else np.where(rng.uniform(size=24) < 0.5, -1.0, 1.0))
    return _glm(L.Logistic, X, y, c, 0.05)


def _lam_hat():
    return cfl.bounds.fusion_threshold(_son(_points(), 0.0)).value


INSTANCES = {
    "huge-scale": lambda: _son(1e6 * _points(), 0.5e6),
    "tiny-scale": lambda: _son(1e-6 * _points(), 0.5e-6),
    "d=1": lambda: _son([[0.0], [0.1], [3.0], [3.2], [7.0]], 0.2),
    "N=2": lambda: _son([[0.0, 0.0], [1.0, 1.0]], 0.3),
    "coinciding-points": lambda: _son(np.repeat(_points()[:2], 3, axis=0), 0.1),
    "all-points-equal": lambda: _son(np.ones((4, 2)), 0.1),
    "nearly-collinear-ridge": lambda: _collinear(1e-4),
    "nearly-collinear-no-ridge": lambda: _collinear(0.0),
    "logistic": lambda: _logistic(),
    "lam=0": lambda: _son(_points(), 0.0),
    "lam=lam_hat": lambda: _son(_points(), _lam_hat()),
    "lam=1000*lam_hat": lambda: _son(_points(), 1e3 * _lam_hat()),
    "float32-points": lambda: _son(_points().astype(np.float32), 0.5),
    "separable-logistic-no-ridge": lambda: _logistic(c=0.0, separable=True),
}


def assert_honest(prob, res):
    """The solution is what it says it is, judged from ``X`` alone."""
    assert res.X.shape == (prob.n_users, prob.dim) and res.X.dtype == np.float64
    assert np.all(np.isfinite(res.X))
    assert np.isfinite(res.kkt_tol) and 0 < res.kkt_tol <= 1e-3
    assert res.objective == pytest.approx(prob.objective(res.X), rel=1e-10, abs=1e-300)
    cert = kkt_residual(prob, res.X, fuse_tol=res.fuse_tol, flows=res.flows)
    # the reported residual is a certified upper bound; an independent search cannot find
    # a lower bound above it
    # (up to floating-point rounding of the two sums, ~1e-14 here)
    rounding = 1e-13 * (1.0 + cert.grad_norm)
    assert cert.kkt_abs_lower <= res.certificate.kkt_abs * (1 + 1e-6) + rounding
    if res.converged:
        assert res.kkt_residual <= res.kkt_tol
        assert cert.kkt_residual <= res.kkt_tol * (1 + 1e-6), (
            f"{res.method} reports convergence, but X certifies only to "
            f"{cert.kkt_residual:.2e} > kkt_tol={res.kkt_tol:.1e}")
    else:
        assert res.message, f"{res.method} stopped without saying why"


def solve_honestly(prob, method, **options):
    """Solve, or accept a stop that says why; return the Solution or None."""
    try:
        res = cfl.solve(prob, method=method, **options)
    except IncompatibleLossError as exc:
        assert prob.loss.name in str(exc) or "loss" in str(exc)
        return None
    except SolverError as exc:
        assert str(exc), "a SolverError must say why"
        return None
    assert_honest(prob, res)
    return res


@pytest.mark.parametrize("instance", sorted(INSTANCES))
@pytest.mark.parametrize("method", SOLVE_METHODS)
def test_hard_instances_are_solved_or_refused_honestly(method, instance):
    solve_honestly(INSTANCES[instance](), method)


@pytest.mark.parametrize("method", SOLVE_METHODS)
def test_large_scale_solutions_are_the_scaled_unit_solutions(method):
    """(SON) with the quadratic loss is scale-equivariant: A → sA, λ → sλ gives X → sX."""
    unit = solve_honestly(_son(_points(), 0.5), method)
    big = solve_honestly(_son(1e6 * _points(), 0.5e6), method)
    assert unit is not None and big is not None and unit.converged and big.converged
    assert np.allclose(big.X / 1e6, unit.X, rtol=0, atol=1e-5)
    assert cfl.clusters.same_partition(big.labels(), unit.labels())


@pytest.mark.parametrize("method", SOLVE_METHODS)
def test_tiny_scale_solutions_are_the_scaled_unit_solutions(method):
    unit = solve_honestly(_son(_points(), 0.5), method)
    tiny = solve_honestly(_son(1e-6 * _points(), 0.5e-6), method)
    assert tiny is not None and tiny.converged
    assert np.allclose(tiny.X / 1e-6, unit.X, rtol=0, atol=1e-5)
    assert cfl.clusters.same_partition(tiny.labels(), unit.labels())


@pytest.mark.parametrize("method", SOLVE_METHODS)
def test_float32_input_is_widened_exactly(method):
    A32 = _points().astype(np.float32)
    a = solve_honestly(_son(A32, 0.5), method)
    b = solve_honestly(_son(A32.astype(np.float64), 0.5), method)
    assert a is not None and b is not None
    assert a.X.dtype == np.float64
    # same data after exact widening: the same answer (to the method's own randomness)
    assert np.allclose(a.X, b.X, rtol=0, atol=1e-9)


@pytest.mark.parametrize("method", SOLVE_METHODS)
def test_a_truncated_run_is_reported_as_not_converged(method):
    """One iteration at tol = 1e-12 cannot be enough: the run must say so, and the
    certificate recomputed from X must agree that X is not within tol."""
    prob = _logistic()
    try:
        res = cfl.solve(prob, method=method, tol=1e-12, max_iter=1)
    except IncompatibleLossError:  # e.g. ssnal: quadratic loss only
        prob = _son(_points(), 0.5)
        try:
            res = cfl.solve(prob, method=method, tol=1e-12, max_iter=1)
        except SolverError as exc:
            assert "iteration limit" in str(exc) or "max_iter" in str(exc)
            return
    except SolverError as exc:  # the reference: the conic solver's own iteration limit
        assert "iteration limit" in str(exc) or "max_iter" in str(exc)
        return
    assert not res.converged
    assert "max_iter" in res.message or "iteration" in res.message
    assert kkt_residual(prob, res.X, fuse_tol=res.fuse_tol).kkt_residual > res.kkt_tol
    assert_honest(prob, res)


def test_the_certificate_overrules_a_solver_that_says_optimal():
    """SCS at a loose tolerance says 'optimal'; without the polish its X certifies only to
    ~1e-4, so against kkt_tol = 1e-9 the run is reported as not converged, with the
    numbers."""
    prob = _son(_points(), 0.5)
    res = cfl.solve(prob, method="cvxpy", solver="SCS", tol=1e-3, kkt_tol=1e-9,
                    do_polish=False)
    assert res.status == "optimal"
    assert not res.converged
    assert "exceeds kkt_tol" in res.message
    assert_honest(prob, res)


@pytest.mark.parametrize("method", SOLVE_METHODS)
def test_separable_logistic_without_ridge_has_no_minimiser(method):
    """No minimiser exists: a method either stops and says so, or returns an ε-stationary
    point far away (its norm grows without bound as ε → 0) — never a finite 'optimum'
    close to the ridge solution (docs/guarantees.md)."""
    res = solve_honestly(_logistic(c=0.0, separable=True), method)
    if res is not None and res.converged:
        ridge = solve_honestly(_logistic(c=0.1, separable=True), method)
        assert np.abs(res.X).max() > 20 * np.abs(ridge.X).max()


@pytest.mark.parametrize("method", SOLVE_METHODS)
def test_the_same_input_and_seed_give_the_same_solution(method):
    quadratic_only = method in ("ssnal", "torch")
    prob = _son(_points(), 0.5) if quadratic_only else _logistic()
    options = {"random_state": 7} if method == "pdmm" else {}
    a = cfl.solve(prob, method=method, **options)
    b = cfl.solve(prob, method=method, **options)
    assert np.array_equal(a.X, b.X) and a.kkt_residual == b.kkt_residual


def test_an_answer_from_the_final_polish_says_so():
    """Issue 16, item 7: PDMM on the README example uses all its iterations; the final
    Newton polish of its last partition certifies. converged means "X certified", and the
    stage and message say where X came from."""
    A, _ = cfl.datasets.planted_points(3, 8, 2, separation=20.0, random_state=0)
    prob = _son(A, 0.26)
    res = cfl.solve(prob, method="pdmm", tol=1e-8)
    assert res.n_iter == 5000 and res.converged and res.stage == "final polish"
    assert "max_iter=5000" in res.message and "final Newton polish" in res.message
    assert kkt_residual(prob, res.X, fuse_tol=res.fuse_tol).kkt_residual <= res.kkt_tol
    fast = cfl.solve(prob, method="admm", tol=1e-8)
    assert fast.stage == "iterations" and fast.message == ""
    warm = cfl.solve(prob.with_lam(0.27), method="admm", tol=1e-8, warm_start=fast)
    assert warm.stage == "warm partition" and warm.n_iter == 0
    assert cfl.solve(prob.with_lam(0.0), method="ssnal").stage == "closed form"
    assert cfl.solve(prob, method="cvxpy").stage.startswith("interior point")


# ------------------------------------------------------------------- independence of the clock

def _fast_clock(monkeypatch):
    """Make ``time.perf_counter`` advance 10 s at every call: a machine 'infinitely' loaded."""
    import time

    ticks = iter(range(10**9))
    monkeypatch.setattr(time, "perf_counter", lambda: 10.0 * next(ticks))


@pytest.mark.parametrize("method, options", [("ssnal", {}), ("admm", {"coarsen": True}),
                                             ("pdmm", {"random_state": 0})])
def test_a_solve_gives_the_same_answer_on_a_slow_machine(monkeypatch, method, options):
    """Every decision inside a solve (polish budgets, coarsening attempts) counts work, never
    seconds: the same input gives the same models, residual and iterations whatever the
    clock says (a budget in seconds once changed a theory check's certified residual from
    1.9e-13 to 5.6e-11 when numba's compile cache was empty)."""
    from tests.test_warm_paths import mixture_knn

    prob = mixture_knn(n=400)
    ref = cfl.solve(prob, method=method, tol=1e-8, **options)
    _fast_clock(monkeypatch)
    slow = cfl.solve(prob, method=method, tol=1e-8, **options)
    assert ref.converged and slow.converged
    np.testing.assert_array_equal(slow.X, ref.X)
    assert (slow.kkt_residual, slow.n_iter, slow.stage) == \
        (ref.kkt_residual, ref.n_iter, ref.stage)
    assert slow.history["certify_at"] == ref.history["certify_at"]
