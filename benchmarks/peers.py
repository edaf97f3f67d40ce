r"""Optional peer solvers for the benchmarks: CCMM (Touw, Groenen & Terada), through CCMMPy.

CCMMPy (C++ majorisation–minimisation convex clustering, pybind11 + Eigen, GPL-3) is not on
PyPI. Install it into the current environment from a copy of its source (a checkout, or a
bare git repository) with::

    python -m benchmarks setup-peers --ccmm-src PATH

which runs ``pip install`` on its ``ccmmpy/`` package (pip fetches pybind11, seaborn and
pandas from PyPI if missing). Its code never enters this repository; the benchmarks that
need it report "skipped" without it.

λ and weight conventions
------------------------
convexfl's (SON), each unordered pair of the graph ``E`` counted once:

.. math::

    F(X) = \sum_i \tfrac12 \|x_i - a_i\|^2 + λ \sum_{(i,j)∈E} w_{ij} \|x_i - x_j\| .

CCMM (``ccmmpy/cpp/src/ccmm.cpp``: ``CCMMConstants``, ``loss_fusions``) first centres the
data column-wise (``center=True``), ``A_c = A − 1 ā^T``, then minimises over centroids ``M``

.. math::

    L(M) = κ_ε \|A_c − M\|_F^2 + λ_C\, κ_{pen} \sum_{i<j} w_{ij} \|m_i - m_j\| ,

with ``κ_ε = 1/(2‖A_c‖_F²)`` and ``κ_pen = 1/(‖A_c‖_F S)``, ``S = Σ_{i<j} w_ij``, under its
default ``scale=True`` (``κ_ε = ½``, ``κ_pen = 1`` under ``scale=False``). Its sparse weight
matrix stores both ``(i, j)`` and ``(j, i)`` but the penalty and ``S`` run over ``i > j``: each
pair once, as in (SON). Since ``‖A_c‖_F² L(M) = ½‖A_c − M‖² + λ_C (‖A_c‖_F / S) Σ w‖m_i − m_j‖``
and (SON) is translation-equivariant (``X = M + 1 ā^T``), CCMM at ``λ_C`` solves (SON) at

.. math::

    λ = λ_C \, \|A_c\|_F / S \qquad (\text{scale=True}), \qquad λ = λ_C \quad (\text{scale=False}).

:func:`ccmm_lambda` is that conversion (SON → CCMM). CCMM builds its own Gaussian kNN weights
(scaled by the mean squared distance, plus a circulant chain); here it is given convexfl's
graph and weights instead (:func:`ccmm_weights`), so both solve the same problem.

CCMM's stopping test is a relative decrease of ``L`` below ``eps_conv`` (default 1e-6) or
``max_iter_conv`` iterations; it fuses two centroids once they are within
``eps_fusions = τ · median pairwise distance`` (``τ = 10⁻³``), after which they move as one.
Neither is a certificate: the benchmarks measure its answers by convexfl's KKT certificate.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import tempfile
import time

import numpy as np


def have_ccmm() -> bool:
    """Whether ``ccmmpy`` can be imported."""
    try:
        import ccmmpy  # noqa: F401
    except ImportError:
        return False
    return True


SKIPPED = "skipped: ccmmpy not installed (see benchmarks/peers.py)"


def ccmm_lambda(lam, A, weights, *, scale: bool = True):
    """CCMM's ``λ_C`` that solves (SON) at ``lam`` (module docstring).

    Parameters
    ----------
    lam : float or array
        λ in the (SON) convention.
    A : array (N, d)
        The data, uncentred (CCMM centres it).
    weights : array (E,)
        ``w_ij`` of every unordered pair of the graph, once each.
    scale : bool
        CCMM's ``scale`` option (its default ``True``).
    """
    if not scale:
        return np.asarray(lam, dtype=float) * 1.0
    A = np.asarray(A, dtype=float)
    norm = float(np.linalg.norm(A - A.mean(axis=0)))
    return np.asarray(lam, dtype=float) * float(np.sum(weights)) / norm


def ccmm_weights(graph):
    """A ``ccmmpy.SparseWeights`` holding ``graph``'s edges and weights.

    ``CCMM`` accepts only a ``SparseWeights`` instance (checked by exact type), built from
    data by kNN. This one skips that constructor and sets the two arrays CCMM reads:
    ``indices()`` with both orientations of every pair, ordered column-major (by second
    index, then first, as ``sparse_from_dok`` in ``ccmm.cpp`` expects), and ``values()``.
    """
    from ccmmpy import SparseWeights

    i, j = graph.edges.T
    keys = np.c_[np.r_[i, j], np.r_[j, i]]
    vals = np.r_[graph.weights, graph.weights]
    order = np.lexsort((keys[:, 0], keys[:, 1]))
    sw = SparseWeights.__new__(SparseWeights)
    sw._SparseWeights__keys = np.ascontiguousarray(keys[order])
    sw._SparseWeights__values = vals[order]
    sw._SparseWeights__n_obs = graph.n_nodes
    return sw


def ccmm_path(A, graph, lams, *, eps_conv: float = 1e-6, max_iter_conv: int = 5000,
              burnin_iter: int = 25, tau: float = 1e-3):
    """Run CCMM along the (SON) values ``lams`` (increasing), warm-started as CCMM does.

    ``eps_conv``, ``max_iter_conv``, ``burnin_iter`` (iterations before its step
    doubling ``M ← 2 M_MM − M`` starts) and ``tau`` (its fusion threshold
    ``τ · median distance``) are CCMM's options, at its defaults.

    Returns
    -------
    X : array (len(lams), N, d)
        Its solutions, in the coordinates of ``A`` (CCMM's centring undone).
    info : dict
        ``n_clusters``, ``n_iter``, ``loss`` per λ (CCMM's own counts and its scaled loss
        ``L``), ``time_s`` (wall clock around
        ``CCMM(...)`` and ``convex_clusterpath``: its set-up, e.g. the median distance for
        ``eps_fusions``, included) and ``lam_ccmm``.
    """
    from ccmmpy import CCMM

    A = np.asarray(A, dtype=float)
    lams = np.atleast_1d(np.asarray(lams, dtype=float))
    lam_c = ccmm_lambda(lams, A, graph.weights)
    W = ccmm_weights(graph)
    t = time.perf_counter()
    fit = CCMM(A, W, tau=tau, eps_conv=eps_conv, max_iter_conv=max_iter_conv,
               burnin_iter=burnin_iter).convex_clusterpath(lam_c, save_clusterpath=True)
    elapsed = time.perf_counter() - t
    n, d = A.shape
    X = fit.coordinates.reshape(len(lams), n, d) + A.mean(axis=0)
    return X, {"n_clusters": fit.info["clusters"].to_numpy(int),
               "n_iter": fit.info["iterations"].to_numpy(int),
               "loss": fit.info["loss"].to_numpy(float), "time_s": elapsed,
               "lam_ccmm": lam_c}


def _package_dir(src: str, tmp: str) -> str:
    """The directory holding CCMMPy's ``setup.py`` (a bare git repository is exported)."""
    if os.path.isfile(os.path.join(src, "HEAD")) and os.path.isdir(os.path.join(src, "objects")):
        archive = os.path.join(tmp, "src.tar")
        subprocess.run(["git", "-C", src, "archive", "-o", archive, "HEAD"], check=True)
        with tarfile.open(archive) as tar:
            tar.extractall(tmp, filter="data")
        src = tmp
    for cand in (src, os.path.join(src, "ccmmpy")):
        if os.path.isfile(os.path.join(cand, "setup.py")) and os.path.isdir(
                os.path.join(cand, "cpp")):
            return cand
    raise FileNotFoundError(f"--ccmm-src: no CCMMPy package (setup.py and cpp/) in {src!r} "
                            "or its ccmmpy/ subdirectory")


def setup_peers(argv=None) -> int:
    """``python -m benchmarks setup-peers --ccmm-src PATH``: pip-install CCMMPy from source."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m benchmarks setup-peers",
                                 description="install the optional peer CCMMPy from its source")
    ap.add_argument("--ccmm-src", required=True,
                    help="CCMMPy source: a checkout, its ccmmpy/ folder, or a bare git repo")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        pkg = _package_dir(os.path.abspath(args.ccmm_src), tmp)
        subprocess.run([sys.executable, "-m", "pip", "install", pkg], check=True)
    return 0
