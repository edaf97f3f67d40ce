"""Issue 11, item 3: nothing lost.

Long work writes each finished piece atomically as it goes, resumes after an interruption
without redoing finished pieces or corrupting them, and the same seed gives the same
result. Tested by killing real subprocesses (SIGKILL: no clean-up code runs) of
``python -m theory_checks`` and of :func:`convexfl.report.run_report`, and restarting them.
(The federated runtime's kill-and-resume is in ``tests/test_federated_runtime.py``.)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

import convexfl as cfl
import theory_checks
from convexfl import report
from theory_checks.registry import save_json_atomic

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(
    [str(REPO), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
CHECKS = ["armacki.thm4", "armacki.remark1"]  # two quick checks, the second the slower
SEED = 3

pytestmark = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX signals")


def _wait_for(path: Path, child: subprocess.Popen) -> None:
    """Poll until ``path`` exists (the child is running while we wait)."""
    while not path.exists():
        if child.poll() is not None:
            out, err = child.communicate()
            raise AssertionError(f"the child ended (rc={child.returncode}) before writing "
                                 f"{path.name}:\n{err}")
        time.sleep(0.005)


def _kill(child: subprocess.Popen) -> None:
    child.send_signal(signal.SIGKILL)
    assert child.wait() == -signal.SIGKILL
    child.communicate()


def _without_timings(obj):
    """A JSON tree without wall-clock fields (everything else must be reproducible)."""
    if isinstance(obj, dict):
        return {k: _without_timings(v) for k, v in obj.items() if k != "seconds"}
    if isinstance(obj, list):
        return [_without_timings(v) for v in obj]
    return obj


def _every_json_parses(folder: Path) -> None:
    for path in folder.rglob("*.json"):
        json.loads(path.read_text())  # a torn file would raise here


# --------------------------------------------------------------------------- theory checks


def test_theory_checks_killed_and_restarted_finish_without_redoing_work(tmp_path):
    out = tmp_path / "tc"
    cmd = [sys.executable, "-m", "theory_checks", "--only", *CHECKS, "--seed", str(SEED),
           "--out", str(out), "--no-progress"]
    child = subprocess.Popen(cmd, cwd=tmp_path, env=ENV, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    first = out / "checks" / f"{CHECKS[0]}.json"
    try:
        _wait_for(first, child)
    finally:
        _kill(child)
    finished = first.read_bytes()
    assert not (out / "checks" / f"{CHECKS[1]}.json").exists()  # killed inside check 2
    assert not (out / "results.json").exists()
    _every_json_parses(out)

    done = subprocess.run(cmd, cwd=tmp_path, env=ENV, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert first.read_bytes() == finished  # reused as written, not recomputed
    resumed = json.loads((out / "results.json").read_text())
    assert [c["id"] for c in resumed["checks"]] == CHECKS
    _every_json_parses(out)

    # the same seed, uninterrupted and in this process: the same results
    fresh = theory_checks.run_checks(CHECKS, seed=SEED, out=tmp_path / "fresh",
                                     progress=False)
    theory_checks.write_report(fresh, tmp_path / "fresh")
    again = json.loads((tmp_path / "fresh" / "results.json").read_text())
    assert _without_timings(again) == _without_timings(resumed)


def test_theory_check_files_are_replaced_atomically(tmp_path, monkeypatch):
    path = tmp_path / "checks" / "x.json"
    save_json_atomic(path, {"outcome": "holds"})

    def crash(src, dst):
        raise KeyboardInterrupt  # an interruption at the worst moment

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(KeyboardInterrupt):
        save_json_atomic(path, {"outcome": "fails"})
    monkeypatch.undo()
    assert json.loads(path.read_text()) == {"outcome": "holds"}
    assert sorted(p.name for p in path.parent.iterdir()) == ["x.json"]  # no temp left


# --------------------------------------------------------------------------------- report

REPORT_CHILD = """
import sys, time
from pathlib import Path
sys.path.insert(0, {repo!r})
import numpy as np
from convexfl import report

out = Path(sys.argv[1])
log = Path(sys.argv[2])

@report.section("seeded")
def seeded(out, quick):
    with open(log, "a") as fh:
        fh.write("seeded\\n")
    rng = np.random.default_rng(11)
    return {{"title": "Seeded", "text": "draws", "figures": [],
            "data": {{"draws": rng.standard_normal(5)}}}}

@report.section("waits")
def waits(out, quick):
    with open(log, "a") as fh:
        fh.write("waits\\n")
    (out / "waits.started").touch()
    while not (out / "release").exists():
        time.sleep(0.01)
    return {{"title": "Waits", "text": "released", "figures": [],
            "data": {{"value": float(np.sqrt(2.0))}}}}

report.run_report(out=out, only=["seeded", "waits"], quick=True, progress=False)
"""


def test_report_killed_and_restarted_keeps_finished_sections(tmp_path):
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(REPORT_CHILD.format(repo=str(REPO))))
    out, log = tmp_path / "report", tmp_path / "calls.log"
    out.mkdir()

    def start():
        return subprocess.Popen([sys.executable, str(script), str(out), str(log)],
                                cwd=tmp_path, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)

    child = start()
    try:
        _wait_for(out / "waits.started", child)
    finally:
        _kill(child)
    seeded = out / "sections" / "seeded.json"
    finished = seeded.read_bytes()
    assert json.loads(finished)["status"] == "done"
    assert not (out / "sections" / "waits.json").exists()
    assert not (out / "report.json").exists()
    _every_json_parses(out)

    (out / "release").touch()
    child = start()
    assert child.wait() == 0, child.communicate()[1]
    child.communicate()
    assert seeded.read_bytes() == finished  # not recomputed, not rewritten
    assert log.read_text().split() == ["seeded", "waits", "waits"]
    result = json.loads((out / "report.json").read_text())
    assert [s["name"] for s in result["sections"]] == ["seeded", "waits"]
    assert all(s["status"] == "done" for s in result["sections"])
    assert (out / "report.html").read_text().startswith("<!doctype html>")

    # the same seed from scratch gives the same report
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    (fresh / "release").touch()
    done = subprocess.run([sys.executable, str(script), str(fresh), str(tmp_path / "f.log")],
                          cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    again = json.loads((fresh / "report.json").read_text())
    assert _without_timings(again) == _without_timings(result)


def test_report_reruns_a_failed_section_and_keeps_the_others(tmp_path):
    calls = {"ok": 0, "flaky": 0}

    def ok(out, quick):
        calls["ok"] += 1
        return {"title": "ok", "text": "", "figures": [], "data": {}}

    def flaky(out, quick):
        calls["flaky"] += 1
        if calls["flaky"] == 1:
            raise RuntimeError("transient")
        return {"title": "flaky", "text": "", "figures": [], "data": {}}

    report.section("_rel_ok")(ok)
    report.section("_rel_flaky")(flaky)
    try:
        report.run_report(out=tmp_path, only=["_rel_ok", "_rel_flaky"], progress=False)
        first = json.loads((tmp_path / "report.json").read_text())
        assert [s["status"] for s in first["sections"]] == ["done", "failed"]
        assert "transient" in first["sections"][1]["text"]
        report.run_report(out=tmp_path, only=["_rel_ok", "_rel_flaky"], progress=False)
        second = json.loads((tmp_path / "report.json").read_text())
        assert [s["status"] for s in second["sections"]] == ["done", "done"]
        assert calls == {"ok": 1, "flaky": 2}
    finally:
        report.SECTIONS.pop("_rel_ok")
        report.SECTIONS.pop("_rel_flaky")


def test_results_of_other_source_code_are_run_again(tmp_path):
    """A finished theory check or report section saved by other code (another commit, an
    edited check) is computed again, not reused: resuming must not serve stale results."""
    out = tmp_path / "tc"
    theory_checks.run_checks(["armacki.thm4"], out=out, progress=False)
    path = out / "checks" / "armacki.thm4.json"
    record = json.loads(path.read_text())
    assert record["code"] == cfl._io.source_fingerprint("convexfl", "theory_checks")
    theory_checks.run_checks(["armacki.thm4"], out=out, progress=False)
    assert json.loads(path.read_text())["details"] == record["details"]  # same code: reused
    save_json_atomic(path, {**record, "details": "STALE", "code": "other"})
    (res,) = theory_checks.run_checks(["armacki.thm4"], out=out, progress=False)
    assert res.details == record["details"]
    assert json.loads(path.read_text())["code"] == record["code"]

    calls = []
    report.section("_rel_code")(lambda out, quick: calls.append(1) or {
        "title": "c", "text": "", "figures": [], "data": {}})
    try:
        report.run_report(out=tmp_path / "r", only=["_rel_code"], progress=False)
        report.run_report(out=tmp_path / "r", only=["_rel_code"], progress=False)
        assert len(calls) == 1
        section = tmp_path / "r" / "sections" / "_rel_code.json"
        report._atomic_json(section, {**json.loads(section.read_text()), "code": "other"})
        report.run_report(out=tmp_path / "r", only=["_rel_code"], progress=False)
        assert len(calls) == 2
    finally:
        report.SECTIONS.pop("_rel_code")


def test_report_files_are_replaced_atomically(tmp_path, monkeypatch):
    path = tmp_path / "sections" / "s.json"
    report._atomic_json(path, {"status": "done"})
    monkeypatch.setattr(os, "replace", lambda src, dst: (_ for _ in ()).throw(OSError("full")))
    with pytest.raises(OSError):
        report._atomic_json(path, {"status": "failed"})
    monkeypatch.undo()
    assert json.loads(path.read_text()) == {"status": "done"}
    assert sorted(p.name for p in path.parent.iterdir()) == ["s.json"]


# --- issue 16, item 5: corrupt checkpoints are refused by name, bad records never reused ---

def _small_path_problem():
    A, _ = cfl.datasets.planted_points(2, 3, 2, separation=8.0, random_state=0)
    return cfl.SumOfNorms(cfl.losses.Quadratic(A), cfl.graphs.complete(6), 0.0)


CKPT_GRID = [0.0, 0.2, 0.5, 2.0]


def _corruptions():
    import json as _json

    def truncate(base):
        data = open(base + ".npz", "rb").read()
        open(base + ".npz", "wb").write(data[: len(data) // 2])

    def not_zip(base):
        open(base + ".npz", "wb").write(b"hello")

    def not_json(base):
        open(base + ".json", "w").write("{not json")

    def json_list(base):
        open(base + ".json", "w").write("[1, 2]")

    def json_no_method(base):
        meta = _json.load(open(base + ".json"))
        del meta["method"]
        open(base + ".json", "w").write(_json.dumps(meta))

    def rewrite(base, **change):
        with np.load(base + ".npz") as z:
            arrays = {k: z[k] for k in z.files}
        arrays.update(change)
        for k in [k for k, v in change.items() if v is None]:
            del arrays[k]
        with open(base + ".npz", "wb") as fh:
            np.savez(fh, **arrays)

    return {
        "truncated npz": truncate,
        "npz not a zip": not_zip,
        "json not json": not_json,
        "json not an object": json_list,
        "json without method": json_no_method,
        "npz without X": lambda b: rewrite(b, X=None),
        "X of the wrong shape": lambda b: rewrite(b, X=np.zeros((2, 6))),
        "object array": lambda b: rewrite(b, objective=np.array([1, "a"], dtype=object)),
        "json missing": lambda b: os.remove(b + ".json"),
    }


@pytest.mark.parametrize("name", sorted(_corruptions()))
def test_a_corrupt_checkpoint_is_refused_naming_the_file(tmp_path, name):
    prob, base = _small_path_problem(), str(tmp_path / "ck")
    cfl.son_path(prob, CKPT_GRID[:2], method="ssnal", checkpoint=base, progress=False)
    _corruptions()[name](base)
    with pytest.raises((ValueError, FileNotFoundError), match=f"^checkpoint: {base}"):
        cfl.son_path(prob, CKPT_GRID[:2], method="ssnal", checkpoint=base, progress=False)
    with pytest.raises((ValueError, FileNotFoundError), match=f"^path: {base}"):
        cfl.path.SolutionPath.load(base)


def test_a_non_finite_record_is_recomputed_not_reused(tmp_path):
    prob, base = _small_path_problem(), str(tmp_path / "ck")
    good = cfl.son_path(prob, CKPT_GRID, method="ssnal", progress=False)
    cfl.son_path(prob, CKPT_GRID, method="ssnal", checkpoint=base, progress=False)
    with np.load(base + ".npz") as z:
        arrays = {k: z[k] for k in z.files}
    arrays["objective"][1] = np.nan
    with open(base + ".npz", "wb") as fh:
        np.savez(fh, **arrays)
    with pytest.warns(UserWarning, match="non-finite record at λ = 0.2"):
        again = cfl.son_path(prob, CKPT_GRID, method="ssnal", checkpoint=base,
                             progress=False)
    assert again.meta["resumed_at"] == 1
    assert np.all(np.isfinite(again.objective))
    np.testing.assert_allclose(again.objective, good.objective, rtol=1e-9)
