"""Tests for convexfl.baselines (local, FedAvg, pFedMe, Ditto for MLR), the MLR formulas of
convexfl._mlr and the data of convexfl.datasets.mlr.

What is established here:
* the MLR value/gradient (one numba kernel) against finite differences and a scipy formula,
  and the smoothness bound L against observed gradient differences;
* FedAvg with full participation, one full-batch local step and a common step is gradient
  descent on the pooled objective; local training is per-client gradient descent; Ditto with
  λ = 0 has local personal models and a FedAvg global model (bit for bit);
* the message accounting (one model down, model + count up);
* on the same seeded data, local training beats FedAvg when the clients form distinct groups
  and FedAvg beats local training when they share one model (the numbers are printed);
* the generators are seeded and well formed; the digits split reuses
  convexfl.datasets.ppfl.digits_label_groups;
* bad input raises ValueError naming the argument.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import approx_fprime
from scipy.special import logsumexp

from convexfl import _mlr, baselines, cgpfl
from convexfl.datasets import FederatedDataset, clustered_mlr, federated_digits, from_groups


@pytest.fixture(scope="module")
def small():
    return clustered_mlr(6, 2, 3, 3, n_samples=(20, 40), scale=3.0, random_state=0)


# ------------------------------------------------------------------------------ MLR formulas


def test_mlr_value_and_gradient():
    rng = np.random.default_rng(0)
    X, y, th = rng.normal(size=(30, 4)), rng.integers(0, 3, 30), rng.normal(size=15)
    M = th.reshape(5, 3)
    Z = X @ M[:-1] + M[-1]
    expected = np.mean(logsumexp(Z, axis=1) - Z[np.arange(30), y]) + 0.05 * np.sum(M[:-1] ** 2)
    assert _mlr.value(th, X, y, 3, 0.1) == pytest.approx(expected, rel=1e-13)
    fd = approx_fprime(th, lambda t: _mlr.value(t, X, y, 3, 0.1), 1e-7)
    np.testing.assert_allclose(_mlr.grad(th, X, y, 3, 0.1), fd, atol=1e-6)
    L = _mlr.lipschitz(X, 0.1)
    for _ in range(20):
        a, b = rng.normal(size=15), rng.normal(size=15)
        ga, gb = _mlr.grad(a, X, y, 3, 0.1), _mlr.grad(b, X, y, 3, 0.1)
        assert np.linalg.norm(ga - gb) <= L * np.linalg.norm(a - b)


# ------------------------------------------------------------------------------ oracles


def test_fedavg_one_step_full_participation_is_centralised_gd(small):
    lr, l2 = 0.3, 0.01
    alg = baselines.fedavg(3, 3, lr=lr, local_steps=1, l2=l2)
    res = baselines.run(alg, small, rounds=8, random_state=0)
    X, y, _ = small.pooled("train")
    w = np.zeros(_mlr.n_params(3, 3))
    for _ in range(8):
        w = w - lr * _mlr.grad(w, X, y, 3, l2)
    np.testing.assert_allclose(res.server_state["w"], w, rtol=1e-12, atol=1e-14)


def test_local_training_is_per_client_gradient_descent(small):
    res = baselines.run(baselines.local_training(3, 3, lr=0.2, local_steps=3), small,
                        rounds=2, random_state=0)
    for c, s in zip(small, res.client_states, strict=True):
        th = np.zeros(12)
        for _ in range(6):
            th = th - 0.2 * _mlr.grad(th, c.X_train, c.y_train, 3, 1e-3)
        np.testing.assert_allclose(s["theta"], th, rtol=1e-13, atol=1e-15)
    assert res.history.totals()["bytes_up"] == 0


def test_ditto_without_regularisation_is_local_plus_fedavg(small):
    kw = dict(lr=0.2, local_steps=3)
    ditto = baselines.run(baselines.ditto(3, 3, lam=0.0, personal_lr=0.2, personal_steps=3, **kw),
                          small, rounds=3, random_state=0)
    fed = baselines.run(baselines.fedavg(3, 3, **kw), small, rounds=3, random_state=0)
    loc = baselines.run(baselines.local_training(3, 3, **kw), small, rounds=3, random_state=0)
    np.testing.assert_array_equal(ditto.server_state["w"], fed.server_state["w"])
    for a, b in zip(ditto.client_states, loc.client_states, strict=True):
        np.testing.assert_array_equal(a["theta"], b["theta"])


def test_ditto_personal_models_follow_the_global_model_as_lambda_grows(small):
    gaps = []
    for lam in (0.0, 1.0, 100.0):
        res = baselines.run(baselines.ditto(3, 3, lam=lam, personal_steps=20), small, rounds=5,
                            random_state=0)
        th = baselines.personal_models(res)
        gaps.append(np.mean(np.linalg.norm(th - res.server_state["w"], axis=1)))
    assert gaps[0] > gaps[1] > gaps[2]


def test_message_accounting(small):
    D = _mlr.n_params(3, 3)
    for alg in (baselines.fedavg(3, 3), baselines.pfedme(3, 3), baselines.ditto(3, 3)):
        res = baselines.run(alg, small, rounds=3, participation=0.5, random_state=1)
        for rec in res.history:
            m = len(rec.participants)
            assert m == 3
            assert rec.bytes_down // 8 == m * D and rec.bytes_up // 8 == m * (D + 1)


def test_evaluate_and_personal_models(small):
    fed = baselines.run(baselines.fedavg(3, 3), small, rounds=2, random_state=0)
    models = baselines.personal_models(fed)
    assert models.shape == (6, 12) and np.all(models == fed.server_state["w"])
    out = baselines.evaluate(fed, small)
    assert set(out) == {"accuracy", "mean_client_accuracy", "client_accuracy", "client_n_test"}
    assert out["client_n_test"].sum() == sum(c.n_test for c in small)
    again = baselines.evaluate(models, list(small), n_classes=3)
    assert again["accuracy"] == out["accuracy"]


# ------------------------------------------------------------------------------ comparisons


def test_baselines_like_for_like():
    """Same data, runtime, model and seeds for every method; the numbers are printed."""
    table = {}
    for name, groups, seed in (("clustered (4 groups)", 4, 2), ("no structure", 1, 3)):
        data = clustered_mlr(20, groups, 5, 3, n_samples=60, scale=4.0, client_spread=0.3,
                             random_state=seed)
        algs = {
            "local": baselines.local_training(5, 3),
            "fedavg": baselines.fedavg(5, 3, local_steps=5),
            "ditto": baselines.ditto(5, 3),
            "pfedme": baselines.pfedme(5, 3, lam=5.0, lr=0.02),
            "cgpfl(K=4)": cgpfl.cgpfl(5, 3, n_clusters=4, lam=5.0, lr=0.02),
        }
        table[name] = {k: baselines.evaluate(baselines.run(a, data, rounds=30, random_state=0),
                                             data)["accuracy"] for k, a in algs.items()}
    print()
    for name, row in table.items():
        print(f"{name:22s}" + "  ".join(f"{k} {v:.4f}" for k, v in row.items()))
    assert table["clustered (4 groups)"]["local"] > table["clustered (4 groups)"]["fedavg"] + 0.1
    assert table["no structure"]["fedavg"] > table["no structure"]["local"] + 0.05
    assert table["clustered (4 groups)"]["cgpfl(K=4)"] > table["clustered (4 groups)"]["pfedme"]


# ------------------------------------------------------------------------------ data


def test_clustered_mlr_is_seeded_and_well_formed():
    a = clustered_mlr(7, 3, 4, 5, n_samples=(10, 30), random_state=4)
    b = clustered_mlr(7, 3, 4, 5, n_samples=(10, 30), random_state=4)
    assert isinstance(a, FederatedDataset) and len(a) == 7
    np.testing.assert_array_equal(a.groups, [0, 1, 2, 0, 1, 2, 0])
    assert a.true_models.shape == (7, 25)
    for ca, cb in zip(a, b, strict=True):
        np.testing.assert_array_equal(ca.X_train, cb.X_train)
        np.testing.assert_array_equal(ca.y_test, cb.y_test)
        assert ca.X_train.shape[1] == 4 and 10 <= ca.n_train + ca.n_test <= 30
        assert ca.y_train.min() >= 0 and ca.y_train.max() < 5
    # clients of a group share their group's model when client_spread = 0
    np.testing.assert_array_equal(a.true_models[0], a.true_models[3])


def test_federated_digits_reuses_the_ppfl_label_group_split():
    d = federated_digits(9, 3, random_state=0, test_fraction=0.2)
    assert d.n_features == 64 and d.n_classes == 10 and len(d) == 9
    assert sum(c.n_train + c.n_test for c in d) == 1797
    for c, g in zip(d, d.groups, strict=True):
        labels = np.unique(np.concatenate([c.y_train, c.y_test]))
        same_group = [np.unique(np.concatenate([o.y_train, o.y_test]))
                      for o, h in zip(d, d.groups, strict=True) if h == g]
        assert all(set(labels) == set(s) for s in same_group)
        assert c.X_train.min() >= 0.0 and c.X_train.max() <= 1.0


def test_from_groups_splits_each_client():
    rng = np.random.default_rng(0)
    X, y, g = rng.normal(size=(40, 2)), rng.integers(0, 3, 40), np.repeat(["b", "a"], 20)
    d = from_groups(X, y, g, test_fraction=0.25, random_state=0)
    assert len(d) == 2 and d.n_classes == 3
    assert all(c.n_train == 15 and c.n_test == 5 for c in d)
    # client 0 is group label "a" (sorted label order); it holds exactly those rows
    rows = np.vstack([d[0].X_train, d[0].X_test])
    np.testing.assert_array_equal(np.sort(rows[:, 0]), np.sort(X[g == "a"][:, 0]))


# ------------------------------------------------------------------------------ bad input


@pytest.mark.parametrize("factory, kwargs, name", [
    (baselines.fedavg, {"lr": 0.0}, "lr"),
    (baselines.fedavg, {"local_steps": 0}, "local_steps"),
    (baselines.fedavg, {"batch_size": 0}, "batch_size"),
    (baselines.local_training, {"l2": -1.0}, "l2"),
    (baselines.pfedme, {"lam": 0.0}, "lam"),
    (baselines.pfedme, {"beta": 3.0}, "beta"),
    (baselines.pfedme, {"inner_steps": 0}, "inner_steps"),
    (baselines.ditto, {"lam": -1.0}, "lam"),
    (baselines.ditto, {"personal_steps": 0}, "personal_steps"),
    (baselines.ditto, {"init": np.zeros(5)}, "init"),
])
def test_bad_arguments_raise(factory, kwargs, name):
    with pytest.raises(ValueError, match=name):
        factory(3, 3, **kwargs)


def test_bad_model_spec_and_data_raise(small):
    with pytest.raises(ValueError, match="n_classes"):
        baselines.fedavg(3, 1)
    with pytest.raises(ValueError, match="n_features"):
        baselines.fedavg(0, 3)
    with pytest.raises(ValueError, match="X_train"):
        baselines.run(baselines.fedavg(4, 3), small, rounds=1)
    with pytest.raises(ValueError, match="n_classes"):
        baselines.evaluate(np.zeros((6, 12)), list(small))
    with pytest.raises(ValueError, match="result"):
        baselines.evaluate(np.zeros((5, 12)), small)
    with pytest.raises(ValueError, match="n_groups"):
        clustered_mlr(3, 4)
    with pytest.raises(ValueError, match="test_fraction"):
        clustered_mlr(3, 1, test_fraction=1.0)
    with pytest.raises(ValueError, match="y"):
        from_groups(np.ones((3, 2)), [0, 1.5, 2], [0, 0, 1])
    with pytest.raises(ValueError, match="n_clients"):
        federated_digits(0)
