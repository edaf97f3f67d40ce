"""The certificates of the make_moons 551-λ path, captured once and replayed alone.

``python -m benchmarks.cert_replay [--n 5000] [--rounds 5] [--top 10]``: runs
``cfl.son_path(prob, lams, method="auto", tol=1e-6)`` on
:func:`benchmarks.versus.moons_instance` (the ``ccmm_path`` instance at ``n`` points) once,
recording every :func:`convexfl.certificates.kkt_residual` that its solvers ask on the full
problem (the reduced problems' own certificates, inside the merges, are left out), then
replays those calls in their order, ``rounds`` times, each round from an empty factorisation
cache (:func:`convexfl.certificates.clear_cache`), as in the path. It prints the replay's
minimum and median time, split by the kind of question (a stopping test that passes, one
that fails, an exact search for a repair's split: ``target`` None), and the ``top`` most
expensive certificates with their λ (the (SON) convention of the path's grid; the solvers
certify in standard units, :mod:`convexfl.units`), verdict and flow iterations.

Certificates are about half of the n = 5000 path and of the n = 2·10⁴ one
(docs/solvers.md, "Against the peer CCMM"). Replayed, they are the same inputs every round,
so a change to the flow search can be compared on them with less of the machine's noise
than a whole path has (the verdicts are checked against the path's own). No peer is run.
"""

from __future__ import annotations

import argparse
import contextlib
import time

import numpy as np

import convexfl as cfl
from convexfl.solvers import _common
from convexfl.units import standardise

from .path_regions import moons_problem
from .versus import TOL

KINDS = ("passes", "fails", "exact search")


@contextlib.contextmanager
def recording(n_users):
    """Record ``(problem, X, options, kkt_residual)`` of every certificate that the solvers
    ask on a problem of ``n_users`` users while the block runs (the list is yielded)."""
    calls = []
    certify = _common.kkt_residual

    def record(prob, X, **options):
        cert = certify(prob, X, **options)
        if prob.n_users == n_users:
            kept = {k: np.array(v) if isinstance(v, np.ndarray) else v
                    for k, v in options.items()}
            calls.append((prob, np.array(X), kept, cert.kkt_residual))
        return cert

    _common.kkt_residual = record
    try:
        yield calls
    finally:
        _common.kkt_residual = certify


def capture(prob, lams):
    """The full-size certificates of one path (:func:`recording`), from an empty cache."""
    cfl.certificates.clear_cache()
    with recording(prob.n_users) as calls:
        cfl.son_path(prob, lams, method="auto", tol=TOL, progress=False)
    return calls


def kind(options, residual):
    """Which of :data:`KINDS` a recorded call is."""
    target = options.get("target")
    if target is None:
        return "exact search"
    return "passes" if residual <= target else "fails"


def replay(calls):
    """One replay from an empty cache: ``(seconds per call, certificates)``."""
    cfl.certificates.clear_cache()
    seconds, certs = [], []
    for prob, X, options, _ in calls:
        start = time.perf_counter()
        certs.append(cfl.certificates.kkt_residual(prob, X, **options))
        seconds.append(time.perf_counter() - start)
    return np.array(seconds), certs


def summary(calls, rounds):
    """``(totals per round, seconds per call in the fastest round, its certificates)``;
    raises if a replayed verdict differs from the path's (the inputs are the same)."""
    totals, best = [], None
    for _ in range(rounds):
        seconds, certs = replay(calls)
        for (_, _, options, residual), cert in zip(calls, certs, strict=True):
            if kind(options, residual) != kind(options, cert.kkt_residual):
                raise RuntimeError(f"replay: a certificate's verdict changed ({residual:.3e} "
                                   f"in the path, {cert.kkt_residual:.3e} replayed)")
        totals.append(float(seconds.sum()))
        if best is None or totals[-1] <= min(totals[:-1]):
            best = (seconds, certs)
    return np.array(totals), best[0], best[1]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.cert_replay",
                                 description="the moons path's certificates, replayed alone")
    ap.add_argument("--n", type=int, default=5000, help="points (default 5000)")
    ap.add_argument("--rounds", type=int, default=5, help="replays timed (default 5)")
    ap.add_argument("--top", type=int, default=10,
                    help="the most expensive certificates listed (default 10)")
    args = ap.parse_args(argv)
    if args.rounds < 1:
        ap.error(f"--rounds: expected at least 1, got {args.rounds}")
    if args.top < 0:
        ap.error(f"--top: expected 0 or more, got {args.top}")
    prob, lams = moons_problem(ap, args.n)
    capture(prob, lams[:3])  # warm-up (compilation)
    calls = capture(prob, lams)
    totals, seconds, certs = summary(calls, args.rounds)
    kinds = [kind(options, residual) for _, _, options, residual in calls]
    parts = "  ".join(f"{name} ({kinds.count(name)}) "
                      f"{sum(s for s, k in zip(seconds, kinds, strict=True) if k == name):.3f} s"
                      for name in KINDS)
    print(f"n = {args.n}: {len(calls)} certificates, replayed in {totals.min():.3f} s (min of "
          f"{args.rounds}; median {np.median(totals):.3f} s) | {parts}", flush=True)
    to_grid = prob.lam / standardise(prob)[1].lam  # the solvers' λ → the path's (SON) λ
    for i in np.argsort(-seconds)[:args.top]:
        lam = calls[i][0].lam * to_grid
        print(f"  {seconds[i] * 1e3:7.1f} ms  #{i}  λ = {lam:.4g}  {kinds[i]:12s}  "
              f"KKT {certs[i].kkt_residual:.2e}  {certs[i].flow_iterations} flow iterations",
              flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
