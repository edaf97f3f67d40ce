"""convexfl — personalised federated learning through exact convex formulations.

Quick start::

    import convexfl as cfl
    loss = cfl.losses.Quadratic(A)                 # f_i(x) = ½‖x − a_i‖²
    graph = cfl.graphs.complete(len(A))
    prob = cfl.SumOfNorms(loss, graph, lam)        # canonical (SON) λ convention
    res = cfl.solve(prob, tol=1e-8)                # method="auto": certified, fast
    res.X, res.objective, res.kkt_residual, res.converged, res.stage
    labels = res.labels()

    cfl.ConvexClustering(n_clusters=3).fit(A).labels_   # the scikit-learn front door

Every λ is in the canonical (SON) convention of :mod:`convexfl.problems` unless stated.
Heavy parts (torch, flwr, matplotlib) are never imported here.
"""

from __future__ import annotations

import importlib

from .path import son_path
from .problems import (
    Reduced,
    SquaredPenalty,
    SumOfNorms,
    from_paper_lambda,
    global_model,
    local_models,
    oracle,
    to_paper_lambda,
)
from .solvers import NonUniqueWarning, Solution, SolverError, solve

__version__ = "0.1.0"

__all__ = ["SumOfNorms", "SquaredPenalty", "Reduced", "global_model", "local_models", "oracle",
           "from_paper_lambda", "to_paper_lambda", "solve", "Solution", "SolverError",
           "NonUniqueWarning",
           "losses", "graphs", "problems", "certificates", "clusters", "datasets", "solvers",
           "bounds", "son_path", "path", "plotting", "estimators", "ConvexClustering",
           "SumOfNormsRegressor", "SumOfNormsClassifier"]

_SUBMODULES = {"bounds", "estimators", "losses", "graphs", "problems", "certificates",
               "clusters", "datasets", "path", "plotting", "solvers", "ckt", "federated",
               "cgpfl", "baselines", "ppfl"}


_ESTIMATORS = {"ConvexClustering", "SumOfNormsRegressor", "SumOfNormsClassifier"}


def __getattr__(name):
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    if name in _ESTIMATORS:  # scikit-learn is imported on first use
        return getattr(importlib.import_module(".estimators", __name__), name)
    raise AttributeError(f"module 'convexfl' has no attribute {name!r}")
