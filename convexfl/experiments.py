r"""The papers' experiments as functions: data in, numbers out (no plotting here).

Notebooks and the report call these, so each experiment is written once.

:func:`armacki_sec5` — Armacki et al. Sec. V (Figs. 2 and 3): squared-hinge users on the
three-cluster ellipse data; test accuracy and within-cluster model distance against λ for
(SON), the squared penalty (4), and the global, local and oracle models.

λ is in the (SON) convention; ``lam_paper = λ / (2N)`` is the paper's eq. (3) value.
"""

from __future__ import annotations

import numpy as np
from sklearn.utils import check_random_state

from . import clusters, datasets, graphs, losses, problems
from .solvers import METHODS, solve


def default_method() -> str:
    """The fastest registered method that handles every loss (cvxpy until faster land)."""
    for m in ("admm", "cvxpy"):
        if m in METHODS:
            return m
    return "cvxpy"


def accuracy(x, A, y) -> float:
    """Accuracy of the classifier ``sign(⟨w, a⟩ − b)``, ``x = [w, b]``."""
    return float(np.mean(np.sign(A @ x[:-1] - x[-1]) == y))


def mean_user_accuracy(X, test_X, test_y, test_cluster, user_cluster) -> float:
    """Average over users of the accuracy of user ``i``'s model on its cluster's test data."""
    accs = [accuracy(X[i], test_X[test_cluster == user_cluster[i]],
                     test_y[test_cluster == user_cluster[i]]) for i in range(len(X))]
    return float(np.mean(accs))


def within_cluster_distance(X, user_cluster) -> float:
    """Average over clusters of the mean pairwise distance of its users' models (Fig. 3)."""
    out = []
    for k in np.unique(user_cluster):
        Xk = X[user_cluster == k]
        d = np.linalg.norm(Xk[:, None] - Xk[None], axis=2)
        n = len(Xk)
        out.append(d.sum() / max(n * (n - 1), 1))
    return float(np.mean(out))


def armacki_sec5(*, lambdas=None, gammas=None, users_per_cluster: int = 20,
                 samples_per_user: int = 10, c: float = 1e-3, test_points: int = 500,
                 method: str | None = None, random_state=0, progress: bool = False) -> dict:
    """Accuracy and within-cluster distance against λ (paper Figs. 2 and 3).

    Parameters
    ----------
    lambdas : array, optional
        (SON) λ grid for the sum-of-norms model (default: 25 values, geometric, spanning
        0.01–100 in the paper's eq.-(3) units times 2N).
    gammas : array, optional
        γ grid of the squared penalty (default: the same numbers as ``lambdas``).
    users_per_cluster, samples_per_user, c
        The paper's 20, 10 and 1e-3.
    test_points : int
        Test points per cluster, drawn from the same ellipses.

    Returns
    -------
    dict of arrays: ``lambdas``, ``lam_paper`` (= λ/2N), ``son_accuracy``,
    ``son_distance``, ``son_clusters``, ``son_kkt``, ``gammas``, ``sq_accuracy``,
    ``sq_distance``; scalars ``global_accuracy``, ``local_accuracy``,
    ``oracle_accuracy``; ``exact_recovery_lams`` (λ's of the grid where the solution has
    exactly the planted three clusters).
    """
    rng = check_random_state(random_state)
    data = datasets.armacki_ellipses(users_per_cluster, samples_per_user,
                                     random_state=rng.randint(2**31))
    test = datasets.armacki_ellipses(1, 1, test_points // 2,
                                     random_state=rng.randint(2**31))
    tX, ty, tc = test["pool_X"], test["pool_y"], test["pool_cluster"]
    uc = data["user_cluster"]
    n = len(uc)
    loss = losses.SquaredHinge.from_groups(data["X"], data["y"], data["groups"], c=c)
    graph = graphs.complete(n)
    method = method or default_method()
    if lambdas is None:
        lambdas = 2 * n * np.geomspace(1e-3, 10.0, 25)
    lambdas = np.asarray(lambdas, dtype=float)
    gammas = lambdas if gammas is None else np.asarray(gammas, dtype=float)

    def acc(X):
        return mean_user_accuracy(X, tX, ty, tc, uc)

    out = {k: [] for k in ("son_accuracy", "son_distance", "son_clusters", "son_kkt",
                           "sq_accuracy", "sq_distance")}
    from tqdm.auto import tqdm

    for lam in tqdm(lambdas, desc="sum-of-norms λ", disable=not progress):
        res = solve(problems.SumOfNorms(loss, graph, lam), method=method)
        out["son_accuracy"].append(acc(res.X))
        out["son_distance"].append(within_cluster_distance(res.X, uc))
        out["son_clusters"].append(res.n_clusters)
        out["son_kkt"].append(res.kkt_residual)
    for gamma in tqdm(gammas, desc="squared penalty γ", disable=not progress):
        res = solve(problems.SquaredPenalty(loss, graph, gamma), method="cvxpy")
        out["sq_accuracy"].append(acc(res.X))
        out["sq_distance"].append(within_cluster_distance(res.X, uc))
    result = {k: np.asarray(v) for k, v in out.items()}
    result.update(
        lambdas=lambdas, lam_paper=lambdas / (2 * n), gammas=gammas, method=method,
        global_accuracy=acc(solve(problems.global_model(loss)).X),
        local_accuracy=acc(solve(problems.local_models(loss)).X),
        oracle_accuracy=acc(solve(problems.oracle(loss, uc)).X),
        exact_recovery_lams=[float(lam) for lam, k in zip(lambdas, result["son_clusters"],
                                                          strict=True) if k == 3],
        n_users=n, user_cluster=uc)
    same = []
    for lam in result["exact_recovery_lams"]:
        res = solve(problems.SumOfNorms(loss, graph, lam), method=method)
        same.append(clusters.same_partition(res.labels(), uc))
    result["exact_recovery_lams"] = [lam for lam, s in zip(result["exact_recovery_lams"], same,
                                                           strict=True) if s]
    return result
