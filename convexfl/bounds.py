r"""λ-ranges for exact cluster recovery and consensus, each tagged with how exact it is.

Every function returns a :class:`Bound`: a number (``.value``) or an interval (``.lo``,
``.hi``), with ``.kind`` one of

- ``"exact"`` — the true quantity (closed form, or a convex program solved to certificate);
- ``"certified bound"`` — rigorous but possibly loose;
- ``"estimate"`` — e.g. sampled or from a local search; not guaranteed.

All λ are in the canonical (SON) convention of :mod:`convexfl.problems`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ._validation import check_partition
from .losses import Quadratic
from .problems import SumOfNorms

__all__ = ["Bound", "theorem3_interval"]

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
        The λ convention (always ``"son"``).
    inputs : dict
        The quantities it was computed from (e.g. ε_k, δ_kl).
    note : str
    """

    name: str
    kind: str
    lo: float
    hi: float
    convention: str = "son"
    inputs: dict = field(default_factory=dict)
    note: str = ""

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
    def is_empty(self) -> bool:
        return self.lo > self.hi

    def contains(self, lam: float) -> bool:
        return self.lo <= lam <= self.hi

    def __repr__(self) -> str:
        body = f"{self.lo:.6g}" if self.lo == self.hi else f"[{self.lo:.6g}, {self.hi:.6g}]"
        return f"Bound({self.name}: {body}, {self.kind}, λ convention {self.convention})"


def _require_complete_uniform(prob, what):
    if not isinstance(prob, SumOfNorms):
        raise TypeError(f"prob: expected a SumOfNorms problem, got {type(prob).__name__}")
    if not prob.graph.is_complete_uniform:
        raise ValueError(f"prob: {what} holds for the complete uniform graph (every w_ij = 1); "
                         f"this graph is {prob.graph.kind!r}")


def theorem3_interval(prob: SumOfNorms, partition) -> Bound:
    r"""Theorem 3 (Armacki et al. (25)–(27)): every λ in

    .. math::

        \Big[\max_k \frac{ε_k}{n_k},\;
             \min_{k≠l} \frac{δ_{kl} - ε_k - ε_l}{2 \max_k \sum_{l≠k} n_l}\Big]

    recovers ``partition``. For the quadratic loss ``∇f_i − ∇f_j = w_j a_j − w_i a_i`` is
    constant when weights are equal, so ``ε_k`` is the diameter of ``{a_i : i ∈ C_k}`` and
    ``δ_kl`` the least distance between the clusters: the interval is exact (as a statement
    of the theorem; the true recovery interval is wider — see ``recovery_interval``).
    Other losses: see the bounds issue (not yet available).
    """
    _require_complete_uniform(prob, "Theorem 3")
    loss = prob.loss
    if not isinstance(loss, Quadratic) or not np.all(loss.coef == loss.coef[0]):
        raise NotImplementedError("loss: the closed-form Theorem-3 interval needs the quadratic "
                                  "loss with equal weights")
    labels = check_partition(partition, prob.n_users)
    k = int(labels.max()) + 1
    if k < 2:
        raise ValueError("partition: Theorem 3 needs at least two clusters")
    grads = loss.coef[0] * loss.points  # ∇f_i(x) − ∇f_j(x) = w (a_j − a_i)
    sizes = np.bincount(labels)
    eps = np.zeros(k)
    delta = np.full((k, k), np.inf)
    for a in range(k):
        Ga = grads[labels == a]
        eps[a] = np.max(np.linalg.norm(Ga[:, None] - Ga[None], axis=2))
        for b in range(a + 1, k):
            Gb = grads[labels == b]
            delta[a, b] = delta[b, a] = np.min(np.linalg.norm(Ga[:, None] - Gb[None], axis=2))
    lo = float(np.max(eps / sizes))
    denom = 2.0 * float(np.max(prob.n_users - sizes))
    hi = min(float(delta[a, b] - eps[a] - eps[b]) for a in range(k) for b in range(k) if a != b)
    hi /= denom
    return Bound("theorem3_interval", "exact", lo, hi,
                 inputs={"eps": eps.tolist(), "delta": delta.tolist(), "sizes": sizes.tolist()},
                 note="closed form for the quadratic loss; the theorem's interval, not the "
                      "exact recovery interval")
