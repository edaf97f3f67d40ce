r"""Baselines for the MLR experiments, as :class:`~convexfl.federated.Algorithm` objects.

Every algorithm here and in :mod:`convexfl.cgpfl` trains the same model — ℓ2-regularised
multinomial logistic regression (:mod:`convexfl._mlr`), client loss

.. math::

    f_i(\theta) = \frac{1}{m_i}\sum_{j} \mathrm{CE}(\operatorname{softmax}(\tilde x_j^T\Theta),
    y_j) + \frac{\ell_2}{2}\|W\|_F^2

— on the same client data and the same runtime (:func:`convexfl.federated.run_federated`),
so comparisons are like for like:

* :func:`local_training` — every client minimises :math:`f_i` alone (no communication);
* :func:`fedavg` — FedAvg (McMahan et al. 2017), sample-weighted averaging;
* :func:`pfedme` — pFedMe (T. Dinh, Tran, Nguyen 2020), Moreau-envelope personalisation;
* :func:`ditto` — Ditto (Li, Hu, Beirami, Smith 2021), a global FedAvg model plus personal
  models regularised towards it.

Client data: one entry per client with ``X_train, y_train`` (and ``X_test, y_test`` for
:func:`evaluate`), e.g. a :class:`convexfl.datasets.FederatedDataset`. Models are flat vectors
of length :math:`(p + 1)C` (layout in :mod:`convexfl._mlr`). Step sizes left at ``None`` are
:math:`1/L_i` with :math:`L_i` the client's smoothness bound (:func:`convexfl._mlr.lipschitz`),
plus :math:`\lambda` where a proximal term is added.

Communication (numbers sent per round, read off ``history`` as ``bytes / 8``): FedAvg, pFedMe
and Ditto send one model down and one up per participant, :math:`2 |S_t| D` numbers; local
training sends nothing.

Examples
--------
>>> from convexfl import baselines
>>> from convexfl.datasets import clustered_mlr
>>> data = clustered_mlr(8, 2, random_state=0)
>>> alg = baselines.fedavg(data.n_features, data.n_classes, local_steps=2)
>>> res = baselines.run(alg, data, rounds=5, random_state=0)
>>> 0.0 <= baselines.evaluate(res, data)["accuracy"] <= 1.0
True
"""

from __future__ import annotations

import numpy as np

from . import _mlr
from ._validation import as_float_array, as_int, as_scalar
from .federated import Algorithm, run_federated

__all__ = ["local_training", "fedavg", "pfedme", "ditto", "run", "evaluate",
           "personal_models"]


# ------------------------------------------------------------------------------ shared parts


class MLRSpec:
    """Validated model specification shared by the MLR algorithms (internal plumbing).

    Parameters
    ----------
    n_features, n_classes : int
    l2 : float, >= 0
        ℓ2 coefficient of :math:`f_i`.
    init : array_like (D,), optional
        Initial model (zeros by default).
    """

    def __init__(self, n_features, n_classes, l2, init=None):
        self.n_features = as_int(n_features, "n_features", low=1)
        self.n_classes = as_int(n_classes, "n_classes", low=2)
        self.l2 = as_scalar(l2, "l2", low=0.0)
        self.dim = _mlr.n_params(self.n_features, self.n_classes)
        if init is None:
            self.init = np.zeros(self.dim)
        else:
            self.init = as_float_array(init, "init", ndim=1)
            if self.init.shape != (self.dim,):
                raise ValueError(f"init: expected shape ({self.dim},), got {self.init.shape}")

    def arrays(self, client_data):
        """The client's validated ``(X, y)``."""
        return _mlr.client_arrays(client_data, self.n_features, self.n_classes)

    def grad(self, theta, X, y):
        """:math:`\\nabla f_i(\\theta)` on ``(X, y)``."""
        return _mlr.grad(theta, X, y, self.n_classes, self.l2)

    def value(self, theta, X, y):
        """:math:`f_i(\\theta)` on ``(X, y)``."""
        return _mlr.value(theta, X, y, self.n_classes, self.l2)

    def step(self, lr, X, extra=0.0):
        """``lr``, or :math:`1/(L_i + \\text{extra})` when ``lr`` is None."""
        return 1.0 / (_mlr.lipschitz(X, self.l2) + extra) if lr is None else lr


def check_lr(lr, name):
    """``None`` (automatic) or a positive finite step."""
    return None if lr is None else as_scalar(lr, name, low=0.0, low_inclusive=False)


def check_batch(batch_size):
    """``None`` (full batch) or an int >= 1."""
    return None if batch_size is None else as_int(batch_size, "batch_size", low=1)


def batch(rng, X, y, batch_size):
    """A mini-batch of ``batch_size`` rows without replacement (all rows when None/larger)."""
    m = X.shape[0]
    if batch_size is None or batch_size >= m:
        return X, y
    rows = rng.choice(m, size=batch_size, replace=False)
    return X[rows], y[rows]


def local_sgd(spec, w, X, y, eta, steps, batch_size, rng):
    """``steps`` mini-batch gradient steps ``w ← w − η ∇F(w; batch)`` from ``w``."""
    for _ in range(steps):
        Xb, yb = batch(rng, X, y, batch_size)
        w = w - eta * spec.grad(w, Xb, yb)
    return w


def stack_replies(replies, key):
    """Client ids (ascending) and the stacked reply arrays ``replies[i][key]``."""
    ids = sorted(replies)
    return np.array(ids, dtype=np.int64), np.stack([replies[i][key] for i in ids])


def _weighted_mean(replies, key):
    ids, models = stack_replies(replies, key)
    weights = np.array([replies[i]["n_samples"] for i in ids], dtype=float)
    return weights @ models / weights.sum()


def _personal_state(spec):
    def client_init(client_data, rng):
        X, _ = spec.arrays(client_data)
        return {"theta": spec.init.copy(), "n_samples": X.shape[0]}
    return client_init


# ------------------------------------------------------------------------------ local


def local_training(n_features, n_classes, *, lr=None, local_steps=10, l2=1e-3,
                   batch_size=None, init=None):
    r"""Local training: each participant takes ``local_steps`` gradient steps on its own
    :math:`f_i` per round, :math:`\theta_i \leftarrow \theta_i - \eta\nabla f_i(\theta_i)`;
    nothing is exchanged (empty messages).

    Returns
    -------
    Algorithm
        Client state ``{"theta", "n_samples"}``.
    """
    spec = MLRSpec(n_features, n_classes, l2, init)
    lr = check_lr(lr, "lr")
    steps = as_int(local_steps, "local_steps", low=1)
    bs = check_batch(batch_size)

    def client_update(client_data, state, payload, rng):
        X, y = spec.arrays(client_data)
        eta = spec.step(lr, X)
        theta = local_sgd(spec, state["theta"], X, y, eta, steps, bs, rng)
        return {"theta": theta, "n_samples": X.shape[0]}, {}

    return Algorithm(
        server_init=lambda rng: {},
        client_init=_personal_state(spec),
        server_payload=lambda state, cid, t: {},
        client_update=client_update,
        server_update=lambda state, replies, t, rng: state,
        name="local_mlr",
    )


# ------------------------------------------------------------------------------ FedAvg


def fedavg(n_features, n_classes, *, lr=None, local_steps=1, l2=1e-3, batch_size=None,
           init=None):
    r"""FedAvg for MLR.

    The server sends :math:`w`; participant :math:`i` takes ``local_steps`` steps
    :math:`w \leftarrow w - \eta\nabla f_i(w)` and replies :math:`(w_i, m_i)`; the server sets
    :math:`w = \sum_{i\in R} m_i w_i / \sum_{i \in R} m_i` over the replies :math:`R`. With
    full participation, one full-batch local step and a common step :math:`\eta`, this is
    gradient descent on the pooled objective
    :math:`F(w) = \sum_i \tfrac{m_i}{M} f_i(w)` (pooled cross-entropy + the same ℓ2 term).

    Parameters
    ----------
    n_features, n_classes : int
    lr : float, optional
        Common step; ``None`` uses :math:`1/L_i` per client.
    local_steps : int
    l2 : float
    batch_size : int, optional
    init : array_like (D,), optional

    Returns
    -------
    Algorithm
        Server state ``{"w"}``; the output model is ``server_state["w"]``.
    """
    spec = MLRSpec(n_features, n_classes, l2, init)
    lr = check_lr(lr, "lr")
    steps = as_int(local_steps, "local_steps", low=1)
    bs = check_batch(batch_size)

    def client_init(client_data, rng):
        X, _ = spec.arrays(client_data)
        return {"n_samples": X.shape[0]}

    def client_update(client_data, state, payload, rng):
        X, y = spec.arrays(client_data)
        eta = spec.step(lr, X)
        w = local_sgd(spec, payload["w"], X, y, eta, steps, bs, rng)
        return state, {"w": w, "n_samples": X.shape[0]}

    def server_update(state, replies, t, rng):
        return {"w": _weighted_mean(replies, "w")} if replies else state

    return Algorithm(
        server_init=lambda rng: {"w": spec.init.copy()},
        client_init=client_init,
        server_payload=lambda state, cid, t: {"w": state["w"]},
        client_update=client_update,
        server_update=server_update,
        name="fedavg_mlr",
    )


# ------------------------------------------------------------------------------ pFedMe


def pfedme(n_features, n_classes, *, lam=15.0, lr=0.005, personal_lr=None, inner_steps=5,
           local_steps=10, beta=1.0, l2=1e-3, batch_size=None, init=None):
    r"""pFedMe (T. Dinh, Tran, Nguyen, NeurIPS 2020) for MLR.

    Objective: :math:`\min_w \frac1N\sum_i F_i(w)`, with the Moreau envelope
    :math:`F_i(w) = \min_\theta f_i(\theta) + \tfrac\lambda2\|\theta - w\|^2`.
    Round :math:`t`: the server sends :math:`w`; participant :math:`i` sets
    :math:`w_{i,0} = \theta_i = w` and for :math:`r = 0..R-1` (``local_steps``) draws a batch,
    approximates :math:`\theta_i(w_{i,r})` by ``inner_steps`` (:math:`S`) gradient steps

    .. math::

        \theta \leftarrow \theta - \hat\eta\,(\nabla f_i(\theta) + \lambda(\theta - w_{i,r})),

    then :math:`w_{i,r+1} = w_{i,r} - \eta\lambda(w_{i,r} - \theta)`; it replies
    :math:`w_{i,R}`. The server: :math:`w \leftarrow w - \beta(w - \frac{1}{|R|}\sum_{i\in R}
    w_{i,R})` (uniform mean, as in pFedMe; :math:`\beta = 1` is plain averaging).
    The personalised model of client :math:`i` is its last :math:`\theta_i`.

    Its client and server loops are written independently of :func:`convexfl.cgpfl.cgpfl`
    (only the MLR gradient, the data checks and the batch sampler are shared), so that the
    claim "CGPFL with K = 1 is pFedMe" can be tested iterate by iterate.

    Parameters
    ----------
    n_features, n_classes : int
    lam : float, > 0
        :math:`\lambda`.
    lr : float, > 0
        :math:`\eta` (pFedMe's local learning rate; CGPFL's :math:`\beta`).
    personal_lr : float, optional
        :math:`\hat\eta`; ``None`` uses :math:`1/(L_i + \lambda)`.
    inner_steps, local_steps : int
        :math:`S` (pFedMe's K) and :math:`R`.
    beta : float in (0, 2]
        Server mixing (pFedMe's β; CGPFL's α).
    l2 : float
    batch_size : int, optional
        One batch per local step r (full batch when None).
    init : array_like (D,), optional

    Returns
    -------
    Algorithm
        Server state ``{"w"}``; client state ``{"theta", "n_samples"}``.
    """
    spec = MLRSpec(n_features, n_classes, l2, init)
    lam = as_scalar(lam, "lam", low=0.0, low_inclusive=False)
    lr = as_scalar(lr, "lr", low=0.0, low_inclusive=False)
    personal_lr = check_lr(personal_lr, "personal_lr")
    S = as_int(inner_steps, "inner_steps", low=1)
    R = as_int(local_steps, "local_steps", low=1)
    beta = as_scalar(beta, "beta", low=0.0, low_inclusive=False, high=2.0)
    bs = check_batch(batch_size)

    def client_update(client_data, state, payload, rng):
        X, y = spec.arrays(client_data)
        eta_p = spec.step(personal_lr, X, lam)
        w = payload["w"]
        theta = w.copy()
        for _ in range(R):
            Xb, yb = batch(rng, X, y, bs)
            for _ in range(S):
                theta = theta - eta_p * (spec.grad(theta, Xb, yb) + lam * (theta - w))
            w = w - lr * lam * (w - theta)
        return {"theta": theta, "n_samples": X.shape[0]}, {"w": w, "n_samples": X.shape[0]}

    def server_update(state, replies, t, rng):
        if not replies:
            return state
        _, uploads = stack_replies(replies, "w")
        w = state["w"]
        return {"w": w - beta * (w - uploads.mean(axis=0))}

    return Algorithm(
        server_init=lambda rng: {"w": spec.init.copy()},
        client_init=_personal_state(spec),
        server_payload=lambda state, cid, t: {"w": state["w"]},
        client_update=client_update,
        server_update=server_update,
        name="pfedme_mlr",
    )


# ------------------------------------------------------------------------------ Ditto


def ditto(n_features, n_classes, *, lam=0.5, lr=None, local_steps=5, personal_lr=None,
          personal_steps=5, l2=1e-3, batch_size=None, init=None):
    r"""Ditto (Li, Hu, Beirami, Smith, ICML 2021) for MLR.

    Global model by FedAvg (``local_steps`` steps :math:`w \leftarrow w - \eta\nabla f_i(w)`,
    sample-weighted averaging); each participant also takes ``personal_steps`` steps on its
    personal objective :math:`f_i(v) + \tfrac\lambda2\|v - w^t\|^2` with the received global
    :math:`w^t`:

    .. math:: v_i \leftarrow v_i - \hat\eta\,(\nabla f_i(v_i) + \lambda(v_i - w^t)).

    The personalised model of client :math:`i` is :math:`v_i` (kept between rounds).

    Parameters
    ----------
    n_features, n_classes : int
    lam : float, >= 0
    lr, personal_lr : float, optional
        ``None``: :math:`1/L_i` and :math:`1/(L_i + \lambda)`.
    local_steps, personal_steps : int
    l2 : float
    batch_size : int, optional
    init : array_like (D,), optional

    Returns
    -------
    Algorithm
        Server state ``{"w"}``; client state ``{"theta", "n_samples"}`` (``theta`` is
        :math:`v_i`).
    """
    spec = MLRSpec(n_features, n_classes, l2, init)
    lam = as_scalar(lam, "lam", low=0.0)
    lr = check_lr(lr, "lr")
    personal_lr = check_lr(personal_lr, "personal_lr")
    E = as_int(local_steps, "local_steps", low=1)
    P = as_int(personal_steps, "personal_steps", low=1)
    bs = check_batch(batch_size)

    def client_update(client_data, state, payload, rng):
        X, y = spec.arrays(client_data)
        w_t = payload["w"]
        eta, eta_p = spec.step(lr, X), spec.step(personal_lr, X, lam)
        w = local_sgd(spec, w_t, X, y, eta, E, bs, rng)
        v = state["theta"]
        for _ in range(P):
            Xb, yb = batch(rng, X, y, bs)
            v = v - eta_p * (spec.grad(v, Xb, yb) + lam * (v - w_t))
        return {"theta": v, "n_samples": X.shape[0]}, {"w": w, "n_samples": X.shape[0]}

    def server_update(state, replies, t, rng):
        return {"w": _weighted_mean(replies, "w")} if replies else state

    return Algorithm(
        server_init=lambda rng: {"w": spec.init.copy()},
        client_init=_personal_state(spec),
        server_payload=lambda state, cid, t: {"w": state["w"]},
        client_update=client_update,
        server_update=server_update,
        name="ditto_mlr",
    )


# ------------------------------------------------------------------------------ running


def run(algorithm, data, *, rounds, participation=1.0, random_state=None, **kwargs):
    """:func:`convexfl.federated.run_federated` without the progress bar (a shorthand)."""
    kwargs.setdefault("progress", False)
    return run_federated(algorithm, list(data), rounds=rounds, participation=participation,
                         random_state=random_state, **kwargs)


def personal_models(result, n_clients=None):
    """The model each client would predict with after a run, shape (N, D).

    Personalised algorithms (client states with ``"theta"``): each client's own model. Global
    algorithms (FedAvg): the server's ``"w"`` for everyone.
    """
    states = result.client_states
    if states and all("theta" in s for s in states):
        return np.stack([s["theta"] for s in states])
    if "w" not in result.server_state:
        raise ValueError("result: neither client models ('theta') nor a server model ('w')")
    n = len(states) if n_clients is None else n_clients
    return np.tile(result.server_state["w"], (n, 1))


def evaluate(result, data, *, n_classes=None):
    """Test accuracy of the models of a run (or of an (N, D) array of models).

    Parameters
    ----------
    result : FederatedResult or array_like (N, D)
    data : FederatedDataset or list of client data
        The clients' data (their ``X_test, y_test``; training data when absent).
    n_classes : int, optional
        Needed when ``data`` is not a :class:`~convexfl.datasets.FederatedDataset`.

    Returns
    -------
    dict
        ``accuracy`` (correct / test samples), ``mean_client_accuracy``, ``client_accuracy``,
        ``client_n_test``.
    """
    clients = list(data)
    C = getattr(data, "n_classes", None) if n_classes is None else n_classes
    if C is None:
        raise ValueError("n_classes: required when data is not a FederatedDataset")
    C = as_int(C, "n_classes", low=2)
    models = (personal_models(result, len(clients)) if hasattr(result, "client_states")
              else as_float_array(result, "result", ndim=2))
    if models.shape[0] != len(clients) or models.shape[1] % C:
        raise ValueError(f"result: expected {len(clients)} models of a length divisible by "
                         f"{C}, got shape {models.shape}")
    p = models.shape[1] // C - 1
    return _mlr.evaluate(models, clients, p, C)
