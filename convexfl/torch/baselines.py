"""Baselines with deep models: FedAvg (one global model) and purely local training."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from ..federated import Algorithm
from ._core import (
    BatchSampler,
    TorchFederatedTrainer,
    as_template,
    forward,
    from_message,
    init_parameters,
    mean_accuracy_metrics,
    numpy_params,
    sgd,
    take,
    to_message,
    torch_generator,
    weighted_average,
    with_prefix,
)
from .models import build_classifier, n_parameters

__all__ = ["FedAvgDNN", "LocalDNN"]


def cross_entropy_loss(template, data):
    """``loss(params, idx)``: mean cross-entropy on a mini-batch of ``data``'s training set."""

    def loss(params, idx):
        return F.cross_entropy(forward(template, params, take(data.X_train, idx)),
                               take(data.y_train, idx))

    return loss


def _template(model, n_features, n_classes):
    if isinstance(model, torch.nn.Module):
        return as_template(model)
    return as_template(lambda: build_classifier(model, n_features, n_classes))


class FedAvgDNN(TorchFederatedTrainer):
    r"""FedAvg (McMahan et al. 2017) with a deep model: one global model for every client.

    Each round the participants run ``local_steps`` SGD steps from the global model on
    their cross-entropy and reply with the change; the server subtracts the average change,
    weighted by the clients' training sizes :math:`p_i = m_i/\sum m`.

    Parameters
    ----------
    model : str or torch.nn.Module, default "mlp:32"
        A spec (see :mod:`convexfl.torch.models`) or a module mapping ``(B, p)`` to logits.
    rounds, local_steps : int
    lr : float
        Client SGD step.
    batch_size : int or None
        ``None`` uses the full local training set at every step.
    participation : float or int
        As in :func:`convexfl.federated.run_federated`.
    device : {"cpu", "cuda", "auto"}
    random_state : None or int
    progress : bool

    Attributes
    ----------
    params_ : dict of numpy arrays
        The global model.
    history_, result_, communication_, test_accuracy_, train_accuracy_,
    initial_test_accuracy_, device_, entropy_
        See :class:`PPFLDNN`.
    """

    name = "fedavg_dnn"

    def __init__(self, model="mlp:32", *, rounds=20, local_steps=10, lr=0.1, batch_size=32,
                 participation=1.0, device="cpu", random_state=None, progress=False):
        self.model = model
        self.rounds = rounds
        self.local_steps = local_steps
        self.lr = lr
        self.batch_size = batch_size
        self.participation = participation
        self.device = device
        self.random_state = random_state
        self.progress = progress

    def fit(self, clients, y=None, groups=None):
        """Train on federated data (a sequence of client splits, or ``X, y, groups``)."""
        return self._fit(clients, y, groups)

    def _prepare(self, entries, public):
        self._template = _template(self.model, self.n_features_, self.n_classes_)
        self.n_parameters_ = n_parameters(self._template)

    def _algorithm(self, clients):
        template, device, weights = self._template, self.device_, dict(enumerate(self.n_train_))
        steps, lr, bs = self.local_steps_, self.lr_, self.batch_size

        def server_init(rng):
            return {"params": to_message(init_parameters(template, torch_generator(rng), "cpu"),
                                         "")}

        def server_payload(state, cid, t):
            return with_prefix(state["params"], "w.")

        def client_update(data, state, payload, rng):
            start = from_message(payload, "w.", device)
            new = sgd_local(template, data, start, steps, lr, bs, rng, device)
            return state, {"d." + k: (start[k] - new[k]).cpu().numpy() for k in start}

        def server_update(state, replies, t, rng):
            if replies:
                avg = weighted_average({i: numpy_params(r, "d.") for i, r in replies.items()},
                                       weights)
                state = {"params": {k: (v - avg[k]).astype(np.float32)
                                    for k, v in state["params"].items()}}
            return state

        def metrics(state, client_states):
            params = {k: torch.as_tensor(v, device=device) for k, v in state["params"].items()}
            return mean_accuracy_metrics(clients, lambda c, X: forward(template, params, X))

        return Algorithm(server_init=server_init, client_init=lambda d, rng: {},
                         server_payload=server_payload, client_update=client_update,
                         server_update=server_update, metrics=metrics, name=self.name)

    def _finish(self, result):
        self.params_ = result.server_state["params"]
        self._params_dev = {k: torch.as_tensor(v, device=self.device_)
                            for k, v in self.params_.items()}

    def _logits(self, client_id, X):
        return forward(self._template, self._params_dev, X)


def sgd_local(template, data, start, steps, lr, batch_size, rng, device):
    """Plain local SGD on a client's cross-entropy from ``start`` (used by several trainers)."""
    sampler = BatchSampler(rng, data.n_train, batch_size, device)
    return sgd(start, cross_entropy_loss(template, data), steps=steps, lr=lr, sampler=sampler)


class LocalDNN(TorchFederatedTrainer):
    """Purely local training: every client trains its own model, nothing is sent.

    Played on the same runtime (empty payloads and replies) so that a "round" means
    ``local_steps`` SGD steps, as for the federated methods. Parameters as
    :class:`FedAvgDNN`.

    Attributes
    ----------
    client_params_ : list of dict of numpy arrays
    """

    name = "local_dnn"

    def __init__(self, model="mlp:32", *, rounds=20, local_steps=10, lr=0.1, batch_size=32,
                 participation=1.0, device="cpu", random_state=None, progress=False):
        self.model = model
        self.rounds = rounds
        self.local_steps = local_steps
        self.lr = lr
        self.batch_size = batch_size
        self.participation = participation
        self.device = device
        self.random_state = random_state
        self.progress = progress

    def fit(self, clients, y=None, groups=None):
        """Train on federated data (a sequence of client splits, or ``X, y, groups``)."""
        return self._fit(clients, y, groups)

    def _prepare(self, entries, public):
        self._template = _template(self.model, self.n_features_, self.n_classes_)
        self.n_parameters_ = n_parameters(self._template)

    def _algorithm(self, clients):
        template, device = self._template, self.device_
        steps, lr, bs = self.local_steps_, self.lr_, self.batch_size

        def client_init(data, rng):
            return init_parameters(template, torch_generator(rng), device)

        def client_update(data, state, payload, rng):
            return sgd_local(template, data, state, steps, lr, bs, rng, device), {}

        def metrics(state, client_states):
            return mean_accuracy_metrics(
                clients, lambda c, X: forward(template, _on(client_states[c.client_id], device),
                                              X))

        return Algorithm(server_init=lambda rng: {}, client_init=client_init,
                         server_payload=lambda s, i, t: {}, client_update=client_update,
                         server_update=lambda s, r, t, rng: s, metrics=metrics, name=self.name)

    def _finish(self, result):
        self._states = [_on(s, self.device_) for s in result.client_states]
        self.client_params_ = [to_message(s, "") for s in self._states]

    def _logits(self, client_id, X):
        return forward(self._template, self._states[client_id], X)


def _on(params, device):
    return {k: v.to(device) for k, v in params.items()}
