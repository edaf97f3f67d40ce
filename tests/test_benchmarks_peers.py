"""The peer benchmarks (benchmarks/peers.py, benchmarks/versus.py): CCMM's λ convention
converted to (SON), and CCMM's answers measured by convexfl's certificate (when installed)."""

import numpy as np
import pytest

import convexfl as cfl
from benchmarks import peers, versus
from convexfl.datasets.armacki import planted_points

needs_ccmm = pytest.mark.skipif(not peers.have_ccmm(), reason="ccmmpy not installed "
                                "(python -m benchmarks setup-peers --ccmm-src PATH)")


def _ccmm_loss(X, A, graph, lam_c, scale=True):
    """CCMM's loss as written in ccmmpy/cpp/src/ccmm.cpp (CCMMConstants, loss_fusions), on
    centroids ``M = X − ā`` of the column-centred data: κ_ε‖A_c − M‖² + λ_C κ_pen Σ_{i<j}
    w_ij ‖m_i − m_j‖ with κ_ε = 1/(2‖A_c‖²), κ_pen = 1/(‖A_c‖ Σ_{i<j} w_ij) when scaled."""
    Ac = A - A.mean(axis=0)
    M = X - A.mean(axis=0)
    W = np.zeros((len(A), len(A)))
    W[graph.edges[:, 1], graph.edges[:, 0]] = graph.weights  # CCMM's lower triangle
    i, j = np.nonzero(W)
    pen = np.sum(W[i, j] * np.linalg.norm(M[i] - M[j], axis=1))
    k_eps, k_pen = 0.5, 1.0
    if scale:
        k_eps, k_pen = 1 / (2 * np.sum(Ac ** 2)), 1 / (np.linalg.norm(Ac) * W.sum())
    return k_eps * np.sum((Ac - M) ** 2) + lam_c * k_pen * pen


@pytest.mark.parametrize("scale", [True, False])
def test_ccmm_lambda_makes_the_losses_proportional(scale):
    rng = np.random.default_rng(3)
    A = rng.standard_normal((30, 3)) * 4.0 + 7.0
    graph = cfl.graphs.knn(A, 4, phi=0.1)
    lam = 0.37
    prob = cfl.SumOfNorms(cfl.losses.Quadratic(A), graph, lam)
    lam_c = float(peers.ccmm_lambda(lam, A, graph.weights, scale=scale))
    factor = np.sum((A - A.mean(axis=0)) ** 2) if scale else 1.0
    for _ in range(3):  # L(X) · factor = F(X) at every X, so both have the same minimisers
        X = A + rng.standard_normal(A.shape)
        assert _ccmm_loss(X, A, graph, lam_c, scale) * factor == pytest.approx(
            prob.objective(X), rel=1e-12)
    if scale:
        expected = lam * graph.weights.sum() / np.linalg.norm(A - A.mean(axis=0))
        assert lam_c == pytest.approx(expected, rel=1e-14)


def test_setup_peers_names_a_bad_source(tmp_path):
    with pytest.raises(FileNotFoundError, match="--ccmm-src"):
        peers.setup_peers(["--ccmm-src", str(tmp_path)])


def _planted(n=40):
    A, _ = planted_points(4, n // 4, 3, separation=30.0, radius=1.0, random_state=0)
    return A


@needs_ccmm
@pytest.mark.parametrize("kind", ["complete", "knn-gauss"])
def test_ccmm_tight_answer_is_certified_at_the_converted_lambda(kind):
    A = _planted()
    if kind == "complete":
        graph, lam = cfl.graphs.complete(len(A)), 12.0 / len(A)
    else:
        rng = np.random.default_rng(1)
        A = rng.standard_normal((60, 2))
        graph, lam = cfl.graphs.knn(A, 8, phi=0.5), 0.05
    prob = cfl.SumOfNorms(cfl.losses.Quadratic(A), graph, lam)
    X, info = peers.ccmm_path(A, graph, [lam], **versus.CCMM["ccmm tight"])
    cert = cfl.certificates.kkt_residual(prob, X[0])
    assert cert.kkt_residual <= 1e-5
    sol = cfl.solve(prob, tol=1e-8)
    assert prob.objective(X[0]) == pytest.approx(sol.objective, rel=1e-9)
    # CCMM's own loss is (SON) / ‖A_c‖² at the converted λ
    assert info["loss"][0] * np.sum((A - A.mean(axis=0)) ** 2) == pytest.approx(
        prob.objective(X[0]), rel=1e-10)
    assert info["n_clusters"][0] == sol.n_clusters


def test_single_instance_rows(monkeypatch):
    A = _planted(12)
    graph = cfl.graphs.complete(12)
    if peers.have_ccmm():
        ccmm = [r for r in versus._single("t", A, graph, 1.0, False)
                if r["contender"].startswith("ccmm")]
        assert [r["contender"] for r in ccmm] == list(versus.CCMM)
        assert all(r["kkt"] is not None and r["vs_auto"] > 0 for r in ccmm)
    monkeypatch.setattr(versus, "have_ccmm", lambda: False)
    rows = versus._single("t", A, graph, 1.0, False)
    assert [r["contender"] for r in rows] == ["convexfl auto", "convexfl admm",
                                              "convexfl ssnal", "ccmm"]
    assert rows[-1]["note"] == peers.SKIPPED and rows[-1]["time_s"] is None
    assert all(r["certified"] and r["kkt"] <= versus.TOL for r in rows[:3])
    assert min(r["rel_gap"] for r in rows[:3]) == 0.0
    assert rows[0]["vs_auto"] == 1.0


@needs_ccmm
def test_ccmm_weights_match_ccmms_own_knn_weights():
    from ccmmpy import SparseWeights

    A = np.random.default_rng(2).standard_normal((50, 3))
    own = SparseWeights(A, k=5, phi=0.0, connected=False, scale=False)  # w = 1 on kNN pairs
    ours = peers.ccmm_weights(cfl.graphs.knn(A, 5))
    np.testing.assert_array_equal(ours.indices(), own.indices())
    np.testing.assert_array_equal(ours.values(), own.values())


@needs_ccmm
def test_ccmm_tau_is_its_fusion_threshold():
    """``tau`` reaches CCMM: at a λ too small to fuse any pair, a threshold of half the
    median distance fuses neighbours that the default 1e-3 keeps apart."""
    A = np.random.default_rng(3).standard_normal((60, 2))
    graph = cfl.graphs.knn(A, 8, phi=0.5)
    _, default = peers.ccmm_path(A, graph, [1e-3])
    _, loose = peers.ccmm_path(A, graph, [1e-3], tau=0.5)
    assert default["n_clusters"][0] == 60
    assert loose["n_clusters"][0] < 60


def test_path_contenders_take_their_rounds_in_turn():
    """Each round times every contender once, so a slow stretch of the machine reaches all
    of them; each keeps its fastest round's result and every round's time."""
    calls = []
    times = {"a": iter([3.0, 1.0, 2.0]), "b": iter([5.0, 6.0, 4.0])}

    def contender(name):
        def run():
            calls.append(name)
            t = next(times[name])
            return f"{name}{t}", t
        return run

    out = versus._interleaved_rounds({"a": contender("a"), "b": contender("b")}, 3)
    assert calls == ["a", "b", "a", "b", "a", "b"]
    assert out["a"] == ("a1.0", 1.0, [3.0, 1.0, 2.0])
    assert out["b"] == ("b4.0", 4.0, [5.0, 6.0, 4.0])
    assert versus._rounds_note([1.0, 2.5]) == "; rounds 1.00/2.50 s"
    assert versus._rounds_note([1.0]) == ""
