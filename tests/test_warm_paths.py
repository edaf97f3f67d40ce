"""Warm starts along a λ path: flows carried and extrapolated, merges found on the reduced
problem, the certificate's factor reused, and failing candidates given up honestly."""

import warnings

import numpy as np
import pytest
from helpers import reference

import convexfl as cfl
from convexfl import certificates
from convexfl._flow_kernels import project_flows
from convexfl.solvers._common import (
    Certifier,
    _moved_flows,
    cluster_means,
    components,
    flow_guesses,
)
from convexfl.solvers.admm import reduced_merges


def triangle_groups(n_per=6, noise=0.05, seed=0):
    """Three tight groups at the corners of an equilateral triangle (complete graph, unit
    weights): by symmetry the three merge at one λ, in the triangle's centre."""
    rng = np.random.default_rng(seed)
    corners = np.array([[np.cos(a), np.sin(a)] for a in 2 * np.pi * np.arange(3) / 3])
    A = np.repeat(corners, n_per, axis=0) + noise * rng.standard_normal((3 * n_per, 2))
    return cfl.losses.Quadratic(A), cfl.graphs.complete(3 * n_per)


def test_flow_slope_is_the_finite_difference_on_one_partition():
    loss, graph = triangle_groups()
    prob = cfl.SumOfNorms(loss, graph, 0.02)
    s1 = cfl.solve(prob, method="ssnal", tol=1e-9)
    s2 = cfl.solve(prob.with_lam(0.021), method="ssnal", tol=1e-9, warm_start=s1)
    assert s1.flow_slope is None  # a cold solve has nothing to difference against
    assert s1.n_clusters == s2.n_clusters == 3
    # flows are reported in the user's units (convexfl.units): equal to rounding
    np.testing.assert_allclose(s2.flow_slope, (s2.flows - s1.flows) / 0.001, rtol=1e-9,
                               atol=1e-9 * np.abs(s2.flow_slope).max())
    p3 = prob.with_lam(0.022)
    np.testing.assert_allclose(_moved_flows(p3, s2), s2.flows + 0.001 * s2.flow_slope,
                               rtol=1e-12, atol=1e-15)
    s3 = cfl.solve(p3, method="ssnal", tol=1e-9, warm_start=s2)
    ref = reference(p3, tol=1e-10)
    assert s3.converged and s3.n_iter == 0
    assert cfl.solve(p3, method="ssnal", tol=1e-9).n_iter > 0  # control: cold, it iterates
    np.testing.assert_allclose(s3.X, ref.X, atol=1e-7)


def test_no_flow_slope_across_a_change_of_partition():
    loss, graph = triangle_groups()
    prob = cfl.SumOfNorms(loss, graph, 0.002)
    s1 = cfl.solve(prob, method="admm", tol=1e-9)
    s2 = cfl.solve(prob.with_lam(0.02), method="admm", tol=1e-9, warm_start=s1)
    assert s1.n_clusters != s2.n_clusters
    assert s2.flow_slope is None


def test_without_a_slope_fused_flows_are_kept_and_the_others_rescaled():
    loss, graph = triangle_groups()
    prob = cfl.SumOfNorms(loss, graph, 0.02)
    s1 = cfl.solve(prob, method="ssnal", tol=1e-9)
    moved = _moved_flows(prob.with_lam(0.03), s1)
    edges = graph.edges
    fused = np.linalg.norm(s1.X[edges[:, 0]] - s1.X[edges[:, 1]], axis=1) <= s1.fuse_tol
    assert fused.any() and (~fused).any()
    np.testing.assert_array_equal(moved[fused], s1.flows[fused])
    np.testing.assert_allclose(moved[~fused], s1.flows[~fused] * 1.5, rtol=1e-12)


def test_without_a_slope_the_warm_certificate_also_starts_from_scaled_flows():
    """Across a change of partition the warm certificate is offered the moved flows and
    all the previous flows scaled by the ratio of the λ, tried in that order. On
    make_moons (n = 400, kNN 10) from a cold solve at λ = 0.6 to 0.8 (21 → 12 clusters) it
    takes 3 flow iterations where the moved flows alone take 12 (measured at 1.0 → 1.2:
    0 against 9)."""
    from sklearn.datasets import make_moons

    A, _ = make_moons(n_samples=400, noise=0.1, random_state=0)
    prob = cfl.SumOfNorms(cfl.losses.Quadratic(A), cfl.graphs.knn(A, 10, phi=2.0), 0.6)
    s1 = cfl.solve(prob, tol=1e-6)
    p2 = prob.with_lam(0.8)
    moved = _moved_flows(p2, s1)
    guesses = flow_guesses(p2, s1, moved)
    assert s1.flow_slope is None and guesses.shape == (2,) + moved.shape
    np.testing.assert_array_equal(guesses[0], moved)
    cap = 0.8 * prob.graph.weights
    np.testing.assert_allclose(guesses[1], project_flows(s1.flows * (0.8 / 0.6), cap),
                               rtol=1e-12, atol=1e-15)
    s2 = cfl.solve(p2, tol=1e-6, warm_start=s1)
    assert s2.converged and s2.stage == "warm partition" and s2.n_clusters < s1.n_clusters
    alone = certificates.kkt_residual(p2, s2.X, fuse_tol=s2.fuse_tol, flows=moved,
                                      target=1e-6)
    assert s2.certificate.flow_iterations < alone.flow_iterations
    # on one partition the extrapolation along the slope is the only guess
    s3 = cfl.solve(p2.with_lam(0.8001), tol=1e-6, warm_start=s2)
    assert s3.n_clusters == s2.n_clusters and s3.flow_slope is not None
    p4 = p2.with_lam(0.8002)
    np.testing.assert_array_equal(flow_guesses(p4, s3, _moved_flows(p4, s3)),
                                  _moved_flows(p4, s3))


@pytest.mark.parametrize("method", ["admm", "ssnal"])
def test_warm_partition_merges_are_found_without_iterating(method):
    loss, graph = triangle_groups()
    prob = cfl.SumOfNorms(loss, graph, 0.02)
    before = cfl.solve(prob, method=method, tol=1e-9)
    assert before.n_clusters == 3
    after_lam = 0.2  # past the triple merge: one cluster
    ref = reference(prob.with_lam(after_lam), tol=1e-10)
    assert ref.n_clusters == 1
    res = cfl.solve(prob.with_lam(after_lam), method=method, tol=1e-8, warm_start=before)
    assert res.converged and res.n_iter == 0 and res.n_clusters == 1
    np.testing.assert_allclose(res.X, ref.X, atol=1e-7)


def test_merges_come_from_the_reduced_problem():
    """The reduced-problem step alone (no Newton) finds the triple merge exactly."""
    loss, graph = triangle_groups()
    before = cfl.solve(cfl.SumOfNorms(loss, graph, 0.02), method="ssnal", tol=1e-9)
    prob = cfl.SumOfNorms(loss, graph, 0.2)
    edges = graph.edges
    labels = components(prob.n_users, edges, np.linalg.norm(
        before.X[edges[:, 0]] - before.X[edges[:, 1]], axis=1) <= before.fuse_tol)
    assert labels.max() == 2
    merged, W = reduced_merges(prob, labels, cluster_means(before.X, labels))
    assert merged.max() == 0
    np.testing.assert_allclose(W[0], loss.points.mean(axis=0), atol=1e-8)


def test_certificate_factor_is_reused_across_lambda():
    loss, graph = triangle_groups()
    s = cfl.solve(cfl.SumOfNorms(loss, graph, 0.2), method="ssnal", tol=1e-9)
    certificates.clear_cache()
    certificates.kkt_residual(cfl.SumOfNorms(loss, graph, 0.2), s.X)
    cached = dict(certificates._POTENTIAL_CACHE)
    assert cached
    certificates.kkt_residual(cfl.SumOfNorms(loss, graph, 0.3), s.X)
    assert certificates._POTENTIAL_CACHE.keys() == cached.keys()  # no new factor
    for key, entry in cached.items():
        assert certificates._POTENTIAL_CACHE[key] is entry


def test_a_failing_candidate_stops_early_with_bracketing_bounds():
    """With a target, the flow search stops once the candidate cannot pass (dual bound
    above it, or the flows stalling); its bounds still bracket the exact minimum."""
    from sklearn.datasets import make_moons

    A, y = make_moons(n_samples=600, noise=0.1, random_state=0)
    prob = cfl.SumOfNorms(cfl.losses.Quadratic(A), cfl.graphs.knn(A, 10, phi=2.0), 2.0)
    X = cluster_means(A, y)[y]  # the generating labels are not this λ's partition
    quick = certificates.kkt_residual(prob, X, target=1e-6, max_iter=5000)
    exact = certificates.kkt_residual(prob, X, max_iter=20000)
    assert exact.exact
    assert quick.kkt_residual > 1e-6 and quick.flow_iterations < 5000
    assert quick.kkt_abs >= exact.kkt_abs_lower * (1 - 1e-12)
    assert quick.kkt_abs_lower <= exact.kkt_abs * (1 + 1e-12)


def mixture_knn(n=600, lam=3.0, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((5, 3)) * 3.0
    A = centres[rng.integers(0, 5, n)] + 0.7 * rng.standard_normal((n, 3))
    with warnings.catch_warnings():  # the kNN graph of a mixture may be disconnected
        warnings.simplefilter("ignore", UserWarning)
        graph = cfl.graphs.knn(A, 10)
    return cfl.SumOfNorms(cfl.losses.Quadratic(A), graph, lam)


def test_admm_coarsening_certifies_from_an_early_partition():
    prob = mixture_knn()
    ref = cfl.solve(prob, method="ssnal", tol=1e-10)
    plain = cfl.solve(prob, method="admm", coarsen=False)
    res = cfl.solve(prob, method="admm", coarsen=True)
    assert res.converged and plain.converged
    assert "coarsened_at" in res.history and res.n_iter < plain.n_iter
    assert res.n_clusters == ref.n_clusters
    np.testing.assert_allclose(res.X, ref.X, atol=1e-8)


def test_coarsening_waits_for_a_quarter_of_the_users_then_for_the_partition_to_halve():
    prob = mixture_knn()
    n, edges = prob.n_users, prob.graph.edges
    certifier = Certifier(prob, 1e-6, polish=True)
    none_fused = np.zeros(prob.graph.n_edges, bool)
    assert not certifier.coarsen(none_fused, prob.loss.points, None)
    assert certifier.count == 0 and certifier.coarse_k == n / 2
    third = np.all(edges >= n // 3, axis=1)  # n/3 singletons and the rest: > n/4 clusters
    assert not certifier.coarsen(third, prob.loss.points, None)
    assert certifier.count == 0
    most = np.all(edges >= n // 8, axis=1)  # ≤ n/8 singletons and a few more: ≤ n/4
    certifier.coarsen(most, prob.loss.points, None)
    assert certifier.count == 1 and certifier.coarse_k <= n / 4


def test_coarsen_option_is_checked():
    with pytest.raises((TypeError, ValueError), match="coarsen"):
        cfl.solve(mixture_knn(n=50), method="admm", coarsen="yes")


def test_polish_stops_at_its_step_budget_and_says_so():
    """A polish allowed one Newton step takes that step only and reports failure (the
    candidate is then certified as it is, never called polished); without a budget the same
    polish converges, in more steps. Certifier.__call__ gives polishes during the iterations
    such budgets (POLISH_STEPS, and POLISH_STEPS_PER_CHECK more per candidate): counts, so
    that the answer never depends on the machine's speed."""
    from convexfl.solvers._common import polish

    loss, graph = triangle_groups()
    prob = cfl.SumOfNorms(loss, graph, 0.02)
    labels = np.repeat(np.arange(3), 6)
    W0 = cluster_means(loss.F, labels)
    _, W_full, ok_full, steps_full = polish(prob, labels, W0)
    _, W_cut, ok_cut, steps_cut = polish(prob, labels, W0, max_steps=1)
    assert ok_full and not ok_cut
    assert steps_cut == 1 < steps_full
    assert not np.allclose(W_cut, W0)  # the first step was taken
    assert np.abs(W_cut - W_full).max() > 1e-12  # but not the ones after it
    _, W_again, ok_again, _ = polish(prob, labels, W0, max_steps=steps_full)
    assert ok_again and np.array_equal(W_again, W_full)  # a budget that suffices
    _, W_dense, ok_dense, steps_dense = polish(prob, labels, W0, dense_max=1)
    assert not ok_dense and steps_dense == 0 and np.array_equal(W_dense, W0)
    sol = cfl.solve(prob, method="ssnal", tol=1e-10)
    np.testing.assert_allclose(W_full[labels], sol.X, atol=1e-8)


def test_auto_treats_a_warm_start_at_lambda_zero_as_the_cold_start():
    """At λ = 0 each model is its own minimiser and no flow is needed: such a warm start holds
    nothing the cold start lacks, and "auto" solves exactly as from cold (with its ADMM
    warm-up, which SSNAL from the λ = 0 solution would skip)."""
    prob = mixture_knn(n=400, lam=1.0)
    at_zero = cfl.solve(prob.with_lam(0.0))
    assert at_zero.lam == 0.0 and not np.any(at_zero.flows)
    cold = cfl.solve(prob)
    warm = cfl.solve(prob, warm_start=at_zero)
    np.testing.assert_array_equal(warm.X, cold.X)
    assert (warm.n_iter, warm.stage, warm.method) == (cold.n_iter, cold.stage, cold.method)
    assert warm.history.keys() == cold.history.keys()
    informed = cfl.solve(prob, warm_start=cfl.solve(prob.with_lam(0.9)))
    assert informed.stage == "warm partition" or "admm_warm_up" not in informed.history


def _moons_stretch(n=400, k=10, lams=(5.0, 5.5), clusters=4):
    """Two solutions on one partition of make_moons (``n`` points, kNN ``k``, φ = 2), at
    ``lams``. n = 400, kNN 10: four clusters from λ = 4.5 to 9. n = 600, kNN 15 at 4.5 and
    5 (:func:`_two_cluster_stretch`): two clusters from λ = 4 to 10.5, where the difference
    of the certified flows exceeds ``w_e`` on some fused edge."""
    from sklearn.datasets import make_moons

    A, _ = make_moons(n_samples=n, noise=0.1, random_state=0)
    prob = cfl.SumOfNorms(cfl.losses.Quadratic(A), cfl.graphs.knn(A, k, phi=2.0), lams[1])
    s1 = cfl.solve(prob.with_lam(lams[0]), tol=1e-9)
    s2 = cfl.solve(prob, tol=1e-9, warm_start=s1)
    assert s1.n_clusters == s2.n_clusters == clusters
    return prob, s1, s2


def _two_cluster_stretch():
    return _moons_stretch(600, 15, (4.5, 5.0), 2)


def _residual(prob, X, flows):
    from convexfl._flow_kernels import flow_residual

    return flow_residual(np.ascontiguousarray(prob.loss.grad(X)), prob.graph.edges,
                         np.ascontiguousarray(flows))


def test_an_exact_flow_slope_keeps_the_residual_along_a_two_cluster_stretch():
    """On a kept two-cluster partition the exact flows move linearly in λ. The difference
    of two certified flows exceeds ``w_e`` on some fused edge (so its extrapolations would
    be clipped) and its divergence is off by the change of their residuals. The exact
    slope is within ``w`` there, matches the difference off the fused edges, and its
    extrapolation ``u + (λ' − λ) v`` to λ' = 6, 8, 10 is within ``λ' w`` and leaves the
    residual ``∇f(X(λ')) + Bᵀu`` at the level of the certified one at λ; the difference's
    extrapolation does not stay there."""
    from convexfl.solvers._common import _exact_slope

    prob, s1, s2 = _two_cluster_stretch()
    g = prob.graph
    raw = (s2.flows - s1.flows) / 0.5
    fused = g.distances(s2.X) <= s2.fuse_tol
    assert (np.linalg.norm(raw, axis=1) / g.weights)[fused].max() > 1.1
    target = 1e-9 * (1 + s2.certificate.grad_norm)
    v = _exact_slope(prob, s1, s2.X, s2.flows, fused, raw, target)
    assert v is not None
    assert np.all(np.linalg.norm(v[fused], axis=1) <= g.weights[fused] * (1 + 1e-12))
    np.testing.assert_array_equal(v[~fused], raw[~fused])
    here = np.linalg.norm(_residual(prob, s2.X, s2.flows))
    assert here <= target
    worst, worst_raw = 0.0, 0.0
    for lam in (6.0, 8.0, 10.0):
        later = cfl.solve(prob.with_lam(lam), tol=1e-12, warm_start=s2)
        assert later.n_clusters == 2
        u = s2.flows + (lam - prob.lam) * v
        assert np.all(np.linalg.norm(u, axis=1) <= lam * g.weights * (1 + 1e-9))
        worst = max(worst, np.linalg.norm(_residual(prob, later.X, u)))
        u_raw = s2.flows + (lam - prob.lam) * raw
        worst_raw = max(worst_raw, np.linalg.norm(_residual(prob, later.X, u_raw)))
    assert worst <= here + target / 10
    assert worst_raw > 10 * worst  # 24× here


def _record_searches(monkeypatch):
    from convexfl.solvers import _common

    searched = []
    monkeypatch.setattr(_common, "_exact_slope", lambda *args: searched.append(1) and None)
    return searched


def test_a_failed_slope_search_is_not_repeated_along_its_stretch(monkeypatch):
    """``history["flow_slope"]`` says what became of the slope; after "not found" the
    next solve of the stretch keeps the difference without searching again."""
    from dataclasses import replace

    from convexfl.solvers import _common

    prob, s1, s2 = _two_cluster_stretch()
    raw = (s2.flows - s1.flows) / 0.5
    searched = _record_searches(monkeypatch)
    history = {}
    slope = _common._flow_slope(prob, s1, s2.X, s2.flows,
                                s2.certificate.fused, 1e-9, history)
    assert searched and history["flow_slope"] == "not found"
    np.testing.assert_allclose(slope, raw, rtol=1e-12, atol=1e-12)
    searched.clear()
    failed = replace(s1, history={"flow_slope": "not found"})
    _common._flow_slope(prob, failed, s2.X, s2.flows,
                        s2.certificate.fused, 1e-9, history)
    assert not searched and history["flow_slope"] == "not found"


def test_no_slope_search_where_the_flows_are_not_linear_in_lambda(monkeypatch):
    """With three clusters or more in ``d ≥ 2`` the cluster directions turn with λ, so
    even an exact slope extrapolates to first order only: no search, the difference is
    kept ("difference"), also when the warm start had a slope and the certificate took
    its extrapolation. In ``d = 1`` the flows are linear in λ at any cluster count, and
    the search is made."""
    from dataclasses import replace

    from convexfl.solvers import _common

    prob, s1, s2 = _moons_stretch()  # four clusters, d = 2
    raw = (s2.flows - s1.flows) / 0.5
    searched = _record_searches(monkeypatch)
    history = {}
    slope = _common._flow_slope(prob, s1, s2.X, s2.flows,
                                s2.certificate.fused, 1e-9, history)
    assert not searched and history["flow_slope"] == "difference"
    np.testing.assert_allclose(slope, raw, rtol=1e-12, atol=1e-12)
    with_slope = replace(s1, flow_slope=np.zeros_like(raw))
    slope = _common._flow_slope(prob, with_slope, s2.X, s2.flows,
                                s2.certificate.fused, 1e-9, history,
                                certified_as_extrapolated=True)
    assert not searched and history["flow_slope"] == "difference"
    np.testing.assert_allclose(slope, raw, rtol=1e-12, atol=1e-12)

    A = np.array([[0.0], [0.1], [0.2], [5.0], [5.1], [5.2], [10.0], [10.1], [10.2]])
    chain = cfl.graphs.from_edges([(i, i + 1) for i in range(8)],  # 3 groups, tied weakly
                                  [10, 10, 1, 10, 10, 1, 10, 10])
    line = cfl.SumOfNorms(cfl.losses.Quadratic(A), chain, 0.4)
    t1 = cfl.solve(line.with_lam(0.3), tol=1e-10)
    t2 = cfl.solve(line, tol=1e-10, warm_start=t1)
    assert t1.n_clusters == t2.n_clusters == 3
    _common._flow_slope(line, t1, t2.X, t2.flows,
                        t2.certificate.fused, 1e-9, history)
    assert searched and history["flow_slope"] == "not found"
    searched.clear()  # no fused edge (every user its own cluster): nothing to search
    apart = cfl.SumOfNorms(cfl.losses.Quadratic(A), chain, 1e-3)
    a1 = cfl.solve(apart, tol=1e-10)
    a2 = cfl.solve(apart.with_lam(2e-3), tol=1e-10, warm_start=a1)
    assert a1.n_clusters == a2.n_clusters == 9
    _common._flow_slope(apart.with_lam(2e-3), a1, a2.X, a2.flows,
                        a2.certificate.fused, 1e-9, history)
    assert not searched and history["flow_slope"] == "difference"


def test_a_linear_stretch_keeps_its_slope_when_the_extrapolation_certifies(monkeypatch):
    """Where the flows are linear in λ (two clusters) and the certificate took the
    extrapolation ``u + (λ − λ_a) v`` (no flow iterations), the next λ extrapolates with
    the same ``v`` ("kept"), with no search; without a slope before, the exact one is
    searched for."""
    from dataclasses import replace

    from convexfl.solvers import _common

    prob, s1, s2 = _two_cluster_stretch()
    v = np.full_like(s2.flows, 0.25)
    searched = _record_searches(monkeypatch)
    history = {}
    kept = _common._flow_slope(prob, replace(s1, flow_slope=v), s2.X, s2.flows,
                               s2.certificate.fused, 1e-9, history,
                               certified_as_extrapolated=True)
    assert kept is v and history["flow_slope"] == "kept" and not searched
    _common._flow_slope(prob, s1, s2.X, s2.flows,
                        s2.certificate.fused, 1e-9, history,
                        certified_as_extrapolated=True)
    assert searched and history["flow_slope"] == "not found"


def test_a_kept_partition_reuses_its_reduced_problem_and_the_warm_partition(monkeypatch):
    """Along a stretch on one partition the warm solve takes the partition from the warm
    start's certificate (no distances for it), the polish reuses the reduced graph and
    loss of the last partition (:func:`~convexfl.solvers._common._reduced`), and the edge
    distances are computed twice in all: by the certificate and for the objective in
    your units. The reduced problem at the new λ is the one built afresh."""
    from convexfl.graphs import Graph
    from convexfl.problems import Reduced
    from convexfl.solvers import _common

    prob, s1, s2 = _moons_stretch()
    calls = []
    distances = Graph.distances
    monkeypatch.setattr(Graph, "distances", lambda g, X: calls.append(X.shape[0])
                        or distances(g, X))
    s3 = cfl.solve(prob.with_lam(6.0), tol=1e-9, warm_start=s2)
    s3.labels()
    assert s3.stage == "warm partition" and s3.n_clusters == 4
    assert calls.count(prob.n_users) == 2
    red = _common._LAST_REDUCED[0]
    again = _common._reduced(_std(prob, 7.0), red.labels)
    assert again.inner.graph is red.inner.graph and again.inner.loss is red.inner.loss
    fresh = Reduced(again.loss, again.graph, red.labels, again.lam)
    W = np.random.default_rng(0).standard_normal((fresh.n_clusters, 2))
    assert again.lam == fresh.lam and again.inner.lam == fresh.inner.lam
    assert again.inner.objective(W) == fresh.inner.objective(W)
    other = _common._reduced(_std(prob, 7.0), np.zeros(prob.n_users, np.int64))
    assert other.inner.graph is not red.inner.graph and other.n_clusters == 1


def _std(prob, lam):
    from convexfl.units import standardise

    return standardise(prob.with_lam(lam))[1]
