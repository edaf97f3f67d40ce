"""Seeded data for PPFL (Di, Yang, Ye, Chang; App. C.1). No downloads, ever.

- :func:`synthetic_mixture` — the paper's synthetic data, generated as Marfoq et al. (2021,
  FedEM) do: three groups with their own coefficients, every client a Dirichlet mixture of
  the groups;
- :func:`digits_label_groups` — a pathological split of scikit-learn's bundled digits: the
  ten labels are divided into groups, clients are spread equally over the groups and each
  holds an equal share of its group's samples (the paper's MNIST / CIFAR-10 construction,
  after Jeong and Hwang 2022).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import as_int, as_scalar, check_random_state

__all__ = ["SyntheticMixture", "synthetic_mixture", "digits_label_groups", "DigitsSplit"]


@dataclass
class SyntheticMixture:
    """Output of :func:`synthetic_mixture`.

    Attributes
    ----------
    X : ndarray (M, dim)
    y : ndarray (M,)
        0/1 labels (``family="binomial"``) or real responses (``"gaussian"``).
    groups : ndarray (M,)
        Client of each sample (0..n_clients−1, samples of a client contiguous).
    memberships : ndarray (n_clients, n_components)
        The true Dirichlet mixture weights.
    components : ndarray (n_components, dim)
        The groups' coefficients.
    component : ndarray (M,)
        The latent group of each sample.
    """

    X: np.ndarray
    y: np.ndarray
    groups: np.ndarray
    memberships: np.ndarray
    components: np.ndarray
    component: np.ndarray


def _marfoq_sizes(rng, n_clients, low=50, high=1000):
    """Marfoq et al.'s sample sizes: ``min(⌊lognormal(4, 2)⌋ + 50, 1000)``."""
    return np.minimum(rng.lognormal(4.0, 2.0, n_clients).astype(int) + low, high)


def synthetic_mixture(n_clients=30, n_components=3, dim=10, *, n_samples=None, alpha=0.4,
                      noise_level=0.1, box=(-1.0, 1.0), family="binomial", random_state=None):
    r"""The synthetic mixture of the PPFL paper (App. C.1), after Marfoq et al.'s generator.

    1. Component coefficients :math:`θ_k ∼ U(box)^{dim}`, ``k < n_components``.
    2. Client mixture weights :math:`π_i ∼ \mathrm{Dir}(α \mathbf 1)`.
    3. Client ``i`` draws its group counts from :math:`\mathrm{Mult}(m_i, π_i)`; each sample
       has :math:`x ∼ U(box)^{dim}` and, for its group ``k``,
       ``y = round(σ(θ_kᵀx + ε))`` (binomial, :math:`ε ∼ N(0, \text{noise\_level}^2)`) or
       ``y = θ_kᵀx + ε`` (gaussian).

    Marfoq et al.'s script never advances its write index between groups, so only the first
    group's labels are written there; here every sample gets the label of its own group.

    Parameters
    ----------
    n_clients, n_components, dim : int
    n_samples : int or array (n_clients,), optional
        Samples per client; default Marfoq et al.'s ``min(⌊lognormal(4, 2)⌋ + 50, 1000)``.
    alpha : float
        Dirichlet concentration (smaller: clients more dissimilar). Default 0.4 as theirs.
    noise_level : float
    box : (float, float)
    family : {"binomial", "gaussian"}
    random_state : int, RandomState or None

    Returns
    -------
    SyntheticMixture
    """
    n = as_int(n_clients, "n_clients", low=1)
    k = as_int(n_components, "n_components", low=1)
    d = as_int(dim, "dim", low=1)
    a = as_scalar(alpha, "alpha", low=0.0, low_inclusive=False)
    noise = as_scalar(noise_level, "noise_level", low=0.0)
    lo, hi = (as_scalar(v, "box", low=None) for v in box)
    if not lo < hi:
        raise ValueError(f"box: expected (low, high) with low < high, got {box}")
    if family not in ("binomial", "gaussian"):
        raise ValueError(f"family: expected 'binomial' or 'gaussian', got {family!r}")
    rng = check_random_state(random_state)
    sizes = _sizes(n_samples, n, rng)
    weights = rng.dirichlet(a * np.ones(k), size=n)
    theta = rng.uniform(lo, hi, size=(k, d))
    comp = np.concatenate([np.repeat(np.arange(k), rng.multinomial(m, w))
                           for m, w in zip(sizes, weights, strict=True)])
    X = rng.uniform(lo, hi, size=(comp.size, d))
    t = np.sum(X * theta[comp], axis=1) + rng.normal(scale=noise, size=comp.size) \
        if noise > 0 else np.sum(X * theta[comp], axis=1)
    y = (t > 0).astype(float) if family == "binomial" else t
    return SyntheticMixture(X, y, np.repeat(np.arange(n), sizes), weights, theta, comp)


def _sizes(n_samples, n, rng):
    if n_samples is None:
        return _marfoq_sizes(rng, n)
    s = np.broadcast_to(np.asarray(n_samples), (n,)).astype(int)
    if np.any(s < 1) or np.any(s != np.broadcast_to(np.asarray(n_samples), (n,))):
        raise ValueError("n_samples: expected positive integers (one or one per client)")
    return s.copy()


@dataclass
class DigitsSplit:
    """Output of :func:`digits_label_groups`.

    Attributes
    ----------
    X : ndarray (M, 64)
        Pixel intensities scaled to [0, 1].
    y : ndarray (M,)
        Digit labels 0..9.
    groups : ndarray (M,)
        Client of each sample.
    client_group : ndarray (n_clients,)
        The label group of each client.
    label_groups : list of ndarray
        The labels of each group.
    """

    X: np.ndarray
    y: np.ndarray
    groups: np.ndarray
    client_group: np.ndarray
    label_groups: list


def digits_label_groups(n_clients=30, n_groups=3, *, label_groups=None, random_state=None):
    """A pathological label-group split of ``sklearn.datasets.load_digits`` (bundled).

    The ten labels are shuffled and cut into ``n_groups`` groups of (nearly) equal size (the
    paper's MNIST split: one group of four labels and two of three), unless ``label_groups``
    gives them. Clients are spread equally over the groups in contiguous blocks of ids
    (client ``c`` belongs to group ``⌊c · n_groups / n_clients⌋`` up to rounding; the
    paper's "clients with ID numbers in the top 25 are in the first group"), and each group's
    samples, shuffled, are split equally among its clients.

    Returns
    -------
    DigitsSplit
    """
    from sklearn.datasets import load_digits

    n = as_int(n_clients, "n_clients", low=1)
    rng = check_random_state(random_state)
    groups_of_labels = _label_groups(label_groups, n_groups, rng)
    g = len(groups_of_labels)
    if n < g:
        raise ValueError(f"n_clients: need at least one client per group ({g}), got {n}")
    digits = load_digits()
    X, y = digits.data / 16.0, digits.target
    client_group = np.repeat(np.arange(g), np.diff(np.linspace(0, n, g + 1).round()
                                                   .astype(int)))
    rows, owners = [], []
    for k, labels in enumerate(groups_of_labels):
        idx = rng.permutation(np.flatnonzero(np.isin(y, labels)))
        clients = np.flatnonzero(client_group == k)
        for c, part in zip(clients, np.array_split(idx, len(clients)), strict=True):
            rows.append(part)
            owners.append(np.full(part.size, c))
    rows, owners = np.concatenate(rows), np.concatenate(owners)
    order = np.argsort(owners, kind="stable")
    return DigitsSplit(X[rows[order]], y[rows[order]], owners[order], client_group,
                       groups_of_labels)


def _label_groups(label_groups, n_groups, rng):
    if label_groups is None:
        g = as_int(n_groups, "n_groups", low=1, high=10)
        return [np.sort(p) for p in np.array_split(rng.permutation(10), g)]
    groups = [np.asarray(p, dtype=int) for p in label_groups]
    flat = np.concatenate(groups) if groups else np.array([], dtype=int)
    if (len(groups) == 0 or any(p.size == 0 for p in groups) or np.any(flat < 0)
            or np.any(flat > 9) or len(np.unique(flat)) != flat.size):
        raise ValueError("label_groups: expected non-empty, disjoint lists of digits 0..9")
    return groups
