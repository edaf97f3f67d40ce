"""The algorithm and the data of the example federation.

Each client's data are made from its ``partition-id`` (and an optional ``data-seed`` in
the node config): least squares around one shared model plus a client-specific shift.
A real deployment would read the node's own files here, e.g. from a ``data-path`` in the
node config.
"""

import numpy as np

from convexfl.federated import fedavg_least_squares

N_FEATURES = 3


def algorithm():
    """The algorithm, built the same way on the server and on the clients."""
    return fedavg_least_squares(N_FEATURES, step=0.3)


def load_partition(partition_id, node_config):
    """Client data ``(A, b)`` of one partition."""
    seed = int(node_config.get("data-seed", 0))
    x_true = np.random.default_rng(seed).normal(size=N_FEATURES)
    rng = np.random.default_rng([seed, partition_id])
    m = 20 + 5 * partition_id
    A = rng.normal(size=(m, N_FEATURES))
    shift = 0.2 * rng.normal(size=N_FEATURES)
    return A, A @ (x_true + shift) + 0.1 * rng.normal(size=m)
