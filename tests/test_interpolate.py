"""Certified interpolation along a path (:mod:`convexfl.path.interpolate`) and its use by
``son_path``: every interpolated λ is checked here by an independent certificate and
against a solve of its own."""

import dataclasses

import numpy as np
import pytest
from sklearn.datasets import make_moons

import convexfl as cfl
from convexfl import solvers
from convexfl._flow_kernels import flow_residual
from convexfl.certificates import kkt_residual
from convexfl.path.interpolate import Segment, cluster_exact

TOL = 1e-6


@pytest.fixture(scope="module")
def moons():
    """make_moons, 200 users, kNN 10: two clusters over most of [0, λ̂]."""
    A, _ = make_moons(n_samples=200, noise=0.1, random_state=0)
    prob = cfl.SumOfNorms(cfl.losses.Quadratic(A), cfl.graphs.knn(A, 10, phi=2.0), 1.0)
    lam_hat = cfl.bounds.fusion_threshold(prob).value
    return prob, np.linspace(0.0, 1.02 * lam_hat, 120)


def _solve_along(prob, lams):
    out, prev = [], None
    for lam in lams:
        prev = cfl.solve(prob.with_lam(lam), tol=TOL, warm_start=prev)
        out.append(prev)
    return out


def _two_cluster_stretch(prob, grid):
    sols = _solve_along(prob, grid)
    two = [s for s in sols if s.n_clusters == 2]
    assert len(two) >= 10
    return two


def test_the_interpolation_is_the_solution_and_its_flows_certify_it(moons):
    prob, grid = moons
    two = _two_cluster_stretch(prob, grid)
    a, b = two[0], two[-1]
    segment = Segment.between(prob, a, b)
    assert segment is not None
    for lam in np.linspace(a.lam, b.lam, 7)[1:-1]:
        at = prob.with_lam(lam)
        X, objective, kkt_abs, kkt, flows = segment.at(lam, with_flows=True)
        # the reported residual is that of the explicit flows, all edges, recomputed
        R = flow_residual(at.loss.grad(X), prob.graph.edges, flows)
        assert kkt_abs == pytest.approx(float(np.linalg.norm(R)), rel=1e-9, abs=1e-14)
        cap = lam * prob.graph.weights
        assert np.all(np.linalg.norm(flows, axis=1) <= cap * (1 + 1e-12))
        assert objective == pytest.approx(at.objective(X), rel=1e-13)
        # an independent certificate (its own least residual, to its search's accuracy) is
        # at most ours
        own = kkt_residual(at, X)
        assert own.kkt_residual <= max(kkt * (1 + 1e-9), 1e-12) and kkt <= TOL
        # two clusters, quadratic loss: the interpolation is the solution itself
        direct = cfl.solve(at, tol=1e-10)
        np.testing.assert_allclose(X, direct.X, atol=1e-8)


def test_a_segment_needs_one_partition_exact_clusters_and_increasing_lambda(moons):
    prob, grid = moons
    two = _two_cluster_stretch(prob, grid)
    a, b = two[0], two[-1]
    assert Segment.between(prob, b, a) is None  # λ must increase
    three = [s for s in _solve_along(prob, grid[:60]) if s.n_clusters == 3]
    assert three and Segment.between(prob, three[-1], b) is None  # another partition
    smeared = dataclasses.replace(b, X=b.X + 1e-12 * np.arange(b.X.size).reshape(b.X.shape))
    assert not cluster_exact(prob, smeared) and Segment.between(prob, a, smeared) is None
    uncertified = dataclasses.replace(b, converged=False)
    assert Segment.between(prob, a, uncertified) is None


def test_a_lambda_outside_the_segment_is_refused_by_name(moons):
    prob, grid = moons
    two = _two_cluster_stretch(prob, grid)
    segment = Segment.between(prob, two[0], two[-1])
    for bad in (0.5 * two[0].lam, 2 * two[-1].lam, np.nan):
        with pytest.raises(ValueError, match="lam"):
            segment.at(bad)
    assert segment.at(two[0].lam) is not None and segment.at(two[-1].lam) is not None


def test_where_two_clusters_meet_the_segment_gives_no_candidate(moons):
    prob, grid = moons
    a = _two_cluster_stretch(prob, grid)[0]
    labels = a.labels()
    centres = np.array([a.X[labels == k][0] for k in (0, 1)])
    swapped = dataclasses.replace(a, X=centres[1 - labels], lam=2 * a.lam)
    segment = Segment.between(prob, a, swapped)
    assert segment is not None
    assert segment.at(1.5 * a.lam) is None  # half way both clusters sit at the midpoint
    assert segment.at(1.1 * a.lam) is not None


def _counted_path(prob, grid, monkeypatch):
    """``(path, λ solved)``: the path by ``"auto"``, counting its solves (their λ in the
    grid's units: methods are called on the standard problem, rounded to 12 digits)."""
    calls = []

    def counting(p, **options):
        calls.append(p.lam)
        return solvers.METHODS["auto"](p, **options)

    monkeypatch.setitem(solvers.METHODS, "counting", counting)
    path = cfl.son_path(prob, grid, method="counting", tol=TOL, progress=False)
    return path, np.round(np.asarray(calls) * prob.loss.standard[0].grad, 12)


def test_son_path_certifies_two_cluster_stretches_by_interpolation(moons, monkeypatch):
    prob, grid = moons
    path, solved = _counted_path(prob, grid, monkeypatch)
    done = path.meta["interpolated"]
    two = int(np.sum(path.n_clusters == 2))
    assert len(done) > two // 2
    # no λ solved twice (a jump's end that did not certify is kept for later), and the
    # two-cluster stretch costs a number of solves logarithmic in its length
    assert len(set(solved)) == len(solved) and len(solved) + len(done) <= len(grid)
    stretch = np.round(grid[path.n_clusters == 2], 12)
    assert np.isin(solved, stretch).sum() <= 2 * np.ceil(np.log2(two)) + 4
    cold = cfl.son_path(prob, grid, tol=TOL, progress=False, warm_start=False)
    assert cold.meta["interpolated"] == []
    for lam in done:
        r = int(np.flatnonzero(grid == lam)[0])
        at = prob.with_lam(lam)
        assert path.converged[r] and path.n_iter[r] == 0 and path.n_clusters[r] == 2
        assert path.kkt_residual[r] <= TOL
        assert kkt_residual(at, path.X[r]).kkt_residual <= max(path.kkt_residual[r], 1e-12)
        assert path.objective[r] == pytest.approx(at.objective(path.X[r]), rel=1e-13)
        np.testing.assert_allclose(path.X[r], cold.X[r], atol=1e-6)
    np.testing.assert_array_equal(path.n_clusters, cold.n_clusters)
    assert path.lam_hat == pytest.approx(cold.lam_hat, rel=1e-9)


def test_in_one_dimension_any_partition_is_interpolated_exactly():
    rng = np.random.default_rng(3)
    a = np.sort(np.r_[rng.normal(0, 0.3, 20), rng.normal(3, 0.3, 20), rng.normal(7, 0.3, 20)])
    chain = cfl.graphs.from_edges([[i, i + 1] for i in range(len(a) - 1)], n_nodes=len(a))
    prob = cfl.SumOfNorms(cfl.losses.Quadratic(a[:, None]), chain, 1.0)
    grid = np.linspace(0.0, cfl.bounds.fusion_threshold(prob).value, 150)
    path = cfl.son_path(prob, grid, tol=TOL, progress=False)
    done = np.isin(grid, path.meta["interpolated"])
    assert np.any(done & (path.n_clusters >= 3))
    for r in np.flatnonzero(done):
        direct = cfl.solve(prob.with_lam(grid[r]), tol=1e-10)
        np.testing.assert_allclose(path.X[r], direct.X, atol=1e-7)


def test_a_resumed_path_keeps_the_record_of_its_interpolated_lambdas(moons, tmp_path):
    prob, grid = moons
    first = cfl.son_path(prob, grid, tol=TOL, progress=False, checkpoint=tmp_path / "p")
    again = cfl.son_path(prob, grid, tol=TOL, progress=False, checkpoint=tmp_path / "p")
    assert first.meta["interpolated"] and again.meta["interpolated"] == first.meta["interpolated"]
    np.testing.assert_array_equal(again.X, first.X)


@pytest.mark.parametrize("s, c", [(1e-9, 1e-7), (1e6, -1e8)])
def test_interpolation_is_scale_and_offset_equivariant(moons, s, c):
    prob, grid = moons
    A = prob.loss.points
    moved = cfl.SumOfNorms(cfl.losses.Quadratic(s * A + c), prob.graph, 1.0)
    unit = cfl.son_path(prob, grid, tol=TOL, progress=False)
    other = cfl.son_path(moved, s * grid, tol=TOL, progress=False)
    assert unit.meta["interpolated"]
    np.testing.assert_allclose(other.meta["interpolated"],
                               s * np.asarray(unit.meta["interpolated"]), rtol=1e-12)
    np.testing.assert_array_equal(other.n_clusters, unit.n_clusters)
    assert np.all(other.converged)
    done = np.isin(grid, unit.meta["interpolated"])
    np.testing.assert_allclose(other.kkt_residual[done], unit.kkt_residual[done], atol=1e-9)
    np.testing.assert_allclose((other.X[done] - c) / s, unit.X[done], atol=1e-7)


def test_the_path_jumps_to_the_last_lambda_below_the_fusion_threshold(moons, monkeypatch):
    """From its first two-cluster λ the path knows the cut between the two clusters (a
    certified lower bound on λ̂, λ̂ itself when they fuse directly, as here): it solves the
    last λ below it, certifies those between by interpolation, proves λ̂ from that last
    split and certifies every λ above λ̂ by the global model, with no solve. Control: without
    the cut (as before) the jumps double, overshoot λ̂ and are halved back: more solves, the
    same answers."""
    import convexfl.path.trace as trace

    prob, grid = moons
    socp = cfl.bounds.fusion_threshold(prob)
    path, solved = _counted_path(prob, grid, monkeypatch)
    first_two = np.round(grid[np.flatnonzero(path.n_clusters == 2)[0]], 12)
    assert np.sum(solved >= first_two) == 2
    assert path.meta["fusion_threshold"]["inputs"]["method"] == "split"
    assert abs(path.lam_hat - socp.value) <= 1e-8 * socp.value
    above = grid >= path.lam_hat
    assert above.sum() >= 2 and np.all(path.n_clusters[above] == 1)
    y = socp.inputs["y_star"]
    for r in np.flatnonzero(above):
        at = prob.with_lam(grid[r])
        np.testing.assert_allclose(path.X[r], np.tile(y, (prob.n_users, 1)), atol=1e-12)
        assert path.converged[r] and path.n_iter[r] == 0 and path.kkt_residual[r] <= TOL
        assert kkt_residual(at, path.X[r]).kkt_residual <= TOL
        assert path.objective[r] == pytest.approx(at.objective(path.X[r]), rel=1e-13)
    assert np.all(path.n_clusters[~above] >= 2) and np.all(path.converged)

    monkeypatch.setattr(trace, "_toward_fusion",
                        lambda prob, split, grid, r, fusion, cut: (fusion, cut))
    before, solved_before = _counted_path(prob, grid, monkeypatch)
    assert np.sum(solved_before >= first_two) > 4
    np.testing.assert_array_equal(before.n_clusters, path.n_clusters)
    np.testing.assert_allclose(before.X, path.X, atol=1e-6)
    assert before.lam_hat == pytest.approx(path.lam_hat, rel=1e-9)
