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


# --- issue 16, items 3 and 4, continued: NPZ arrays, headerless and non-UTF-8 CSV, the
# --- partition file, output files that are folders, the report's extras -------------------

_A4 = np.array([[0.0, 0.0], [0.1, 0.0], [5.0, 5.0], [5.1, 5.0]])
_X20 = np.random.default_rng(0).normal(size=(20, 2))
_SAMPLES = {"X": _X20, "y": np.where(_X20[:, 0] > 0, 1.0, -1.0), "groups": np.repeat(range(4), 5)}


@pytest.mark.parametrize("arrays, match", [
    ({"A": _A4, **_SAMPLES}, "both points .* and samples"),
    ({"A": _A4, "points": _A4}, "both 'A' and 'points'"),
    ({"A": _A4, "cluster": np.array([0, 0, 1, 1])}, "array\\(s\\) \\['cluster'\\] .*not used"),
    ({"A": _A4, "foo": np.ones(3)}, "\\['foo'\\]"),
    ({"X": _X20, "y": _SAMPLES["y"]}, "missing \\['groups'\\]"),
    ({"A": _A4, "partition": np.array([0, 0, 1, 1]), "truth": np.array([0, 0, 1, 1])},
     "more than one partition"),
    ({"A": _A4, "partition": np.array([[0, 0], [1, 1]])}, "partition: .*shape \\(2, 2\\)"),
])
def test_npz_with_unused_ambiguous_or_misshapen_arrays_is_refused(tmp_path, capsys, arrays,
                                                                   match):
    """Unused arrays (a partition saved as 'cluster') were ignored, 'A' next to 'X, y,
    groups' silently meant points, and a 2-D partition was flattened."""
    path = tmp_path / "d.npz"
    np.savez(path, **arrays)
    assert cli.main(["bounds", str(path), "--out", str(tmp_path / "o"), "--no-plot"]) == 2
    err = capsys.readouterr().err
    assert __import__("re").search(match, err), err


@pytest.mark.parametrize("content, match", [
    ("0.5,1\n2,3\n4,5\n", "first row .* numbers"),
    ("x0,y,group,groups\n1,1,0,0\n2,-1,1,1\n", "both a 'group' and a 'groups' column"),
    ("cluster\n0\n1\n", "no coordinate columns"),
    ("x0;x1\n1;2\n3;4\n", "comma-separated"),
    ("x\xe9,x1\n1,2\n3,4\n".encode("latin-1"), "not UTF-8"),
])
def test_more_malformed_csv_is_refused_naming_the_file(tmp_path, capsys, content, match):
    """A headerless file lost its first row as the header; a 'groups' column next to
    'group' became a feature; the others gave messages that did not name the file."""
    path = tmp_path / "bad.csv"
    (path.write_bytes if isinstance(content, bytes) else path.write_text)(content)
    assert cli.main(["bounds", str(path), "--out", str(tmp_path / "o"), "--no-plot"]) == 2
    err = capsys.readouterr().err
    assert "error: data:" in err and str(path) in err, err
    assert __import__("re").search(match, err), err


def test_a_data_path_that_is_a_folder_is_refused(tmp_path, capsys):
    folder = tmp_path / "d.csv"
    folder.mkdir()
    assert cli.main(["bounds", str(folder), "--out", str(tmp_path / "o")]) == 2
    assert "error: data:" in capsys.readouterr().err


def test_a_partition_file_with_two_columns_is_refused(tmp_path, capsys):
    """Four users, two lines of two labels: flattened into four labels and accepted."""
    data, part = tmp_path / "p.npz", tmp_path / "part.csv"
    np.savez(data, A=_A4)
    part.write_text("0,0\n1,1\n")
    assert cli.main(["bounds", str(data), "--partition", str(part), "--out",
                     str(tmp_path / "o"), "--no-plot"]) == 2
    assert "one label per line" in capsys.readouterr().err


def test_an_output_file_that_is_a_folder_is_refused_before_computing(points_csv, tmp_path,
                                                                     capsys, monkeypatch):
    """bounds.png or path.npz being a folder failed after the whole computation."""
    def computed(*a, **k):
        raise AssertionError("computed before the output was checked")
    monkeypatch.setattr(cfl.bounds, "fusion_threshold", computed)
    monkeypatch.setattr(cfl, "son_path", computed)
    for cmd, name in (("bounds", "bounds.png"), ("bounds", "bounds.json"),
                      ("path", "path.npz"), ("path", "path_report.json")):
        out = tmp_path / f"{cmd}-{name}"
        (out / name).mkdir(parents=True)
        assert cli.main([cmd, str(points_csv[0]), "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert "error: out:" in err and name in err, err
    a_file = tmp_path / "file.txt"
    a_file.write_text("x")
    assert cli.main(["report", "--quick", "--out", str(a_file / "sub")]) == 2
    assert "error: out:" in capsys.readouterr().err


def test_bounds_writes_its_json_before_plotting(points_csv, tmp_path, capsys, monkeypatch):
    """A failing plot lost the computed numbers (the JSON was written after the PNG)."""
    from convexfl import plotting

    def broken(*a, **k):
        raise OSError("disk full")
    monkeypatch.setattr(plotting, "plot_intervals", broken)
    out = tmp_path / "o"
    assert cli.main(["bounds", str(points_csv[0]), "--out", str(out)]) == 2
    assert "disk full" in capsys.readouterr().err
    assert json.loads((out / "bounds.json").read_text())["recovery_interval"]["kind"] == "exact"


def test_report_refuses_up_front_when_a_selected_section_needs_torch(tmp_path, capsys,
                                                                     monkeypatch):
    """Without torch the report ran every section, then failed its torch section."""
    import sys

    import convexfl.report as report_module

    class Ran(Exception):
        pass

    def ran(**kw):
        raise Ran
    monkeypatch.setattr(report_module, "run_report", ran)
    monkeypatch.setitem(sys.modules, "torch", None)
    assert cli.main(["report", "--quick", "--out", str(tmp_path / "r")]) == 2
    assert "pip install 'convexfl[torch]'" in capsys.readouterr().err
    with pytest.raises(Ran):  # a report without the torch section needs no torch
        cli.main(["report", "--quick", "--only", "armacki_sec5", "--out", str(tmp_path / "r")])
