"""Checkpoint files of a path: one ``.npz`` of arrays and one ``.json`` of metadata,
written atomically and read back without unpickling; every defect names the file.
"""

from __future__ import annotations

import json
import math
import os

import numpy as np

_ARRAYS = ("lambdas", "X", "labels", "n_clusters", "objective", "kkt_residual", "n_iter",
           "time_s", "converged", "fuse_tol")


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


def _from_json_float(x):
    return math.nan if x is None else float(x)
