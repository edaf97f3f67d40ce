"""The notebooks (``notebooks/*.py``, jupytext percent scripts) run in SMALL mode and write
their figures and numbers; the report sections that share their code run in quick mode.

Each notebook runs as ``python notebooks/<name>.py`` with ``CONVEXFL_SMALL=1`` and
``CONVEXFL_OUT=<tmp>``; the test checks that every expected PNG exists and is a real image
(> 5 kB) and that the JSON holds the expected keys with finite numbers.
"""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("matplotlib")

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

# notebook -> (PNG files, {JSON path (dotted): expected kind}); kinds: "number" (finite),
# "numbers" (non-empty list of finite numbers), "rows" (a non-empty paper-vs-ours table)
EXPECTED = {
    "armacki_sec5": (
        ["armacki_sec5_accuracy_distance.png", "armacki_sec5_recovery.png"],
        {"armacki_sec5.peak_accuracy_son": "number",
         "armacki_sec5.peak_accuracy_squared": "number",
         "armacki_sec5.global_accuracy": "number", "armacki_sec5.local_accuracy": "number",
         "armacki_sec5.oracle_accuracy": "number", "armacki_sec5.lam_hat": "number",
         "armacki_sec5.son_accuracy": "numbers", "armacki_sec5.sq_accuracy": "numbers",
         "armacki_sec5.paper_vs_ours": "rows"}),
    "armacki_appc": (
        ["armacki_appc_son_eq3.png", "armacki_appc_son_eq14.png",
         "armacki_appc_squared_penalty.png", "armacki_appc_path.png", "armacki_pdmm_gap.png"],
        {"armacki_appc.lam_hat": "number", "armacki_appc.n_clusters_eq3": "numbers",
         "armacki_appc.n_clusters_eq14": "numbers",
         "armacki_appc.recovery_interval.lo": "number",
         "armacki_appc.recovery_interval.hi": "number",
         "armacki_appc.paper_vs_ours": "rows", "armacki_pdmm.runs.0.gap_last": "number",
         "armacki_pdmm.runs.1.gap_last": "number", "armacki_pdmm.paper_vs_ours": "rows"}),
    "convex_clustering": (
        ["convex_clustering_ari.png"] + [f"convex_clustering_{d}_{k}.png"
                                         for d in ("iris", "digits", "moons")
                                         for k in ("clusterpath", "dendrogram")],
        {**{f"convex_clustering.{d}.{k}": "number" for d in ("iris", "digits", "moons")
            for k in ("best_ari", "lam_hat", "max_kkt_residual")},
         "convex_clustering.moons.ari": "numbers",
         "convex_clustering.paper_vs_ours": "rows"}),
    "ppfl": (
        ["ppfl_memberships.png", "ppfl_glmm.png"],
        {"ppfl_memberships.final_purity": "number", "ppfl_memberships.final_mean_max": "number",
         "ppfl_memberships.objective_last": "number", "ppfl_glmm.max_abs_diff": "number",
         "ppfl_memberships.paper_vs_ours": "rows", "ppfl_glmm.paper_vs_ours": "rows"}),
    "perfed_ckt": (
        ["ckt_toy.png", "ckt_theorem_4_2.png"],
        {"ckt_toy.median_distance.codistill_clustered": "numbers",
         "ckt_toy.median_distance.fedavg": "numbers",
         "ckt_theorem_4_2.max_rel_gap_printed_included": "number",
         "ckt_theorem_4_2.max_rel_gap_corrected_included": "number",
         "ckt_toy.paper_vs_ours": "rows", "ckt_theorem_4_2.paper_vs_ours": "rows"}),
    "cgpfl": (
        ["cgpfl_accuracy_vs_k.png"],
        {"cgpfl_k.accuracy": "numbers", "cgpfl_k.heur_k": "number",
         "cgpfl_k.heur_accuracy": "number", "cgpfl_k.best_accuracy": "number",
         "cgpfl_k.paper_vs_ours": "rows"}),
    "torch_digits": (
        ["torch_digits.png"],
        {"torch_digits.rows.0.mean_test_accuracy": "number",
         "torch_digits.rows.0.numbers_sent": "number", "torch_digits.paper_vs_ours": "rows"}),
}
NEEDS = {"ppfl": "statsmodels", "torch_digits": "torch"}


def _get(obj, dotted):
    for part in dotted.split("."):
        obj = obj[int(part)] if isinstance(obj, list) else obj[part]
    return obj


def _finite(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _check_png(path):
    assert path.exists(), f"missing figure {path.name}"
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC, f"{path.name} is not a PNG"
    assert len(data) > 5_000, f"{path.name} is suspiciously small ({len(data)} bytes)"


def _check_json(data, keys, where):
    for dotted, kind in keys.items():
        try:
            value = _get(data, dotted)
        except (KeyError, IndexError, TypeError):
            pytest.fail(f"{where}: missing key {dotted}")
        if kind == "number":
            assert _finite(value), f"{where}: {dotted} = {value!r} is not a finite number"
        elif kind == "numbers":
            assert isinstance(value, list) and value, f"{where}: {dotted} is not a list"
            assert all(_finite(v) for v in value), f"{where}: {dotted} has non-finite entries"
        else:
            assert isinstance(value, list) and value, f"{where}: {dotted} has no rows"
            for row in value:
                assert {"quantity", "paper", "ours", "convention"} <= set(row), row


def test_every_notebook_is_listed_and_a_percent_script():
    found = sorted(p.stem for p in NOTEBOOKS.glob("*.py") if not p.stem.startswith("_"))
    assert found == sorted(EXPECTED)
    for name in found:
        text = (NOTEBOOKS / f"{name}.py").read_text()
        assert "format_name: percent" in text and "# %%" in text
        assert "from _common import OUT, SMALL, save, show" in text
    common = (NOTEBOOKS / "_common.py").read_text()
    assert 'os.environ.get("CONVEXFL_SMALL") == "1"' in common
    assert "CONVEXFL_OUT" in common


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_notebook_runs_in_small_mode(name, tmp_path):
    if name in NEEDS:
        pytest.importorskip(NEEDS[name])
    env = dict(os.environ, CONVEXFL_SMALL="1", CONVEXFL_OUT=str(tmp_path), MPLBACKEND="Agg",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT),
                                                        os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, str(NOTEBOOKS / f"{name}.py")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    pngs, keys = EXPECTED[name]
    for png in pngs:
        _check_png(tmp_path / png)
    data = json.loads((tmp_path / f"{name}.json").read_text())
    assert data["small"] is True
    _check_json(data, keys, f"{name}.json")


def test_report_sections_quick(tmp_path):
    from convexfl import report

    names = [n for n in report.NOTEBOOK_SECTIONS
             if not (n in NEEDS and _missing(NEEDS[n]))]
    order = list(report.SECTIONS)
    where = [order.index(n) for n in report.NOTEBOOK_SECTIONS]
    assert where == sorted(where) and where[0] > order.index("theory_checks")
    html = report.run_report(quick=True, out=tmp_path, only=names, progress=False)
    text = html.read_text()
    doc = json.loads((tmp_path / "report.json").read_text())
    assert doc["quick"] is True
    by_name = {s["name"]: s for s in doc["sections"]}
    assert list(by_name) == names
    for name, s in by_name.items():
        assert s["status"] == "done", s["text"][-2000:]
        assert s["figures"], name
        for rel in s["figures"]:
            assert not Path(rel).is_absolute()
            _check_png(tmp_path / rel)
            assert rel in text
        assert "| quantity | paper | ours | convention | note |" in s["text"]
        for study, summary in s["data"].items():
            assert summary["paper_vs_ours"], f"{name}/{study}"
    # the numbers next to the paper's, e.g. Sec. V's peak accuracies
    sec5 = by_name["armacki_sec5"]["data"]["armacki_sec5"]
    assert _finite(sec5["peak_accuracy_son"]) and _finite(sec5["peak_accuracy_squared"])
    assert "0.868" in by_name["armacki_sec5"]["text"]
    # a second run resumes: nothing is recomputed
    before = {n: (tmp_path / "sections" / f"{n}.json").stat().st_mtime_ns for n in names}
    report.run_report(quick=True, out=tmp_path, only=names, progress=False)
    after = {n: (tmp_path / "sections" / f"{n}.json").stat().st_mtime_ns for n in names}
    assert before == after


def _missing(module):
    import importlib.util

    return importlib.util.find_spec(module) is None
