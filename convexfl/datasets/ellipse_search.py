r"""Where does the ellipse data of Armacki et al. Sec. V have an exact 3-cluster recovery window?

The paper prints that (3) recovers its three clusters exactly for λ ∈ (0.0892, 0.0919)
(eq. (3) convention) but not its ellipses' parameters. :func:`recovery_margin` computes, for
one choice of the parameters of :func:`convexfl.datasets.armacki_ellipses`, the **exact**
recovery interval of the planted partition (:func:`convexfl.bounds.recovery_interval`,
squared hinge, complete graph, λ in the SON convention) and how far the data is from having
one: the within-cluster flow ratio

.. math::

    φ = \max_k ρ_k(λ_D) / λ_D ,

with ``λ_D`` the largest λ at which the (RED) centroids are certified distinct (just below
their first merge) and ``ρ_k`` the exact certificate's within-cluster flow (docs/math.md
§1.4). Cluster ``k`` holds together at λ iff ``ρ_k(λ) ≤ λ``, so ``φ ≤ 1`` where the interval
is non-empty; ``φ > 1`` says by how much the users' models inside a cluster are too
different for the cluster to fuse before the clusters merge (the interval's monotonicity
assumption makes ``λ_D`` the best place to look). :func:`search_recovery` runs it over a grid
kept inside what the paper describes: three clusters, two overlapping class ellipses per
cluster (``class_shift < axes[1]``, so no cluster is linearly separable), 100 points per
class, 20 users per cluster sampling 10 points each.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from .._validation import as_int
from .armacki import armacki_ellipses

__all__ = ["DEFAULT_GRID", "recovery_margin", "search_recovery"]

#: The default search grid (names of :func:`armacki_ellipses` keywords → values).
DEFAULT_GRID = {
    "centre_radius": (0.0, 1.5, 3.0, 6.0),
    "rotation": (np.pi / 3, 2 * np.pi / 3),
    "axes": ((3.0, 1.0), (1.0, 1.0), (0.5, 1.0)),
    "class_shift": (0.5, 0.75, 0.99),
}


def recovery_margin(params=None, *, users_per_cluster: int = 20, samples_per_user: int = 10,
                    c: float = 1e-3, random_state=0, n_grid: int = 10) -> dict:
    """The exact recovery interval of the planted partition on
    ``armacki_ellipses(users_per_cluster, samples_per_user, random_state=random_state,
    **params)`` with squared-hinge users (``c``) on the complete graph, and the flow ratio φ
    of the module docstring.

    Returns
    -------
    dict
        ``params``, ``seed``, ``interval`` (the :class:`~convexfl.bounds.Bound`), ``lo``,
        ``hi`` (SON; ``inf``/``-inf`` when empty), ``empty``, ``kind``, ``lam_hat`` (exact
        fusion threshold), ``lam_distinct`` (λ_D), ``flow_ratio`` (φ; ``inf`` when the
        centroids are never certified distinct), ``n_users``.
    """
    from .. import bounds, graphs, losses, problems

    params = dict(params or {})
    d = armacki_ellipses(users_per_cluster, samples_per_user, random_state=random_state,
                         **params)
    loss = losses.SquaredHinge.from_groups(d["X"], d["y"], d["groups"], c=c)
    prob = problems.SumOfNorms(loss, graphs.complete(loss.n_users), 1.0)
    uc = d["user_cluster"]
    rec = bounds.recovery_interval(prob, uc, compare=False, n_grid=n_grid)
    lam_d = rec.inputs.get("hi_bracket", [math.nan])[0]
    ratio = math.inf
    if np.isfinite(lam_d) and lam_d > 0:
        cert = bounds.partition_certificate(prob, uc, lam_d)
        if cert.inputs["distinct"]:
            ratio = float(np.nanmax(cert.inputs["rho"]) / lam_d)
    return {"params": params, "seed": random_state, "interval": rec, "lo": float(rec.lo),
            "hi": float(rec.hi), "empty": bool(rec.is_empty), "kind": rec.kind,
            "lam_hat": float(rec.related["fusion_threshold"].value),
            "lam_distinct": float(lam_d), "flow_ratio": ratio, "n_users": loss.n_users}


def _inside_description(p) -> bool:
    """The two class ellipses of a cluster overlap: the shift is below the minor semi-axis."""
    return p.get("class_shift", 0.75) < tuple(p.get("axes", (3.0, 1.0)))[1]


def search_recovery(grid=None, *, seeds=(0,), users_per_cluster: int = 20,
                    samples_per_user: int = 10, c: float = 1e-3, n_grid: int = 10,
                    progress: bool = False) -> list[dict]:
    """:func:`recovery_margin` for every combination of ``grid`` (default
    :data:`DEFAULT_GRID`; combinations whose class ellipses would not overlap are skipped)
    and every seed, best first: non-empty intervals by relative width ``hi/lo``, then the
    rest by flow ratio φ.

    A row per (parameters, seed): the :func:`recovery_margin` dict.
    """
    from tqdm.auto import tqdm

    grid = DEFAULT_GRID if grid is None else dict(grid)
    as_int(users_per_cluster, "users_per_cluster", low=2)
    unknown = set(grid) - {"centre_radius", "rotation", "axes", "class_shift"}
    if unknown:
        raise ValueError(f"grid: unknown armacki_ellipses parameters {sorted(unknown)}")
    combos = [dict(zip(grid, v, strict=True)) for v in itertools.product(*grid.values())]
    combos = [p for p in combos if _inside_description(p)]
    rows = [recovery_margin(p, users_per_cluster=users_per_cluster,
                            samples_per_user=samples_per_user, c=c, random_state=s,
                            n_grid=n_grid)
            for p, s in tqdm(list(itertools.product(combos, seeds)), disable=not progress,
                             desc="ellipse parameters")]
    return sorted(rows, key=_rank)


def _rank(row):
    if not row["empty"]:
        return (0, -(row["hi"] / row["lo"] if row["lo"] > 0 else math.inf))
    return (1, row["flow_ratio"])
