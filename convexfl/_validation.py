"""Input checks shared by every public entry point.

Each check raises ``ValueError`` (or ``TypeError`` for a wrong kind of object) whose
message starts with the argument's name and says what was expected. Nothing is
silently coerced: integer and float32 arrays are widened to float64 (exact), but NaN,
inf, complex or object data, and shapes that disagree, are refused.
"""

from __future__ import annotations

import numbers

import numpy as np


def as_float_array(value, name: str, *, ndim: int | tuple[int, ...] | None = None,
                   allow_empty: bool = False, copy: bool = True) -> np.ndarray:
    """Return ``value`` as a finite float64 array, or raise naming ``name``.

    ``copy=False``: a C-contiguous float64 ``value`` is returned as it is, not copied (for
    callers that only read it)."""
    try:
        arr = np.asarray(value)
    except Exception as exc:  # ragged lists and the like
        raise ValueError(f"{name}: could not be read as a numeric array ({exc})") from None
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number)
                                   or arr.dtype == np.bool_):
        raise TypeError(f"{name}: expected a real numeric array, got dtype {arr.dtype}")
    if np.iscomplexobj(arr):
        raise TypeError(f"{name}: expected real numbers, got complex dtype {arr.dtype}")
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else ndim
        if arr.ndim not in allowed:
            raise ValueError(
                f"{name}: expected a {' or '.join(f'{n}-D' for n in allowed)} array, "
                f"got shape {arr.shape}")
    if arr.size == 0 and not allow_empty:
        raise ValueError(f"{name}: is empty (shape {arr.shape})")
    arr = arr.astype(np.float64) if copy else np.asarray(arr, dtype=np.float64, order="C")
    if not np.all(np.isfinite(arr)):
        bad = int(np.size(arr) - np.count_nonzero(np.isfinite(arr)))
        raise ValueError(f"{name}: contains {bad} NaN or infinite value(s)")
    return arr


def as_scalar(value, name: str, *, low: float | None = 0.0, low_inclusive: bool = True,
              high: float | None = None) -> float:
    """Return ``value`` as a finite float in the given range, or raise naming ``name``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        if not (isinstance(value, np.ndarray) and value.ndim == 0
                and np.issubdtype(value.dtype, np.number)):
            raise TypeError(f"{name}: expected a real number, got {type(value).__name__}")
    x = float(value)
    if not np.isfinite(x):
        raise ValueError(f"{name}: must be finite, got {x}")
    if low is not None and (x < low or (x == low and not low_inclusive)):
        op = ">=" if low_inclusive else ">"
        raise ValueError(f"{name}: must be {op} {low}, got {x}")
    if high is not None and x > high:
        raise ValueError(f"{name}: must be <= {high}, got {x}")
    return x


def as_int(value, name: str, *, low: int | None = None, high: int | None = None) -> int:
    """Return ``value`` as an int in ``[low, high]``, or raise naming ``name``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name}: expected an integer, got {type(value).__name__}")
    v = int(value)
    if low is not None and v < low:
        raise ValueError(f"{name}: must be >= {low}, got {v}")
    if high is not None and v > high:
        raise ValueError(f"{name}: must be <= {high}, got {v}")
    return v


def check_random_state(seed, name: str = "random_state") -> np.random.RandomState:
    """:func:`sklearn.utils.check_random_state`, with an error that names ``name``."""
    from sklearn.utils import check_random_state as _check

    try:
        return _check(seed)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{name}: expected None, an int in [0, 2**32 - 1] or a "
                         f"numpy RandomState, got {seed!r} ({exc})") from None


def check_groups(groups, n_samples: int, name: str = "groups"):
    """Map group labels to users ``0..N-1`` in sorted label order.

    Returns
    -------
    user_labels : ndarray, shape (N,)
        The distinct labels, sorted (``np.unique`` order); user ``i`` is ``user_labels[i]``.
    user_index : ndarray of int, shape (n_samples,)
        The user of each sample.
    """
    g = np.asarray(groups)
    if g.ndim != 1:
        raise ValueError(f"{name}: expected a 1-D array of group labels, got shape {g.shape}")
    if g.shape[0] != n_samples:
        raise ValueError(f"{name}: has {g.shape[0]} entries but X has {n_samples} rows")
    if g.dtype.kind == "f" and not np.all(np.isfinite(g)):
        raise ValueError(f"{name}: contains NaN or infinite labels")
    if g.dtype == object and any(x is None for x in g):
        raise ValueError(f"{name}: contains None labels")
    user_labels, user_index = np.unique(g, return_inverse=True)
    return user_labels, user_index.astype(np.int64)


def check_labels_pm1(y: np.ndarray, name: str = "y") -> None:
    """Require every entry of ``y`` to be -1 or +1."""
    bad = ~np.isin(y, (-1.0, 1.0))
    if np.any(bad):
        vals = np.unique(y[bad])[:5]
        raise ValueError(f"{name}: labels must be -1 or +1 for this loss, found {vals.tolist()}")


def check_matrix_rows(X: np.ndarray, n_rows: int, dim: int, name: str = "X", *,
                      copy: bool = True) -> np.ndarray:
    """Check an (N, d) iterate and return it as float64 (``copy``: see
    :func:`as_float_array`)."""
    X = as_float_array(X, name, ndim=2, copy=copy)
    if X.shape != (n_rows, dim):
        raise ValueError(f"{name}: expected shape ({n_rows}, {dim}), got {X.shape}")
    return X


def check_partition(partition, n_users: int, name: str = "partition") -> np.ndarray:
    """Return cluster labels ``0..K-1`` (first-appearance order) for ``n_users`` users.

    ``partition`` is either a label per user, or a list of disjoint index lists covering
    ``0..n_users-1``.
    """
    if isinstance(partition, (list, tuple)) and len(partition) > 0 and all(
            isinstance(p, (list, tuple, np.ndarray)) for p in partition):
        labels = np.full(n_users, -1, dtype=np.int64)
        for k, members in enumerate(partition):
            members = np.asarray(members)
            if members.size == 0:
                raise ValueError(f"{name}: cluster {k} is empty")
            if members.dtype.kind not in "iu":
                raise ValueError(f"{name}: cluster {k} must hold integer user indices")
            if members.min() < 0 or members.max() >= n_users:
                raise ValueError(f"{name}: cluster {k} has indices outside 0..{n_users - 1}")
            if np.any(labels[members] >= 0) or len(np.unique(members)) != members.size:
                raise ValueError(f"{name}: clusters overlap (user in two clusters)")
            labels[members] = k
        if np.any(labels < 0):
            missing = np.flatnonzero(labels < 0)[:5].tolist()
            raise ValueError(f"{name}: does not cover every user (missing e.g. {missing})")
        return labels
    lab = np.asarray(partition)
    if lab.ndim != 1 or lab.shape[0] != n_users:
        raise ValueError(f"{name}: expected one label per user (length {n_users}) or a list "
                         f"of index lists, got shape {lab.shape}")
    if lab.dtype.kind == "f" and not np.all(np.isfinite(lab)):
        raise ValueError(f"{name}: contains NaN or infinite labels")
    if lab.dtype.kind in "iu" and n_users and 0 <= lab.min() and lab.max() < 4 * n_users:
        from ._kernels import first_appearance_labels  # one pass (solvers call this a lot)

        return first_appearance_labels(lab.astype(np.int64), int(lab.max()) + 1)
    _, first = np.unique(lab, return_index=True)
    order = np.argsort(first)
    uniq_sorted, inverse = np.unique(lab, return_inverse=True)
    remap = np.empty(len(uniq_sorted), dtype=np.int64)
    remap[order] = np.arange(len(uniq_sorted))
    return remap[inverse]


def validate_estimator_data(estimator, X, y="no_validation", *, reset: bool = True, **kw):
    """scikit-learn's ``validate_data`` (``n_features_in_``, its checks and messages) for
    the estimators, with the argument named first as everywhere in convexfl:
    ``"X: Input X contains NaN."``."""
    import re

    from sklearn.utils.validation import validate_data

    try:
        return validate_data(estimator, X, y, reset=reset, **kw)
    except (ValueError, TypeError) as exc:
        msg = str(exc)
        about_y = re.search(r"\by\b", msg) and not re.search(r"\bX\b", msg)
        raise type(exc)(f"{'y' if about_y else 'X'}: {msg}") from None


def users_of(groups, known, n_rows: int, name: str = "groups") -> np.ndarray:
    """The user index (into the sorted labels ``known`` seen in fit) of each of ``n_rows``
    rows; ``groups=None`` means the only user. Unknown labels are refused by name."""
    if groups is None:
        if len(known) != 1:
            raise ValueError(f"{name}: the model has {len(known)} users; say which user "
                             "each row belongs to")
        return np.zeros(n_rows, np.int64)
    g = np.asarray(groups)
    if g.shape != (n_rows,):
        raise ValueError(f"{name}: expected {n_rows} labels (one per row of X), got shape "
                         f"{g.shape}")
    idx = np.minimum(np.searchsorted(known, g), len(known) - 1)
    unseen = known[idx] != g
    if np.any(unseen):
        raise ValueError(f"{name}: {np.unique(g[unseen])[:5].tolist()} were not seen in fit "
                         "(one model per group seen)")
    return idx.astype(np.int64)
