"""The ``convexfl`` command. Each subcommand only parses arguments and calls the library.

Subcommands
-----------
demo
    Solve a small convex-clustering instance on built-in data (three planted clusters, a
    complete graph, λ inside the Theorem-3 recovery interval) and print the clusters and the
    certificate.
"""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np

SUBCOMMANDS = {}


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

    A, truth = cfl.datasets.planted_points(3, 8, 2, separation=20.0, radius=1.0,
                                           random_state=args.seed)
    n = len(A)
    loss, graph = cfl.losses.Quadratic(A), cfl.graphs.complete(n)
    interval = cfl.bounds.theorem3_interval(cfl.SumOfNorms(loss, graph, 0.0), truth)
    lo, hi = interval.lo, interval.hi
    lam = 0.5 * (lo + hi)
    prob = cfl.SumOfNorms(loss, graph, lam)
    res = cfl.solve(prob, method="cvxpy", tol=1e-8)
    found = res.labels()
    cmp = cfl.clusters.compare(found, truth)
    print(f"convexfl demo: {n} points in R^2, 3 planted clusters, complete graph")
    print(f"  Theorem-3 interval (SON convention): [{lo:.5f}, {hi:.5f}]  ->  lam = {lam:.5f}")
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
        with open(args.json, "w") as fh:
            json.dump({"lam": lam, "lam_convention": "son", "theorem3_interval": [lo, hi],
                       "objective": res.objective, "kkt_residual": res.kkt_residual,
                       "converged": res.converged, "labels": found.tolist(),
                       "truth": truth.tolist(), **cmp}, fh, indent=2)
    return 0 if (res.converged and cmp["same_partition"]) else 1


demo.configure = _configure_demo


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="convexfl", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (fn, help_) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_)
        getattr(fn, "configure", lambda p: None)(p)
        p.set_defaults(func=fn)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (ValueError, TypeError, FileNotFoundError) as exc:
        print(f"convexfl {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
