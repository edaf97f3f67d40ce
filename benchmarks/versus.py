r"""convexfl against the peer CCMM (:mod:`benchmarks.peers`), side by side in one run.

Every answer, convexfl's and CCMM's, is measured by the same yardstick: convexfl's KKT
certificate (:func:`convexfl.certificates.kkt_residual`) of its ``X`` at the same (SON) λ,
and the (SON) objective ``F(X)``. convexfl's methods stop at a certified residual ≤ 1e-6;
CCMM stops at a relative decrease of its loss below ``eps_conv``, shown at its default
(1e-6) and at a tight 1e-14 (``max_iter_conv`` 1e5), with whatever certificate that gives;
"ccmm tight, MM" also turns off its step doubling (``burnin_iter = max_iter_conv``: plain
majorisation–minimisation), which it needs on some kNN instances to converge at all.
On the path, "ccmm tight, τ = 1e-5" also lowers its fusion threshold (points closer than
``τ ·`` the median distance merge for good; default τ = 1e-3) a hundredfold: whether its
misses come from premature fusions, i.e. whether CCMM reaches convexfl's accuracy at all.
λ is always in the (SON) convention and converted for CCMM by
:func:`benchmarks.peers.ccmm_lambda`; CCMM is given convexfl's graph and weights.

Cases
-----
``ccmm_single``
    One λ, quadratic loss (convex clustering). Complete uniform graph: four planted
    clusters (:func:`convexfl.datasets.armacki.planted_points`, d = 5, radius 1,
    separation 30), λ = 12/N (K = 4), N ∈ {100, 200, 400, 1000} (quick: ≤ 400); cvxpy +
    Clarabel (tol 1e-9, one round) at N ≤ 200. kNN graph (k = 10, unit weights, connected):
    a 5-component Gaussian mixture in d = 3 (centres 2·N(0, I), noise 0.7, seed 0), λ = 3,
    N ∈ {400, 1000, 3000, 10⁴} (quick: 400). One labelled disconnected row: the mixture of
    :func:`benchmarks.suite._mixture` (centres 3·N(0, I)), whose kNN graph has 3 components
    (N = 400; full also N = 1000), λ = 3 — CCMM always connects its own weight graph, so
    this is outside its intended use, and it is shown because it stalls there.
``ccmm_path`` (and ``ccmm_path_20k``, on request: n = 20 000, one round)
    The moons path of :func:`benchmarks.suite.case_moons_path`: ``make_moons(5000,
    noise=0.1)``, kNN k = 15 with Gaussian weights φ = 2, the 551 λ 0, 0.2, …, 110 (quick:
    every 10th), convexfl by :func:`convexfl.son_path` (its time includes the exact fusion
    threshold λ̂, one SOCP), CCMM by one ``convex_clusterpath`` over the converted λ (both
    warm-start each λ from the previous one).

Timing: wall clock, the minimum of :data:`ROUNDS` rounds (cvxpy: one; on the path the
contenders take their rounds in turn, :func:`_interleaved_rounds`, each round's time in the
JSON's ``rounds_s``), around
``convexfl.solve`` / ``son_path`` and around CCMM's ``CCMM(...)`` + ``convex_clusterpath``
(its set-up, the median distance for its fusion threshold, included); certificates of CCMM's
answers are computed afterwards, outside its time (on the path with a flow search stopped
once "KKT ≤ 1e-6?" is decided; where it is not, the KKT column shows the largest certified
lower bound over λ: a residual at least that large is attained).
"rel. gap" is ``(F − F_best)/|F_best|`` with ``F_best`` the smallest objective on the
instance (the path: the largest gap over the λ > 0, where ``F_best > 0``). "t/t(auto)" is
the row's time over convexfl ``auto``'s, so on CCMM rows it is the ratio CCMM time /
convexfl time (> 1: convexfl faster). Timings on a shared machine are noisy:
compare ratios within one run.
"""

from __future__ import annotations

import json
import os
import time
import warnings

import numpy as np

import convexfl as cfl
from convexfl.datasets.armacki import planted_points

from ._report import print_table, time_vs_n_panel, yes_no
from .peers import SKIPPED, ccmm_path, have_ccmm
from .suite import _mixture, warm_up

CASES = ("ccmm_single", "ccmm_path")
LARGE = ("ccmm_path_20k",)  # only on request: one round of minutes per contender
TOL = 1e-6
ROUNDS = 3
METHODS = ("auto", "admm", "ssnal")
CCMM = {"ccmm default": {"eps_conv": 1e-6, "max_iter_conv": 5000},
        "ccmm tight": {"eps_conv": 1e-14, "max_iter_conv": 100_000},
        "ccmm tight, MM": {"eps_conv": 1e-14, "max_iter_conv": 100_000,
                           "burnin_iter": 100_000}}
CCMM_PATH = {**CCMM, "ccmm tight, τ = 1e-5": {**CCMM["ccmm tight"], "tau": 1e-5}}
KNN_LAM = 3.0


def _min_time(fn, rounds=ROUNDS):
    """``fn()``'s result in its fastest round and that round's wall-clock time; each round
    starts with convexfl's factorisation cache empty (:func:`convexfl.certificates.clear_cache`),
    as a first run would."""
    best, out = np.inf, None
    for _ in range(rounds):
        cfl.certificates.clear_cache()
        t = time.perf_counter()
        res = fn()
        t = time.perf_counter() - t
        if t < best:
            best, out = t, res
    return out, best


def _ccmm_timed(A, graph, lams, opts):
    """CCMM's path ``(X, info)`` and its ``time_s``."""
    X, info = ccmm_path(A, graph, lams, **opts)
    return (X, info), info["time_s"]


def _ccmm_min(A, graph, lams, opts, rounds=ROUNDS):
    """CCMM's answer and info, its ``time_s`` the smallest over ``rounds`` runs."""
    X, info = ccmm_path(A, graph, lams, **opts)
    info["time_s"] = min([info["time_s"]] + [ccmm_path(A, graph, lams, **opts)[1]["time_s"]
                                             for _ in range(rounds - 1)])
    return X, info


def _knn(A, k):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the disconnected instance is labelled in the table
        return cfl.graphs.knn(A, k)


def _connected_mixture(n):
    rng = np.random.default_rng(0)
    centres = rng.standard_normal((5, 3)) * 2.0
    return centres[rng.integers(0, 5, n)] + 0.7 * rng.standard_normal((n, 3))


def single_instances(quick):
    """``(label, A, graph, λ, with_cvxpy)`` of the ``ccmm_single`` case."""
    for n in (100, 200, 400) if quick else (100, 200, 400, 1000):
        A, _ = planted_points(4, n // 4, 5, separation=30.0, radius=1.0, random_state=0)
        yield "complete, planted", A, cfl.graphs.complete(n), 12.0 / n, n <= 200
    for n in (400,) if quick else (400, 1000, 3000, 10000):
        A = _connected_mixture(n)
        yield "kNN10, mixture", A, _knn(A, 10), KNN_LAM, False
    for n in (400,) if quick else (400, 1000):
        A = _mixture(n)
        g = _knn(A, 10)
        yield f"kNN10, DISCONNECTED ({g.n_components} comp.)", A, g, KNN_LAM, False


def _row(label, prob, contender, t, X, kkt, k, certified, note=""):
    return {"problem": label, "N": prob.n_users, "edges": prob.graph.n_edges,
            "lam": prob.lam, "contender": contender, "time_s": t,
            "objective": prob.objective(X), "kkt": kkt, "certified": bool(certified),
            "n_clusters": int(k), "note": note}


def _ccmm_single(label, A, prob):
    rows = []
    for name, opts in CCMM.items():
        X, info = _ccmm_min(A, prob.graph, [prob.lam], opts)
        kkt = cfl.certificates.kkt_residual(prob, X[0]).kkt_residual
        cap = " (hit max_iter_conv)" if info["n_iter"][0] >= opts["max_iter_conv"] else ""
        rows.append(_row(label, prob, name, info["time_s"], X[0], kkt, info["n_clusters"][0],
                         kkt <= TOL, f"{info['n_iter'][0]} MM iterations{cap}"))
    return rows


def _finish(rows):
    """Fill ``rel_gap`` (to the instance's best objective) and ``vs_auto`` (time ratio)."""
    best = min(r["objective"] for r in rows if r["objective"] is not None)
    t_auto = next(r["time_s"] for r in rows if r["contender"] == "convexfl auto")
    for r in rows:
        r["rel_gap"] = None if r["objective"] is None else \
            (r["objective"] - best) / abs(best)
        r["vs_auto"] = None if r["time_s"] is None else r["time_s"] / t_auto
    return rows


def _skipped_row(label, prob):
    return {"problem": label, "N": prob.n_users, "edges": prob.graph.n_edges,
            "lam": prob.lam, "contender": "ccmm", "time_s": None, "objective": None,
            "kkt": None, "certified": False, "n_clusters": None, "note": SKIPPED}


def _single(label, A, graph, lam, with_ref):
    """The rows of one ``ccmm_single`` instance."""
    prob = cfl.SumOfNorms(cfl.losses.Quadratic(A), graph, lam)
    rows = []
    for m in METHODS:
        sol, t = _min_time(lambda m=m: cfl.solve(prob, method=m, tol=TOL))
        rows.append(_row(label, prob, f"convexfl {m}", t, sol.X, sol.kkt_residual,
                         sol.n_clusters, sol.converged, "" if sol.converged else sol.message))
    if with_ref:
        ref, t = _min_time(lambda: cfl.solve(prob, method="cvxpy", tol=1e-9), 1)
        rows.append(_row(label, prob, "cvxpy+clarabel", t, ref.X, ref.kkt_residual,
                         ref.n_clusters, ref.converged, "one round"))
    rows += _ccmm_single(label, A, prob) if have_ccmm() else [_skipped_row(label, prob)]
    return _finish(rows)


def case_ccmm_single(quick):
    rows = []
    for label, A, graph, lam, with_ref in single_instances(quick):
        print(f"[benchmarks]   {label}, N = {A.shape[0]}", flush=True)
        rows += _single(label, A, graph, lam, with_ref)
    return rows


def moons_instance(quick, n=5000):
    """``(A, graph, lams)`` of :func:`benchmarks.suite.case_moons_path` (``n`` points)."""
    from sklearn.datasets import make_moons

    A, _ = make_moons(n_samples=n, noise=0.1, random_state=0)
    lams = np.round(np.arange(0, 551) * 0.2, 10)
    return A, cfl.graphs.knn(A, 15, phi=2.0), lams[::10] if quick else lams


def _path_row(prob, contender, t, objs, kkts, ks, note, kkt=None):
    """One path row; ``kkt`` (default: the largest of ``kkts``) goes in the table."""
    return {"problem": f"moons path ({len(objs)} λ)", "N": prob.n_users,
            "edges": prob.graph.n_edges, "lam": None, "contender": contender, "time_s": t,
            "objectives": list(map(float, objs)), "kkts": list(map(float, kkts)),
            "clusters": list(map(int, ks)),
            "kkt": float(np.max(kkts)) if kkt is None else float(kkt),
            "certified": bool(np.all(np.asarray(kkts) <= TOL)), "n_clusters": int(ks[-1]),
            "note": note}


def _interleaved_rounds(contenders, rounds):
    """``{name: (result of its fastest round, that round's seconds, every round's
    seconds)}`` for ``contenders`` (name → a function returning ``(result, seconds)``),
    timed in turn round after round: a drift of the shared machine's speed over the minutes
    of a run then reaches every contender alike, where timing one contender's rounds before
    the next one's gave it all to whichever ran in the slow minutes (make_moons n = 5000,
    2026-11-29: CCMM tight took 4.76 s in one run and 2.97 s in the next)."""
    out = {}
    for _ in range(rounds):
        for name, run in contenders.items():
            res, t = run()
            best = out.get(name)
            times = (best[2] if best else []) + [t]
            out[name] = (res, t, times) if best is None or t < best[1] else (*best[:2], times)
    return out


def _rounds_note(times):
    """``"; rounds 1.91/2.03/1.95 s"`` (nothing for one round)."""
    return "" if len(times) < 2 else "; rounds " + "/".join(f"{t:.2f}" for t in times) + " s"


def _timed_path(prob, lams):
    """convexfl's certified path and its wall-clock seconds, from an empty factorisation
    cache (:func:`_min_time`)."""
    path, t = _min_time(lambda: cfl.son_path(prob, lams, method="auto", tol=TOL,
                                             progress=False), 1)
    return path, t


def case_ccmm_path(quick, n=5000, rounds=ROUNDS):
    A, graph, lams = moons_instance(quick, n)
    prob = cfl.SumOfNorms(cfl.losses.Quadratic(A), graph, 1.0)
    contenders = {"convexfl auto": lambda: _timed_path(prob, lams)}
    if have_ccmm():
        for name, opts in CCMM_PATH.items():
            contenders[name] = lambda opts=opts: _ccmm_timed(A, graph, lams, opts)
    timed = _interleaved_rounds(contenders, rounds)
    path, t, times = timed["convexfl auto"]
    rows = [_path_row(prob, "convexfl auto", t, path.objective, path.kkt_residual,
                      path.n_clusters, f"{int(path.converged.sum())}/{len(lams)} certified; "
                      f"solves {path.time_s.sum():.2f} s; λ̂ = {path.lam_hat:.10g} "
                      f"({_lam_hat_source(path)}, in the time)")]
    rows[0]["rounds_s"] = times
    rows[0]["note"] += _rounds_note(times)
    if not have_ccmm():
        rows.append(dict(_skipped_row(rows[0]["problem"], prob), lam=None))
        return _finish_path(rows, lams)
    for name in CCMM_PATH:
        (X, info), _, times = timed[name]
        certs = [_decide(cfl.SumOfNorms(prob.loss, graph, lam), x)
                 for lam, x in zip(lams, X, strict=True)]
        kkts = [c.kkt_residual for c in certs]
        lower = [c.kkt_abs_lower / (c.grad_scale + c.grad_norm) for c in certs]
        above = int(np.sum(np.asarray(lower) > TOL))
        same_k = int(np.sum(info["n_clusters"] == path.n_clusters))
        rows.append(_path_row(prob, name, info["time_s"], [c.objective for c in certs], kkts,
                              info["n_clusters"],
                              f"KKT ≤ {TOL:g} at {int(np.sum(np.asarray(kkts) <= TOL))}, "
                              f"certainly > {TOL:g} at {above} of {len(lams)} λ; K as "
                              f"convexfl at {same_k}; {int(info['n_iter'].sum())} MM iterations"
                              + ("" if not above else "; KKT: its largest certified lower "
                                 "bound"), max(lower) if above else None))
        rows[-1]["rounds_s"] = times
        rows[-1]["note"] += _rounds_note(times)
    return _finish_path(rows, lams)


def _lam_hat_source(path):
    fb = path.meta.get("fusion_threshold", {})
    if fb.get("inputs", {}).get("method") == "split":
        lo, hi = fb["inputs"]["bracket"]
        return f"the last split's cut, bracket width {(hi - lo) / lo:.0e}"
    return "an SOCP"


def case_ccmm_path_20k(quick):
    """:func:`case_ccmm_path` at n = 20 000 (the same λ grid), one round per contender."""
    return case_ccmm_path(quick, n=20_000, rounds=1)


def _decide(prob, X):
    """convexfl's certificate of ``X``, its flow search stopped once "KKT ≤ TOL?" is decided
    (or after 1000 iterations): the path's 551 full certificates would take hours."""
    return cfl.certificates.kkt_residual(prob, X, target=TOL, max_iter=1000)


def _finish_path(rows, lams):
    """Path version of :func:`_finish`: the largest gap to the best per λ, over λ > 0."""
    live = [r for r in rows if r["time_s"] is not None]
    pos = np.asarray(lams) > 0  # F_best = 0 at λ = 0
    best = np.min([r["objectives"] for r in live], axis=0)
    t_auto = rows[0]["time_s"]
    for r in rows:
        r["rel_gap"] = None if r["time_s"] is None else \
            float(np.max((np.asarray(r["objectives"])[pos] - best[pos]) / best[pos]))
        r["vs_auto"] = None if r["time_s"] is None else r["time_s"] / t_auto
    return rows


COLUMNS = [("problem", "problem", "32s"), ("N", "N", "6d"), ("edges", "edges", "8d"),
           ("contender", "contender", ">15s"), ("time [s]", "time_s", "9.3f"),
           ("rel. gap", "rel_gap", "9.1e"), ("KKT", "kkt", "8.1e"),
           ("cert", lambda r: yes_no(r["certified"]), ">4s"), ("K", "n_clusters", "5d"),
           ("t/t(auto)", "vs_auto", "9.2f")]


PLOTTED = ("complete, planted", "kNN10, mixture")


def plot(rows, path):
    """Time vs N per contender, one panel per instance family of :data:`PLOTTED`;
    uncertified answers (KKT > 1e-6) crossed. Returns whether there was anything to plot."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in rows if r["time_s"] is not None]
    paths = sorted({r["problem"] for r in rows if r["problem"].startswith("moons path")})
    families = [f for f in PLOTTED if any(r["problem"] == f for r in rows)] + paths
    if not families:
        return False
    rows = [r for r in rows if r["problem"] in families]
    names = sorted({r["contender"] for r in rows})
    colour = dict(zip(names, plt.get_cmap("tab10").colors, strict=False))
    fig, axes = plt.subplots(1, len(families), figsize=(5.5 * len(families), 4.8),
                             squeeze=False)
    for ax, family in zip(axes[0], families, strict=True):
        time_vs_n_panel(ax, rows, family, colour)
        ax.legend(fontsize=7)
    axes[0, 0].set_ylabel("time [s] (min of rounds)")
    axes[0, 0].plot([], [], "kx", label=f"KKT > {TOL:g} (convexfl's certificate)")
    axes[0, 0].legend(fontsize=7)
    fig.suptitle("convexfl vs CCMM (SON λ), one λ per instance or a whole path;\nevery "
                 "answer measured by convexfl's certificate", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def run(*, quick: bool, out: str, cases=CASES):
    """Run the peer cases; write ``ccmm_results.json`` and ``ccmm_time_vs_n.png`` in ``out``."""
    os.makedirs(out, exist_ok=True)
    warmup = warm_up(large=not quick)
    meta = {"quick": quick, "rounds": ROUNDS, "tol": TOL, "ccmm": CCMM,
            "ccmm_installed": have_ccmm(), "date": time.strftime("%Y-%m-%d %H:%M:%S"),
            "cpu_count": os.cpu_count(), "jit_warmup_s": warmup}
    rows = []
    for name in cases:
        print(f"[benchmarks] {name} ...", flush=True)
        new = globals()[f"case_{name}"](quick)
        print_table(new, COLUMNS)  # each case as it finishes
        rows += new
        with open(os.path.join(out, "ccmm_results.json"), "w") as fh:
            json.dump({"meta": meta, "rows": rows}, fh, indent=1, default=float)
    print()
    print_table(rows, COLUMNS)
    print(f"JIT warm-up (not in the times above): {warmup:.2f} s; times: min of {ROUNDS} "
          f"rounds ({', '.join(LARGE)}: one) on a shared machine — compare ratios within "
          "this run")
    png = plot(rows, os.path.join(out, "ccmm_time_vs_n.png"))
    print(f"wrote {out}/ccmm_results.json" + (f" and {out}/ccmm_time_vs_n.png" if png else ""))
    return rows
