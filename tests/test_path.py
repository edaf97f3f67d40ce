"""Solution paths: end points (N clusters at λ = 0, one at λ ≥ λ̂), fusion events, linkage,
queries, warm starts, save/load and resume."""

import inspect
import json
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.cluster.hierarchy import dendrogram, is_valid_linkage

import convexfl as cfl
from convexfl import solvers
from convexfl.path import SolutionPath


@pytest.fixture(scope="module")
def quad():
    A, truth = cfl.datasets.planted_points(3, 4, 2, separation=10.0, radius=1.0,
                                           random_state=0)
    prob = cfl.SumOfNorms(cfl.losses.Quadratic(A), cfl.graphs.complete(len(A)), 0.0)
    return prob, truth


@pytest.fixture(scope="module")
def quad_path(quad):
    prob, _ = quad
    return cfl.son_path(prob, n_lambdas=16)


def test_path_runs_from_n_clusters_to_one_at_the_fusion_threshold(quad, quad_path):
    prob, _ = quad
    p = quad_path
    lam_hat = cfl.bounds.fusion_threshold(prob).value
    assert p.lambdas[0] == 0 and p.lambdas[-1] == pytest.approx(lam_hat)
    assert p.lam_hat == pytest.approx(lam_hat)
    assert p.n_clusters[0] == prob.n_users and p.n_clusters[-1] == 1
    assert p.monotone and np.all(np.diff(p.n_clusters) <= 0)
    assert np.all(p.converged) and np.all(p.kkt_residual <= 1e-6)  # "auto" default tol
    beyond = cfl.son_path(prob, [lam_hat, 1.01 * lam_hat, 2 * lam_hat, 10 * lam_hat])
    assert np.all(beyond.n_clusters == 1)
    row = p.table[3]
    assert set(row) == {"lam", "n_clusters", "objective", "kkt_residual", "n_iter", "time_s",
                        "converged"}
    assert "clusters" in p.format_table() and "SolutionPath" in repr(p)


@pytest.mark.parametrize("loss_cls", [cfl.losses.Logistic, cfl.losses.SquaredHinge])
def test_classification_paths_have_n_clusters_at_zero_and_one_above_lam_hat(loss_cls):
    X, y, groups, _ = cfl.datasets.planted_classification(3, 2, 30, 2, flip=0.0,
                                                          random_state=3)
    loss = loss_cls.from_groups(X, y, groups, c=0.01)
    prob = cfl.SumOfNorms(loss, cfl.graphs.complete(loss.n_users), 0.0)
    p = cfl.son_path(prob, n_lambdas=8)
    assert p.n_clusters[0] == loss.n_users and p.n_clusters[-1] == 1
    lam_hat = p.lam_hat
    above = cfl.son_path(prob, [lam_hat, 1.5 * lam_hat, 4 * lam_hat])
    assert np.all(above.n_clusters == 1)


def test_fusion_events_merge_table_and_linkage_agree(quad, quad_path):
    p = quad_path
    n = quad[0].n_users
    Z = p.linkage()
    assert Z.shape == (n - 1, 4) and is_valid_linkage(Z)
    assert np.all(np.diff(Z[:, 2]) >= 0)
    tree = dendrogram(Z, no_plot=True)
    assert sorted(tree["leaves"]) == list(range(n))
    table = p.merge_table
    assert len(table) == n - 1 and table[-1]["size"] == n and table[-1]["n_clusters_after"] == 1
    grid = set(np.round(p.lambdas, 12))
    for row in table:
        assert round(row["lam"], 12) in grid and not row["beyond_grid"]
        assert row["lam_bracket"][0] < row["lam"] == row["lam_bracket"][1]
    events = p.fusion_events
    assert all(not e["split"] for e in events) and p.splits == []
    assert sum(e["n_before"] - e["n_after"] for e in events) == n - 1
    # every event's merged groups partition a cluster of the later solution
    for e in events:
        lab = p.labels[e["index"]]
        for groups in e["merged"]:
            users = sorted(u for g in groups for u in g)
            assert len(set(lab[users])) == 1


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), min_size=1, max_size=40))
def test_fusion_events_groups_are_the_definitions_users(pairs):
    """The merged and split groups of an event, computed by one sort, are those of the
    definitions: for each later cluster with several earlier ones, all users of each
    earlier one; for each earlier cluster with several later ones, its users in each."""
    from convexfl.path.result import _refinements

    old, new = np.array(pairs).T
    merged = [[np.flatnonzero(old == p).tolist() for p in np.unique(old[new == c])]
              for c in np.unique(new) if len(np.unique(old[new == c])) > 1]
    split = [[np.flatnonzero((old == c) & (new == p)).tolist() for p in np.unique(new[old == c])]
             for c in np.unique(old) if len(np.unique(new[old == c])) > 1]
    assert _refinements(new, old, whole=True) == merged
    assert _refinements(old, new, whole=False) == split


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), min_size=1, max_size=40))
def test_the_one_pass_split_test_is_the_definitions(pairs):
    """``monotone`` and ``splits`` use a one-pass test; it says "split" exactly when some
    earlier cluster's users carry several later labels (the definition, as above)."""
    from convexfl.path.result import _splits

    old, new = np.array(pairs).T
    truth = any(len(np.unique(new[old == c])) > 1 for c in np.unique(old))
    assert _splits(old, new) is truth


def test_labels_at_k_and_lam_and_unattained_counts(quad, quad_path):
    _, truth = quad
    p = quad_path
    lab, lam = p.labels_at(k=3, return_lam=True)
    assert cfl.clusters.same_partition(lab, truth) and p.n_clusters[p.index_at(lam)] == 3
    r = 5
    assert np.array_equal(p.labels_at(lam=p.lambdas[r] * 1.01), p.labels[r])
    assert np.array_equal(p.labels_at(lam=0.0), p.labels[0])
    missing = [k for k in range(1, 13) if k not in set(p.n_clusters.tolist())]
    assert missing
    with pytest.raises(ValueError, match="never attained.*nearest attainable"):
        p.labels_at(k=missing[0])
    with pytest.raises(ValueError, match="exactly one"):
        p.labels_at(k=2, lam=0.1)
    assert p.recovery_runs(truth)


def test_non_monotone_paths_are_reported_not_hidden():
    lab = np.array([[0, 1, 2, 3], [0, 0, 1, 1], [0, 1, 2, 2], [0, 0, 0, 0]])
    R = len(lab)
    p = SolutionPath(lambdas=np.array([0.0, 1.0, 2.0, 3.0]), X=np.zeros((R, 4, 2)),
                     labels=lab, n_clusters=lab.max(axis=1) + 1, objective=np.zeros(R),
                     kkt_residual=np.zeros(R), n_iter=np.zeros(R, int), time_s=np.zeros(R),
                     converged=np.ones(R, bool), fuse_tol=np.zeros(R))
    assert not p.monotone and len(p.splits) == 1
    assert p.splits[0]["lam_lo"] == 1.0 and p.splits[0]["split"] == [[[0], [1]]]
    Z = p.linkage()   # the eventual-fusion ultrametric is still a valid tree
    assert is_valid_linkage(Z)
    assert p.merge_table[0]["left"] + p.merge_table[0]["right"] in ([2, 3], [3, 2])


def _counting_method(calls, fail_at=None):
    """A solver method (the reference) that counts its calls, takes ``X0`` and can fail."""
    def method(prob, *, X0=None, tol=1e-8):
        calls.append(None if X0 is None else np.array(X0))
        if fail_at is not None and len(calls) == fail_at:
            raise KeyboardInterrupt("simulated interruption")
        return solvers.METHODS["cvxpy"](prob, tol=tol)
    return method


def test_warm_start_passes_the_previous_solution(quad, monkeypatch):
    prob, _ = quad
    calls = []
    monkeypatch.setitem(solvers.METHODS, "counting", _counting_method(calls))
    p = cfl.son_path(prob, [0.0, 0.1, 0.2], method="counting")
    assert calls[0] is None
    units = prob.loss.standard[0]  # methods are called on the standard problem
    np.testing.assert_allclose(units.x_from(calls[1]), p.X[0])
    np.testing.assert_allclose(units.x_from(calls[2]), p.X[1])
    seen = []

    def takes_solution(prob, *, warm_start=None):
        seen.append(warm_start)
        return solvers.METHODS["cvxpy"](prob)

    monkeypatch.setitem(solvers.METHODS, "sol_warm", takes_solution)
    cfl.son_path(prob, [0.1, 0.2], method="sol_warm")
    assert seen[0] is None and seen[1].lam == pytest.approx(0.1 / units.grad)
    got = []

    def lazy_wrapper(prob, **options):      # like the lazy wrappers in solvers.METHODS
        got.append(sorted(options))
        return solvers.METHODS["cvxpy"](prob)

    monkeypatch.setitem(solvers.METHODS, "lazy", lazy_wrapper)
    cfl.son_path(prob, [0.1, 0.2], method="lazy")
    assert got == [[], ["warm_start"]]

    def strict(prob, **options):
        if options:
            raise TypeError(f"strict() got an unexpected keyword argument {next(iter(options))!r}")
        return solvers.METHODS["cvxpy"](prob)

    monkeypatch.setitem(solvers.METHODS, "strict", strict)
    p2 = cfl.son_path(prob, [0.1, 0.2, 0.3], method="strict")
    assert any("does not accept" in note for note in p2.meta["notes"]) and len(p2) == 3
    cold = []
    monkeypatch.setitem(solvers.METHODS, "counting2", _counting_method(cold))
    cfl.son_path(prob, [0.1, 0.2], method="counting2", warm_start=False)
    assert cold == [None, None]
    assert "X0" not in inspect.signature(solvers.METHODS["cvxpy"]).parameters


def test_save_load_round_trip_and_resume_after_an_interruption(quad, tmp_path, monkeypatch):
    prob, _ = quad
    grid = np.r_[0.0, np.geomspace(0.01, 0.6, 7)]
    full = cfl.son_path(prob, grid, method="cvxpy")  # compared with the "counting" reference
    files = full.save(tmp_path / "full")
    back = SolutionPath.load(files[0])
    for name in ("lambdas", "X", "labels", "n_clusters", "objective", "kkt_residual"):
        np.testing.assert_array_equal(getattr(back, name), getattr(full, name))
    assert back.method == full.method and back.lam_hat == pytest.approx(full.lam_hat)
    meta = json.loads((tmp_path / "full.json").read_text())
    assert meta["lam_convention"] == "son" and len(meta["table"]) == len(grid)

    ck = tmp_path / "ck"
    calls = []
    monkeypatch.setitem(solvers.METHODS, "counting", _counting_method(calls, fail_at=4))
    with pytest.raises(KeyboardInterrupt):
        cfl.son_path(prob, grid, method="counting", checkpoint=ck)
    part = SolutionPath.load(ck)
    assert len(part) == 3 and not part.complete
    assert sorted(os.listdir(tmp_path)) == ["ck.json", "ck.npz", "full.json", "full.npz"]
    resumed_calls = []
    monkeypatch.setitem(solvers.METHODS, "counting", _counting_method(resumed_calls))
    done = cfl.son_path(prob, grid, method="counting", checkpoint=ck)
    assert len(resumed_calls) == len(grid) - 3                # finished λ are not redone
    units = prob.loss.standard[0]
    np.testing.assert_allclose(units.x_from(resumed_calls[0]), part.X[-1])  # from the file
    assert done.complete and done.meta["resumed_at"] == 3
    np.testing.assert_array_equal(done.n_clusters, full.n_clusters)
    np.testing.assert_allclose(done.objective, full.objective, rtol=1e-9)
    with pytest.raises(ValueError, match="checkpoint"):
        cfl.son_path(prob, grid[:-1], method="counting", checkpoint=ck)


def test_fl_metrics_follow_the_paper_definitions():
    X, y, groups, uc = cfl.datasets.planted_classification(2, 2, 30, 2, flip=0.0,
                                                           random_state=4)
    loss = cfl.losses.SquaredHinge.from_groups(X, y, groups, c=0.01)
    prob = cfl.SumOfNorms(loss, cfl.graphs.complete(loss.n_users), 0.0)
    p = cfl.son_path(prob, n_lambdas=5)
    Xt, yt, gt, _ = cfl.datasets.planted_classification(2, 1, 200, 2, flip=0.0,
                                                        random_state=5)
    m = cfl.path.fl_metrics(p, loss, Xt, yt, gt, uc)
    assert m["accuracy"].shape == (len(p),) and np.all((0 <= m["accuracy"]) &
                                                       (m["accuracy"] <= 1))
    assert m["within_distance"][-1] == pytest.approx(0.0, abs=1e-8)
    assert m["within_distance"][0] > 0
    with pytest.raises(ValueError, match="user_cluster"):
        cfl.path.fl_metrics(p, loss, Xt, yt, gt, uc[:-1])


def test_bad_arguments_are_refused(quad):
    prob, _ = quad
    with pytest.raises(ValueError, match="method"):
        cfl.son_path(prob, [0.1], method="nope")
    with pytest.raises(ValueError, match="lambdas"):
        cfl.son_path(prob, [-1.0, 0.1])
    with pytest.raises(TypeError, match="prob"):
        cfl.son_path(cfl.global_model(prob.loss), [0.1])
    with pytest.raises(FileNotFoundError):
        SolutionPath.load(os.path.join("no", "such", "path"))


def test_checkpoint_that_cannot_be_written_is_refused_before_any_solve(tmp_path):
    import convexfl as cfl

    A = np.random.default_rng(0).standard_normal((4, 2))
    prob = cfl.SumOfNorms(cfl.losses.Quadratic(A), cfl.graphs.complete(4), 0.0)
    with pytest.raises(ValueError, match="checkpoint: the folder .* does not exist"):
        cfl.son_path(prob, [0.0, 1.0], checkpoint=tmp_path / "missing" / "p", progress=False)
    with pytest.raises(ValueError, match="checkpoint: expected a file name"):
        cfl.son_path(prob, [0.0, 1.0], checkpoint=tmp_path, progress=False)


def test_a_save_that_fails_at_the_rename_leaves_the_old_file_and_no_temporary(quad, tmp_path,
                                                                               monkeypatch):
    prob, _ = quad
    path = cfl.son_path(prob, [0.0, 0.1], method="cvxpy")
    path.save(tmp_path / "p")
    before = (tmp_path / "p.npz").read_bytes()

    def refuse(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError, match="disk full"):
        path.save(tmp_path / "p")
    assert (tmp_path / "p.npz").read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["p.json", "p.npz"]     # no temporary file left


def test_above_a_fused_lambda_the_path_reuses_the_certified_fused_solution(quad, monkeypatch):
    prob, _ = quad
    lam_hat = cfl.bounds.fusion_threshold(prob).value
    calls = []
    monkeypatch.setitem(solvers.METHODS, "counting", _counting_method(calls))
    lams = [0.5 * lam_hat, 1.01 * lam_hat, 2 * lam_hat, 10 * lam_hat]
    p = cfl.son_path(prob, lams, method="counting")
    assert len(calls) == 2  # the first fused λ is solved; the two above it are not
    assert list(p.n_clusters[1:]) == [1, 1, 1] and p.n_clusters[0] > 1
    for lam, X, kkt, obj in zip(p.lambdas[1:], p.X[1:], p.kkt_residual[1:], p.objective[1:],
                                strict=True):
        at = prob.with_lam(lam)
        assert cfl.certificates.kkt_residual(at, X).kkt_residual <= 1e-6
        assert kkt <= 1e-6 and obj == pytest.approx(at.objective(X), rel=1e-12)
    cold = cfl.son_path(prob, lams, method="counting", warm_start=False)
    assert len(calls) == 6  # without warm starts every λ is solved
    np.testing.assert_allclose(cold.X, p.X, atol=1e-6)


def test_the_fused_shortcut_needs_every_component_fused(monkeypatch):
    A = np.array([[0.0, 0], [0.1, 0], [5.0, 5.0], [5.2, 5.0], [9.0, 0.0], [9.1, 0.0]])
    graph = cfl.graphs.from_edges([[0, 1], [2, 3], [3, 4], [4, 5]], n_nodes=6)
    prob = cfl.SumOfNorms(cfl.losses.Quadratic(A), graph, 0.0)
    calls = []
    monkeypatch.setitem(solvers.METHODS, "counting", _counting_method(calls))
    p = cfl.son_path(prob, [1.0, 2.0, 50.0, 100.0], method="counting")
    # components {0, 1} and {2..5}: three clusters at λ = 1 and 2 (not reused: one component
    # is not fused), each component fused at λ = 50, which λ = 100 reuses
    assert list(p.n_clusters) == [3, 3, 2, 2] and len(calls) == 3
    np.testing.assert_array_equal(p.X[3], p.X[2])
    for lam, X in zip(p.lambdas, p.X, strict=True):
        assert cfl.certificates.kkt_residual(prob.with_lam(lam), X).kkt_residual <= 1e-6


def test_a_large_socp_ends_the_default_grid_at_the_certified_upper_bound(monkeypatch):
    """Where λ̂'s SOCP would be larger than ``GRID_SOCP_MAX`` the grid ends at its certified
    upper bound (the models are fused there), and λ̂ comes exact from the path's last
    two-cluster solution when its cut decides, as the SOCP's value; else it stays the
    bracket, and ``lam_hat`` is nan."""
    import convexfl.path.trace as trace

    rng = np.random.default_rng(7)
    A = np.r_[rng.normal(0, 1, (40, 3)), rng.normal(2, 1, (40, 3))]
    two = cfl.SumOfNorms(cfl.losses.Quadratic(A), cfl.graphs.knn(A, 10), 0.0)
    A3, _ = cfl.datasets.planted_points(3, 4, 2, separation=10.0, radius=1.0, random_state=0)
    three = cfl.SumOfNorms(cfl.losses.Quadratic(A3), cfl.graphs.complete(len(A3)), 0.0)
    exact = {name: cfl.bounds.fusion_threshold(prob).value
             for name, prob in (("two", two), ("three", three))}
    monkeypatch.setattr(trace, "GRID_SOCP_MAX", 0)
    for name, prob in (("two", two), ("three", three)):
        grid, fb = trace.default_grid(prob, 16)
        assert fb.kind == "certified bound" and grid[-1] == fb.hi >= exact[name] >= fb.lo
        p = cfl.son_path(prob, n_lambdas=16)
        assert p.lambdas[-1] == pytest.approx(fb.hi) and p.n_clusters[-1] == 1
        assert np.all(p.converged)
        if name == "two":  # its last merge is 2 → 1 on the grid: the cut decides
            assert p.meta["fusion_threshold"]["kind"] == "exact"
            assert p.lam_hat == pytest.approx(exact[name], rel=1e-8)
        else:  # 3 → 1 between two grid points: no split
            assert p.meta["fusion_threshold"]["kind"] == "certified bound"
            assert np.isnan(p.lam_hat)
