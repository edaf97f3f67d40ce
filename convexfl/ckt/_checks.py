"""Argument checks and small array helpers shared by :mod:`convexfl.ckt` (each error names
the argument)."""

from __future__ import annotations

import math

import numpy as np

_SYM_TOL = 1e-8


def _finite_array(x, name: str, *, ndim: int | None = None, shape=None) -> np.ndarray:
    try:
        a = np.asarray(x, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a real numeric array") from exc
    if ndim is not None and a.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimension(s), got shape {a.shape}")
    if shape is not None and (
        len(shape) != a.ndim
        or any(s is not None and s != t for s, t in zip(shape, a.shape, strict=False))
    ):
            want = tuple("*" if s is None else s for s in shape)
            raise ValueError(f"{name} must have shape {want}, got {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must be finite (no NaN or inf)")
    return a


def _scalar(x, name: str, *, positive: bool = False, nonnegative: bool = False) -> float:
    if isinstance(x, (bool, np.bool_)):
        raise ValueError(f"{name} must be a real number, got a bool")  # noqa: TRY004
    try:
        v = float(x)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a real number") from exc
    if np.ndim(x) != 0:
        raise ValueError(f"{name} must be a scalar")
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite (no NaN or inf)")
    if positive and v <= 0:
        raise ValueError(f"{name} must be > 0, got {v}")
    if nonnegative and v < 0:
        raise ValueError(f"{name} must be >= 0, got {v}")
    return v


def _int(x, name: str, *, minimum: int) -> int:
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)):
        raise ValueError(f"{name} must be an integer, got {x!r}")  # noqa: TRY004
    if x < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {x}")
    return int(x)


def _index(k, n: int, name: str = "k") -> int:
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)):
        raise ValueError(f"{name} must be an integer client index, got {k!r}")  # noqa: TRY004
    if not 0 <= k < n:
        raise ValueError(f"{name} must be in [0, {n}), got {k}")
    return int(k)


def _choice(x, name: str, options: tuple[str, ...]) -> str:
    if x not in options:
        raise ValueError(f"{name} must be one of {options}, got {x!r}")
    return x


def _spd(a, name: str, d: int | None = None) -> np.ndarray:
    a = _finite_array(a, name, ndim=2)
    if a.shape[0] != a.shape[1] or (d is not None and a.shape[0] != d):
        want = "square" if d is None else f"({d}, {d})"
        raise ValueError(f"{name} must be {want}, got shape {a.shape}")
    scale = max(1.0, float(np.max(np.abs(a))))
    if np.max(np.abs(a - a.T)) > _SYM_TOL * scale:
        raise ValueError(f"{name} must be symmetric")
    try:
        np.linalg.cholesky(0.5 * (a + a.T))
    except np.linalg.LinAlgError as exc:
        raise ValueError(f"{name} must be positive definite") from exc
    return 0.5 * (a + a.T)


def _psd(a, name: str, d: int) -> np.ndarray:
    a = _finite_array(a, name, ndim=2, shape=(d, d))
    scale = max(1.0, float(np.max(np.abs(a))))
    if np.max(np.abs(a - a.T)) > _SYM_TOL * scale:
        raise ValueError(f"{name} must be symmetric")
    a = 0.5 * (a + a.T)
    if np.linalg.eigvalsh(a)[0] < -1e-10 * scale:
        raise ValueError(f"{name} must be positive semidefinite")
    return a


def _upsilon(u, n_clients: int | None, name: str = "upsilon") -> np.ndarray:
    u = _finite_array(u, name)
    if u.ndim == 0:
        if n_clients is None:
            raise ValueError(f"{name} must be a 1-D array of per-client standard deviations")
        u = np.full(n_clients, float(u))
    if u.ndim != 1 or (n_clients is not None and u.shape[0] != n_clients):
        raise ValueError(f"{name} must be a scalar or have shape ({n_clients},), got {u.shape}")
    if np.any(u <= 0):
        raise ValueError(f"{name} must be > 0 for every client (standard deviations)")
    return u


def _rng(random_state) -> np.random.Generator:
    if isinstance(random_state, np.random.Generator):
        return random_state
    if random_state is None or isinstance(random_state, (int, np.integer)):
        return np.random.default_rng(random_state)
    raise ValueError("random_state must be None, an int or a numpy Generator")


def _frozen(a: np.ndarray | None) -> np.ndarray | None:
    if a is None:
        return None
    a = np.array(a, dtype=float, copy=True)
    a.setflags(write=False)
    return a


def _sym_inv(a: np.ndarray) -> np.ndarray:
    inv = np.linalg.inv(a)
    return 0.5 * (inv + inv.T)
