"""Convex clustering on iris, digits and make_moons: paths and ARI."""

from __future__ import annotations

import numpy as np

from .. import clusters, graphs, losses, problems
from .._validation import as_int
from ._common import _jsonready, _row, _seed


def sklearn_points(name: str, *, n_points: int | None = None, random_state=0):
    """Points and true labels for convex clustering, from data that ships with scikit-learn.

    - ``"iris"``: the 150 flowers, 4 standardised features, 3 species;
    - ``"digits"``: digits 0, 1, 4 and 7 (default 120 images, pixels/16), reduced to 10
      principal components (the path on 64 raw dimensions is slow and no clearer);
    - ``"moons"``: ``make_moons(100, noise=0.05)``, 2 moons.

    ``n_points`` takes a stratified random subset (iris, digits) or sets the sample size
    (moons).

    Returns
    -------
    A : ndarray (n, p), labels : ndarray (n,), description : str
    """
    from sklearn import datasets as skd
    from sklearn.decomposition import PCA
    from sklearn.preprocessing import StandardScaler

    seed = _seed(random_state)
    rng = np.random.RandomState(seed)
    if n_points is not None:
        n_points = as_int(n_points, "n_points", low=4)

    def subset(y, m):
        if m is None or m >= len(y):
            return np.arange(len(y))
        classes = np.unique(y)
        per = np.array_split(np.arange(m), len(classes))
        return np.sort(np.concatenate([rng.choice(np.flatnonzero(y == c), len(p),
                                                  replace=False)
                                       for c, p in zip(classes, per, strict=True)]))

    if name == "iris":
        d = skd.load_iris()
        idx = subset(d.target, n_points)
        A = StandardScaler().fit_transform(d.data)[idx]
        return A, d.target[idx], f"iris ({len(idx)} flowers, 4 standardised features)"
    if name == "digits":
        d = skd.load_digits()
        keep = np.flatnonzero(np.isin(d.target, (0, 1, 4, 7)))
        idx = keep[subset(d.target[keep], n_points or 120)]
        A = PCA(10, random_state=seed).fit_transform(d.data[idx] / 16.0)
        return A, d.target[idx], f"digits 0/1/4/7 ({len(idx)} images, 10 principal components)"
    if name == "moons":
        A, y = skd.make_moons(n_points or 100, noise=0.05, random_state=seed)
        return A, y, f"make_moons ({len(y)} points, noise 0.05)"
    raise ValueError(f"name: expected 'iris', 'digits' or 'moons', got {name!r}")


def convex_clustering(name: str, *, n_points: int | None = None, k: int = 10,
                      phi: float = 0.5, n_lambdas: int = 30, method: str = "auto",
                      random_state=0) -> dict:
    r"""Convex clustering (quadratic loss, (SON)) of :func:`sklearn_points` on the
    Gaussian-kernel kNN graph of Chi & Lange (``w_ij = exp(−φ‖a_i − a_j‖²)`` on the k nearest
    neighbours): the warm-started solution path up to the exact λ̂, its clusterpath and
    dendrogram, and how well each λ's clusters match the true labels (adjusted Rand index).

    Returns
    -------
    dict
        ``A``, ``labels``, ``path`` (SolutionPath), ``ari`` (per grid λ), ``summary``.
    """
    from ..path import son_path

    A, truth, desc = sklearn_points(name, n_points=n_points, random_state=random_state)
    graph = graphs.knn(A, k, phi=phi)
    prob = problems.SumOfNorms(losses.Quadratic(A), graph, 1.0)
    path = son_path(prob, n_lambdas=n_lambdas, method=method, progress=False)
    ari = np.array([clusters.adjusted_rand(lab, truth) for lab in path.labels])
    kt = len(np.unique(truth))
    best = int(np.argmax(ari))
    at_k = np.flatnonzero(path.n_clusters == kt)
    summary = {
        "dataset": name, "description": desc, "n_points": int(len(A)), "dim": int(A.shape[1]),
        "graph": f"{k}-NN, Gaussian weights φ = {phi}", "n_edges": int(graph.n_edges),
        "method": path.method, "lam_hat": float(path.lam_hat), "n_true_clusters": kt,
        "best_ari": float(ari[best]), "best_lambda": float(path.lambdas[best]),
        "best_n_clusters": int(path.n_clusters[best]),
        "lambdas_with_true_count": path.lambdas[at_k],
        "ari_at_true_count": ari[at_k], "recovered_exactly_on_grid": path.recovery_runs(truth),
        "all_converged": bool(np.all(path.converged)),
        "max_kkt_residual": float(np.max(path.kkt_residual)),
        "seconds": float(np.sum(path.time_s)),
        "lambdas": path.lambdas, "n_clusters": path.n_clusters, "ari": ari,
    }
    summary["paper_vs_ours"] = [
        _row(f"{name}: best adjusted Rand index along the path", "— (not a paper experiment)",
             float(ari[best]), "SON", f"{int(path.n_clusters[best])} clusters at λ = "
             f"{path.lambdas[best]:.4g} (λ̂ = {path.lam_hat:.4g})"),
        _row(f"{name}: true partition recovered exactly on the grid", "—",
             bool(summary["recovered_exactly_on_grid"]), "SON",
             f"grid λ-ranges {summary['recovered_exactly_on_grid']}")]
    return {"A": A, "labels": truth, "path": path, "ari": ari, "description": desc,
            "summary": _jsonready(summary)}


def convex_clustering_study(*, names=("iris", "digits", "moons"), n_points=None,
                            n_lambdas: int = 30, random_state=0) -> dict:
    """:func:`convex_clustering` on each of ``names``; ``summary`` maps name → summary."""
    runs = {name: convex_clustering(name, n_points=n_points, n_lambdas=n_lambdas,
                                    random_state=random_state) for name in names}
    summary = {name: r["summary"] for name, r in runs.items()}
    summary["paper_vs_ours"] = [row for r in runs.values() for row in r["summary"]["paper_vs_ours"]]
    return {"runs": runs, "summary": summary}
