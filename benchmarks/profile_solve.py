"""Where ``convexfl.solve`` spends its time on the ``ccmm_single`` complete-graph instances.

``python -m benchmarks.profile_solve [N ...]`` (default N = 200 400): for each method
(auto, admm, ssnal), after a warm-up solve, the plain time of ``ROUNDS`` solves and a cProfile
of as many more, split into: iterations (the solver's loop: its numba kernels and the Python
around them), certificate (:func:`convexfl.certificates.kkt_residual`), reduced-problem Newton
(``polish``) and merges (``Certifier._merged``) inside the certify calls, units (standard form
and back), the uniqueness check, the Solution's assembly and the rest (validation, set-up).
cProfile inflates Python-heavy parts; the plain time calibrates.
"""

from __future__ import annotations

import cProfile
import pstats
import sys
import time

import convexfl as cfl

from .versus import METHODS, TOL, single_instances

ROUNDS = 5
PARTS = {  # label: (file suffix, function)
    "solve": ("solvers/__init__.py", "solve"),
    "solver loop": ("solvers/admm.py", "_solve_son"),
    "ssnal loop": ("solvers/ssnal.py", "_solve_son"),
    "certify calls": ("solvers/_common.py", "__call__"),
    "coarsen": ("solvers/_common.py", "coarsen"),
    "warm partition": ("solvers/_common.py", "warm"),
    "kkt_residual": ("convexfl/certificates.py", "kkt_residual"),
    "Newton polish": ("solvers/_common.py", "polish"),
    "merges (inner ADMM)": ("solvers/_common.py", "_merged"),
    "make_solution": ("solvers/_common.py", "make_solution"),
    "units": ("convexfl/units.py", "standardise"),
    "units back": ("convexfl/units.py", "solution_from"),
    "uniqueness check": ("solvers/__init__.py", "_warn_if_not_unique"),
}


def _cum(stats, suffix, name):
    return sum(v[3] for (f, _, fn), v in stats.stats.items()
               if fn == name and f.endswith(suffix))


def breakdown(prob, method, rounds=ROUNDS):
    """Plain and profiled seconds per solve, and the profiled split (dict of seconds)."""
    sol = cfl.solve(prob, method=method, tol=TOL)
    plain = 0.0
    for _ in range(rounds):  # each from an empty factorisation cache, as a first solve
        cfl.certificates.clear_cache()
        t = time.perf_counter()
        cfl.solve(prob, method=method, tol=TOL)
        plain += (time.perf_counter() - t) / rounds
    pr = cProfile.Profile()
    for _ in range(rounds):
        cfl.certificates.clear_cache()
        pr.enable()
        cfl.solve(prob, method=method, tol=TOL)
        pr.disable()
    st = pstats.Stats(pr)
    c = {k: _cum(st, *v) / rounds for k, v in PARTS.items()}
    loop = c["solver loop"] + c["ssnal loop"]
    inside = c["certify calls"] + c["coarsen"] + c["warm partition"] + c["make_solution"]
    split = {"iterations": loop - inside, "certify calls": inside - c["make_solution"],
             "units": c["units"] + c["units back"], "uniqueness check": c["uniqueness check"],
             "make_solution": c["make_solution"]}
    split["rest"] = c["solve"] - sum(split.values())
    # parts of "certify calls" (they overlap: the merges' inner ADMM certifies and polishes)
    split.update({"  . kkt_residual": c["kkt_residual"], "  . Newton polish": c["Newton polish"],
                  "  . merges (inner ADMM)": c["merges (inner ADMM)"]})
    info = {"plain_s": plain, "profiled_s": c["solve"], "n_iter": sol.n_iter,
            "n_certify": sol.history.get("n_certify"), "stage": sol.stage,
            "method": sol.method}
    return info, split, st


def report(n, method, info, split, stats):
    print(f"N = {n} {method} ({info['method']}): {1e3 * info['plain_s']:.1f} ms plain, "
          f"{1e3 * info['profiled_s']:.1f} ms profiled; n_iter {info['n_iter']}, certify "
          f"calls {info['n_certify']}, stage {info['stage']!r}")
    for k, v in split.items():
        print(f"    {k:24s} {1e3 * v:8.2f} ms  {100 * v / info['profiled_s']:5.1f} %")
    stats.sort_stats("tottime").print_stats(8)


def main(argv=None):
    sizes = [int(a) for a in (sys.argv[1:] if argv is None else argv)] or [200, 400]
    for label, A, graph, lam, _ in single_instances(quick=False):
        if label.startswith("complete") and A.shape[0] in sizes:
            prob = cfl.SumOfNorms(cfl.losses.Quadratic(A), graph, lam)
            for m in METHODS:
                report(A.shape[0], m, *breakdown(prob, m))
    return 0


if __name__ == "__main__":
    sys.exit(main())
