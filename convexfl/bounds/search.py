r"""Locating where a condition on λ switches: the geometric grid up to λ̂, bisection, and the
two-sided search for a set ``[lo, hi)`` (used by :func:`convexfl.bounds.theorem12_interval`
and :func:`convexfl.bounds.recovery_interval`)."""

from __future__ import annotations

import math

import numpy as np

from .._validation import as_int
from .fusion import fusion_threshold


def _default_grid(prob, n_grid, lam_hat=None):
    n_grid = as_int(n_grid, "n_grid", low=3)
    if lam_hat is None:
        fb = fusion_threshold(prob)
        lam_hat = fb.value if np.isfinite(fb.value) else fb.inputs["per_component"]
    if not lam_hat > 0:
        return np.array([0.0])
    return np.geomspace(lam_hat * 1e-4, lam_hat, n_grid)


def _bisect(pred, a, b, rtol, *, a_true):
    """Shrink ``[a, b]`` (``pred(a) == a_true``, ``pred(b) != a_true``) to ``b − a ≤ rtol b``;
    return ``(a, b, evaluations)``. Geometric midpoints when ``a > 0``."""
    n = 0
    if a <= 0:
        for _ in range(60):
            m = b / 4.0
            n += 1
            if pred(m) == a_true:
                a = m
                break
            b = m
        else:
            return 0.0, b, n
    for _ in range(200):
        if b - a <= rtol * b:
            break
        m = math.sqrt(a * b)
        if not a < m < b:
            m = 0.5 * (a + b)
        n += 1
        if pred(m) == a_true:
            a = m
        else:
            b = m
    return a, b, n


def _two_sided(p_low, p_up, grid, rtol):
    r"""Locate ``{λ : p_low(λ) and p_up(λ)}`` assuming ``p_up`` holds on ``[0, hi)`` only and
    ``p_low`` on ``[lo, ∞)`` only (within ``[0, hi)``), so that the set is ``[lo, hi)``.

    ``p_up`` is evaluated on the grid and its switch refined by bisection; then ``p_low`` on
    the grid points below ``hi`` (and just below ``hi`` when none holds), its switch refined
    by bisection. Works for intervals narrower than the grid spacing. Returns
    ``(lo, hi, info)`` with ``lo ≥ hi`` meaning empty, and ``info["violations"]`` listing
    grid points that contradict the assumption.
    """
    grid = np.asarray(grid, float)
    up = np.array([bool(p_up(x)) for x in grid])
    n_eval = len(grid)
    violations = []
    if up.all():
        i_hi, hi_a, hi = len(grid), float(grid[-1]), math.inf
    else:
        i_hi = int(np.argmin(up))           # first grid point where p_up fails
        if np.any(up[i_hi:]):
            violations.append("the upper condition holds again above its first failure at "
                              f"λ = {grid[i_hi]:.6g}")
        if i_hi == 0:
            if not p_up(0.0):
                return math.inf, -math.inf, {"grid": grid, "n_evaluations": n_eval + 1,
                                             "violations": violations,
                                             "reason": "the upper condition fails at λ = 0"}
            hi_a, hi, k = _bisect(p_up, 0.0, float(grid[0]), rtol, a_true=True)
        else:
            hi_a, hi, k = _bisect(p_up, float(grid[i_hi - 1]), float(grid[i_hi]), rtol,
                                  a_true=True)
        n_eval += k + 1
    below = grid[:i_hi]
    low = np.array([bool(p_low(x)) for x in below])
    n_eval += len(below)
    info = {"grid": grid, "upper_on_grid": up, "lower_on_grid": low,
            "hi_bracket": [hi_a, hi]}
    if low.any():
        j = int(np.argmax(low))
        if not np.all(low[j:]):
            violations.append("the lower condition fails again above its first success at "
                              f"λ = {below[j]:.6g}")
        a_, b_ = (float(below[j - 1]) if j > 0 else 0.0), float(below[j])
    else:
        top = hi_a if np.isfinite(hi_a) else float(grid[-1])
        n_eval += 1
        if top <= 0 or not p_low(top):
            info.update(n_evaluations=n_eval, violations=violations,
                        reason="the lower condition fails everywhere below hi")
            return math.inf, -math.inf, info
        a_, b_ = (float(below[-1]) if len(below) and below[-1] < top else 0.0), top
    if a_ == 0.0 and p_low(0.0):
        lo, lo_a = 0.0, 0.0
    else:
        lo_a, lo, k = _bisect(lambda x: not p_low(x), a_, b_, rtol, a_true=True)
        n_eval += k
    info.update(lo_bracket=[lo_a, lo], n_evaluations=n_eval, violations=violations)
    return lo, hi, info
