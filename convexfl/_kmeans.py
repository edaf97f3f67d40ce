"""k-means++ for the servers of the clustered FL algorithms (PerFed-CKT, CGPFL).

One wrapper around scikit-learn's ``KMeans``: seeded, cluster *means* recomputed from the
labels (so a cluster's centre is exactly the average of its members, the
:math:`\\alpha_{k,i} = 1/|C|` of PerFed-CKT and the :math:`\\Omega_{I,R}P` of CGPFL), no k-means
for one cluster, and single-threaded OpenMP: the servers cluster a few dozen vectors per
round, where the start-up of OpenMP threads costs ten times the work (and far more on a
loaded machine).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

__all__ = ["kmeans"]


@lru_cache(maxsize=1)
def _controller():
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


def kmeans(S: np.ndarray, n_clusters: int, *, seed: int | None, n_init: int):
    """Labels (n,) and cluster means (n_clusters, D) of the rows of ``S`` by k-means++.

    ``n_clusters`` must be in ``[1, n]`` (checked by the callers).
    """
    if n_clusters == 1:
        return np.zeros(S.shape[0], dtype=np.int64), S.mean(axis=0, keepdims=True)
    from sklearn.cluster import KMeans

    with _controller().limit(limits=1, user_api="openmp"):
        km = KMeans(n_clusters=n_clusters, init="k-means++", n_init=n_init,
                    random_state=seed).fit(S)
    labels = km.labels_.astype(np.int64)
    means = np.stack([S[labels == k].mean(axis=0) if np.any(labels == k)
                      else km.cluster_centers_[k] for k in range(n_clusters)])
    return labels, means
