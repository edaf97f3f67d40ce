"""Federated runs of convexfl algorithms.

The in-process simulator (:func:`run_federated`) is the default; the same algorithm
functions run under Flower through ``convexfl.federated.flower`` (needs the ``flower``
extra, imported lazily).

An algorithm is an :class:`Algorithm`, five plain functions on numpy arrays::

    server_init(rng) -> server_state
    client_init(client_data, rng) -> client_state
    server_payload(server_state, client_id, round) -> payload          # one per client
    client_update(client_data, client_state, payload, rng) -> (client_state, reply)
    server_update(server_state, {client_id: reply}, round, rng) -> server_state

plus an optional ``metrics(server_state, client_states) -> dict``. Payloads and replies are
dicts of numpy arrays and scalars (:mod:`convexfl.federated.messages`).

Examples
--------
>>> import numpy as np
>>> from convexfl.federated import fedavg_least_squares, run_federated
>>> rng = np.random.default_rng(0)
>>> data = [(rng.normal(size=(20, 3)), rng.normal(size=20)) for _ in range(4)]
>>> result = run_federated(fedavg_least_squares(3, step=0.1), data, rounds=5,
...                        random_state=0, progress=False)
>>> result.history.totals()["vectors_down"]
20
"""

from .checkpoint import load_checkpoint
from .history import History, RoundRecord
from .messages import copy_message, message_size, split_message, validate_message
from .reference import fedavg_least_squares
from .runtime import (
    Algorithm,
    Client,
    FederatedResult,
    Server,
    derive_rng,
    root_entropy,
    run_federated,
)
from .son import son_admm, son_client_data, user_loss

__all__ = [
    "Algorithm",
    "Client",
    "FederatedResult",
    "History",
    "RoundRecord",
    "Server",
    "copy_message",
    "derive_rng",
    "fedavg_least_squares",
    "load_checkpoint",
    "message_size",
    "root_entropy",
    "run_federated",
    "son_admm",
    "son_client_data",
    "split_message",
    "user_loss",
    "validate_message",
]
