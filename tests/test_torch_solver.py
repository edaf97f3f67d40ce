"""method="torch": network-lasso ADMM in PyTorch, certified by the shared stopping test."""

import subprocess
import sys

import numpy as np
import pytest

import convexfl as cfl
from convexfl.datasets.armacki import planted_points
from convexfl.solvers import IncompatibleLossError

torch = pytest.importorskip("torch")

CUDA = torch.cuda.is_available()
TOL = 1e-6


def _knn(n, k, lam, seed):
    A = np.random.default_rng(seed).standard_normal((n, 3))
    return cfl.SumOfNorms(cfl.losses.Quadratic(A), cfl.graphs.knn(A, k), lam)


def _complete(n, lam_n):
    A, _ = planted_points(4, n // 4, 5, separation=30.0, radius=1.0, random_state=0)
    return cfl.SumOfNorms(cfl.losses.Quadratic(A), cfl.graphs.complete(n), lam_n / n)


def _same_answer(sol, ref, prob):
    assert sol.method == "torch"
    assert sol.converged, sol.message
    assert sol.kkt_residual <= TOL
    assert np.array_equal(sol.labels(), ref.labels())
    scale = 1.0 + np.abs(prob.loss.points).max()
    assert np.abs(sol.X - ref.X).max() <= 1e-4 * scale


@pytest.mark.parametrize("make", [lambda: _complete(40, 12.0), lambda: _complete(40, 4.0),
                                  lambda: _knn(60, 5, 1.0, 0), lambda: _knn(60, 5, 0.3, 1),
                                  lambda: _knn(80, 8, 3.0, 2)])
def test_agrees_with_ssnal_certified(make):
    prob = make()
    ref = cfl.solve(prob, method="ssnal", tol=TOL)
    _same_answer(cfl.solve(prob, method="torch", tol=TOL), ref, prob)


@pytest.mark.parametrize("seed", range(3))
def test_float64_iterates_are_admm_iterates(seed):
    """The vectorised iteration is ADMM's: in float64 it certifies at the same iterations
    as the numba kernel, with the same residuals up to rounding."""
    prob = _knn(50, 4, 0.5 + seed, seed)
    a = cfl.solve(prob, method="admm", tol=TOL)
    t = cfl.solve(prob, method="torch", tol=TOL)
    assert t.n_iter == a.n_iter
    assert t.history["certify_at"] == a.history["certify_at"]
    np.testing.assert_allclose(t.history["r"], a.history["r"], rtol=1e-6, atol=1e-12)
    assert t.history["device"] == "cpu" and t.history["dtype"] == "torch.float64"


def test_warm_start_from_a_solution():
    prob = _knn(60, 5, 1.0, 0)
    first = cfl.solve(prob, method="torch", tol=TOL)
    same = cfl.solve(prob, method="torch", tol=TOL, warm_start=first)
    assert same.converged and same.n_iter == 0 and same.stage == "warm partition"
    nearby = cfl.SumOfNorms(prob.loss, prob.graph, 1.1)
    ref = cfl.solve(nearby, method="ssnal", tol=TOL)
    warm = cfl.solve(nearby, method="torch", tol=TOL, warm_start=first)
    _same_answer(warm, ref, nearby)
    from_x = cfl.solve(nearby, method="torch", tol=TOL, X0=first.X, polish=False)
    _same_answer(from_x, ref, nearby)


def test_other_solvers_warm_start_from_torch():
    prob = _knn(60, 5, 1.0, 0)
    sol = cfl.solve(prob, method="torch", tol=TOL)
    again = cfl.solve(prob, method="ssnal", tol=TOL, warm_start=sol)
    assert again.converged and again.n_iter == 0


def test_float32_stall_polishes_first():
    """Where float32 rounding stalls the residuals, the last candidate's polish comes first;
    here it certifies, so no float64 iteration runs."""
    prob = _knn(100, 5, 0.3, 1)
    sol = cfl.solve(prob, method="torch", dtype="float32", tol=TOL)
    assert sol.history["dtype"] == "torch.float32" and "float64_from" not in sol.history
    assert sol.stage == "final polish" and "stalled" in sol.message
    assert sol.X.dtype == np.float64
    _same_answer(sol, cfl.solve(prob, method="ssnal", tol=TOL), prob)


def test_float32_refines_in_float64_where_it_stalls():
    """Without the polish, the stalled float32 candidate does not certify; the iterations
    go on in float64 from it and certify SSNAL's answer."""
    prob = _knn(100, 5, 0.3, 1)
    sol = cfl.solve(prob, method="torch", dtype=torch.float32, polish=False, tol=TOL)
    switch = sol.history["float64_from"]
    assert 0 < switch < sol.n_iter
    assert sol.history["iter"][-1] == sol.n_iter and switch in sol.history["iter"]
    _same_answer(sol, cfl.solve(prob, method="ssnal", tol=TOL), prob)


def test_float32_refinement_counts_against_max_iter():
    prob = _knn(100, 5, 0.3, 1)
    sol = cfl.solve(prob, method="torch", dtype="float32", polish=False, tol=TOL,
                    max_iter=1000)
    assert sol.history["float64_from"] < sol.n_iter == 1000
    assert not sol.converged and "iteration limit" in sol.message


def test_float32_stall_without_refinement_stops_honestly():
    """With ``refine=False`` (and no polish) float32 rounding stops the residuals short of
    a certificate: the run stops long before max_iter and says why."""
    prob = _knn(100, 5, 0.3, 1)
    sol = cfl.solve(prob, method="torch", dtype=torch.float32, polish=False, refine=False,
                    tol=TOL)
    assert not sol.converged
    assert sol.kkt_residual > TOL
    assert "stalled" in sol.message and "float32" in sol.message and "refine" in sol.message
    assert sol.n_iter < 20000 and "float64_from" not in sol.history


def test_refine_must_be_a_bool():
    with pytest.raises(TypeError, match="refine"):
        cfl.solve(_knn(20, 3, 1.0, 0), method="torch", refine="yes")


def test_reduced_problem_and_closed_form():
    prob = _knn(40, 5, 1.0, 3)
    labels = np.arange(40) % 10
    red = cfl.problems.Reduced(prob.loss, prob.graph, labels, prob.lam)
    sol = cfl.solve(red, method="torch", tol=TOL)
    ref = cfl.solve(red, method="ssnal", tol=TOL)
    assert sol.converged and np.abs(sol.X - ref.X).max() < 1e-5
    zero = cfl.solve(cfl.SumOfNorms(prob.loss, prob.graph, 0.0), method="torch")
    assert zero.converged and zero.stage == "closed form"
    np.testing.assert_allclose(zero.X, prob.loss.points)


def test_torch_threads_restored():
    before = torch.get_num_threads()
    cfl.solve(_knn(30, 4, 1.0, 0), method="torch")
    assert torch.get_num_threads() == before


def test_incompatible_loss():
    X, y, g, _ = cfl.datasets.armacki.planted_classification(2, 3, 5, 2, random_state=0)
    prob = cfl.SumOfNorms(cfl.losses.Logistic(X, y, g, c=0.1), cfl.graphs.complete(6), 0.05)
    with pytest.raises(IncompatibleLossError, match="'torch'.*quadratic"):
        cfl.solve(prob, method="torch")


@pytest.mark.parametrize("opts, match", [
    ({"rho": 0.0}, "rho"), ({"rho": -1.0}, "rho"), ({"alpha": 2.0}, "alpha"),
    ({"alpha": 0.0}, "alpha"), ({"check_every": 0}, "check_every"),
    ({"dtype": "float16"}, "dtype"), ({"device": "tpu"}, "device"), ({"tol": 0.0}, "tol")])
def test_bad_options(opts, match):
    with pytest.raises(ValueError, match=match):
        cfl.solve(_knn(20, 3, 1.0, 0), method="torch", **opts)


@pytest.mark.skipif(CUDA, reason="checks the error raised without CUDA")
def test_cuda_without_cuda_raises_clearly():
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        cfl.solve(_knn(20, 3, 1.0, 0), method="torch", device="cuda")


@pytest.mark.skipif(not CUDA, reason="CUDA is not available")
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_cuda_agrees_with_ssnal(dtype):
    prob = _knn(200, 8, 1.0, 0)
    ref = cfl.solve(prob, method="ssnal", tol=TOL)
    sol = cfl.solve(prob, method="torch", device="cuda", dtype=dtype, tol=TOL)
    assert sol.history["device"].startswith("cuda")
    _same_answer(sol, ref, prob)


@pytest.mark.skipif(not CUDA, reason="CUDA is not available")
def test_cuda_float32_refines_in_float64_where_it_stalls():
    prob = _knn(100, 5, 0.3, 1)
    sol = cfl.solve(prob, method="torch", device="cuda", dtype="float32", polish=False,
                    tol=TOL)
    assert 0 < sol.history["float64_from"] < sol.n_iter
    _same_answer(sol, cfl.solve(prob, method="ssnal", tol=TOL), prob)


def _run(code):
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout


def test_import_does_not_load_torch():
    out = _run("import sys, convexfl, convexfl.solvers, convexfl.solvers.admm; "
               "print('torch' in sys.modules)")
    assert out.strip() == "False"


def test_without_torch_a_clear_import_error():
    code = ("import sys; sys.modules['torch'] = None\n"
            "import numpy as np, convexfl as cfl\n"
            "A = np.arange(12.0).reshape(6, 2)\n"
            "p = cfl.SumOfNorms(cfl.losses.Quadratic(A), cfl.graphs.complete(6), 0.1)\n"
            "print(cfl.solve(p, method='admm').converged)\n"
            "try:\n    cfl.solve(p, method='torch')\n"
            "except ImportError as e:\n    print('ERR', e)\n")
    out = _run(code)
    assert out.startswith("True\nERR")
    assert "pip install 'convexfl[torch]'" in out


def test_benchmark_case_runs(monkeypatch, tmp_path):
    from benchmarks import torch_son

    monkeypatch.setattr(torch_son, "instances", lambda quick: [("tiny", _knn(30, 4, 1.0, 0))])
    rows = torch_son.run(quick=True, out=str(tmp_path))
    assert {r["contender"] for r in rows} >= {"ssnal", "admm", "torch cpu f64", "torch cpu f32"}
    assert all(r["certified"] and r["kkt"] <= TOL for r in rows if "f32" not in r["contender"])
    assert (tmp_path / "torch_results.json").exists()
    assert (tmp_path / "torch_time_vs_n.png").exists()


def test_a_stalled_run_certified_without_polish_says_so():
    """With ``polish=False`` no Newton step runs after the stall: where the last candidate
    certifies as it is, the message says that, not that a polish made it."""
    prob = _knn(60, 5, 1.0, 0)
    sol = cfl.solve(prob, method="torch", dtype="float32", polish=False, refine=False,
                    tol=TOL)
    assert sol.converged and sol.stage == "final polish"
    assert "stalled" in sol.message and "the last candidate" in sol.message
    assert "Newton" not in sol.message
