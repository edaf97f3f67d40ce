"""The report page a person reads (issue 17, item 4): a summary on top naming every
finding, tables rendered as tables, sub-reports and figures linked."""

from convexfl import report

SECTIONS = [
    {"name": "theory_checks", "title": "Theory checks", "status": "done", "quick": True,
     "text": "18 of 20 claims hold; 2 finding(s), named below.", "seconds": 3.0,
     "links": [["the theory-check report", "theory-checks/report.html"]],
     "figures": ["theory-checks/figures/a.png"],
     "data": {"checks": [{"id": f"c{i}", "outcome": "holds" if i < 18 else "fails"}
                         for i in range(20)],
              "findings": ["ckt.thm42: the printed optimum is off by 0.31",
                           "cgpfl.heuristic: margin -0.0017"]}},
    {"name": "ppfl", "title": "PPFL: memberships", "status": "done", "quick": True,
     "text": "intro line\n\n| quantity | paper | ours |\n|---|---|---|\n| acc | 0.9 | 0.91 |",
     "figures": [], "data": {}, "seconds": 1.0},
    {"name": "cgpfl", "title": "CGPFL", "status": "failed", "quick": True,
     "text": "This section failed:\nTraceback ...", "figures": [], "data": {}},
]


def test_the_page_has_a_summary_rendered_tables_named_findings_and_links():
    page = report._html(SECTIONS)
    summary = page[page.index("class='summary'"):page.index("<h2")]
    assert "2 of 3 sections finished (quick mode)" in summary
    assert "18 of 20 claims hold" in summary and "2 finding(s)" in summary
    assert "ckt.thm42: the printed optimum is off by 0.31" in summary
    assert "href='#cgpfl'" in summary and "href='theory-checks/report.html'" in summary
    assert "<table><thead><tr><th>quantity</th><th>paper</th><th>ours</th>" in page
    assert "<td>0.91</td>" in page and "|---|" not in page
    assert "<a href='theory-checks/figures/a.png'><img" in page
    assert "<li class='finding'>cgpfl.heuristic: margin -0.0017</li>" in page
    assert "<pre>This section failed:" in page  # a traceback stays preformatted


def test_warnings_of_a_section_go_into_the_report(tmp_path, monkeypatch):
    import warnings

    def noisy(out, quick):
        warnings.warn("the cluster structure is not monotone along the path", UserWarning,
                      stacklevel=2)
        return {"title": "Noisy", "text": "ok", "figures": [], "data": {}}
    monkeypatch.setitem(report.SECTIONS, "noisy", noisy)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing may escape to the terminal
        page = report.run_report(quick=True, out=tmp_path, only=["noisy"], progress=False)
    assert "UserWarning: the cluster structure is not monotone" in page.read_text()
