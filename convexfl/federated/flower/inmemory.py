"""Flower's ServerApp and ClientApps in one process: an in-memory ``Grid``.

:class:`InMemoryGrid` implements Flower's ``Grid`` interface by calling ``ClientApp``
objects directly: no SuperLink, no sockets, no Ray. By default every message, reply and
node ``Context`` goes through Flower's own serialisation on the way (messages as the
object tree that the gRPC transport ships, contexts as the protobuf a SuperNode hands to a
``ClientApp`` process), so what the algorithms receive is what a deployment delivers.
Hooks lose messages or replies and tamper with replies, to test failure handling.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterable

import numpy as np
from flwr.app import Context, Error, Message, RecordDict
from flwr.common.constant import SUPERLINK_NODE_ID, ErrorCode
from flwr.common.serde import context_from_proto, context_to_proto
from flwr.serverapp import Grid
from flwr.supercore.inflatable.inflatable_object import (
    get_all_nested_objects,
    no_object_id_recompute,
)
from flwr.supercore.inflatable.inflatable_utils import inflate_object_from_contents
from flwr.supercore.run import Run
from flwr.supercore.task_identity import TaskIdentity

from ..runtime import _as_algorithm, _check_client_data
from .client import NUM_PARTITIONS, PARTITION_ID, client_app
from .server import server_app

__all__ = ["InMemoryGrid", "roundtrip_message", "run_in_memory", "run_server_app"]


def roundtrip_message(message):
    """Serialise a ``Message`` as Flower's transport does and inflate it again.

    The message is deflated into its object tree (message, record dict, records, arrays;
    the objects the gRPC transport pushes and pulls by id) and rebuilt from those bytes.

    Parameters
    ----------
    message : flwr.app.Message

    Returns
    -------
    flwr.app.Message
        An equal, independent message (same metadata, including the message id).
    """
    message_id = message.metadata.message_id
    with no_object_id_recompute():  # as Flower's grids do: hash each object once
        objects = get_all_nested_objects(message)
        contents = {object_id: obj.deflate() for object_id, obj in objects.items()}
        copy = inflate_object_from_contents(message.object_id, contents)
    copy.metadata.__dict__["_message_id"] = message_id
    return copy


class InMemoryGrid(Grid):
    """A Flower ``Grid`` that delivers messages to ``ClientApp`` objects in this process.

    Parameters
    ----------
    client_app : flwr.clientapp.ClientApp
        The app every node runs.
    node_configs : list of dict
        One node config per node (e.g. ``{"partition-id": 0, "num-partitions": 4}``).
    run_id : int, default=1
        The run id the grid reports.
    run_config : dict, optional
        The run config the client contexts hold.
    node_ids : list of int, optional
        Flower node ids; by default distinct random 64-bit ids in shuffled order, so that
        node order and partition order differ, as in a deployment.
    serialize : bool, default=True
        Send messages, replies and contexts through Flower's serialisation.
    lose_message : callable, optional
        ``lose_message(message) -> bool``: the instruction is lost on the way to the node
        (the node never runs; no reply).
    lose_reply : callable, optional
        ``lose_reply(message, reply) -> bool``: the node runs but its reply is lost.
    tamper_reply : callable, optional
        ``tamper_reply(message, reply) -> Message``: replaces the reply (e.g. a malformed
        one).

    Attributes
    ----------
    contexts : dict of int to flwr.app.Context
        The context of every node (its ``state`` is the client-private state).
    delivered : collections.Counter
        Messages delivered, by message type.
    """

    def __init__(
        self,
        client_app,
        node_configs,
        *,
        run_id=1,
        run_config=None,
        node_ids=None,
        serialize=True,
        lose_message=None,
        lose_reply=None,
        tamper_reply=None,
    ):
        node_configs = [dict(c) for c in node_configs]
        if node_ids is None:
            rng = np.random.default_rng(run_id)
            node_ids = []
            while len(node_ids) < len(node_configs):
                candidate = int(rng.integers(2, 2**63 - 1))
                if candidate not in node_ids and candidate != SUPERLINK_NODE_ID:
                    node_ids.append(candidate)
        node_ids = [int(n) for n in node_ids]
        if len(node_ids) != len(node_configs) or len(set(node_ids)) != len(node_ids):
            raise ValueError("node_ids must be distinct, one per node config")
        for hook in (lose_message, lose_reply, tamper_reply):
            if hook is not None and not callable(hook):
                raise TypeError("hooks must be callable or None")
        self.client_app = client_app
        self.run_config = dict(run_config or {})
        self.serialize = bool(serialize)
        self.lose_message = lose_message
        self.lose_reply = lose_reply
        self.tamper_reply = tamper_reply
        self._run = Run.create_empty(int(run_id))
        self.contexts = {}
        for node_id, config in zip(node_ids, node_configs, strict=True):
            self.add_node(config, node_id=node_id)
        self._replies = {}
        self.delivered = Counter()

    @classmethod
    def for_partitions(cls, client_app, n_partitions, *, node_config=None, **kwargs):
        """A grid with one node per partition ``0 .. n_partitions - 1``.

        ``node_config`` holds extra keys for every node (e.g. ``{"state-dir": path}``).
        """
        extra = dict(node_config or {})
        configs = [
            {PARTITION_ID: k, NUM_PARTITIONS: int(n_partitions), **extra}
            for k in range(int(n_partitions))
        ]
        return cls(client_app, configs, **kwargs)

    # -- nodes --------------------------------------------------------------------------
    def add_node(self, node_config, *, node_id=None):
        """Connect a node (a SuperNode joining); returns its node id."""
        if node_id is None:
            node_id = max(self.contexts, default=SUPERLINK_NODE_ID) + 1
        if node_id in self.contexts or node_id == SUPERLINK_NODE_ID:
            raise ValueError(f"node id {node_id} is taken")
        self.contexts[node_id] = Context(
            run_id=self._run.run_id,
            node_id=node_id,
            node_config=dict(node_config),
            state=RecordDict(),
            run_config=dict(self.run_config),
        )
        return node_id

    def remove_node(self, node_id):
        """Disconnect a node (its context, i.e. its client state, is lost)."""
        del self.contexts[node_id]

    # -- Grid interface -----------------------------------------------------------------
    def set_run(self, run: Run) -> None:
        """Set the run the grid works in."""
        if not isinstance(run, Run):
            raise TypeError(f"run must be a flwr Run, got {type(run).__name__}")
        self._run = run

    @property
    def run(self) -> Run:
        """The run."""
        return self._run

    def create_message(self, content, message_type, dst_node_id, group_id, ttl=None):
        """A new message (prefer the ``Message`` constructor)."""
        return Message(content, dst_node_id, message_type, ttl=ttl, group_id=group_id)

    def get_node_ids(self) -> Iterable[int]:
        """Ids of the connected nodes."""
        return list(self.contexts)

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        """Deliver the messages now; keep the replies for :meth:`pull_messages`."""
        ids = []
        for message in messages:
            with no_object_id_recompute():
                message.metadata.__dict__["_message_id"] = message.object_id
            ids.append(message.metadata.message_id)
            reply = self._deliver(message)
            if reply is not None:
                self._replies[message.metadata.message_id] = reply
        return ids

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        """The replies that arrived for these message ids (each is handed out once)."""
        return [self._replies.pop(i) for i in message_ids if i in self._replies]

    def send_and_receive(self, messages, *, timeout=None):
        """Push the messages and return the replies (delivery is synchronous, so
        ``timeout`` never has to wait; lost replies are simply missing)."""
        return self.pull_messages(self.push_messages(list(messages)))

    # -- delivery -----------------------------------------------------------------------
    def _deliver(self, message):
        node_id = message.metadata.dst_node_id
        if node_id not in self.contexts:
            return None
        if self.serialize:
            message = roundtrip_message(message)
        if self.lose_message is not None and self.lose_message(message):
            return None
        context = self.contexts[node_id]
        if self.serialize:
            context = context_from_proto(context_to_proto(context))
        try:
            reply = self.client_app(message, context)
        except Exception as exc:  # noqa: BLE001 -- as a SuperNode: an error reply
            reply = Message(
                Error(
                    code=ErrorCode.CLIENT_APP_RAISED_EXCEPTION,
                    reason=f"{type(exc).__name__}: {exc}",
                ),
                reply_to=message,
            )
        else:
            self.contexts[node_id] = context
        self.delivered[message.metadata.message_type] += 1
        if self.lose_reply is not None and self.lose_reply(message, reply):
            return None
        if self.tamper_reply is not None:
            reply = self.tamper_reply(message, reply)
        with no_object_id_recompute():
            reply.metadata.__dict__["_message_id"] = reply.object_id
        return roundtrip_message(reply) if self.serialize else reply


@contextlib.contextmanager
def _task_identity(run_id):
    saved = {k: TaskIdentity.__dict__.get(k) for k in ("_task_id", "_run_id", "_node_id")}
    TaskIdentity.task_id = 1
    TaskIdentity.run_id = run_id
    TaskIdentity.node_id = SUPERLINK_NODE_ID
    try:
        yield
    finally:
        for key, value in saved.items():
            setattr(TaskIdentity, key, value)


def run_server_app(app, grid, *, run_config=None):
    """Run a ``ServerApp`` on a grid in this process, as a SuperLink would.

    Sets Flower's task identity (the run id and the SuperLink node id that new messages
    carry) for the duration of the run and calls ``app(grid, context)``.

    Parameters
    ----------
    app : flwr.serverapp.ServerApp
    grid : flwr.serverapp.Grid
        Usually an :class:`InMemoryGrid`.
    run_config : dict, optional
        The run config of the server context (e.g. ``{"num-server-rounds": 10}``).

    Returns
    -------
    object
        ``app.result_`` for an :class:`~.AlgorithmServerApp`, else ``None``.
    """
    run_id = grid.run.run_id
    context = Context(
        run_id=run_id,
        node_id=SUPERLINK_NODE_ID,
        node_config={},
        state=RecordDict(),
        run_config=dict(run_config or {}),
    )
    with _task_identity(run_id):
        app(grid, context)
    return getattr(app, "result_", None)


def run_in_memory(
    algorithm,
    client_data,
    *,
    rounds,
    participation=1.0,
    random_state=None,
    dropout=0.0,
    checkpoint=None,
    metrics_every=1,
    callback=None,
    grid_options=None,
):
    """Run an algorithm through Flower's ServerApp and ClientApps in this process.

    The Flower counterpart of :func:`~convexfl.federated.run_federated`, with the same
    arguments: :func:`~.server_app` and :func:`~.client_app` on an :class:`InMemoryGrid`
    with one node per client.

    Parameters
    ----------
    algorithm, client_data, rounds, participation, random_state, dropout, checkpoint
        As for :func:`~convexfl.federated.run_federated`.
    metrics_every, callback
        As for :class:`~.AlgorithmStrategy`.
    grid_options : dict, optional
        Keyword arguments of :class:`InMemoryGrid` (hooks, ``serialize``, ``node_ids``).

    Returns
    -------
    FederatedResult
    """
    algorithm = _as_algorithm(algorithm)
    client_data = _check_client_data(client_data)
    grid = InMemoryGrid.for_partitions(
        client_app(algorithm, client_data), len(client_data), **dict(grid_options or {})
    )
    app = server_app(
        algorithm,
        rounds=rounds,
        n_clients=len(client_data),
        participation=participation,
        dropout=dropout,
        random_state=random_state,
        checkpoint=checkpoint,
        metrics_every=metrics_every,
        round_timeout=None,
        connect_timeout=1.0,
        callback=callback,
    )
    return run_server_app(app, grid)
