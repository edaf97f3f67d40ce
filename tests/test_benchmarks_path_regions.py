"""benchmarks/path_regions.py: the regions split a path's λ grid and its solve times."""

import numpy as np
import pytest

import convexfl as cfl
from benchmarks import path_regions
from benchmarks.versus import moons_instance


def test_regions_partition_the_grid_and_the_solve_time():
    A, graph, lams = moons_instance(True, 300)
    prob = cfl.SumOfNorms(cfl.losses.Quadratic(A), graph, 1.0)
    _, path = path_regions.run_path(prob, lams)
    parts = path_regions.regions(path, lams)
    assert list(parts) == [name for name, _, _ in path_regions.REGIONS]
    assert sum(count for count, _ in parts.values()) == len(lams)
    assert np.isclose(sum(sec for _, sec in parts.values()), path.time_s.sum())
    assert parts["λ = 0"][0] == 1 and parts["1"][0] >= 1  # the grid runs past λ̂


@pytest.mark.parametrize("argv, name", [(["--n", "5"], "--n"), (["--runs", "0"], "--runs")])
def test_bad_arguments_are_refused_by_name(argv, name, capsys):
    with pytest.raises(SystemExit):
        path_regions.main(argv)
    assert name in capsys.readouterr().err
