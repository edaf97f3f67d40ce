"""Partition repair: a wrong partition is split along the flows its certificate saturates
(:func:`~convexfl.solvers._common.split_saturated`), polished and certified again
(:meth:`~convexfl.solvers._common.Certifier.repair`); ``method="auto"`` repairs the
partition of its ADMM stage before it starts SSNAL."""

import dataclasses

import numpy as np
import pytest

import convexfl as cfl
from convexfl.certificates import kkt_residual
from convexfl.clusters import same_partition
from convexfl.solvers._common import Certifier, cluster_means, split_saturated
from convexfl.solvers.admm import reduced_merges


def mixture(n, lam):
    rng = np.random.default_rng(0)
    centres = rng.standard_normal((5, 3)) * 2.0
    A = centres[rng.integers(0, 5, n)] + 0.7 * rng.standard_normal((n, 3))
    return cfl.SumOfNorms(cfl.losses.Quadratic(A), cfl.graphs.knn(A, 10), lam)


def test_one_cluster_of_two_groups_splits_between_them():
    # a path 0 - 1 - 2 - 3 with the groups {0, 1} and {2, 3}: fused at the mean, the middle
    # edge carries more than its capacity and the flows saturate it, the others have slack
    A = np.array([[0.0], [0.05], [5.0], [5.05]])
    graph = cfl.graphs.Graph(4, np.array([[0, 1], [1, 2], [2, 3]]), np.ones(3))
    prob = cfl.SumOfNorms(cfl.losses.Quadratic(A), graph, 0.1)
    X = np.full_like(A, A.mean())
    cert = kkt_residual(prob, X, rtol=1e-9)  # the least residual's flows, to 1e-9
    assert cert.kkt_residual > 0.1 and cert.exact
    split = split_saturated(prob, X, cert)
    assert split is not None and list(split) == [0, 0, 1, 1]
    sol = cfl.solve(prob, method="cvxpy")
    assert sol.n_clusters == 2 and list(sol.labels()) == [0, 0, 1, 1]
    # at the solution nothing is fused across the groups and no cluster splits
    assert split_saturated(prob, sol.X, kkt_residual(prob, sol.X)) is None


def test_repair_from_a_single_cluster_finds_the_certified_solution():
    prob = mixture(600, 3.0)
    ref = cfl.solve(prob, method="ssnal", tol=1e-9)
    certifier = Certifier(prob, 1e-6, polish=True, merges=reduced_merges)
    one = np.zeros(prob.n_users, dtype=int)
    rounds = certifier.repair(one, cluster_means(prob.loss.F, one),
                              np.zeros((prob.graph.n_edges, prob.dim)))
    kkt, X, cert = certifier.best[:3]
    assert rounds >= 2 and kkt <= 1e-6  # at least one split was needed
    assert np.unique(X, axis=0).shape[0] == ref.n_clusters
    assert abs(cert.objective - ref.objective) <= 1e-8 * abs(ref.objective)


@pytest.mark.parametrize("admm_max", [10**9, 0])  # the merges by ADMM, by SSNAL
def test_merges_after_a_split_start_from_the_candidate_that_was_split(monkeypatch, admm_max):
    """The first round's merges are solved from the cluster means; every later round's
    (a refinement after a split) from the candidate that was split and its flows, with no
    Newton on the split partition before them (its pieces sit at one mean: Newton would
    merge them back), by either inner solve; the answer is the same certified solution."""
    from convexfl.solvers import _common

    monkeypatch.setattr(_common, "MERGES_ADMM_MAX", admm_max)
    prob = mixture(600, 3.0)
    events, certified = [], []
    polish = _common.polish
    monkeypatch.setattr(_common, "polish", lambda p, labels, W0, **kw: (
        events.append(("polish", int(labels.max()) + 1)) or polish(p, labels, W0, **kw)))
    certify = Certifier._certify

    def record(self, X, flows, target=None, **search):
        cert = certify(self, X, flows, target, **search)
        certified.append(X)
        return cert

    monkeypatch.setattr(Certifier, "_certify", record)

    def merges(p, labels, W, max_size=None, warm=None, coarsening=False):
        events.append(("merges", int(labels.max()) + 1,
                       None if warm is None else any(warm[0] is X for X in certified)))
        return reduced_merges(p, labels, W, max_size, warm, coarsening)

    certifier = Certifier(prob, 1e-6, polish=True, merges=merges)
    one = np.zeros(prob.n_users, dtype=int)
    rounds = certifier.repair(one, cluster_means(prob.loss.F, one),
                              np.zeros((prob.graph.n_edges, prob.dim)))
    assert rounds >= 2 and certifier.best[0] <= 1e-6
    starts = [i for i, e in enumerate(events) if e[0] == "merges"]
    assert len(starts) >= 2 and events[starts[0]][2] is None
    for i in starts[1:]:
        assert events[i][2] is True  # a candidate certified before: the one split
        assert events[i - 1] != ("polish", events[i][1])  # no Newton on the split first
    ref = cfl.solve(prob, method="ssnal", tol=1e-9)
    assert abs(certifier.best[2].objective - ref.objective) <= 1e-8 * abs(ref.objective)


@pytest.mark.parametrize(("admm_max", "merge_max", "inner"), [
    (10**9, 8000, "admm"),  # small: ADMM
    (0, 10**9, "ssnal"),  # above MERGES_ADMM_MAX, up to MERGE_MAX: SSNAL
    (0, 10, "admm"),  # above MERGE_MAX (a coarsening attempt): ADMM's capped iterations
])
def test_merges_of_a_refinement_are_the_solution_s_partition(monkeypatch, admm_max,
                                                              merge_max, inner):
    """The solution lies in the subspace of every refinement of its partition: the merges
    of one (each cluster split at random into three) are its partition and centroids, by
    the inner solve chosen by size."""
    from convexfl.solvers import _common, admm, ssnal

    prob = mixture(600, 3.0)
    ref = cfl.solve(prob, method="ssnal", tol=1e-9)
    ref_labels = ref.labels()
    fine = ref_labels * 3 + np.random.default_rng(1).integers(0, 3, prob.n_users)
    fine = np.unique(fine, return_inverse=True)[1]
    used = []
    for name, module in (("admm", admm), ("ssnal", ssnal)):
        def spy(*args, _solve=module._solve_son, _name=name, **kwargs):
            used.append(_name)
            return _solve(*args, **kwargs)
        monkeypatch.setattr(module, "_solve_son", spy)
    monkeypatch.setattr(_common, "MERGES_ADMM_MAX", admm_max)
    monkeypatch.setattr(_common, "MERGE_MAX", merge_max)
    merged, W = reduced_merges(prob, fine, cluster_means(prob.loss.F, fine))
    assert used == [inner]
    assert merged.max() + 1 == ref.n_clusters
    assert len(np.unique(np.c_[merged, ref_labels], axis=0)) == ref.n_clusters
    np.testing.assert_allclose(W[merged], ref.X, atol=1e-6)


def test_merge_solver_by_size_loss_and_share_of_the_users(monkeypatch):
    from convexfl.solvers import _common
    from convexfl.solvers._common import merge_solver

    prob = mixture(600, 3.0)  # d = 3
    assert merge_solver(prob, 600) == "admm"  # K·d = 1800 ≤ MERGES_ADMM_MAX
    monkeypatch.setattr(_common, "MERGES_ADMM_MAX", 100)
    assert merge_solver(prob, 100) == "ssnal"  # 100 ≤ MERGE_SHARE · 600 = 150
    assert merge_solver(prob, 151) is None  # nearly as many clusters as users
    monkeypatch.setattr(_common, "MERGE_MAX", 299)
    assert merge_solver(prob, 100) is None  # K·d = 300 > MERGE_MAX
    A = prob.loss.F
    logistic = cfl.SumOfNorms(cfl.losses.Logistic(A, np.where(A[:, 0] > 0, 1.0, -1.0),
                                                  np.arange(prob.n_users)), prob.graph, 3.0)
    monkeypatch.setattr(_common, "MERGE_MAX", 8000)
    assert merge_solver(logistic, 100) is None  # SSNAL needs the quadratic loss


def test_a_repair_that_makes_no_progress_stops():
    # from one cluster: 1 → 39 → 24 clusters (KKT 0.12), then 179 → a round that does not
    # halve the residual. (mixture(600, 1.0) stalled until the flow search's lower bound
    # at the unsaturated components' averages gave exact splits; it now certifies.)
    prob = mixture(2000, 1.0)
    certifier = Certifier(prob, 1e-6, polish=True, merges=reduced_merges)
    one = np.zeros(prob.n_users, dtype=int)
    rounds = certifier.repair(one, cluster_means(prob.loss.F, one),
                              np.zeros((prob.graph.n_edges, prob.dim)), rounds=50)
    assert rounds == 0 and certifier.best[0] > 1e-6
    assert certifier.count == 1 and certifier.last is not None


@pytest.mark.parametrize("lam_from", [6.0, 10.0])
def test_a_warm_partition_from_another_lambda_is_repaired_before_any_iteration(lam_from):
    """A solution at a larger λ has too few clusters here (3 against 6): its partition
    fails, is split along its saturated flows inside the warm start and certified with
    no iteration, the same solution as SSNAL's from cold."""
    prob = mixture(600, 3.0)
    coarse = cfl.solve(prob.with_lam(lam_from), method="admm", tol=1e-8)
    ref = cfl.solve(prob, method="ssnal", tol=1e-9)
    assert coarse.n_clusters < ref.n_clusters  # a merge cannot mend it: a split must
    sol = cfl.solve(prob, method="admm", warm_start=coarse, tol=1e-6)
    assert sol.converged and sol.stage == "warm partition" and sol.n_iter == 0
    assert sol.history["warm_repair"] >= 2  # the warm round failed, a split certified
    assert sol.n_clusters == ref.n_clusters
    assert abs(sol.objective - ref.objective) <= 1e-9 * abs(ref.objective)


@pytest.mark.parametrize("inner", ["ssnal", "admm"])
def test_a_warm_partition_s_merges_start_from_the_moved_flows_when_ssnal_solves_them(
        monkeypatch, inner):
    """A solution at a smaller λ has too many clusters here: its partition's merges are
    solved from its cluster means and the warm start's moved flows when SSNAL solves them
    (``merge_solver``), from cold when ADMM does; either way the same solution as SSNAL's
    from cold."""
    from convexfl.solvers import _common
    from convexfl.solvers._common import flow_guesses, warm_start_arrays

    if inner == "ssnal":
        monkeypatch.setattr(_common, "MERGES_ADMM_MAX", 0)
        monkeypatch.setattr(_common, "MERGE_SHARE", 1.0)
    prob = mixture(600, 3.0)
    fine = cfl.solve(prob.with_lam(0.5), method="ssnal", tol=1e-9)  # Newton cannot merge
    ref = cfl.solve(prob, method="ssnal", tol=1e-9)  # its 166 clusters into these alone
    assert fine.n_clusters > ref.n_clusters
    starts = []

    def merges(p, labels, W, max_size=None, warm=None, coarsening=False):
        starts.append(warm)
        return reduced_merges(p, labels, W, max_size, warm, coarsening)

    X0, flows0 = warm_start_arrays(prob, None, None, fine)
    guesses = flow_guesses(prob, fine, flows0)
    certifier = Certifier(prob, 1e-6, polish=True, warm_from=fine, merges=merges)
    assert certifier.warm(X0, guesses)
    assert starts and abs(certifier.best[2].objective - ref.objective) <= 1e-9 * abs(
        ref.objective)
    first = starts[0]
    if inner == "admm":
        assert first is None
    else:
        labels = cfl.clusters.components(prob.n_users, prob.graph.edges,
                                         prob.graph.distances(fine.X) <= 1e-9)
        np.testing.assert_allclose(first[0], cluster_means(X0, labels)[labels])
        np.testing.assert_array_equal(first[1], guesses if guesses.ndim == 2 else guesses[0])


def test_a_failed_warm_repair_leaves_the_certifier_as_the_warm_round_left_it(monkeypatch):
    """From a two-cluster solution at λ = 100 a warm repair of two rounds does not reach
    the six clusters of λ = 3 (three rounds do): the certifier keeps the warm round's
    candidate as its best (the solver's iterations and a later repair start from their
    own partitions)."""
    from convexfl.solvers import _common
    from convexfl.solvers._common import _fused_of, _moved_flows, flow_guesses

    monkeypatch.setattr(_common, "WARM_REPAIR_ROUNDS", 2)

    prob = mixture(600, 3.0)
    warm = cfl.solve(prob.with_lam(100.0), method="admm", tol=1e-8)
    flows = flow_guesses(prob, warm, _moved_flows(prob, warm))

    def warm_round(warm_from):
        certifier = Certifier(prob, 1e-6, polish=True, warm_from=warm_from,
                              merges=reduced_merges)
        ok = certifier.warm(warm.X, flows, _fused_of(prob, warm))
        return ok, certifier

    alone = warm_round(None)[1]  # no solution at another λ: no repair
    ok, certifier = warm_round(warm)
    assert not ok and certifier.warm_repair == 0 and alone.best[0] > 1e-6
    assert certifier.best[0] == alone.best[0]
    np.testing.assert_array_equal(certifier.best[1], alone.best[1])
    assert certifier.polish_steps == alone.polish_steps


def test_a_warm_start_at_the_same_lambda_is_not_repaired_by_the_solver():
    """At the warm start's own λ (``auto`` hands its ADMM stage's candidate to SSNAL after
    repairing it) a failing warm partition goes to the iterations, unrepaired."""
    prob = mixture(600, 3.0)
    coarse = cfl.solve(prob.with_lam(6.0), method="admm", tol=1e-8)
    here = dataclasses.replace(coarse, lam=prob.lam)  # the same wrong partition at λ
    sol = cfl.solve(prob, method="admm", warm_start=here, tol=1e-6)
    assert sol.converged and "warm_repair" not in sol.history
    assert sol.stage != "warm partition" and sol.n_iter > 0


def test_a_large_warm_partition_at_the_same_lambda_is_left_to_the_budgeted_polishes(
        monkeypatch):
    """``auto``'s SSNAL stage does not polish its ADMM stage's large partition (K·d >
    SMALL_NEWTON) before the iterations: the polish had no step limit there (53 steps on
    K = 719, d = 3), and SSNAL's first candidate polished the same partition again."""
    from convexfl.solvers import _common

    prob = mixture(1000, 0.3)
    calls = []
    real = _common.polish

    def counting(p, labels, W0, **options):
        calls.append((W0.size, options.get("max_steps")))
        return real(p, labels, W0, **options)

    monkeypatch.setattr(_common, "polish", counting)
    sol = cfl.solve(prob, method="auto")
    assert sol.converged and "admm_warm_up" in sol.history and sol.n_clusters > 300
    unbounded = [size for size, steps in calls if steps is None]
    assert all(size <= _common.SMALL_NEWTON for size in unbounded), unbounded
    ref = cfl.solve(prob, method="ssnal")
    assert sol.n_clusters == ref.n_clusters
    assert abs(sol.objective - ref.objective) <= 1e-8 * abs(ref.objective)


def test_a_polish_during_the_iterations_pays_for_its_size(monkeypatch):
    """A budgeted Newton step on a reduced system of ``K·d`` unknowns costs
    ``K·d // POLISH_DENSE_MAX`` steps of the budget (at least one)."""
    from convexfl.solvers import _common

    prob = mixture(1000, 0.3)
    first = cfl.solve(prob, method="admm", max_iter=100, polish=False)
    size = first.n_clusters * prob.dim
    weight = size // _common.POLISH_DENSE_MAX
    assert weight >= 2 and size <= _common.POLISH_MAX
    seen = []
    real = _common.polish

    def recording(p, labels, W0, **options):
        out = real(p, labels, W0, **options)
        seen.append((options.get("max_steps"), out[3]))
        return out

    monkeypatch.setattr(_common, "polish", recording)
    certifier = Certifier(prob, 1e-6, polish=True)
    for _ in range(2):  # polished once stable (the next test)
        certifier(first.certificate.fused, first.X, first.flows)
    budget = _common.POLISH_STEPS + _common.POLISH_STEPS_PER_CHECK * 2
    assert seen[0][0] == budget // weight
    assert certifier.polish_steps == seen[0][1] * weight


def test_a_large_partition_is_polished_once_a_second_candidate_has_it(monkeypatch):
    """During the iterations a candidate whose reduced Newton system is larger than
    ``SMALL_NEWTON`` is polished only when the previous candidate had its partition; a
    small one at once."""
    from convexfl.solvers import _common

    prob = mixture(1000, 0.3)
    early = cfl.solve(prob, method="admm", max_iter=50, polish=False)
    late = cfl.solve(prob, method="admm", max_iter=100, polish=False)
    assert not np.array_equal(early.labels(), late.labels())
    assert late.n_clusters * prob.dim > _common.SMALL_NEWTON
    polished = []
    real = _common.polish

    def recording(p, labels, W0, **options):
        polished.append(int(labels.max()) + 1)
        return real(p, labels, W0, **options)

    monkeypatch.setattr(_common, "polish", recording)
    certifier = Certifier(prob, 1e-6, polish=True)
    for sol in (early, late):
        assert not certifier(sol.certificate.fused, sol.X, sol.flows)
    assert polished == []
    certifier(late.certificate.fused, late.X, late.flows)
    assert polished == [late.n_clusters]
    small = mixture(1000, 3.0)
    few = cfl.solve(small, method="admm", max_iter=30, polish=False)
    assert few.n_clusters * small.dim <= _common.SMALL_NEWTON
    Certifier(small, 1e-6, polish=True)(few.certificate.fused, few.X, few.flows)
    assert len(polished) == 2


def test_a_newton_steps_candidate_is_polished_only_when_small(monkeypatch):
    """``step=True`` (SSNAL's endgame checks the candidate of every Newton step): a large
    partition stays unpolished however stable, and such checks add nothing to the
    polishes' step budget; a small one is polished as before."""
    from convexfl.solvers import _common

    prob = mixture(1000, 0.3)
    late = cfl.solve(prob, method="admm", max_iter=100, polish=False)
    size = late.n_clusters * prob.dim
    assert _common.SMALL_NEWTON < size <= _common.POLISH_MAX
    polished = []
    real = _common.polish

    def recording(p, labels, W0, **options):
        polished.append((int(labels.max()) + 1, options.get("max_steps")))
        return real(p, labels, W0, **options)

    monkeypatch.setattr(_common, "polish", recording)
    certifier = Certifier(prob, 1e-6, polish=True)
    for _ in range(3):
        assert not certifier(late.certificate.fused, late.X, late.flows, step=True)
    assert polished == [] and certifier.step_checks == 3
    certifier(late.certificate.fused, late.X, late.flows)  # stable and not a step
    weight = max(1, size // _common.POLISH_DENSE_MAX)
    budget = _common.POLISH_STEPS + _common.POLISH_STEPS_PER_CHECK * 1
    assert polished == [(late.n_clusters, budget // weight)]
    small = mixture(1000, 3.0)
    few = cfl.solve(small, method="admm", max_iter=30, polish=False)
    assert few.n_clusters * small.dim <= _common.SMALL_NEWTON
    Certifier(small, 1e-6, polish=True)(few.certificate.fused, few.X, few.flows, step=True)
    assert len(polished) == 2


def test_auto_repairs_its_admm_partition_and_agrees_with_ssnal():
    prob = mixture(5000, 3.0)
    sol = cfl.solve(prob, method="auto")
    assert sol.converged and sol.stage == "partition repair" and sol.method == "admm"
    repair = sol.history["repair"]
    assert repair["certified"] and repair["rounds"] >= 1
    assert sol.kkt_residual <= sol.kkt_tol
    assert sol.time_s >= repair["time_s"]
    ref = cfl.solve(prob, method="ssnal")
    assert sol.n_clusters == ref.n_clusters
    assert abs(sol.objective - ref.objective) <= 1e-6 * abs(ref.objective)
    assert np.abs(sol.X - ref.X).max() <= 1e-4 * (1 + np.abs(ref.X).max())


def test_auto_on_a_reduced_problem_solves_its_inner_problem():
    # each user its own cluster: the reduced problem is the problem itself, whose ADMM
    # stage does not certify (tests/test_ssnal.py). auto solved the reduced problem as a
    # (SON) problem on the users and then raised on SSNAL's warm start; it now solves
    # prob.inner and expands, as every method does
    rng = np.random.default_rng(2)
    A = rng.standard_normal((200, 2))
    loss = cfl.losses.Quadratic(A)
    graph = cfl.graphs.knn(A, 5, warn_disconnected=False)
    red = cfl.problems.Reduced(loss, graph, np.arange(200) // 2, 0.1)
    sol = cfl.solve(red, method="auto")
    ref = cfl.solve(red, method="ssnal")
    assert sol.converged and sol.X.shape == (200, 2) and "W" in sol.history
    assert abs(sol.objective - ref.objective) <= 1e-6 * abs(ref.objective)
    same = cfl.problems.Reduced(loss, graph, np.arange(200), 0.1)
    assert cfl.solve(same, method="auto").stage == "partition repair"


def test_auto_with_polish_false_does_not_repair():
    rng = np.random.default_rng(2)
    A = rng.standard_normal((200, 2))
    prob = cfl.SumOfNorms(cfl.losses.Quadratic(A),
                          cfl.graphs.knn(A, 5, warn_disconnected=False), 0.1)
    assert cfl.solve(prob, method="auto").stage == "partition repair"
    plain = cfl.solve(prob, method="auto", polish=False)
    assert plain.method == "ssnal" and plain.history["repair"]["rounds"] == 0
    assert plain.history["repair"]["kkt_residual"] is None  # nothing was certified


def test_a_partition_is_polished_again_by_a_candidate_with_half_its_residual(monkeypatch):
    """A partition polished without success is polished again only when a later candidate
    on it has at most ``REPOLISH_GAIN`` times the least residual of its earlier candidates
    (the polish merged two clusters that stay apart, say, and a candidate nearer the
    solution is worth a second try). Here the polish is made to fail (it returns its start)
    and ``tol`` is out of reach, so that every certificate fails and counts."""
    from convexfl.solvers import _common
    from convexfl.solvers._common import REPOLISH_GAIN, Certifier

    calls = []

    def failing_polish(prob, labels, W0, **options):
        calls.append(1)
        return np.asarray(labels), np.asarray(W0, float), False, 1

    rng = np.random.default_rng(0)
    A = np.r_[rng.normal(0, 0.1, (10, 2)), rng.normal(5, 0.1, (10, 2))]
    prob = cfl.SumOfNorms(cfl.losses.Quadratic(A), cfl.graphs.complete(20), 0.05)
    exact = cfl.solve(prob, tol=1e-10)
    monkeypatch.setattr(_common, "polish", failing_polish)
    fused = prob.graph.distances(exact.X) <= exact.fuse_tol
    cert = Certifier(prob, 1e-14, polish=True)

    direction = rng.standard_normal(exact.X.shape)

    def offer(noise):
        cert(fused, exact.X + noise * direction, exact.flows)
        return cert.last[1].kkt_residual

    first = offer(1e-3)
    assert len(calls) == 1
    assert REPOLISH_GAIN * first < offer(0.8e-3) < first  # better, not by half: no polish
    assert len(calls) == 1
    assert offer(1e-3 * REPOLISH_GAIN / 20) < REPOLISH_GAIN * first
    assert len(calls) == 2


def test_a_small_reduced_problem_gets_its_own_polish_steps(monkeypatch):
    """Polishes during the iterations share a budget of Newton steps; a small reduced
    problem (``K·d ≤ SMALL_NEWTON``) may take at least ``SMALL_POLISH_STEPS`` whatever is
    left of it, and its steps still count; a larger one gets what is left."""
    from convexfl.solvers import _common
    from convexfl.solvers._common import (
        POLISH_STEPS,
        POLISH_STEPS_PER_CHECK,
        SMALL_NEWTON,
        SMALL_POLISH_STEPS,
        Certifier,
    )

    limits = []

    def failing_polish(prob, labels, W0, *, max_steps=None, **options):
        limits.append(max_steps)
        return np.asarray(labels), np.asarray(W0, float), False, 45

    monkeypatch.setattr(_common, "polish", failing_polish)
    rng = np.random.default_rng(1)
    A = rng.standard_normal((60, 6))  # 60 clusters × d = 6 = 360 > SMALL_NEWTON unknowns
    prob = cfl.SumOfNorms(cfl.losses.Quadratic(A), cfl.graphs.complete(60), 1e-3)
    assert 60 * 6 > SMALL_NEWTON
    cert = Certifier(prob, 1e-14, polish=True)
    none = np.zeros(prob.graph.n_edges, bool)
    two = np.zeros_like(none)
    two[prob.graph.edges[:, 0] < 30] = True  # users 0..29 joined to everyone: one cluster
    two &= prob.graph.edges[:, 1] < 30
    cert(none, A, None)  # 60 clusters, the first time: not polished
    cert(none, A, None)  # again: the shared budget, 30 + 10 for each check
    assert limits == [POLISH_STEPS + 2 * POLISH_STEPS_PER_CHECK]
    cert(two, A, None)  # 31 clusters × 6 = 186 unknowns: small
    assert limits[1] == max(POLISH_STEPS + 3 * POLISH_STEPS_PER_CHECK - 45,
                            SMALL_POLISH_STEPS)
    assert cert.polish_steps == 90


def test_a_coarsening_attempt_with_a_wrong_fusion_is_repaired():
    """A coarsening attempt whose partition joins two clusters of the solution (its reduced
    problem cannot split them) is repaired: split along the saturated flows, merged and
    certified, instead of counting as a failure (measured: kNN10 mixture N = 2·10⁴,
    λ = 10, ``admm``: three failed attempts, then 5180 iterations, 66.9 s; repaired
    3.4 s)."""
    prob = mixture(2000, 10.0)
    ref = cfl.solve(prob, method="ssnal")
    labels = ref.labels()
    assert ref.converged and ref.n_clusters >= 2
    edges = prob.graph.edges
    fused = labels[edges[:, 0]] == labels[edges[:, 1]]
    bridge = np.flatnonzero(~fused)[0]  # one edge between two clusters, fused
    fused[bridge] = True
    certifier = Certifier(prob, 1e-6, polish=True, merges=reduced_merges)
    assert certifier.coarsen(fused, ref.X, ref.flows)
    kkt, X = certifier.best[0], certifier.best[1]
    assert kkt <= 1e-6
    assert cfl.certificates.kkt_residual(prob, X).kkt_residual <= 1e-6
    assert same_partition(cfl.clusters.labels(X, 1e-6, graph=prob.graph), labels)
