r"""The peer PyClustrPath (Wu & Yuan 2025, convex clustering in PyTorch) beside convexfl, on
the same problems, on the CPU and (where CUDA is available) the GPU; issue #18.

``python -m benchmarks.pyclustrpath --src DIR [--out DIR] [--rounds 2] [--sizes 1000,2000]``

``DIR`` is the root of a checkout of its public source (github D3IntOpt/PyClustrPath, the
folder holding ``pyclustrpath/``); nothing of it is copied here, it is imported from there
at run time. It has no installer, and three of its imports are not built here, so the run
puts stubs in ``sys.modules`` that raise if anything of them is used:

- ``cusparse_extension``, its CUDA incomplete Cholesky (``IChol_CUDA``), imported by
  ``pyclustrpath/utils.py``: used only by its ``admm_sub_method="cg"`` path; the ADMM run
  here uses its default ``"cholesky"`` (``cholespy``, a PyPI package, which must be
  installed);
- ``knn_cuda``, imported by ``data_processor.py`` whenever CUDA is available: used only to
  build the kNN graph on a CUDA device; the graph is built on the CPU (scikit-learn) and the
  processor then moved with its own ``to_device``;
- ``pyclustrpath.solvers.ssnal``, whose import loads its inner solver ``ssncg`` from Python
  3.10 bytecode (the only form it ships in; other Pythons refuse it): its ``SSNAL`` is a
  class that raises when made, so its SSNAL is not run.

Conventions. Its ``DataProcessor`` divides the data by their largest pairwise distance
``m``, builds kNN weights ``w_ij = exp(−½ d_ij²)`` (k = 10 neighbours, ``phi = 0.5``, on the
divided data, the union of the neighbour lists) and solves, for each ``γ``,

.. math::

    \min_Y \tfrac12 \sum_i \|y_i − a_i/m\|^2 + γ \sum_{(i,j)} w_{ij} \|y_i − y_j\| ,

returning ``X = mY``. Multiplied by ``m²`` that is the (SON) problem of convexfl on the
points ``a_i`` with λ = γ·m on the same edges and weights (:func:`son_lambda`): the graph
here is built from its ``unique_pairs`` and ``weightVector``, so both solve the identical
problem, and its answer is certified by :func:`convexfl.certificates.kkt_residual` at that
λ, outside its time (its own stopping rule is a relative KKT/gap test, ``stop_tol``).

Rows: its ADMM at ``stop_tol`` 1e-6 (its demos' setting; ``--peer-max-iter`` iterations
at most, default its 20000) on each device; convexfl's
``ssnal``, ``admm`` and ``torch`` (float64) with ``tol=1e-6`` (certified); each the minimum of
``--rounds`` runs, convexfl's factorisation cache cleared before each. Instances: the
kNN10 mixture in d = 3 (``versus._connected_mixture``) at each size and, with
``--digits``, scikit-learn's bundled digits (n = 1797, d = 64), each at a few-cluster and a
many-cluster γ. Its
processor holds dense n × n and n × E matrices, so sizes stay ≤ ~5000 here.
Writes ``pyclustrpath.json`` and ``pyclustrpath.png`` in ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import types

import numpy as np

import convexfl as cfl

from ._report import print_table, yes_no
from .versus import _connected_mixture

TOL = 1e-6
STUBS = ("cusparse_extension", "knn_cuda")
GAMMAS = {"mixture": (0.2, 0.02), "digits": (0.5, 0.05)}  # few clusters, many clusters


def son_lambda(gamma, max_dist):
    """λ of (SON) (unit user weights) for PyClustrPath's ``γ`` on data whose largest pairwise
    distance is ``max_dist`` (module docstring): ``λ = γ · max_dist``."""
    return float(gamma) * float(max_dist)


class _Stub(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise RuntimeError(f"stub: {self.__name__}.{name} is not built here")


def _unbuilt(name):
    """A stand-in for ``name`` that raises when called."""

    def call(*args, **kwargs):
        raise RuntimeError(f"stub: {name} is not built here")

    return call


def load_peer(src):
    """Import PyClustrPath from ``src`` with the stubs of the module docstring; returns the
    package, or a string saying why not."""
    if not src or not os.path.isdir(os.path.join(src, "pyclustrpath")):
        return f"no PyClustrPath source at {src!r} (--src)"
    for name in STUBS:
        sys.modules.setdefault(name, _Stub(name))
    # ``from knn_cuda import KNN`` runs at its import on any CUDA machine: a name that raises
    # only when used
    vars(sys.modules["knn_cuda"]).setdefault("KNN", _unbuilt("knn_cuda.KNN"))
    ssnal = types.ModuleType("pyclustrpath.solvers.ssnal")

    class SSNAL:
        def __init__(self, *args, **kwargs):
            raise RuntimeError("stub: PyClustrPath's SSNAL needs its Python 3.10 bytecode")

    ssnal.SSNAL = SSNAL
    sys.modules.setdefault(ssnal.__name__, ssnal)
    sys.path.insert(0, os.path.abspath(src))
    try:
        import logging

        import pyclustrpath

        gv = pyclustrpath.gv  # what its demos' gv._init(args) sets
        gv.use_coo, gv.solver_method, gv.data_name = 0, "admm", "benchmark"
        gv.logger.setLevel(logging.WARNING)
        return pyclustrpath
    except Exception as exc:  # its import fails for reasons of its own: say which
        return f"PyClustrPath import failed: {type(exc).__name__}: {exc}"


def instance(peer, name, n):
    """``(A (n, d), processor)``: the data and PyClustrPath's processor (built on the CPU)."""
    import torch

    if name == "digits":
        from sklearn.datasets import load_digits
        A = load_digits().data.astype(float)
    else:
        A = _connected_mixture(n)
    proc = peer.DataProcessor(X=torch.tensor(A.T.copy(), dtype=torch.float64), k=10,
                              device="cpu")
    return A, proc


def same_problem(A, proc, gamma):
    """convexfl's (SON) problem identical to PyClustrPath's at ``γ`` (module docstring)."""
    edges = proc.unique_pairs.cpu().numpy().astype(np.int64)
    weights = proc.weightVector.cpu().numpy().ravel().astype(float)
    graph = cfl.graphs.from_edges(edges, weights, n_nodes=A.shape[0])
    return cfl.SumOfNorms(cfl.losses.Quadratic(A), graph, son_lambda(gamma, proc.max_dist))


def _sync(device):
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def peer_row(peer, proc, prob, gamma, device, rounds, max_iter=20000):
    """PyClustrPath's ADMM at ``γ`` on ``device``, its answer certified by convexfl."""
    best, X = np.inf, None
    for _ in range(rounds):
        proc.to_device(device)
        proc.device = device  # its to_device moves the tensors only; its ADMM reads this
        solver = peer.ConvexClusterSolver("admm", gamma_list=[gamma], device=device,
                                          stop_tol=TOL, max_iter=max_iter)
        _sync(device)
        start = time.perf_counter()
        out = solver.solve(proc)
        _sync(device)
        best = min(best, time.perf_counter() - start)
        X = out[0].cpu().numpy().T
    cert = cfl.certificates.kkt_residual(prob, X)
    k = int(cfl.clusters.labels(X, cert.fuse_tol, graph=prob.graph).max()) + 1
    return {"contender": f"pyclustrpath admm {device}", "time_s": best, "max_iter": max_iter,
            "kkt": cert.kkt_residual, "certified": bool(cert.kkt_residual <= TOL),
            "objective": cert.objective, "n_clusters": k, "note": "certified by convexfl"}


def convexfl_rows(prob, devices, rounds):
    rows = []
    for name, opts in [("ssnal", {}), ("admm", {}),
                       *((f"torch {d}", {"method": "torch", "device": d}) for d in devices)]:
        opts = {"method": name, **opts}
        best, sol = np.inf, None
        for _ in range(rounds):
            cfl.certificates.clear_cache()
            start = time.perf_counter()
            sol = cfl.solve(prob, tol=TOL, **opts)
            best = min(best, time.perf_counter() - start)
        rows.append({"contender": f"convexfl {name}", "time_s": best, "kkt": sol.kkt_residual,
                     "certified": bool(sol.converged), "objective": sol.objective,
                     "n_clusters": int(sol.n_clusters), "note": sol.message})
    return rows


def run(*, src, out, rounds, sizes, digits=False, peer_max_iter=20000):
    import torch

    os.makedirs(out, exist_ok=True)
    peer = load_peer(src)
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    warm_A = _connected_mixture(60)
    warm = cfl.SumOfNorms(cfl.losses.Quadratic(warm_A), cfl.graphs.knn(warm_A, 10), 0.3)
    for method in ("ssnal", "admm", "torch"):
        cfl.solve(warm, method=method)
    rows = []
    if isinstance(peer, str):
        print(f"[benchmarks] PyClustrPath skipped: {peer}")
    todo = [("mixture", n) for n in sizes] + ([("digits", 1797)] if digits else [])
    for name, n in todo:
        if isinstance(peer, str):
            break
        A, proc = instance(peer, name, n)
        for gamma in GAMMAS[name]:
            prob = same_problem(A, proc, gamma)
            print(f"[benchmarks]   {name} n = {n}, γ = {gamma} (λ = {prob.lam:.4g})", flush=True)
            new = convexfl_rows(prob, devices, rounds)
            for device in devices:
                try:
                    new.append(peer_row(peer, proc, prob, gamma, device, rounds,
                                        peer_max_iter))
                except Exception as exc:  # one failing row must not lose the others
                    new.append({"contender": f"pyclustrpath admm {device}", "time_s": None,
                                "kkt": None, "certified": False, "objective": None,
                                "n_clusters": None, "note": f"{type(exc).__name__}: {exc}"})
            best = min(r["objective"] for r in new if r["objective"] is not None)
            t_ref = next(r["time_s"] for r in new if r["contender"] == "convexfl ssnal")
            for r in new:
                r.update(problem=name, N=n, d=A.shape[1], gamma=gamma, lam=prob.lam,
                         edges=prob.graph.n_edges,
                         rel_gap=None if r["objective"] is None
                         else (r["objective"] - best) / abs(best),
                         vs_ssnal=None if r["time_s"] is None else r["time_s"] / t_ref)
            rows += new
            _write(out, rows, peer, src, rounds)
            print_table(new, COLUMNS)
    _write(out, rows, peer, src, rounds)
    if rows:
        print()
        print_table(rows, COLUMNS)
        plot(rows, os.path.join(out, "pyclustrpath.png"))
    print(f"wrote {out}/pyclustrpath.json")
    return rows


def _write(out, rows, peer, src, rounds):
    """The JSON so far (each finished instance is kept if a later one is interrupted)."""
    import torch

    meta = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "tol": TOL, "rounds": rounds,
            "torch": torch.__version__, "cuda": torch.cuda.is_available(),
            "device_name": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
            "cpu_count": os.cpu_count(), "peer": peer if isinstance(peer, str) else src}
    with open(os.path.join(out, "pyclustrpath.json"), "w") as fh:
        json.dump({"meta": meta, "rows": rows}, fh, indent=1, default=float)


COLUMNS = [("problem", "problem", "8s"), ("N", "N", "5d"), ("γ", "gamma", "5g"),
           ("contender", "contender", ">24s"), ("time [s]", "time_s", "9.3f"),
           ("t/t(ssnal)", "vs_ssnal", "10.2f"), ("rel. gap", "rel_gap", "8.1e"),
           ("KKT", "kkt", "8.1e"), ("cert", lambda r: yes_no(r["certified"]), ">4s"),
           ("K", "n_clusters", "5d")]


def plot(rows, path):
    """Time per instance and contender (log scale); uncertified answers hatched."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = list(dict.fromkeys((r["problem"], r["N"], r["gamma"]) for r in rows))
    names = list(dict.fromkeys(r["contender"] for r in rows))
    fig, ax = plt.subplots(figsize=(max(7, 1.6 * len(keys)), 4.5))
    width = 0.8 / len(names)
    colours = plt.get_cmap("tab10").colors
    for j, name in enumerate(names):
        for i, key in enumerate(keys):
            r = next((r for r in rows if (r["problem"], r["N"], r["gamma"]) == key
                      and r["contender"] == name), None)
            if r is None or r["time_s"] is None:
                continue
            ax.bar(i + j * width, r["time_s"], width, color=colours[j % 10],
                   hatch=None if r["certified"] else "xx", edgecolor="k", linewidth=0.3,
                   label=name if i == 0 else None)
    ax.set_xticks(np.arange(len(keys)) + 0.4 - width / 2)
    ax.set_xticklabels([f"{p}\nN={n}, γ={g}" for p, n, g in keys], fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("time [s] (hatched: KKT > 1e-6 by convexfl's certificate)")
    ax.set_title("PyClustrPath (ADMM) and convexfl on identical problems")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.pyclustrpath", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", default=None, help="root of a PyClustrPath checkout")
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--sizes", default="1000,2000", help="comma-separated mixture sizes")
    ap.add_argument("--digits", action="store_true", help="also the digits (slow for its ADMM)")
    ap.add_argument("--peer-max-iter", type=int, default=20000,
                    help="its ADMM's iteration limit (its default 20000)")
    a = ap.parse_args(argv)
    if a.rounds < 1:
        ap.error(f"--rounds: expected at least 1, got {a.rounds}")
    run(src=a.src, out=a.out, rounds=a.rounds,
        sizes=[int(float(s)) for s in a.sizes.split(",")], digits=a.digits,
        peer_max_iter=a.peer_max_iter)


if __name__ == "__main__":
    main()
