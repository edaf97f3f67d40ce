"""benchmarks/cert_replay.py: the path's certificates are captured and replayed faithfully."""

import numpy as np
import pytest

import convexfl as cfl
from benchmarks import cert_replay
from benchmarks.versus import moons_instance
from convexfl.solvers import _common


@pytest.fixture(scope="module")
def small():
    A, graph, lams = moons_instance(True, 300)
    prob = cfl.SumOfNorms(cfl.losses.Quadratic(A), graph, 1.0)
    return prob, cert_replay.capture(prob, lams)


def test_capture_keeps_the_full_problem_s_certificates(small):
    prob, calls = small
    assert calls
    assert all(p.n_users == prob.n_users for p, _, _, _ in calls)
    kinds = {cert_replay.kind(options, residual) for _, _, options, residual in calls}
    assert "passes" in kinds
    assert _common.kkt_residual is cfl.certificates.kkt_residual  # restored


def test_replay_gives_the_path_s_certificates(small):
    _, calls = small
    totals, seconds, certs = cert_replay.summary(calls, 2)
    assert totals.shape == (2,) and seconds.shape == (len(calls),)
    np.testing.assert_allclose([c.kkt_residual for c in certs],
                               [residual for _, _, _, residual in calls], rtol=1e-9, atol=0)


def test_a_changed_verdict_is_an_error(small):
    _, calls = small
    prob, X, options, residual = next(c for c in calls if c[2].get("target") is not None)
    flipped = [(prob, X, options, 0.0 if residual > options["target"] else 1.0)]
    with pytest.raises(RuntimeError, match="verdict"):
        cert_replay.summary(flipped, 1)


def test_recording_is_undone_on_error():
    with pytest.raises(ValueError), cert_replay.recording(10):
        raise ValueError
    assert _common.kkt_residual is cfl.certificates.kkt_residual


@pytest.mark.parametrize("argv, name", [(["--n", "5"], "--n"), (["--rounds", "0"], "--rounds"),
                                        (["--top", "-1"], "--top")])
def test_bad_arguments_are_refused_by_name(argv, name, capsys):
    with pytest.raises(SystemExit):
        cert_replay.main(argv)
    assert name in capsys.readouterr().err


def test_the_listing_gives_the_path_s_lambda(capsys):
    cert_replay.main(["--n", "60", "--rounds", "1", "--top", "3"])
    out = capsys.readouterr().out
    _, _, lams = moons_instance(False, 60)
    listed = [float(line.split("λ = ")[1].split()[0]) for line in out.splitlines()[1:]]
    assert len(listed) == 3
    for lam in listed:  # on the grid (printed to 4 digits), not in the solvers' units
        assert np.min(np.abs(lams - lam)) <= 5e-4 * max(lam, 1.0)
