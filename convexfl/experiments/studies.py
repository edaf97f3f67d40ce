"""The experiments by name, at full size or SMALL: what notebooks and report sections run."""

from __future__ import annotations

from .. import cgpfl_heur
from .armacki import armacki_appc_study, armacki_pdmm_gap, armacki_sec5_study
from .cgpfl import cgpfl_accuracy_vs_k
from .ckt import ckt_theorem_4_2, ckt_toy
from .clustering import convex_clustering_study
from .deep import torch_digits
from .ppfl import ppfl_glmm, ppfl_memberships


def sizes(name: str, small: bool = False) -> dict:
    """Keyword arguments of experiment ``name`` at full size or SMALL (CI / quick report).

    The notebooks and the report sections both call ``fn(**sizes(name, small))``, so the two
    always compute the same thing.
    """
    full = {
        "armacki_sec5": dict(users_per_cluster=20, samples_per_user=10, n_lambdas=30,
                             test_points=500),
        "armacki_appc": dict(users_per_cluster=10, samples_per_user=170, n_lambdas=30),
        "armacki_pdmm": dict(users_per_cluster=10, samples_per_user=170, max_iter=20000),
        "convex_clustering": dict(n_points=None, n_lambdas=30),
        "ppfl_memberships": dict(n_clients=30, rounds=150,
                                 snapshot_rounds=(0, 5, 20, 50, 150)),
        "ppfl_glmm": dict(names=("grunfeld", "dietox")),
        "ckt_toy": dict(rounds=50, n_seeds=5),
        "ckt_theorem_4_2": dict(n_instances=12),
        "cgpfl_k": dict(cgpfl_heur.SIZES["full"]),   # the check's settings
        "torch_digits": dict(n_clients=8, rounds=30, samples_per_client=120),
    }
    tiny = {
        "armacki_sec5": dict(users_per_cluster=4, samples_per_user=10, n_lambdas=7,
                             test_points=100),
        "armacki_appc": dict(users_per_cluster=3, samples_per_user=170, n_lambdas=7),
        "armacki_pdmm": dict(users_per_cluster=3, samples_per_user=170, max_iter=150),
        "convex_clustering": dict(n_points=30, n_lambdas=8),
        "ppfl_memberships": dict(n_clients=9, rounds=12, snapshot_rounds=(0, 3, 12)),
        "ppfl_glmm": dict(names=("grunfeld",)),
        "ckt_toy": dict(rounds=5, n_seeds=1),
        "ckt_theorem_4_2": dict(n_instances=2),
        "cgpfl_k": dict(cgpfl_heur.SIZES["quick"]),
        "torch_digits": dict(n_clients=4, rounds=1, samples_per_client=40,
                             methods=("FedAvg-DNN", "Local", "SON heads")),
    }
    table = tiny if small else full
    if name not in table:
        raise ValueError(f"name: expected one of {sorted(table)}, got {name!r}")
    return dict(table[name])


#: experiment name (the keys of :func:`sizes`) → function
STUDIES = {
    "armacki_sec5": armacki_sec5_study, "armacki_appc": armacki_appc_study,
    "armacki_pdmm": armacki_pdmm_gap, "convex_clustering": convex_clustering_study,
    "ppfl_memberships": ppfl_memberships, "ppfl_glmm": ppfl_glmm, "ckt_toy": ckt_toy,
    "ckt_theorem_4_2": ckt_theorem_4_2, "cgpfl_k": cgpfl_accuracy_vs_k,
    "torch_digits": torch_digits,
}


def run_study(name: str, small: bool = False) -> dict:
    """``STUDIES[name](**sizes(name, small))``: what a notebook and its report section run."""
    if name not in STUDIES:
        raise ValueError(f"name: expected one of {sorted(STUDIES)}, got {name!r}")
    return STUDIES[name](**sizes(name, small))
