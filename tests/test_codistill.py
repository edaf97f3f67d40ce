"""Tests for PerFed-CKT's clustered co-distillation (convexfl.ckt, paper Algorithm 1) and the
toy example of Fig. 1 (App. E).

What is established here:
* the toy example reproduces Fig. 1 qualitatively: with clustering each client's model is
  closer to its true model than FedAvg's and than co-distillation without clustering (the
  distances are printed); k-means on the logits finds {0, 1} vs {2};
* a converged run is a fixed point of (14): each client's model is the exact minimiser of
  objective (1) given its cluster's average logits (ckt_estimator);
* the runtime's message accounting equals the paper's m c |P| N down + m |P| N up per round,
  with partial participation;
* bad input raises ValueError naming the argument.
"""

from __future__ import annotations

import numpy as np
import pytest

from convexfl import ckt
from convexfl.federated import run_federated


@pytest.fixture(scope="module")
def toy():
    return ckt.toy_example(random_state=0)


def _clients(rng, K=6, n=15, d=3, N=1, groups=(0, 0, 0, 1, 1, 1)):
    centres = np.zeros((2, d, N))
    centres[0, 0], centres[1, 0] = 5.0, -5.0  # two well-separated groups of true models
    data = []
    for k in range(K):
        W = centres[groups[k]] + 0.3 * rng.normal(size=(d, N))
        X = rng.normal(size=(n, d))
        Y = X @ W + 0.1 * rng.normal(size=(n, N))
        data.append((X, Y[:, 0] if N == 1 else Y))
    return data


# ------------------------------------------------------------------------------ toy example


def test_toy_example_reproduces_fig1(toy):
    print("\n" + toy.summary())
    print("numbers sent:", toy.numbers_sent)
    d = toy.distances
    for k in range(3):
        assert d["codistill_clustered"][k] < d["codistill"][k]
        assert d["codistill_clustered"][k] < d["fedavg"][k]
        assert d["closed_form_clustered"][k] < d["closed_form_uniform"][k]
    # clients 0 and 1 are pulled far off by client 2 without clustering (the paper's remark)
    assert np.all(d["codistill"][:2] > 10 * d["codistill_clustered"][:2])
    # client 2 is alone in its cluster: distilling towards its own logits keeps it local
    np.testing.assert_allclose(d["codistill_clustered"][2], d["local"][2], rtol=1e-6)
    assert toy.clusters[0] == toy.clusters[1] != toy.clusters[2]


def test_toy_example_is_seeded():
    a, b = ckt.toy_example(random_state=3, rounds=5), ckt.toy_example(random_state=3, rounds=5)
    for m in a.distances:
        np.testing.assert_array_equal(a.distances[m], b.distances[m])


def test_toy_example_qualitative_result_holds_over_seeds():
    for seed in range(1, 4):
        t = ckt.toy_example(random_state=seed, rounds=20)
        for k in range(3):
            assert t.distances["codistill_clustered"][k] <= min(
                t.distances["codistill"][k], t.distances["fedavg"][k])


# ------------------------------------------------------------------------------ the algorithm


def test_converged_codistillation_is_a_fixed_point_of_14():
    rng = np.random.default_rng(0)
    data = _clients(rng)
    P = rng.normal(size=(8, 3))
    lam = 4.0
    alg = ckt.codistillation(P, n_clusters=2, lam=lam, local_steps=50)
    res = run_federated(alg, data, rounds=60, random_state=1, progress=False)
    W = np.stack([s["w"][:, 0] for s in res.client_states])
    labels = np.array([res.server_state["labels"][k] for k in range(6)])
    assert labels[0] == labels[1] == labels[2] != labels[3] == labels[4] == labels[5]
    for k, (X, y) in enumerate(data):
        # (14) with target s_bar_k = P (alpha_k @ W) and the client's least squares w_hat_k:
        # the last row of the stacked array is w_hat_k, the weights only touch the models
        alpha = np.append((labels == labels[k]) / np.sum(labels == labels[k]), 0.0)
        stacked = np.vstack([W, np.linalg.lstsq(X, y, rcond=None)[0]])
        w_star = ckt.ckt_estimator(X.T @ X, stacked, 6, lam / P.shape[0], alpha, P.T @ P)
        np.testing.assert_allclose(W[k], w_star, atol=1e-7)


def test_without_distillation_clients_keep_their_least_squares_model():
    rng = np.random.default_rng(1)
    data = _clients(rng)
    alg = ckt.codistillation(rng.normal(size=(5, 3)), n_clusters=3, lam=0.0)
    res = run_federated(alg, data, rounds=3, random_state=0, progress=False)
    for (X, y), s in zip(data, res.client_states, strict=True):
        np.testing.assert_allclose(s["w"][:, 0], np.linalg.lstsq(X, y, rcond=None)[0],
                                   atol=1e-10)


def test_one_cluster_is_the_plain_average_of_logits():
    rng = np.random.default_rng(2)
    data = _clients(rng)
    P = rng.normal(size=(4, 3))
    alg = ckt.codistillation(P, n_clusters=1, lam=1.0)
    res = run_federated(alg, data, rounds=2, random_state=0, progress=False)
    W = np.stack([s["w"] for s in res.client_states])  # models after the last round
    np.testing.assert_allclose(res.server_state["centroids"][0], np.mean(P @ W, axis=0),
                               atol=1e-12)


def test_communication_accounting_with_partial_participation():
    rng = np.random.default_rng(3)
    N_out, n_pub, c, m = 2, 7, 2, 3
    data = _clients(rng, N=N_out)
    alg = ckt.codistillation(rng.normal(size=(n_pub, 3)), n_clusters=c, lam=1.0, n_outputs=N_out,
                             batch_size=5, public_batch_size=4)
    res = run_federated(alg, data, rounds=5, participation=0.5, random_state=0, progress=False)
    cost = ckt.codistillation_cost(n_pub, N_out, c, m)
    assert cost == {"down": m * c * n_pub * N_out, "up": m * n_pub * N_out,
                    "total": m * (c + 1) * n_pub * N_out}
    h = res.history
    assert h[0].bytes_down == 0  # no centroids before the first clustering
    for rec in h.records:
        assert len(rec.participants) == m
        assert rec.bytes_up // 8 == cost["up"]
        assert rec.vectors_up == m * n_pub  # one logit vector of length N per public point
    for rec in h.records[1:]:
        assert rec.bytes_down // 8 == cost["down"]
    print(f"\nco-distillation numbers per round: {cost}; model size d*N = {3 * N_out}")


def test_partial_participation_runs_are_reproducible():
    rng = np.random.default_rng(4)
    data = _clients(rng)
    P = rng.normal(size=(6, 3))
    runs = [run_federated(ckt.codistillation(P, n_clusters=2, batch_size=4), data, rounds=4,
                          participation=0.5, random_state=7, progress=False) for _ in range(2)]
    for a, b in zip(runs[0].client_states, runs[1].client_states, strict=True):
        np.testing.assert_array_equal(a["w"], b["w"])


# ------------------------------------------------------------------------------ bad input


@pytest.mark.parametrize("kwargs, name", [
    ({"n_clusters": 0}, "n_clusters"),
    ({"lam": -1.0}, "lam"),
    ({"step": 0.0}, "step"),
    ({"local_steps": 0}, "local_steps"),
    ({"init": "random"}, "init"),
    ({"n_outputs": 0}, "n_outputs"),
    ({"batch_size": 0}, "batch_size"),
])
def test_bad_arguments_raise(kwargs, name):
    with pytest.raises(ValueError, match=name):
        ckt.codistillation(np.ones((3, 2)), **kwargs)


def test_bad_public_set_and_client_data_raise():
    with pytest.raises(ValueError, match="public"):
        ckt.codistillation(np.ones(3))
    with pytest.raises(ValueError, match="public"):
        ckt.codistillation(np.array([[1.0, np.nan]]))
    alg = ckt.codistillation(np.ones((3, 2)))
    with pytest.raises(ValueError, match="X_k"):
        run_federated(alg, [(np.ones((4, 3)), np.ones(4))], rounds=1, progress=False)
    with pytest.raises(ValueError, match="Y_k"):
        run_federated(alg, [(np.ones((4, 2)), np.ones(5))], rounds=1, progress=False)
    with pytest.raises(ValueError, match="clients_per_round"):
        ckt.codistillation_cost(5, 1, 2, 0)
    with pytest.raises(ValueError, match="zeta_std"):
        ckt.toy_example(zeta_std=(1.0, 2.0))
    with pytest.raises(ValueError, match="lam"):
        ckt.toy_example(lam=-1.0)
