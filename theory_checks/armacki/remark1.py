"""Remark 1: with strictly convex f_i the (SON) solution is unique (and so its cluster
structure is well defined)."""

from __future__ import annotations

import numpy as np

import convexfl as cfl

from .._common import rng_for
from ..registry import Control, outcome, register

ID = "armacki.remark1"


def check(prob, *, n_directions: int = 20, step: float = 1e-3, seed: int = 0) -> dict:
    """Solve ``prob``, then move the solution along random directions and along directions
    that leave every f_i's data term unchanged (the common null space of the designs, if
    any): the objective must strictly increase if the solution is unique.

    Returns the smallest objective increase found (≤ 0 exhibits a second minimiser).
    """
    res = cfl.solve(prob, tol=1e-10)
    rng = np.random.default_rng(seed)
    dirs = [rng.standard_normal(res.X.shape) for _ in range(n_directions)]
    null = _common_null_space(prob.loss)
    for v in null.T:
        dirs.append(np.tile(v, (prob.n_users, 1)))
    f0 = prob.objective(res.X)
    incs = []
    for D in dirs:
        D = step * D / np.linalg.norm(D)
        incs.append(prob.objective(res.X + D) - f0)
    return {"min_increase": float(min(incs)), "objective": f0,
            "null_space_dim": int(null.shape[1]), "kkt_residual": res.kkt_residual}


def _common_null_space(loss) -> np.ndarray:
    """Directions v with ⟨a_j, v⟩ = 0 for every sample of every user and no ridge."""
    if loss.code == cfl._kernels.QUADRATIC or np.any(loss.ridge > 0):
        return np.zeros((loss.dim, 0))
    _, s, vt = np.linalg.svd(loss.F, full_matrices=True)
    rank = int(np.sum(s > 1e-10 * s.max()))
    return vt[rank:].T


def _instance(rng, strict: bool):
    n, m, p = 6, 5, 4
    X = rng.standard_normal((n * m, p))
    if not strict:
        X[:, -1] = 0.0  # a feature no user ever sees: f_i flat along it (and c = 0)
    y = np.where(rng.uniform(size=n * m) < 0.5, -1.0, 1.0)
    loss = cfl.losses.Logistic.from_groups(X, y, np.repeat(np.arange(n), m),
                                           c=0.05 if strict else 0.0)
    return cfl.SumOfNorms(loss, cfl.graphs.complete(n), float(rng.uniform(0.01, 0.3)))


@register(ID, paper="Armacki et al.", equation="Remark 1",
          claim="If every f_i is strictly convex, (SON) has a unique solution.",
          assumptions="logistic loss with ridge c > 0 (strongly convex), complete graph")
def run(quick: bool, seed: int, out):
    n_inst = 3 if quick else 15
    rows = [check(_instance(rng_for(seed, 6, t), True), seed=t) for t in range(n_inst)]
    ok = all(r["min_increase"] > 0 for r in rows)
    ctrl = check(_instance(rng_for(seed, 66), False))
    control = Control("logistic without ridge and a feature that is always 0 (not strictly "
                      "convex): moving along it leaves the objective unchanged",
                      "holds" if ctrl["min_increase"] > 1e-14 else "fails",
                      {"min_increase": ctrl["min_increase"],
                       "null_space_dim": ctrl["null_space_dim"]})
    return outcome(ID, outcome="holds" if ok else "fails",
                   margins={"min_objective_increase": min(r["min_increase"] for r in rows),
                            "max_kkt_residual": max(r["kkt_residual"] for r in rows)},
                   instances=n_inst, seed=seed, control=control,
                   details="Objective increase for steps of length 1e-3 from the certified "
                           "solution along random and null-space directions.")
