"""Seeded generators of the papers' synthetic data (no downloads, ever).

- :func:`planted_points` — well-separated point clusters (convex clustering, quadratic loss);
- :func:`planted_classification` — users in a cluster draw from one distribution
  (logistic / squared-hinge personalised FL with a hidden cluster structure);
- :func:`armacki_ellipses` — the data of Armacki et al. Sec. V: K = 3 clusters, per cluster
  two overlapping ellipses in R² (one per class, uniform inside), 200 points per cluster,
  20 users per cluster each sampling 10 of its cluster's points.
"""

from __future__ import annotations

import numpy as np

from .._validation import as_int, as_scalar, check_random_state

__all__ = ["armacki_ellipses", "planted_classification", "planted_points"]


def planted_points(n_clusters: int = 3, per_cluster: int = 10, dim: int = 2, *,
                   separation: float = 10.0, radius: float = 1.0, random_state=None):
    """Points uniform in balls of ``radius`` around centres at pairwise distance
    ``≥ separation``.

    Returns
    -------
    A : ndarray (n_clusters · per_cluster, dim)
    labels : ndarray of int
        The planted cluster of each point (clusters contiguous).
    """
    k = as_int(n_clusters, "n_clusters", low=1)
    m = as_int(per_cluster, "per_cluster", low=1)
    d = as_int(dim, "dim", low=1)
    sep = as_scalar(separation, "separation", low=0.0)
    r = as_scalar(radius, "radius", low=0.0)
    rng = check_random_state(random_state)
    centres = _separated_centres(k, d, sep, rng)
    direction = rng.standard_normal((k * m, d))
    direction /= np.linalg.norm(direction, axis=1, keepdims=True)
    rad = r * rng.uniform(size=(k * m, 1)) ** (1.0 / d)
    labels = np.repeat(np.arange(k), m)
    return centres[labels] + rad * direction, labels


def _separated_centres(k, d, sep, rng):
    """k points with pairwise distance ≥ sep (a regular simplex scaled, randomly rotated, when
    d ≥ k − 1; else spaced on a line)."""
    if k == 1:
        return np.zeros((1, d))
    if d >= k - 1:
        simplex = np.eye(k) - 1.0 / k  # pairwise distance √2
        basis = np.linalg.qr(rng.standard_normal((d, d)))[0][:, : k]
        if basis.shape[1] < k:
            basis = np.hstack([basis, np.zeros((d, k - basis.shape[1]))])
        return (simplex @ basis.T) * (sep / np.sqrt(2.0))
    centres = np.zeros((k, d))
    centres[:, 0] = np.arange(k) * sep
    return centres


def planted_classification(n_clusters: int = 3, users_per_cluster: int = 5,
                           samples_per_user: int = 20, dim: int = 2, *, flip: float = 0.05,
                           random_state=None):
    """Binary classification with a hidden cluster structure of users.

    Cluster ``k`` has its own unit normal ``w_k`` (spread evenly in angle when dim = 2);
    features are standard normal and labels ``sign(⟨w_k, a⟩)``, each flipped with
    probability ``flip`` so that no user's data is separable.

    Returns
    -------
    X, y, groups, user_cluster
        ``y ∈ {−1, +1}``; ``groups`` the user of each sample (users numbered cluster by
        cluster); ``user_cluster`` the planted cluster of each user.
    """
    k = as_int(n_clusters, "n_clusters", low=1)
    u = as_int(users_per_cluster, "users_per_cluster", low=1)
    m = as_int(samples_per_user, "samples_per_user", low=2)
    d = as_int(dim, "dim", low=1)
    flip = as_scalar(flip, "flip", low=0.0, high=0.5)
    rng = check_random_state(random_state)
    if d == 2:
        ang = np.pi * np.arange(k) / k
        normals = np.c_[np.cos(ang), np.sin(ang)]
    else:
        normals = rng.standard_normal((k, d))
        normals /= np.linalg.norm(normals, axis=1, keepdims=True)
    user_cluster = np.repeat(np.arange(k), u)
    groups = np.repeat(np.arange(k * u), m)
    X = rng.standard_normal((k * u * m, d))
    y = np.sign(np.sum(X * normals[user_cluster[groups]], axis=1))
    y[y == 0] = 1.0
    y[rng.uniform(size=y.shape) < flip] *= -1
    # keep both classes at every user
    for i in range(k * u):
        rows = np.flatnonzero(groups == i)
        if np.all(y[rows] == y[rows[0]]):
            y[rows[0]] = -y[rows[0]]
    return X, y, groups, user_cluster


def _uniform_ellipse(n, centre, axes, angle, rng):
    r = np.sqrt(rng.uniform(size=n))
    t = rng.uniform(0, 2 * np.pi, size=n)
    pts = np.c_[axes[0] * r * np.cos(t), axes[1] * r * np.sin(t)]
    rot = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    return pts @ rot.T + centre


def armacki_ellipses(users_per_cluster: int = 20, samples_per_user: int = 10,
                     points_per_class: int = 100, *, random_state=None, replace=False,
                     centre_radius: float = 3.0, axes=(3.0, 1.0), class_shift: float = 0.75,
                     rotation: float = np.pi / 3):
    """The synthetic data of Armacki et al. Sec. V (the paper does not print the ellipses'
    parameters: ours are documented here).

    Cluster ``k ∈ {0, 1, 2}`` is centred at ``R (cos 2πk/3, sin 2πk/3)`` (``R =
    centre_radius``) and rotated by ``θ_k = k · rotation``; its class ``+1`` ellipse
    (semi-axes ``axes``) is shifted by ``+class_shift`` along the rotated minor axis and its
    class ``−1`` ellipse by ``−class_shift``, so the two overlap (``class_shift < axes[1]``)
    and no cluster is linearly separable. Each user samples ``samples_per_user`` of its
    cluster's ``2 · points_per_class`` points without replacement (App. C's 85 % variant:
    pass ``samples_per_user=170``).

    The defaults (``R = 3``, semi-axes 3 and 1, shift 0.75, rotation π/3: the three clusters
    overlap around the origin, each with its own optimal separator) do **not** reproduce the
    paper's exact 3-cluster recovery (λ ∈ (0.0892, 0.0919) in eq. (3)): at its sizes (20
    users × 10 samples, squared hinge c = 1e-3) the users' models differ so much inside a
    cluster that the exact recovery interval of the planted partition
    (:func:`convexfl.bounds.recovery_interval`) is empty — the clusters merge with each other
    before any of them fuses inside. At the Sec. V study's peak-accuracy λ every user's
    model is distinct, and the few-model solutions just below the fusion threshold are one
    group of almost all users plus single outliers (:func:`convexfl.experiments.
    armacki_sec5_study` reports the numbers). :mod:`convexfl.datasets.ellipse_search`
    searches these keywords inside the paper's description: none of its grid has a window
    at the paper's sizes; its closest geometry has one with 40 samples per user, and App.
    C's 170 samples per user give the defaults one.

    Returns
    -------
    dict with ``X``, ``y`` (±1), ``groups`` (user of each sample), ``user_cluster``, and the
    per-cluster pools ``pool_X``, ``pool_y``, ``pool_cluster`` (the full training data).
    """
    u = as_int(users_per_cluster, "users_per_cluster", low=1)
    p = as_int(points_per_class, "points_per_class", low=1)
    m = as_int(samples_per_user, "samples_per_user", low=1, high=None if replace else 2 * p)
    R = as_scalar(centre_radius, "centre_radius", low=0.0)
    shift = as_scalar(class_shift, "class_shift", low=0.0)
    rotation = as_scalar(rotation, "rotation", low=None)
    axes = tuple(as_scalar(a, "axes", low=0.0, low_inclusive=False) for a in np.ravel(axes))
    if len(axes) != 2:
        raise ValueError(f"axes: expected two semi-axes (major, minor), got {len(axes)}")
    rng = check_random_state(random_state)
    pool_X, pool_y, pool_c = [], [], []
    for k in range(3):
        centre = R * np.array([np.cos(2 * np.pi * k / 3), np.sin(2 * np.pi * k / 3)])
        angle = k * rotation
        normal = np.array([-np.sin(angle), np.cos(angle)])
        for label in (1.0, -1.0):
            pool_X.append(_uniform_ellipse(p, centre + shift * label * normal, axes,
                                           angle, rng))
            pool_y.append(np.full(p, label))
            pool_c.append(np.full(p, k))
    pool_X, pool_y, pool_c = np.vstack(pool_X), np.concatenate(pool_y), np.concatenate(pool_c)
    X, y, groups = [], [], []
    for k in range(3):
        rows = np.flatnonzero(pool_c == k)
        for j in range(u):
            pick = rng.choice(rows, size=m, replace=replace)
            X.append(pool_X[pick])
            y.append(pool_y[pick])
            groups.append(np.full(m, k * u + j))
    return {"X": np.vstack(X), "y": np.concatenate(y), "groups": np.concatenate(groups),
            "user_cluster": np.repeat(np.arange(3), u), "pool_X": pool_X, "pool_y": pool_y,
            "pool_cluster": pool_c}
