r"""Federated classification data for the multinomial-logistic-regression (MLR) experiments.

- :func:`clustered_mlr` — a seeded synthetic problem with a planted cluster structure: the
  clients form ``n_groups`` groups, each group has its own true MLR weight matrix, and every
  client draws its labels from its group's model (plus an optional client-level perturbation);
- :func:`federated_digits` — scikit-learn's bundled 8×8 digits (``load_digits``, no network)
  with the pathological label-group split of :func:`convexfl.datasets.ppfl.digits_label_groups`;
- :func:`from_groups` — any pooled ``(X, y, groups)`` as per-client train/test splits.

Both return a :class:`FederatedDataset`: one :class:`ClientSplit` (train/test arrays) per
client, iterable so that it can be passed as ``client_data`` to
:func:`convexfl.federated.run_federated`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import as_float_array, as_int, as_scalar, check_groups, check_random_state

__all__ = ["ClientSplit", "FederatedDataset", "clustered_mlr", "federated_digits", "from_groups"]


@dataclass(frozen=True)
class ClientSplit:
    """One client's data: features (m, p) and integer labels, for training and testing."""

    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray

    @property
    def n_train(self) -> int:
        return self.X_train.shape[0]

    @property
    def n_test(self) -> int:
        return self.X_test.shape[0]


@dataclass(frozen=True)
class FederatedDataset:
    """Clients' splits plus what is known about how they were made.

    Attributes
    ----------
    clients : tuple of ClientSplit
    n_features, n_classes : int
    groups : ndarray of int (N,) or None
        The planted group of each client (synthetic data only).
    true_models : ndarray (N, (p + 1) C) or None
        Each client's true MLR model, flat as in :mod:`convexfl._mlr` (synthetic only).
    description : str
    """

    clients: tuple
    n_features: int
    n_classes: int
    groups: np.ndarray | None = None
    true_models: np.ndarray | None = None
    description: str = ""

    def __len__(self) -> int:
        return len(self.clients)

    def __iter__(self):
        return iter(self.clients)

    def __getitem__(self, i):
        return self.clients[i]

    @property
    def n_train(self) -> np.ndarray:
        """Training samples per client."""
        return np.array([c.n_train for c in self.clients])

    def pooled(self, which: str = "train"):
        """All clients' ``(X, y, client_index)`` stacked (``which`` is "train" or "test")."""
        if which not in ("train", "test"):
            raise ValueError(f"which: must be 'train' or 'test', got {which!r}")
        Xs = [getattr(c, f"X_{which}") for c in self.clients]
        ys = [getattr(c, f"y_{which}") for c in self.clients]
        idx = np.concatenate([np.full(len(y), i) for i, y in enumerate(ys)])
        return np.vstack(Xs), np.concatenate(ys), idx


def _split(X, y, test_fraction, rng) -> ClientSplit:
    m = X.shape[0]
    n_test = int(round(test_fraction * m))
    perm = rng.permutation(m)
    te, tr = perm[:n_test], perm[n_test:]
    return ClientSplit(X[tr], y[tr].astype(np.int64), X[te], y[te].astype(np.int64))


def _sizes(n_samples, n_clients, rng) -> np.ndarray:
    if isinstance(n_samples, (tuple, list)):
        if len(n_samples) != 2:
            raise ValueError("n_samples: expected an int or a (low, high) pair")
        lo = as_int(n_samples[0], "n_samples[0]", low=2)
        hi = as_int(n_samples[1], "n_samples[1]", low=lo)
        return rng.randint(lo, hi + 1, size=n_clients)
    return np.full(n_clients, as_int(n_samples, "n_samples", low=2))


def clustered_mlr(n_clients: int = 20, n_groups: int = 4, n_features: int = 5,
                  n_classes: int = 3, *, n_samples=60, test_fraction: float = 0.5,
                  scale: float = 3.0, client_spread: float = 0.0, feature_shift: float = 0.0,
                  random_state=None) -> FederatedDataset:
    r"""Synthetic MLR clients in ``n_groups`` planted groups.

    Group :math:`g` has a true model :math:`\Theta_g = [W_g; b_g^T]` with i.i.d.
    :math:`N(0, \text{scale}^2/p)` weights (so logits have standard deviation about ``scale``)
    and :math:`N(0, \text{scale}^2/p)` intercepts. Clients are assigned to groups round-robin
    (group sizes differ by at most one); client :math:`i` of group :math:`g` has
    :math:`\Theta_i = \Theta_g + \text{client\_spread}\cdot E_i` with
    :math:`E_i \sim N(0, 1/p)` entrywise, features
    :math:`x \sim N(\text{feature\_shift}\cdot u_i, I_p)` (:math:`u_i \sim N(0, I_p)`), and
    labels drawn from :math:`\operatorname{softmax}(\tilde x^T \Theta_i)`. ``n_groups=1`` gives
    a problem with no cluster structure. A fraction ``test_fraction`` of each client's
    samples is held out for testing.

    Parameters
    ----------
    n_clients, n_groups, n_features, n_classes : int
    n_samples : int or (int, int)
        Samples per client (train + test), or a range drawn uniformly per client.
    test_fraction : float in [0, 1)
    scale, client_spread, feature_shift : float, >= 0
    random_state : None, int or RandomState

    Returns
    -------
    FederatedDataset
        With ``groups`` and ``true_models`` set.
    """
    N = as_int(n_clients, "n_clients", low=1)
    G = as_int(n_groups, "n_groups", low=1, high=N)
    p = as_int(n_features, "n_features", low=1)
    C = as_int(n_classes, "n_classes", low=2)
    tf = as_scalar(test_fraction, "test_fraction", low=0.0, high=0.95)
    sc = as_scalar(scale, "scale", low=0.0)
    spread = as_scalar(client_spread, "client_spread", low=0.0)
    shift = as_scalar(feature_shift, "feature_shift", low=0.0)
    rng = check_random_state(random_state)
    sizes = _sizes(n_samples, N, rng)
    centres = rng.normal(scale=sc / np.sqrt(p), size=(G, p + 1, C))
    groups = np.arange(N) % G
    models = centres[groups] + spread * rng.normal(scale=1 / np.sqrt(p), size=(N, p + 1, C))
    clients = []
    for i in range(N):
        X = rng.standard_normal((sizes[i], p)) + shift * rng.standard_normal(p)
        Z = X @ models[i, :-1] + models[i, -1]
        P = np.exp(Z - Z.max(axis=1, keepdims=True))
        P /= P.sum(axis=1, keepdims=True)
        y = (rng.uniform(size=(sizes[i], 1)) > np.cumsum(P, axis=1)).sum(axis=1)
        clients.append(_split(X, np.minimum(y, C - 1), tf, rng))
    return FederatedDataset(
        clients=tuple(clients), n_features=p, n_classes=C, groups=groups,
        true_models=models.reshape(N, -1),
        description=f"clustered_mlr(N={N}, groups={G}, p={p}, C={C})",
    )


def from_groups(X, y, groups, *, n_classes=None, test_fraction: float = 0.25,
                client_group=None, random_state=None,
                description: str = "") -> FederatedDataset:
    """Pooled labelled data ``(X, y, groups)`` (one client per distinct group label, in sorted
    label order) as a :class:`FederatedDataset`, each client's samples split into train/test.

    Parameters
    ----------
    X : array_like (M, p)
    y : array_like (M,)
        Integer labels 0..n_classes-1.
    groups : array_like (M,)
        The client of each sample.
    n_classes : int, optional
        Default ``max(y) + 1``.
    test_fraction : float in [0, 0.95]
    client_group : array_like (N,), optional
        A planted group per client (kept as ``groups`` of the result).
    random_state : None, int or RandomState
    description : str

    Returns
    -------
    FederatedDataset
    """
    X = as_float_array(X, "X", ndim=2)
    y = np.asarray(y)
    if y.shape != (X.shape[0],) or (y.size and np.any(y != np.round(y))) or np.any(y < 0):
        raise ValueError(f"y: expected {X.shape[0]} nonnegative integer labels")
    y = y.astype(np.int64)
    _, owner = check_groups(groups, X.shape[0])
    C = int(y.max()) + 1 if n_classes is None else as_int(n_classes, "n_classes", low=2)
    if y.max() >= C:
        raise ValueError(f"n_classes: labels go up to {y.max()}, n_classes is {C}")
    tf = as_scalar(test_fraction, "test_fraction", low=0.0, high=0.95)
    rng = check_random_state(random_state)
    clients = tuple(_split(X[owner == i], y[owner == i], tf, rng)
                    for i in range(int(owner.max()) + 1))
    cg = None if client_group is None else np.asarray(client_group, dtype=np.int64)
    if cg is not None and cg.shape != (len(clients),):
        raise ValueError(f"client_group: expected shape ({len(clients)},), got {cg.shape}")
    return FederatedDataset(clients=clients, n_features=X.shape[1], n_classes=C, groups=cg,
                            description=description)


def federated_digits(n_clients: int = 20, n_groups: int = 3, *, label_groups=None,
                     test_fraction: float = 0.25, random_state=None) -> FederatedDataset:
    """scikit-learn's bundled digits, pathological label-group split, as a
    :class:`FederatedDataset`.

    The split is :func:`convexfl.datasets.ppfl.digits_label_groups` (reused, not rewritten):
    the ten labels are cut into ``n_groups`` groups, the clients are spread equally over the
    groups and share their group's samples; ``groups`` of the result is each client's label
    group (a planted cluster structure). Each client's samples are then split into
    train/test with ``test_fraction``.

    Returns
    -------
    FederatedDataset
        64 pixel features in [0, 1], 10 classes.
    """
    from .ppfl import digits_label_groups

    rng = check_random_state(random_state)
    split = digits_label_groups(n_clients, n_groups, label_groups=label_groups,
                                random_state=rng)
    desc = f"digits, {n_clients} clients in {len(split.label_groups)} label groups"
    return from_groups(split.X, split.y, split.groups, n_classes=10,
                       test_fraction=test_fraction, client_group=split.client_group,
                       random_state=rng, description=desc)
