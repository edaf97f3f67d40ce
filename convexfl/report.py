"""The main job: one command, one report (``convexfl report [--quick] [--out DIR]``).

A report is a list of **sections**, each a function ``section(out: Path, quick: bool) ->
dict`` registered with :func:`section` and returning ``{"title", "text", "figures": [PNG
paths relative to out], "data": {...}}``. Sections run in order with a progress bar; each
finished section is written to ``out/sections/<name>.json`` at once (atomically), so an
interrupted report resumes where it stopped and never loses finished work (a section file
that cannot be read back counts as unfinished and is run again). At the end
``out/report.html`` and ``out/report.json`` collect everything.

The sections are the theory checks (:mod:`theory_checks`) and the key figures of the
notebooks, computed by library functions that the notebooks call too (one implementation).
"""

from __future__ import annotations

import contextvars
import html
import json
import time
import traceback
import warnings
from pathlib import Path

from ._io import atomic_write_text, source_fingerprint

SECTIONS: dict = {}
SECTION_EXTRAS: dict = {}  # section name -> the optional extras it needs
_PROGRESS = contextvars.ContextVar("convexfl_report_progress", default=False)


def section(name: str, extras=("plot",)):
    """Register ``fn(out, quick) -> dict`` as report section ``name`` (run in order), which
    needs the optional ``extras`` (:data:`convexfl._extras.EXTRAS`)."""
    def wrap(fn):
        SECTIONS[name] = fn
        SECTION_EXTRAS[name] = tuple(extras)
        return fn
    return wrap


def _selected(only) -> list:
    """The names of the sections to run: ``only`` (a name or a list), default all."""
    if isinstance(only, str):
        only = [only]
    names = list(SECTIONS) if not only else list(only)
    unknown = [n for n in names if n not in SECTIONS]
    if unknown:
        raise ValueError(f"only: unknown section(s) {unknown}; known: {list(SECTIONS)}")
    return names


def needed_extras(only=None) -> list:
    """The optional extras the sections ``only`` (default all) need, sorted; ``convexfl
    report`` requires them before it computes anything."""
    return sorted({e for name in _selected(only) for e in SECTION_EXTRAS[name]})


def _atomic_json(path: Path, data) -> None:
    atomic_write_text(path, json.dumps(data, indent=2, default=_jsonable))


def _code_modules() -> tuple[str, ...]:
    """The packages whose source a section's result depends on: convexfl, and the theory
    checks where they are importable (the ``theory_checks`` section runs them)."""
    import importlib.util

    return ("convexfl",) + (("theory_checks",) if importlib.util.find_spec("theory_checks")
                            else ())


def _finished(path: Path, quick: bool, code: str):
    """The saved result of a finished section, or ``None`` (missing, torn, unfinished, or
    computed by other source code: ``code`` is :func:`convexfl._io.source_fingerprint`)."""
    try:
        prev = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if (isinstance(prev, dict) and prev.get("quick") == quick and prev.get("code") == code
            and prev.get("status") == "done"):
        return prev
    return None


def _jsonable(x):
    import numpy as np

    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, np.generic):
        return x.item()
    return str(x)


@section("theory_checks", extras=("plot", "stats"))
def _theory_checks(out: Path, quick: bool) -> dict:
    import theory_checks

    tc_out = out / "theory-checks"
    results = theory_checks.run_checks(quick=quick, out=tc_out,
                                       progress="nested" if _PROGRESS.get() else False)
    theory_checks.write_report(results, tc_out)
    rows = [{"id": r.id, "outcome": r.outcome, "control": r.control.outcome,
             "control_expected": r.control.expected} for r in results]
    figures = [f"theory-checks/{r.figure}" for r in results if r.figure]
    findings = [f"{r.id}: {r.details.splitlines()[0]}" for r in results
                if r.outcome != "holds"]
    text = (f"{sum(r.outcome == 'holds' for r in results)} of {len(results)} claims hold; "
            f"{len(findings)} finding(s), named below. Each claim with its instances, margins "
            "and a control that must fail: the theory-check report.")
    return {"title": "Theory checks", "text": text, "figures": figures,
            "links": [["the theory-check report (every claim, margins, controls)",
                       "theory-checks/report.html"]],
            "data": {"checks": rows, "findings": findings}}


def run_report(*, quick: bool = False, out="convexfl-report", only=None, fresh: bool = False,
               progress: bool = True) -> Path:
    """Run the report's sections (resuming finished ones unless ``fresh``) and write
    ``report.html`` and ``report.json`` in ``out``; return the HTML path."""
    from tqdm.auto import tqdm

    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"out: {str(out)!r} exists and is not a folder")
    names = _selected(only)
    code = source_fingerprint(*_code_modules())
    done = {}
    token = _PROGRESS.set(bool(progress))  # long sections show their own progress inside
    try:
        bar = tqdm(names, desc="convexfl report", disable=not progress, unit="section")
        for name in bar:
            bar.set_postfix_str(name)
            path = out / "sections" / f"{name}.json"
            prev = None if fresh else _finished(path, quick, code)
            if prev is not None:
                done[name] = prev
                continue
            start = time.perf_counter()
            try:
                with warnings.catch_warnings(record=True) as caught:  # into the report, not
                    warnings.simplefilter("always")                   # through the progress bar
                    result = SECTIONS[name](out, quick)
                result["notes"] = sorted({f"{w.category.__name__}: {w.message}" for w in caught})
                result["status"] = "done"
            except Exception:  # report it and go on: the other sections still run
                result = {"title": name, "text": "This section failed:\n" + traceback.format_exc(),
                          "figures": [], "data": {}, "status": "failed"}
            result.update(quick=quick, seconds=time.perf_counter() - start, name=name, code=code)
            _atomic_json(path, result)
            done[name] = result
    finally:
        _PROGRESS.reset(token)
    _atomic_json(out / "report.json", {"quick": quick, "sections": list(done.values())})
    atomic_write_text(out / "report.html", _html(list(done.values())))
    return out / "report.html"


_CSS = """
body{font-family:system-ui,sans-serif;max-width:1040px;margin:auto;padding:0 1em;color:#1f2328}
h1{margin-bottom:.2em} h2{border-bottom:1px solid #d0d7de;padding-bottom:.2em;margin-top:2em}
table{border-collapse:collapse;margin:.6em 0;font-size:.92em}
th,td{border:1px solid #d0d7de;padding:.3em .6em;text-align:left;vertical-align:top}
th{background:#f6f8fa} tr:nth-child(even) td{background:#fbfcfd}
.summary{background:#f6f8fa;border:1px solid #d0d7de;border-radius:6px;padding:.6em 1.2em}
.failed{color:#cf222e} .finding{color:#9a6700} .holds{color:#1a7f37}
figure{display:inline-block;margin:.5em;vertical-align:top}
figure img{max-width:480px;border:1px solid #d0d7de}
figcaption{font-size:.8em;color:#57606a} pre{white-space:pre-wrap;background:#f6f8fa;padding:.5em}
"""


def _html(sections) -> str:
    """The report page: a summary on top (sections, claims that hold, every finding named,
    links), then each section with its tables rendered and its figures linked."""
    e = html.escape
    body = ["<h1>convexfl report</h1>", _summary_html(sections)]
    for s in sections:
        failed = s.get("status") != "done"
        body.append(f"<h2 id='{e(s.get('name', ''))}'>{e(s['title'])}"
                    + (" <span class='failed'>(failed)</span>" if failed else "") + "</h2>")
        body.append(f"<pre>{e(s.get('text', ''))}</pre>" if failed
                    else _text_html(s.get("text", "")))
        findings = s.get("data", {}).get("findings") or []
        if findings:
            body.append("<p><b>Findings</b> (claims that do not hold, with their numbers):</p>"
                        "<ul>" + "".join(f"<li class='finding'>{e(f)}</li>" for f in findings)
                        + "</ul>")
        notes = s.get("notes") or []
        if notes:
            body.append("<p><b>Notes</b> (warnings raised while computing this section; a "
                        "non-monotone cluster count means a cluster split as λ grew, possible "
                        "with general weights or a loose fusion tolerance):</p><ul>"
                        + "".join(f"<li>{e(n)}</li>" for n in notes) + "</ul>")
        body.append("".join(f"<p><a href='{e(href)}'>{e(label)}</a></p>"
                            for label, href in s.get("links", [])))
        body.append("".join(f"<figure><a href='{e(f)}'><img src='{e(f)}' alt='{e(f)}'></a>"
                            f"<figcaption>{e(f)}</figcaption></figure>"
                            for f in s.get("figures", [])))
        body.append(f"<p><small>{s.get('seconds', 0):.1f} s</small></p>")
    return ("<!doctype html><html lang='en'><meta charset='utf-8'>"
            f"<title>convexfl report</title><style>{_CSS}</style><body>"
            + "".join(body) + "</body></html>")


def _summary_html(sections) -> str:
    e = html.escape
    done = [s for s in sections if s.get("status") == "done"]
    failed = [s for s in sections if s.get("status") != "done"]
    mode = "quick" if any(s.get("quick") for s in sections) else "full"
    items = [f"{len(done)} of {len(sections)} sections finished ({mode} mode)"
             + (": failed " + ", ".join(f"<a class='failed' href='#{e(s.get('name', ''))}'>"
                                        f"{e(s['title'])}</a>" for s in failed)
                if failed else "")]
    for s in done:
        checks = s.get("data", {}).get("checks")
        if checks:
            holds = sum(c["outcome"] == "holds" for c in checks)
            findings = s["data"].get("findings") or []
            items.append(f"<span class='holds'>{holds} of {len(checks)} claims hold</span>; "
                         f"{len(findings)} finding(s)"
                         + ("".join(f"<br><span class='finding'>• {e(f)}</span>"
                                    for f in findings))
                         + " — <a href='theory-checks/report.html'>the theory-check report"
                           "</a>")
    toc = " · ".join(f"<a href='#{e(s.get('name', ''))}'>{e(s['title'].split(':')[0])}</a>"
                     for s in sections)
    return ("<div class='summary'><ul>" + "".join(f"<li>{i}</li>" for i in items)
            + f"</ul><p>Sections: {toc}</p></div>")


def _text_html(text: str) -> str:
    """Paragraphs, with Markdown pipe tables (``| a | b |`` rows) as HTML tables."""
    out = []
    for block in text.split("\n\n"):
        lines = [ln for ln in block.splitlines() if ln.strip()]
        if lines and all(ln.lstrip().startswith("|") for ln in lines):
            out.append(_table_html(lines))
        elif lines:
            out.append("<p>" + "<br>".join(html.escape(ln) for ln in lines) + "</p>")
    return "".join(out)


def _table_html(lines) -> str:
    rows = [[c.strip() for c in ln.strip().strip("|").split("|")] for ln in lines]
    rows = [r for r in rows if not all(set(c) <= set("-: ") for c in r)]  # the |---| rule
    head, rest = rows[0], rows[1:]
    e = html.escape
    return ("<table><thead><tr>" + "".join(f"<th>{e(c)}</th>" for c in head)
            + "</tr></thead><tbody>" + "".join("<tr>" + "".join(f"<td>{e(c)}</td>" for c in r)
                                              + "</tr>" for r in rest) + "</tbody></table>")


# ---------------------------------------------------------------------------------------------
# The notebooks' key figures (``notebooks/``, GitHub issue 10): each section runs the same
# experiment functions and draws the same figures as its notebook (``quick`` = the notebooks'
# SMALL sizes), and shows the paper's numbers next to ours.
# ---------------------------------------------------------------------------------------------

_CONVENTIONS = ("λ conventions: SON Σ f_i + λ Σ_{i<j} ‖x_i − x_j‖ (ours, every λ here unless "
                "said); the paper's eq. (3) (1/N) Σ f_i + λ_p Σ_{i≠j} ‖·‖ gives λ_SON = 2Nλ_p; "
                "eq. (14) Σ f_i + λ Σ_{i≠j} ‖z_ij‖ gives λ_SON = 2λ.")


def _study_section(title: str, names, out: Path, quick: bool, intro: str = "") -> dict:
    from . import experiments, plotting

    figures, data, text = [], {}, [intro] if intro else []
    for name in names:
        res = experiments.run_study(name, small=quick)
        for p in plotting.study_figures(name, res, out / "figures" / name):
            figures.append(p.relative_to(out).as_posix())
        data[name] = res["summary"]
        rows = res["summary"].get("paper_vs_ours")
        if rows:
            text.append(experiments.format_rows(rows))
    return {"title": title, "text": "\n\n".join(text), "figures": figures, "data": data}


@section("armacki_sec5")
def _armacki_sec5(out: Path, quick: bool) -> dict:
    return _study_section(
        "Armacki et al. Sec. V: accuracy and model distance vs λ (Figs. 2-3), exact recovery",
        ["armacki_sec5"], out, quick,
        intro="notebooks/armacki_sec5.py. Ellipse data (uniform points, 3 clusters; the "
              "paper's ellipse parameters are not printed, ours are in "
              "convexfl.datasets.armacki_ellipses), squared hinge c = 1e-3. The paper's exact "
              "3-cluster recovery is not reproduced on these ellipses when the recovery rows "
              "below say so (no exact interval); convexfl.datasets.ellipse_search searches "
              "the ellipse geometry for one. " + _CONVENTIONS)


@section("armacki_appc")
def _armacki_appc(out: Path, quick: bool) -> dict:
    return _study_section(
        "Armacki et al. App. C: cluster structure at the paper's λ (Fig. 6), PDMM's gap (Fig. 5)",
        ["armacki_appc", "armacki_pdmm"], out, quick,
        intro="notebooks/armacki_appc.py. 10 users per cluster, each with 85 % (170) of its "
              "cluster's 200 points. " + _CONVENTIONS)


@section("convex_clustering")
def _convex_clustering(out: Path, quick: bool) -> dict:
    return _study_section(
        "Convex clustering of scikit-learn data (iris, digits, make_moons): clusterpaths and "
        "dendrograms", ["convex_clustering"], out, quick,
        intro="notebooks/convex_clustering.py. Quadratic loss, Gaussian-kernel 10-NN graph "
              "(Chi & Lange), warm-started path up to the exact λ̂.")


@section("ppfl", extras=("plot", "stats"))
def _ppfl(out: Path, quick: bool) -> dict:
    return _study_section(
        "PPFL: membership vectors during training (Fig. 6) and the GLMM equivalence (Thm 3)",
        ["ppfl_memberships", "ppfl_glmm"], out, quick, intro="notebooks/ppfl.py.")


@section("perfed_ckt")
def _perfed_ckt(out: Path, quick: bool) -> dict:
    return _study_section(
        "PerFed-CKT: the toy example (Fig. 1) and Theorem 4.2",
        ["ckt_toy", "ckt_theorem_4_2"], out, quick, intro="notebooks/perfed_ckt.py.")


@section("cgpfl")
def _cgpfl(out: Path, quick: bool) -> dict:
    return _study_section(
        "CGPFL: accuracy vs K and CGPFL-Heur's choice (Fig. 3)", ["cgpfl_k"], out, quick,
        intro="notebooks/cgpfl.py.")


@section("torch_digits", extras=("plot", "torch"))
def _torch_digits(out: Path, quick: bool) -> dict:
    return _study_section(
        "Torch back-ends on the digits split: mean test accuracy per method", ["torch_digits"],
        out, quick, intro="notebooks/torch_digits.py (python -m convexfl.torch prints the "
                          "same table).")


#: the sections above, in order (the notebooks' key figures)
NOTEBOOK_SECTIONS = ("armacki_sec5", "armacki_appc", "convex_clustering", "ppfl", "perfed_ckt",
                     "cgpfl", "torch_digits")
