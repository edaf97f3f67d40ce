import numpy as np
import pytest

import convexfl as cfl


def test_complete_graph_has_every_pair_once():
    g = cfl.graphs.complete(5)
    assert g.n_edges == 10 and g.is_connected and g.is_complete_uniform
    assert np.all(g.edges[:, 0] < g.edges[:, 1])
    assert len({tuple(e) for e in g.edges}) == 10
    np.testing.assert_array_equal(g.degree, 4.0)


def test_knn_is_symmetric_sparse_and_gaussian_weighted():
    rng = np.random.default_rng(0)
    P = rng.standard_normal((200, 3))
    g = cfl.graphs.knn(P, k=5, phi=0.5)
    assert g.n_edges <= 200 * 5 and g.n_edges >= 200 * 5 // 2
    d2 = np.sum((P[g.edges[:, 0]] - P[g.edges[:, 1]]) ** 2, axis=1)
    np.testing.assert_allclose(g.weights, np.exp(-0.5 * d2))
    # every point is joined to its 5 nearest neighbours
    dist = np.linalg.norm(P[:, None] - P[None], axis=2)
    nearest = np.argsort(dist, axis=1)[:, 1:6]
    edges = {tuple(e) for e in g.edges}
    for i in range(200):
        for j in nearest[i]:
            assert (min(i, j), max(i, j)) in edges
    assert cfl.graphs.knn(P, k=5).weights.tolist() == [1.0] * cfl.graphs.knn(P, k=5).n_edges


def test_disconnected_knn_is_reported():
    P = np.r_[np.zeros((5, 2)) + np.arange(5)[:, None] * 0.01, 100 + np.zeros((5, 2))
              + np.arange(5)[:, None] * 0.01]
    with pytest.warns(UserWarning, match="2 connected components"):
        g = cfl.graphs.knn(P, k=2)
    assert not g.is_connected and g.n_components == 2
    with pytest.raises(ValueError, match="needs a connected graph"):
        g.require_connected("consensus")


def test_from_edges_normalises_order_and_rejects_bad_lists():
    g = cfl.graphs.from_edges([[2, 0], [1, 2]], [0.5, 2.0])
    np.testing.assert_array_equal(g.edges, [[0, 2], [1, 2]])
    np.testing.assert_array_equal(g.weights, [0.5, 2.0])
    with pytest.raises(ValueError, match="edges: self-loop"):
        cfl.graphs.from_edges([[0, 0]])
    with pytest.raises(ValueError, match="edges: node indices must be in 0..2"):
        cfl.graphs.from_edges([[0, 3]], n_nodes=3)
    with pytest.raises(ValueError, match="edges: contains a duplicate"):
        cfl.graphs.from_edges([[0, 1], [1, 0]])
    with pytest.raises(ValueError, match="weights: edge weights must be > 0"):
        cfl.graphs.from_edges([[0, 1]], [0.0])
    with pytest.raises(ValueError, match="weights: expected 1 entries"):
        cfl.graphs.from_edges([[0, 1]], [1.0, 2.0])
    with pytest.raises(TypeError, match="edges: node indices must be integers"):
        cfl.graphs.from_edges([[0.0, 1.0]])
    with pytest.raises(ValueError, match="weights: contains 1 NaN"):
        cfl.graphs.from_edges([[0, 1]], [np.nan])


def test_reduce_sums_cross_cluster_weights():
    g = cfl.graphs.complete(6)
    labels = [0, 0, 1, 1, 1, 2]
    r = g.reduce(labels)
    W = dict(zip(map(tuple, r.edges), r.weights, strict=True))
    assert W == {(0, 1): 6.0, (0, 2): 2.0, (1, 2): 3.0}  # n_k n_l


@pytest.mark.parametrize("n_clusters", [2, 5, 40])
def test_reduce_agrees_with_a_plain_sum_over_edges(n_clusters):
    """Both ways of summing (a count of every pair for few clusters, a sort for many) give
    the plain sum over the edges between clusters."""
    rng = np.random.default_rng(n_clusters)
    g = cfl.graphs.knn(rng.standard_normal((60, 2)), 4, warn_disconnected=False)
    labels = np.r_[np.arange(n_clusters), rng.integers(0, n_clusters, 60 - n_clusters)]
    expected = {}
    for (i, j), w in zip(g.edges, g.weights, strict=True):
        a, b = sorted((labels[i], labels[j]))
        if a != b:
            expected[a, b] = expected.get((a, b), 0.0) + w
    r = g.reduce(labels)
    got = dict(zip(map(tuple, r.edges.tolist()), r.weights, strict=True))
    assert got.keys() == expected.keys()
    assert all(got[p] == pytest.approx(expected[p]) for p in got)


@pytest.mark.parametrize("n_clusters", [2, 5, 40])
def test_reduced_flows_give_the_summed_residual_within_the_reduced_capacities(n_clusters):
    """``reduce_flows`` sums the flows between each pair of clusters with their
    orientation: the reduced residual ``G_k + Σ u_kl`` is the original one summed over
    each cluster (within-cluster flows cancel), and feasible flows stay feasible."""
    from convexfl._flow_kernels import flow_residual, sums_by_label

    rng = np.random.default_rng(n_clusters)
    g = cfl.graphs.knn(rng.standard_normal((60, 2)), 4, warn_disconnected=False)
    labels = np.r_[np.arange(n_clusters), rng.integers(0, n_clusters, 60 - n_clusters)]
    lam = 0.7
    u = rng.standard_normal((g.n_edges, 3))
    u *= (lam * g.weights * rng.uniform(0, 1, g.n_edges) / np.linalg.norm(u, axis=1))[:, None]
    G = rng.standard_normal((60, 3))
    r = g.reduce(labels)
    ur = g.reduce_flows(labels, u)
    assert ur.shape == (r.n_edges, 3)
    assert np.all(np.linalg.norm(ur, axis=1) <= lam * r.weights * (1 + 1e-12))
    np.testing.assert_allclose(flow_residual(sums_by_label(G, labels, n_clusters), r.edges, ur),
                               sums_by_label(flow_residual(G, g.edges, u), labels, n_clusters),
                               atol=1e-12)


def test_penalties():
    g = cfl.graphs.from_edges([[0, 1], [1, 2]], [2.0, 1.0])
    X = np.array([[0.0, 0.0], [3.0, 4.0], [3.0, 4.0]])
    assert g.penalty(X) == pytest.approx(10.0)
    assert g.squared_penalty(X) == pytest.approx(50.0)
    with pytest.raises(ValueError, match="X: expected 3 rows"):
        g.penalty(X[:2])
    np.testing.assert_allclose(g.distances(X), [5.0, 0.0])
    np.testing.assert_allclose(g.distances(X), np.linalg.norm(g.differences(X), axis=1))
    with pytest.raises(ValueError, match="X: expected 3 rows"):
        g.distances(X[:2])
    with pytest.raises(ValueError, match="X: contains"):
        g.distances(np.array([[0.0, np.nan], [1.0, 1.0], [2.0, 2.0]]))


def test_graph_argument_errors():
    with pytest.raises(ValueError, match="n_users: must be >= 1"):
        cfl.graphs.complete(0)
    with pytest.raises(ValueError, match="n_users: a complete graph on"):
        cfl.graphs.complete(20_000)
    with pytest.raises(ValueError, match="k: must be <= 3"):
        cfl.graphs.knn(np.zeros((4, 2)) + np.arange(4)[:, None], k=4)
    with pytest.raises(ValueError, match="points: contains"):
        cfl.graphs.knn([[0.0, np.inf], [1.0, 1.0]], k=1)
    with pytest.raises(ValueError, match="phi: must be >= 0"):
        cfl.graphs.knn(np.arange(8.0).reshape(4, 2), k=1, phi=-1.0)
    g = cfl.graphs.complete(4)
    with pytest.raises(ValueError, match="flows: expected 6 rows"):
        g.reduce_flows([0, 0, 1, 1], np.zeros((5, 2)))
    with pytest.raises(ValueError, match="flows: contains"):
        g.reduce_flows([0, 0, 1, 1], np.full((6, 2), np.nan))
    with pytest.raises(ValueError, match="partition"):
        g.reduce_flows([0, 0, 1], np.zeros((6, 2)))


def test_graph_refuses_repeated_pairs():
    """Issue 16, item 2: a repeated pair made a 3-node path pass as the complete graph
    (3 edges = N(N−1)/2), and a 'certified' bound fell below the exact one."""
    with pytest.raises(ValueError, match=r"^edges: the pair \(0, 1\) occurs 2 times"):
        cfl.graphs.Graph(3, [[0, 1], [0, 1], [1, 2]], [1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match=r"^edges: the pair \(1, 2\) occurs 2 times"):
        cfl.graphs.Graph(4, [[1, 2], [0, 3], [1, 2]], [1.0, 2.0, 3.0])  # unsorted input
    with pytest.raises(ValueError, match="^edges: contains a duplicate pair"):
        cfl.graphs.from_edges([[0, 1], [1, 0]])
    ok = cfl.graphs.Graph(3, [[0, 1], [1, 2], [0, 2]], [1.0, 1.0, 1.0])
    assert ok.is_complete_uniform


@pytest.mark.parametrize("weights, match", [([1.0, -1.0], "> 0"), ([1.0, 0.0], "> 0"),
                                            ([1.0, np.nan], "NaN"), ([1.0, np.inf], "NaN")])
def test_graph_refuses_bad_weights(weights, match):
    with pytest.raises(ValueError, match=f"^weights: .*{match}"):
        cfl.graphs.Graph(3, [[0, 1], [1, 2]], weights)


def test_graph_refuses_self_loops():
    with pytest.raises(ValueError, match="^edges: expected pairs"):
        cfl.graphs.Graph(3, [[0, 1], [1, 1]], [1.0, 1.0])
