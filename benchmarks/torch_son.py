r"""``method="torch"`` (network-lasso ADMM in PyTorch) against the numba methods, one run.

Case ``torch_son``: convex clustering (quadratic loss), λ in the (SON) convention, the
instances of :mod:`benchmarks.versus`: complete uniform graph with four planted clusters
(d = 5, λ = 12/N, K = 4), N ∈ {100, 400, 1000} (quick: {100, 400}), and kNN graphs
(k = 10, unit weights) of a 5-component mixture in d = 3, λ = 3, N ∈ {1000, 10⁴} (quick:
1000). Contenders: ``"torch"`` on the CPU in float64 and float32, ``"admm"`` (numba),
``"ssnal"`` (numba + scipy), and ``"torch"`` on CUDA (both precisions) when
``torch.cuda.is_available()``. Every one stops at a certified KKT residual ≤ 1e-6
(:func:`convexfl.certificates.kkt_residual`, the shared certificate; a float32 run that
stalls says so and is shown uncertified if its final polish fails).

Timing: wall clock around ``convexfl.solve``, the minimum of :data:`ROUNDS` rounds (quick:
one), after a warm-up that compiles the numba kernels and loads torch; "cert [s]" is the part
of it spent in the shared certified stopping test (``history["time_certify_s"]``: candidates,
polishes, certificates, on the host). "t/t(ssnal)" is the
row's time over SSNAL's on the same instance in the same run (compare ratios: the machine is
shared). The peer PyClustrPath (Wu & Yuan 2025, torch) has no installer; it is run beside
convexfl on identical problems by :mod:`benchmarks.pyclustrpath` from a checkout of its
source (docs/solvers.md).

``python -m benchmarks --cases torch_son [--quick]`` writes ``torch_results.json`` and
``torch_time_vs_n.png`` in ``--out``.
"""

from __future__ import annotations

import json
import os
import time

import numpy as np

import convexfl as cfl
from convexfl.datasets.armacki import planted_points

from ._report import print_table, time_vs_n_panel, yes_no
from .suite import warm_up
from .versus import KNN_LAM, _connected_mixture, _knn, _min_time

CASES = ("torch_son",)
TOL = 1e-6
ROUNDS = 2


def contenders():
    """``(name, method, options)``; the CUDA ones only where CUDA is available."""
    import torch

    out = [("ssnal", "ssnal", {}), ("admm", "admm", {}),
           ("torch cpu f64", "torch", {"device": "cpu"}),
           ("torch cpu f32", "torch", {"device": "cpu", "dtype": "float32"})]
    if torch.cuda.is_available():
        out += [("torch cuda f64", "torch", {"device": "cuda"}),
                ("torch cuda f32", "torch", {"device": "cuda", "dtype": "float32"})]
    return out


def instances(quick):
    """``(label, prob)`` of the case."""
    for n in (100, 400) if quick else (100, 400, 1000):
        A, _ = planted_points(4, n // 4, 5, separation=30.0, radius=1.0, random_state=0)
        yield "complete, planted", cfl.SumOfNorms(cfl.losses.Quadratic(A),
                                                  cfl.graphs.complete(n), 12.0 / n)
    for n in (1000,) if quick else (1000, 10000):
        A = _connected_mixture(n)
        yield "kNN10, mixture", cfl.SumOfNorms(cfl.losses.Quadratic(A), _knn(A, 10), KNN_LAM)


def _torch_warm_up():
    A = np.random.default_rng(0).standard_normal((6, 2))
    q = cfl.SumOfNorms(cfl.losses.Quadratic(A), cfl.graphs.complete(6), 0.2)
    t = time.perf_counter()
    for _, method, opts in contenders():
        cfl.solve(q, method=method, **opts)
    return time.perf_counter() - t


def case_torch_son(quick):
    rows = []
    for label, prob in instances(quick):
        print(f"[benchmarks]   {label}, N = {prob.n_users}", flush=True)
        new = []
        for name, method, opts in contenders():
            sol, t = _min_time(lambda p=prob, m=method, o=opts: cfl.solve(p, method=m, tol=TOL,
                                                                          **o),
                               1 if quick else ROUNDS)
            new.append({"problem": label, "N": prob.n_users, "edges": prob.graph.n_edges,
                        "lam": prob.lam, "contender": name, "time_s": t,
                        "kkt": sol.kkt_residual, "certified": bool(sol.converged),
                        "n_clusters": int(sol.n_clusters), "n_iter": int(sol.n_iter),
                        "certify_s": sol.history.get("time_certify_s"),
                        "note": sol.message})
        t_ref = next(r["time_s"] for r in new if r["contender"] == "ssnal")
        for r in new:
            r["vs_ssnal"] = r["time_s"] / t_ref
        rows += new
    return rows


COLUMNS = [("problem", "problem", "18s"), ("N", "N", "6d"), ("edges", "edges", "7d"),
           ("contender", "contender", ">15s"), ("time [s]", "time_s", "9.3f"),
           ("cert [s]", lambda r: r["certify_s"] or 0.0, "8.3f"), ("iter", "n_iter", "6d"),
           ("KKT", "kkt", "8.1e"), ("cert", lambda r: yes_no(r["certified"]), ">4s"),
           ("K", "n_clusters", "5d"), ("t/t(ssnal)", "vs_ssnal", "10.2f")]


def plot(rows, path):
    """Time vs N per contender, one panel per graph family; uncertified answers crossed."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    families = sorted({r["problem"] for r in rows})
    names = list(dict.fromkeys(r["contender"] for r in rows))
    colour = dict(zip(names, plt.get_cmap("tab10").colors, strict=False))
    fig, axes = plt.subplots(1, len(families), figsize=(11, 4.5), squeeze=False)
    for ax, family in zip(axes[0], families, strict=True):
        time_vs_n_panel(ax, rows, family, colour)
    axes[0, 0].set_ylabel("time [s] to certified KKT ≤ 1e-6")
    axes[0, 0].plot([], [], "kx", label="not certified")
    axes[0, 0].legend(fontsize=7)
    fig.suptitle("method='torch' vs the numba methods (convex clustering, one λ)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def run(*, quick: bool, out: str, cases=CASES):
    """Run the case; write ``torch_results.json`` and ``torch_time_vs_n.png`` in ``out``."""
    import torch

    os.makedirs(out, exist_ok=True)
    warm = warm_up(large=not quick) + _torch_warm_up()
    meta = {"quick": quick, "rounds": 1 if quick else ROUNDS, "tol": TOL,
            "date": time.strftime("%Y-%m-%d %H:%M:%S"), "cpu_count": os.cpu_count(),
            "torch": torch.__version__, "cuda": torch.cuda.is_available(),
            "blas_threads_in_solve": cfl.solvers.BLAS_THREADS, "warmup_s": warm,
            "pyclustrpath": "run by benchmarks.pyclustrpath (module docstring)"}
    rows = []
    for name in cases:
        print(f"[benchmarks] {name} ...", flush=True)
        rows += globals()[f"case_{name}"](quick)
    with open(os.path.join(out, "torch_results.json"), "w") as fh:
        json.dump({"meta": meta, "rows": rows}, fh, indent=1, default=float)
    print()
    print_table(rows, COLUMNS)
    print(f"warm-up (not in the times): {warm:.2f} s; times: min of {meta['rounds']} round(s) "
          "on a shared machine — compare ratios within this run")
    plot(rows, os.path.join(out, "torch_time_vs_n.png"))
    print(f"wrote {out}/torch_results.json and {out}/torch_time_vs_n.png")
    return rows
