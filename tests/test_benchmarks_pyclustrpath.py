"""The PyClustrPath benchmark (benchmarks/pyclustrpath.py) without its source: its γ as λ
of (SON), its kNN weights, the stubs its import needs, and the run that skips it."""

import json
import os
import sys

import numpy as np
import pytest

from benchmarks import pyclustrpath as bench


def test_son_lambda_is_gamma_times_the_largest_distance():
    assert bench.son_lambda(0.3, 5.0) == pytest.approx(1.5, rel=1e-15)
    assert bench.son_lambda(2, 0.25) == 0.5


def test_peer_graph_by_hand():
    """Points 0, 1, 3 on a line, k = 1: max_dist 3, divided points 0, 1/3, 1; nearest
    others 0→1, 1→0, 2→1 (with itself, k + 1 = 2): edges (0, 1), (1, 2) with
    w = exp(−½ d²) at d = 1/3 and 2/3."""
    A = np.array([[0.0, 0.0], [1.0, 0.0], [3.0, 0.0]])
    m, edges, w = bench.peer_graph(A, k=1, phi=0.5)
    assert m == pytest.approx(3.0, rel=1e-15)
    np.testing.assert_array_equal(edges, [[0, 1], [1, 2]])
    np.testing.assert_allclose(w, [np.exp(-0.5 / 9), np.exp(-0.5 * 4 / 9)], rtol=1e-14)


def test_its_objective_times_m_squared_is_the_son_objective():
    """G_γ(Y) = ½Σ‖y_i − a_i/m‖² + γ Σ w_ij ‖y_i − y_j‖ (its problem, by hand) satisfies
    m² G_γ(X/m) = F_λ(X) at λ = γ m for every X: the same minimisers."""
    rng = np.random.default_rng(4)
    A = rng.standard_normal((15, 3)) * 3.0 + 1.0
    m, edges, w = bench.peer_graph(A, k=4)
    assert m == pytest.approx(max(np.linalg.norm(a - b) for a in A for b in A), rel=1e-14)
    gamma = 0.37
    prob = bench.same_problem(A, edges, w, gamma, m)
    assert prob.lam == pytest.approx(gamma * m, rel=1e-15)
    for _ in range(3):
        Y = A / m + 0.1 * rng.standard_normal(A.shape)
        diffs = np.linalg.norm(Y[edges[:, 0]] - Y[edges[:, 1]], axis=1)
        theirs = 0.5 * np.sum((Y - A / m) ** 2) + gamma * np.sum(w * diffs)
        assert m * m * theirs == pytest.approx(prob.objective(m * Y), rel=1e-12)


@pytest.fixture
def clean_imports():
    """Undo what load_peer puts in sys.modules and sys.path."""
    modules, path = set(sys.modules), list(sys.path)
    yield
    for name in set(sys.modules) - modules:
        del sys.modules[name]
    sys.path[:] = path


def _fake_package(root, body):
    pkg = root / "pyclustrpath"
    (pkg / "solvers").mkdir(parents=True)
    (pkg / "__init__.py").write_text(body)
    (pkg / "solvers" / "__init__.py").write_text("from .ssnal import SSNAL\n")
    (pkg / "solvers" / "admm.py").write_text("def sparse_cholesky_solve(s, b, x=None):\n"
                                             "    return b\n")
    return root


def test_the_stubs_let_it_import_and_raise_when_used(tmp_path, clean_imports, monkeypatch):
    """A stand-in with its imports: ``import cusparse_extension``, ``from knn_cuda import
    KNN``, the SSNAL whose bytecode this Python refuses, the environment it sets."""
    monkeypatch.setenv("CUDA_HOME", "/mine")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    src = _fake_package(tmp_path, "import os, logging, types\n"
                        "import cusparse_extension\n"
                        "from knn_cuda import KNN\n"
                        "os.environ['CUDA_VISIBLE_DEVICES'] = '0'\n"
                        "os.environ['CUDA_HOME'] = '/usr/local/cuda-12.1'\n"
                        "gv = types.SimpleNamespace(logger=logging.getLogger('fake'))\n"
                        "from .solvers import SSNAL\n")
    peer, stubs = bench.load_peer(str(src))
    assert stubs == ["cusparse_extension", "knn_cuda", "pyclustrpath.solvers.ssnal"]
    assert os.environ["CUDA_HOME"] == "/mine" and "CUDA_VISIBLE_DEVICES" not in os.environ
    with pytest.raises(RuntimeError, match="stub: knn_cuda.KNN is not built here"):
        peer.KNN(k=3)
    with pytest.raises(RuntimeError, match="stub: cusparse_extension is not built here"):
        sys.modules["cusparse_extension"].csr_ichol(1, 2)
    with pytest.raises(RuntimeError, match="stub: pyclustrpath.solvers.ssnal"):
        peer.SSNAL([1.0], "cpu")
    assert peer.gv.use_coo == 0 and peer.gv.solver_method


def test_a_failing_import_is_a_reason_and_leaves_nothing(tmp_path, clean_imports):
    src = _fake_package(tmp_path, "import cholespy_not_here\n")
    why = bench.load_peer(str(src))
    assert isinstance(why, str) and "import failed" in why and "cholespy_not_here" in why
    assert "pyclustrpath" not in sys.modules and str(src) not in sys.path
    assert "no pyclustrpath/ package" in bench.load_peer(str(tmp_path / "nowhere"))
    assert bench.load_peer(None) == "no --src given"


def test_without_its_source_the_convexfl_rows_run(tmp_path, capsys):
    out = tmp_path / "out"
    rows = bench.main(["--src", str(tmp_path / "nowhere"), "--problems", "mixture",
                       "--sizes", "60", "--rounds", "1", "--out", str(out)])
    printed = capsys.readouterr().out
    assert "PyClustrPath skipped: no pyclustrpath/ package" in printed
    assert rows and all(r["contender"].startswith("convexfl") for r in rows)
    assert {r["gamma"] for r in rows} == set(bench.GAMMAS["mixture"])
    done = [r for r in rows if r["objective"] is not None]
    assert done and all(r["rel_gap"] >= 0 for r in done)
    saved = json.loads((out / "pyclustrpath.json").read_text())
    assert "no pyclustrpath/ package" in saved["meta"]["pyclustrpath"]
    assert saved["instances"][0]["graph"].startswith("peer_graph")
    assert (out / "pyclustrpath.png").exists()


def test_an_unknown_problem_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as err:
        bench.main(["--problems", "mnist"])
    assert err.value.code == 2 and "--problems" in capsys.readouterr().err


def test_an_unknown_device_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as err:
        bench.main(["--devices", "tpu"])
    assert err.value.code == 2 and "--devices" in capsys.readouterr().err


def test_devices_choose_where_the_torch_rows_run(tmp_path):
    rows = bench.main(["--problems", "mixture", "--sizes", "60", "--rounds", "1",
                       "--devices", "cpu", "--out", str(tmp_path)])
    torch_rows = [r for r in rows if "torch" in r["contender"]]
    assert torch_rows and {r["device"] for r in torch_rows} == {"cpu"}


def test_cuda_asked_for_without_cuda_is_an_error(tmp_path):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("checks the error raised without CUDA")
    with pytest.raises(ValueError, match="devices: 'cuda'"):
        bench.main(["--problems", "mixture", "--sizes", "60", "--devices", "cuda",
                    "--out", str(tmp_path)])
