r"""SSNAL on large kNN graphs: the Newton systems preconditioned by the exact sparse LU of
``C + σL_w``, one algebraic-multigrid V-cycle (pyamg) and the sparsified Hessian's ``L D Lᵀ``,
issue #18.

``python -m benchmarks.large_knn [--quick] [--out DIR] [--sizes N,N,...] [--max-iter K]
[--contenders NAME,...] [--regimes "many clusters",...]``
(also ``python -m benchmarks --cases large_knn``) prints, for each instance, each
contender's time to a certified KKT ≤ 1e-6 (one solve each, in one run), its certified KKT,
cluster count, ``sep/ftol`` (the answer's :func:`convexfl.clusters.separation`, the least
distance between two clusters that an edge joins, over its fusion tolerance: small values
mark answers whose clusters nearly meet, which a certificate must resolve), ``rel. gap``
(its objective ``F`` against the smallest of the instance's rows, ``(F − F_best)/|F_best|``),
outer / Newton / CG counts, preconditioner set-ups and
their time, and the time over the LU's; writes ``large_knn.json`` and ``large_knn.png``
under ``--out``.

Instances: the kNN10 graph (unit weights, connected) of the 5-component Gaussian mixture in
d = 3 of ``ccmm_single`` (``versus._connected_mixture``), N ∈ {10⁴, 2·10⁴, 5·10⁴, 10⁵}
(quick: 10⁴, 2·10⁴), at a few-cluster λ = 10, at λ = 3, 2, 1 and 0.3 between (N = 5·10⁴:
9241, 17513, 21887 and 31014 clusters) and at a many-cluster λ = 0.03 (~98 % of the users
apart); every λ in the (SON) convention (docs/math.md §1.1), converted for CCMM by
:func:`benchmarks.peers.ccmm_lambda`.
Contenders: SSNAL with ``newton_solver="lu"``, ``"amg"`` and ``"sparsified"``, and
``method="auto"`` (ADMM iterations, then SSNAL with its own choice); the peer CCMM
(:mod:`benchmarks.peers`, a row saying it is skipped where ``ccmmpy`` is not installed)
at its default stopping rule and at the tight one of :mod:`benchmarks.versus`, its
answer measured afterwards, outside its time, by convexfl's certificate (``KKT``,
``cert``; ``K``: the clusters of the certificate's partition). The LU is skipped where
its factor would exceed :data:`LU_MEMORY_MAX` (estimated from the fill measured at N ≤
5·10⁴, :func:`lu_bytes`). Run only when named in ``--contenders`` (:data:`OPT_IN`):
``"admm"`` (numba) and ``method="torch"`` on CUDA in float64 and float32, each at most 20000
ADMM iterations (rows say "skipped" without CUDA). ``--max-iter`` caps SSNAL's outer
iterations (default 200); a capped run is reported as it ends (``cert`` column).
No wall-clock limit applies.
"""

from __future__ import annotations

import argparse
import json
import os
import time

from tqdm import tqdm

import convexfl as cfl

from ._report import print_table, yes_no
from .peers import SKIPPED, ccmm_path, have_ccmm
from .versus import CCMM, _connected_mixture, _knn

CASES = ("large_knn",)
SIZES = (10_000, 20_000, 50_000, 100_000)
QUICK_SIZES = (10_000, 20_000)
LAMS = {"few clusters": 10.0, "λ = 3": 3.0, "λ = 2": 2.0, "λ = 1": 1.0, "λ = 0.3": 0.3,
        "many clusters": 0.03}
CONTENDERS = {"ssnal lu": {"method": "ssnal", "newton_solver": "lu"},
              "ssnal amg": {"method": "ssnal", "newton_solver": "amg"},
              "ssnal sparsified": {"method": "ssnal", "newton_solver": "sparsified"},
              "auto": {"method": "auto"},
              "admm": {"method": "admm", "max_iter": 20000},
              "torch cuda f64": {"method": "torch", "device": "cuda", "max_iter": 20000},
              "torch cuda f32": {"method": "torch", "device": "cuda", "dtype": "float32",
                                 "max_iter": 20000},
              **{name: CCMM[name] for name in ("ccmm default", "ccmm tight")}}
TOL = 1e-6
OPT_IN = ("admm", "torch cuda f64", "torch cuda f32")  # run only when named in --contenders
LU_MEMORY_MAX = 8 * 2**30  # bytes


def lu_bytes(n):
    """Estimated memory of the LU factor of ``C + σL`` on the kNN10 graph of ``n`` points in
    d = 3: ``2.1·10⁶ (n/10⁴)^1.57`` non-zeros (measured 2.1 M at 10⁴, 26.6 M at 5·10⁴), 12
    bytes each (value and row index)."""
    return 12 * 2.1e6 * (n / 1e4) ** 1.57


def _run(prob, opts, max_iter):
    cfl.certificates.clear_cache()  # no contender reuses another's factorisations
    opts = {"max_iter": max_iter, **opts}
    start = time.perf_counter()
    sol = cfl.solve(prob, tol=TOL, **opts)
    return sol, time.perf_counter() - start


def _separation(prob, X, labels, fuse_tol):
    """The answer's :func:`~convexfl.clusters.separation` over its fusion tolerance."""
    return cfl.clusters.separation(X, labels, prob.graph) / fuse_tol


def _row(regime, prob, name, sol=None, t=None, note=""):
    h = {} if sol is None else sol.history
    return {"regime": regime, "N": prob.n_users, "edges": prob.graph.n_edges,
            "lam": prob.lam, "contender": name, "time_s": t,
            "kkt": None if sol is None else sol.kkt_residual,
            "objective": None if sol is None else sol.objective,
            "certified": bool(sol is not None and sol.converged),
            "n_clusters": None if sol is None else sol.n_clusters,
            "separation": (None if sol is None
                           else _separation(prob, sol.X, sol.labels(), sol.fuse_tol)),
            "outer": None if sol is None else sol.n_iter,
            "newton": sum(h.get("newton", [])) if h else None, "cg": h.get("cg_total"),
            "n_factor": h.get("n_factor"), "precond_s": h.get("time_precond_s"),
            "newton_solver": h.get("newton_solver"), "note": note}


def _ccmm_row(regime, prob, A, name):
    """CCMM's row: its time, and its answer certified by convexfl (outside its time)."""
    if not have_ccmm():
        return _row(regime, prob, name, note=SKIPPED)
    X, info = ccmm_path(A, prob.graph, [prob.lam], **CCMM[name])
    cert = cfl.certificates.kkt_residual(prob, X[0])
    labels = cfl.clusters.labels(X[0], cert.fuse_tol, graph=prob.graph)
    row = _row(regime, prob, name, t=info["time_s"],
               note=f"{info['n_iter'][0]} MM iterations, its own K {info['n_clusters'][0]}")
    row.update(kkt=cert.kkt_residual, certified=bool(cert.kkt_residual <= TOL),
               objective=cert.objective,
               separation=_separation(prob, X[0], labels, cert.fuse_tol),
               n_clusters=int(labels.max()) + 1)
    return row


def _have_cuda():
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


def instance_rows(n, regime, lam, max_iter, contenders=None):
    A = _connected_mixture(n)
    prob = cfl.SumOfNorms(cfl.losses.Quadratic(A), _knn(A, 10), lam)
    rows = []
    for name, opts in CONTENDERS.items():
        if name not in (contenders or [c for c in CONTENDERS if c not in OPT_IN]):
            continue
        if opts.get("newton_solver") == "lu" and lu_bytes(n) > LU_MEMORY_MAX:
            rows.append(_row(regime, prob, name, note=f"skipped: LU factor ~"
                             f"{lu_bytes(n) / 2**30:.0f} GiB > {LU_MEMORY_MAX / 2**30:.0f} GiB"))
            continue
        if name.startswith("ccmm"):
            rows.append(_ccmm_row(regime, prob, A, name))
            continue
        if opts.get("device") == "cuda" and not _have_cuda():
            rows.append(_row(regime, prob, name, note="skipped: CUDA is not available"))
            continue
        sol, t = _run(prob, opts, max_iter)
        warm = "ADMM 100 it. → " if "admm_warm_up" in sol.history else ""
        note = "" if name != "auto" else f"{warm}{sol.method}, stage: {sol.stage}"
        rows.append(_row(regime, prob, name, sol, t, note))
    t_lu = next((r["time_s"] for r in rows if r["contender"] == "ssnal lu"), None)
    objectives = [r["objective"] for r in rows if r["objective"] is not None]
    best = min(objectives, default=None)
    for r in rows:
        r["vs_lu"] = None if t_lu is None or r["time_s"] is None else r["time_s"] / t_lu
        r["rel_gap"] = (None if r["objective"] is None
                        else (r["objective"] - best) / abs(best))
    return rows


COLUMNS = [("regime", "regime", "14s"), ("N", "N", "6d"), ("λ", "lam", "5g"),
           ("contender", "contender", ">10s"), ("time [s]", "time_s", "9.2f"),
           ("t/t(lu)", "vs_lu", "7.2f"), ("rel. gap", "rel_gap", "8.1e"),
           ("KKT", "kkt", "8.1e"),
           ("cert", lambda r: yes_no(r["certified"]), ">4s"), ("K", "n_clusters", "6d"),
           ("sep/ftol", "separation", "8.1e"),
           ("outer", "outer", "5d"), ("Newton", "newton", "6d"), ("CG", "cg", "6d"),
           ("set-ups", "n_factor", "7d"), ("set-up s", "precond_s", "8.2f")]


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 5))
    series = {}
    for r in rows:
        if r["time_s"] is not None:
            regime = r["regime"] if "λ" in r["regime"] else f"{r['regime']} (λ = {r['lam']:g})"
            key = f"{regime} / {r['contender']}"
            series.setdefault(key, []).append((r["N"], r["time_s"], r["certified"]))
    for key, pts in sorted(series.items()):
        pts.sort()
        ax.loglog([p[0] for p in pts], [p[1] for p in pts], "o-", label=key)
        bad = [p for p in pts if not p[2]]
        if bad:
            ax.loglog([p[0] for p in bad], [p[1] for p in bad], "kx", ms=11, mew=2)
    ax.set_xlabel("N (users), kNN10, d = 3")
    ax.set_ylabel("time [s] to certified KKT ≤ 1e-6 (x: not certified)")
    ax.set_title("kNN10 mixture: SSNAL (LU, AMG, sparsified Newton systems),\nauto and CCMM")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run(*, quick=False, out="benchmarks/results", sizes=None, max_iter=200, contenders=None,
        regimes=None):
    from .suite import warm_up

    os.makedirs(out, exist_ok=True)
    warm_up(large=True)
    sizes = sizes or (QUICK_SIZES if quick else SIZES)
    todo = [(n, regime, lam) for n in sizes for regime, lam in LAMS.items()
            if regimes is None or regime in regimes]
    rows = []
    for n, regime, lam in tqdm(todo, desc="large_knn", unit="instance"):
        rows += instance_rows(n, regime, lam, max_iter, contenders)
    print()
    print_table(rows, COLUMNS)
    meta = {"quick": quick, "sizes": list(sizes), "max_iter": max_iter, "tol": TOL,
            "cpu_count": os.cpu_count(), "date": time.strftime("%Y-%m-%d %H:%M:%S")}
    with open(os.path.join(out, "large_knn.json"), "w") as fh:
        json.dump({"meta": meta, "rows": rows}, fh, indent=1, default=float)
    plot(rows, os.path.join(out, "large_knn.png"))
    print(f"wrote {out}/large_knn.json and {out}/large_knn.png")
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.large_knn", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="N = 10⁴ and 2·10⁴ only")
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--sizes", default=None, help="comma-separated N (overrides --quick)")
    ap.add_argument("--max-iter", type=int, default=200, help="SSNAL's outer iterations")
    ap.add_argument("--contenders", default=None,
                    help=f"comma-separated, of {', '.join(CONTENDERS)} (default: all but "
                         f"{', '.join(OPT_IN)})")
    ap.add_argument("--regimes", default=None,
                    help=f"comma-separated, of {', '.join(LAMS)} (default: all)")
    a = ap.parse_args(argv)
    sizes = None if a.sizes is None else tuple(int(float(s)) for s in a.sizes.split(","))
    contenders = _names(a.contenders, CONTENDERS, "--contenders", ap)
    regimes = _names(a.regimes, LAMS, "--regimes", ap)
    run(quick=a.quick, out=a.out, sizes=sizes, max_iter=a.max_iter, contenders=contenders,
        regimes=regimes)


def _names(value, known, option, parser):
    if value is None:
        return None
    names = [v.strip() for v in value.split(",")]
    unknown = [v for v in names if v not in known]
    if unknown:
        parser.error(f"{option}: unknown {unknown}; expected some of {list(known)}")
    return names


if __name__ == "__main__":
    main()
