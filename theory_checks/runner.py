"""Run registered checks, resumably, and write the report (Markdown, HTML, JSON, PNGs)."""

from __future__ import annotations

import html
import numbers
import time
import traceback
from pathlib import Path

from convexfl._io import source_fingerprint

from .registry import REGISTRY, Control, Outcome, load_json, save_json_atomic, save_text_atomic


def run_checks(ids=None, *, quick: bool = False, seed: int = 0, out="theory-checks",
               resume: bool = True, progress: bool | str = True) -> list[Outcome]:
    """Run the checks ``ids`` (default all) and write one JSON per check under ``out/checks``.

    A check already finished in ``out`` with the same ``seed``, ``quick`` and source code
    (:func:`convexfl._io.source_fingerprint` of convexfl and theory_checks) is not run
    again (``resume``); a check file that cannot be read back (torn, truncated) counts as
    not finished. An exception inside a check is reported as ``inconclusive`` with its
    traceback, never lost. ``progress="nested"`` draws the bar under an outer one (the
    report's) and removes it when done.
    """
    from tqdm.auto import tqdm

    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"out: {str(out)!r} exists and is not a folder")
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"seed: expected an int, got {seed!r}")
    if seed < 0:
        raise ValueError(f"seed: must be >= 0, got {seed}")
    ids = list(REGISTRY) if not ids else list(ids)
    unknown = [i for i in ids if i not in REGISTRY]
    if unknown:
        raise ValueError(f"only: unknown check id(s) {unknown}; see --list")
    code = source_fingerprint("convexfl", "theory_checks")
    results = []
    bar = tqdm(ids, desc="theory checks", disable=not progress, unit="check",
               leave=progress != "nested", position=1 if progress == "nested" else None)
    for cid in bar:
        bar.set_postfix_str(cid)
        path = out / "checks" / f"{cid}.json"
        done = load_json(path) if resume else None
        if (isinstance(done, dict) and done.get("seed") == seed
                and done.get("quick") == quick and done.pop("code", None) == code):
            try:
                results.append(Outcome.from_dict(done))
                continue
            except (TypeError, ValueError, KeyError):
                pass  # not a finished check's record: run it again
        results.append(_run_one(cid, quick, seed, out))
        save_json_atomic(path, {**results[-1].to_dict(), "code": code})
    return results


def _run_one(cid: str, quick: bool, seed: int, out: Path) -> Outcome:
    check = REGISTRY[cid]
    (out / "figures").mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    try:
        res = check.run(quick=quick, seed=seed, out=out)
    except Exception:  # a crashing check is reported, not hidden
        res = Outcome(id=cid, paper=check.paper, equation=check.equation, claim=check.claim,
                      assumptions=check.assumptions, outcome="inconclusive", margins={},
                      instances=0, seed=seed,
                      control=Control("not run (the check raised)", "inconclusive"),
                      details="The check raised an exception:\n\n"
                              + traceback.format_exc())
    res.quick, res.seed = quick, seed
    res.seconds = time.perf_counter() - start
    return res


def write_report(results: list[Outcome], out, json_path=None) -> Path:
    """Write ``report.md``, ``report.html`` and ``results.json`` in ``out``."""
    out = Path(out)
    data = {"checks": [r.to_dict() for r in results],
            "summary": {o: sum(r.outcome == o for r in results)
                        for o in ("holds", "fails", "inconclusive")}}
    save_json_atomic(out / "results.json", data)
    if json_path:
        save_json_atomic(Path(json_path), data)
    save_text_atomic(out / "report.md", _markdown(results))
    save_text_atomic(out / "report.html", _html(results))
    return out / "report.html"


def _key_margin(r: Outcome) -> str:
    if not r.margins:
        return ""
    k, v = next(iter(r.margins.items()))
    return f"{k} = {v:.3g}" if isinstance(v, float) else f"{k} = {v}"


def _markdown(results) -> str:
    lines = ["# convexfl theory checks", "",
             "| id | paper | eq. | outcome | key margin | control (expected) |",
             "| --- | --- | --- | --- | --- | --- |"]
    for r in results:
        ctrl = f"{r.control.outcome} ({r.control.expected})"
        lines.append(f"| {r.id} | {r.paper} | {r.equation} | **{r.outcome}** | "
                     f"{_key_margin(r)} | {ctrl} |")
    findings = [r for r in results if r.outcome != "holds" or not r.control.as_expected]
    if findings:
        lines += ["", "## Findings", ""]
        for r in findings:
            lines.append(f"- **{r.id}** ({r.outcome}; control {r.control.outcome}): "
                         f"{r.details.splitlines()[0] if r.details else ''}")
    for r in results:
        lines += ["", f"## {r.id} — {r.outcome}", "", f"*{r.paper}, {r.equation}.* {r.claim}",
                  "", f"Assumptions: {r.assumptions}", "",
                  f"Instances: {r.instances}; seed {r.seed}; quick={r.quick}; "
                  f"{r.seconds:.1f} s", "", "Margins:", ""]
        lines += [f"- {k}: {v}" for k, v in r.margins.items()]
        lines += ["", f"Control: {r.control.description} → **{r.control.outcome}** "
                      f"(expected {r.control.expected})"]
        lines += [f"- {k}: {v}" for k, v in r.control.margins.items()]
        if r.details:
            lines += ["", r.details]
        if r.figure:
            lines += ["", f"![{r.id}]({r.figure})"]
        if r.counterexample:
            lines += ["", f"Counterexample saved: `{r.counterexample}`"]
    return "\n".join(lines) + "\n"


def _html(results) -> str:
    colour = {"holds": "#1a7f37", "fails": "#cf222e", "inconclusive": "#9a6700"}
    rows = "".join(
        f"<tr><td><a href='#{html.escape(r.id)}'>{html.escape(r.id)}</a></td>"
        f"<td>{html.escape(r.paper)}</td><td>{html.escape(r.equation)}</td>"
        f"<td style='color:{colour[r.outcome]}'><b>{r.outcome}</b></td>"
        f"<td>{html.escape(_key_margin(r))}</td>"
        f"<td>{r.control.outcome} (expected {r.control.expected})</td></tr>" for r in results)
    sections = []
    for r in results:
        margins = "".join(f"<li>{html.escape(str(k))}: {html.escape(str(v))}</li>"
                          for k, v in r.margins.items())
        cm = "".join(f"<li>{html.escape(str(k))}: {html.escape(str(v))}</li>"
                     for k, v in r.control.margins.items())
        fig = f"<img src='{html.escape(r.figure)}' style='max-width:720px'>" if r.figure else ""
        sections.append(
            f"<h2 id='{html.escape(r.id)}'>{html.escape(r.id)} — "
            f"<span style='color:{colour[r.outcome]}'>{r.outcome}</span></h2>"
            f"<p><i>{html.escape(r.paper)}, {html.escape(r.equation)}.</i> "
            f"{html.escape(r.claim)}</p><p>Assumptions: {html.escape(r.assumptions)}</p>"
            f"<p>Instances: {r.instances}; seed {r.seed}; quick={r.quick}; "
            f"{r.seconds:.1f} s</p><ul>{margins}</ul>"
            f"<p>Control: {html.escape(r.control.description)} → <b>{r.control.outcome}</b> "
            f"(expected {r.control.expected})</p><ul>{cm}</ul>"
            f"<pre style='white-space:pre-wrap'>{html.escape(r.details)}</pre>{fig}")
    return ("<!doctype html><meta charset='utf-8'><title>convexfl theory checks</title>"
            "<body style='font-family:sans-serif;max-width:980px;margin:auto'>"
            "<h1>convexfl theory checks</h1><table border=1 cellpadding=4 "
            "style='border-collapse:collapse'><tr><th>id</th><th>paper</th><th>eq.</th>"
            f"<th>outcome</th><th>key margin</th><th>control</th></tr>{rows}</table>"
            + "".join(sections) + "</body>")
