r"""How close is CGPFL-Heur's K to the best K? The margin distribution over many federations.

CGPFL-Heur (CGPFL paper eq. (12)) picks ``K̂ = argmin_K e(K)`` after the first round. Its
**margin** on a federation is

.. math::

    \text{margin} = \max_K \text{acc}(K) - \text{acc}(\hat K) \;\ge\; 0 \text{ (up to the
    grid of K's)},

the mean test accuracy lost against the best K of the grid ``ks``. One federation gives one
number, which can fall either side of any threshold; :func:`heuristic_margins` reports the
distribution over ``n_instances`` federations (quantiles, how many within ``threshold``) —
the one function behind both the theory check ``cgpfl.heuristic`` and the report's CGPFL
section (:func:`convexfl.experiments.cgpfl_accuracy_vs_k`), with the settings of
:data:`SIZES`, so the two show the same numbers.

Data: :func:`convexfl.datasets.clustered_mlr` (20 clients, 4 planted groups, 5 features,
3 classes, 60 samples per client, logit scale 4, client spread 0.3), one federation per
``random_state = seed + 2 + t``; μ = 94.6 was tuned once on a separate instance
(:mod:`convexfl.cgpfl`). CGPFL: λ = 5, lr = 0.02, S = 5 inner steps, R = 10 local steps.
"""

from __future__ import annotations

import numpy as np

from ._validation import as_int, as_scalar

__all__ = ["MU", "SHARE", "SIZES", "THRESHOLD", "describe", "distribution", "federation",
           "heuristic_instance", "heuristic_margins"]

MU = 94.6
THRESHOLD = 0.03
#: CGPFL-Heur is "near-optimal" when at least this share of the federations lose at most
#: THRESHOLD of accuracy against the best K
SHARE = 0.8
KW = dict(lam=5.0, lr=0.02, inner_steps=5, local_steps=10)
#: settings of the check and of the report section (quick / full): one place for both
SIZES = {
    "quick": dict(n_instances=3, ks=(1, 2, 4, 6), rounds=12),
    "full": dict(n_instances=10, ks=(1, 2, 3, 4, 5, 6, 8, 10), rounds=30),
}


def federation(t: int, seed: int = 0, n_clients: int = 20, n_groups: int = 4):
    """The ``t``-th federation of the study (``random_state = seed + 2 + t``)."""
    from .datasets import clustered_mlr

    return clustered_mlr(n_clients, n_groups, 5, 3, n_samples=60, scale=4.0,
                         client_spread=0.3, random_state=seed + 2 + t)


def heuristic_instance(data, ks, *, mu=MU, control_mu=None, rounds: int = 30,
                       random_state=0, **cgpfl_options) -> dict:
    """CGPFL's accuracy for every K in ``ks`` and CGPFL-Heur's pick on ``data``.

    Returns a dict: ``data`` (its description), ``ks``, ``accuracy`` (per K), ``best_k``,
    ``best_accuracy``, ``heur_k``, ``heur_accuracy``, ``margin`` (best − Heur),
    ``heuristic`` (e(K) and its two terms);
    with ``control_mu``, also ``control_k`` and ``control_margin`` (CGPFL-Heur at that μ).
    """
    from . import baselines, cgpfl

    opts = {**KW, **cgpfl_options}
    p, c = data.n_features, data.n_classes

    def fit(**kw):
        res = baselines.run(cgpfl.cgpfl(p, c, **opts, **kw), data, rounds=rounds,
                            random_state=random_state)
        return baselines.evaluate(res, data)["accuracy"], res

    ks = [as_int(k, "ks", low=1, high=len(data.clients)) for k in ks]
    acc = np.array([fit(n_clusters=k)[0] for k in ks])
    heur_acc, res = fit(n_clusters="auto", mu=as_scalar(mu, "mu"))
    best = int(np.argmax(acc))
    out = {"data": data.description, "ks": ks, "accuracy": acc, "best_k": ks[best],
           "best_accuracy": float(acc[best]),
           "heur_k": int(res.server_state["K"]), "heur_accuracy": float(heur_acc),
           "margin": float(acc[best] - heur_acc), "heuristic": res.server_state["heuristic"]}
    if control_mu is not None:
        c_acc, c_res = fit(n_clusters="auto", mu=as_scalar(control_mu, "control_mu"))
        out.update(control_k=int(c_res.server_state["K"]),
                   control_margin=float(acc[best] - c_acc))
    return out


def distribution(margins, threshold: float = THRESHOLD) -> dict:
    """Quantiles of ``margins`` and how many are within ``threshold``; ``near_optimal``:
    at least :data:`SHARE` of them are."""
    m = np.asarray(margins, float)
    within = int(np.sum(m <= threshold))
    return {"n": len(m), "n_within": within, "share_within": within / len(m),
            "median": float(np.median(m)), "q80": float(np.quantile(m, 0.8)),
            "q90": float(np.quantile(m, 0.9)), "max": float(m.max()), "min": float(m.min()),
            "threshold": threshold, "near_optimal": within >= SHARE * len(m)}


def heuristic_margins(*, n_instances: int = 10, ks=(1, 2, 3, 4, 5, 6, 8, 10),
                      rounds: int = 30, mu=MU, control_mu=0.0, threshold=THRESHOLD,
                      seed: int = 0, n_clients: int = 20, n_groups: int = 4,
                      **cgpfl_options) -> dict:
    """:func:`heuristic_instance` on ``n_instances`` federations (module docstring) and the
    distribution of CGPFL-Heur's margin to the best K (and of the control's, μ =
    ``control_mu``; μ = 0 makes e(K) grow with K, so K̂ = 1).

    Returns
    -------
    dict
        ``instances`` (the per-federation dicts), ``margins``, ``distribution``
        (:func:`distribution`), ``control_margins``, ``control_distribution``, and the
        settings (``ks``, ``rounds``, ``mu``, ``control_mu``, ``seed``, ``n_clients``,
        ``n_groups``).
    """
    n_instances = as_int(n_instances, "n_instances", low=1)
    threshold = as_scalar(threshold, "threshold")
    rows = [heuristic_instance(federation(t, seed, n_clients, n_groups), ks, mu=mu,
                               control_mu=control_mu, rounds=rounds, **cgpfl_options)
            for t in range(n_instances)]
    margins = [r["margin"] for r in rows]
    out = {"instances": rows, "margins": margins,
           "distribution": distribution(margins, threshold), "ks": list(ks),
           "rounds": rounds, "mu": mu, "control_mu": control_mu, "seed": seed,
           "n_clients": n_clients, "n_groups": n_groups}
    if control_mu is not None:
        out["control_margins"] = [r["control_margin"] for r in rows]
        out["control_distribution"] = distribution(out["control_margins"], threshold)
    return out


def describe(res) -> str:
    """One sentence with the numbers of :func:`heuristic_margins` (check and report)."""
    d = res["distribution"]
    picks = [r["heur_k"] for r in res["instances"]]
    bests = [r["best_k"] for r in res["instances"]]
    text = (f"CGPFL-Heur (μ = {res['mu']:g}) is within {d['threshold']:g} of the best K's "
            f"accuracy on {d['n_within']}/{d['n']} federations (margin median "
            f"{d['median']:.3g}, 80 % quantile {d['q80']:.3g}, max {d['max']:.3g}; K̂ "
            f"{picks}, best K {bests}; {res['rounds']} rounds, K ∈ {res['ks']})")
    if "control_distribution" in res:
        c = res["control_distribution"]
        text += (f"; with μ = {res['control_mu']:g} (K̂ = "
                 f"{sorted({r['control_k'] for r in res['instances']})}) on {c['n_within']}/"
                 f"{c['n']} (median margin {c['median']:.3g})")
    return (text + f". Near-optimal (at least {SHARE:.0%} of the federations within "
            f"{d['threshold']:g}): {'yes' if d['near_optimal'] else 'no'}" + _edge(d) + ".")


def _edge(d) -> str:
    """Say so when one federation more or less would flip the verdict."""
    if d["near_optimal"] and d["n_within"] - 1 < SHARE * d["n"]:
        return (f", at the rule's edge: one federation more beyond {d['threshold']:g} "
                "would make it no")
    if not d["near_optimal"] and d["n_within"] + 1 >= SHARE * d["n"]:
        return (f", at the rule's edge: one federation more within {d['threshold']:g} "
                "would make it yes")
    return ""
