"""The `convexfl bounds` and `convexfl path` commands on data files."""

import json

import numpy as np
import pytest

import convexfl as cfl
from convexfl import cli


@pytest.fixture(scope="module")
def points_csv(tmp_path_factory):
    A, truth = cfl.datasets.planted_points(3, 3, 2, separation=10.0, random_state=0)
    path = tmp_path_factory.mktemp("data") / "points.csv"
    rows = ["x0,x1,cluster"] + [f"{a:.12g},{b:.12g},{k}" for (a, b), k in zip(A, truth,
                                                                              strict=True)]
    path.write_text("\n".join(rows) + "\n")
    return path, A, truth


def test_bounds_on_a_points_csv(points_csv, tmp_path, capsys):
    path, A, truth = points_csv
    out = tmp_path / "rep"
    assert cli.main(["bounds", str(path), "--out", str(out), "--lam", "0.4"]) == 0
    res = json.loads((out / "bounds.json").read_text())
    prob = cfl.SumOfNorms(cfl.losses.Quadratic(A), cfl.graphs.complete(len(A)), 0.0)
    assert res["fusion_threshold"]["value"] == pytest.approx(
        cfl.bounds.fusion_threshold(prob).value, rel=1e-8)
    rec = res["recovery_interval"]
    assert rec["kind"] == "exact" and rec["lo"] < rec["hi"]
    assert set(rec["related"]) >= {"theorem1_2", "theorem3", "conservative"}
    assert "certificate" in res and (out / "bounds.png").stat().st_size > 5_000
    text = capsys.readouterr().out
    assert "exact recovery" in text and "SON" in text


def test_path_on_a_samples_npz(tmp_path, capsys):
    X, y, groups, uc = cfl.datasets.planted_classification(2, 2, 25, 2, flip=0.0,
                                                           random_state=1)
    data = tmp_path / "fl.npz"
    np.savez(data, X=X, y=y, groups=groups, partition=uc)
    out = tmp_path / "rep"
    assert cli.main(["path", str(data), "--loss", "squared_hinge", "--n-lambdas", "6",
                     "--out", str(out), "--checkpoint"]) == 0
    report = json.loads((out / "path_report.json").read_text())
    assert report["lam_convention"] == "son" and len(report["table"]) == 6
    assert report["table"][0]["n_clusters"] == 4 and report["table"][-1]["n_clusters"] == 1
    loaded = cfl.path.SolutionPath.load(out / "path")
    assert len(loaded) == 6
    for name in ("n_clusters.png", "dendrogram.png"):
        assert (out / name).stat().st_size > 5_000
    assert "clusters" in capsys.readouterr().out


def test_samples_csv_and_errors(tmp_path, capsys):
    X, y, groups, uc = cfl.datasets.planted_classification(2, 2, 10, 2, random_state=2)
    lines = ["f0,f1,y,group,cluster"] + [
        f"{a:.10g},{b:.10g},{t:g},{g},{uc[g]}" for (a, b), t, g in zip(X, y, groups,
                                                                      strict=True)]
    csv = tmp_path / "s.csv"
    csv.write_text("\n".join(lines) + "\n")
    data = cli.load_data(csv)
    assert data["kind"] == "samples" and np.array_equal(data["partition"], uc)
    assert cli.main(["bounds", str(csv), "--out", str(tmp_path / "r"), "--no-plot"]) == 0
    assert cli.main(["bounds", str(tmp_path / "missing.csv")]) == 2
    assert cli.main(["bounds", str(csv), "--loss", "quadratic"]) == 2
    bad = tmp_path / "bad.npz"
    np.savez(bad, Z=np.zeros(3))
    assert cli.main(["path", str(bad)]) == 2
    assert "error" in capsys.readouterr().err


def test_demo_still_works(capsys):
    assert cli.main(["demo"]) == 0
    assert "exact recovery interval" in capsys.readouterr().out
