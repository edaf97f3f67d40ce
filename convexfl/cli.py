"""The ``convexfl`` command. Each subcommand only parses arguments and calls the library.

Subcommands
-----------
demo
    Solve a small convex-clustering instance on built-in data (three planted clusters, a
    complete graph, λ inside the Theorem-3 recovery interval) and print the clusters, the
    certificate, the exact fusion threshold and the exact recovery interval.
bounds DATA
    λ-bounds for a data file: the exact fusion threshold λ̂ and, with a partition, the exact
    recovery interval with the Theorem-1/2/3 and conservative intervals; writes
    ``bounds.json`` and ``bounds.png``.
path DATA
    A warm-started solution path; writes ``path.json``, ``path.npz`` and PNGs (clusters vs
    λ, dendrogram, clusterpath).
report [--quick] [--out DIR]
    The main job: the theory checks and the papers' key figures on built-in data, written as
    ``DIR/report.html`` + ``DIR/report.json`` (resumable: finished sections are kept).

Data files (``DATA``)
---------------------
Points (one user per row) or samples (rows with a target ``y`` and a user ``group``), as
``.csv`` or ``.npz``: :data:`FORMATS`, printed by ``convexfl --help`` and by the ``--help``
of every subcommand that reads one.

Every λ read or written is in the canonical (SON) convention unless ``--convention`` says
otherwise for an input λ.
"""

from __future__ import annotations

import argparse
import json
import sys
import zipfile

import numpy as np

SUBCOMMANDS = {}

FORMATS = """\
data files:
  points  one user per row, every column a coordinate (quadratic loss, convex clustering):
            .csv  header row, then numbers:        x1,x2[,cluster]
            .npz  array 'A' (or 'points') (N, d)   [, 'partition' (N,)]
  samples one sample per row, with its target and its user (data losses):
            .csv  header with columns y and group: x1,x2,...,y,group[,cluster]
            .npz  arrays 'X' (n, p), 'y' (n,), 'groups' (n,)  [, 'partition' (N,)]
  The names y, group (or groups) and cluster are matched case-insensitively; a UTF-8 BOM
  is ignored; every cell must be a finite number; repeated column names, ragged rows and
  text cells are refused with the line and column. One user per distinct group label, in
  sorted order. 'cluster' is a partition: one label per user (points) or per sample,
  constant within each group (samples).
"""


def subcommand(name, help):
    """Register ``fn(args)`` as subcommand ``name``; ``fn.configure(parser)`` adds options."""
    def register(fn):
        SUBCOMMANDS[name] = (fn, help)
        return fn
    return register


def _configure_demo(p):
    p.add_argument("--seed", type=int, default=0, help="random seed of the planted data")
    p.add_argument("--json", metavar="FILE", help="also write the result as JSON")


@subcommand("demo", "solve a small convex-clustering instance and print its certificate")
def demo(args) -> int:
    import convexfl as cfl

    if args.json:
        _check_output_file(args.json)
    A, truth = cfl.datasets.planted_points(3, 8, 2, separation=20.0, radius=1.0,
                                           random_state=args.seed)
    n = len(A)
    loss, graph = cfl.losses.Quadratic(A), cfl.graphs.complete(n)
    base = cfl.SumOfNorms(loss, graph, 0.0)
    interval = cfl.bounds.theorem3_interval(base, truth)
    lo, hi = interval.lo, interval.hi
    lam = 0.5 * (lo + hi)
    prob = cfl.SumOfNorms(loss, graph, lam)
    res = cfl.solve(prob, method="cvxpy", tol=1e-8)
    found = res.labels()
    cmp = cfl.clusters.compare(found, truth)
    rec = cfl.bounds.recovery_interval(base, truth, compare=False)
    fusion = rec.related["fusion_threshold"]
    print(f"convexfl demo: {n} points in R^2, 3 planted clusters, complete graph")
    print(f"  Theorem-3 interval (SON convention): [{lo:.5f}, {hi:.5f}]  ->  lam = {lam:.5f}")
    print(f"  exact recovery interval: [{rec.lo:.5f}, {rec.hi:.5f}) ({rec.kind}); "
          f"fusion threshold lam_hat = {fusion.value:.5f} ({fusion.kind})")
    print(f"  solver: {res.method}, converged={res.converged}, {res.n_iter} iterations, "
          f"{res.time_s:.3f} s")
    print(f"  objective = {res.objective:.10g}")
    print(f"  KKT residual = {res.kkt_residual:.2e} (certified; lower bound "
          f"{res.certificate.kkt_abs_lower:.2e} abs), fuse_tol = {res.fuse_tol:.1e}")
    print(f"  clusters found: {cmp['n_found']}, planted: {cmp['n_true']}, "
          f"same partition: {cmp['same_partition']}, ARI = {cmp['adjusted_rand']:.3f}")
    for k in range(found.max() + 1):
        members = np.flatnonzero(found == k)
        print(f"    cluster {k}: users {members.tolist()}  model {np.round(res.X[members[0]], 4)}")
    if args.json:
        _write_json(args.json, {"lam": lam, "lam_convention": "son",
                                "theorem3_interval": [lo, hi],
                                "recovery_interval": [rec.lo, rec.hi],
                                "fusion_threshold": fusion.value, "objective": res.objective,
                                "kkt_residual": res.kkt_residual, "converged": res.converged,
                                "labels": found.tolist(), "truth": truth.tolist(), **cmp})
    return 0 if (res.converged and cmp["same_partition"]) else 1


demo.configure = _configure_demo


# ---------------------------------------------------------------------------------------------
# data files → problems
# ---------------------------------------------------------------------------------------------

LOSSES = ("quadratic", "least_squares", "logistic", "squared_hinge", "huber", "poisson")
SPECIAL_COLUMNS = ("y", "group", "groups", "cluster")  # matched case-insensitively


def _read_csv(path):
    """``(columns, header)`` of a numeric CSV file with a header row (the special names
    matched case-insensitively, a UTF-8 BOM ignored); refuses repeated column names, ragged
    rows and cells that are not finite numbers, naming the row and the column."""
    import csv

    with open(path, newline="", encoding="utf-8-sig") as fh:
        rows = [r for r in csv.reader(fh) if r and any(c.strip() for c in r)]
    if len(rows) < 2:
        raise ValueError(f"data: {path} needs a header row and at least one data row")
    header = [h.strip() for h in rows[0]]
    keys = [h.lower() if h.lower() in SPECIAL_COLUMNS else h for h in header]
    repeated = sorted({h for h in keys if keys.count(h) > 1})
    if repeated or "" in keys:
        raise ValueError(f"data: {path} has " + (f"repeated column names {repeated}"
                         if repeated else "an empty column name") + "; every column needs "
                         "its own name")
    body = np.empty((len(rows) - 1, len(header)))
    for i, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            raise ValueError(f"data: {path} line {i} has {len(row)} fields, the header has "
                             f"{len(header)}")
        for j, cell in enumerate(row):
            try:
                body[i - 2, j] = float(cell)
            except ValueError:
                raise ValueError(f"data: {path} line {i}, column {header[j]!r}: {cell!r} is "
                                 "not a number") from None
            if not np.isfinite(body[i - 2, j]):
                raise ValueError(f"data: {path} line {i}, column {header[j]!r}: {cell!r} is "
                                 "not finite")
    return {h: body[:, j] for j, h in enumerate(keys)}, keys


def load_data(path) -> dict:
    """Read a data file (see the module docstring).

    Returns
    -------
    dict
        ``kind`` ("points" or "samples"); ``A`` or ``X``, ``y``, ``groups``; ``partition``
        (per user) or None.
    """
    import os

    path = str(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"data: no such file {path!r}")
    if path.endswith(".npz"):
        try:
            with np.load(path, allow_pickle=False) as z:
                d = {k: z[k] for k in z.files}
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
            raise ValueError(f"data: {path} is not a readable .npz archive of numeric arrays "
                             f"({type(exc).__name__}: {exc})") from None
        part = next((d[k] for k in ("partition", "user_cluster", "truth") if k in d), None)
        if "A" in d or "points" in d:
            return {"kind": "points", "A": d.get("A", d.get("points")), "partition": part}
        if all(k in d for k in ("X", "y", "groups")):
            return {"kind": "samples", "X": d["X"], "y": d["y"], "groups": d["groups"],
                    "partition": part}
        raise ValueError(f"data: {path} must hold 'A' (points) or 'X', 'y', 'groups'; "
                         f"found {sorted(d)}")
    if path.endswith(".csv"):
        cols, header = _read_csv(path)
        cluster = cols.get("cluster")
        group_key = "group" if "group" in cols else ("groups" if "groups" in cols else None)
        if ("y" in cols) != (group_key is not None):
            raise ValueError(f"data: {path} has a '{'y' if 'y' in cols else group_key}' "
                             "column but no '" + ("group" if "y" in cols else "y") + "' "
                             "column; a samples file needs both, a points file neither")
        if "y" in cols and group_key is not None:
            feats = [h for h in header if h not in ("y", group_key, "cluster")]
            if not feats:
                raise ValueError(f"data: {path} has no feature columns")
            X = np.column_stack([cols[h] for h in feats])
            groups = cols[group_key]
            part = None
            if cluster is not None:
                users, idx = np.unique(groups, return_inverse=True)
                part = np.zeros(len(users))
                for u in range(len(users)):
                    vals = np.unique(cluster[idx == u])
                    if len(vals) != 1:
                        raise ValueError(f"data: the 'cluster' column is not constant within "
                                         f"group {users[u]:g}")
                    part[u] = vals[0]
            return {"kind": "samples", "X": X, "y": cols["y"], "groups": groups,
                    "partition": part}
        coords = [h for h in header if h != "cluster"]
        return {"kind": "points", "A": np.column_stack([cols[h] for h in coords]),
                "partition": cluster}
    raise ValueError(f"data: expected a .csv or .npz file, got {path!r}")


def _read_partition(path, n_users):
    import os

    from ._validation import check_partition

    if not os.path.isfile(path):
        raise FileNotFoundError(f"partition: no such file {path!r}")
    try:
        if path.endswith(".npy"):
            lab = np.load(path, allow_pickle=False)
        else:
            lab = np.loadtxt(path, delimiter="," if path.endswith(".csv") else None)
    except (OSError, ValueError, EOFError) as exc:
        raise ValueError(f"partition: {path} must hold one numeric cluster label per user, "
                         f"without a header ({exc})") from None
    return check_partition(np.asarray(lab).ravel(), n_users, "partition")


def build_problem(args):
    """``(SumOfNorms, partition or None, data)`` from the common options."""
    import convexfl as cfl

    data = load_data(args.data)
    if data["kind"] == "points":
        loss_name = args.loss or "quadratic"
        if loss_name != "quadratic":
            raise ValueError(f"loss: a points file (one point per user) needs the quadratic "
                             f"loss, got {loss_name!r}")
        loss = cfl.losses.Quadratic(data["A"])
        feats = data["A"]
    else:
        y = np.asarray(data["y"], float)
        default = "logistic" if np.all(np.isin(y, (-1.0, 1.0))) else "least_squares"
        loss_name = args.loss or default
        if loss_name == "quadratic":
            raise ValueError("loss: the quadratic loss needs a points file (A), not samples")
        cls = {"least_squares": cfl.losses.LeastSquares, "logistic": cfl.losses.Logistic,
               "squared_hinge": cfl.losses.SquaredHinge, "huber": cfl.losses.Huber,
               "poisson": cfl.losses.Poisson}[loss_name]
        loss = cls.from_groups(data["X"], y, data["groups"], c=args.c)
        feats = None
    n = loss.n_users
    if args.graph == "complete":
        graph = cfl.graphs.complete(n)
    else:
        if feats is None:
            raise ValueError("graph: a k-nearest-neighbour graph needs points (A); use the "
                             "complete graph for sample data")
        graph = cfl.graphs.knn(feats, k=min(args.k, n - 1), phi=args.phi)
    prob = cfl.SumOfNorms(loss, graph, 0.0)
    part = None
    if args.partition:
        part = _read_partition(args.partition, n)
    elif data.get("partition") is not None:
        from ._validation import check_partition
        part = check_partition(np.asarray(data["partition"]).ravel(), n, "partition")
    return prob, part, data, loss_name


def _configure_common(p):
    p.add_argument("data", help="a .csv or .npz data file (see `convexfl --help`)")
    p.add_argument("--loss", choices=LOSSES, help="per-user loss (default: quadratic for "
                   "points, logistic for ±1 targets, else least_squares)")
    p.add_argument("--c", type=float, default=1e-2, help="ridge c > 0 of the data losses "
                   "(strict convexity; default 1e-2)")
    p.add_argument("--graph", choices=("complete", "knn"), default="complete")
    p.add_argument("--k", type=int, default=10, help="neighbours for --graph knn")
    p.add_argument("--phi", type=float, default=None, help="Gaussian-kernel weights for knn")
    p.add_argument("--partition", metavar="FILE", help="one cluster label per user "
                   "(.csv/.txt/.npy); default: the data file's own")
    p.add_argument("--out", metavar="DIR", default="convexfl-report",
                   help="output folder (default ./convexfl-report)")
    p.add_argument("--no-plot", action="store_true", help="skip the PNGs")


def _write_json(path, obj):
    """Write JSON atomically (:func:`convexfl._io.atomic_write_text`)."""
    from ._io import atomic_write_text
    from .bounds import _jsonable

    atomic_write_text(path, json.dumps(_jsonable(obj), indent=1))


def _check_output_file(path, name: str = "json") -> None:
    """Before computing: ``path`` can be written (its folder exists and takes files)."""
    import os

    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise ValueError(f"{name}: {path!r} is a folder, expected a file name")
    if not os.path.isdir(folder):
        raise ValueError(f"{name}: the folder {folder!r} does not exist")
    _check_writable(folder, name)


def _check_writable(folder, name) -> None:
    import tempfile

    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".convexfl-write-test-"):
            pass
    except OSError as exc:
        raise ValueError(f"{name}: cannot write in {folder!r} ({exc.strerror or exc})") from None


def _prepare_output(args) -> None:
    """Before computing: ``--out`` is (or can be made) a folder that takes files; without
    matplotlib the plots are skipped with a one-line note (the JSON is still written)."""
    import os

    if os.path.exists(args.out) and not os.path.isdir(args.out):
        raise ValueError(f"out: {args.out!r} exists and is not a folder")
    try:
        os.makedirs(args.out, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"out: cannot create the folder {args.out!r} "
                         f"({exc.strerror or exc})") from None
    _check_writable(args.out, "out")
    from ._extras import missing

    if not args.no_plot and missing("plot"):
        print(f"convexfl {args.command}: note: matplotlib is not installed (pip install "
              "'convexfl[plot]'); plots skipped", file=sys.stderr)
        args.no_plot = True



def _configure_bounds(p):
    _configure_common(p)
    p.add_argument("--lam", type=float, help="also certify the partition at this λ")
    p.add_argument("--convention", choices=("son", "eq3", "eq14"), default="son",
                   help="convention of --lam (default son)")
    p.add_argument("--n-grid", type=int, default=16, help="grid points of the λ search")
    p.add_argument("--rtol", type=float, default=1e-6, help="relative width of the ends")


@subcommand("bounds", "exact fusion threshold and recovery interval (with the theorem "
                      "intervals) for a data file")
def bounds_cmd(args) -> int:
    import os

    import convexfl as cfl

    prob, part, _, loss_name = build_problem(args)
    _prepare_output(args)
    fb = cfl.bounds.fusion_threshold(prob)
    out = {"data": os.path.abspath(args.data), "loss": loss_name, "n_users": prob.n_users,
           "dim": prob.dim, "graph": prob.graph.kind, "lam_convention": "son",
           "fusion_threshold": fb.to_dict()}
    print(f"convexfl bounds: {prob.n_users} users, d = {prob.dim}, loss {loss_name}, "
          f"graph {prob.graph.kind} (all λ in the SON convention)")
    print(f"  fusion threshold lam_hat = {fb.value:.6g} ({fb.kind}); closed-form bounds "
          f"[{fb.related['lower'].value:.6g}, {fb.related['upper'].value:.6g}]")
    if part is None:
        print("  no partition given (--partition or a 'cluster' column): only lam_hat")
    else:
        rec = cfl.bounds.recovery_interval(prob, part, n_grid=args.n_grid, rtol=args.rtol)
        out["partition"] = part.tolist()
        out["recovery_interval"] = rec.to_dict()
        rows = [("exact recovery", rec)] + [(k, v) for k, v in rec.related.items()
                                            if k != "fusion_threshold"]
        for name, b in rows:
            body = "empty" if b.is_empty else f"[{b.lo:.6g}, {b.hi:.6g})"
            if b.is_empty and np.isfinite(b.lo):
                body += f" (lower end {b.lo:.6g} ≥ upper end {b.hi:.6g})"
            print(f"  {name:>16}: {body}  ({b.kind})")
        if args.lam is not None:
            lam = cfl.from_paper_lambda(args.lam, prob.n_users, args.convention)
            cert = cfl.bounds.partition_certificate(prob, part, lam)
            out["certificate"] = cert.to_dict()
            print(f"  at lam = {lam:.6g}: recovered = {cert.recovered}, max rho_k = "
                  f"{cert.value:.6g} ({cert.note})")
        if not args.no_plot:
            from . import plotting
            plotting.plot_intervals(rec, out=os.path.join(args.out, "bounds.png"))
            print(f"  wrote {os.path.join(args.out, 'bounds.png')}")
    _write_json(os.path.join(args.out, "bounds.json"), out)
    print(f"  wrote {os.path.join(args.out, 'bounds.json')}")
    return 0


bounds_cmd.configure = _configure_bounds


def _configure_path(p):
    _configure_common(p)
    p.add_argument("--method", default="auto", help="solver method (default auto; cvxpy is "
                   "the slow reference)")
    p.add_argument("--n-lambdas", type=int, default=30, help="grid size (0 and a geometric "
                   "grid ending at lam_hat)")
    p.add_argument("--lambdas", type=float, nargs="+", help="explicit λ grid (SON)")
    p.add_argument("--lam-min-ratio", type=float, default=1e-3)
    p.add_argument("--tol", type=float, help="solver tolerance")
    p.add_argument("--checkpoint", action="store_true",
                   help="write DIR/path.npz/.json after every λ and resume from them")
    p.add_argument("--recovery", action="store_true",
                   help="also compute the exact recovery interval of the partition")


@subcommand("path", "a warm-started solution path of a data file, with PNGs")
def path_cmd(args) -> int:
    import os

    import convexfl as cfl

    prob, part, _, loss_name = build_problem(args)
    _prepare_output(args)
    opts = {} if args.tol is None else {"tol": args.tol}
    base = os.path.join(args.out, "path")
    path = cfl.son_path(prob, args.lambdas, method=args.method, n_lambdas=args.n_lambdas,
                        lam_min_ratio=args.lam_min_ratio,
                        checkpoint=base if args.checkpoint else None, **opts)
    path.save(base)
    print(f"convexfl path: {prob.n_users} users, d = {prob.dim}, loss {loss_name}, "
          f"{len(path)} λ (SON), method {args.method}")
    print(path.format_table())
    for note in path.meta.get("notes", []):
        print(f"  note: {note}")
    report = {"table": path.table, "fusion_events": path.fusion_events,
              "merge_table": path.merge_table if prob.n_users > 1 else [],
              "monotone": path.monotone, "lam_hat": path.lam_hat, "lam_convention": "son",
              "notes": path.meta.get("notes", [])}
    rec = None
    if part is not None:
        report["partition"] = part.tolist()
        report["recovery_on_grid"] = path.recovery_runs(part)
        if args.recovery:
            rec = cfl.bounds.recovery_interval(prob, part)
            report["recovery_interval"] = rec.to_dict()
            print("  exact recovery interval: " + ("empty" if rec.is_empty else
                  f"[{rec.lo:.6g}, {rec.hi:.6g})") + f" ({rec.kind})")
    _write_json(base + "_report.json", report)
    print(f"  wrote {base}.npz, {base}.json, {base}_report.json")
    if not args.no_plot:
        from . import plotting
        k = None if part is None else int(part.max()) + 1
        plotting.plot_n_clusters(path, rec, partition_size=k,
                                 out=os.path.join(args.out, "n_clusters.png"))
        if prob.n_users > 1:
            plotting.plot_dendrogram(path, truth=part, recovery=rec,
                                     out=os.path.join(args.out, "dendrogram.png"))
        if prob.dim >= 2:
            plotting.plot_clusterpath(path, truth=part,
                                      out=os.path.join(args.out, "clusterpath.png"))
        print(f"  wrote PNGs to {args.out}")
    return 0


path_cmd.configure = _configure_path


def _configure_report(p):
    p.add_argument("--quick", action="store_true",
                   help="small instances (minutes); the default is the full report")
    p.add_argument("--out", default="convexfl-report", help="report folder (%(default)s)")
    p.add_argument("--only", nargs="+", metavar="SECTION", help="run only these sections")
    p.add_argument("--fresh", action="store_true",
                   help="recompute sections already finished in --out")
    p.add_argument("--no-progress", action="store_true")


@subcommand("report", "the main job: theory checks and the papers' key figures, as one "
                      "HTML + JSON report (resumable)")
def report_cmd(args) -> int:
    import os

    from ._extras import require
    from .report import run_report

    require("report", "plot", "stats")
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        raise ValueError(f"out: {args.out!r} exists and is not a folder")
    os.makedirs(args.out, exist_ok=True)
    _check_writable(args.out, "out")

    path = run_report(quick=args.quick, out=args.out, only=args.only, fresh=args.fresh,
                      progress=not args.no_progress)
    data = json.loads((path.parent / "report.json").read_text())
    failed = [s["name"] for s in data["sections"] if s.get("status") != "done"]
    for s in data["sections"]:
        print(f"  {s['name']:<24} {s.get('status', '?'):<7} {s.get('seconds', 0):7.1f} s")
    print(f"report: {path}")
    if failed:
        print(f"sections that failed (see the report): {failed}", file=sys.stderr)
    return 1 if failed else 0


report_cmd.configure = _configure_report


def build_parser() -> argparse.ArgumentParser:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(prog="convexfl", description=__doc__.split("\n")[0],
                                     epilog=FORMATS, formatter_class=raw)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (fn, help_) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_, description=help_, formatter_class=raw,
                           epilog=FORMATS if name in ("bounds", "path") else None)
        getattr(fn, "configure", lambda p: None)(p)
        p.set_defaults(func=fn)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ValueError, TypeError, OSError) as exc:
        print(f"convexfl {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        kept = getattr(args, "out", None)
        print(f"convexfl {args.command}: interrupted"
              + (f"; finished work is kept in {kept!r}: run the same command again to resume"
                 if args.command in ("report", "path") and kept else ""), file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
