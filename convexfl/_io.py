"""Files in and out: the data-file readers of the ``convexfl`` command and atomic writes.

Reading refuses, never guesses: a data file that could mean two things (a first row of
numbers, points next to samples, a partition saved under an unknown name) is refused with
an error that names the file and, for CSV, the line and the column. Writing goes through a
temporary file, so a file holds either its old content or the new one, never a torn one.
"""

from __future__ import annotations

import os
import tempfile
import zipfile
from pathlib import Path

import numpy as np

FORMATS = """\
data files (DATA):
  points   one user per row, every column a coordinate (quadratic loss, convex clustering):
             .csv  a header row of names, then numbers:  x1,x2[,cluster]
             .npz  'A' (or 'points') (N, d)              [, 'partition' (N,)]
  samples  one sample per row, with its target and its user (data losses):
             .csv  a header with columns y and group:    x1,x2,...,y,group[,cluster]
             .npz  'X' (n, p), 'y' (n,), 'groups' (n,)   [, 'partition' (N,)]
  CSV: comma-separated UTF-8 text (a BOM is ignored), one header row, then one row per
  point or sample. The names y, group (or groups) and cluster are special, matched
  case-insensitively and without surrounding spaces; every other column is a coordinate
  (points) or a feature (samples). Every cell must be a finite number. Refused, naming the
  file (and the line and column): an empty file, repeated or empty column names, a first
  row of numbers (no header), ragged rows, text, empty, NaN or infinite cells, y without
  group (or group without y), both group and groups.
  NPZ: exactly the arrays above ('partition' may be named 'user_cluster' or 'truth'); any
  other array, or points and samples arrays together, is refused.
  Users are the distinct group labels, in sorted order. cluster is a partition: one label
  per user (points) or per sample, constant within each group (samples).
  --partition FILE: one cluster label per user, one per line, no header (.csv, .txt, .npy).
  For example (points.csv, then samples.csv):
      x1,x2,cluster                x1,x2,y,group
      0.0,0.1,0                    0.3,1.2,1,0
      5.0,4.9,1                    -0.7,0.4,-1,0
"""

SPECIAL_COLUMNS = ("y", "group", "groups", "cluster")  # CSV; matched case-insensitively
POINT_ARRAYS = ("A", "points")  # NPZ
SAMPLE_ARRAYS = ("X", "y", "groups")
PARTITION_ARRAYS = ("partition", "user_cluster", "truth")


def read_data(path) -> dict:
    """Read a data file in one of the formats of :data:`FORMATS`.

    Parameters
    ----------
    path : str or path-like
        A ``.csv`` or ``.npz`` file.

    Returns
    -------
    dict
        ``kind`` ("points" or "samples"); ``A`` (points) or ``X``, ``y``, ``groups``
        (samples); ``partition``: one label per user, or None. The arrays are not yet
        validated (the losses do that, naming ``A``, ``X``, ``y``, ``groups``).

    Raises
    ------
    FileNotFoundError
        No such file.
    ValueError
        The file is a folder, has another extension, or is malformed (the message names
        the file, and for CSV the line and the column).
    """
    path = str(path)
    if os.path.isdir(path):
        raise ValueError(f"data: {path!r} is a folder; expected a .csv or .npz file")
    if not os.path.exists(path):
        raise FileNotFoundError(f"data: no such file {path!r}")
    if path.endswith(".npz"):
        return _read_npz(path)
    if path.endswith(".csv"):
        return _read_csv(path)
    raise ValueError(f"data: expected a .csv or .npz file, got {path!r}")


def _read_npz(path: str) -> dict:
    """:func:`read_data` for an ``.npz`` archive."""
    try:
        with np.load(path, allow_pickle=False) as z:
            d = {k: z[k] for k in z.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise ValueError(f"data: {path} is not a readable .npz archive of numeric arrays "
                         f"({type(exc).__name__}: {exc})") from None
    what = ("a data file holds 'A' (points) or 'X', 'y', 'groups' (samples), and "
            "optionally 'partition' (one cluster label per user)")
    unused = sorted(set(d) - {*POINT_ARRAYS, *SAMPLE_ARRAYS, *PARTITION_ARRAYS})
    if unused:
        raise ValueError(f"data: {path} holds array(s) {unused} that are not used; {what}")
    parts = [k for k in PARTITION_ARRAYS if k in d]
    if len(parts) > 1:
        raise ValueError(f"data: {path} holds more than one partition {parts}; keep one")
    partition = d[parts[0]] if parts else None
    points = [k for k in POINT_ARRAYS if k in d]
    samples = [k for k in SAMPLE_ARRAYS if k in d]
    if points and samples:
        raise ValueError(f"data: {path} holds both points {points} and samples {samples}; "
                         "keep one kind")
    if len(points) > 1:
        raise ValueError(f"data: {path} holds both 'A' and 'points'; keep one")
    if points:
        return {"kind": "points", "A": d[points[0]], "partition": partition}
    lacking = [k for k in SAMPLE_ARRAYS if k not in d]
    if not samples:
        raise ValueError(f"data: {path} holds no data arrays ({sorted(d)}); {what}")
    if lacking:
        raise ValueError(f"data: {path} holds the samples arrays {samples} but is missing "
                         f"{lacking}; {what}")
    return {"kind": "samples", "X": d["X"], "y": d["y"], "groups": d["groups"],
            "partition": partition}


def _read_csv(path: str) -> dict:
    """:func:`read_data` for a ``.csv`` file."""
    cols, header = _csv_columns(path)
    group = [k for k in ("group", "groups") if k in cols]
    if len(group) > 1:
        raise ValueError(f"data: {path} has both a 'group' and a 'groups' column; keep one")
    if ("y" in cols) != bool(group):
        have, lack = ("y", "group") if "y" in cols else (group[0], "y")
        raise ValueError(f"data: {path} has a '{have}' column but no '{lack}' column; a "
                         "samples file needs both, a points file neither")
    cluster = cols.get("cluster")
    if not group:
        coords = [h for h in header if h != "cluster"]
        if not coords:
            raise ValueError(f"data: {path} has no coordinate columns")
        return {"kind": "points", "A": np.column_stack([cols[h] for h in coords]),
                "partition": cluster}
    feats = [h for h in header if h not in ("y", group[0], "cluster")]
    if not feats:
        raise ValueError(f"data: {path} has no feature columns")
    groups = cols[group[0]]
    partition = None
    if cluster is not None:  # one label per sample -> one per user
        users, idx = np.unique(groups, return_inverse=True)
        partition = np.zeros(len(users))
        for u in range(len(users)):
            vals = np.unique(cluster[idx == u])
            if len(vals) != 1:
                raise ValueError(f"data: {path}: the 'cluster' column is not constant "
                                 f"within group {users[u]:g}")
            partition[u] = vals[0]
    return {"kind": "samples", "X": np.column_stack([cols[h] for h in feats]),
            "y": cols["y"], "groups": groups, "partition": partition}


def _csv_columns(path: str):
    """``(columns, names)`` of a numeric CSV file with a header row: ``columns`` maps each
    name (the special ones lower-cased) to its float column, ``names`` keeps their order."""
    import csv

    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            rows = [r for r in csv.reader(fh) if any(c.strip() for c in r)]
    except UnicodeDecodeError as exc:
        raise ValueError(f"data: {path} is not UTF-8 text ({exc.reason} at byte {exc.start});"
                         " save it as CSV in UTF-8") from None
    except csv.Error as exc:
        raise ValueError(f"data: {path} is not a readable CSV file ({exc})") from None
    if len(rows) < 2:
        raise ValueError(f"data: {path} needs a header row and at least one data row")
    header = [h.strip() for h in rows[0]]
    if len(header) == 1 and any(sep in header[0] for sep in ";\t"):
        raise ValueError(f"data: {path} is not comma-separated: its header is the single "
                         f"field {header[0]!r}; separate the columns by commas")
    if all(_is_number(h) for h in header):
        raise ValueError(f"data: {path} has no header row: its first row {rows[0]} is all "
                         "numbers; add a row of column names (see `convexfl --help`)")
    names = [h.lower() if h.lower() in SPECIAL_COLUMNS else h for h in header]
    if "" in names:
        raise ValueError(f"data: {path} has an empty column name (column "
                         f"{names.index('') + 1}); every column needs its own name")
    repeated = sorted({h for h in names if names.count(h) > 1})
    if repeated:
        raise ValueError(f"data: {path} has repeated column names {repeated}; every column "
                         "needs its own name")
    body = np.empty((len(rows) - 1, len(header)))
    for i, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            raise ValueError(f"data: {path} line {i} has {len(row)} fields, the header has "
                             f"{len(header)}")
        for j, cell in enumerate(row):
            try:
                body[i - 2, j] = float(cell)
            except ValueError:
                raise ValueError(f"data: {path} line {i}, column {header[j]!r}: {cell!r} is "
                                 "not a number") from None
            if not np.isfinite(body[i - 2, j]):
                raise ValueError(f"data: {path} line {i}, column {header[j]!r}: {cell!r} is "
                                 "not finite")
    return {h: body[:, j] for j, h in enumerate(names)}, names


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def read_partition(path, n_users: int) -> np.ndarray:
    """Cluster labels ``0..K-1`` of ``n_users`` users from a partition file: one numeric
    label per line, no header (``.csv``, ``.txt`` or ``.npy``).

    Raises
    ------
    FileNotFoundError
        No such file.
    ValueError
        Unreadable, a header, more than one label per line, or not one label per user.
    """
    from ._validation import check_partition

    path = str(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"partition: no such file {path!r}")
    try:
        if path.endswith(".npy"):
            lab = np.load(path, allow_pickle=False)
        else:
            lab = np.loadtxt(path, delimiter="," if path.endswith(".csv") else None,
                             encoding="utf-8-sig")
    except (OSError, ValueError, EOFError) as exc:
        raise ValueError(f"partition: {path} must hold one numeric cluster label per user, "
                         f"without a header ({exc})") from None
    lab = np.asarray(lab)
    if lab.ndim == 2 and 1 in lab.shape:
        lab = lab.ravel()
    if lab.ndim != 1:
        raise ValueError(f"partition: {path} must hold one cluster label per user, one "
                         f"label per line; found an array of shape {lab.shape}")
    return check_partition(lab, n_users, "partition")


def atomic_write(path, write, *, binary: bool = False) -> None:
    """Call ``write(fh)`` on a temporary file in ``path``'s folder, then ``os.replace`` it
    onto ``path``: a reader never sees half a file, and a failed write or rename leaves
    neither the temporary file nor a damaged ``path``."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb" if binary else "w") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def atomic_write_text(path, text: str) -> None:
    """:func:`atomic_write` of ``text``, creating the folder if needed."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda fh: fh.write(text))


def source_fingerprint(*modules) -> str:
    """A hash of the Python source of ``modules`` (packages: every ``.py`` file under them;
    default: convexfl itself). Saved next to resumable results (report sections, theory
    checks) so that a result computed by other code is run again, not reused."""
    import hashlib
    import importlib

    modules = modules or ("convexfl",)
    digest = hashlib.sha256()
    for name in modules:
        mod = importlib.import_module(name)
        source = Path(mod.__file__)
        root = source.parent
        files = sorted(root.rglob("*.py")) if source.name == "__init__.py" else [source]
        for f in files:
            digest.update(f.relative_to(root.parent).as_posix().encode())
            digest.update(f.read_bytes())
    return digest.hexdigest()[:16]
