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


# --- issue 16, items 3 and 4: input read with a real parser, output checked up front -----

def _samples_rows(header):
    X, y, groups, _ = cfl.datasets.planted_classification(2, 2, 10, 2, flip=0.0,
                                                          random_state=1)
    rows = [header] + [f"{a:.9g},{b:.9g},{t:g},{g:g}" for (a, b), t, g in
                       zip(X, y, groups, strict=True)]
    return "\n".join(rows) + "\n", len(np.unique(groups))


@pytest.mark.parametrize("header, prefix", [("x0,x1,Y,Group", ""), (" x0 , x1 , y , GROUPS ", ""),
                                            ("x0,x1,y,group", "\ufeff")])
def test_samples_headers_are_read_as_samples(tmp_path, capsys, header, prefix):
    """A BOM or capitalised Y/Group made a samples file read as a points file."""
    text, n_users = _samples_rows(header)
    path = tmp_path / "s.csv"
    path.write_text(prefix + text, encoding="utf-8")
    assert cli.main(["bounds", str(path), "--out", str(tmp_path / "o"), "--no-plot"]) == 0
    res = json.loads((tmp_path / "o" / "bounds.json").read_text())
    assert res["n_users"] == n_users and res["loss"] == "logistic"


@pytest.mark.parametrize("text, match", [
    ("x0,x0,cluster\n1,2,0\n3,4,1\n", "repeated column names \\['x0'\\]"),
    ("x0,Y,y,group\n1,1,1,0\n", "repeated column names \\['y'\\]"),
    ("x0,,x2\n1,2,3\n", "empty column name"),
    ("x0,x1\n1,2\n3\n", "line 3 has 1 fields"),
    ("x0,x1\n1,2\n3,abc\n", "line 3, column 'x1': 'abc' is not a number"),
    ("x0,x1\n1,nan\n3,4\n", "line 2, column 'x1': 'nan' is not finite"),
    ("x0,x1,y\n1,2,1\n3,4,0\n", "has a 'y' column but no 'group'"),
    ("", "needs a header row"),
])
def test_malformed_csv_is_refused_with_line_and_column(tmp_path, capsys, text, match):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    assert cli.main(["bounds", str(path), "--out", str(tmp_path / "o"), "--no-plot"]) == 2
    err = capsys.readouterr().err
    assert "error: data:" in err
    assert __import__("re").search(match, err), err


def test_an_unwritable_output_is_refused_before_computing(points_csv, tmp_path, capsys):
    path = points_csv[0]
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    for out in (a_file, a_file / "sub"):
        for cmd in ("bounds", "path"):
            assert cli.main([cmd, str(path), "--out", str(out)]) == 2
            err = capsys.readouterr().err
            assert "error: out:" in err and "Traceback" not in err
    assert cli.main(["demo", "--json", str(tmp_path)]) == 2
    assert "error: json:" in capsys.readouterr().err


def test_without_matplotlib_the_json_is_written_and_plots_skipped(points_csv, tmp_path,
                                                                  capsys, monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` fails
    out = tmp_path / "o"
    assert cli.main(["bounds", str(points_csv[0]), "--out", str(out)]) == 0
    assert (out / "bounds.json").exists() and not (out / "bounds.png").exists()
    assert "matplotlib is not installed" in capsys.readouterr().err
    assert cli.main(["path", str(points_csv[0]), "--out", str(out), "--n-lambdas", "5"]) == 0
    assert (out / "path_report.json").exists() and not (out / "dendrogram.png").exists()
    assert cli.main(["report", "--quick", "--out", str(tmp_path / "r")]) == 2
    assert "pip install 'convexfl[plot]'" in capsys.readouterr().err


def test_help_documents_the_file_formats(capsys):
    for argv in (["--help"], ["bounds", "--help"], ["path", "--help"]):
        with pytest.raises(SystemExit):
            cli.main(argv)
        text = capsys.readouterr().out
        assert "case-insensitively" in text and "'X' (n, p), 'y' (n,), 'groups'" in text


@pytest.mark.parametrize("blocked, extra", [("matplotlib", "plot"), ("statsmodels", "stats")])
def test_a_missing_extra_is_named_never_a_finding(blocked, extra, tmp_path, capsys,
                                                  monkeypatch):
    """Issue 17, item 3: without the extras the theory checks marked 14 of 20 claims
    'inconclusive' (and the report counted them as findings), exiting 0."""
    import sys

    from theory_checks.__main__ import main as theory_main
    monkeypatch.setitem(sys.modules, blocked, None)
    assert theory_main(["--quick", "--out", str(tmp_path / "tc")]) == 2
    assert f"pip install 'convexfl[{extra}]'" in capsys.readouterr().err
    assert not (tmp_path / "tc").exists()  # refused before any check ran
    assert cli.main(["report", "--quick", "--out", str(tmp_path / "r")]) == 2
    assert f"'convexfl[{extra}]'" in capsys.readouterr().err


def test_ctrl_c_prints_one_line_saying_what_is_kept(tmp_path, capsys, monkeypatch):
    """Issue 17, item 5: Ctrl-C printed a 30-line traceback."""
    import convexfl.report as report_module

    def interrupted(**kw):
        raise KeyboardInterrupt
    monkeypatch.setattr(report_module, "run_report", interrupted)
    assert cli.main(["report", "--quick", "--out", str(tmp_path / "r")]) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "run the same command again to resume" in err[0]
