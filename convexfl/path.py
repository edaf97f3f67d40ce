r"""Solution paths of the sum-of-norms problem: λ grids, warm starts, fusion events, merge
table and scipy linkage (Armacki et al. App. A; Hocking et al. 2011 "clusterpath").

For each λ of a grid (in the canonical (SON) convention)

.. math::

    X^*(λ) = \arg\min_X \sum_i f_i(x_i) + λ \sum_{(i,j)∈E} w_{ij}\,\|x_i - x_j\| ,

solved in increasing order of λ, each solve warm-started from the previous solution when the
method accepts it (``warm_start=`` a :class:`~convexfl.solvers.Solution`, or ``X0=``). The
default grid is ``0`` followed by a geometric grid ending at the exact fusion threshold λ̂
(:func:`convexfl.bounds.fusion_threshold`), above which there is one cluster.

**Clusters at a λ** are the connected components of ``{(i, j): ‖x_i − x_j‖ ≤ fuse_tol}``
with the solver's own ``fuse_tol`` (tied to its accuracy: ``1e-5 (1 + max‖x_i‖)`` for the
cvxpy reference, exact fusions for the splitting methods), or the ``fuse_tol`` passed to
:func:`son_path`.

**Fusion events and the dendrogram.** With uniform weights the path is usually
agglomerative, but with general weights clusters can *split* as λ grows. The path reports
this (``monotone``, ``splits``, a warning) instead of hiding it. The merge table and the
scipy linkage use, for every pair, the first grid λ from which the pair stays fused to the
end of the grid (the subdominant ultrametric of the path): for a monotone path these are
exactly the fusion events; for a non-monotone one, a split pair counts as fused only from
its last fusion on.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import math
import os
import time
import warnings
from dataclasses import dataclass, field

import numpy as np

from ._validation import as_float_array, as_int, as_scalar, check_partition
from .problems import SumOfNorms

__all__ = ["SolutionPath", "son_path", "default_grid", "fl_metrics"]

_ARRAYS = ("lambdas", "X", "labels", "n_clusters", "objective", "kkt_residual", "n_iter",
           "time_s", "converged", "fuse_tol")


@dataclass
class SolutionPath:
    """A solution path: one solution per λ (increasing), with its table and fusion events.

    Attributes
    ----------
    lambdas : ndarray (R,)
        The λ of the finished solves, increasing (SON convention).
    X : ndarray (R, N, d)
        The solutions.
    labels : ndarray of int (R, N)
        Cluster labels at each λ.
    n_clusters : ndarray of int (R,)
    objective, kkt_residual, time_s : ndarray (R,)
    n_iter : ndarray of int (R,)
    converged : ndarray of bool (R,)
    fuse_tol : ndarray (R,)
        The fusion distance used at each λ.
    method : str
    grid : ndarray
        The requested grid (a checkpoint may hold fewer finished λ than this).
    lam_hat : float
        The exact fusion threshold λ̂ (``nan`` when not computed, ``inf`` for a
        disconnected graph).
    meta : dict
        Provenance: problem fingerprint, solver options, λ̂'s Bound, notes.
    """

    lambdas: np.ndarray
    X: np.ndarray
    labels: np.ndarray
    n_clusters: np.ndarray
    objective: np.ndarray
    kkt_residual: np.ndarray
    n_iter: np.ndarray
    time_s: np.ndarray
    converged: np.ndarray
    fuse_tol: np.ndarray
    method: str = "cvxpy"
    grid: np.ndarray | None = None
    lam_hat: float = math.nan
    lam_convention: str = "son"
    meta: dict = field(default_factory=dict)

    # ---- basic views ---------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.lambdas)

    @property
    def complete(self) -> bool:
        """All λ of :attr:`grid` are finished."""
        return self.grid is None or len(self.lambdas) == len(self.grid)

    @property
    def table(self) -> list[dict]:
        """One row per λ: λ, clusters, objective, KKT residual, iterations, time, converged."""
        return [{"lam": float(self.lambdas[r]), "n_clusters": int(self.n_clusters[r]),
                 "objective": float(self.objective[r]),
                 "kkt_residual": float(self.kkt_residual[r]), "n_iter": int(self.n_iter[r]),
                 "time_s": float(self.time_s[r]), "converged": bool(self.converged[r])}
                for r in range(len(self))]

    def format_table(self) -> str:
        """The table as aligned text."""
        lines = [f"{'lambda (SON)':>14} {'clusters':>8} {'objective':>16} {'KKT res.':>9} "
                 f"{'iter':>6} {'time [s]':>9} conv"]
        for row in self.table:
            lines.append(f"{row['lam']:14.6g} {row['n_clusters']:8d} {row['objective']:16.10g} "
                         f"{row['kkt_residual']:9.2e} {row['n_iter']:6d} {row['time_s']:9.3f} "
                         f"{'yes' if row['converged'] else 'NO'}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (f"SolutionPath(method={self.method!r}, {len(self)} λ in "
                f"[{self.lambdas[0]:.4g}, {self.lambdas[-1]:.4g}] (SON), clusters "
                f"{int(self.n_clusters[0])} → {int(self.n_clusters[-1])}, "
                f"monotone={self.monotone}, lam_hat={self.lam_hat:.6g})") if len(self) else \
            "SolutionPath(empty)"

    # ---- fusion events -------------------------------------------------------------------
    @property
    def fusion_events(self) -> list[dict]:
        """Changes of the partition between consecutive λ.

        Each event: ``index`` (the λ at which the change is first seen), ``lam_lo``,
        ``lam_hi`` (it happened in ``(lam_lo, lam_hi]``), ``n_before``, ``n_after``,
        ``merged`` (lists of users of the clusters that joined, one list per new cluster
        formed from several old ones) and ``split`` (old clusters that were divided, as
        lists of users of their parts).
        """
        events = []
        for r in range(1, len(self)):
            old, new = self.labels[r - 1], self.labels[r]
            if np.array_equal(old, new):
                continue
            merged, split = [], []
            for c in np.unique(new):
                parts = np.unique(old[new == c])
                if len(parts) > 1:
                    merged.append([np.flatnonzero(old == p).tolist() for p in parts])
            for c in np.unique(old):
                parts = np.unique(new[old == c])
                if len(parts) > 1:
                    split.append([np.flatnonzero((old == c) & (new == p)).tolist()
                                  for p in parts])
            events.append({"index": r, "lam_lo": float(self.lambdas[r - 1]),
                           "lam_hi": float(self.lambdas[r]),
                           "n_before": int(self.n_clusters[r - 1]),
                           "n_after": int(self.n_clusters[r]), "merged": merged,
                           "split": split})
        return events

    @property
    def splits(self) -> list[dict]:
        """The fusion events in which some cluster split (empty for an agglomerative path)."""
        return [e for e in self.fusion_events if e["split"]]

    @property
    def monotone(self) -> bool:
        """No cluster ever splits along the path (so the cluster count never increases)."""
        return not self.splits

    def _eventual_fusion(self) -> np.ndarray:
        """``D[i, j]`` = the first grid λ from which ``i`` and ``j`` stay fused (``inf`` if
        not fused at the last λ)."""
        n = self.labels.shape[1]
        D = np.full((n, n), np.inf)
        alive = np.ones((n, n), bool)
        for r in range(len(self) - 1, -1, -1):
            lab = self.labels[r]
            alive &= lab[:, None] == lab[None, :]
            D[alive] = self.lambdas[r]
        np.fill_diagonal(D, 0.0)
        return D

    def linkage(self) -> np.ndarray:
        """A scipy linkage matrix ``Z`` ((N − 1) × 4) whose heights are fusion λ's.

        ``scipy.cluster.hierarchy.dendrogram(path.linkage())`` draws the dendrogram. Pairs
        never fused on the grid are joined at ``1.5 × max λ`` (marked in
        :attr:`merge_table` as ``beyond_grid``).
        """
        from scipy.cluster.hierarchy import linkage
        from scipy.spatial.distance import squareform

        if len(self) == 0:
            raise ValueError("path: is empty")
        n = self.labels.shape[1]
        if n < 2:
            raise ValueError("path: a linkage needs at least two users")
        if n > 5000:
            raise ValueError(f"path: a linkage of {n} users needs an N×N matrix; use at most "
                             "5000 users")
        D = self._eventual_fusion()
        top = self._beyond_height()
        D[np.isinf(D)] = top
        return linkage(squareform(D, checks=False), method="single")

    def _beyond_height(self) -> float:
        lmax = float(np.max(self.lambdas))
        return 1.5 * lmax if lmax > 0 else 1.0

    @property
    def merge_table(self) -> list[dict]:
        """The merges of :meth:`linkage`, in order: ``lam`` (the first grid λ at which the
        two groups are fused for good), ``lam_bracket`` (the merge happened in this
        interval), ``left``/``right`` (users), ``size``, ``n_clusters_after``,
        ``beyond_grid`` (not fused on the grid)."""
        Z = self.linkage()
        n = self.labels.shape[1]
        members = {i: [i] for i in range(n)}
        top = self._beyond_height()
        out = []
        lams = np.asarray(self.lambdas)
        for row, (a, b, h, cnt) in enumerate(Z):
            a, b = int(a), int(b)
            left, right = members.pop(a), members.pop(b)
            members[n + row] = sorted(left + right)
            beyond = bool(h >= top and not np.any(np.isclose(lams, h)))
            below = lams[lams < h]
            out.append({"lam": float(h) if not beyond else math.inf,
                        "lam_bracket": [float(below.max()) if below.size else 0.0,
                                        float(h) if not beyond else math.inf],
                        "left": left, "right": right, "size": int(cnt),
                        "n_clusters_after": n - row - 1, "beyond_grid": beyond})
        return out

    # ---- queries -------------------------------------------------------------------------
    def index_at(self, lam: float) -> int:
        """Index of the grid λ nearest to ``lam`` (in log scale; λ = 0 only matches 0)."""
        lam = as_scalar(lam, "lam", low=0.0)
        if len(self) == 0:
            raise ValueError("path: is empty")
        lams = np.asarray(self.lambdas)
        if lam == 0.0:
            return int(np.argmin(lams))
        pos = lams > 0
        if not np.any(pos):
            return 0
        idx = np.flatnonzero(pos)
        return int(idx[np.argmin(np.abs(np.log(lams[pos] / lam)))])

    def labels_at(self, k: int | None = None, lam: float | None = None, *,
                  return_lam: bool = False):
        """Cluster labels with ``k`` clusters, or at the grid λ nearest to ``lam``.

        For ``k``: the middle of the longest run of grid λ with exactly ``k`` clusters.
        Raises ``ValueError`` naming the nearest attainable counts (and their λ-ranges) when
        no grid λ has ``k`` clusters.

        Returns
        -------
        labels : ndarray (N,)
            (and the grid λ used, when ``return_lam``)
        """
        if (k is None) == (lam is None):
            raise ValueError("k, lam: give exactly one of them")
        if lam is not None:
            r = self.index_at(lam)
        else:
            k = as_int(k, "k", low=1)
            hits = np.flatnonzero(self.n_clusters == k)
            if hits.size == 0:
                counts = np.unique(self.n_clusters)
                below, above = counts[counts < k], counts[counts > k]
                near = []
                for c in ([below.max()] if below.size else []) + \
                         ([above.min()] if above.size else []):
                    lam_c = self.lambdas[self.n_clusters == c]
                    near.append(f"{int(c)} (λ in [{lam_c.min():.6g}, {lam_c.max():.6g}])")
                raise ValueError(f"k: {k} clusters are never attained on this path; nearest "
                                 f"attainable: {', '.join(near) or 'none'}; all counts: "
                                 f"{counts.tolist()} (refine the grid near those λ)")
            runs = np.split(hits, np.flatnonzero(np.diff(hits) > 1) + 1)
            run = max(runs, key=len)
            r = int(run[len(run) // 2])
        out = self.labels[r].copy()
        return (out, float(self.lambdas[r])) if return_lam else out

    def X_at(self, lam: float) -> np.ndarray:
        """The solution at the grid λ nearest to ``lam``."""
        return self.X[self.index_at(lam)].copy()

    def centroids(self, r: int) -> np.ndarray:
        """Cluster centroids ``(K_r, d)`` at grid index ``r`` (rows in label order)."""
        lab = self.labels[r]
        k = int(lab.max()) + 1
        C = np.zeros((k, self.X.shape[2]))
        np.add.at(C, lab, self.X[r])
        return C / np.bincount(lab, minlength=k)[:, None]

    def recovery_runs(self, partition) -> list[list[float]]:
        """Grid λ-ranges ``[first, last]`` on which the path's partition equals ``partition``
        (a grid view; :func:`convexfl.bounds.recovery_interval` gives the exact interval)."""
        target = check_partition(partition, self.labels.shape[1])
        hit = np.array([np.array_equal(check_partition(lab, len(lab)), target)
                        for lab in self.labels])
        idx = np.flatnonzero(hit)
        if idx.size == 0:
            return []
        runs = np.split(idx, np.flatnonzero(np.diff(idx) > 1) + 1)
        return [[float(self.lambdas[r[0]]), float(self.lambdas[r[-1]])] for r in runs]

    # ---- persistence ---------------------------------------------------------------------
    def _metadata(self) -> dict:
        return {"format": "convexfl.SolutionPath/1", "method": self.method,
                "lam_convention": self.lam_convention,
                "grid": None if self.grid is None else [float(x) for x in self.grid],
                "lam_hat": _json_float(self.lam_hat), "complete": self.complete,
                "monotone": self.monotone if len(self) else True,
                "table": self.table, "meta": _jsonable(self.meta)}

    def save(self, path) -> tuple[str, str]:
        """Write ``<path>.npz`` (arrays) and ``<path>.json`` (table and provenance)
        atomically (temporary file + ``os.replace``). Returns the two file names."""
        base = _base(path)
        arrays = {name: np.asarray(getattr(self, name)) for name in _ARRAYS}
        extra = self.meta.get("_last_flows")
        if extra is not None:
            arrays["last_flows"] = np.asarray(extra)
        meta = self._metadata()
        meta["meta"].pop("_last_flows", None)
        _atomic_npz(base + ".npz", arrays)
        _atomic_text(base + ".json", json.dumps(meta, indent=1))
        return base + ".npz", base + ".json"

    @classmethod
    def load(cls, path) -> SolutionPath:
        """Read a path written by :meth:`save` (or a :func:`son_path` checkpoint). A file
        that is not such a path (truncated, corrupt, foreign, inconsistent) is refused with
        a ``ValueError`` naming it; nothing is ever unpickled."""
        return _load_path(cls, path, "path")


def _load_path(cls, path, name):
    """:meth:`SolutionPath.load`, errors under the argument ``name``."""
    import zipfile

    base = _base(path)
    for ext in (".npz", ".json"):
        if not os.path.exists(base + ext):
            raise FileNotFoundError(f"{name}: {base}{ext} is missing ({base}.npz and "
                                    f"{base}.json are written together)")
    try:
        with open(base + ".json") as fh:
            meta = json.load(fh)
        if not isinstance(meta, dict) or meta.get("format") != "convexfl.SolutionPath/1":
            raise ValueError("it has no 'format': 'convexfl.SolutionPath/1'")
        with np.load(base + ".npz", allow_pickle=False) as z:
            arrays = {key: z[key] for key in _ARRAYS}
            flows = z["last_flows"] if "last_flows" in z.files else None
        _check_path_arrays(arrays)
        grid = meta.get("grid")
        extra = dict(meta.get("meta", {}))
        if flows is not None:
            extra["_last_flows"] = flows
        return cls(**arrays, method=str(meta["method"]),
                   grid=None if grid is None else np.asarray(grid, float),
                   lam_hat=_from_json_float(meta.get("lam_hat")),
                   lam_convention=meta.get("lam_convention", "son"), meta=extra)
    except (OSError, ValueError, KeyError, TypeError, EOFError, zipfile.BadZipFile) as exc:
        reason = f"missing entry {exc}" if isinstance(exc, KeyError) else str(exc)
        raise ValueError(f"{name}: {base}.npz/.json is not a readable convexfl solution path "
                         f"({type(exc).__name__}: {reason[:200]}); delete both files to "
                         "start over, or use another name") from None


def _check_path_arrays(arrays):
    """Shapes and dtypes of a saved path agree: R λ, (R, N, d) models, (R, N) labels."""
    R = arrays["lambdas"].shape[0] if arrays["lambdas"].ndim == 1 else -1
    X = arrays["X"]
    if R < 0 or X.ndim != 3 or X.shape[0] != R:
        raise ValueError(f"lambdas/X shapes disagree: {arrays['lambdas'].shape}, {X.shape}")
    for key, arr in arrays.items():
        if arr.dtype.kind not in "biuf":
            raise ValueError(f"array {key!r} has dtype {arr.dtype}")
        want = {"X": X.shape, "labels": X.shape[:2]}.get(key, (R,))
        if arr.shape != want:
            raise ValueError(f"array {key!r} has shape {arr.shape}, expected {want}")


def _finished(path) -> int:
    """The number of leading records of a checkpoint that are finite (a NaN or inf model,
    objective or residual is never reused: that λ and the rest are recomputed)."""
    ok = (np.all(np.isfinite(path.X), axis=(1, 2)) & np.isfinite(path.objective)
          & np.isfinite(path.kkt_residual))
    return len(ok) if ok.all() else int(np.argmin(ok))


def _check_checkpoint(checkpoint) -> None:
    """Refuse, before any solve, a checkpoint name that cannot be written."""
    base = _base(checkpoint)
    folder = os.path.dirname(os.path.abspath(base))
    if os.path.isdir(base) or base.endswith(os.sep) or not os.path.basename(base):
        raise ValueError(f"checkpoint: expected a file name (without or with .npz/.json), "
                         f"got the folder {os.fspath(checkpoint)!r}")
    if not os.path.isdir(folder):
        raise ValueError(f"checkpoint: the folder {folder!r} does not exist")
    if not os.access(folder, os.W_OK):
        raise ValueError(f"checkpoint: the folder {folder!r} is not writable")


def _base(path) -> str:
    path = os.fspath(path)
    for ext in (".npz", ".json"):
        if path.endswith(ext):
            return path[: -len(ext)]
    return path


def _atomic_write(filename, write, mode="w"):
    """Write through a temporary file and rename it: a reader never sees half a file, and a
    failed write leaves neither the temporary file nor a damaged ``filename``."""
    tmp = f"{filename}.tmp-{os.getpid()}"
    try:
        with open(tmp, mode) as fh:
            write(fh)
        os.replace(tmp, filename)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def _atomic_npz(filename, arrays):
    _atomic_write(filename, lambda fh: np.savez(fh, **arrays), "wb")


def _atomic_text(filename, text):
    _atomic_write(filename, lambda fh: fh.write(text))


def _json_float(x):
    x = float(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def _from_json_float(x):
    return math.nan if x is None else float(x)


def _jsonable(obj):
    from .bounds import _jsonable as conv
    return conv(obj)


# ---------------------------------------------------------------------------------------------
# the path itself
# ---------------------------------------------------------------------------------------------

def default_grid(prob: SumOfNorms, n_lambdas: int = 30, *, lam_min_ratio: float = 1e-3,
                 include_zero: bool = True):
    """``[0,] λ̂·geomspace(lam_min_ratio, 1, n)``: a geometric grid ending at the exact fusion
    threshold λ̂ (:func:`convexfl.bounds.fusion_threshold`).

    Returns
    -------
    grid : ndarray
    fusion : Bound
        λ̂ with its provenance (for a disconnected graph the grid ends at the λ above which
        every component is fused).
    """
    from .bounds import fusion_threshold

    n_lambdas = as_int(n_lambdas, "n_lambdas", low=2)
    lam_min_ratio = as_scalar(lam_min_ratio, "lam_min_ratio", low=0.0, low_inclusive=False,
                              high=1.0)
    fb = fusion_threshold(prob)
    top = fb.value if np.isfinite(fb.value) else float(fb.inputs["per_component"])
    n_geo = n_lambdas - 1 if include_zero else n_lambdas
    if top <= 0:
        grid = np.zeros(1)
    else:
        grid = np.geomspace(top * lam_min_ratio, top, n_geo)
        if include_zero:
            grid = np.r_[0.0, grid]
    return grid, fb


def _fingerprint(prob: SumOfNorms, method: str, options: dict) -> str:
    h = hashlib.sha256()
    for arr in prob.loss.arrays[1:]:
        h.update(np.ascontiguousarray(arr).tobytes() if isinstance(arr, np.ndarray)
                 else repr(arr).encode())
    h.update(str(prob.loss.arrays[0]).encode())
    h.update(type(prob.loss).__name__.encode())
    h.update(np.ascontiguousarray(prob.graph.edges).tobytes())
    h.update(np.ascontiguousarray(prob.graph.weights).tobytes())
    h.update(method.encode())
    h.update(repr(sorted((k, repr(v)) for k, v in options.items())).encode())
    return h.hexdigest()[:24]


def _warm_kwargs(fn, prev, X_last, flows_last) -> dict:
    """The warm-start keywords for ``fn``: ``warm_start=`` a previous Solution, else ``X0=``
    (and ``flows0=``), as far as its signature shows them. A method that only has
    ``**options`` (e.g. a lazy wrapper) is offered ``warm_start=`` (or ``X0``/``flows0`` on a
    resume); :func:`son_path` drops them if the method refuses them."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return {}
    open_kw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    if prev is not None and ("warm_start" in params or open_kw):
        return {"warm_start": prev}
    out = {}
    X = prev.X if prev is not None else X_last
    flows = prev.flows if prev is not None else flows_last
    if X is not None and ("X0" in params or open_kw):
        out["X0"] = X
    if flows is not None and ("flows0" in params or open_kw):
        out["flows0"] = flows
    return out


def _solve_warm(solve, prob, method, opts, warm, meta):
    """``solve`` with the warm-start keywords; if the method refuses them (a TypeError that
    names one), solve cold and note it. Returns ``(solution, warm_ok)``."""
    try:
        return solve(prob, method=method, **opts, **warm), True
    except TypeError as exc:
        if not warm or not any(k in str(exc) for k in warm):
            raise
        meta["notes"].append(f"method {method!r} does not accept {sorted(warm)}: solved "
                             "without warm starts")
        return solve(prob, method=method, **opts), False


def son_path(prob: SumOfNorms, lambdas=None, *, method: str = "auto", n_lambdas: int = 30,
             lam_min_ratio: float = 1e-3, include_zero: bool = True, warm_start: bool = True,
             fuse_tol: float | None = None, checkpoint=None, progress: bool | None = None,
             **solver_options) -> SolutionPath:
    r"""Warm-started solution path of (SON) over a grid of λ (SON convention).

    .. math::

        X^*(λ) = \arg\min_X \sum_i f_i(x_i) + λ \sum_{(i,j)∈E} w_{ij}\|x_i - x_j\| .

    Parameters
    ----------
    prob : SumOfNorms
        The loss and graph (its own λ is ignored).
    lambdas : array, optional
        λ ≥ 0 (sorted increasingly, duplicates dropped). Default: :func:`default_grid`
        (``0`` then ``n_lambdas − 1`` geometric points ending at the exact λ̂).
    method : str
        Any :data:`convexfl.solvers.METHODS` key (default ``"auto"``; ``"cvxpy"`` is the
        slow reference cross-check); ``solver_options`` are passed through.
    warm_start : bool
        Start each solve from the previous one when the method accepts ``warm_start=``
        (a Solution) or ``X0=``/``flows0=`` (checked with :func:`inspect.signature`).
    fuse_tol : float, optional
        Fusion distance for the clusters (default: each solution's own ``fuse_tol``).
    checkpoint : path-like, optional
        ``<checkpoint>.npz`` / ``.json`` are rewritten atomically after every finished λ
        (a corrupt or foreign pair is refused with an error naming it; a record whose
        models, objective or residual are not finite is recomputed, with a warning);
        if they exist (same problem, method, options and grid) the path resumes after the
        last finished λ without redoing it.
    progress : bool, optional
        A tqdm progress bar (default: when there are more than 20 λ).

    Returns
    -------
    SolutionPath
        Its ``meta["notes"]`` say when the cluster count is not monotone (a
        ``UserWarning`` is also issued) or a solve did not converge.
    """
    from .solvers import METHODS, solve

    if not isinstance(prob, SumOfNorms):
        raise TypeError(f"prob: expected a SumOfNorms problem, got {type(prob).__name__}")
    if method not in METHODS:
        raise ValueError(f"method: expected one of {sorted(METHODS)}, got {method!r}")
    if fuse_tol is not None:
        fuse_tol = as_scalar(fuse_tol, "fuse_tol", low=0.0)
    fusion = None
    if lambdas is None:
        grid, fusion = default_grid(prob, n_lambdas, lam_min_ratio=lam_min_ratio,
                                    include_zero=include_zero)
    else:
        grid = np.unique(as_float_array(lambdas, "lambdas", ndim=1))
        if grid[0] < 0:
            raise ValueError(f"lambdas: must be >= 0, got {grid[0]}")
    if fusion is None:
        from .bounds import fusion_threshold
        try:
            fusion = fusion_threshold(prob)
        except Exception as exc:  # noqa: BLE001 - λ̂ is optional when the grid is given
            warnings.warn(f"son_path: the fusion threshold could not be computed ({exc})",
                          UserWarning, stacklevel=2)
    if checkpoint is not None:
        _check_checkpoint(checkpoint)
    fp = _fingerprint(prob, method, solver_options)
    done = None
    if checkpoint is not None and os.path.exists(_base(checkpoint) + ".npz"):
        done = _load_path(SolutionPath, checkpoint, "checkpoint")
        if done.meta.get("fingerprint") != fp:
            raise ValueError(f"checkpoint: {_base(checkpoint)} belongs to another problem, "
                             "method or solver options (fingerprint mismatch); remove it or "
                             "choose another name")
        if done.grid is None or len(done.grid) != len(grid) or \
                not np.allclose(done.grid, grid, rtol=1e-12, atol=0):
            raise ValueError(f"checkpoint: {_base(checkpoint)} was computed on another λ grid")
    n, d = prob.n_users, prob.dim
    R = len(grid)
    lam_hat = math.nan
    if fusion is not None:
        lam_hat = fusion.value
    elif done is not None:
        lam_hat = done.lam_hat
    meta = {"fingerprint": fp, "solver_options": {k: repr(v) for k, v in
                                                  solver_options.items()},
            "n_users": n, "dim": d, "loss": type(prob.loss).__name__,
            "graph": prob.graph.kind, "warm_start": bool(warm_start), "notes": []}
    if fusion is not None:
        meta["fusion_threshold"] = fusion.to_dict()
    cols = {"X": np.zeros((R, n, d)), "labels": np.zeros((R, n), np.int64),
            "n_clusters": np.zeros(R, np.int64), "objective": np.zeros(R),
            "kkt_residual": np.zeros(R), "n_iter": np.zeros(R, np.int64),
            "time_s": np.zeros(R), "converged": np.zeros(R, bool), "fuse_tol": np.zeros(R)}
    start = 0
    X_last = flows_last = None
    if done is not None:
        start = _finished(done)
        if start < len(done):
            warnings.warn(f"checkpoint: {_base(checkpoint)}.npz holds a non-finite record at "
                          f"λ = {done.lambdas[start]:.6g}; it and the {len(done) - start - 1} "
                          "after it are recomputed", UserWarning, stacklevel=2)
        for name in cols:
            cols[name][:start] = getattr(done, name)[:start]
        meta["notes"] = list(done.meta.get("notes", []))
        meta["resumed_at"] = start
        if start:
            X_last = done.X[start - 1]
            flows_last = done.meta.get("_last_flows") if start == len(done) else None
    fn = METHODS[method]
    show = (R > 20) if progress is None else bool(progress)
    from tqdm.auto import tqdm

    def snapshot(r_done, flows):
        sp = SolutionPath(lambdas=grid[:r_done].copy(),
                          **{k: v[:r_done].copy() for k, v in cols.items()},
                          method=method, grid=grid, lam_hat=lam_hat, meta=dict(meta))
        if flows is not None:
            sp.meta["_last_flows"] = flows
        return sp

    prev = None
    bar = tqdm(total=R, initial=start, disable=not show, desc="son_path", unit="λ")
    try:
        for r in range(start, R):
            lam = float(grid[r])
            warm = _warm_kwargs(fn, prev, X_last, flows_last) if warm_start else {}
            t0 = time.perf_counter()
            sol, accepted = _solve_warm(solve, prob.with_lam(lam), method, solver_options,
                                        warm, meta)
            warm_start = warm_start and accepted
            wall = time.perf_counter() - t0
            tol_r = sol.fuse_tol if fuse_tol is None else fuse_tol
            lab = sol.labels(tol_r)
            if (fusion is not None and np.isfinite(lam_hat) and lam >= lam_hat and
                    (lab.max() > 0 or not sol.converged)):
                sol, lab = _fused_candidate(prob, lam, fusion, sol, tol_r, meta)
            cols["X"][r] = sol.X
            cols["labels"][r] = lab
            cols["n_clusters"][r] = int(lab.max()) + 1
            cols["objective"][r] = sol.objective
            cols["kkt_residual"][r] = sol.kkt_residual
            cols["n_iter"][r] = sol.n_iter
            cols["time_s"][r] = sol.time_s if sol.time_s else wall
            cols["converged"][r] = sol.converged
            cols["fuse_tol"][r] = tol_r
            if not sol.converged:
                meta["notes"].append(f"λ = {lam:.6g}: not converged ({sol.message})")
            prev, X_last, flows_last = sol, sol.X, sol.flows
            if checkpoint is not None:
                snapshot(r + 1, sol.flows).save(checkpoint)
            bar.update(1)
            bar.set_postfix(clusters=int(cols["n_clusters"][r]))
    finally:
        bar.close()
    path = snapshot(R, None)
    path.meta.pop("_last_flows", None)
    if not path.monotone:
        ev = path.splits[0]
        msg = (f"the cluster structure is not monotone along the path: a cluster splits "
               f"between λ = {ev['lam_lo']:.6g} and {ev['lam_hi']:.6g} "
               f"({len(path.splits)} split event(s)); possible with general weights, or a sign "
               "that fuse_tol is too loose for the solver's accuracy")
        if msg not in path.meta["notes"]:
            path.meta["notes"].append(msg)
        warnings.warn(msg, UserWarning, stacklevel=2)
    if np.isfinite(lam_hat) and grid[-1] >= lam_hat and path.n_clusters[-1] != 1 and \
            prob.graph.is_connected:
        path.meta["notes"].append(f"the last λ ≥ λ̂ = {lam_hat:.6g} but the solution has "
                                  f"{int(path.n_clusters[-1])} clusters at fuse_tol: solver "
                                  "accuracy")
    if checkpoint is not None:
        path.save(checkpoint)
    return path


def _fused_candidate(prob, lam, fusion, sol, tol, meta):
    """At λ ≥ λ̂ the fused ``X = 1 y*ᵀ`` is optimal; interior-point iterates near λ̂ are not
    quite fused (λ̂ is a degenerate point). Certify the fused candidate with the optimal flow
    of the λ̂ SOCP as the certificate's starting flow, and keep it when its certified KKT
    residual is not worse than the solver's."""
    from dataclasses import replace

    from .certificates import kkt_residual

    X = np.tile(np.asarray(fusion.inputs["y_star"], float), (prob.n_users, 1))
    p = prob.with_lam(lam)
    cert = kkt_residual(p, X, fuse_tol=tol, flows=fusion.inputs.get("_flow"))
    if cert.kkt_residual > max(sol.kkt_residual, sol.kkt_tol):
        return sol, sol.labels(tol)
    meta["notes"].append(f"λ = {lam:.6g} ≥ λ̂: the solver's iterate was not fused "
                         f"(KKT {sol.kkt_residual:.2e}); the fused global model is certified "
                         f"instead (KKT {cert.kkt_residual:.2e})")
    new = replace(sol, X=X, objective=cert.objective, kkt_residual=cert.kkt_residual,
                  converged=cert.kkt_residual <= sol.kkt_tol, certificate=cert,
                  message="fused global model, certified (λ ≥ λ̂)")
    return new, np.zeros(prob.n_users, dtype=np.int64)


# ---------------------------------------------------------------------------------------------
# federated-learning curves along a path (the paper's Figs. 2 and 3)
# ---------------------------------------------------------------------------------------------

def _predict(loss, x, A):
    if hasattr(loss, "decision_function"):
        return np.sign(loss.decision_function(x, A))
    return np.sign(A @ x)


def fl_metrics(path: SolutionPath, loss, test_X, test_y, test_cluster, user_cluster) -> dict:
    r"""Average test accuracy and average within-cluster model distance along a path.

    As in Armacki et al. Sec. V: user ``i`` of (true) cluster ``k`` is tested on the whole
    test set of cluster ``k`` with the classifier ``sign(⟨w, a⟩ − b)`` (squared hinge) or
    ``sign(⟨x, a⟩)`` (logistic); the accuracy is averaged over users (Fig. 2). The
    within-cluster distance is the mean of ``‖x_i − x_j‖`` over pairs ``i < j`` of the same
    true cluster (Fig. 3).

    Returns
    -------
    dict
        ``lambdas``, ``accuracy`` (R,), ``within_distance`` (R,), and the helpers
        ``accuracy_of(X)`` for comparators (global, local, oracle models).
    """
    test_X = as_float_array(test_X, "test_X", ndim=2)
    test_y = as_float_array(test_y, "test_y", ndim=1)
    test_cluster = np.asarray(test_cluster)
    user_cluster = np.asarray(user_cluster)
    if user_cluster.shape != (path.labels.shape[1],):
        raise ValueError(f"user_cluster: expected {path.labels.shape[1]} entries (one per "
                         f"user), got shape {user_cluster.shape}")
    if test_y.shape[0] != test_X.shape[0] or test_cluster.shape[0] != test_X.shape[0]:
        raise ValueError("test_y, test_cluster: need one entry per row of test_X")

    def accuracy_of(X):
        acc = []
        for i, k in enumerate(user_cluster):
            rows = test_cluster == k
            acc.append(np.mean(_predict(loss, X[i], test_X[rows]) == test_y[rows]))
        return float(np.mean(acc))

    pairs = np.array([(i, j) for i in range(len(user_cluster))
                      for j in range(i + 1, len(user_cluster))
                      if user_cluster[i] == user_cluster[j]])
    acc = np.array([accuracy_of(X) for X in path.X])
    if len(pairs):
        dist = np.array([np.mean(np.linalg.norm(X[pairs[:, 0]] - X[pairs[:, 1]], axis=1))
                         for X in path.X])
    else:
        dist = np.zeros(len(path))
    return {"lambdas": np.asarray(path.lambdas), "accuracy": acc, "within_distance": dist,
            "accuracy_of": accuracy_of}
