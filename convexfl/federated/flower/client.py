"""The Flower ``ClientApp`` that runs the client side of any convexfl algorithm.

Protocol (what the server side, :class:`~.AlgorithmStrategy`, sends; every message carries
a control ``ConfigRecord`` named ``"convexfl"``):

``query`` (hello)
    The client answers with the ``partition-id`` (and ``num-partitions``, when set) of its
    node config, so the server can map Flower node ids to convexfl client ids.
``train``
    One round of ``client_update`` on the payload; the reply is the algorithm's reply (or
    ``status="dropped"`` when the simulated dropout of the run says this client drops out
    this round, drawn from the same stream as :func:`~convexfl.federated.run_federated`).
``evaluate``
    The client's current state, for ``Algorithm.metrics`` and the final result.

Client-private state lives in ``context.state`` (Flower keeps it between the messages of a
run) and is *committed in two phases*: a ``train`` message computes the new state and keeps
it as *pending*; the next message from the server says (field ``ack``, the last round whose
reply the server accepted from this client) whether the server used the reply. If it did,
the pending state becomes the state; if the reply was lost, timed out or was rejected, it is
discarded, exactly as :func:`~convexfl.federated.run_federated` keeps the old state of a
client whose reply did not count. The same rule makes a resumed server consistent with its
clients: a server restarted from its checkpoint sends the acknowledgements stored there.

With the node config key ``state-dir`` the client also writes its state (atomically) to
``<state-dir>/convexfl-<algorithm>-client<partition-id>.pkl`` after every change, so that
it survives a restarted SuperNode or a new run (a new Flower run starts with an empty
``Context``) that resumes from a server checkpoint.
"""

from __future__ import annotations

import copy
import logging
import numbers
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from flwr.app import ConfigRecord, Context, Error, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.common.constant import ErrorCode

from ..checkpoint import load_checkpoint, save_checkpoint
from ..messages import validate_message
from ..runtime import _as_algorithm, derive_rng
from ._codec import CONTROL, decode_message, encode_message, message_records

__all__ = ["client_app"]

logger = logging.getLogger(__name__)

PARTITION_ID = "partition-id"
NUM_PARTITIONS = "num-partitions"
STATE_DIR = "state-dir"

_BOOK = "convexfl.client"
_COMMITTED = "convexfl.committed"
_PENDING = "convexfl.pending"
_FILE_KIND = "convexfl.flower.client-state"


# ----------------------------------------------------------------------------- control


def _field(control, key, kind):
    value = control.get(key)
    ok = isinstance(value, kind) and not (kind is not bool and isinstance(value, bool))
    if not ok:
        raise ValueError(f"control record: field {key!r} missing or not {kind.__name__}")
    return value


@dataclass(frozen=True)
class _Control:
    """The protocol fields of a server message."""

    op: str
    algorithm: str
    n_clients: int
    entropy: int
    session: int
    start_round: int
    round: int
    client_id: int
    ack: int
    dropout: float

    @classmethod
    def parse(cls, content):
        control = content.get(CONTROL)
        if not isinstance(control, ConfigRecord):
            raise ValueError(f"message has no {CONTROL!r} control record")
        op = _field(control, "op", str)
        entropy = _field(control, "entropy", str)
        if not entropy.isdigit():
            raise ValueError("control record: entropy is not a non-negative integer")
        return cls(
            op=op,
            algorithm=_field(control, "algorithm", str),
            n_clients=_field(control, "n-clients", int),
            entropy=int(entropy),
            session=_field(control, "session", int),
            start_round=_field(control, "start-round", int),
            round=_field(control, "round", int),
            client_id=_field(control, "client-id", int),
            ack=_field(control, "ack", int),
            dropout=float(control.get("dropout", 0.0)),
        )

    @property
    def plan(self):
        return (self.algorithm, self.n_clients, self.entropy)


# ----------------------------------------------------------------------------- the book


@dataclass
class _Book:
    """A client's state with its two-phase-commit bookkeeping."""

    plan: tuple
    client_id: int
    session: int
    committed: Any
    committed_round: int
    pending: Any = None
    pending_round: int | None = None
    last_round: int = -1

    # -- context ------------------------------------------------------------------------
    @classmethod
    def from_context(cls, state):
        record = state.get(_BOOK)
        if not isinstance(record, ConfigRecord):
            return None
        pending_round = record["pending-round"]
        return cls(
            plan=(record["algorithm"], record["n-clients"], int(record["entropy"])),
            client_id=record["client-id"],
            session=record["session"],
            committed=decode_message(state, _COMMITTED, allow_pickle=True),
            committed_round=record["committed-round"],
            pending=(
                decode_message(state, _PENDING, allow_pickle=True) if pending_round >= 0 else None
            ),
            pending_round=pending_round if pending_round >= 0 else None,
            last_round=record["last-round"],
        )

    def to_context(self, state):
        records = message_records(self.committed, _COMMITTED, allow_pickle=True)
        if self.pending_round is not None:
            records.update(message_records(self.pending, _PENDING, allow_pickle=True))
        for key in [k for k in state if k.startswith(("convexfl.committed.", "convexfl.pending."))]:
            del state[key]
        for key, record in records.items():
            state[key] = record
        algorithm, n_clients, entropy = self.plan
        state[_BOOK] = ConfigRecord(
            {
                "algorithm": algorithm,
                "n-clients": n_clients,
                "entropy": str(entropy),
                "client-id": self.client_id,
                "session": self.session,
                "committed-round": self.committed_round,
                "pending-round": -1 if self.pending_round is None else self.pending_round,
                "last-round": self.last_round,
            }
        )

    # -- file ---------------------------------------------------------------------------
    @staticmethod
    def path(state_dir, algorithm, client_id):
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", algorithm) or "algorithm"
        return os.path.join(os.fspath(state_dir), f"convexfl-{safe}-client{client_id}.pkl")

    @classmethod
    def from_file(cls, path):
        if not os.path.exists(path):
            return None
        content = load_checkpoint(path)
        if content.get("kind") != _FILE_KIND:
            raise ValueError(f"{path!r} is not a convexfl Flower client state")
        return content["book"]

    def to_file(self, path):
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        save_checkpoint(path, {"kind": _FILE_KIND, "book": self})

    # -- two-phase commit ---------------------------------------------------------------
    def resolve(self, ack):
        """Commit the pending state if the server accepted its round, else drop it."""
        if self.pending_round is None:
            return
        if ack == self.pending_round:
            self.committed, self.committed_round = self.pending, self.pending_round
        self.pending, self.pending_round = None, None

    def view(self, ack):
        """The state the server sees after acknowledging ``ack`` (no change)."""
        if self.pending_round is not None and ack == self.pending_round:
            return self.pending
        return self.committed


# ----------------------------------------------------------------------------- the runner


class _ClientRunner:
    """Handles the three message types for one algorithm (one object per ClientApp)."""

    def __init__(self, algorithm, client_data, cache_data):
        self.algorithm = algorithm
        self.client_data = client_data
        self.cache_data = cache_data
        self._data = {}

    # -- helpers --------------------------------------------------------------------------
    @staticmethod
    def partition_id(context):
        value = context.node_config.get(PARTITION_ID)
        if value is None:
            raise ValueError(
                f"node config has no {PARTITION_ID!r}; start the SuperNode with "
                f"--node-config '{PARTITION_ID}=<k> {NUM_PARTITIONS}=<n>'"
            )
        if isinstance(value, str) and value.strip().isdigit():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
            raise ValueError(f"node config {PARTITION_ID!r} must be an int >= 0, got {value!r}")
        return int(value)

    def data(self, partition_id, context):
        if partition_id in self._data:
            return self._data[partition_id]
        if callable(self.client_data):
            data = self.client_data(partition_id, dict(context.node_config))
        else:
            data = self.client_data[partition_id]
        if self.cache_data:
            self._data[partition_id] = data
        return data

    def _file(self, context, control):
        state_dir = context.node_config.get(STATE_DIR)
        if not state_dir:
            return None
        return _Book.path(state_dir, control.algorithm, control.client_id)

    def _book(self, context, control):
        """The client's book for this run, created, restored or re-initialised as needed."""
        book = _Book.from_context(context.state)
        path = self._file(context, control)
        if (book is None or book.plan != control.plan) and path is not None:
            book = _Book.from_file(path)
        if book is not None and (book.plan != control.plan or book.client_id != control.client_id):
            book = None
        flags = {}
        if book is not None and book.session != control.session:
            if control.session < book.session:
                raise ValueError("message from an older server session (stale)")
            if control.start_round == 0:
                book = None  # a fresh run: whatever was kept belongs to another run
            elif book.committed_round >= control.start_round:
                raise ValueError(
                    f"client state is at round {book.committed_round}, ahead of the server's "
                    f"checkpoint (next round {control.start_round}); was the server restarted "
                    "from an older checkpoint?"
                )
            else:
                book.session = control.session
                book.last_round = control.start_round - 1
                flags["restored"] = True
        if book is None:
            rng = derive_rng(control.entropy, "client_init", client_id=control.client_id)
            state = self.algorithm.client_init(self.data(control.client_id, context), rng)
            book = _Book(control.plan, control.client_id, control.session, state, -1)
            book.last_round = control.start_round - 1
            if control.ack >= 0:
                # the server used a reply of this client before: its state is lost, not new
                flags["reinitialised"] = True
        return book, flags, path

    @staticmethod
    def _save(book, context, path):
        book.to_context(context.state)
        if path is not None:
            book.to_file(path)

    # -- handlers -------------------------------------------------------------------------
    def hello(self, message, context):
        control = {"op": "hello", PARTITION_ID: self.partition_id(context)}
        n = context.node_config.get(NUM_PARTITIONS)
        if n is not None:
            control[NUM_PARTITIONS] = int(n)
        return RecordDict({CONTROL: ConfigRecord(control)})

    def _checked(self, message, context, op):
        control = _Control.parse(message.content)
        if control.op != op:
            raise ValueError(f"expected a {op!r} message, got op={control.op!r}")
        if control.algorithm != self.algorithm.name:
            raise ValueError(
                f"server runs algorithm {control.algorithm!r}, this ClientApp runs "
                f"{self.algorithm.name!r}"
            )
        partition = self.partition_id(context)
        if control.client_id != partition:
            raise ValueError(
                f"message for client {control.client_id} reached partition {partition}"
            )
        return control

    def _reply_control(self, control, status, flags):
        return {
            "op": control.op,
            "client-id": control.client_id,
            "round": control.round,
            "status": status,
            **{k: True for k in flags},
        }

    def train(self, message, context):
        control = self._checked(message, context, "train")
        book, flags, path = self._book(context, control)
        if control.round <= book.last_round:
            raise ValueError(
                f"stale or repeated message for round {control.round} "
                f"(last round seen: {book.last_round})"
            )
        book.resolve(control.ack)
        book.last_round = control.round
        self._save(book, context, path)
        if control.dropout > 0.0:
            draw = derive_rng(control.entropy, "dropout", control.round, control.client_id)
            if draw.random() < control.dropout:
                control_out = self._reply_control(control, "dropped", flags)
                return RecordDict({CONTROL: ConfigRecord(control_out)})
        payload = decode_message(message.content, "payload")
        rng = derive_rng(control.entropy, "client_update", control.round, control.client_id)
        data = self.data(control.client_id, context)
        # a private copy, as run_federated gives: a failing update must not touch the state
        out = self.algorithm.client_update(data, copy.deepcopy(book.committed), payload, rng)
        if not (isinstance(out, tuple) and len(out) == 2):
            raise ValueError(
                f"client_update must return a tuple (new_state, reply), got {type(out).__name__}"
            )
        new_state, reply = out
        validate_message(reply, name="reply")
        content = encode_message(reply, "reply", control=self._reply_control(control, "ok", flags))
        book.pending, book.pending_round = new_state, control.round
        self._save(book, context, path)
        return content

    def evaluate(self, message, context):
        control = self._checked(message, context, "state")
        book, flags, path = self._book(context, control)
        self._save(book, context, path)
        state = book.view(control.ack)
        try:
            validate_message(state, name="client state")
        except ValueError as exc:
            raise ValueError(
                f"{exc}; only client states that are messages (dicts of arrays and scalars) "
                "can be sent to the server"
            ) from None
        return encode_message(state, "state", control=self._reply_control(control, "ok", flags))

    def __call__(self, handler, message, context):
        try:
            return Message(handler(message, context), reply_to=message)
        except Exception as exc:  # noqa: BLE001 -- every failure becomes an error reply
            reason = f"{type(exc).__name__}: {exc}"
            logger.warning(
                "node %s: %s message failed: %s",
                context.node_id,
                message.metadata.message_type,
                reason,
            )
            return Message(
                Error(code=ErrorCode.CLIENT_APP_RAISED_EXCEPTION, reason=reason),
                reply_to=message,
            )


def client_app(algorithm, client_data, *, cache_data=True):
    """A Flower ``ClientApp`` that runs the client side of a convexfl algorithm.

    Parameters
    ----------
    algorithm : Algorithm
        The algorithm (the same object as for :func:`~convexfl.federated.run_federated`);
        its ``client_init`` and ``client_update`` are called unchanged.
    client_data : callable or sequence
        ``client_data(partition_id, node_config) -> data`` loads the data of the client
        whose ``partition-id`` is in the node config (``node_config`` is a plain dict, e.g.
        with a data path), or a sequence indexed by ``partition_id``.
    cache_data : bool, default=True
        Keep loaded data in this ``ClientApp`` object (useful when one process serves many
        messages, as in simulations; a deployed SuperNode starts a process per message).

    Returns
    -------
    flwr.clientapp.ClientApp
        With ``@app.query()`` (hello: reports the partition id), ``@app.train()`` (one
        ``client_update``) and ``@app.evaluate()`` (reports the client state) handlers.
        Every failure of a handler (an exception in ``client_update``, a malformed reply, a
        message for another partition) becomes an error reply and leaves the state as it
        was.

    Examples
    --------
    >>> from convexfl.federated import fedavg_least_squares
    >>> from convexfl.federated import flower                       # doctest: +SKIP
    >>> app = flower.client_app(fedavg_least_squares(3, step=0.1), data)  # doctest: +SKIP
    """
    algorithm = _as_algorithm(algorithm)
    if not callable(client_data) and not (
        isinstance(client_data, Sequence) and not isinstance(client_data, (str, bytes))
    ):
        raise TypeError(
            "client_data must be a callable (partition_id, node_config) -> data or a "
            f"sequence indexed by partition id, got {type(client_data).__name__}"
        )
    if isinstance(client_data, Mapping):
        raise TypeError("client_data must be a callable or a sequence, not a mapping")
    runner = _ClientRunner(algorithm, client_data, bool(cache_data))
    app = ClientApp()

    @app.query()
    def query(message: Message, context: Context) -> Message:
        return runner(runner.hello, message, context)

    @app.train()
    def train(message: Message, context: Context) -> Message:
        return runner(runner.train, message, context)

    @app.evaluate()
    def evaluate(message: Message, context: Context) -> Message:
        return runner(runner.evaluate, message, context)

    app.convexfl_algorithm = algorithm
    return app
