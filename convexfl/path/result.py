"""The result of a path: :class:`SolutionPath` (table, merge table, linkage, queries, save/load)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

import numpy as np

from .._io import atomic_write
from .._validation import as_int, as_scalar, check_partition
from ..bounds import _jsonable
from .store import _ARRAYS, _base, _load_path


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
        return [self._event(r) for r in range(1, len(self))
                if not np.array_equal(self.labels[r - 1], self.labels[r])]

    def _event(self, r):
        """The fusion event between λ ``r − 1`` and ``r`` (:attr:`fusion_events`)."""
        old, new = self.labels[r - 1], self.labels[r]
        return {"index": r, "lam_lo": float(self.lambdas[r - 1]),
                "lam_hi": float(self.lambdas[r]), "n_before": int(self.n_clusters[r - 1]),
                "n_after": int(self.n_clusters[r]),
                "merged": _refinements(new, old, whole=True),
                "split": _refinements(old, new, whole=False)}

    @property
    def splits(self) -> list[dict]:
        """The fusion events in which some cluster split (empty for an agglomerative path)."""
        return [self._event(r) for r in range(1, len(self))
                if _splits(self.labels[r - 1], self.labels[r])]

    @property
    def monotone(self) -> bool:
        """No cluster ever splits along the path (so the cluster count never increases)."""
        return not any(_splits(self.labels[r - 1], self.labels[r])
                       for r in range(1, len(self)))

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
                "lam_hat": _jsonable(float(self.lam_hat)), "complete": self.complete,
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
        atomic_write(base + ".npz", lambda fh: np.savez(fh, **arrays), binary=True)
        atomic_write(base + ".json", lambda fh: fh.write(json.dumps(meta, indent=1)))
        return base + ".npz", base + ".json"

    @classmethod
    def load(cls, path) -> SolutionPath:
        """Read a path written by :meth:`save` (or a :func:`son_path` checkpoint). A file
        that is not such a path (truncated, corrupt, foreign, inconsistent) is refused with
        a ``ValueError`` naming it; nothing is ever unpickled."""
        return _load_path(cls, path, "path")


def _groups(keys):
    """The distinct ``keys`` (ascending) and, for each, its users (ascending)."""
    order = np.argsort(keys, kind="stable")
    starts = np.flatnonzero(np.r_[True, np.diff(keys[order]) != 0])
    return keys[order][starts], np.split(order, starts[1:])


def _splits(old, new):
    """Whether some cluster of the labels ``old`` has users with different labels in
    ``new``: one pass (each old cluster's first user's new label, compared with every
    user's), so that :attr:`SolutionPath.monotone` builds no event (the make_moons 551-λ path,
    5000 users: 52 → 4 ms)."""
    if np.array_equal(old, new):
        return False
    first = np.empty(int(old.max()) + 1, new.dtype)
    first[old[::-1]] = new[::-1]  # the last write wins: the first user of each old cluster
    return bool(np.any(first[old] != new))


def _refinements(coarse, fine, *, whole):
    """For each label ``c`` of ``coarse`` (ascending) whose users carry several labels of
    ``fine``: one list per such ``fine`` label ``p`` (ascending) of its users, all of
    ``fine == p`` (``whole``) or only those with ``coarse == c``. O(N log N): sorts, no pass
    over the users per cluster."""
    m = int(fine.max()) + 1
    pairs, pieces = _groups(coarse.astype(np.int64) * m + fine)
    pair_c, pair_f = pairs // m, pairs % m
    if whole:
        fine_keys, members = _groups(fine)
        pieces = [members[k] for k in np.searchsorted(fine_keys, pair_f)]
    first = np.flatnonzero(np.r_[True, np.diff(pair_c) != 0])
    ends = np.r_[first[1:], len(pair_c)]
    return [[pieces[k].tolist() for k in range(a, b)] for a, b in zip(first, ends, strict=True)
            if b - a > 1]
