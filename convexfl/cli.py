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
``.csv`` or ``.npz``: :data:`convexfl._io.FORMATS`, printed by ``convexfl --help`` and by
the ``--help`` of every subcommand that reads one, and read by
:func:`convexfl._io.read_data`.

Every λ read or written is in the canonical (SON) convention unless ``--convention`` says
otherwise for an input λ.
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

from ._io import FORMATS, read_data, read_partition

SUBCOMMANDS = {}

OUTPUT = """\
output (--out DIR, --json FILE):
  DIR is created if needed. Checked before computing: DIR is a folder that takes files and
  no file the command writes there is in the way (e.g. a folder named bounds.json).
  Without matplotlib, bounds and path still write their JSON and skip the PNGs (a note on
  stderr says so); report needs the extras of its sections and refuses without them.
exit status: 0 done; 1 demo's clusters not recovered or a report section failed; 2 refused
  (one 'error: ...' line on stderr); 130 interrupted (finished work is kept).
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
load_data = read_data  # the name under which the command has always read a data file


def build_problem(args):
    """``(SumOfNorms, partition or None, data)`` from the common options."""
    import convexfl as cfl

    data = read_data(args.data)
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
        part = read_partition(args.partition, n)
    elif data["partition"] is not None:
        from ._validation import check_partition
        part = check_partition(np.asarray(data["partition"]), n, "partition")
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
    p.add_argument("--partition", metavar="FILE", help="one cluster label per user, one per "
                   "line, no header (.csv/.txt/.npy); default: the data file's own")
    p.add_argument("--out", metavar="DIR", default="convexfl-report",
                   help="output folder, created if needed (default ./convexfl-report)")
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


def _prepare_output(folder, files) -> None:
    """Before computing: ``folder`` (``--out``) is, or can be made, a folder that takes
    files, and none of the ``files`` the command will write there is in the way (a folder
    or anything else that is not a regular file)."""
    import os

    if os.path.exists(folder) and not os.path.isdir(folder):
        raise ValueError(f"out: {folder!r} exists and is not a folder")
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"out: cannot create the folder {folder!r} "
                         f"({exc.strerror or exc})") from None
    _check_writable(folder, "out")
    for name in files:
        path = os.path.join(folder, name)
        if os.path.lexists(path) and not os.path.isfile(path):
            raise ValueError(f"out: {path!r} exists and is not a file; the command writes "
                             f"{name} there")


def _skip_plots_without_matplotlib(args) -> None:
    """Without matplotlib the plots are skipped with a one-line note (the JSON is still
    written)."""
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
    _prepare_output(args.out, ("bounds.json", "bounds.png"))
    _skip_plots_without_matplotlib(args)
    fb = cfl.bounds.fusion_threshold(prob)
    out = {"data": os.path.abspath(args.data), "loss": loss_name, "n_users": prob.n_users,
           "dim": prob.dim, "graph": prob.graph.kind, "lam_convention": "son",
           "fusion_threshold": fb.to_dict()}
    print(f"convexfl bounds: {prob.n_users} users, d = {prob.dim}, loss {loss_name}, "
          f"graph {prob.graph.kind} (all λ in the SON convention)")
    print(f"  fusion threshold lam_hat = {fb.value:.6g} ({fb.kind}); closed-form bounds "
          f"[{fb.related['lower'].value:.6g}, {fb.related['upper'].value:.6g}]")
    rec = None
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
    _write_json(os.path.join(args.out, "bounds.json"), out)  # the numbers first, then plots
    print(f"  wrote {os.path.join(args.out, 'bounds.json')}")
    if rec is not None and not args.no_plot:
        from . import plotting
        plotting.plot_intervals(rec, out=os.path.join(args.out, "bounds.png"))
        print(f"  wrote {os.path.join(args.out, 'bounds.png')}")
    return 0


bounds_cmd.configure = _configure_bounds


def _configure_path(p):
    _configure_common(p)
    p.add_argument("--method", default="auto", help="solver method (default auto; cvxpy is "
                   "the slow reference)")
    p.add_argument("--n-lambdas", type=int, default=30, help="grid size (0 and a geometric "
                   "grid ending at lam_hat, or at its certified upper bound on large "
                   "problems)")
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
    _prepare_output(args.out, ("path.npz", "path.json", "path_report.json", "n_clusters.png",
                               "dendrogram.png", "clusterpath.png"))
    _skip_plots_without_matplotlib(args)
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
    from ._extras import require
    from .report import needed_extras, run_report

    require("report", *needed_extras(args.only))
    _prepare_output(args.out, ("report.html", "report.json"))
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
    parser = argparse.ArgumentParser(
        prog="convexfl", formatter_class=raw, epilog=FORMATS + "\n" + OUTPUT,
        description="convexfl: λ-bounds and solution paths of convex clustering on your data "
                    "files, and the report of the papers' checks and figures.")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (fn, help_) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_, description=help_, formatter_class=raw,
                           epilog=FORMATS + "\n" + OUTPUT if name in ("bounds", "path")
                           else OUTPUT)
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
