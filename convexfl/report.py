"""The main job: one command, one report (``convexfl report [--quick] [--out DIR]``).

A report is a list of **sections**, each a function ``section(out: Path, quick: bool) ->
dict`` registered with :func:`section` and returning ``{"title", "text", "figures": [PNG
paths relative to out], "data": {...}}``. Sections run in order with a progress bar; each
finished section is written to ``out/sections/<name>.json`` at once (atomically), so an
interrupted report resumes where it stopped and never loses finished work. At the end
``out/report.html`` and ``out/report.json`` collect everything.

The sections are the theory checks (:mod:`theory_checks`) and the key figures of the
notebooks, computed by library functions that the notebooks call too (one implementation).
"""

from __future__ import annotations

import html
import json
import os
import tempfile
import time
import traceback
from pathlib import Path

SECTIONS: dict = {}


def section(name: str):
    """Register ``fn(out, quick) -> dict`` as report section ``name`` (run in order)."""
    def wrap(fn):
        SECTIONS[name] = fn
        return fn
    return wrap


def _atomic_json(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w") as fh:
        json.dump(data, fh, indent=2, default=_jsonable)
    os.replace(tmp, path)


def _jsonable(x):
    import numpy as np

    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, np.generic):
        return x.item()
    return str(x)


@section("theory_checks")
def _theory_checks(out: Path, quick: bool) -> dict:
    import theory_checks

    tc_out = out / "theory-checks"
    results = theory_checks.run_checks(quick=quick, out=tc_out, progress=False)
    theory_checks.write_report(results, tc_out)
    rows = [{"id": r.id, "outcome": r.outcome, "control": r.control.outcome,
             "control_expected": r.control.expected} for r in results]
    figures = [f"theory-checks/{r.figure}" for r in results if r.figure]
    findings = [f"{r.id}: {r.details.splitlines()[0]}" for r in results
                if r.outcome != "holds"]
    text = (f"{sum(r.outcome == 'holds' for r in results)} of {len(results)} claims hold; "
            f"findings: {len(findings)}. Full report: theory-checks/report.html.")
    return {"title": "Theory checks", "text": text, "figures": figures,
            "data": {"checks": rows, "findings": findings}}


def run_report(*, quick: bool = False, out="convexfl-report", only=None, fresh: bool = False,
               progress: bool = True) -> Path:
    """Run the report's sections (resuming finished ones unless ``fresh``) and write
    ``report.html`` and ``report.json`` in ``out``; return the HTML path."""
    from tqdm.auto import tqdm

    out = Path(out)
    names = list(SECTIONS) if not only else list(only)
    unknown = [n for n in names if n not in SECTIONS]
    if unknown:
        raise ValueError(f"only: unknown section(s) {unknown}; known: {list(SECTIONS)}")
    done = {}
    bar = tqdm(names, desc="convexfl report", disable=not progress, unit="section")
    for name in bar:
        bar.set_postfix_str(name)
        path = out / "sections" / f"{name}.json"
        if path.exists() and not fresh:
            prev = json.loads(path.read_text())
            if prev.get("quick") == quick and prev.get("status") == "done":
                done[name] = prev
                continue
        start = time.perf_counter()
        try:
            result = SECTIONS[name](out, quick)
            result["status"] = "done"
        except Exception:  # report it and go on: the other sections still run
            result = {"title": name, "text": "This section failed:\n" + traceback.format_exc(),
                      "figures": [], "data": {}, "status": "failed"}
        result.update(quick=quick, seconds=time.perf_counter() - start, name=name)
        _atomic_json(path, result)
        done[name] = result
    _atomic_json(out / "report.json", {"quick": quick, "sections": list(done.values())})
    (out / "report.html").write_text(_html(list(done.values())))
    return out / "report.html"


def _html(sections) -> str:
    parts = []
    for s in sections:
        figs = "".join(f"<figure><img src='{html.escape(f)}' style='max-width:860px'>"
                       f"<figcaption>{html.escape(f)}</figcaption></figure>"
                       for f in s.get("figures", []))
        status = "" if s.get("status") == "done" else " <span style='color:#cf222e'>(failed)</span>"
        parts.append(f"<h2>{html.escape(s['title'])}{status}</h2>"
                     f"<pre style='white-space:pre-wrap'>{html.escape(s.get('text', ''))}</pre>"
                     f"{figs}<p><small>{s.get('seconds', 0):.1f} s</small></p>")
    return ("<!doctype html><meta charset='utf-8'><title>convexfl report</title>"
            "<body style='font-family:sans-serif;max-width:1000px;margin:auto'>"
            "<h1>convexfl report</h1>" + "".join(parts) + "</body>")
