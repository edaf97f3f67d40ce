"""The large-kNN benchmark's command line (benchmarks/large_knn.py): its contenders and
regimes are chosen by name, and an unknown name is refused before any solve."""

import pytest

from benchmarks import large_knn


@pytest.mark.parametrize("option, value", [("--contenders", "ssnal foo"),
                                           ("--regimes", "many"),
                                           ("--contenders", "auto,ssnal AMG")])
def test_an_unknown_name_is_a_usage_error_naming_the_option(option, value, capsys):
    with pytest.raises(SystemExit) as err:
        large_knn.main([option, value, "--sizes", "100"])
    assert err.value.code == 2
    message = capsys.readouterr().err
    assert option in message and "expected some of" in message


def test_known_names_select_rows(monkeypatch, tmp_path):
    seen = []
    monkeypatch.setattr(large_knn, "instance_rows",
                        lambda n, regime, lam, max_iter, contenders: seen.append(
                            (n, regime, lam, tuple(contenders))) or [])
    monkeypatch.setattr(large_knn, "plot", lambda rows, path: None)
    monkeypatch.setattr("benchmarks.suite.warm_up", lambda **_: None)
    large_knn.main(["--sizes", "100,200", "--regimes", "many clusters",
                    "--contenders", "ssnal sparsified,auto", "--out", str(tmp_path)])
    assert seen == [(100, "many clusters", 0.03, ("ssnal sparsified", "auto")),
                    (200, "many clusters", 0.03, ("ssnal sparsified", "auto"))]


def test_ccmm_rows_are_certified_by_convexfl_or_say_they_are_skipped(monkeypatch):
    """A CCMM row carries convexfl's certificate of CCMM's answer (its K the certificate's
    partition); without ccmmpy the row says so and holds no time."""
    import convexfl as cfl
    from benchmarks import peers

    if peers.have_ccmm():
        (row,) = large_knn.instance_rows(300, "λ = 3", 3.0, 50, ["ccmm default"])
        A = large_knn._connected_mixture(300)
        prob = cfl.SumOfNorms(cfl.losses.Quadratic(A), large_knn._knn(A, 10), 3.0)
        X, _ = peers.ccmm_path(A, prob.graph, [3.0], **large_knn.CCMM["ccmm default"])
        cert = cfl.certificates.kkt_residual(prob, X[0])
        assert row["time_s"] > 0 and row["kkt"] == pytest.approx(cert.kkt_residual)
        assert row["certified"] == (cert.kkt_residual <= large_knn.TOL)
        assert row["objective"] == pytest.approx(prob.objective(X[0])) and row["rel_gap"] == 0
        assert row["n_clusters"] == cfl.clusters.labels(X[0], cert.fuse_tol,
                                                        graph=prob.graph).max() + 1
    monkeypatch.setattr(large_knn, "have_ccmm", lambda: False)
    (row,) = large_knn.instance_rows(300, "λ = 3", 3.0, 50, ["ccmm tight"])
    assert row["time_s"] is None and row["note"] == peers.SKIPPED
    assert row["contender"] == "ccmm tight" and not row["certified"]


def test_admm_and_torch_rows_run_only_when_named_and_cuda_rows_say_when_skipped(monkeypatch):
    """The opt-in contenders keep their own ADMM iteration limit (not SSNAL's ``--max-iter``);
    a CUDA row without CUDA holds no time and says why."""
    from types import SimpleNamespace

    solved = []
    sol = SimpleNamespace(history={}, method="m", stage="s")
    monkeypatch.setattr(large_knn, "_run", lambda prob, opts, max_iter: solved.append(
        {"max_iter": max_iter, **opts}) or (sol, 1.0))
    monkeypatch.setattr(large_knn, "_ccmm_row", lambda regime, prob, A, name: {
        "contender": name, "time_s": None, "objective": None})
    monkeypatch.setattr(large_knn, "_row", lambda regime, prob, name, sol=None, t=None,
                        note="": {"contender": name, "note": note, "time_s": t,
                                  "objective": None})
    monkeypatch.setattr(large_knn, "_have_cuda", lambda: False)
    rows = large_knn.instance_rows(300, "λ = 3", 3.0, 50, ["admm", "torch cuda f32"])
    assert [r["contender"] for r in rows] == ["admm", "torch cuda f32"]
    assert solved == [{"max_iter": 20000, "method": "admm"}]
    assert rows[1]["note"] == "skipped: CUDA is not available" and rows[1]["time_s"] is None
    solved.clear()
    large_knn.instance_rows(300, "λ = 3", 3.0, 50, None)
    assert {s["method"] for s in solved} == {"ssnal", "auto"}
    assert all(s["max_iter"] == 50 for s in solved)
