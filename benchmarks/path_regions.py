"""Where the make_moons 551-λ path spends its time, by cluster count.

``python -m benchmarks.path_regions [--n 5000] [--runs 3]``: after a three-λ warm-up path
(compilation), ``runs`` paths of ``cfl.son_path(prob, lams, method="auto", tol=1e-6)``,
each from an empty factorisation cache, on :func:`benchmarks.versus.moons_instance` (the
``ccmm_path`` instance at ``n`` points), one line each: the wall time, the time inside the
solves (``SolutionPath.time_s``) and that time split by the certified cluster count K:
λ = 0, K ≥ 1000, 100–999, 10–99, 3–9, 2 and 1 (the fused λ, reused without a solve). The
rest of the wall time is outside the solves (units, objective, labels, flow slopes, λ̂).
No peer is run: the side-by-side ratio is ``python -m benchmarks --cases ccmm_path``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import convexfl as cfl

from .versus import TOL, moons_instance

REGIONS = (("λ = 0", 0, None), ("K ≥ 1000", 1000, None), ("100–999", 100, 1000),
           ("10–99", 10, 100), ("3–9", 3, 10), ("2", 2, 3), ("1", 1, 2))


def run_path(prob, lams):
    """``(wall seconds, SolutionPath)`` of one certified path, from an empty factorisation
    cache (:func:`convexfl.certificates.clear_cache`: a repeated path reuses the last one's)."""
    cfl.certificates.clear_cache()
    start = time.perf_counter()
    path = cfl.son_path(prob, lams, method="auto", tol=TOL, progress=False)
    return time.perf_counter() - start, path


def regions(path, lams):
    """Seconds inside the solves per region of :data:`REGIONS`."""
    k, t = np.asarray(path.n_clusters), np.asarray(path.time_s)
    out = {}
    for name, lo, hi in REGIONS:
        mask = (lams == 0) if hi is None and lo == 0 else (lams > 0) & (k >= lo)
        if hi is not None:
            mask &= k < hi
        out[name] = (int(mask.sum()), float(t[mask].sum()))
    return out


def moons_problem(ap, n):
    """``(prob, lams)``: the (SON) problem of :func:`benchmarks.versus.moons_instance` at
    ``n`` points and its 551 λ; ``ap`` (an ``argparse`` parser) refuses a bad ``--n``."""
    if n < 20:
        ap.error(f"--n: expected at least 20 points (the kNN graph has 15 neighbours), got {n}")
    A, graph, lams = moons_instance(False, n)
    return cfl.SumOfNorms(cfl.losses.Quadratic(A), graph, 1.0), lams


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.path_regions",
                                 description="the make_moons path's time by cluster count")
    ap.add_argument("--n", type=int, default=5000, help="points (default 5000)")
    ap.add_argument("--runs", type=int, default=3, help="paths timed (default 3)")
    args = ap.parse_args(argv)
    if args.runs < 1:
        ap.error(f"--runs: expected at least 1, got {args.runs}")
    prob, lams = moons_problem(ap, args.n)
    run_path(prob, lams[:3])  # warm-up
    for _ in range(args.runs):
        wall, path = run_path(prob, lams)
        parts = "  ".join(f"{name} ({count} λ) {sec:.2f} s"
                          for name, (count, sec) in regions(path, lams).items())
        print(f"n = {args.n}: {wall:.2f} s, solves {path.time_s.sum():.2f} s, "
              f"{int(path.converged.sum())}/{len(lams)} certified, "
              f"{len(path.meta['interpolated'])} by interpolation | {parts}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
