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
    monkeypatch.setattr("benchmarks.suite.warm_up", lambda: None)
    large_knn.main(["--sizes", "100,200", "--regimes", "many clusters",
                    "--contenders", "ssnal sparsified,auto", "--out", str(tmp_path)])
    assert seen == [(100, "many clusters", 0.03, ("ssnal sparsified", "auto")),
                    (200, "many clusters", 0.03, ("ssnal sparsified", "auto"))]
