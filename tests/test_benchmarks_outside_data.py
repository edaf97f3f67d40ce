"""``benchmarks.outside_data``: one bundled data set through the front door, reported."""

import pytest

from benchmarks import outside_data


def test_a_row_reports_the_certified_fit_and_its_path(tmp_path, capsys):
    rows = outside_data.main(["--sets", "sm:stackloss", "--out", str(tmp_path)])
    (r,) = rows
    assert (r["set"], r["N"], r["d"]) == ("sm:stackloss", 21, 4)
    assert r["certified"] and r["kkt"] <= 1e-6 and r["path_certified"] == r["path_len"] == 30
    assert r["lam_hat"] == "exact" and 1 <= r["n_clusters"] < 21
    assert (tmp_path / "outside_data.json").exists()
    assert "sm:stackloss" in capsys.readouterr().out


@pytest.mark.parametrize("sets", ["sk:nonesuch", "sm:nonesuch", "iris", ""])
def test_an_unknown_set_is_a_usage_error_naming_the_option(sets, tmp_path, capsys):
    with pytest.raises(SystemExit):
        outside_data.main(["--sets", sets, "--out", str(tmp_path)])
    assert "--sets" in capsys.readouterr().err
