"""The :class:`Bound` every function of :mod:`convexfl.bounds` returns (a number or an
interval of λ tagged exact / certified bound / estimate), its JSON form, and the argument
checks and small loss helpers the bounds share."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np
from scipy.spatial.distance import pdist

from .._validation import as_scalar
from ..losses import LeastSquares, Quadratic
from ..problems import SumOfNorms

KINDS = ("exact", "certified bound", "estimate")


@dataclass(frozen=True)
class Bound:
    """A number or an interval of λ with its provenance.

    Attributes
    ----------
    name : str
        What it is (e.g. ``"theorem3_interval"``).
    kind : {"exact", "certified bound", "estimate"}
    lo, hi : float
        The interval (``lo == hi == value`` for a number). ``lo > hi`` means empty.
    convention : str
        The λ convention (``"son"``; Theorem 4's radii are distances, not λ).
    inputs : dict
        The quantities it was computed from (e.g. ε_k, δ_kl).
    note : str
    related : dict
        Other :class:`Bound` objects returned alongside (e.g. the closed-form bounds next to
        the exact λ̂, the theorem intervals next to the exact recovery interval).
    """

    name: str
    kind: str
    lo: float
    hi: float
    convention: str = "son"
    inputs: dict = field(default_factory=dict)
    note: str = ""
    related: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"kind: expected one of {KINDS}, got {self.kind!r}")

    @property
    def value(self) -> float:
        """The number, for a bound that is one (``lo == hi``)."""
        if self.lo != self.hi:
            raise AttributeError(f"{self.name} is an interval: use .lo and .hi")
        return self.lo

    @property
    def is_number(self) -> bool:
        return self.lo == self.hi

    @property
    def is_empty(self) -> bool:
        return self.lo > self.hi

    def contains(self, lam: float) -> bool:
        return self.lo <= lam <= self.hi

    def __repr__(self) -> str:
        body = f"{self.lo:.6g}" if self.lo == self.hi else f"[{self.lo:.6g}, {self.hi:.6g}]"
        return f"Bound({self.name}: {body}, {self.kind}, λ convention {self.convention})"

    def to_dict(self) -> dict:
        """A JSON-ready dict (arrays as lists, ``inf`` as the string ``"inf"``)."""
        out = {"name": self.name, "kind": self.kind, "convention": self.convention,
               "note": self.note}
        if self.is_number:
            out["value"] = _jsonable(self.lo)
        else:
            out.update(lo=_jsonable(self.lo), hi=_jsonable(self.hi), empty=self.is_empty)
        out["inputs"] = _jsonable(self.inputs)
        if self.related:
            out["related"] = {k: v.to_dict() for k, v in self.related.items()}
        return out


def _jsonable(obj):
    """Convert numpy scalars/arrays, nested containers and non-finite floats for JSON."""
    if isinstance(obj, Bound):
        return obj.to_dict()
    if isinstance(obj, dict):  # keys starting with "_" are private (large arrays)
        return {str(k): _jsonable(v) for k, v in obj.items() if not str(k).startswith("_")}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        if obj.dtype.kind in "biu" or (obj.dtype.kind == "f" and np.all(np.isfinite(obj))):
            return obj.tolist()  # already JSON numbers (element by element: 18 ms at 5000)
        return _jsonable(obj.tolist())
    if isinstance(obj, (np.bool_, bool)):
        return bool(obj)
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        x = float(obj)
        if math.isnan(x):
            return "nan"
        if math.isinf(x):
            return "inf" if x > 0 else "-inf"
        return x
    return obj


def _weakest(*kinds) -> str:
    return max(kinds, key=KINDS.index)


# ---------------------------------------------------------------------------------------------
# checks and small numerical helpers
# ---------------------------------------------------------------------------------------------

def _single_threaded(fn):
    """Run ``fn`` with OpenMP limited to one thread.

    The many tiny problems of a λ-search (cluster labelling through scikit-learn's radius
    graph, small SOCPs) are dominated by OpenMP thread wake-ups on a busy machine; one thread
    is several times faster for them and changes no result.
    """
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from threadpoolctl import threadpool_limits
        with threadpool_limits(limits=1, user_api="openmp"):
            return fn(*args, **kwargs)
    return wrapper


def _check_son(prob):
    if not isinstance(prob, SumOfNorms):
        raise TypeError(f"prob: expected a SumOfNorms problem, got {type(prob).__name__}")
    return prob


def _require_complete_uniform(prob, what):
    _check_son(prob)
    if not prob.graph.is_complete_uniform:
        raise ValueError(f"prob: {what} holds for the complete uniform graph (every w_ij = 1); "
                         f"this graph is {prob.graph.kind!r} — use recovery_interval / "
                         "partition_certificate, which hold for any graph")


def _lam_arg(prob, lam):
    return prob.lam if lam is None else as_scalar(lam, "lam", low=0.0)


def _common_grads(loss, x) -> np.ndarray:
    """``[∇f_i(x)]_i`` at one common point ``x`` (N, d)."""
    return loss.grad(np.tile(np.asarray(x, float), (loss.n_users, 1)))


def _affine_parts(loss):
    """``(H, h)`` with ``∇f_i(x) = H_i x − h_i`` for the quadratic and least-squares losses,
    else ``None``."""
    n, d = loss.n_users, loss.dim
    if isinstance(loss, Quadratic):
        H = loss.coef[:, None, None] * np.eye(d)[None]
        return H, loss.coef[:, None] * loss.F
    if isinstance(loss, LeastSquares):
        H = loss._grams()
        H[:, np.arange(d), np.arange(d)] += loss.ridge
        h = np.zeros((n, d))
        for i in range(n):
            sl = slice(loss.ptr[i], loss.ptr[i + 1])
            h[i] = (loss.coef[sl] * loss.y[sl]) @ loss.F[sl]
        return H, h
    return None


def _same_matrix(A, B) -> bool:
    return bool(np.allclose(A, B, rtol=1e-12, atol=1e-14 * np.abs(A).max()))


def _data_lipschitz(loss) -> np.ndarray:
    """Lipschitz constants of the data part of ``∇f_i`` (ridge excluded), shape (N,)."""
    return np.maximum(loss.lipschitz - loss.ridge.max(axis=1), 0.0)


def _pair_lipschitz(loss, i, j) -> float:
    """A Lipschitz constant of ``∇f_i − ∇f_j``: the Hessians lie in ``[0, L_i]`` and
    ``[0, L_j]``, so their difference has norm ``≤ max(L_i, L_j)`` (ridge terms cancel when
    equal)."""
    if np.array_equal(loss.ridge[i], loss.ridge[j]):
        ld = _data_lipschitz(loss)
        return float(max(ld[i], ld[j]))
    return float(max(loss.lipschitz[i], loss.lipschitz[j]))


def _pairwise_max(G) -> float:
    return float(pdist(G).max()) if len(G) > 1 else 0.0
