"""λ-bounds: the exact recovery interval and fusion threshold against the reference solver,
and the theorem intervals inside them (docs/math.md §1.3–1.4)."""

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import convexfl as cfl
from convexfl import bounds as B
from convexfl.solvers import SolverError

# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------

def reference(prob, lam, tol=1e-8):
    """The reference solution at λ (a looser interior-point tolerance if the tight one stops
    at 'optimal_inaccurate'; the polish and the certificate do the rest)."""
    for t in sorted({tol, 1e-8, 1e-7, 1e-6}):
        if t < tol:
            continue
        try:
            return cfl.solve(prob.with_lam(lam), method="cvxpy", tol=t)
        except SolverError:
            continue
    raise AssertionError(f"the reference solver failed at λ = {lam}")  # pragma: no cover


def son_labels(prob, lam):
    return reference(prob, lam).labels()


def recovers(prob, lam, truth):
    return cfl.clusters.same_partition(son_labels(prob, lam), truth)


def all_fused(prob, lam):
    """Whether the fused global model solves (SON) at λ, judged by the reference solver: a
    solver iterate with a lower objective than the fused model proves it is not optimal.
    (Near λ̂ the interior-point iterate is within ~1e-5 of fused but not exactly fused, so
    its clusters are a noisier test than its objective.)"""
    ystar = cfl.solve(cfl.global_model(prob.loss), method="cvxpy", tol=1e-10).X[0]
    p = prob.with_lam(lam)
    fused = p.objective(np.tile(ystar, (prob.n_users, 1)))
    sol = reference(prob, lam, tol=1e-10)
    return bool(sol.objective >= fused - 1e-12 * (1.0 + abs(fused)))


def quadratic_problem(A):
    return cfl.SumOfNorms(cfl.losses.Quadratic(A), cfl.graphs.complete(len(A)), 0.0)


planted = st.tuples(st.integers(2, 3), st.integers(2, 4), st.integers(1, 2),
                    st.integers(0, 10_000))


def planted_quadratic(spec):
    k, m, d, seed = spec
    A, truth = cfl.datasets.planted_points(k, m, d, separation=12.0, radius=1.0,
                                           random_state=seed)
    return quadratic_problem(A), truth


def classification_problem(loss_cls, seed, *, users=3, samples=100):
    X, y, groups, truth = cfl.datasets.planted_classification(
        3, users, samples, 2, flip=0.0, random_state=seed)
    loss = loss_cls.from_groups(X, y, groups, c=0.01)
    return cfl.SumOfNorms(loss, cfl.graphs.complete(loss.n_users), 0.0), truth


# ---------------------------------------------------------------------------------------------
# the Bound value object
# ---------------------------------------------------------------------------------------------

def test_bound_reports_number_or_interval_and_is_json_ready():
    num = B.Bound("x", "exact", 2.0, 2.0, inputs={"a": np.arange(3), "_big": np.ones(9)})
    assert num.value == 2.0 and num.kind == "exact" and num.is_number
    iv = B.Bound("y", "certified bound", 1.0, math.inf, related={"n": num})
    with pytest.raises(AttributeError, match="interval"):
        _ = iv.value
    d = json.loads(json.dumps(iv.to_dict()))
    assert d["hi"] == "inf" and d["related"]["n"]["value"] == 2.0
    assert "_big" not in json.dumps(num.to_dict())
    assert B.Bound("z", "estimate", 3.0, 1.0).is_empty
    with pytest.raises(ValueError, match="kind"):
        B.Bound("z", "guess", 0.0, 1.0)


@given(seed=st.integers(0, 10_000), m=st.integers(1, 4), n=st.integers(1, 4))
def test_ball_norm_extrema_bracket_sampled_values_and_are_attained(seed, m, n):
    rng = np.random.default_rng(seed)
    A, e = rng.standard_normal((m, n)), rng.standard_normal(m)
    vmin, vmax = B._ball_norm_extrema(A, e)
    U = rng.standard_normal((4000, n))
    U /= np.linalg.norm(U, axis=1, keepdims=True)
    U[2000:] *= rng.uniform(size=(2000, 1)) ** (1 / n)   # half on the sphere, half inside
    vals = np.linalg.norm(U @ A.T + e, axis=1)
    assert vmin <= vals.min() + 1e-9 and vals.max() <= vmax + 1e-9
    # attained: the sampled extremes approach them (loosely, sampling is coarse)
    assert vals.max() >= vmax - 0.25 * (1 + vmax) and vals.min() <= vmin + 0.25 * (1 + vmax)


# ---------------------------------------------------------------------------------------------
# quadratic loss: closed forms and the exact interval against the solver
# ---------------------------------------------------------------------------------------------

@settings(max_examples=6)
@given(spec=planted)
def test_quadratic_exact_recovery_interval_contains_theorem_intervals_and_is_sharp(spec):
    prob, truth = planted_quadratic(spec)
    rec = B.recovery_interval(prob, truth, rtol=1e-6)
    assert rec.kind == "exact" and not rec.is_empty, rec.note
    t3, t12 = rec.related["theorem3"], rec.related["theorem1_2"]
    cons = rec.related["conservative"]
    assert t3.kind == t12.kind == cons.kind == "exact"
    for inner in (t3, t12, cons):
        if not inner.is_empty:
            assert rec.lo <= inner.lo * (1 + 1e-6) and inner.hi <= rec.hi * (1 + 1e-6)
    if not t3.is_empty:  # Theorem 3 ⊂ Theorems 1+2 ⊂ exact
        assert t12.lo <= t3.lo + 1e-12 and t3.hi <= t12.hi + 1e-12
    # inside: the reference solver recovers the planted partition; just outside it does not
    assert recovers(prob, math.sqrt(rec.lo * rec.hi), truth)
    assert not recovers(prob, rec.lo * 0.98, truth)
    assert not recovers(prob, rec.hi * 1.02, truth)


@settings(max_examples=2)
@given(spec=planted)
def test_fusion_threshold_matches_bisection_on_solver_solutions(spec):
    prob, _ = planted_quadratic(spec)
    fb = B.fusion_threshold(prob)
    lower, upper = fb.related["lower"].value, fb.related["upper"].value
    assert fb.kind == "exact" and lower <= fb.value * (1 + 1e-9)
    assert fb.value <= upper * (1 + 1e-9)
    # bisection on the solver's solutions ("all models equal"), started from a bracket the
    # solver confirms, down to a relative width of 2e-5
    a, b = fb.value * 0.99, fb.value * 1.01
    assert not all_fused(prob, a) and all_fused(prob, b)
    while b - a > 2e-5 * b:
        m = 0.5 * (a + b)
        a, b = (a, m) if all_fused(prob, m) else (m, b)
    assert abs(0.5 * (a + b) - fb.value) <= 1e-4 * fb.value


def test_quadratic_theorem_thresholds_match_closed_forms():
    A, truth = cfl.datasets.planted_points(3, 4, 2, separation=12.0, random_state=3)
    prob = quadratic_problem(A)
    t1 = B.theorem1_threshold(prob, truth, 0.3)
    t2 = B.theorem2_threshold(prob, truth, 0.3)
    t12 = B.theorem12_interval(prob, truth)
    assert t12.inputs["closed_form"] and t1.value == pytest.approx(t12.lo, rel=1e-9)
    assert t2.value == pytest.approx(t12.hi, rel=1e-7)
    means = np.stack([A[truth == k].mean(axis=0) for k in range(3)])
    diam = max(np.max(np.linalg.norm(A[truth == k][:, None] - A[truth == k][None], axis=2))
               for k in range(3))
    assert t1.value == pytest.approx(diam / 4)
    gaps = [np.linalg.norm(means[k] - means[l]) for k in range(3) for l in range(3) if k != l]
    assert t2.value == pytest.approx(min(gaps) / (2 * 8), rel=1e-7)
    t3 = B.theorem3_interval(prob, truth)
    cons = B.conservative_interval(prob, truth)   # ∇f_i − ∇f_j constant: W plays no role
    assert cons.lo == pytest.approx(t1.value) and cons.hi == pytest.approx(t2.value, rel=1e-7)
    assert t3.lo == pytest.approx(t1.value)


def test_partition_certificate_verdicts_inside_and_outside():
    A, truth = cfl.datasets.planted_points(2, 4, 2, separation=10.0, random_state=1)
    prob = quadratic_problem(A)
    rec = B.recovery_interval(prob, truth, compare=False)
    inside = B.partition_certificate(prob, truth, math.sqrt(rec.lo * rec.hi))
    assert inside.recovered and inside.distinct and np.all(inside.rho <= inside.lam)
    assert inside.kind == "exact" and inside.value == pytest.approx(np.max(inside.rho))
    below = B.partition_certificate(prob, truth, 0.9 * rec.lo)
    assert not below.recovered and below.distinct and np.any(below.rho > below.lam)
    above = B.partition_certificate(prob, truth, 1.1 * rec.hi)
    assert not above.recovered and not above.distinct
    # K = 2 with the quadratic loss: the centroids merge exactly at ‖ā₁ − ā₂‖ / N
    gap = np.linalg.norm(A[truth == 0].mean(0) - A[truth == 1].mean(0))
    assert rec.hi == pytest.approx(gap / len(A), rel=1e-5)


def test_weighted_quadratic_is_exact_with_infinite_theorem3_epsilon():
    A, truth = cfl.datasets.planted_points(2, 3, 2, separation=12.0, random_state=2)
    w = np.linspace(1.0, 1.5, len(A))
    prob = cfl.SumOfNorms(cfl.losses.Quadratic(A, w), cfl.graphs.complete(len(A)), 0.0)
    c3 = B.theorem3_constants(prob, truth)
    assert c3["eps_kind"] == "exact" and np.all(np.isinf(c3["eps"]))
    t3 = B.theorem3_interval(prob, truth)
    assert t3.is_empty and "unbounded" in t3.note
    cons = B.conservative_interval(prob, truth)
    est = B.conservative_interval(prob, truth, how="estimate", n_samples=200)
    assert cons.kind == "exact" and est.kind == "estimate"
    # the sampled points lie in W: they cannot exceed the exact max / undercut the exact min
    assert est.lo <= cons.lo * (1 + 1e-9) and est.hi >= cons.hi * (1 - 1e-9)
    rec = B.recovery_interval(prob, truth)
    if not cons.is_empty:
        assert rec.lo <= cons.lo * (1 + 1e-6) and cons.hi <= rec.hi * (1 + 1e-6)


# ---------------------------------------------------------------------------------------------
# other losses
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("loss_cls", [cfl.losses.Logistic, cfl.losses.SquaredHinge])
def test_classification_exact_interval_is_sharp_against_the_solver(loss_cls):
    prob, truth = classification_problem(loss_cls, seed=0)
    rec = B.recovery_interval(prob, truth, rtol=1e-6)
    assert rec.kind == "exact" and not rec.is_empty, rec.note
    for key in ("theorem1_2", "theorem3", "conservative"):
        inner = rec.related[key]
        if not inner.is_empty:
            assert rec.lo <= inner.lo * (1 + 1e-6) and inner.hi <= rec.hi * (1 + 1e-6)
    assert recovers(prob, math.sqrt(rec.lo * rec.hi), truth)
    assert not recovers(prob, rec.lo * 0.98, truth)
    assert not recovers(prob, rec.hi * 1.02, truth)


@pytest.mark.parametrize("loss_cls", [cfl.losses.Logistic, cfl.losses.SquaredHinge])
def test_classification_fusion_threshold_matches_the_solver(loss_cls):
    prob, _ = classification_problem(loss_cls, seed=1, users=2, samples=40)
    fb = B.fusion_threshold(prob)
    lower, upper = fb.related["lower"].value, fb.related["upper"].value
    assert lower <= fb.value * (1 + 1e-9) and fb.value <= upper * (1 + 1e-9)
    # a bisection on solver solutions would end inside this bracket of relative width 2e-4
    assert not all_fused(prob, fb.value * (1 - 1e-4))
    assert all_fused(prob, fb.value * (1 + 1e-4))


@settings(max_examples=3)
@given(seed=st.integers(0, 10_000), hinge=st.booleans())
def test_classification_certificate_agrees_with_the_solver_on_random_instances(seed, hinge):
    loss_cls = cfl.losses.SquaredHinge if hinge else cfl.losses.Logistic
    prob, truth = classification_problem(loss_cls, seed, users=2, samples=60)
    rec = B.recovery_interval(prob, truth, compare=False, n_grid=10)
    assert rec.kind in ("exact", "certified bound"), rec.note
    if rec.kind == "certified bound":  # the merge is bracketed by certified points
        below, above = rec.inputs["hi_certified_bracket"]
        assert rec.hi == below < above < 1.01 * below
        # (the solver's labels fuse by fuse_tol: judged a little away from the bracket)
        assert recovers(prob, below * 0.999, truth)
        assert not recovers(prob, above * 1.001, truth)
    if rec.is_empty:  # then no λ of the grid may show the planted partition either
        for lam in rec.inputs["grid"][::3]:
            assert not recovers(prob, lam, truth)
    else:
        assert recovers(prob, math.sqrt(rec.lo * rec.hi), truth)
        assert not recovers(prob, rec.hi * 1.02, truth)


def test_theorem3_constants_are_tagged_honestly_for_other_losses():
    prob, truth = classification_problem(cfl.losses.SquaredHinge, seed=0, users=2, samples=30)
    c = B.theorem3_constants(prob, truth)
    assert c["eps_kind"] == "exact" and np.all(np.isinf(c["eps"]))   # proven by a ray
    assert c["delta_kind"] == "certified bound"
    assert B.theorem3_interval(prob, truth).is_empty
    prob, truth = classification_problem(cfl.losses.Logistic, seed=0, users=2, samples=30)
    cert = B.theorem3_constants(prob, truth)
    est = B.theorem3_constants(prob, truth, how="estimate", n_samples=150)
    assert cert["eps_kind"] == "certified bound" and est["eps_kind"] == "estimate"
    assert np.all(np.isfinite(cert["eps"])) and np.all(est["eps"] <= cert["eps"] + 1e-12)
    off = ~np.eye(3, dtype=bool)
    assert np.all(cert["delta"][off] == 0.0) and np.all(est["delta"][off] >= 0.0)
    region = B.theorem3_interval(prob, truth, how="estimate", region_radius=1.0)
    assert region.kind == "estimate" and "ball" in region.note


def test_least_squares_affine_constants_and_exact_conservative_interval():
    rng = np.random.default_rng(0)
    Xs = rng.standard_normal((60, 2))
    centres = np.array([[3.0, 0.0], [-3.0, 1.0]])
    groups = np.repeat(np.arange(6), 10)
    truth = np.repeat([0, 1], 3)
    y = np.sum(Xs * centres[truth[groups]], axis=1) + 0.05 * rng.standard_normal(60)
    loss = cfl.losses.LeastSquares.from_groups(Xs, y, groups, c=0.1)
    prob = cfl.SumOfNorms(loss, cfl.graphs.complete(6), 0.0)
    c = B.theorem3_constants(prob, truth)
    assert c["eps_kind"] == "exact" and np.all(np.isinf(c["eps"]))   # designs differ
    assert c["delta"][0, 1] == 0.0   # H_i − H_j invertible: the difference can vanish
    cons = B.conservative_interval(prob, truth)
    est = B.conservative_interval(prob, truth, how="estimate", n_samples=200)
    assert cons.kind == "exact"
    assert est.lo <= cons.lo * (1 + 1e-9) and est.hi >= cons.hi * (1 - 1e-9)


def test_conservative_interval_certified_for_logistic_is_inside_the_estimate():
    prob, truth = classification_problem(cfl.losses.Logistic, seed=0, users=2, samples=40)
    cert = B.conservative_interval(prob, truth)
    est = B.conservative_interval(prob, truth, how="estimate", n_samples=100)
    assert cert.kind == "certified bound" and est.kind == "estimate"
    assert cert.lo >= est.lo * (1 - 1e-9) and cert.hi <= est.hi * (1 + 1e-9)


def test_theorem4_radii_hold_and_need_strong_convexity():
    A, truth = cfl.datasets.planted_points(3, 3, 2, separation=12.0, random_state=4)
    r = B.theorem4_radii(quadratic_problem(A), truth)
    assert r.kind == "exact" and r.inputs["holds"]
    assert r.inputs["observed_max_within"] <= r.lo + 1e-9
    assert r.inputs["observed_min_between"] >= r.hi - 1e-9
    prob, truth = classification_problem(cfl.losses.SquaredHinge, seed=0, users=2, samples=20)
    with pytest.raises(ValueError, match="strongly convex"):
        B.theorem4_radii(prob, truth)


# ---------------------------------------------------------------------------------------------
# graphs other than complete uniform, and bad input
# ---------------------------------------------------------------------------------------------

def test_recovery_interval_and_fusion_on_a_knn_graph():
    A, truth = cfl.datasets.planted_points(2, 5, 2, separation=10.0, random_state=5)
    g = cfl.graphs.knn(A, k=5)
    prob = cfl.SumOfNorms(cfl.losses.Quadratic(A), g, 0.0)
    fb = B.fusion_threshold(prob)
    assert fb.related["lower"].value <= fb.value <= fb.related["upper"].value * (1 + 1e-9)
    assert all_fused(prob, fb.value * 1.001) and not all_fused(prob, fb.value * 0.99)
    rec = B.recovery_interval(prob, truth)
    assert set(rec.related) == {"fusion_threshold"} and not rec.is_empty
    assert recovers(prob, math.sqrt(rec.lo * rec.hi), truth)
    with pytest.raises(ValueError, match="complete uniform"):
        B.theorem3_interval(prob, truth)


def test_disconnected_graph_has_infinite_fusion_threshold_with_an_explanation():
    A, _ = cfl.datasets.planted_points(2, 3, 2, separation=10.0, random_state=6)
    g = cfl.graphs.from_edges([[0, 1], [1, 2], [3, 4], [4, 5]], n_nodes=6)
    fb = B.fusion_threshold(cfl.SumOfNorms(cfl.losses.Quadratic(A), g, 0.0))
    assert math.isinf(fb.value) and "components" in fb.note
    assert 0 < fb.inputs["per_component"] < math.inf


def test_bad_input_is_refused_naming_the_argument():
    A, truth = cfl.datasets.planted_points(2, 3, 2, random_state=0)
    prob = quadratic_problem(A)
    with pytest.raises(TypeError, match="prob"):
        B.fusion_threshold(cfl.global_model(cfl.losses.Quadratic(A)))
    with pytest.raises(ValueError, match="partition"):
        B.recovery_interval(prob, [0, 1])
    with pytest.raises(ValueError, match="how"):
        B.conservative_interval(prob, truth, how="guess")
    with pytest.raises(ValueError, match="lam"):
        B.partition_certificate(prob, truth, -1.0)
    with pytest.raises(ValueError, match="rtol"):
        B.recovery_interval(prob, truth, rtol=0.0)


@pytest.mark.parametrize("seed", [0, 3, 4, 10])
def test_recovery_interval_upper_end_agrees_with_the_certificate_just_inside(seed):
    """Issue 16, item 7: near a merge two (RED) centroids are closer than the interior
    point's fuse_tol on a λ-range of relative width ~1e-5; a fuse_tol fusion is no proof,
    so neither the interval's upper end nor the certificate may rest on it."""
    rng = np.random.default_rng(seed)
    K, m = rng.integers(2, 4), rng.integers(2, 5)
    A, truth = cfl.datasets.planted_points(K, m, 2, separation=float(rng.uniform(4, 12)),
                                           random_state=seed)
    prob = cfl.SumOfNorms(cfl.losses.Quadratic(A), cfl.graphs.complete(len(A)), 1.0)
    interval = cfl.bounds.recovery_interval(prob, truth)
    assert interval.kind == "exact" and np.isfinite(interval.hi)
    for eps in (3e-6, 1e-5):
        inside = cfl.bounds.partition_certificate(prob, truth, interval.hi * (1 - eps))
        outside = cfl.bounds.partition_certificate(prob, truth, interval.hi * (1 + eps))
        assert inside.kind == outside.kind == "exact"
        assert inside.recovered and not outside.recovered, (eps, inside.note, outside.note)


# ------------------------------------------------------------------ λ̂ from a two-cluster split

def _line_of_three(seed=0):
    """Groups A, B close together and C far off, on the complete graph: A and B merge first,
    then the two clusters {A ∪ B}, {C} fuse at λ̂."""
    rng = np.random.default_rng(seed)
    centres = np.array([[0.0, 0.0], [1.5, 0.0], [8.0, 0.0]])
    A = np.repeat(centres, 25, axis=0) + 0.3 * rng.standard_normal((75, 2))
    return cfl.SumOfNorms(cfl.losses.Quadratic(A), cfl.graphs.complete(75), 1.0)


def _two_cluster_solution(prob, lam_hat):
    for frac in (0.98, 0.95, 0.9, 0.8):
        sol = cfl.solve(prob.with_lam(frac * lam_hat), method="ssnal", tol=1e-8)
        if sol.n_clusters == 2:
            return sol
    raise AssertionError("no two-cluster solution below λ̂")  # pragma: no cover


def test_fusion_threshold_from_a_split_is_the_socp_value_with_a_closed_bracket():
    prob = _line_of_three()
    socp = B.fusion_threshold(prob)
    split = _two_cluster_solution(prob, socp.value)
    fb = B.fusion_threshold(prob, split=split)
    assert fb.kind == "exact" and fb.inputs["method"] == "split"
    assert socp.inputs["method"] == "socp"
    cut, up = fb.inputs["bracket"]
    assert fb.value == cut == fb.related["lower"].value and up == fb.related["upper"].value
    assert cut <= up <= cut * (1 + B.fusion.SPLIT_RTOL)
    assert abs(fb.value - socp.value) <= 1e-8 * socp.value
    # the flow proves the upper end: it routes −g exactly, within up · w
    u, g = fb.inputs["_flow"], prob.loss.grad(np.tile(fb.inputs["y_star"], (75, 1)))
    assert np.abs(B.fusion._imbalance(g, prob.graph.edges, u)).max() <= 1e-10
    assert np.max(np.linalg.norm(u, axis=1) / prob.graph.weights) == pytest.approx(up, rel=1e-14)
    # and the fused model is certified there by that flow
    X = np.tile(fb.inputs["y_star"], (75, 1))
    assert cfl.certificates.kkt_residual(prob.with_lam(up), X, flows=u).kkt_residual <= 1e-12


def test_a_split_whose_cut_is_not_the_last_merge_leaves_the_socp_to_decide():
    from dataclasses import replace

    prob = _line_of_three()
    socp = B.fusion_threshold(prob)
    split = _two_cluster_solution(prob, socp.value)
    # the cut {A} | {B ∪ C}: a lower bound on λ̂, not λ̂ (no flow routes −g within it)
    A_only = np.arange(75) < 25
    X = np.where(A_only[:, None], split.X.min(axis=0), split.X.max(axis=0))
    wrong = replace(split, X=X)
    assert wrong.n_clusters == 2
    cut = B.fusion._split_bracket(prob, socp.inputs["y_star"],
                                  prob.loss.grad(np.tile(socp.inputs["y_star"], (75, 1))),
                                  wrong)
    assert cut[0] < socp.value * (1 - 1e-3) and cut[1] > socp.value * (1 - 1e-9)
    fb = B.fusion_threshold(prob, split=wrong)
    assert fb.inputs["method"] == "socp" and fb.value == pytest.approx(socp.value, rel=1e-12)


def test_son_path_on_a_given_grid_takes_lam_hat_from_its_last_split():
    prob = _line_of_three()
    socp = B.fusion_threshold(prob)
    path = cfl.son_path(prob, np.linspace(0.0, 1.3 * socp.value, 40), method="ssnal",
                        tol=1e-8, progress=False)
    assert path.meta["fusion_threshold"]["inputs"]["method"] == "split"
    assert abs(path.lam_hat - socp.value) <= 1e-8 * socp.value
    assert np.all(path.n_clusters[path.lambdas >= path.lam_hat] == 1)
    assert np.all(path.n_clusters[path.lambdas < path.lam_hat] >= 2)


def test_fusion_threshold_refuses_a_split_that_is_not_a_solution_of_prob():
    prob = _line_of_three()
    with pytest.raises(TypeError, match="split: expected a convexfl Solution"):
        B.fusion_threshold(prob, split="two clusters")
    other = cfl.SumOfNorms(cfl.losses.Quadratic(np.zeros((4, 2)) + np.arange(4)[:, None]),
                           cfl.graphs.complete(4), 0.1)
    with pytest.raises(ValueError, match="split: a solution of another problem"):
        B.fusion_threshold(prob, split=cfl.solve(other))


def test_the_minimisers_solver_is_the_method_asked_for(monkeypatch):
    """``method`` of :func:`fusion_threshold` and :func:`conservative_interval` names the
    solver of the cluster minimisers where Newton fails; a name that is no solver is
    refused before any work."""
    from convexfl.bounds import fusion

    prob, _ = classification_problem(cfl.losses.Logistic, seed=1, users=2, samples=40)
    for call in (lambda m: B.fusion_threshold(prob, method=m),
                 lambda m: B.conservative_interval(prob, [0] * prob.n_users, method=m)):
        with pytest.raises(ValueError, match="method: expected one of"):
            call("newton")
    expected = B.fusion_threshold(prob).value
    newton = fusion._minimise_users
    monkeypatch.setattr(fusion, "_minimise_users",
                        lambda agg, X0=None: (newton(agg)[0], False) if X0 is None
                        else newton(agg, X0))
    used = []
    solve = cfl.solvers.solve
    monkeypatch.setattr(cfl.solvers, "solve",
                        lambda p, method, **o: used.append(method) or solve(p, method, **o))
    got = B.fusion_threshold(prob, method="admm", solver_options={"tol": 1e-10})
    assert used == ["admm"]
    assert got.value == pytest.approx(expected, rel=1e-9)


def test_fusion_threshold_above_max_socp_size_is_a_certified_bracket():
    """Above ``max_socp_size`` flow unknowns the SOCP is not solved: λ̂ comes as the interval
    of its closed-form certified bounds, which holds the exact value, and its flow certifies
    the fused models at the upper end."""
    rng = np.random.default_rng(7)
    A = np.r_[rng.normal(0, 1, (40, 3)), rng.normal(2, 1, (40, 3))]
    prob = cfl.SumOfNorms(cfl.losses.Quadratic(A), cfl.graphs.knn(A, 10), 1.0)
    assert prob.graph.is_connected
    exact = B.fusion_threshold(prob, max_socp_size=prob.graph.n_edges * 3)
    assert exact.kind == "exact" and exact.inputs["method"] == "socp"
    fb = B.fusion_threshold(prob, max_socp_size=prob.graph.n_edges * 3 - 1)
    assert fb.kind == "certified bound" and not fb.is_number
    assert fb.lo <= exact.value <= fb.hi
    X = np.tile(fb.inputs["y_star"], (prob.n_users, 1))
    cert = cfl.certificates.kkt_residual(prob.with_lam(fb.hi), X, flows=fb.inputs["_flow"])
    assert cert.kkt_residual <= 1e-9
    for bad in (-1, 2.5, "big"):
        with pytest.raises((ValueError, TypeError), match="max_socp_size"):
            B.fusion_threshold(prob, max_socp_size=bad)
    split = _two_cluster_solution(prob, exact.value)
    closed = B.fusion_threshold(prob, split=split, max_socp_size=0)
    assert closed.kind == "exact" and closed.value == pytest.approx(exact.value, rel=1e-8)


def test_the_cut_of_a_two_cluster_solution_is_lam_hat_when_they_fuse_directly():
    """``split_cut``: one pass over the users gives the cut between a two-cluster solution's
    clusters, λ̂ where those two clusters fuse directly (as here: the SOCP's value) and a
    certified lower bound on λ̂ for any other cut (``{A} | {B ∪ C}``, below λ̂); not a
    two-cluster solution: None."""
    from dataclasses import replace

    from convexfl.bounds.fusion import split_cut

    prob = _line_of_three()
    socp = B.fusion_threshold(prob)
    split = _two_cluster_solution(prob, socp.value)
    assert abs(split_cut(prob, split) - socp.value) <= 1e-8 * socp.value
    A_only = np.arange(75) < 25
    wrong = replace(split, X=np.where(A_only[:, None], split.X.min(axis=0),
                                      split.X.max(axis=0)))
    assert wrong.n_clusters == 2 and split_cut(prob, wrong) < socp.value * (1 - 1e-3)
    assert split_cut(prob, cfl.solve(prob.with_lam(0.01 * socp.value))) is None
    with pytest.raises(TypeError, match="split: expected a convexfl Solution"):
        split_cut(prob, "two clusters")
