"""PerFed-CKT's toy example (Fig. 1): clustering brings each client's model closest to its
true model."""

from __future__ import annotations

from convexfl import ckt

from ..registry import Control, outcome, register

ID = "ckt.toy"


def check(**kwargs) -> dict:
    """Distances of each client's model to its true model for FedAvg and co-distillation
    without and with clustering (:func:`convexfl.ckt.toy_example`)."""
    return ckt.toy_example(**kwargs).distances


def _clustering_wins(d) -> bool:
    return all(d["codistill_clustered"][i] < min(d["codistill"][i], d["fedavg"][i])
               for i in range(3))


@register(ID, paper="Cho et al. (PerFed-CKT)", equation="Fig. 1, App. E",
          claim="With two similar clients and one different, co-distillation with clustering "
                "brings every client closer to its true model than FedAvg and than "
                "co-distillation without clustering.",
          assumptions="App. E's setting (d = 2, ζ_k std (2, 5, 200), λ = 50); sample size and "
                      "noise not given in the paper (20 samples, σ = 1)")
def run(quick: bool, seed: int, out):
    n_inst = 2 if quick else 8
    rows = [check(random_state=seed + t, rounds=20 if quick else 50) for t in range(n_inst)]
    ok = [_clustering_wins(d) for d in rows]
    ratio = max(d["codistill_clustered"][i] / min(d["codistill"][i], d["fedavg"][i])
                for d in rows for i in range(3))
    ctrl = check(random_state=seed, rounds=20 if quick else 50, lam=0.0)
    control = Control("λ = 0 (no knowledge transfer): clustering cannot change the models, "
                      "so 'clustering wins' must fail",
                      "holds" if _clustering_wins(ctrl) else "fails",
                      {"clustered_distances": list(ctrl["codistill_clustered"])})
    return outcome(ID, outcome="holds" if all(ok) else "fails",
                   margins={"max_ratio_clustered_to_best_other": ratio},
                   instances=n_inst, seed=seed, control=control,
                   details=f"{sum(ok)}/{n_inst} seeds: clustered co-distillation closest for "
                           "every client; worst ratio of its distance to the best other "
                           f"method {ratio:.3g}.")
