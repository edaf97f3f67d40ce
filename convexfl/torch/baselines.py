"""Baselines with deep models: FedAvg (one global model) and purely local training."""

from __future__ import annotations

from ..federated import Algorithm
from ._core import (
    SharedParameters,
    TorchFederatedTrainer,
    classifier_template,
    cross_entropy_loss,
    forward,
    init_parameters,
    local_sgd,
    mean_accuracy_metrics,
    to_message,
    to_tensors,
    torch_generator,
)

__all__ = ["FedAvgDNN", "LocalDNN"]


class _OneModelTrainer(TorchFederatedTrainer):
    """The arguments and set-up of the two baselines (one model spec, plain SGD)."""

    def __init__(self, model="mlp:32", *, rounds=20, local_steps=10, lr=0.1, batch_size=32,
                 participation=1.0, device="cpu", random_state=None, progress=False):
        self._store(locals())

    def _prepare(self, entries, public):
        self._set_template(classifier_template(self.model, self.n_features_,
                                               self.n_classes_))

    def _local_sgd(self, data, start, rng):
        return local_sgd(start, cross_entropy_loss(self._template, data), data, rng,
                         steps=self.local_steps_, lr=self.lr_, batch_size=self.batch_size,
                         device=self.device_)


class FedAvgDNN(_OneModelTrainer):
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

    def _algorithm(self, clients):
        template = self._template
        shared = SharedParameters(self.device_, dict(enumerate(self.n_train_)))

        def server_init(rng):
            return {"params": to_message(init_parameters(template, torch_generator(rng), "cpu"),
                                         "")}

        def server_payload(state, cid, t):
            return shared.payload(state["params"])

        def client_update(data, state, payload, rng):
            start = shared.received(payload)
            return state, shared.reply(start, self._local_sgd(data, start, rng))

        def server_update(state, replies, t, rng):
            if replies:
                state = {"params": shared.step(state["params"], replies)}
            return state

        def metrics(state, client_states):
            params = to_tensors(state["params"], shared.device)
            return mean_accuracy_metrics(clients, lambda c, X: forward(template, params, X))

        return Algorithm(server_init=server_init, client_init=lambda d, rng: {},
                         server_payload=server_payload, client_update=client_update,
                         server_update=server_update, metrics=metrics, name=self.name)

    def _finish(self, result):
        self.params_ = result.server_state["params"]
        self._params_dev = to_tensors(self.params_, self.device_)

    def _logits(self, client_id, X):
        return forward(self._template, self._params_dev, X)


class LocalDNN(_OneModelTrainer):
    """Purely local training: every client trains its own model, nothing is sent.

    Played on the same runtime (empty payloads and replies) so that a "round" means
    ``local_steps`` SGD steps, as for the federated methods. Parameters as
    :class:`FedAvgDNN`.

    Attributes
    ----------
    client_params_ : list of dict of numpy arrays
    """

    name = "local_dnn"

    def _algorithm(self, clients):
        template, device = self._template, self.device_

        def client_init(data, rng):
            return init_parameters(template, torch_generator(rng), device)

        def client_update(data, state, payload, rng):
            return self._local_sgd(data, state, rng), {}

        def metrics(state, client_states):
            return mean_accuracy_metrics(
                clients, lambda c, X: forward(template, client_states[c.client_id], X))

        return Algorithm(server_init=lambda rng: {}, client_init=client_init,
                         server_payload=lambda s, i, t: {}, client_update=client_update,
                         server_update=lambda s, r, t, rng: s, metrics=metrics, name=self.name)

    def _finish(self, result):
        self._states = [{k: v.to(self.device_) for k, v in s.items()}
                        for s in result.client_states]
        self.client_params_ = [to_message(s, "") for s in self._states]

    def _logits(self, client_id, X):
        return forward(self._template, self._states[client_id], X)
