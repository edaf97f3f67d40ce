"""The measurements behind ``method="auto"``: SSNAL, ADMM and ``auto`` over the cluster
regimes (``auto`` on sparse graphs: 100 ADMM iterations, then SSNAL warm-started).

``python -m benchmarks.auto_rule [--quick]`` prints, for each instance, the time of each
method to a certified KKT ≤ 1e-6 (min of 2 solves after a warm-up), its cluster count and
the ratios ADMM / SSNAL and auto / SSNAL:

- complete graph, 5 planted clusters in d = 5 (separation 30, N = 150 also at separation 3),
  λ = c · 2 max‖a_i − ā‖/N for c from 0.002 (N clusters) to 1.5 (one cluster),
  N ∈ {150, 400, 1000} (quick: 150, 400);
- kNN10 graph on the 5-component mixture of ``ccmm_single`` (``versus._connected_mixture``),
  λ ∈ {0.03, 0.3, 3, 30}, N ∈ {1000, 10⁴} (quick: 1000).

No wall-clock limit applies: ADMM may end uncertified at its ``max_iter`` (20000), which the
``cert`` column shows.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

import convexfl as cfl
from convexfl.datasets.armacki import planted_points

from .versus import _connected_mixture, _knn

METHODS = ("ssnal", "admm", "auto")
COMPLETE_FACTORS = (0.002, 0.01, 0.05, 0.2, 0.6, 1.5)
KNN_LAMS = (0.03, 0.3, 3.0, 30.0)


def _best_of_two(prob, method):
    cfl.solve(prob, method=method, max_iter=20000)  # warm-up: compilation
    best, sol = np.inf, None
    for _ in range(2):
        cfl.certificates.clear_cache()  # each timed solve factorises for itself
        start = time.perf_counter()
        sol = cfl.solve(prob, method=method, max_iter=20000)
        best = min(best, time.perf_counter() - start)
    return best, sol


def _row(label, n, lam_text, prob):
    cells = [f"{label:<22}", f"{n:>6}", f"{lam_text:>14}"]
    times = {}
    for m in METHODS:
        t, sol = _best_of_two(prob, m)
        times[m] = t
        cells += [f"{m} {t:7.3f} s", f"K={sol.n_clusters:<5}", "cert" if sol.converged else "NOT"]
    cells.append(f"admm/ssnal {times['admm'] / times['ssnal']:6.2f}")
    cells.append(f"auto/ssnal {times['auto'] / times['ssnal']:6.2f}")
    print("  ".join(cells), flush=True)


def complete_rows(sizes):
    for n, separation in sizes:
        A = planted_points(5, n // 5, 5, separation=separation, radius=1.0, random_state=0)[0]
        scale = 2 * np.linalg.norm(A - A.mean(0), axis=1).max() / n
        for c in COMPLETE_FACTORS:
            prob = cfl.SumOfNorms(cfl.losses.Quadratic(A), cfl.graphs.complete(n), c * scale)
            _row(f"complete, sep {separation:g}", n, f"{c:g}·2max|g|/N", prob)


def knn_rows(sizes):
    for n in sizes:
        A = _connected_mixture(n)
        graph = _knn(A, 10)
        for lam in KNN_LAMS:
            _row("kNN10, mixture", n, f"λ = {lam:g}", cfl.SumOfNorms(cfl.losses.Quadratic(A),
                                                                     graph, lam))


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.auto_rule", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="the smaller sizes only")
    a = ap.parse_args(argv)
    complete = [(150, 3.0), (150, 30.0), (400, 30.0)] + ([] if a.quick else [(1000, 30.0)])
    complete_rows(complete)
    knn_rows([1000] if a.quick else [1000, 10_000])


if __name__ == "__main__":
    main()
