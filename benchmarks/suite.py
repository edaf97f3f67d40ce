"""The benchmark cases, the timing loop and the report (table, JSON, PNG).

Cases (λ always in the canonical (SON) convention):

``quad_complete``
    Convex clustering (quadratic loss) on the complete uniform graph, N ∈ {100, 150, 200,
    400} (quick: no cvxpy at 400), d = 5: four planted clusters (radius 1, separation 30,
    seeded) and λ = 12/N, inside the Theorem-3 recovery interval [8/N, 16/N] (so K = 4);
    ``auto``, ``ssnal`` and ``admm`` against cvxpy.
``logistic``
    Logistic SON, N = 200 users × 20 samples, d = 10, complete graph, ridge c = 0.01: four
    planted user clusters (:func:`convexfl.datasets.armacki.planted_classification`),
    λ = 0.0035 (K = 5; λ ≥ 0.004 fuses every user into one cluster, λ ≤ 0.003 leaves all
    200 apart — measured).
``quad_knn``
    Convex clustering on kNN graphs (k = 10, unit weights), N ∈ {1e3, 1e4, 5e4} (quick:
    {1e3}), d = 3, a seeded 5-component Gaussian mixture, λ = 3 (K = 4 at N = 1e3 and 1e4),
    plus N = 5e4 at λ = 10 (K = 4) and two harder rows at N = 1e3: λ = 1 (K = 15) and
    λ = 0.5 (K = 359, near-degenerate: pairs ~1e-9 apart at the optimum). (λ = 1 at
    N = 1e4 gives ~4000 near-degenerate clusters; not in the table. λ = 3 stops being the
    K = 4 regime above N = 1e4: at N = 2e4 SSNAL certifies K = 100 in ~180 s, so the
    N = 5e4, λ = 3 row is a hard instance.) No cvxpy: the certificate is reported. At
    N = 5e4, λ = 3 SSNAL is capped at 2 outer iterations and ADMM at 1000 iterations
    (``converged`` stays honest).
``moons_path``
    A 551-value λ path (0, 0.2, …, 110; quick: every 10th value) of convex clustering on
    scikit-learn's ``make_moons(n_samples=5000, noise=0.1)``, kNN graph k = 15 with
    Gaussian weights φ = 2, traced by the public :func:`convexfl.son_path` (each λ
    warm-started from the previous solution; its time includes the exact fusion threshold
    λ̂, an SOCP solved once).

Every solve is timed by wall clock around ``convexfl.solve`` (the path: around
``convexfl.son_path``; certificate checks included: they are the stopping test); numba
compilation is done beforehand on tiny problems and reported separately ("JIT warm-up").
The reference is cvxpy + Clarabel at ``tol=1e-9`` (interior point + polish, certificate
~1e-14): "rel. gap" is ``(F − F_ref)/|F_ref|`` and "speed-up" is the reference's time over
the method's time, in the same run.
"""

from __future__ import annotations

import json
import os
import platform
import time
import warnings

import numpy as np

import convexfl as cfl
from convexfl.datasets.armacki import planted_classification, planted_points

from ._report import print_table

CASES = ("quad_complete", "logistic", "quad_knn", "moons_path")
LOGISTIC_LAM = 0.0035
KNN_LAM = 3.0


def _timed(fn):
    """``(fn(), seconds)``, convexfl's factorisation cache emptied first
    (:func:`convexfl.certificates.clear_cache`): no solve reuses another's factorisations."""
    cfl.certificates.clear_cache()
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


WARM_LARGE_N = 2000  # users of the warm-up problem for the kernels of large problems


def warm_up(large=False):
    """Compile (or load from the numba cache) every kernel on tiny problems. With
    ``large``, also the kernels that only problems of thousands of users reach (SSNAL's
    sparsified Newton systems and LDLᵀ solves, the flow search's Anderson mixing and split
    duals): ``ssnal``, ``auto`` and 300 ``admm`` iterations on the kNN10 mixture of
    ``WARM_LARGE_N`` points at λ = 0.6. Without it, on an empty numba cache, their
    compilation fell into the first timed row (``benchmarks.pyclustrpath``, mixture
    N = 2000: ``ssnal`` 2.53 s and ``auto`` 5.0 s instead of ~0.9 s)."""
    rng = np.random.default_rng(0)
    A = rng.standard_normal((6, 2))
    q = cfl.SumOfNorms(cfl.losses.Quadratic(A), cfl.graphs.complete(6), 0.2)
    X, y, g, _ = planted_classification(2, 3, 5, 2, random_state=0)
    lg = cfl.SumOfNorms(cfl.losses.Logistic(X, y, g, c=0.1), cfl.graphs.complete(6), 0.05)
    t = time.perf_counter()
    for prob in (q, lg):
        cfl.solve(prob, method="admm")
        cfl.solve(prob, method="pdmm", max_iter=200, random_state=0)
    cfl.solve(q, method="ssnal")
    if large:
        from .versus import _connected_mixture, _knn
        A = _connected_mixture(WARM_LARGE_N)
        big = cfl.SumOfNorms(cfl.losses.Quadratic(A), _knn(A, 10), 0.6)
        cfl.solve(big, method="ssnal")
        cfl.solve(big, method="auto")
        cfl.solve(big, method="admm", max_iter=300)
    return time.perf_counter() - t


def _row(problem, prob, method, res, t, ref=None, t_ref=None, note=""):
    gap = None if ref is None else (res.objective - ref.objective) / abs(ref.objective)
    return {"problem": problem, "N": prob.n_users, "d": prob.dim,
            "edges": prob.graph.n_edges, "solver": method, "time_s": t,
            "rel_gap": gap, "kkt": res.kkt_residual, "converged": bool(res.converged),
            "n_clusters": int(res.n_clusters), "n_iter": int(res.n_iter),
            "speedup": None if t_ref is None else t_ref / t, "note": note}


def _reference(problem, prob, ref_opts):
    """The tight cvxpy + Clarabel reference and a table row for it (or its failure)."""
    start = time.perf_counter()
    try:
        ref, t_ref = _timed(lambda: cfl.solve(prob, method="cvxpy", **ref_opts))
    except cfl.solvers.SolverError as exc:
        return None, None, {"problem": problem, "N": prob.n_users, "d": prob.dim,
                            "edges": prob.graph.n_edges, "solver": "cvxpy+clarabel",
                            "time_s": time.perf_counter() - start, "rel_gap": None,
                            "kkt": None, "converged": False, "n_clusters": None,
                            "n_iter": None, "speedup": None,
                            "note": f"reference failed: {exc}"}
    note = ""
    if ref.status != "optimal" or ref.history.get("solver_tol") != ref_opts["tol"]:
        note = (f"Clarabel status {ref.status!r} at tol={ref.history.get('solver_tol'):g}, "
                f"polished; certified KKT {ref.kkt_residual:.1e}")
    if not ref.converged:
        note += " — the reference is NOT certified"
    return ref, t_ref, _row(problem, prob, "cvxpy+clarabel", ref, t_ref, ref, t_ref, note)


def _compare(problem, prob, methods, *, with_ref, tol=1e-6, ref_note="", opts=None,
             ref_opts=None):
    rows = []
    ref = t_ref = None
    if with_ref:
        ref, t_ref, row = _reference(problem, prob, ref_opts or {"tol": 1e-9})
        rows.append(row)
    for m in methods:
        kw = dict(tol=tol, **(opts or {}).get(m, {}))
        res, t = _timed(lambda m=m, kw=kw: cfl.solve(prob, method=m, **kw))
        note = "" if res.converged else res.message
        rows.append(_row(problem, prob, m, res, t, ref, t_ref, note or ref_note))
    return rows


def case_quad_complete(quick):
    rows = []
    for n in (100, 150, 200, 400):
        A, _ = planted_points(4, -(-n // 4), 5, separation=30.0, radius=1.0, random_state=0)
        A = A[:n]  # N = 150: clusters of 38, 38, 38 and 36
        prob = cfl.SumOfNorms(cfl.losses.Quadratic(A), cfl.graphs.complete(n), 12.0 / n)
        with_ref = not (quick and n == 400)
        rows += _compare("quadratic complete", prob, ["auto", "ssnal", "admm"],
                         with_ref=with_ref,
                         ref_note="" if with_ref else "cvxpy skipped in --quick (~80 s)")
    return rows


def case_logistic(quick):
    X, y, g, _ = planted_classification(4, 50, 20, 10, flip=0.05, random_state=0)
    loss = cfl.losses.Logistic(X, y, g, c=0.01)
    prob = cfl.SumOfNorms(loss, cfl.graphs.complete(loss.n_users), LOGISTIC_LAM)
    methods = ["admm"] if quick else ["admm", "pdmm"]
    # Clarabel ends 'optimal_inaccurate' here at every tolerance from 1e-9 to 1e-6
    # (measured: ~185 s for the ladder): its first answer is kept, polished and certified
    return _compare("logistic complete", prob, methods, with_ref=True,
                    opts={"pdmm": {"max_iter": 3000, "random_state": 0}},
                    ref_opts={"tol": 1e-8, "accept_inaccurate": True})


def _mixture(n, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((5, 3)) * 3.0
    return centres[rng.integers(0, 5, n)] + 0.7 * rng.standard_normal((n, 3))


def case_quad_knn(quick):
    rows = []
    sizes = (1000,) if quick else (1000, 10000, 50000)
    cases = [(n, KNN_LAM) for n in sizes] + ([] if quick else [(50000, 10.0)])
    cases += [(1000, 1.0), (1000, 0.5)]
    for n, lam in cases:
        A = _mixture(n)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            graph = cfl.graphs.knn(A, 10)
        prob = cfl.SumOfNorms(cfl.losses.Quadratic(A), graph, lam)
        ssnal_cap = 2 if (n == 50000 and lam == KNN_LAM) else 200
        admm_cap = 1000 if n == 50000 else 20000
        rows += _compare(f"quadratic kNN10 λ={lam:g}", prob, ["ssnal", "admm"], with_ref=False,
                         opts={"admm": {"max_iter": admm_cap},
                               "ssnal": {"max_iter": ssnal_cap}})
    return rows


def case_moons_path(quick):
    from sklearn.datasets import make_moons

    A, _ = make_moons(n_samples=5000, noise=0.1, random_state=0)
    graph = cfl.graphs.knn(A, 15, phi=2.0)
    prob = cfl.SumOfNorms(cfl.losses.Quadratic(A), graph, 1.0)
    lams = np.round(np.arange(0, 551) * 0.2, 10)
    if quick:
        lams = lams[::10]
    path, total = _timed(lambda: cfl.son_path(prob, lams, method="ssnal", tol=1e-6,
                                              progress=False))
    times = path.time_s.tolist()
    ks = path.n_clusters.tolist()
    note = (f"{len(lams)} λ by convexfl.son_path (incl. λ̂ = {path.lam_hat:.4g}, an exact "
            f"SOCP); clusters {ks[0]}→{ks[-1]}; {int(path.converged.sum())}/{len(lams)} "
            f"certified; slowest λ {max(times):.2f} s")
    return [{"problem": f"moons path ({len(lams)} λ)", "N": 5000, "d": 2,
             "edges": graph.n_edges, "solver": "ssnal", "time_s": total, "rel_gap": None,
             "kkt": float(np.max(path.kkt_residual)), "converged": bool(path.converged.all()),
             "n_clusters": int(ks[-1]), "n_iter": len(lams), "speedup": None, "note": note,
             "path_clusters": ks, "path_lams": lams.tolist(), "path_times": times}]


COLUMNS = [("problem", "problem", "24s"), ("N", "N", "6d"), ("d", "d", "3d"),
           ("edges", "edges", "8d"), ("solver", "solver", ">15s"), ("time [s]", "time_s", "9.3f"),
           ("rel. gap", "rel_gap", "9.1e"), ("KKT", "kkt", "8.1e"), ("speed-up", "speedup", "9.1f"),
           ("K", "n_clusters", "5d")]


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 5))
    series = {}
    for r in rows:
        if r["problem"].startswith("quadratic"):
            key = f"{r['problem']} / {r['solver']}"
            series.setdefault(key, []).append((r["N"], r["time_s"], r["converged"]))
    colours = plt.get_cmap("tab20").colors
    failed = []
    for c, (key, pts) in enumerate(sorted(series.items())):
        pts.sort()
        ax.loglog([p[0] for p in pts], [p[1] for p in pts], "o-", color=colours[c % 20],
                  label=key)
        failed += [p for p in pts if not p[2]]
    if failed:
        ax.loglog([p[0] for p in failed], [p[1] for p in failed], "kx", ms=11, mew=2,
                  label="not certified (iteration cap)")
    ax.set_xlabel("N (users)")
    ax.set_ylabel("time [s]")
    ax.set_title("convexfl: time to certified KKT ≤ 1e-6 (cvxpy: tol 1e-9)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run(*, quick: bool, out: str, cases=CASES):
    os.makedirs(out, exist_ok=True)
    warmup = warm_up()
    rows = []
    for name in cases:
        print(f"[benchmarks] {name} ...", flush=True)
        rows += globals()[f"case_{name}"](quick)
    print()
    print_table(rows, COLUMNS)
    print(f"JIT warm-up (compile or load numba cache, not in the times above): {warmup:.2f} s")
    meta = {"quick": quick, "jit_warmup_s": warmup, "python": platform.python_version(),
            "machine": platform.machine(), "cpu_count": os.cpu_count(),
            "date": time.strftime("%Y-%m-%d %H:%M:%S")}
    with open(os.path.join(out, "results.json"), "w") as fh:
        json.dump({"meta": meta, "rows": rows}, fh, indent=1, default=float)
    plot(rows, os.path.join(out, "time_vs_n.png"))
    print(f"wrote {out}/results.json and {out}/time_vs_n.png")
    return rows
