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

__all__ = ["CLOSEST", "DEFAULT_GRID", "MORE_SAMPLES", "flow_ratio", "recovery_margin",
           "search_recovery", "sec5_rows"]

#: The default search grid (names of :func:`armacki_ellipses` keywords → values).
DEFAULT_GRID = {
    "centre_radius": (0.0, 1.5, 3.0, 6.0),
    "rotation": (np.pi / 3, 2 * np.pi / 3),
    "axes": ((3.0, 1.0), (1.0, 1.0), (0.5, 1.0)),
    "class_shift": (0.5, 0.75, 0.99),
}

#: The best geometry of :data:`DEFAULT_GRID` by ``search_recovery()`` (seed 0; no
#: combination has a window at the paper's sizes): the three clusters centred together,
#: their separators 120° apart, circular class regions that barely overlap.
CLOSEST = {"centre_radius": 0.0, "rotation": 2 * np.pi / 3, "axes": (1.0, 1.0),
           "class_shift": 0.99}
#: samples per user at which :data:`CLOSEST` is shown again (outside the paper's 10)
MORE_SAMPLES = 40


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
    lam_d, ratio = flow_ratio(prob, uc, rec)
    return {"params": params, "seed": random_state, "interval": rec, "lo": float(rec.lo),
            "hi": float(rec.hi), "empty": bool(rec.is_empty), "kind": rec.kind,
            "lam_hat": float(rec.related["fusion_threshold"].value),
            "lam_distinct": float(lam_d), "flow_ratio": ratio, "n_users": loss.n_users}


def flow_ratio(prob, partition, rec) -> tuple[float, float]:
    """``(λ_D, φ)`` of the module docstring for ``rec = recovery_interval(prob, partition)``:
    λ_D the lower end of its certified merge bracket, φ = max_k ρ_k(λ_D)/λ_D (``inf`` when
    the centroids are never certified distinct)."""
    from ..bounds import partition_certificate

    lam_d = float(rec.inputs.get("hi_bracket", [math.nan])[0])
    if not (np.isfinite(lam_d) and lam_d > 0):
        return lam_d, math.inf
    cert = partition_certificate(prob, partition, lam_d)
    if not cert.inputs["distinct"]:
        return lam_d, math.inf
    return lam_d, float(np.nanmax(cert.inputs["rho"]) / lam_d)


def _interval_text(r) -> str:
    if r["empty"]:
        return f"empty ({r['kind']}), φ = {r['flow_ratio']:.3g}"
    return (f"[{r['lo'] / r['lam_hat']:.4g}, {r['hi'] / r['lam_hat']:.4g}) λ̂ "
            f"({r['kind']}), φ = {r['flow_ratio']:.3g}")


def sec5_rows(prob, partition, rec, *, n_models_at_peak: int, users_per_cluster: int,
              samples_per_user: int, c: float, random_state: int):
    """The Sec. V study's rows on recovery (``quantity, paper, ours, convention, note``, as
    :func:`convexfl.experiments.format_rows` prints them) and its summary entries: the
    default data's φ and distinct models at the peak-accuracy λ, and :data:`CLOSEST` at the
    study's sizes and with :data:`MORE_SAMPLES` samples per user (seed ``random_state``).

    Returns ``(rows, summary)``.
    """
    lam_d, phi = flow_ratio(prob, partition, rec)
    near = {m: recovery_margin(CLOSEST, users_per_cluster=users_per_cluster,
                               samples_per_user=m, c=c, random_state=random_state)
            for m in (samples_per_user, MORE_SAMPLES)}
    geometry = ", ".join(f"{k} = {np.round(v, 4).tolist()}" for k, v in CLOSEST.items())

    def row(quantity, paper, ours, note):
        return {"quantity": quantity, "paper": paper, "ours": ours, "convention": "SON",
                "note": note}

    rows = [
        row("paper's 3-cluster recovery reproduced?", "yes, λ ∈ (0.0892, 0.0919) eq.(3)",
            f"no (exact interval empty; {rec.kind})" if rec.is_empty else
            f"yes, [{rec.lo:.4g}, {rec.hi:.4g}) ({rec.kind})",
            "exact recovery interval of the planted partition on our ellipses; "
            f"within-cluster flow ratio φ = max_k ρ_k/λ = {phi:.3g} at λ_D = {lam_d:.4g}, "
            "just below the clusters' first merge (recovery needs φ ≤ 1: the users' models "
            "inside a cluster differ too much for it to fuse before the clusters merge)"),
        row("distinct models at the peak-accuracy λ", "fewer than the squared penalty "
            "('more compact')", f"{n_models_at_peak} of {prob.n_users}",
            "sum-of-norms, best grid point"),
        row(f"closest ellipses of our search, {samples_per_user} samples per user",
            "ellipse parameters not printed", _interval_text(near[samples_per_user]),
            f"{geometry}: the best of convexfl.datasets.ellipse_search.DEFAULT_GRID "
            "(search_recovery(), 20 users × 10 samples, seed 0)"),
        row(f"closest ellipses, {MORE_SAMPLES} samples per user", "—",
            _interval_text(near[MORE_SAMPLES]), "outside the paper's 10 samples per user"),
    ]
    summary = {"recovery_reproduced": not rec.is_empty, "flow_ratio": phi,
               "lam_distinct": lam_d, "n_models_at_peak_son": int(n_models_at_peak),
               "closest_geometry": {k: np.round(v, 6).tolist() for k, v in CLOSEST.items()},
               "closest": {str(m): {k: r[k] for k in ("lo", "hi", "empty", "kind",
                                                       "lam_hat", "flow_ratio")}
                           for m, r in near.items()}}
    return rows, summary


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
