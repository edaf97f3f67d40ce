import numpy as np
import pytest
from helpers import reference
from hypothesis import given, settings
from hypothesis import strategies as st

import convexfl as cfl


def test_labels_are_components_of_close_pairs_in_first_appearance_order():
    X = np.array([[5.0, 0], [0, 0], [5.0, 1e-9], [0, 1e-9], [9, 9]])
    np.testing.assert_array_equal(cfl.clusters.labels(X, tol=1e-6), [0, 1, 0, 1, 2])
    # single linkage: a chain of close pairs is one cluster
    chain = np.c_[np.arange(5) * 0.5e-6, np.zeros(5)]
    assert cfl.clusters.n_clusters(chain, tol=1e-6) == 1
    assert cfl.clusters.n_clusters(chain, tol=1e-7) == 5


def test_partition_comparison():
    assert cfl.clusters.same_partition([0, 0, 1, 2], [2, 2, 0, 1])
    assert not cfl.clusters.same_partition([0, 0, 1, 2], [0, 1, 1, 2])
    summary = cfl.clusters.compare([0, 0, 1, 1], [1, 1, 0, 0])
    assert summary == {"same_partition": True, "adjusted_rand": 1.0, "n_found": 2, "n_true": 2}
    with pytest.raises(ValueError, match="b: expected 3 labels"):
        cfl.clusters.same_partition([0, 1, 2], [0, 1])


def test_solution_labels_use_the_solvers_fuse_tol():
    A, truth = cfl.datasets.planted_points(3, 4, 2, separation=30.0, random_state=0)
    res = reference(cfl.SumOfNorms(cfl.losses.Quadratic(A), cfl.graphs.complete(12), 1.5))
    assert cfl.clusters.same_partition(res.labels(), truth)
    assert res.n_clusters == 3
    with pytest.raises(ValueError, match="tol: must be >= 0"):
        cfl.clusters.labels(A, tol=-1)


def test_labels_restricted_to_graph_edges():
    X = np.array([[0.0, 0.0], [0.0, 0.0], [0.0, 0.0]])
    path = cfl.graphs.from_edges([[0, 1]], n_nodes=3)
    np.testing.assert_array_equal(cfl.clusters.labels(X, tol=1e-6, graph=path), [0, 0, 1])
    np.testing.assert_array_equal(cfl.clusters.labels(X, tol=1e-6), [0, 0, 0])
    with pytest.raises(ValueError, match="graph: has 3 nodes but X has 2 rows"):
        cfl.clusters.labels(X[:2], graph=path)


def test_labels_on_a_graph_match_scipy_components_of_the_close_edges():
    from scipy.sparse.csgraph import connected_components

    rng = np.random.default_rng(3)
    X = np.round(rng.standard_normal((300, 2)) * 2) / 2  # many exact ties
    graph = cfl.graphs.knn(rng.standard_normal((300, 2)), 4)
    close = graph.distances(X) <= 1e-9
    _, expected = connected_components(graph.subgraph_edges(close).adjacency, directed=False)
    got = cfl.clusters.labels(X, tol=1e-9, graph=graph)
    assert cfl.clusters.same_partition(got, expected)
    first = np.unique(got, return_index=True)[1]
    assert np.all(np.diff(first) > 0)  # numbered in order of first appearance
    assert 1 < got.max() + 1 < 300


def test_solution_labels_at_its_fuse_tol_are_the_certified_partition():
    """On a sparse graph, ``Solution.labels()`` at its own ``fuse_tol`` gives the
    components of the edges its certificate treated as fused (``certificate.fused``),
    computed once; another ``tol`` goes back to the distances."""
    from dataclasses import replace

    A, _ = cfl.datasets.planted_points(3, 20, 2, separation=4.0, random_state=0)
    graph = cfl.graphs.knn(A, 8)
    sol = cfl.solve(cfl.SumOfNorms(cfl.losses.Quadratic(A), graph, 0.1), tol=1e-8)
    assert 1 < sol.n_clusters < len(A)
    fused = sol.certificate.fused
    assert fused.dtype == bool and fused.shape == (graph.n_edges,)
    np.testing.assert_array_equal(fused, graph.distances(sol.X) <= sol.fuse_tol)
    np.testing.assert_array_equal(sol.labels(),
                                  cfl.clusters.labels(sol.X, sol.fuse_tol, graph=graph))
    # a certificate about another partition (one edge fewer fused): labels follow it
    fewer = fused.copy()
    fewer[np.flatnonzero(fused)[0]] = False
    other = replace(sol, certificate=replace(sol.certificate, fused=fewer))
    expected = cfl.clusters.labels(sol.X, sol.fuse_tol,
                                   graph=graph.subgraph_edges(fewer | ~fused))
    np.testing.assert_array_equal(other.labels(), expected)
    np.testing.assert_array_equal(other.labels(tol=2 * sol.fuse_tol), sol.labels())
    out = other.labels()
    out[:] = -1  # a copy: the cached labels are not the caller's to change
    np.testing.assert_array_equal(other.labels(), expected)


def test_solution_labels_follow_x_changed_in_place():
    """The labels are cached per values of ``X``: after ``X`` is changed in place (or
    replaced) they are computed again from the distances, not from the certificate of the
    ``X`` the solver returned."""
    A, _ = cfl.datasets.planted_points(3, 20, 2, separation=4.0, random_state=0)
    graph = cfl.graphs.knn(A, 8)
    sol = cfl.solve(cfl.SumOfNorms(cfl.losses.Quadratic(A), graph, 0.1), tol=1e-8)
    assert 1 < sol.n_clusters < len(A)
    sol.X[:] = 0.0
    assert sol.n_clusters == 1
    sol.X = A.copy()
    np.testing.assert_array_equal(sol.labels(), np.arange(len(A)))


@pytest.mark.parametrize("method", ["admm", "ssnal", "cvxpy"])
def test_reduced_solution_labels_its_users(method):
    """A (RED) problem on a sparse graph: the solution has one model per user and its
    labels are the users' (fused along ``prob.graph``), a coarsening of the partition."""
    A, _ = cfl.datasets.planted_points(2, 20, 2, separation=3.0, random_state=1)
    graph = cfl.graphs.knn(A, 8)
    partition = np.arange(len(A)) // 4
    red = cfl.Reduced(cfl.losses.Quadratic(A), graph, partition, 0.2)
    sol = cfl.solve(red, method=method)
    assert sol.X.shape == A.shape and sol.graph is graph
    labels = sol.labels()
    assert labels.shape == (len(A),) and sol.n_clusters == int(labels.max()) + 1
    for k in np.unique(partition):  # each part lies in one cluster
        assert len(np.unique(labels[partition == k])) == 1
    np.testing.assert_allclose(sol.history["W"][red.labels], sol.X)


def test_components_reuse_the_last_answer_only_for_an_equal_mask():
    from scipy.sparse.csgraph import connected_components

    from convexfl.clusters import components

    rng = np.random.default_rng(1)
    graph = cfl.graphs.knn(rng.standard_normal((200, 2)), 4)
    mask = rng.random(graph.n_edges) < 0.4

    def expected(m):
        return connected_components(graph.subgraph_edges(m).adjacency, directed=False)[1]

    first = components(graph.n_nodes, graph.edges, mask)
    assert cfl.clusters.same_partition(first, expected(mask))
    first[:] = 0  # the caller's copy
    again = components(graph.n_nodes, graph.edges, mask.copy())
    assert cfl.clusters.same_partition(again, expected(mask)) and again.max() > 0
    mask[np.flatnonzero(~mask)[:30]] = True  # the same array, changed in place
    assert cfl.clusters.same_partition(components(graph.n_nodes, graph.edges, mask),
                                       expected(mask))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 7), min_size=0, max_size=60))
def test_grouped_is_the_stable_sort_by_label(labels):
    """The counting sort of :func:`convexfl._kernels.grouped` (the certificates' search by
    component) is numpy's stable argsort, its bounds where the labels change."""
    from convexfl._kernels import grouped

    lab = np.array(labels, dtype=np.int64)
    k = 8
    order, starts = grouped(lab, k)
    expected = np.argsort(lab, kind="stable")
    np.testing.assert_array_equal(order, expected)
    np.testing.assert_array_equal(starts, np.searchsorted(lab[expected], np.arange(k + 1)))


def test_separation_is_the_least_distance_across_edges_between_clusters():
    graph = cfl.graphs.Graph(5, [[0, 1], [1, 2], [2, 3], [0, 4]], [1.0, 1.0, 1.0, 1.0])
    X = np.array([[0.0, 0.0], [0.0, 0.0], [3.0, 0.0], [3.0, 1e-3], [0.0, 2e-4]])
    labels = np.array([0, 0, 1, 2, 3])
    # the edge (0, 4) joins clusters 2e-4 apart; (2, 3) 1e-3; clusters 0 and 1 are 3 apart
    assert cfl.clusters.separation(X, labels, graph) == pytest.approx(2e-4)
    X[4] = [3.0, 1e-5]  # now the closest clusters, of users 2 and 4, share no edge
    assert cfl.clusters.separation(X, labels, graph) == pytest.approx(1e-3)
    assert cfl.clusters.separation(X, np.zeros(5, int), graph) == np.inf


def test_separation_of_a_solution_exceeds_its_fuse_tol():
    A, _ = cfl.datasets.planted_points(3, 10, 2, separation=3.0, radius=1.0, random_state=0)
    graph = cfl.graphs.knn(A, 8)
    sol = cfl.solve(cfl.SumOfNorms(cfl.losses.Quadratic(A), graph, 0.2), tol=1e-8)
    assert sol.converged and 1 < sol.n_clusters < 30
    labels = sol.labels()
    i, j = graph.edges.T
    between = labels[i] != labels[j]
    assert between.any()
    sep = cfl.clusters.separation(sol.X, labels, graph)
    assert sep == pytest.approx(np.linalg.norm(sol.X[i] - sol.X[j], axis=1)[between].min())
    assert sep > sol.fuse_tol


@pytest.mark.parametrize("bad, match", [("labels", "labels: expected shape"),
                                        ("graph", "graph: has 3 nodes")])
def test_separation_refuses_shapes_that_disagree(bad, match):
    X = np.zeros((4, 2))
    labels = np.zeros(3 if bad == "labels" else 4, int)
    graph = cfl.graphs.Graph(3 if bad == "graph" else 4, [[0, 1], [1, 2]], [1.0, 1.0])
    with pytest.raises(ValueError, match=match):
        cfl.clusters.separation(X, labels, graph)
