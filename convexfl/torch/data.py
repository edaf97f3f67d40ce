r"""Federated splits of scikit-learn's bundled digits with a public unlabeled pool.

Built on the project's digits splits (reused, not rewritten):
:func:`convexfl.datasets.ppfl.digits_label_groups` (the PPFL paper's pathological
label-group split) and :func:`convexfl.datasets.mlr.from_groups` (per-client train/test
splits as a :class:`~convexfl.datasets.mlr.FederatedDataset`). Added here, for the deep
methods:

- a **public unlabeled pool** (``public``), drawn at random and removed from the clients
  before the train/test split, for co-distillation (PerFed-CKT);
- an optional cap on the samples per client (fewer samples make collaboration matter);
- a second kind of planted structure, ``kind="permuted"``: samples are spread uniformly
  over the clients, and the clients of group ``g > 0`` relabel every digit by their group's
  permutation ``σ_g`` of the 10 classes (group 0 keeps the true labels). Clients of one
  group then draw i.i.d. from one distribution, and different groups need different
  classifiers on the same features (concept shift) — the sharpest test of clustered
  personalisation.

No network access: the digits ship with scikit-learn.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from .._validation import as_int, as_scalar, check_random_state
from ..datasets.mlr import FederatedDataset, from_groups
from ..datasets.ppfl import digits_label_groups

__all__ = ["FederatedDigits", "digits_federation"]


@dataclass(frozen=True)
class FederatedDigits(FederatedDataset):
    """A :class:`~convexfl.datasets.mlr.FederatedDataset` plus a public pool.

    Attributes
    ----------
    public : ndarray (n_public, 64) or None
        Unlabeled inputs held out from every client.
    label_groups : list of ndarray or None
        ``kind="label_groups"``: the digits of each group.
    label_maps : ndarray (n_groups, 10) or None
        ``kind="permuted"``: ``label_maps[g][y]`` is the label group ``g`` uses for digit ``y``.
    """

    public: np.ndarray | None = None
    label_groups: list | None = None
    label_maps: np.ndarray | None = None


def digits_federation(n_clients: int = 8, n_groups: int = 2, *, kind: str = "label_groups",
                      label_groups=None, samples_per_client: int | None = None,
                      test_fraction: float = 0.3, n_public: int = 200,
                      random_state=None) -> FederatedDigits:
    r"""Digits (8×8, pixels in [0, 1], 10 classes) over ``n_clients`` clients in ``n_groups``
    planted groups, with a public unlabeled pool.

    Parameters
    ----------
    n_clients : int
    n_groups : int
    kind : {"label_groups", "permuted"}
        ``"label_groups"``: :func:`convexfl.datasets.ppfl.digits_label_groups` (the labels
        are cut into groups; the clients of a group, a contiguous block of ids, share its
        samples). ``"permuted"``: uniform split, client ``i`` in group ``i % n_groups``,
        labels permuted per group (see the module docstring).
    label_groups : list of lists, optional
        ``kind="label_groups"``: the digits of each group.
    samples_per_client : int, optional
        Keep at most this many samples (train + test) per client, at random.
    test_fraction : float in [0, 0.95]
    n_public : int in [0, 1000]
        Size of the public pool.
    random_state : None, int or RandomState

    Returns
    -------
    FederatedDigits
        ``groups`` is each client's planted group.
    """
    from sklearn.datasets import load_digits

    N = as_int(n_clients, "n_clients", low=1, high=179)
    G = as_int(n_groups, "n_groups", low=1, high=min(N, 10))
    if kind not in ("label_groups", "permuted"):
        raise ValueError(f"kind: must be 'label_groups' or 'permuted', got {kind!r}")
    tf = as_scalar(test_fraction, "test_fraction", low=0.0, high=0.95)
    n_pub = as_int(n_public, "n_public", low=0, high=1000)
    spc = None if samples_per_client is None else as_int(samples_per_client,
                                                         "samples_per_client", low=2)
    rng = check_random_state(random_state)
    maps = groups_of_labels = None
    if kind == "label_groups":
        split = digits_label_groups(N, G, label_groups=label_groups, random_state=rng)
        X, y, owner, client_group = split.X, split.y, split.groups, split.client_group
        groups_of_labels = split.label_groups
    else:
        X, y = load_digits(return_X_y=True)
        X = X / 16.0
        owner = rng.permutation(len(y)) % N
        client_group = np.arange(N) % G
        maps = [np.arange(10)]
        while len(maps) < G:
            sigma = rng.permutation(10)
            if not any(np.array_equal(sigma, m) for m in maps):
                maps.append(sigma)
        maps = np.array(maps)
        y = maps[client_group[owner], y]
    public_rows = rng.choice(len(y), size=n_pub, replace=False)
    keep = np.ones(len(y), dtype=bool)
    keep[public_rows] = False
    if spc is not None:
        for i in range(N):
            rows = np.flatnonzero(keep & (owner == i))
            if rows.size > spc:
                keep[rng.choice(rows, size=rows.size - spc, replace=False)] = False
    if np.unique(owner[keep]).size != N:
        raise ValueError("n_public: leaves a client without samples; lower it")
    desc = (f"digits, {N} clients in {G} "
            + ("label groups" if kind == "label_groups" else "label-permuted groups")
            + (f", <= {spc} samples each" if spc else "") + f", {n_pub} public")
    ds = from_groups(X[keep], y[keep], owner[keep], n_classes=10, test_fraction=tf,
                     client_group=client_group, random_state=rng, description=desc)
    base = {f.name: getattr(ds, f.name) for f in fields(ds)}
    return FederatedDigits(**base, public=X[public_rows], label_groups=groups_of_labels,
                           label_maps=maps)
