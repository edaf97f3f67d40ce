r"""λ-ranges for exact cluster recovery and consensus, each tagged with how exact it is.

Every function returns a :class:`Bound`: a number (``.value``) or an interval (``.lo``,
``.hi``), with ``.kind`` one of

- ``"exact"`` — the true quantity (closed form, or a convex program solved to certificate;
  for a search along λ, exact up to its stated tolerance and assumption);
- ``"certified bound"`` — rigorous but possibly loose;
- ``"estimate"`` — e.g. sampled or from a local search; not guaranteed.

All λ are in the canonical (SON) convention of :mod:`convexfl.problems`,

.. math::

    F_λ(X) = \sum_i f_i(x_i) + λ \sum_{(i,j)∈E} w_{ij}\,\|x_i - x_j\| ,

and the reduced problem (RED) of a partition ``C_1..C_K`` (``n_k = |C_k|``,
``W_kl = Σ_{i∈C_k, j∈C_l} w_ij``) is

.. math::

    \min_{w_1..w_K} \sum_k \sum_{i∈C_k} f_i(w_k) + λ \sum_{k<l} W_{kl} \|w_k - w_l\| .

What is here (docs/math.md §1.3–1.4):

==========================  ===============================================================
:func:`theorem1_threshold`  λ₁(C; λ) of Theorem 1 (paper (6)) at ``w*(λ)``
:func:`theorem2_threshold`  λ₂(C; λ) of Theorem 2 (paper (13)) at ``w*(λ)``
:func:`theorem12_interval`  the set of λ where both theorems' conditions hold
:func:`conservative_interval`  λ̲, λ̄ of (23)/(24), worst case over the set ``W``
:func:`theorem3_constants`  ε_k, δ_kl of Assumption 3 (25)–(26)
:func:`theorem3_interval`   Theorem 3's interval (27)
:func:`theorem4_radii`      Theorem 4's separation radii ε_k/μ and δ_kl/L
:func:`fusion_threshold`    λ̂, exact (a min-max flow SOCP), with closed-form bounds
:func:`partition_certificate`  the exact certificate ρ_k(λ) ≤ λ of a partition at λ
:func:`recovery_interval`   the exact λ-interval on which a partition is recovered
==========================  ===============================================================

Theorems 1–4 and (23)/(24) are stated for the complete uniform graph (every ``w_ij = 1``);
their functions refuse other graphs. :func:`fusion_threshold`, :func:`partition_certificate`
and :func:`recovery_interval` hold for any graph.

The package is cut by subject: :mod:`._base` (:class:`Bound`, shared checks and helpers),
:mod:`.fusion` (λ̂, cluster minimisers, the min-max flow), :mod:`.probe` (a partition at λ),
:mod:`.search` (where a condition on λ switches), :mod:`.theorems` (Theorems 1–4),
:mod:`.conservative` ((23)/(24)), :mod:`.partition` (the exact certificate) and
:mod:`.recovery` (the exact recovery interval, :func:`summary`).
"""

from __future__ import annotations

# private names re-exported for code that imports them from here: _jsonable (cli, path),
# _ball_norm_extrema (tests), _Probe and solve_red_with (their address before the split)
from ._base import KINDS, Bound, _jsonable  # noqa: F401
from .conservative import _ball_norm_extrema, conservative_interval  # noqa: F401
from .fusion import fusion_threshold
from .partition import PartitionCertificate, partition_certificate
from .probe import _Probe, solve_red_with  # noqa: F401
from .recovery import recovery_interval, summary
from .theorems import (
    theorem1_threshold,
    theorem2_threshold,
    theorem3_constants,
    theorem3_interval,
    theorem4_radii,
    theorem12_interval,
)

__all__ = ["Bound", "PartitionCertificate", "KINDS", "theorem1_threshold",
           "theorem2_threshold", "theorem12_interval", "conservative_interval",
           "theorem3_constants", "theorem3_interval", "theorem4_radii", "fusion_threshold",
           "partition_certificate", "recovery_interval", "summary"]
