r"""The peer PyClustrPath (Wu & Yuan 2025, convex clustering in PyTorch) beside convexfl on
identical problems, on the CPU and (where ``torch.cuda.is_available()``) on CUDA.

``python -m benchmarks.pyclustrpath --src DIR [--out DIR] [--rounds N] [--sizes N,...]
[--problems mixture,digits] [--peer-budget S] [--long S] [--src-commit HASH] [--quick]``

``DIR`` is the root of a checkout of its public source (github D3IntOpt/PyClustrPath; the
folder that holds ``pyclustrpath/``). Nothing of it is copied here: it is imported from
``DIR`` at run time. Without ``--src``, or when its import fails, one line says why it is
skipped and the convexfl rows still run, on the same problems (the kNN weights rebuilt by
:func:`peer_graph`).

Importing it without building anything
--------------------------------------
It has no installer. ``pyclustrpath/utils.py`` imports ``cholespy`` (PyPI; must be
installed) and two modules that are not built here; :func:`load_peer` puts stubs for them
in ``sys.modules`` whose every attribute raises ``RuntimeError("stub: <name> is not built
here")``, so a benchmarked path that used them would fail loudly:

- ``cusparse_extension`` (its CUDA incomplete Cholesky, ``pyclustrpath/IChol_CUDA``):
  called only by ADMM's ``admm_sub_method="cg"``; the ADMM here runs its default
  ``"cholesky"`` (``cholespy``).
- ``knn_cuda``, imported by ``data_processor.py`` whenever CUDA is available, called only
  by ``DataProcessor(device="cuda")`` (its ``KNN``, imported by name at import, is a
  placeholder that raises when called). The processor is built with ``device="cpu"``
  (scikit-learn kNN), then moved by its own ``to_device``; as that method moves the tensors
  but not the ``device`` attribute that ADMM reads (``torch.eye(n, device=data.device)``),
  the attribute is set too.
- ``pyclustrpath.solvers.ssnal`` (only where needed): it loads its inner solver ``ssncg``
  from ``ssncg.cpython-310.pyc``, the only form it ships in, which other Pythons refuse
  ("bad magic number"), so ``import pyclustrpath`` fails on 3.11/3.12. When the bytecode's
  magic number is not this interpreter's, a stub module stands in whose ``SSNAL`` raises
  when made: its SSNAL is not benchmarked.

Its ``global_variables`` sets ``CUDA_VISIBLE_DEVICES=0`` and ``CUDA_HOME`` at import (both
restored here right after the import) and expects its demos' ``gv._init(args)`` (which
writes log files): :func:`load_peer` sets the two globals that ``_init`` would
(``use_coo = 0``, ``solver_method``) and its logger to WARNING; its solvers print nothing
with their default ``print_yes = 0``.

Conventions: its γ is λ = γ·m of (SON)
--------------------------------------
Its ``DataProcessor`` takes the data as (d, n) columns ``a_i``, divides them by their
largest pairwise distance ``m`` (``max_dist``), builds kNN weights on the divided data
``b_i = a_i/m`` (k + 1 nearest points with the point itself, k = 10; ``w_ij = exp(−φ
‖b_i − b_j‖²)``, φ = 0.5; the union of the lists, ``unique_pairs`` i < j and
``weightVector``) and, for each γ, solves (``admm.py``, ``ama.py``: ``weightVec = γ ·
weightVector``; primal objective ``½‖X − data.X‖² + weightVec·‖A X‖``)

.. math::  G_γ(Y) = \tfrac12 \sum_i \|y_i − b_i\|^2 + γ \sum_{(i,j)} w_{ij} \|y_i − y_j\| ,

returning ``m Y``. With ``X = mY`` and ``b_i = a_i/m``:

.. math::  m^2 G_γ(X/m) = \tfrac12 \sum_i \|x_i − a_i\|^2 + γ m \sum_{(i,j)} w_{ij}
           \|x_i − x_j\| = F_{λ}(X), \quad λ = γ m ,

convexfl's (SON) objective (``Quadratic(A)``: ``½‖x − a_i‖²``) on the same edges and
weights. So ``X`` solves (SON) at λ = γ·m (:func:`son_lambda`) exactly when ``X/m``
solves its problem, and the graph here is built from its own ``unique_pairs`` and
``weightVector`` (:func:`same_problem`): both solve the identical problem. Checked in each
run: its own primal objective times m² equals ``prob.objective`` of its answer (JSON
``obj_check`` of its rows, the largest printed under the table: ~1e-15 here), and
``tests/test_benchmarks_pyclustrpath.py`` checks the identity on random points.

What is timed
-------------
- PyClustrPath's ADMM and fast AMA (``ConvexClusterSolver("admm" | "fast_ama",
  gamma_list=[γ], device=...)``) at its default stopping rule (``stop_tol`` = its class
  default 1e-5: ADMM stops when its relative primal/dual infeasibilities and its relative
  duality gap are below it, fast AMA when its relative duality gap is) and a tight one
  (1e-6, its demos' setting). Wall clock around ``solver.solve(processor)`` only (CUDA
  synchronised before the clock stops); the processor's construction (on the CPU) and
  move are reported separately ("prep" lines, JSON ``instances``). Its answer — its last
  iterate times m, which ``solve()`` returns when it stopped by its rule (at ``max_iter``
  ``solve()`` returns zeros) — is certified outside its time by
  ``cfl.certificates.kkt_residual`` at λ = γ·m: KKT, certified (≤ 1e-6), objective,
  and K from the certificate's partition.
- **Its ADMM as shipped does not move X**: ``sparse_cholesky_solve(solver, rhs.T, X.T)``
  lets cholespy write into ``X.T.contiguous()`` — a copy, as ``X.T`` is not contiguous —
  and ``admm.py`` drops the returned copy, so ``X`` stays the data for every iteration
  (and ``solve()`` returns zeros after ``max_iter``). A short probe (``PROBE_ITERS``
  iterations) checks this on each instance and device and is reported as the
  "admm as shipped" row (no time). Where it holds, the timed ADMM rows run with a
  one-line write-back wrapper around its ``sparse_cholesky_solve`` (the result copied
  into the ``X.T`` it was given; :func:`_write_back`), labelled "admm+fix": its
  algorithm as intended.
- A time budget per PyClustrPath row (``--peer-budget`` s, default
  :data:`PEER_BUDGET_S`): two calibration runs (``CAL_ITERS`` iterations, stopping rule
  off, untimed; they also warm it up) measure its set-up and its time per later iteration
  (its first ADMM iterations change σ and refactor often), and ``max_iter`` is lowered
  from its default (ADMM 20000, fast AMA 100000) to what fits the budget where needed
  (approximately: its later iterations can be slower); the note says
  "max_iter capped" and whether the cap was hit. Where the default rule's run hits the
  cap, the tight rule's is not run (it would only hit it again; its row says so).
- convexfl on the same problem: ``cfl.solve(prob, method=m, tol=1e-6, **opts)`` for
  ``ssnal``, ``auto`` (the default method), ``admm`` and ``torch`` (float64 and float32)
  on each device; each after ``cfl.certificates.clear_cache()``; a warm-up first (every
  one on 200-point versions of the instances: numba compiles, torch and CUDA load; then
  ``ssnal`` and ``auto`` on the instances themselves, for the kernels of large problems).
- Each row: the minimum of ``--rounds`` rounds, except that a row whose round took over
  ``--long`` s (default :data:`LONG_S`) or hit its budget is not repeated. "rel. gap":
  the row's objective over the best of its instance's rows, minus 1.

Instances: scikit-learn's bundled digits (n = 1797, d = 64; no network) and the
5-component Gaussian mixture in d = 3 of :func:`benchmarks.versus._connected_mixture` at
n = 2000 (``--sizes`` sets the sizes, e.g. ``2000,10000``), each at a many-cluster and a
few-cluster γ (:data:`GAMMAS`; K in the table). Its ``DataProcessor`` holds several dense n × n
matrices and a dense n × E node-arc matrix before making it sparse (about 10 GB at
n = 10⁴, E ≈ 6n), so n stays ≤ 10⁴.

Writes ``pyclustrpath.json`` (rows, instances and meta: versions, CUDA device, its git
commit when readable; rewritten after each γ, ``"complete": false`` until the end) and
``pyclustrpath.png`` in ``--out``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import inspect
import io
import json
import logging
import os
import platform
import subprocess
import sys
import time
import types
import warnings

import numpy as np

import convexfl as cfl

from ._report import print_table, yes_no
from .versus import _connected_mixture

TOL = 1e-6
K_NEIGHBOURS, PHI = 10, 0.5  # its DataProcessor's k and compute_weight's phi (defaults)
GAMMAS = {"mixture": (0.05, 0.2), "digits": (0.03, 1.0)}  # (many clusters, few clusters)
QUICK_GAMMAS = {"mixture": (0.05, 0.2), "digits": (1.0,)}
PEER_TOLS = (("default", None), ("tight", 1e-6))  # None: its class default (1e-5)
PEER_METHODS = ("admm", "fast_ama")
PEER_BUDGET_S = 5.0
LONG_S = 5.0
PROBE_ITERS, CAL_ITERS = 20, (20, 80)
STUBS = {"cusparse_extension": (), "knn_cuda": ("KNN",)}  # module: names imported by name


# ---------------------------------------------------------------------------- conventions

def son_lambda(gamma, max_dist):
    """λ of (SON) for PyClustrPath's ``γ`` on data whose largest pairwise distance is
    ``max_dist``, on the same edges and weights: ``λ = γ · max_dist`` (module docstring)."""
    return float(gamma) * float(max_dist)


def max_pairwise_distance(A, block=1024):
    """The largest distance between two rows of ``A`` (its ``max_dist``), by blocks."""
    from scipy.spatial.distance import cdist

    A = np.asarray(A, dtype=float)
    return max(float(cdist(A[i:i + block], A).max()) for i in range(0, len(A), block))


def peer_graph(A, k=K_NEIGHBOURS, phi=PHI):
    """``(max_dist, edges, weights)`` of PyClustrPath's kNN weights, rebuilt from their
    definition (module docstring): on ``b_i = a_i / max_dist``, the ``k + 1`` nearest
    points of each (scikit-learn, itself included), the union of the lists as pairs
    ``i < j`` in row-major order, ``w_ij = exp(−φ ‖b_i − b_j‖²)``."""
    from sklearn.neighbors import NearestNeighbors

    A = np.asarray(A, dtype=float)
    m = max_pairwise_distance(A)
    B = A / m
    dist, idx = NearestNeighbors(n_neighbors=k + 1).fit(B).kneighbors(B)
    i = np.repeat(np.arange(len(A)), k + 1)
    j = idx.ravel()
    keep = i != j
    lo, hi = np.minimum(i, j)[keep], np.maximum(i, j)[keep]
    w = np.exp(-phi * dist.ravel()[keep] ** 2)
    order = np.lexsort((hi, lo))
    lo, hi, w = lo[order], hi[order], w[order]
    first = np.ones(len(lo), dtype=bool)
    first[1:] = (lo[1:] != lo[:-1]) | (hi[1:] != hi[:-1])
    return m, np.column_stack([lo[first], hi[first]]), w[first]


def same_problem(A, edges, weights, gamma, max_dist):
    """convexfl's (SON) problem identical to PyClustrPath's at ``γ``: ``Quadratic(A)`` on
    its edges and weights, ``λ = γ · max_dist``."""
    graph = cfl.graphs.Graph(len(A), np.asarray(edges, dtype=np.int64),
                             np.asarray(weights, dtype=float), kind="pyclustrpath kNN")
    return cfl.SumOfNorms(cfl.losses.Quadratic(A), graph, son_lambda(gamma, max_dist))


# ---------------------------------------------------------------------------- its import

class _Stub(types.ModuleType):
    """A module not built here: each attribute raises ``RuntimeError``, except the names it
    is told are imported by name (``from knn_cuda import KNN`` runs at import), which are
    placeholders that raise when called."""

    def __init__(self, name, imported=()):
        super().__init__(name)
        for attr in imported:
            setattr(self, attr, _StubCallable(f"{name}.{attr}"))

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise RuntimeError(f"stub: {self.__name__} is not built here (needed {name!r})")


class _StubCallable:
    def __init__(self, name):
        self._name = name

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"stub: {self._name} is not built here")

    def __getattr__(self, name):
        raise RuntimeError(f"stub: {self._name} is not built here (needed {name!r})")


def _ssncg_loads(src):
    pyc = os.path.join(src, "pyclustrpath", "solvers", "ssncg.cpython-310.pyc")
    try:
        with open(pyc, "rb") as fh:
            return fh.read(4) == importlib.util.MAGIC_NUMBER
    except OSError:
        return False


def load_peer(src):
    """Import PyClustrPath from ``src`` with the stubs of the module docstring; returns
    ``(package, stubs)`` or a string saying why not."""
    if not src:
        return "no --src given"
    src = os.path.abspath(src)
    if not os.path.isfile(os.path.join(src, "pyclustrpath", "__init__.py")):
        return f"no pyclustrpath/ package under --src {src!r}"
    stubs = list(STUBS)
    for name, imported in STUBS.items():
        sys.modules[name] = _Stub(name, imported)
    if not _ssncg_loads(src):
        ssnal = _Stub("pyclustrpath.solvers.ssnal")

        class SSNAL:
            def __init__(self, *args, **kwargs):
                raise RuntimeError("stub: pyclustrpath.solvers.ssnal is not built here (its "
                                   "ssncg ships as Python 3.10 bytecode only)")

        ssnal.SSNAL = SSNAL
        sys.modules[ssnal.__name__] = ssnal
        stubs.append(ssnal.__name__)
    env = {k: os.environ.get(k) for k in ("CUDA_VISIBLE_DEVICES", "CUDA_HOME")}
    sys.path.insert(0, src)
    try:
        import pyclustrpath
        import pyclustrpath.solvers.admm  # noqa: F401  (its module the write-back wraps)
    except Exception as exc:  # its import fails for reasons of its own: say which
        sys.path.remove(src)
        for name in [m for m in sys.modules if m == "pyclustrpath" or
                     m.startswith("pyclustrpath.")]:
            del sys.modules[name]
        return f"its import failed: {type(exc).__name__}: {exc}"
    finally:
        for key, value in env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    pyclustrpath.gv.use_coo = 0  # what its demos' gv._init sets
    pyclustrpath.gv.solver_method = "benchmark"  # read by ADMM.solve_iter; set by _init
    pyclustrpath.gv.logger.setLevel(logging.WARNING)
    return pyclustrpath, stubs


def _git_commit(src):
    try:
        out = subprocess.run(["git", "-C", src, "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=10)
        return out.stdout.strip() or None if out.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


@contextlib.contextmanager
def _quiet():
    """Its prints (``DataProcessor.preprocess``) and torch's sparse-CSR beta warnings."""
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        yield


@contextlib.contextmanager
def _write_back(peer):
    """Its ADMM with the X update reaching X (module docstring): the result of its
    ``sparse_cholesky_solve`` copied into the ``x`` it was given, for the duration."""
    admm = sys.modules["pyclustrpath.solvers.admm"]
    inner = admm.sparse_cholesky_solve

    def solve(solver, b, x=None):
        out = inner(solver, b, x)
        if x is not None and out is not x:
            x.copy_(out)
        return out

    admm.sparse_cholesky_solve = solve
    try:
        yield
    finally:
        admm.sparse_cholesky_solve = inner


def _sync(device):
    if device == "cuda":
        import torch
        torch.cuda.synchronize()


def _defaults(peer, method):
    """Its class defaults of ``stop_tol`` and ``max_iter`` for ``method``."""
    cls = {"admm": peer.solvers.ADMM, "fast_ama": peer.solvers.FAST_AMA}[method]
    params = {}
    for klass in cls.__mro__:
        if "__init__" in vars(klass):
            for name, p in inspect.signature(klass.__init__).parameters.items():
                params.setdefault(name, p.default)
    return params["stop_tol"], params["max_iter"]


def _peer_solve(peer, proc, method, gamma, device, **params):
    """Its ``solve()`` timed (CUDA synchronised); returns ``(seconds, returned (d, n),
    last iterate (d, n), info)`` — ``solve_iter``'s output captured by a wrapper on the
    solver instance."""
    solver = peer.ConvexClusterSolver(method, gamma_list=[gamma], device=device, **params)
    seen = []
    inner = solver.solve_iter

    def solve_iter(*args, **kwargs):
        out = inner(*args, **kwargs)
        seen.append(out)
        return out

    solver.solve_iter = solve_iter
    with _quiet():
        _sync(device)
        t = time.perf_counter()
        returned = solver.solve(proc)
        _sync(device)
        t = time.perf_counter() - t
    out = seen[-1]
    info = out[3] if method == "admm" else out[2]
    return t, returned[0], out[0], info


def peer_processor(peer, A):
    """Its ``DataProcessor`` built on the CPU; returns ``(processor, seconds)``."""
    import torch

    with _quiet():
        t = time.perf_counter()
        proc = peer.DataProcessor(X=torch.tensor(np.ascontiguousarray(A.T), dtype=torch.float64),
                                  k=K_NEIGHBOURS, device="cpu")
        t = time.perf_counter() - t
    return proc, t


def move(proc, device):
    """Its own ``to_device``, plus the ``device`` attribute it leaves behind; seconds."""
    t = time.perf_counter()
    with _quiet():
        proc.to_device(device)
    proc.device = device
    _sync(device)
    return time.perf_counter() - t


def _certify(prob, X, m):
    """convexfl's certificate of its (d, n) answer in its divided units."""
    Xn = np.ascontiguousarray(X.detach().cpu().numpy().T) * m
    cert = cfl.certificates.kkt_residual(prob, Xn)
    k = int(cfl.clusters.labels(Xn, cert.fuse_tol, graph=prob.graph).max()) + 1
    return Xn, cert, k


def _fail_row(contender, device, exc, **extra):
    return {"contender": contender, "device": device, "time_s": None, "n_iter": None,
            "kkt": None, "certified": False, "objective": None, "n_clusters": None,
            "note": f"failed: {type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
            if str(exc) else f"failed: {type(exc).__name__}", **extra}


def probe_row(peer, proc, prob, gamma, device):
    """Its ADMM as shipped for ``PROBE_ITERS`` iterations: does X leave the data?"""
    m = float(proc.max_dist)
    _, returned, last, info = _peer_solve(peer, proc, "admm", gamma, device,
                                          max_iter=PROBE_ITERS)
    stays = bool((last == proc.X).all())
    _, cert, k = _certify(prob, last, m)
    note = (f"probe, {PROBE_ITERS} iterations: X never leaves the data (cholespy writes into "
            "a copy of X.T); timed rows: admm+fix" if stays
            else f"probe, {PROBE_ITERS} iterations: X moves; timed rows as shipped")
    row = {"contender": "pcp admm as shipped", "device": device, "time_s": None,
           "n_iter": int(info["iter"]), "kkt": cert.kkt_residual,
           "certified": bool(cert.kkt_residual <= TOL), "objective": cert.objective,
           "n_clusters": k, "note": note}
    return row, stays


def peer_rows(peer, proc, prob, gamma, device, rounds, budget, long_s, fix):
    """Its ADMM and fast AMA at both stopping rules on ``device`` (module docstring)."""
    m = float(proc.max_dist)
    rows = []
    for method in PEER_METHODS:
        fixed = method == "admm" and fix
        name = "admm+fix" if fixed else method
        ctx = (lambda: _write_back(peer)) if fixed else contextlib.nullcontext
        default_tol, default_iter = _defaults(peer, method)
        try:
            with ctx():  # calibration: its stopping rule off
                (a, b), (t_a, t_b) = CAL_ITERS, [
                    _peer_solve(peer, proc, method, gamma, device, stop_tol=0.0,
                                max_iter=n)[0] for n in CAL_ITERS]
            per_iter = max(t_b - t_a, 1e-3 * t_b) / (b - a)
            cap = int(min(default_iter, b + max(0.0, budget - t_b) / per_iter))
        except Exception as exc:  # noqa: BLE001  (a failing row must not lose the others)
            rows += [_fail_row(f"pcp {name} {label}", device, exc)
                     for label, _ in PEER_TOLS]
            continue
        hit_before = None
        for label, tol in PEER_TOLS:
            tol = default_tol if tol is None else tol
            contender = f"pcp {name} {tol:.0e}"
            if hit_before is not None and tol < hit_before:  # would only hit it again
                rows.append({"contender": contender, "device": device, "time_s": None,
                             "n_iter": None, "kkt": None, "certified": False,
                             "objective": None, "n_clusters": None, "stop_tol": tol,
                             "max_iter": cap, "note": f"not run: at stop_tol {hit_before:g} "
                             f"it already hit max_iter {cap}"})
                continue
            try:
                best = None
                for _ in range(rounds):
                    with ctx():
                        res = _peer_solve(peer, proc, method, gamma, device, stop_tol=tol,
                                          max_iter=cap)
                    if best is None or res[0] < best[0]:
                        best = res
                    if res[0] > long_s or res[3]["iter"] >= cap:
                        break
                t, returned, last, info = best
                _, cert, k = _certify(prob, last, m)
                theirs = float(info["prim_obj" if method == "admm" else "primobj"]) * m * m
                hit = int(info["iter"]) >= cap
                if hit:
                    hit_before = tol
                note = [f"{label} rule (stop_tol {tol:g})"]
                if cap < default_iter:
                    note.append(f"max_iter capped {default_iter} → {cap} "
                                f"({'hit' if hit else 'not hit'})")
                elif hit:
                    note.append(f"hit its max_iter {cap}")
                if hit:
                    note.append("certified: its last iterate (solve() returns zeros)")
                else:
                    same = np.array_equal(returned.detach().cpu().numpy(),
                                          last.detach().cpu().numpy() * m)
                    if not same:
                        note.append("solve()'s answer differs from its last iterate")
                rows.append({"contender": contender, "device": device, "time_s": t,
                             "n_iter": int(info["iter"]), "kkt": cert.kkt_residual,
                             "certified": bool(cert.kkt_residual <= TOL),
                             "objective": cert.objective, "n_clusters": k,
                             "stop_tol": tol, "max_iter": cap, "hit_cap": hit,
                             "obj_check": abs(theirs - cert.objective) / abs(cert.objective),
                             "note": "; ".join(note)})
            except Exception as exc:  # noqa: BLE001
                rows.append(_fail_row(contender, device, exc))
    return rows


# ---------------------------------------------------------------------------- convexfl

def convexfl_contenders(devices):
    out = [("convexfl ssnal", "cpu", "ssnal", {}), ("convexfl auto", "cpu", "auto", {}),
           ("convexfl admm", "cpu", "admm", {})]
    for dev in devices:
        out += [("convexfl torch f64", dev, "torch", {"device": dev}),
                ("convexfl torch f32", dev, "torch", {"device": dev, "dtype": "float32"})]
    return out


def convexfl_rows(prob, devices, rounds, long_s):
    rows = []
    for name, dev, method, opts in convexfl_contenders(devices):
        try:
            best, sol = np.inf, None
            for _ in range(rounds):
                cfl.certificates.clear_cache()
                t = time.perf_counter()
                res = cfl.solve(prob, method=method, tol=TOL, **opts)
                t = time.perf_counter() - t
                if t < best:
                    best, sol = t, res
                if t > long_s:
                    break
            rows.append({"contender": name, "device": dev, "time_s": best,
                         "n_iter": int(sol.n_iter), "kkt": sol.kkt_residual,
                         "certified": bool(sol.converged), "objective": sol.objective,
                         "n_clusters": int(sol.n_clusters), "note": sol.message})
        except Exception as exc:  # noqa: BLE001  (a MemoryError, a CUDA error: a row)
            rows.append(_fail_row(name, dev, exc))
        finally:
            if dev == "cuda":
                import torch
                torch.cuda.empty_cache()
    return rows


def warm_up(devices, problems=("mixture",), quick=False, sizes=(200,)):
    """Compile the numba kernels and load torch (and CUDA): every convexfl contender on a
    200-point version of each problem at its γ's, then ``ssnal`` and ``auto`` on the
    instances themselves (``sizes``), whose kernels depend on the size: at N = 2000 SSNAL
    chooses its sparsified Newton systems and LDLᵀ solves, and the flow search its FISTA,
    none of which the 200-point problems reach (on an empty numba cache the first timed
    rows of mixture N = 2000, γ = 0.05, took 2.53 s for ``ssnal`` and 5.0 s for ``auto``,
    against ~0.9 s each once compiled)."""
    t = time.perf_counter()
    every = convexfl_contenders(devices)
    runs = [(inst, every) for inst in instances([200], problems, quick, n_digits=200)]
    size_dependent = [c for c in every if c[2] in ("ssnal", "auto")]
    runs += [(inst, size_dependent) for inst in instances(sizes, problems, quick)]
    for (_, A, gammas), contenders in runs:
        m, edges, w = peer_graph(A)
        for gamma in gammas:
            prob = same_problem(A, edges, w, gamma, m)
            for _, _, method, opts in contenders:
                try:
                    cfl.solve(prob, method=method, tol=TOL, **opts)
                except Exception:  # noqa: BLE001, S110  (its own row will say so)
                    pass
    return time.perf_counter() - t


# ---------------------------------------------------------------------------- the run

def instances(sizes, problems, quick, n_digits=None):
    """``(problem, A, γ's)``; ``n_digits``: the first rows of digits only (the warm-up)."""
    gammas = QUICK_GAMMAS if quick else GAMMAS
    if "mixture" in problems:
        for n in sizes:
            yield "mixture", _connected_mixture(n), gammas["mixture"]
    if "digits" in problems:
        from sklearn.datasets import load_digits
        yield "digits", load_digits().data[:n_digits].astype(float), gammas["digits"]


def _graph_check(A, proc):
    """Its edges and weights against :func:`peer_graph`'s (a consistency check)."""
    m, edges, w = peer_graph(A)
    theirs = proc.unique_pairs.cpu().numpy()
    same_edges = theirs.shape == edges.shape and bool(np.all(theirs == edges))
    wdiff = (float(np.max(np.abs(proc.weightVector.cpu().numpy().ravel() - w)))
             if same_edges else None)
    return {"peer_graph_same_edges": same_edges, "peer_graph_max_weight_diff": wdiff,
            "max_dist_rel_diff": abs(float(proc.max_dist) - m) / m}


def run(*, src, out, rounds, sizes, problems=("mixture", "digits"), quick=False,
        budget=PEER_BUDGET_S, long_s=LONG_S, src_commit=None, devices=None):
    """``devices``: where the torch contenders and PyClustrPath run (default: the CPU, and
    CUDA where available); convexfl's numba rows always run on the CPU."""
    import torch

    t_start = time.perf_counter()
    os.makedirs(out, exist_ok=True)
    if devices is None:
        devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    if "cuda" in devices and not torch.cuda.is_available():
        raise ValueError("devices: 'cuda' was asked for, but torch.cuda.is_available() is "
                         "False")
    loaded = load_peer(src)
    peer, stubs = (None, []) if isinstance(loaded, str) else loaded
    if peer is None:
        print(f"[benchmarks] PyClustrPath skipped: {loaded}; the convexfl rows run alone",
              flush=True)
    warm = warm_up(devices, problems, quick, sizes)
    meta = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "tol": TOL, "rounds": rounds,
            "quick": quick, "peer_budget_s": budget, "long_s": long_s, "warmup_s": warm,
            "python": platform.python_version(), "numpy": np.__version__,
            "torch": torch.__version__, "torch_threads": torch.get_num_threads(),
            "cuda": torch.cuda.is_available(),
            "device_name": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
            "cpu_count": os.cpu_count(), "k": K_NEIGHBOURS, "phi": PHI,
            "pyclustrpath": loaded if peer is None else {
                "src": os.path.abspath(src), "commit": src_commit or _git_commit(src),
                "stubs": stubs}}
    from importlib.metadata import PackageNotFoundError, version
    for mod in ("scipy", "scikit-learn", "numba", "cholespy"):
        try:
            meta[mod] = version(mod)
        except PackageNotFoundError:
            meta[mod] = None
    rows, inst = [], []
    for name, A, gammas in instances(sizes, problems, quick):
        n, d = A.shape
        info = {"problem": name, "N": n, "d": d}
        proc = None
        if peer is not None:
            try:
                proc, info["prep_s"] = peer_processor(peer, A)
                m = float(proc.max_dist)
                edges = proc.unique_pairs.cpu().numpy()
                w = proc.weightVector.cpu().numpy().ravel()
                info.update(_graph_check(A, proc))
                info["graph"] = "its unique_pairs and weightVector"
            except Exception as exc:  # noqa: BLE001
                print(f"[benchmarks]   {name}: its DataProcessor failed ({exc!r}); "
                      "the convexfl rows use peer_graph", flush=True)
                proc = None
        if proc is None:
            m, edges, w = peer_graph(A)
            info["graph"] = "peer_graph (rebuilt from its definition)"
        info.update(max_dist=m, edges=int(len(edges)))
        inst.append(info)
        prep = f", its prep {info['prep_s']:.2f} s" if "prep_s" in info else ""
        print(f"[benchmarks] {name}: N = {n}, d = {d}, {len(edges)} edges, "
              f"max_dist = {m:.4g}{prep}", flush=True)
        for gamma in gammas:
            prob = same_problem(A, edges, w, gamma, m)
            print(f"[benchmarks]   γ = {gamma} (λ = {prob.lam:.4g})", flush=True)
            new = convexfl_rows(prob, devices, rounds, long_s)
            if proc is not None:
                for dev in devices:
                    try:
                        info.setdefault("move_s", {})[dev] = move(proc, dev)
                        probe, stays = probe_row(peer, proc, prob, gamma, dev)
                        new.append(probe)
                        new += peer_rows(peer, proc, prob, gamma, dev, rounds, budget, long_s,
                                         fix=stays)
                    except Exception as exc:  # noqa: BLE001
                        new.append(_fail_row("pcp (all)", dev, exc))
                    finally:
                        if dev == "cuda":
                            torch.cuda.empty_cache()
                move(proc, "cpu")
            objs = [r["objective"] for r in new if r["objective"] is not None]
            best = min(objs) if objs else None
            for r in new:
                r.update(problem=name, N=n, d=d, gamma=gamma, lam=prob.lam,
                         edges=prob.graph.n_edges,
                         rel_gap=None if r["objective"] is None or best is None
                         else (r["objective"] - best) / abs(best))
            rows += new
            _write(out, meta, inst, rows, wall_s=time.perf_counter() - t_start,
                   complete=False)  # so far: a run cut short keeps its rows
        del proc
    wall = time.perf_counter() - t_start
    _write(out, meta, inst, rows, wall_s=wall, complete=True)
    print()
    if peer is None:
        print(f"PyClustrPath skipped: {loaded}")
    print_table(rows, COLUMNS)
    for i in inst:
        if "prep_s" in i:
            moves = ", ".join(f"{k} {v:.2f} s" for k, v in i.get("move_s", {}).items())
            wd = i["peer_graph_max_weight_diff"]
            print(f"prep (not in its times): {i['problem']} N = {i['N']}: DataProcessor "
                  f"{i['prep_s']:.2f} s, to_device {moves}; same edges as peer_graph: "
                  f"{i['peer_graph_same_edges']}"
                  + ("" if wd is None else f" (weights within {wd:.1e})"))
    checks = [r["obj_check"] for r in rows if r.get("obj_check") is not None]
    if checks:
        print(f"its primal objective × max_dist² against convexfl's objective of its answer "
              f"(λ = γ·max_dist): relative difference ≤ {max(checks):.1e}")
    print(f"warm-up {warm:.1f} s; whole run {wall:.1f} s; times: min of {rounds} round(s) "
          f"(rows over {long_s:g} s once); pcp budget {budget:g} s a row")
    if rows:
        plot(rows, os.path.join(out, "pyclustrpath.png"))
    print(f"wrote {out}/pyclustrpath.json" + (f" and {out}/pyclustrpath.png" if rows else ""))
    return rows


def _write(out, meta, inst, rows, **extra):
    with open(os.path.join(out, "pyclustrpath.json"), "w") as fh:
        json.dump({"meta": {**meta, **extra}, "instances": inst, "rows": rows}, fh, indent=1,
                  default=float)


COLUMNS = [("problem", "problem", "7s"), ("N", "N", "5d"), ("γ", "gamma", "5g"),
           ("dev", "device", "4s"), ("contender", "contender", ">24s"),
           ("time [s]", "time_s", "8.3f"), ("iter", "n_iter", "6d"),
           ("KKT", "kkt", "8.1e"), ("cert", lambda r: yes_no(r["certified"]), ">4s"),
           ("K", "n_clusters", "5d"), ("rel. gap", "rel_gap", "8.1e")]


def plot(rows, path):
    """Time per contender, a panel per instance and γ (log scale); uncertified hatched."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    keys = list(dict.fromkeys((r["problem"], r["N"], r["gamma"]) for r in rows))
    ncol = min(2, len(keys))
    nrow = -(-len(keys) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(7 * ncol, 0.3 * 16 * nrow + 1),
                             squeeze=False)
    for ax, key in zip(axes.ravel(), keys, strict=False):
        sel = [r for r in rows if (r["problem"], r["N"], r["gamma"]) == key
               and r["time_s"] is not None]
        y = np.arange(len(sel))
        colours = ["tab:blue" if r["contender"].startswith("convexfl") else "tab:orange"
                   for r in sel]
        ax.barh(y, [r["time_s"] for r in sel], color=colours, edgecolor="k", linewidth=0.3,
                hatch=None)
        for yi, r in zip(y, sel, strict=True):
            if not r["certified"]:
                ax.barh(yi, r["time_s"], color="none", edgecolor="k", hatch="xx",
                        linewidth=0.3)
        ax.set_yticks(y)
        ax.set_yticklabels([f"{r['contender']} [{r['device']}] K={r['n_clusters']}"
                            + (" (max_iter cap)" if r.get("hit_cap") else "")
                            for r in sel], fontsize=7)
        ax.invert_yaxis()
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())  # no crowded labels
        k = next((r["n_clusters"] for r in sel if r["certified"]), None)
        ax.set_title(f"{key[0]} N={key[1]}, γ={key[2]} (certified K={k})", fontsize=9)
        ax.set_xlabel("time [s]; hatched: KKT > 1e-6 (convexfl's certificate)", fontsize=8)
    for ax in axes.ravel()[len(keys):]:
        ax.axis("off")
    fig.suptitle("PyClustrPath (orange) and convexfl (blue) on identical problems")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.pyclustrpath",
                                 description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--src", default=None, help="root of a PyClustrPath checkout (the folder "
                    "holding pyclustrpath/); without it only the convexfl rows run")
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--rounds", type=int, default=None,
                    help="rounds per row, the minimum taken (default 2; quick 1)")
    ap.add_argument("--sizes", default=None,
                    help="comma-separated mixture sizes (default 2000; quick 500)")
    ap.add_argument("--problems", default="mixture,digits",
                    help="comma-separated subset of mixture,digits")
    ap.add_argument("--peer-budget", type=float, default=None,
                    help=f"seconds per PyClustrPath row (default {PEER_BUDGET_S:g}; quick 2)")
    ap.add_argument("--long", type=float, default=LONG_S,
                    help="a row whose round took longer is not repeated")
    ap.add_argument("--src-commit", default=None,
                    help="its git commit, recorded in the JSON (default: git rev-parse in --src)")
    ap.add_argument("--quick", action="store_true",
                    help="mixture N = 500, digits at its few-cluster γ only, one round")
    ap.add_argument("--devices", default=None,
                    help="comma-separated subset of cpu,cuda for the torch contenders and "
                    "PyClustrPath (default: cpu, and cuda where available)")
    a = ap.parse_args(argv)
    devices = None
    if a.devices is not None:
        devices = [d.strip() for d in a.devices.split(",") if d.strip()]
        if not devices or any(d not in ("cpu", "cuda") for d in devices):
            ap.error(f"--devices: expected some of cpu,cuda, got {a.devices!r}")
    rounds = a.rounds if a.rounds is not None else 1 if a.quick else 2
    if rounds < 1:
        ap.error(f"--rounds: expected at least 1, got {rounds}")
    problems = [p.strip() for p in a.problems.split(",") if p.strip()]
    bad = [p for p in problems if p not in GAMMAS]
    if bad or not problems:
        ap.error(f"--problems: unknown {bad}; expected some of {list(GAMMAS)}")
    sizes = a.sizes or ("500" if a.quick else "2000")
    try:
        sizes = [int(float(s)) for s in sizes.split(",") if s.strip()]
    except ValueError:
        ap.error(f"--sizes: expected comma-separated integers, got {a.sizes!r}")
    budget = a.peer_budget if a.peer_budget is not None else 2.0 if a.quick else PEER_BUDGET_S
    return run(src=a.src, out=a.out, rounds=rounds, sizes=sizes, problems=problems,
               quick=a.quick, budget=budget, long_s=a.long, src_commit=a.src_commit,
               devices=devices)


if __name__ == "__main__":
    main()
