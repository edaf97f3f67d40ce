"""convexfl algorithms on Flower (flwr): federations across machines.

Any :class:`~convexfl.federated.Algorithm` runs under Flower with one line per side::

    from convexfl.federated import flower

    server = flower.server_app(my_algorithm(...), rounds=50)       # the ServerApp
    client = flower.client_app(my_algorithm(...), load_partition)  # the ClientApp

The server side is :class:`AlgorithmStrategy`, a Flower Message-API ``Strategy`` that calls
the algorithm's ``server_init``, ``server_payload`` (one payload per client) and
``server_update``; the client side calls ``client_init`` and ``client_update``. Rounds,
sampling, simulated dropout, message accounting and checkpoints follow
:func:`~convexfl.federated.run_federated`, so the same data and seed give the same models
and the same history in both runtimes. :func:`run_in_memory` runs the Flower apps in this
process through :class:`InMemoryGrid` (no network), e.g. for tests.

See ``docs/flower.md`` for ``flwr run`` and deployments with a SuperLink and SuperNodes.

This module needs the ``flower`` extra: ``pip install 'convexfl[flower]'``.
"""

try:
    import flwr  # noqa: F401
    from flwr.serverapp.strategy import Strategy as _Strategy  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised without flwr installed
    raise ImportError(
        "convexfl.federated.flower needs Flower (flwr >= 1.20 with the Message API); "
        "install the extra: pip install 'convexfl[flower]'"
    ) from exc

from ._codec import decode_message, encode_message
from .client import client_app
from .inmemory import InMemoryGrid, roundtrip_message, run_in_memory, run_server_app
from .server import RUN_CONFIG_KEYS, AlgorithmServerApp, server_app
from .strategy import AlgorithmStrategy

__all__ = [
    "RUN_CONFIG_KEYS",
    "AlgorithmServerApp",
    "AlgorithmStrategy",
    "InMemoryGrid",
    "client_app",
    "decode_message",
    "encode_message",
    "roundtrip_message",
    "run_in_memory",
    "run_server_app",
    "server_app",
]
