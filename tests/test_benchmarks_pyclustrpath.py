"""The PyClustrPath benchmark (benchmarks/pyclustrpath.py) without the peer's source: the
conversion of its γ to (SON) λ, and a clear skip when its source is missing."""

import json

import numpy as np
import pytest

import convexfl as cfl
from benchmarks import pyclustrpath


def test_gamma_on_divided_data_is_lambda_times_the_largest_distance():
    """Its problem on the data divided by ``m``, multiplied by ``m²``, is (SON) at λ = γ·m:
    the objectives agree at any ``X`` (``Y = X/m``)."""
    rng = np.random.default_rng(0)
    A = rng.standard_normal((12, 3))
    graph = cfl.graphs.knn(A, 4, phi=0.5)
    m = float(np.max(np.linalg.norm(A[:, None] - A[None], axis=2)))
    gamma = 0.07
    X = rng.standard_normal(A.shape)
    Y, B = X / m, A / m
    i, j = graph.edges.T
    theirs = 0.5 * np.sum((Y - B) ** 2) + gamma * np.sum(
        graph.weights * np.linalg.norm(Y[i] - Y[j], axis=1))
    ours = cfl.SumOfNorms(cfl.losses.Quadratic(A), graph, pyclustrpath.son_lambda(gamma, m))
    assert np.isclose(m * m * theirs, ours.objective(X), rtol=1e-12)


def test_without_its_source_the_run_says_so_and_writes_no_rows(tmp_path, capsys):
    pytest.importorskip("torch")
    rows = pyclustrpath.run(src=str(tmp_path / "missing"), out=str(tmp_path), rounds=1,
                            sizes=[100])
    assert rows == []
    assert "PyClustrPath skipped: no PyClustrPath source" in capsys.readouterr().out
    meta = json.loads((tmp_path / "pyclustrpath.json").read_text())["meta"]
    assert "no PyClustrPath source" in meta["peer"]
