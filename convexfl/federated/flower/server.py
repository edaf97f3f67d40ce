"""The Flower ``ServerApp`` for any convexfl algorithm."""

from __future__ import annotations

import logging

from flwr.app import Context
from flwr.common import log as flwr_log
from flwr.serverapp import Grid, ServerApp

from ..runtime import _as_algorithm
from .strategy import AlgorithmStrategy

__all__ = ["AlgorithmServerApp", "RUN_CONFIG_KEYS", "server_app"]


#: Run-config keys (``[tool.flwr.app.config]`` or ``flwr run --run-config``) that override
#: the arguments of :func:`server_app`, with the argument each one sets.
RUN_CONFIG_KEYS = {
    "num-server-rounds": "rounds",
    "num-clients": "n_clients",
    "participation": "participation",
    "dropout": "dropout",
    "seed": "random_state",
    "checkpoint": "checkpoint",
    "metrics-every": "metrics_every",
    "round-timeout": "round_timeout",
    "connect-timeout": "connect_timeout",
}


class AlgorithmServerApp(ServerApp):
    """A Flower ``ServerApp`` that runs one convexfl algorithm (see :func:`server_app`).

    Attributes
    ----------
    algorithm : Algorithm
        The algorithm it runs.
    strategy_ : AlgorithmStrategy or None
        The strategy of the last run in this process.
    result_ : FederatedResult or None
        The outcome of the last run in this process.
    """

    def __init__(self, algorithm):
        super().__init__()
        self.algorithm = algorithm
        self.strategy_ = None
        self.result_ = None


def _settings(defaults, run_config):
    settings = dict(defaults)
    for key, name in RUN_CONFIG_KEYS.items():
        if key in run_config:
            settings[name] = run_config[key]
    if settings["checkpoint"] == "":
        settings["checkpoint"] = None
    if settings["round_timeout"] is not None and settings["round_timeout"] <= 0:
        settings["round_timeout"] = None  # TOML has no null: 0 means "wait for every reply"
    if settings["n_clients"] == 0:
        settings["n_clients"] = None
    if settings["rounds"] is None:
        raise ValueError(
            "the number of rounds is not set: pass rounds= to server_app() or set "
            "'num-server-rounds' in the run config"
        )
    return settings


def server_app(
    algorithm,
    *,
    rounds=None,
    n_clients=None,
    participation=1.0,
    dropout=0.0,
    random_state=None,
    checkpoint=None,
    metrics_every=1,
    round_timeout=3600.0,
    connect_timeout=600.0,
    callback=None,
    on_result=None,
):
    """A Flower ``ServerApp`` that runs the server side of a convexfl algorithm.

    Its ``main`` builds an :class:`~.AlgorithmStrategy` and runs it on the grid Flower
    gives it. The arguments are defaults; the run config of the Flower app (keys in
    :data:`RUN_CONFIG_KEYS`, e.g. ``num-server-rounds`` and ``seed``) overrides them, so
    ``flwr run . --run-config "num-server-rounds=50 seed=3"`` works.

    Parameters
    ----------
    algorithm : Algorithm
        The algorithm, e.g. ``fedavg_least_squares(3, step=0.1)``.
    rounds : int, optional
        Total number of rounds (run config ``num-server-rounds``).
    n_clients : int, optional
        Number of clients (``num-clients``; ``0`` or unset: from the nodes'
        ``num-partitions`` or the checkpoint).
    participation, dropout, random_state, checkpoint, metrics_every, callback
        As for :class:`~.AlgorithmStrategy` (run config ``participation``, ``dropout``,
        ``seed``, ``checkpoint`` (``""`` for none), ``metrics-every``). Note that in TOML
        ``participation = 1.0`` means all clients and ``participation = 1`` one client.
    round_timeout : float or None, default=3600.0
        Seconds to wait for the replies of a round (``round-timeout``; ``0``: wait for all).
    connect_timeout : float, default=600.0
        Seconds to wait at start for every partition to have a node (``connect-timeout``).
    on_result : callable, optional
        ``on_result(result)`` with the :class:`~convexfl.federated.FederatedResult` when
        the run ends.

    Returns
    -------
    AlgorithmServerApp
        A ``flwr.serverapp.ServerApp``; ``result_`` holds the last result in this process.

    Examples
    --------
    >>> from convexfl.federated import flower                       # doctest: +SKIP
    >>> app = flower.server_app(fedavg_least_squares(3, step=0.1), rounds=20)  # doctest: +SKIP
    """
    algorithm = _as_algorithm(algorithm)
    if on_result is not None and not callable(on_result):
        raise TypeError("on_result must be callable or None")
    defaults = {
        "rounds": rounds,
        "n_clients": n_clients,
        "participation": participation,
        "dropout": dropout,
        "random_state": random_state,
        "checkpoint": checkpoint,
        "metrics_every": metrics_every,
        "round_timeout": round_timeout,
        "connect_timeout": connect_timeout,
    }
    app = AlgorithmServerApp(algorithm)

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        settings = _settings(defaults, context.run_config)
        strategy = AlgorithmStrategy(
            algorithm,
            n_clients=settings["n_clients"],
            participation=settings["participation"],
            dropout=settings["dropout"],
            random_state=settings["random_state"],
            checkpoint=settings["checkpoint"],
            metrics_every=settings["metrics_every"],
            callback=callback,
            connect_timeout=settings["connect_timeout"],
        )
        app.strategy_ = strategy
        result = strategy.start(
            grid, num_rounds=settings["rounds"], timeout=settings["round_timeout"]
        )
        app.result_ = result
        final = result.history[-1].metrics if len(result.history) else {}
        flwr_log(
            logging.INFO,
            "[convexfl] %s finished: %d rounds, messages %s%s",
            algorithm.name,
            result.rounds_completed,
            result.history.totals(),
            f", final metrics {final}" if final else "",
        )
        if on_result is not None:
            on_result(result)

    return app
