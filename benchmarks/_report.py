"""What the benchmark cases share in their reports: the text table and the time-vs-N panel."""


def cell(value, spec: str) -> str:
    """``value`` formatted by ``spec`` (e.g. ``"9.3f"``, ``">15s"``); a dash, right-aligned to
    the spec's width, for ``None``."""
    if value is None:
        width = "".join(ch for ch in spec.split(".")[0] if ch.isdigit())
        return "—".rjust(int(width or 1))
    return format(value, spec)


def yes_no(flag: bool) -> str:
    return "yes" if flag else "NO"


def print_table(rows, columns, *, note="note"):
    """Print a header, a rule, and one line per row of ``rows`` (dicts).

    ``columns``: ``(title, key, spec)`` per column, ``key`` a row key or a function of the
    row; numeric columns are right-aligned under their titles, string columns as ``spec``
    says. The row's ``note`` (free text) ends each line.
    """
    def title(name, spec):
        align = spec if spec.endswith("s") else ">" + spec.split(".")[0].rstrip("dfeg")
        return format(name, align)

    head = " ".join(title(name, spec) for name, _, spec in columns) + f"  {note}"
    print(head)
    print("-" * len(head))
    for r in rows:
        cells = (cell(key(r) if callable(key) else r[key], spec) for _, key, spec in columns)
        print(" ".join(cells) + f"  {r.get(note, '')}", flush=True)


def time_vs_n_panel(ax, rows, family, colours):
    """One log-log panel of time against N for the rows of ``family``, a line per contender
    (``colours``: contender → colour), uncertified answers crossed."""
    for name, colour in colours.items():
        pts = sorted((r["N"], r["time_s"], r["certified"]) for r in rows
                     if r["problem"] == family and r["contender"] == name)
        if not pts:
            continue
        ax.loglog([p[0] for p in pts], [p[1] for p in pts], "o-", ms=4, color=colour,
                  label=name)
        bad = [p for p in pts if not p[2]]
        ax.loglog([p[0] for p in bad], [p[1] for p in bad], "kx", ms=9, mew=1.5)
    ax.set_title(family)
    ax.set_xlabel("N (users)")
    ax.grid(True, which="both", alpha=0.3)
