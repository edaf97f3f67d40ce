"""Figures: each function draws, writes a PNG, and says which extra is missing."""

import sys

import numpy as np
import pytest

import convexfl as cfl
from convexfl import plotting

matplotlib = pytest.importorskip("matplotlib")

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def small():
    A, truth = cfl.datasets.planted_points(3, 3, 2, separation=10.0, random_state=1)
    prob = cfl.SumOfNorms(cfl.losses.Quadratic(A), cfl.graphs.complete(len(A)), 0.0)
    path = cfl.son_path(prob, n_lambdas=10)
    rec = cfl.bounds.recovery_interval(prob, truth, n_grid=8)
    return path, rec, truth


def _is_png(path):
    data = path.read_bytes()
    return data[:8] == PNG_MAGIC and len(data) > 5_000


def test_path_figures_are_written(small, tmp_path):
    path, rec, truth = small
    assert matplotlib.get_backend().lower() == "agg"
    figs = {
        "n": plotting.plot_n_clusters(path, rec, partition_size=3, out=tmp_path / "n.png"),
        "i": plotting.plot_intervals(rec, out=tmp_path / "i.png"),
        "c": plotting.plot_clusterpath(path, truth=truth, out=tmp_path / "c.png"),
        "d": plotting.plot_dendrogram(path, truth=truth, recovery=rec, out=tmp_path / "d.png"),
    }
    for name, fig in figs.items():
        assert _is_png(tmp_path / f"{name}.png") and fig.axes
    assert len(figs["n"].axes) == 2          # the counts and the interval strip
    ax = figs["n"].axes[0]
    assert ax.get_xscale() == "log" and "clusters" in ax.get_ylabel()
    plain = plotting.plot_n_clusters(path)   # no intervals: one axes
    assert len(plain.axes) == 1


def test_fl_and_separator_figures(tmp_path):
    X, y, groups, uc = cfl.datasets.planted_classification(2, 2, 25, 2, flip=0.0,
                                                           random_state=2)
    loss = cfl.losses.SquaredHinge.from_groups(X, y, groups, c=0.01)
    prob = cfl.SumOfNorms(loss, cfl.graphs.complete(loss.n_users), 0.0)
    path = cfl.son_path(prob, n_lambdas=5)
    m = cfl.path.fl_metrics(path, loss, X, y, uc[groups], uc)
    fig = plotting.plot_fl_curves(m, comparators={"global": 0.5}, out=tmp_path / "fl.png")
    assert _is_png(tmp_path / "fl.png") and len(fig.axes) == 2
    fig = plotting.plot_separators(path, X, uc[groups], point_labels=y, ncols=3,
                                   out=tmp_path / "sep.png")
    assert _is_png(tmp_path / "sep.png")
    with pytest.raises(ValueError, match="points"):
        plotting.plot_separators(path, np.zeros((4, 3)), np.zeros(4))


def test_missing_matplotlib_names_the_plot_extra(small, monkeypatch):
    path = small[0]
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError, match=r"convexfl\[plot\]"):
        plotting.plot_n_clusters(path)
