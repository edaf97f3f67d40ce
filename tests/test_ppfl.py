"""PPFL for GLMs: the objective and its gradients, the federated algorithms (Algorithms 1 and
3), the exact block solvers, the estimator, and the data generators."""

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sklearn.base import clone

import convexfl as cfl
from convexfl.datasets.ppfl import digits_label_groups, synthetic_mixture
from convexfl.federated import fedavg_least_squares, run_federated
from convexfl.ppfl import (
    PPFL,
    PPFLProblem,
    alternating,
    cosine_label_affinity,
    criteria,
    default_steps,
    exact_bcd,
    mirror_step,
    rbcd,
    solve_memberships,
    solve_theta,
)

FAMILIES = ["gaussian", "binomial", "poisson"]


def _targets(family, rng, n):
    if family == "gaussian":
        return rng.normal(size=n)
    if family == "binomial":
        return rng.integers(0, 2, n).astype(float)
    return rng.poisson(2.0, n).astype(float)


def _problem(family="gaussian", form="parameter", n=5, m=12, K=3, dP=3, dS=2, lam=0.3,
             seed=0, affinity="uniform", alpha=0.1):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n * m, dP + dS)) * (0.4 if family == "poisson" else 1.0)
    return PPFLProblem(X[:, :dP], _targets(family, rng, n * m), np.repeat(np.arange(n), m),
                       n_components=K, X_shared=X[:, dP:] if dS else None, family=family,
                       form=form, lam=lam, affinity=affinity, alpha=alpha)


def _point(problem, seed=1):
    rng = np.random.default_rng(seed)
    return (0.5 * rng.normal(size=(problem.n_components, problem.d_personal)),
            0.5 * rng.normal(size=problem.d_shared),
            rng.dirichlet(np.ones(problem.n_components), size=problem.n_clients))


def _match(P, T):
    """Mean total-variation distance between memberships, best permutation of components."""
    return min(0.5 * np.abs(P[:, list(p)] - T).sum(axis=1).mean()
               for p in itertools.permutations(range(T.shape[1])))


@pytest.fixture(scope="module")
def mixture():
    return synthetic_mixture(20, 3, 5, n_samples=150, noise_level=0.1, random_state=1)


# ----------------------------------------------------------------------------- objective


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("form", ["parameter", "output"])
@pytest.mark.parametrize("laplacian", ["laplacian", "degree_only"])
def test_gradient_matches_finite_differences(family, form, laplacian):
    prob = _problem(family, form)
    Theta, omega, Pi = _point(prob)
    grads = prob.gradient(Theta, omega, Pi, laplacian)
    for which, g in enumerate(grads):
        point = [Theta, omega, Pi]
        num = np.zeros_like(g)
        for idx in np.ndindex(g.shape):
            e = np.zeros_like(g)
            e[idx] = 1e-6
            hi = point.copy()
            hi[which] = point[which] + e
            lo = point.copy()
            lo[which] = point[which] - e
            num[idx] = (prob.objective(*hi, laplacian) - prob.objective(*lo, laplacian)) / 2e-6
        np.testing.assert_allclose(g, num, atol=1e-7)


def test_gaussian_output_form_equals_parameter_form():
    a, b = _problem("gaussian", "parameter"), _problem("gaussian", "output")
    pt = _point(a)
    assert a.objective(*pt) == pytest.approx(b.objective(*pt), rel=1e-13)


def test_penalty_is_the_laplacian_quadratic_form():
    W = np.random.default_rng(3).uniform(size=(5, 5))
    prob = _problem(affinity=W + W.T)
    Pi = _point(prob)[2]
    pairs = sum(prob.A[i, j] * np.sum((Pi[i] - Pi[j]) ** 2)
                for i in range(5) for j in range(5))
    assert prob.penalty(Pi) == pytest.approx(0.5 * prob.lam * pairs, rel=1e-13)
    assert prob.penalty(Pi, "degree_only") == pytest.approx(
        prob.lam * np.sum(prob.degrees * np.sum(Pi ** 2, axis=1)), rel=1e-13)


def test_mm_surrogate_majorises_and_touches():
    """Paper (20) with a PSD affinity (cosine similarity of label histograms)."""
    rng = np.random.default_rng(0)
    labels, groups = rng.integers(0, 4, 200), np.repeat(np.arange(8), 25)
    A = cosine_label_affinity(labels, groups)
    assert np.linalg.eigvalsh(A)[0] > -1e-12
    prob = PPFLProblem(rng.normal(size=(200, 2)), rng.normal(size=200), groups,
                       n_components=3, lam=0.7, affinity=A)
    Pt = rng.dirichlet(np.ones(3), size=8)
    assert prob.surrogate(Pt, Pt) == pytest.approx(prob.penalty(Pt), rel=1e-12)
    for _ in range(20):
        P = rng.dirichlet(np.ones(3), size=8)
        assert prob.surrogate(P, Pt) >= prob.penalty(P) - 1e-12


# ----------------------------------------------------------------------------- mirror step


@given(seed=st.integers(0, 10_000), K=st.integers(1, 6), step=st.floats(1e-3, 50.0),
       kind=st.sampled_from(["entropic", "double_exp"]),
       floor=st.sampled_from([0.0, 1e-8, 1e-3]), scale=st.floats(1e-3, 1e3))
def test_mirror_step_stays_on_the_simplex(seed, K, step, kind, floor, scale):
    rng = np.random.default_rng(seed)
    pi = rng.dirichlet(np.ones(K), size=4)
    out = mirror_step(pi, scale * rng.normal(size=(4, K)), step, kind=kind, floor=floor)
    assert np.all(np.isfinite(out))
    np.testing.assert_allclose(out.sum(axis=1), 1.0, atol=1e-12)
    assert np.all(out >= floor / (1 + K * floor) - 1e-15)


def test_entropic_step_is_exponentiated_gradient():
    pi, g = np.array([0.2, 0.3, 0.5]), np.array([1.0, -2.0, 0.5])
    w = pi * np.exp(-0.4 * g)
    np.testing.assert_allclose(mirror_step(pi, g, 0.4), w / w.sum(), rtol=1e-14)
    v = pi * np.exp(np.exp(-0.4 * g))  # the authors' code
    np.testing.assert_allclose(mirror_step(pi, g, 0.4, kind="double_exp"), v / v.sum(),
                               rtol=1e-14)


@given(seed=st.integers(0, 1000), lam=st.sampled_from([0.0, 1e-2, 10.0]),
       solver=st.sampled_from(["alternating", "rbcd"]),
       laplacian=st.sampled_from(["laplacian", "degree_only"]),
       form=st.sampled_from(["parameter", "output"]))
def test_memberships_stay_on_the_simplex_every_round(seed, lam, solver, laplacian, form):
    prob = _problem("binomial", form, n=4, m=8, K=3, lam=lam, seed=seed)
    init = prob.initial_point(np.random.default_rng(seed), 1.0)
    make = alternating if solver == "alternating" else rbcd
    alg = make(prob, init=init, theta_step=1.0, pi_step=5.0, laplacian=laplacian,
               record=False)
    seen = []

    def check(record, state, clients):
        seen.append(state["Pi"].copy())

    run_federated(alg, prob.client_data(), rounds=6, random_state=seed, callback=check,
                  progress=False)
    Pis = np.array(seen)
    assert np.all(Pis > 0)
    np.testing.assert_allclose(Pis.sum(axis=-1), 1.0, atol=1e-12)


# ----------------------------------------------------------------------------- algorithms


@pytest.mark.parametrize("solver", ["alternating", "rbcd"])
def test_algorithms_decrease_the_objective(mixture, solver):
    d = mixture
    model = PPFL(3, family="binomial", form="output", lam=1e-3, solver=solver, rounds=40,
                 local_steps=2, alpha=1e-4, init_scale=1.0, random_state=0)
    model.fit(d.X, d.y, d.groups)
    h = model.history_
    obj = np.array([h.initial_metrics["objective"]] + [r.metrics["objective"] for r in h])
    assert obj[-1] < obj[0] - 0.05
    assert np.all(np.diff(obj) <= 1e-12)  # monotone with the default ("auto") steps
    last = h.records[-1].metrics
    for key in ("grad_theta", "pi_gap", "objective_degree_only", "block"):
        assert key in last
    if solver == "rbcd":
        assert {r.metrics["block"] for r in h} == {0, 1}


def test_synthetic_mixture_memberships_approach_the_truth(mixture):
    d = mixture
    model = PPFL(3, family="binomial", form="output", lam=1e-4, rounds=100, theta_step=20.0,
                 pi_step=2.0, local_steps=5, alpha=1e-4, init_scale=1.0, random_state=0)
    model.fit(d.X, d.y, d.groups)
    dist = _match(model.memberships_, d.memberships)
    uniform = _match(np.full_like(d.memberships, 1 / 3), d.memberships)
    print(f"membership recovery: mean TV distance {dist:.3f} (uniform memberships: "
          f"{uniform:.3f})")
    assert dist < 0.08 < 0.3 < uniform


def test_true_laplacian_and_degree_only_objectives_are_reported(mixture):
    d = mixture
    kw = dict(family="binomial", form="output", lam=1e-3, rounds=100, theta_step=20.0,
              pi_step=2.0, local_steps=5, alpha=1e-4, init_scale=1.0, random_state=0)
    paper = PPFL(3, laplacian="laplacian", **kw).fit(d.X, d.y, d.groups)
    authors = PPFL(3, laplacian="degree_only", **kw).fit(d.X, d.y, d.groups)
    gap = _match(paper.memberships_, authors.memberships_)
    print(f"paper model (L, entropic):       F_L = {paper.objective_:.5f}, "
          f"F_D = {paper.objective_degree_only_:.5f}, TV to truth "
          f"{_match(paper.memberships_, d.memberships):.3f}\n"
          f"authors' code (D, double exp):   F_L = {authors.objective_:.5f}, "
          f"F_D = {authors.objective_degree_only_:.5f}, TV to truth "
          f"{_match(authors.memberships_, d.memberships):.3f}\n"
          f"memberships apart by mean TV {gap:.3f}")
    for m in (paper, authors):
        assert np.isfinite(m.objective_) and np.isfinite(m.objective_degree_only_)
        assert m.objective_degree_only_ >= m.objective_ - 1e-12  # tr(ΠᵀDΠ) ≥ tr(ΠᵀLΠ)
    assert paper.objective_ <= authors.objective_ + 1e-9
    assert authors.objective_degree_only_ <= paper.objective_degree_only_ + 1e-9


def test_partial_participation_and_dropout_run(mixture):
    d = mixture
    prob = PPFLProblem(d.X, d.y, d.groups, n_components=3, family="binomial", form="output",
                       lam=1e-3, affinity="cosine_labels", alpha=1e-4)
    alg = rbcd(prob, init=prob.initial_point(np.random.default_rng(0), 1.0), local_steps=2,
               batch_size=32)
    res = run_federated(alg, prob.client_data(), rounds=15, participation=0.5, dropout=0.2,
                        random_state=3, progress=False)
    assert res.history.records[-1].metrics["objective"] < res.history.initial_metrics[
        "objective"]
    np.testing.assert_allclose(res.server_state["Pi"].sum(axis=1), 1.0, atol=1e-12)


def test_k1_reduces_to_fedavg():
    """K = 1: π_i ≡ 1, no penalty, one model: the alternating algorithm is FedAvg."""
    rng = np.random.default_rng(0)
    data = [(rng.normal(size=(15 + 5 * i, 3)), rng.normal(size=15 + 5 * i)) for i in range(4)]
    X = np.vstack([a for a, _ in data])
    y = np.concatenate([b for _, b in data])
    groups = np.repeat(np.arange(4), [len(b) for _, b in data])
    fed = run_federated(fedavg_least_squares(3, step=0.1, local_steps=3), data, rounds=30,
                        random_state=0, progress=False)
    prob = PPFLProblem(X, y, groups, n_components=1, lam=5.0)
    alg = alternating(prob, init=(np.zeros((1, 3)), None, np.ones((4, 1))), theta_step=0.1,
                      local_steps=3)
    ours = run_federated(alg, prob.client_data(), rounds=30, random_state=0, progress=False)
    np.testing.assert_allclose(ours.server_state["Theta"][0], fed.server_state["x"],
                               rtol=1e-12, atol=1e-14)
    pooled = np.linalg.lstsq(X, y, rcond=None)[0]
    model = PPFL(1, lam=5.0, affinity="uniform", solver="exact_bcd").fit(X, y, groups)
    np.testing.assert_allclose(model.canonical_models_[0], pooled, atol=1e-10)
    np.testing.assert_allclose(model.personal_coefficients_, np.tile(pooled, (4, 1)),
                               atol=1e-10)


# ----------------------------------------------------------------------------- exact blocks


def test_exact_theta_block_matches_cvxpy():
    cp = pytest.importorskip("cvxpy")
    prob = _problem("binomial", "parameter", n=5, m=15, alpha=0.05)
    _, _, Pi = _point(prob)
    sol = solve_theta(prob, Pi)
    T = cp.Variable((prob.n_components, prob.d_personal))
    w = cp.Variable(prob.d_shared)
    t = prob.F_S @ w + cp.sum(cp.multiply(prob.F_P, Pi[prob.client_of_sample] @ T), axis=1)
    obj = (prob.weights @ cp.logistic(-cp.multiply(prob.y, t))
           + prob.alpha / 2 * (cp.sum_squares(T) + cp.sum_squares(w)))
    ref = cp.Problem(cp.Minimize(obj))
    ref.solve(solver="CLARABEL")
    assert ref.status == "optimal"
    assert sol.status == "optimal"
    assert sol.objective - prob.penalty(Pi) == pytest.approx(ref.value, abs=1e-7)
    np.testing.assert_allclose(sol.Theta, T.value, atol=1e-4)


def test_exact_theta_refuses_the_nonconvex_block():
    prob = _problem("binomial", "output")
    with pytest.raises(ValueError, match="form"):
        solve_theta(prob, _point(prob)[2])


@pytest.mark.parametrize("family,form", [("gaussian", "parameter"), ("binomial", "output"),
                                         ("poisson", "output"), ("poisson", "parameter")])
def test_mirror_descent_reaches_the_exact_membership_block(family, form):
    prob = _problem(family, form, lam=0.05, alpha=0.0)
    Theta, omega, Pi = _point(prob)
    exact = solve_memberships(prob, Theta, omega)
    assert exact.status == "optimal"
    eta = default_steps(prob, Theta, omega, Pi)[1]
    for _ in range(3000):  # the π-step (21) with full gradients and Θ, ω fixed
        g = prob.gradient(Theta, omega, Pi)[2] / prob.p[:, None]
        Pi = mirror_step(Pi, g, eta)
    gap = prob.objective(Theta, omega, Pi) - exact.objective
    assert -1e-8 <= gap <= 1e-5
    assert criteria(prob, Theta, omega, Pi, pi_step=eta)["pi_gap"] < 1e-3


def test_exact_bcd_is_monotone():
    prob = _problem("gaussian", "parameter", n=6, m=15, lam=0.1)
    res = exact_bcd(prob, *prob.initial_point(np.random.default_rng(0), 1.0), max_iter=15)
    assert np.all(np.diff(res.history) <= 1e-9)
    assert res.history[-1] < res.history[0]


@given(seed=st.integers(0, 10_000))
def test_huge_lambda_equalises_memberships_of_connected_clients(seed):
    rng = np.random.default_rng(seed)
    n = 6
    A = rng.uniform(0.1, 1.0, size=(n, n)) * (rng.uniform(size=(n, n)) < 0.6)
    A = np.triu(A, 1)
    A[np.arange(n - 1), np.arange(1, n)] += 0.5  # a path: connected
    A = A + A.T
    prob = _problem("gaussian", "parameter", n=n, m=10, lam=1e5, seed=seed, affinity=A)
    Theta, omega, _ = _point(prob, seed)
    Pi = solve_memberships(prob, Theta, omega).Pi
    assert np.max(np.ptp(Pi, axis=0)) < 1e-4
    small = solve_memberships(_problem("gaussian", "parameter", n=n, m=10, lam=1e-6,
                                       seed=seed, affinity=A), Theta, omega).Pi
    assert np.max(np.ptp(small, axis=0)) > np.max(np.ptp(Pi, axis=0))


def test_huge_lambda_equalises_within_components_in_federated_runs():
    """Label-group split of digits: the cosine affinity has one component per label group."""
    s = digits_label_groups(9, 3, random_state=0)
    y = (s.y % 2).astype(float)
    model = PPFL(2, family="binomial", lam=1e4, rounds=30, random_state=0,
                 affinity=cosine_label_affinity(s.y, s.groups)).fit(s.X[:, ::4], y, s.groups)
    for k in range(3):
        members = model.memberships_[s.client_group == k]
        assert np.max(np.ptp(members, axis=0)) < 1e-6


# ----------------------------------------------------------------------------- estimator


def test_estimator_manners(mixture):
    d = mixture
    model = PPFL(3, family="binomial", form="output", rounds=5, random_state=7)
    assert model.get_params()["rounds"] == 5 and not hasattr(model, "memberships_")
    assert model.fit(d.X, d.y, d.groups) is model
    again = clone(model).fit(d.X, d.y, d.groups)
    np.testing.assert_array_equal(model.memberships_, again.memberships_)
    assert model.memberships_.shape == (20, 3)
    assert model.canonical_models_.shape == (3, 5)
    assert model.personal_coefficients_.shape == (20, 5)
    p = model.predict(d.X[:10], d.groups[:10])
    assert p.shape == (10,) and np.all((p > 0) & (p < 1))


def test_shared_columns_and_personal_coefficients():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 3))
    groups = np.repeat(np.arange(4), 20)
    y = X @ np.array([1.0, -1.0, 0.5]) + 0.1 * rng.normal(size=80)
    model = PPFL(2, lam=0.0, shared=[0], solver="exact_bcd", random_state=0,
                 affinity="uniform").fit(X, y, groups)
    assert model.shared_coef_.shape == (1,) and model.canonical_models_.shape == (2, 2)
    np.testing.assert_allclose(model.personal_coefficients_[:, 0], model.shared_coef_[0])
    np.testing.assert_allclose(model.personal_coefficients_[:, 1:],
                               model.memberships_ @ model.canonical_models_)
    np.testing.assert_allclose(model.predict(X, groups),
                               np.sum(X * model.personal_coefficients_[groups], axis=1))


def test_poisson_family_fits():
    rng = np.random.default_rng(1)
    X = 0.3 * rng.normal(size=(120, 2))
    groups = np.repeat(np.arange(6), 20)
    y = rng.poisson(np.exp(X @ np.array([1.0, -0.5]) + 0.5)).astype(float)
    X1 = np.c_[np.ones(120), X]
    model = PPFL(2, family="poisson", rounds=30, affinity="uniform", random_state=0)
    model.fit(X1, y, groups)
    h = model.history_
    assert h.records[-1].metrics["objective"] < h.initial_metrics["objective"]


@pytest.mark.parametrize("kwargs,match", [
    ({"family": "gamma"}, "family"), ({"form": "mixture"}, "form"), ({"lam": -1.0}, "lam"),
    ({"n_components": 0}, "n_components"), ({"laplacian": "true"}, "laplacian"),
    ({"solver": "sgd"}, "solver"), ({"affinity": np.ones((3, 3))}, "affinity"),
    ({"affinity": "knn"}, "affinity"), ({"shared": [7]}, "shared"), ({"rounds": 0}, "rounds"),
    ({"mirror": "euclid"}, "mirror"), ({"floor": 2.0}, "floor"), ({"alpha": -1.0}, "alpha"),
    ({"theta_step": -1.0}, "theta_step"), ({"local_steps": 0}, "local_steps"),
])
def test_bad_arguments_raise_value_errors_naming_them(kwargs, match):
    rng = np.random.default_rng(0)
    X, y, groups = rng.normal(size=(40, 3)), rng.normal(size=40), np.repeat(np.arange(4), 10)
    with pytest.raises(ValueError, match=match):
        PPFL(**{"n_components": 2, "rounds": 2, **kwargs}).fit(X, y, groups)


def test_bad_data_raise_value_errors_naming_them():
    rng = np.random.default_rng(0)
    X, groups = rng.normal(size=(40, 3)), np.repeat(np.arange(4), 10)
    with pytest.raises(ValueError, match="y"):
        PPFL(2, family="binomial", rounds=2).fit(X, rng.normal(size=40), groups)
    with pytest.raises(ValueError, match="y"):
        PPFL(2, family="poisson", rounds=2).fit(X, -np.ones(40), groups)
    with pytest.raises(ValueError, match="groups"):
        PPFL(2, rounds=2).fit(X, rng.normal(size=40), groups[:10])
    with pytest.raises(ValueError, match="X"):
        PPFL(2, rounds=2).fit(X[:, 0], rng.normal(size=40), groups)
    model = PPFL(2, rounds=2, affinity="uniform").fit(X, rng.normal(size=40), groups)
    with pytest.raises(ValueError, match="groups"):
        model.predict(X[:3], np.array([0, 1, 9]))
    prob = _problem()
    with pytest.raises(ValueError, match="Pi"):
        prob.objective(*_point(prob)[:2], np.ones((2, 2)))
    with pytest.raises(ValueError, match="problem"):
        alternating(PPFLProblem(X, rng.normal(size=40), groups, n_components=2,
                                simplex=False), init=(np.zeros((2, 3)), None, np.zeros((4, 2))))


# ----------------------------------------------------------------------------- data


def test_synthetic_mixture_is_seeded_and_consistent():
    a = synthetic_mixture(10, 3, 4, random_state=5)
    b = synthetic_mixture(10, 3, 4, random_state=5)
    np.testing.assert_array_equal(a.X, b.X)
    np.testing.assert_array_equal(a.y, b.y)
    np.testing.assert_allclose(a.memberships.sum(axis=1), 1.0)
    assert set(np.unique(a.y)) <= {0.0, 1.0}
    sizes = np.bincount(a.groups)
    assert np.all((sizes >= 50) & (sizes <= 1000))  # Marfoq et al.'s sizes
    t = np.sum(a.X * a.components[a.component], axis=1)
    assert np.mean((t > 0) == (a.y == 1)) > 0.95  # each sample labelled by its own group
    g = synthetic_mixture(5, 2, 3, n_samples=40, family="gaussian", noise_level=0.0,
                          random_state=0)
    np.testing.assert_allclose(g.y, np.sum(g.X * g.components[g.component], axis=1))
    with pytest.raises(ValueError, match="alpha"):
        synthetic_mixture(alpha=0.0)
    with pytest.raises(ValueError, match="n_samples"):
        synthetic_mixture(n_samples=0)


def test_digits_label_groups_are_pathological():
    s = digits_label_groups(30, 3, random_state=0)
    assert sorted(np.concatenate(s.label_groups).tolist()) == list(range(10))
    assert sorted(len(g) for g in s.label_groups) == [3, 3, 4]
    assert np.array_equal(np.bincount(s.client_group), [10, 10, 10])
    for c in range(30):
        assert set(np.unique(s.y[s.groups == c])) <= set(s.label_groups[s.client_group[c]])
    sizes = np.bincount(s.groups)
    for k in range(3):
        sz = sizes[s.client_group == k]
        assert sz.max() - sz.min() <= 1
    assert len(s.y) == 1797
    A = cosine_label_affinity(s.y, s.groups)
    across = s.client_group[:, None] != s.client_group[None, :]
    assert np.all(A[across] == 0) and np.all(A[~across] > 0.5)
    again = digits_label_groups(30, 3, random_state=0)
    np.testing.assert_array_equal(s.X, again.X)
    with pytest.raises(ValueError, match="label_groups"):
        digits_label_groups(6, label_groups=[[0, 1], [1, 2]])
    with pytest.raises(ValueError, match="n_clients"):
        digits_label_groups(2, 3)


def test_package_exports():
    assert cfl.ppfl.PPFL is PPFL
    assert cfl.datasets.synthetic_mixture is synthetic_mixture
    assert callable(cfl.ppfl.fit_mixed_model)
