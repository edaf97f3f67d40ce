"""Tests of the torch back-ends (convexfl.torch): PPFL-DNN, PerFed-CKT, CGPFL-DNN, SON heads,
FedAvg / local baselines, devices, determinism and the digits comparison table."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

torch = pytest.importorskip("torch")

import convexfl.torch as cft  # noqa: E402
from convexfl.clusters import same_partition  # noqa: E402
from convexfl.graphs import complete  # noqa: E402
from convexfl.torch._maths import (  # noqa: E402
    block_soft_threshold,
    laplacian_gradient,
    laplacian_penalty,
    network_lasso_edge_update,
)

CUDA = torch.cuda.is_available()
needs_cuda = pytest.mark.skipif(not CUDA, reason="CUDA is not available")


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="module")
def digits():
    """4 clients, 2 label-permuted groups, 100 samples each, 100 public."""
    return cft.digits_federation(4, 2, kind="permuted", samples_per_client=100, n_public=100,
                                 random_state=0)


# Small configurations of every trainer (a few rounds on the digits split).
SMALL = {
    "fedavg": lambda **kw: cft.FedAvgDNN(rounds=6, lr=0.3, **kw),
    "local": lambda **kw: cft.LocalDNN(rounds=6, lr=0.3, **kw),
    "ppfl_rbcd_output": lambda **kw: cft.PPFLDNN(2, architecture="output", schedule="rbcd",
                                                 block_prob=0.7, rounds=16, lr=0.3,
                                                 lr_pi=2.0, **kw),
    "ppfl_alt_parameter": lambda **kw: cft.PPFLDNN(2, architecture="parameter",
                                                   schedule="alternating", rounds=12, lr=0.3,
                                                   lr_pi=2.0, **kw),
    "ppfl_body_output": lambda **kw: cft.PPFLDNN(2, canonical_position="body",
                                                 schedule="alternating", rounds=12, lr=0.3,
                                                 lr_pi=2.0, **kw),
    "ckt": lambda **kw: cft.PerFedCKT(("mlp:32", "cnn:4"), n_clusters=2, rounds=6, lr=0.3,
                                      local_steps=8, **kw),
    "cgpfl": lambda **kw: cft.CGPFLDNN(n_clusters=2, lam=2.0, lr=0.2, beta=0.3, rounds=10,
                                       local_steps=3, **kw),
    "son": lambda **kw: cft.SONHeads(lam=0.04, rho=0.1, lr=0.3, rounds=6, **kw),
}


def fitted_arrays(trainer):
    """Every fitted numeric result of a trainer, flattened to a list of numpy arrays."""
    out = []

    def walk(value):
        if isinstance(value, np.ndarray):
            out.append(value)
        elif isinstance(value, dict):
            for k in sorted(value):
                walk(value[k])
        elif isinstance(value, (list, tuple)):
            for v in value:
                walk(v)

    for name in sorted(vars(trainer)):
        if name.endswith("_") and not name.startswith("_") and name not in (
                "result_", "history_", "device_"):
            walk(getattr(trainer, name))
    out.append(np.array([[r.metrics.get("mean_test_accuracy", np.nan)
                          for r in trainer.history_]]))
    return out


def assert_bit_identical(a, b):
    xs, ys = fitted_arrays(a), fitted_arrays(b)
    assert len(xs) == len(ys)
    for x, y in zip(xs, ys, strict=True):
        assert x.shape == y.shape and x.dtype == y.dtype
        assert np.array_equal(x, y, equal_nan=x.dtype.kind == "f")


# ----------------------------------------------------------------------------- packaging


def test_import_convexfl_does_not_import_torch():
    code = "import sys, convexfl; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


def test_missing_torch_raises_import_error_naming_the_extra():
    code = ("import sys; sys.modules['torch'] = None\n"
            "try:\n    import convexfl.torch\n"
            "except ImportError as e:\n    print('ERR', e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.startswith("ERR")
    assert "pip install 'convexfl[torch]'" in out.stdout


# ----------------------------------------------------------------------------- devices


def test_resolve_device_cpu_auto_and_errors(monkeypatch):
    assert cft.resolve_device("cpu") == torch.device("cpu")
    assert cft.resolve_device(torch.device("cpu")).type == "cpu"
    with pytest.raises(ValueError, match="device"):
        cft.resolve_device("tpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert cft.resolve_device("auto") == torch.device("cpu")
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        cft.resolve_device("cuda")
    with pytest.raises(RuntimeError, match="device='auto'"):
        cft.resolve_device("cuda:0")


@pytest.mark.skipif(CUDA, reason="checks the error raised without CUDA")
def test_trainer_on_cuda_without_cuda_raises_clearly(digits):
    with pytest.raises(RuntimeError, match="CUDA is not available"):
        cft.FedAvgDNN(rounds=1, device="cuda").fit(digits)


@pytest.mark.skipif(CUDA, reason="auto picks CUDA here")
def test_auto_falls_back_to_cpu(digits):
    model = cft.FedAvgDNN(rounds=1, device="auto", random_state=0).fit(digits)
    assert model.device_.type == "cpu"


# ----------------------------------------------------------------------------- all trainers


@pytest.mark.parametrize("name", sorted(SMALL))
def test_trainer_improves_and_is_bit_identical_on_cpu(name, digits):
    first = SMALL[name](device="cpu", random_state=7).fit(digits)
    assert first.device_.type == "cpu"
    assert first.history_.failures() == []
    initial, final = first.initial_test_accuracy_, first.score()
    assert final > initial + 0.2, (name, initial, final)
    assert final > 0.45
    curve = first.history_.column("mean_test_accuracy")
    assert curve.shape == (first.rounds,) and np.all(np.isfinite(curve))
    again = SMALL[name](device="cpu", random_state=7).fit(digits)
    assert_bit_identical(first, again)
    other = SMALL[name](device="cpu", random_state=8).fit(digits)
    assert not all(np.array_equal(x, y) for x, y in
                   zip(fitted_arrays(first), fitted_arrays(other), strict=True))
    pred = first.predict(digits[0].X_test, 0)
    assert pred.shape == (digits[0].n_test,)
    assert np.isclose(np.mean(pred == digits[0].y_test), first.test_accuracy_[0])


def test_global_rng_state_is_neither_used_nor_changed(digits):
    legacy = np.random  # the global numpy generator, on purpose
    torch.manual_seed(123)
    legacy.seed(5)  # noqa: NPY002
    a = cft.SONHeads(rounds=2, random_state=1).fit(digits)
    after = (torch.rand(1).item(), legacy.rand())  # noqa: NPY002
    torch.manual_seed(999)
    legacy.seed(6)  # noqa: NPY002
    b = cft.SONHeads(rounds=2, random_state=1).fit(digits)
    assert_bit_identical(a, b)
    torch.manual_seed(123)
    legacy.seed(5)  # noqa: NPY002
    assert (torch.rand(1).item(), legacy.rand()) == after  # noqa: NPY002


def test_fit_from_pooled_arrays_and_input_errors(digits):
    X, y, g = digits.pooled("train")
    model = cft.FedAvgDNN(rounds=2, random_state=0).fit(X, y, g)
    assert model.n_clients_ == 4 and np.all(np.isnan(model.test_accuracy_))
    assert np.isnan(model.score()) and model.train_accuracy_.shape == (4,)
    one = cft.FedAvgDNN(rounds=1, random_state=0).fit(X, y)  # no groups: one client
    assert one.n_clients_ == 1 and one.n_features_in_ == 64
    assert 0.0 <= one.score(X, y) <= 1.0 and one.predict(X).shape == y.shape
    np.testing.assert_array_equal(model.predict(X, groups=g),
                                  np.concatenate([model.predict(X[g == i], i)
                                                  for i in np.unique(g)])[np.argsort(
                                                      np.argsort(g, kind="stable"),
                                                      kind="stable")])
    with pytest.raises(ValueError, match="^client: the model has 4 clients"):
        model.predict(X)
    bad = [(np.zeros((5, 64)), np.zeros(5, int)), (np.zeros((5, 63)), np.zeros(5, int))]
    with pytest.raises(ValueError, match="features"):
        cft.LocalDNN(rounds=1).fit(bad)
    with pytest.raises(ValueError, match="rounds"):
        cft.FedAvgDNN(rounds=0).fit(digits)
    with pytest.raises(NotFittedError):
        cft.FedAvgDNN().score()


def test_user_module_is_used_as_a_template_and_left_unchanged(digits):
    net = torch.nn.Sequential(torch.nn.Linear(64, 16), torch.nn.ReLU(), torch.nn.Linear(16, 10))
    before = [p.detach().clone() for p in net.parameters()]
    model = cft.FedAvgDNN(net, rounds=3, lr=0.3, random_state=0).fit(digits)
    assert model.n_parameters_ == cft.n_parameters(net) == 64 * 16 + 16 + 16 * 10 + 10
    assert all(torch.equal(a, b) for a, b in zip(before, net.parameters(), strict=True))
    assert model.score() > model.initial_test_accuracy_


# ----------------------------------------------------------------------------- PPFL


def test_ppfl_net_mixtures_match_their_definitions():
    torch.manual_seed(0)
    shared = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.ReLU())
    net2b = cft.PPFLNet(shared, torch.nn.Linear(4, 3), 2, architecture="parameter")
    net2a = cft.PPFLNet(shared, torch.nn.Linear(4, 3), 2, architecture="output")
    net2a.load_state_dict(net2b.state_dict())
    x, pi = torch.randn(6, 5), torch.tensor([0.3, 0.7])
    u = shared(x)
    c0, c1 = net2b.canonical
    W = 0.3 * c0.weight + 0.7 * c1.weight
    b = 0.3 * c0.bias + 0.7 * c1.bias
    torch.testing.assert_close(net2b(x, pi), u @ W.T + b)
    mix = 0.3 * torch.softmax(c0(u), 1) + 0.7 * torch.softmax(c1(u), 1)
    torch.testing.assert_close(net2a(x, pi), torch.log(mix))
    body = cft.PPFLNet(torch.nn.Linear(4, 3), torch.nn.Linear(5, 4), 2,
                       canonical_position="body")
    f = body.canonical
    torch.testing.assert_close(body(x, pi), body.shared(0.3 * f[0](x) + 0.7 * f[1](x)))
    with pytest.raises(ValueError, match="architecture"):
        cft.PPFLNet(shared, torch.nn.Linear(4, 3), 2, architecture="gating")


def test_laplacian_gradient_from_edges_matches_dense():
    rng = np.random.default_rng(0)
    N, K = 6, 3
    Pi = rng.dirichlet(np.ones(K), size=N)
    edges = np.array([[0, 1], [0, 3], [1, 2], [2, 5], [3, 4]])
    w = rng.uniform(0.5, 2.0, size=len(edges))
    A = np.zeros((N, N))
    A[edges[:, 0], edges[:, 1]] = w
    A += A.T
    L = np.diag(A.sum(1)) - A
    np.testing.assert_allclose(laplacian_gradient(Pi, edges, w), L @ Pi, atol=1e-14)
    dense = sum(A[i, j] * np.sum((Pi[i] - Pi[j]) ** 2) for i in range(N) for j in range(N))
    np.testing.assert_allclose(laplacian_penalty(Pi, edges, w), dense, rtol=1e-13)
    np.testing.assert_allclose(laplacian_penalty(Pi, edges, w), 2 * np.trace(Pi.T @ L @ Pi),
                               rtol=1e-13)


@pytest.mark.parametrize("schedule,architecture", [("rbcd", "output"), ("rbcd", "parameter"),
                                                   ("alternating", "output")])
def test_ppfl_memberships_stay_on_the_simplex(schedule, architecture, digits):
    model = cft.PPFLDNN(3, schedule=schedule, architecture=architecture, rounds=6, lr=0.3,
                        lr_pi=5.0, lam=0.01, pi_init="random", random_state=3,
                        participation=0.5).fit(digits)
    Pi = model.memberships_
    assert Pi.shape == (4, 3)
    np.testing.assert_allclose(Pi.sum(axis=1), 1.0, atol=1e-12)
    assert np.all(Pi >= model.pi_floor / (1 + 3 * model.pi_floor) - 1e-15)
    assert np.all(np.isfinite(model.history_.column("penalty")))
    if schedule == "rbcd":
        assert set(model.blocks_.tolist()) == {0, 1}
        moved = model.history_.column("pi_change")[model.blocks_ == 1]
        assert np.all(moved > 0)
    assert np.isfinite(model.objective())


def test_ppfl_laplacian_pulls_memberships_together(digits):
    kw = {"schedule": "alternating", "rounds": 6, "lr": 0.3, "lr_pi": 2.0,
          "pi_init": "random", "random_state": 0}
    free = cft.PPFLDNN(2, lam=0.0, **kw).fit(digits)
    tied = cft.PPFLDNN(2, lam=0.05, **kw).fit(digits)
    assert (tied.history_.column("penalty")[-1] < 0.5 * free.history_.column("penalty")[-1])


# ----------------------------------------------------------------------------- PerFed-CKT


def test_ckt_heterogeneous_models_partial_participation_and_accounting(digits):
    model = cft.PerFedCKT(("mlp:32", "mlp:64-32", "cnn:4"), n_clusters=2, rounds=5,
                          participation=0.5, lr=0.3, random_state=1).fit(digits)
    assert model.client_archs_.tolist() == [0, 1, 2, 0]
    assert len(set(model.n_parameters_.tolist())) == 3
    assert all(len(r.participants) == 2 for r in model.history_)
    com = model.communication_
    np.testing.assert_array_equal(com["total"], com["formula"])
    n_pub, n_cls = digits.public.shape[0], 10
    assert com["up"][0] == 2 * n_pub * n_cls and com["down"][0] == 0
    assert np.all(com["down"][1:] == 2 * model.history_.column("n_centroids")[:-1] * n_pub
                  * n_cls)
    assert com["parameter_sharing_equivalent"].shape == (5,)
    assert set(np.unique(model.cluster_labels_)) <= {-1, 0, 1}


def test_ckt_needs_a_public_set(digits):
    with pytest.raises(ValueError, match="public"):
        cft.PerFedCKT(rounds=1).fit(list(digits))
    model = cft.PerFedCKT("mlp:16", rounds=1, random_state=0).fit(list(digits),
                                                                  public=digits.public)
    assert model.centroids_.shape[1:] == (digits.public.shape[0], 10)


# ----------------------------------------------------------------------------- CGPFL


def test_cgpfl_clusters_the_label_permuted_groups(digits):
    model = cft.CGPFLDNN(n_clusters=2, lam=2.0, lr=0.2, beta=0.3, rounds=4, local_steps=2,
                         random_state=0).fit(digits)
    assert same_partition(model.assignments_, digits.groups)
    assert len(model.generalized_) == 2
    pfedme = cft.CGPFLDNN(n_clusters=1, rounds=2, local_steps=1, random_state=0).fit(digits)
    assert np.all(pfedme.assignments_ == 0)


# ----------------------------------------------------------------------------- SON heads


def test_block_soft_threshold_is_the_prox_and_gives_exact_zeros():
    rng = np.random.default_rng(1)
    V = rng.normal(size=(5, 4))
    V[2] *= 1e-3
    t = 0.5
    P = block_soft_threshold(V, t)
    assert np.all(P[2] == 0.0)
    for v, p in zip(V, P, strict=True):  # prox optimality: v - p ∈ t ∂‖p‖
        if np.any(p):
            np.testing.assert_allclose(v - p, t * p / np.linalg.norm(p), atol=1e-12)
        else:
            assert np.linalg.norm(v) <= t
    a, b = rng.normal(size=(1, 3)), rng.normal(size=(1, 3))
    zero = np.zeros((1, 3))
    Zi, Zj, _, _ = network_lasso_edge_update(zero, zero, a, b, np.array([10.0]),
                                             1.0)
    assert np.array_equal(Zi, Zj)
    Zi, Zj, Ui, Uj = network_lasso_edge_update(zero, zero, a, b, np.array([0.0]),
                                               1.0)
    np.testing.assert_allclose(Zi, a, atol=1e-15)
    np.testing.assert_allclose(Ui, 0.0, atol=1e-15)


@pytest.fixture(scope="module")
def six_clients():
    return cft.digits_federation(6, 2, kind="permuted", samples_per_client=120,
                                 random_state=3)


def test_son_heads_fuse_exactly_within_groups_and_stay_apart_across(six_clients):
    data = six_clients
    model = cft.SONHeads(lam=0.04, rho=0.1, lr=0.3, rounds=40, random_state=3).fit(data)
    groups = data.groups
    assert same_partition(model.labels_, groups)
    H = model.fused_heads_
    for g in np.unique(groups):
        rows = H[groups == g]
        assert all(np.array_equal(rows[0], r) for r in rows)  # bitwise identical heads
    assert np.linalg.norm(H[groups == 0][0] - H[groups == 1][0]) > 1.0
    e = model.graph_.edges
    within = groups[e[:, 0]] == groups[e[:, 1]]
    assert np.all(model.edge_fused_[within]) and not np.any(model.edge_fused_[~within])
    Zi, Zj, _, _ = model.edge_variables_
    assert np.array_equal(Zi[within], Zj[within])
    same = [model.predict_logits(data[0].X_test, i) for i in np.flatnonzero(groups == 0)]
    assert all(np.array_equal(same[0], s) for s in same)
    assert model.score() > 0.8
    assert np.isfinite(model.objective())


def test_son_heads_without_penalty_keep_every_head(digits):
    model = cft.SONHeads(lam=0.0, rho=0.1, lr=0.3, rounds=4, random_state=0).fit(digits)
    assert model.labels_.tolist() == [0, 1, 2, 3]
    assert not np.any(model.edge_fused_)
    np.testing.assert_array_equal(model.fused_heads_, model.heads_)


def test_son_heads_fuse_everything_for_huge_lambda(digits):
    model = cft.SONHeads(lam=100.0, rho=0.1, lr=0.3, rounds=3, random_state=0,
                         graph=complete(4)).fit(digits)
    assert np.all(model.labels_ == 0) and np.all(model.edge_fused_)


# ----------------------------------------------------------------------------- comparison


def test_compare_on_digits_table(digits):
    table = cft.compare_on_digits(rounds=2, methods=["FedAvg-DNN", "Local", "SON heads"],
                                  data=digits)
    assert [r["method"] for r in table.rows] == ["FedAvg-DNN", "Local", "SON heads"]
    assert all(0.0 <= r["mean_test_accuracy"] <= 1.0 for r in table.rows)
    assert table.rows[1]["numbers_sent"] == 0
    text = table.to_markdown()
    assert text.count("\n") == 4 and "| SON heads |" in text
    with pytest.raises(ValueError, match="unknown"):
        cft.compare_on_digits(rounds=1, methods=["nope"], data=digits)


# ----------------------------------------------------------------------------- CUDA


@needs_cuda
@pytest.mark.parametrize("name", sorted(SMALL))
def test_cuda_matches_cpu(name, digits):
    """Same seed on CPU and CUDA: same start (parameters are drawn on the CPU), the same
    mini-batches (drawn with numpy); only float32 rounding differs (cuDNN convolutions may
    use TF32), so the accuracies agree to a tolerance that grows with the rounds."""
    cpu = SMALL[name](device="cpu", random_state=7).fit(digits)
    gpu = SMALL[name](device="cuda", random_state=7).fit(digits)
    assert gpu.device_.type == "cuda"
    assert gpu.history_.failures() == []
    init_c = cpu.history_.initial_metrics["mean_test_accuracy"]
    init_g = gpu.history_.initial_metrics["mean_test_accuracy"]
    assert init_c == pytest.approx(init_g, abs=0.02)
    first_c = cpu.history_[0].metrics["mean_test_accuracy"]
    first_g = gpu.history_[0].metrics["mean_test_accuracy"]
    assert first_c == pytest.approx(first_g, abs=0.05)
    assert cpu.score() == pytest.approx(gpu.score(), abs=0.15)
    assert gpu.score() > gpu.initial_test_accuracy_ + 0.2


@needs_cuda
def test_cuda_single_round_parameters_match_cpu(digits):
    kw = {"rounds": 1, "lr": 0.3, "batch_size": None, "random_state": 0}
    cpu = cft.FedAvgDNN(device="cpu", **kw).fit(digits)
    gpu = cft.FedAvgDNN(device="cuda", **kw).fit(digits)
    for k in cpu.params_:
        np.testing.assert_allclose(cpu.params_[k], gpu.params_[k], atol=1e-4)
    gpu_again = cft.FedAvgDNN(device="cuda", **kw).fit(digits)
    for k in gpu.params_:
        np.testing.assert_allclose(gpu.params_[k], gpu_again.params_[k], atol=1e-6)


@pytest.mark.parametrize("bad, match", [
    (lambda X: np.where(np.arange(X.size).reshape(X.shape) == 3, np.nan, X), "NaN"),
    (lambda X: np.where(np.arange(X.size).reshape(X.shape) == 5, np.inf, X), "infinity"),
    (lambda X: X[:, :10], "has 10 features, but FedAvgDNN is expecting 64"),
    (lambda X: X[0], "2D array"),
    (lambda X: np.full(X.shape, "a"), "could not convert|dtype"),
])
def test_predict_refuses_bad_rows_at_the_door(digits, bad, match):
    """Issue 16, item 6: NaN/inf rows got labels; wrong shapes failed deep in torch."""
    model = cft.FedAvgDNN(rounds=1, random_state=0).fit(digits)
    X = np.asarray(digits[0].X_test, float)
    with pytest.raises((ValueError, TypeError), match=match):
        model.predict(bad(X), 0)
    with pytest.raises(ValueError, match="^client"):
        model.predict(X, 99)


@pytest.mark.parametrize("name", ["FedAvgDNN", "LocalDNN", "CGPFLDNN", "PPFLDNN", "SONHeads"])
def test_trainers_follow_the_scikit_learn_contract(name):
    """Issue 17, item 1: each trainer failed 29 of 41 checks. PerFedCKT is left out: it is
    defined with a public unlabeled set, which scikit-learn's checks cannot pass (its fit
    refuses to run without one: test_ckt_from_arrays_needs_a_public_set)."""
    from helpers import failed_sklearn_checks

    assert not failed_sklearn_checks(getattr(cft, name)(rounds=1))


def test_ckt_from_arrays_needs_a_public_set(digits):
    X, y, g = digits.pooled("train")
    with pytest.raises(ValueError, match="^public: PerFed-CKT needs a public unlabeled set"):
        cft.PerFedCKT(rounds=1).fit(X, y, g)


def test_grid_search_over_lambda_for_a_trainer_with_routed_groups(digits):
    import sklearn
    from sklearn.model_selection import GridSearchCV, KFold

    X, y, g = digits.pooled("train")
    with sklearn.config_context(enable_metadata_routing=True):
        est = (cft.SONHeads(rounds=2, random_state=0)
               .set_fit_request(groups=True).set_score_request(groups=True))
        search = GridSearchCV(est, {"lam": [1e-3, 1.0]}, cv=KFold(2, shuffle=True,
                                                                   random_state=0))
        search.fit(X, y, groups=g)
    assert set(search.cv_results_["param_lam"]) == {1e-3, 1.0}
    assert np.all(np.isfinite(search.cv_results_["mean_test_score"]))
