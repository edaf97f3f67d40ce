"""PDMM (Armacki et al. Algorithm 1): Fig. 5's shape, messages, freezing, options."""

import numpy as np
import pytest
from helpers import make_loss, reference

import convexfl as cfl
from convexfl.datasets.armacki import armacki_ellipses
from convexfl.solvers.pdmm import PAPER_DEFAULTS


@pytest.fixture(scope="module")
def paper_problem():
    """App. C: 3 clusters × 10 users, 85 % of the cluster's points each, squared hinge with
    c = 1e-3, λ = 0.02 in the paper's eq. (3) convention."""
    data = armacki_ellipses(users_per_cluster=10, samples_per_user=170, random_state=0)
    loss = cfl.losses.SquaredHinge(data["X"], data["y"], data["groups"], c=1e-3)
    prob = cfl.SumOfNorms(loss, cfl.graphs.complete(loss.n_users), 0.02, convention="eq3")
    return prob, reference(prob, tol=1e-9)


def moving_average(x, w):
    return np.convolve(x, np.ones(w) / w, mode="valid")


@pytest.mark.parametrize("splitting", ["ordered", "upper"])
def test_objective_gap_decreases_like_fig5(paper_problem, splitting):
    prob, ref = paper_problem
    res = cfl.solve(prob, method="pdmm", tol=1e-30, max_iter=600, random_state=0,
                    splitting=splitting, **{k: v for k, v in PAPER_DEFAULTS.items()
                                            if k not in ("splitting", "zero_start")})
    gap = np.array(res.history["objective"]) - ref.objective
    assert gap.shape == (600,)
    assert gap[0] > 0.1 and gap[-1] < 1e-2 * gap[0]
    assert np.all(gap > -1e-9)  # F(x^t) ≥ F*
    ma = moving_average(gap, 25)
    increases = np.maximum(np.diff(ma), 0.0).sum()
    assert increases < 0.05 * (ma[0] - ma[-1])  # roughly monotone
    assert not res.converged and "max_iter=600" in res.message


def test_message_accounting_follows_the_paper(paper_problem):
    prob, _ = paper_problem
    n = prob.n_users
    res = cfl.solve(prob, method="pdmm", tol=1e-30, max_iter=20, random_state=1)
    sel = round(0.4 * n)
    up = np.array(res.history["uplink"])
    down = np.array(res.history["downlink"])
    # ordered pairs on a complete graph: each selected user owns n − 1 z's and duals
    assert np.all(up == sel * n)  # its x and its n − 1 z's
    assert np.all(down == up + sel * (n - 1))  # S_P + S_D
    assert res.history["messages"]["uplink"] == up.sum()
    res = cfl.solve(prob, method="pdmm", tol=1e-30, max_iter=20, random_state=1,
                    splitting="upper")
    assert np.sum(res.history["uplink"]) < up.sum()


def test_freezing_reports_savings(paper_problem):
    prob, ref = paper_problem
    res = cfl.solve(prob, method="pdmm", tol=1e-30, max_iter=400, random_state=0,
                    freeze_after=20)
    msg = res.history["messages"]
    assert msg["uplink_saved"] > 0 and msg["downlink_saved"] > 0
    assert res.history["n_frozen"][-1] > 0
    plain = cfl.solve(prob, method="pdmm", tol=1e-30, max_iter=400, random_state=0)
    assert msg["uplink"] < plain.history["messages"]["uplink"]
    # the certificate still judges the result
    assert res.kkt_residual <= 1e-8 and abs(res.objective - ref.objective) < 1e-6


def test_seeded_runs_are_reproducible():
    prob = cfl.SumOfNorms(make_loss("logistic", n_users=6), cfl.graphs.complete(6), 0.1)
    a = cfl.solve(prob, method="pdmm", max_iter=50, tol=1e-30, random_state=3, polish=False)
    b = cfl.solve(prob, method="pdmm", max_iter=50, tol=1e-30, random_state=3, polish=False)
    assert a.history["objective"] == b.history["objective"]


def test_truncated_run_is_not_converged():
    prob = cfl.SumOfNorms(make_loss("logistic", n_users=6), cfl.graphs.complete(6), 0.1)
    res = cfl.solve(prob, method="pdmm", max_iter=5, tol=1e-12, polish=False)
    assert not res.converged and "iteration limit" in res.message and res.n_iter == 5


@pytest.mark.parametrize("option, value, exc", [
    ("fraction", 0.0, ValueError), ("fraction", 1.5, ValueError), ("rho", 0.0, ValueError),
    ("eta", -1.0, ValueError), ("eta_z", -1.0, ValueError), ("tau", 0.0, ValueError),
    ("nu", -0.1, ValueError), ("splitting", "both", ValueError),
    ("freeze_after", 0, ValueError), ("zero_start", "no", TypeError),
    ("check_every", 0, ValueError), ("max_iter", 0, ValueError), ("tol", 0.0, ValueError),
    ("random_state", "seed", ValueError), ("x_update", "paper", ValueError),
])
def test_bad_options_raise_errors_naming_the_argument(option, value, exc):
    prob = cfl.SumOfNorms(make_loss("quadratic", n_users=4), cfl.graphs.complete(4), 0.1)
    with pytest.raises(exc, match=option):
        cfl.solve(prob, method="pdmm", **{option: value})


def test_divergence_is_an_error_not_a_result():
    A = np.random.default_rng(0).standard_normal((6, 2))
    prob = cfl.SumOfNorms(cfl.losses.Quadratic(A), cfl.graphs.complete(6), 1.0)
    with pytest.raises(cfl.SolverError, match="pdmm diverged: non-finite iterates"):
        cfl.solve(prob, method="pdmm", tau=3.0, random_state=0, max_iter=2000)


def test_printed_update_needs_ordered_pairs():
    prob = cfl.SumOfNorms(make_loss("quadratic", n_users=4), cfl.graphs.complete(4), 0.1)
    with pytest.raises(ValueError, match="x_update"):
        cfl.solve(prob, method="pdmm", x_update="printed", splitting="upper")


def test_printed_update_with_every_user_solves_half_the_lambda():
    """Eq. (16) as printed, every user each iteration: μ_ji = −μ_ij stays exact and it is
    generic PDMM at λ/2 (armacki.pdmm_printed); the generic update solves λ itself. Data
    far from the origin: ``history["X_last"]`` comes back in the user's units."""
    A = 50.0 + np.random.default_rng(1).standard_normal((6, 2)) * [3.0, 1.0]
    prob = cfl.SumOfNorms(cfl.losses.Quadratic(A), cfl.graphs.complete(6), 0.4)
    last = {}
    for upd in ("generic", "printed"):
        res = cfl.solve(prob, method="pdmm", x_update=upd, fraction=1.0, max_iter=3000,
                        tol=1e-300, polish=False, check_every=3000, random_state=0)
        last[upd] = res.history["X_last"]
    for upd, lam in (("generic", 0.4), ("printed", 0.2)):
        X = cfl.solve(prob.with_lam(lam), tol=1e-10).X
        assert np.linalg.norm(last[upd] - X) <= 1e-6 * np.linalg.norm(X), upd
    assert np.linalg.norm(last["printed"] - last["generic"]) > 0.1


def test_printed_update_with_every_user_is_generic_pdmm_at_half_lambda_iterate_for_iterate():
    """With every user, μ_ji = −μ_ij stays exact and (16) at (λ, ρ, η_x, η_z) is generic
    PDMM at (λ/2, ρ/2, η_x, η_z/2): the same iterates, up to rounding (one iteration moves
    them by ~1e-2 here)."""
    A = np.random.default_rng(2).standard_normal((5, 3))
    prob = cfl.SumOfNorms(cfl.losses.Quadratic(A), cfl.graphs.complete(5), 0.3)
    kw = dict(method="pdmm", fraction=1.0, max_iter=37, tol=1e-300, polish=False,
              check_every=37, random_state=0)
    printed = cfl.solve(prob, x_update="printed", rho=10.0, eta=10.0, **kw)
    generic = cfl.solve(prob.with_lam(0.15), rho=5.0, eta=10.0, eta_z=5.0, **kw)
    assert np.allclose(printed.history["X_last"], generic.history["X_last"], rtol=0,
                       atol=1e-13)
    partial = cfl.solve(prob, x_update="printed", rho=10.0, eta=10.0,
                        **{**kw, "fraction": 0.4})
    assert not np.allclose(partial.history["X_last"], generic.history["X_last"])
