"""The server side of any convexfl algorithm as a Flower (Message API) ``Strategy``.

Why this file is over 700 lines: it is one class, :class:`AlgorithmStrategy`, whose methods
are one state machine (discover and greet the nodes, play a round, store states, checkpoint
and resume) sharing the strategy's fields; split across files, each half would need the
other's private state.
"""

from __future__ import annotations

import logging
import numbers
import os
import time
from collections import Counter
from collections.abc import Mapping

from flwr.app import ArrayRecord, ConfigRecord, Message, MessageType, MetricRecord
from flwr.common import log as flwr_log
from flwr.serverapp.strategy import Strategy

from ..checkpoint import load_checkpoint, save_checkpoint
from ..history import History, RoundRecord
from ..messages import message_size
from ..runtime import (
    FederatedResult,
    Server,
    _as_algorithm,
    _check_dropout,
    _check_resume,
    _check_rounds,
    _clients_per_round,
    _Plan,
    _sample,
    derive_rng,
    root_entropy,
)
from ._codec import CONTROL, decode_message, encode_message

__all__ = ["AlgorithmStrategy"]

logger = logging.getLogger(__name__)

RUNTIME = "flower"


def _reason(message):
    error = message.error
    return f"error reply (code {error.code}): {error.reason}"


def _check_timeout(value, name, allow_none):
    if value is None and allow_none:
        return None
    if not (isinstance(value, numbers.Real) and not isinstance(value, bool) and value > 0):
        raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
    return float(value)


class AlgorithmStrategy(Strategy):
    """Runs the server side of a convexfl :class:`~convexfl.federated.Algorithm` on Flower.

    A Flower Message-API ``Strategy`` whose rounds follow
    :func:`~convexfl.federated.run_federated` exactly, so that the same algorithm, data and
    seed give the same models, history and message counts in both runtimes:

    * **node ids → client ids**: a ``query`` round (hello) asks every node for the
      ``partition-id`` of its node config; client ``i`` is the node holding partition ``i``.
      New nodes are greeted at the start of every round, nodes that left are forgotten
      and a node that (re)joins with a partition takes it over.
    * **one payload per client**: ``configure_train`` samples the participants with the
      runtime's seeded stream (``derive_rng(entropy, "sample", t)``) and sends each its own
      ``server_payload(server_state, i, t)``.
    * **per-client server state** stays in the algorithm's server state, updated by its own
      ``server_update`` in ``aggregate_train`` with the replies in ascending client order.
    * **failures**: a participant without a node or without a reply before the round
      timeout counts as *dropped*; an error reply (the client raised) or a malformed reply
      as *failed*. Either way it does not participate, is logged, and keeps its previous
      state (two-phase commit, see :mod:`convexfl.federated.flower.client`).
    * **metrics**: ``configure_evaluate`` asks the clients whose state changed for it
      (``evaluate`` messages) and ``aggregate_evaluate`` calls ``Algorithm.metrics``.
    * **checkpoints**: after every round the server state, history and acknowledgements go
      to ``checkpoint`` (:mod:`convexfl.federated.checkpoint`); a restarted server resumes
      from it.

    Parameters
    ----------
    algorithm : Algorithm
        The algorithm (or an object with the same methods).
    n_clients : int, optional
        Number of clients (partitions ``0 .. n_clients - 1``). By default taken from a
        checkpoint or from the ``num-partitions`` the nodes report.
    participation : float or int, default=1.0
        As in :func:`~convexfl.federated.run_federated` (a float is a fraction, an int a
        count).
    dropout : float, default=0.0
        Simulated dropout probability, as in :func:`~convexfl.federated.run_federated`: the
        client draws from the same stream and, when it drops out, replies without running
        its update. Real failures need no setting.
    random_state : None, int, SeedSequence, Generator or RandomState, default=None
        Root seed (see :func:`~convexfl.federated.root_entropy`). When resuming, ``None``
        adopts the checkpoint's seed.
    checkpoint : str or os.PathLike, optional
        Checkpoint file written after every round and resumed from when it exists.
    metrics_every : int, default=1
        Collect client states (``evaluate`` messages, only from clients whose state
        changed) and evaluate ``Algorithm.metrics`` every ``metrics_every`` rounds, after
        the last round and before the first. ``0`` never sends client states to the server
        (the result then has ``None`` client states and no metrics).
    callback : callable, optional
        ``callback(record, server_state, client_states)`` after every round; a true return
        value stops the run. ``client_states`` are the last states received (``None``
        where unknown).
    connect_timeout : float, default=600.0
        Seconds to wait at start for every partition to have a node. After that the run
        starts with the nodes present (missing clients count as dropped when sampled).
    poll_interval : float, default=1.0
        Seconds between polls for nodes while waiting.
    lost_state : {"warn", "raise"}, default="warn"
        What to do when a client had to re-initialise its private state after round 0 (its
        node restarted or a new run resumed without the node config ``state-dir``).

    Attributes
    ----------
    result_ : FederatedResult
        The outcome of the last :meth:`start`.
    client_nodes_ : dict of int to int
        Client id → Flower node id (the current mapping; also during a run).
    message_counts_ : collections.Counter
        Flower messages sent (``"sent:<op>"``) and replies received (``"received:<op>"``)
        by operation (``hello``, ``train``, ``state``).
    events_ : list of tuple
        ``(round, client_id, event)`` for notable client events (re-initialised or
        restored state).
    """

    def __init__(
        self,
        algorithm,
        *,
        n_clients=None,
        participation=1.0,
        dropout=0.0,
        random_state=None,
        checkpoint=None,
        metrics_every=1,
        callback=None,
        connect_timeout=600.0,
        poll_interval=1.0,
        lost_state="warn",
    ):
        self.algorithm = _as_algorithm(algorithm)
        if n_clients is not None and (
            isinstance(n_clients, bool)
            or not isinstance(n_clients, numbers.Integral)
            or n_clients < 1
        ):
            raise ValueError(f"n_clients must be an int >= 1 or None, got {n_clients!r}")
        self.n_clients = None if n_clients is None else int(n_clients)
        self.participation = participation
        self.dropout = _check_dropout(dropout)
        self.random_state = random_state
        self.checkpoint = None if checkpoint in (None, "") else checkpoint
        if (
            isinstance(metrics_every, bool)
            or not isinstance(metrics_every, numbers.Integral)
            or (metrics_every < 0)
        ):
            raise ValueError(f"metrics_every must be an int >= 0, got {metrics_every!r}")
        self.metrics_every = int(metrics_every)
        if callback is not None and not callable(callback):
            raise TypeError("callback must be callable or None")
        self.callback = callback
        self.connect_timeout = _check_timeout(connect_timeout, "connect_timeout", False)
        self.poll_interval = _check_timeout(poll_interval, "poll_interval", False)
        if lost_state not in ("warn", "raise"):
            raise ValueError(f"lost_state must be 'warn' or 'raise', got {lost_state!r}")
        self.lost_state = lost_state

    @property
    def client_nodes_(self):
        """Client id → Flower node id (current mapping)."""
        return dict(sorted(self._node_of.items()))

    # ------------------------------------------------------------------ Flower interface
    def summary(self):
        """Log the configuration."""
        flwr_log(
            logging.INFO,
            "[convexfl] AlgorithmStrategy(%s): participation=%s, dropout=%s, checkpoint=%s, "
            "metrics_every=%d",
            self.algorithm.name,
            self.participation,
            self.dropout,
            self.checkpoint,
            self.metrics_every,
        )

    def configure_train(self, server_round, arrays, config, grid):
        """One ``train`` message per sampled client, each with its own payload.

        ``server_round`` is Flower's 1-based round (convexfl round ``server_round - 1``);
        ``arrays`` and ``config`` are not used: the payloads come from
        ``Algorithm.server_payload``.
        """
        t = server_round - 1
        participants = _sample(self._plan, t)
        self._round = {
            "t": t,
            "participants": participants,
            "sent": {},
            "dropped": [],
            "failed": {},
            "down": [0, 0],
        }
        messages = []
        for i in participants:
            node = self._node_of.get(i)
            if node is None:
                logger.warning("round %d: client %d has no node; counted as dropped", t, i)
                self._round["dropped"].append(i)
                continue
            payload = self._server.payload(i, t)
            vectors, nbytes = message_size(payload)
            self._round["down"][0] += vectors
            self._round["down"][1] += nbytes
            control = self._control("train", t, i, dropout=self._plan.dropout)
            messages.append(
                Message(
                    encode_message(payload, "payload", control=control),
                    dst_node_id=node,
                    message_type=MessageType.TRAIN,
                    group_id=str(server_round),
                )
            )
            self._round["sent"][node] = i
        self.message_counts_["sent:train"] += len(messages)
        return messages

    def aggregate_train(self, server_round, replies):
        """Check the replies, run ``server_update`` on the accepted ones.

        Returns ``(None, MetricRecord)``: the model lives in the algorithm's server state,
        not in an ``ArrayRecord``; the metric record holds the round's counts.
        """
        r = self._round
        t = r["t"]
        waiting = dict(r["sent"])
        received, dropped, failed = {}, list(r["dropped"]), {}
        for message in replies:
            node = message.metadata.src_node_id
            i = waiting.pop(node, None)
            if i is None:
                logger.warning("round %d: ignoring an unexpected reply from node %s", t, node)
                continue
            self.message_counts_["received:train"] += 1
            if message.has_error():
                failed[i] = _reason(message)
                continue
            try:
                status, flags = self._reply_status(message, "train", i, t)
                self._note_flags(t, i, flags)
                if status == "dropped":
                    dropped.append(i)
                    continue
                received[i] = decode_message(message.content, "reply")
            except ValueError as exc:
                failed[i] = f"malformed reply: {exc}"
        for i in waiting.values():
            logger.warning("round %d: no reply from client %d before the timeout", t, i)
            dropped.append(i)
        for i, reason in sorted(failed.items()):
            logger.warning("round %d: client %d failed: %s", t, i, reason)
        accepted = {i: received[i] for i in sorted(received)}
        self._server.update(accepted, t, derive_rng(self._plan.entropy, "server_update", round=t))
        for i in accepted:
            self._accepted[i] = t
            self._dirty.add(i)
        up = [message_size(reply) for reply in accepted.values()]
        r.update(
            received=tuple(accepted),
            dropped=tuple(sorted(dropped)),
            failed={i: failed[i] for i in sorted(failed)},
            up=[sum(v for v, _ in up), sum(b for _, b in up)],
        )
        counts = {
            "n-participants": len(r["participants"]),
            "n-received": len(accepted),
            "n-dropped": len(dropped),
            "n-failed": len(failed),
        }
        return None, MetricRecord(counts)

    def configure_evaluate(self, server_round, arrays, config, grid):
        """``evaluate`` messages asking for the states that changed, when they are due."""
        t = server_round - 1
        if not self._states_due(t):
            self._eval = None
            return []
        return self._state_messages(t, server_round)

    def aggregate_evaluate(self, server_round, replies):
        """Store the received client states and evaluate ``Algorithm.metrics``."""
        t = server_round - 1
        if self._eval is None:
            self._round["metrics"] = {}
            return None
        self._store_states(t, replies)
        metrics = self._metrics(t) if self._metrics_due(t) else {}
        self._round["metrics"] = metrics
        numeric = {
            k: float(v)
            for k, v in metrics.items()
            if isinstance(v, numbers.Real) and not isinstance(v, bool)
        }
        return MetricRecord(numeric) if numeric else None

    # ------------------------------------------------------------------ the run
    def start(
        self,
        grid,
        initial_arrays=None,
        num_rounds=3,
        timeout=3600.0,
        train_config=None,
        evaluate_config=None,
        evaluate_fn=None,
    ):
        """Run (or resume) the federation for ``num_rounds`` rounds in total.

        Parameters
        ----------
        grid : flwr.serverapp.Grid
            The grid of the ``ServerApp``.
        initial_arrays, train_config, evaluate_config, evaluate_fn : None
            Parameters of ``Strategy.start`` that do not apply: the state comes from
            ``Algorithm.server_init`` and the messages from ``Algorithm.server_payload``.
            Must be ``None``.
        num_rounds : int, default=3
            Total number of rounds (including those already in the checkpoint).
        timeout : float or None, default=3600.0
            Seconds to wait for the replies of one round (``None``: wait for all).

        Returns
        -------
        FederatedResult
            Unlike ``Strategy.start`` (which returns a Flower ``Result``): the final server
            state, the last client states received, the :class:`~convexfl.federated.
            History` and the root seed, as :func:`~convexfl.federated.run_federated`.
        """
        unsupported = {
            "initial_arrays": initial_arrays,
            "train_config": train_config,
            "evaluate_config": evaluate_config,
            "evaluate_fn": evaluate_fn,
        }
        for name, value in unsupported.items():
            if value is not None:
                raise ValueError(
                    f"{name} is not used by AlgorithmStrategy (the algorithm's own "
                    "functions make the state and the messages); pass None"
                )
        rounds = _check_rounds(num_rounds)
        self._timeout = _check_timeout(timeout, "timeout", True)
        self._rounds = rounds
        self._reset()
        # orders server sessions: clients refuse messages from an older (stale) session
        self._session = time.time_ns()
        self.summary()
        content = self._load_checkpoint()
        entropy = (
            int(content["config"]["entropy"])
            if content is not None and self.random_state is None
            else root_entropy(self.random_state)
        )
        self._entropy = entropy
        start = 0 if content is None else int(content["next_round"])
        if start > rounds:
            raise ValueError(
                f"num_rounds={rounds} but checkpoint {os.fspath(self.checkpoint)!r} already "
                f"holds {start} finished rounds"
            )
        self._start_round = start
        hint = self.n_clients
        if hint is None and content is not None:
            hint = int(content["config"]["n_clients"])
        n_clients = self._discover(grid, hint)
        self._plan = _Plan(
            self.algorithm.name,
            n_clients,
            _clients_per_round(self.participation, n_clients),
            self.dropout,
            entropy,
        )
        if content is None:
            self._fresh_start(grid)
        else:
            self._resume(content)
        for t in range(start, rounds):
            self._refresh(grid)
            record = self._play_round(grid, t)
            self._history.append(record)
            flwr_log(  # Flower's logger: shown by `flwr run --stream` and `flwr log`
                logging.INFO,
                "[convexfl] round %d: %d/%d replies accepted, dropped %s, failed %s%s",
                t,
                len(record.received),
                len(record.participants),
                list(record.dropped),
                list(record.failed),
                f", metrics {record.metrics}" if record.metrics else "",
            )
            if self.checkpoint is not None:
                self._save(t + 1)
            if self.callback is not None and self.callback(
                record, self._server.state, list(self._states)
            ):
                break
        self.result_ = FederatedResult(
            self._server.state, list(self._states), self._history, entropy
        )
        return self.result_

    def _play_round(self, grid, t):
        server_round = t + 1
        empty_arrays, empty_config = ArrayRecord(), ConfigRecord()
        messages = self.configure_train(server_round, empty_arrays, empty_config, grid)
        replies = self._send(grid, messages)
        self.aggregate_train(server_round, replies)
        messages = self.configure_evaluate(server_round, empty_arrays, empty_config, grid)
        replies = self._send(grid, messages)
        self.aggregate_evaluate(server_round, replies)
        r = self._round
        return RoundRecord(
            round=t,
            participants=r["participants"],
            received=r["received"],
            dropped=r["dropped"],
            failed=r["failed"],
            vectors_down=r["down"][0],
            vectors_up=r["up"][0],
            bytes_down=r["down"][1],
            bytes_up=r["up"][1],
            metrics=r["metrics"],
        )

    def _send(self, grid, messages):
        if not messages:
            return []
        return list(grid.send_and_receive(messages, timeout=self._timeout))

    # ------------------------------------------------------------------ start / resume
    def _reset(self):
        self.message_counts_ = Counter()
        self.events_ = []
        self._claims = {}  # node -> partition id, in the order nodes answered
        self._bad_nodes = set()
        self._node_of = {}  # client id -> node
        self._reported_n = set()
        self._dirty = set()
        self._round = None
        self._eval = None

    def _load_checkpoint(self):
        if self.checkpoint is None or not os.path.exists(self.checkpoint):
            return None
        content = load_checkpoint(self.checkpoint)
        if content["config"].get("runtime") != RUNTIME:
            raise ValueError(
                f"checkpoint {os.fspath(self.checkpoint)!r} was not written by a Flower run "
                "(the in-process runtime keeps client states in its checkpoint, Flower "
                "clients keep their own); use another file"
            )
        return content

    def _fresh_start(self, grid):
        n = self._plan.n_clients
        rng = derive_rng(self._plan.entropy, "server_init")
        self._server = Server(self.algorithm, self.algorithm.server_init(rng))
        self._accepted = [-1] * n
        self._states = [None] * n
        self._dirty = set(range(n))
        initial = {}
        if self.metrics_every > 0 and self.algorithm.metrics is not None:
            self._round = {}
            self._eval = True
            self._store_states(-1, self._send(grid, self._state_messages(-1, 0)))
            initial = self._metrics(-1)
        self._history = History(initial_metrics=initial)

    def _resume(self, content):
        _check_resume(content["config"], self._plan, self.checkpoint)
        self._server = Server(self.algorithm, content["server_state"])
        self._history = content["history"]
        self._accepted = list(content["accepted"])
        self._states = list(content["client_states"])
        self._dirty = set(range(self._plan.n_clients))
        flwr_log(
            logging.INFO,
            "[convexfl] resuming %s from %s after %d rounds",
            self.algorithm.name,
            os.fspath(self.checkpoint),
            self._start_round,
        )

    def _save(self, next_round):
        save_checkpoint(
            self.checkpoint,
            {
                "config": {**self._plan.as_config(), "runtime": RUNTIME},
                "next_round": next_round,
                "server_state": self._server.state,
                "client_states": list(self._states),
                "history": self._history,
                "accepted": list(self._accepted),
            },
        )

    # ------------------------------------------------------------------ nodes
    def _discover(self, grid, n_hint):
        """Greet nodes until every partition has one (or ``connect_timeout`` passes)."""
        deadline = time.monotonic() + self.connect_timeout
        while True:
            self._greet(grid)
            n = n_hint if n_hint is not None else self._reported_clients()
            if n is not None:
                self._assign(n)
                if len(self._node_of) == n:
                    break
            if time.monotonic() >= deadline:
                if n is None:
                    raise RuntimeError(
                        "cannot tell the number of clients: pass n_clients (run config "
                        "'num-clients') or set 'num-partitions' in the node configs"
                    )
                if not self._node_of:
                    raise RuntimeError(f"no client connected within {self.connect_timeout} s")
                missing = sorted(set(range(n)) - set(self._node_of))
                logger.warning("starting without clients %s (no node connected)", missing)
                break
            time.sleep(self.poll_interval)
        flwr_log(logging.INFO, "[convexfl] %d clients mapped to nodes", len(self._node_of))
        return n

    def _reported_clients(self):
        if len(self._reported_n) > 1:
            raise RuntimeError(f"nodes report different num-partitions: {sorted(self._reported_n)}")
        return next(iter(self._reported_n), None)

    def _greet(self, grid):
        """Send a hello to the nodes never heard of; record their partition ids."""
        live = set(grid.get_node_ids())
        for node in [n for n in self._claims if n not in live]:
            del self._claims[node]
        new = sorted(live - set(self._claims) - self._bad_nodes)
        if not new:
            return live
        messages = [
            Message(
                encode_message({}, "hello", control={"op": "hello"}),
                dst_node_id=node,
                message_type=MessageType.QUERY,
                group_id="hello",
            )
            for node in new
        ]
        self.message_counts_["sent:hello"] += len(messages)
        for message in self._send(grid, messages):
            node = message.metadata.src_node_id
            if node not in new:
                continue
            self.message_counts_["received:hello"] += 1
            if message.has_error():
                logger.warning("node %s cannot take part: %s", node, _reason(message))
                self._bad_nodes.add(node)
                continue
            control = message.content.get(CONTROL)
            pid = None if control is None else control.get("partition-id")
            if isinstance(pid, bool) or not isinstance(pid, int) or pid < 0:
                logger.warning("node %s sent a malformed hello reply", node)
                self._bad_nodes.add(node)
                continue
            self._claims[node] = pid
            n = control.get("num-partitions")
            if isinstance(n, int) and not isinstance(n, bool) and n > 0:
                self._reported_n.add(n)
        return live

    def _assign(self, n):
        """Client id -> node: keep live mappings, give free partitions to claimants."""
        for i, node in list(self._node_of.items()):
            if node not in self._claims:
                logger.warning("client %d: node %s left", i, node)
                del self._node_of[i]
        for node, pid in self._claims.items():
            if pid >= n:
                if node not in self._bad_nodes:
                    logger.warning("node %s has partition-id %d >= %d clients", node, pid, n)
                    self._bad_nodes.add(node)
                continue
            if pid not in self._node_of:
                self._node_of[pid] = node
                self._dirty.add(pid)
            elif self._node_of[pid] != node:
                logger.debug("node %s is a spare for client %d", node, pid)

    def _refresh(self, grid):
        self._greet(grid)
        self._assign(self._plan.n_clients)

    # ------------------------------------------------------------------ states and metrics
    def _control(self, op, t, i, **extra):
        return {
            "op": op,
            "algorithm": self.algorithm.name,
            "n-clients": self._plan.n_clients,
            "entropy": str(self._plan.entropy),
            "session": self._session,
            "start-round": self._start_round,
            "round": t,
            "client-id": i,
            "ack": self._accepted[i],
            **extra,
        }

    def _states_due(self, t):
        if self.metrics_every == 0:
            return False
        return self._metrics_due(t) or t == self._rounds - 1

    def _metrics_due(self, t):
        if self.metrics_every == 0 or self.algorithm.metrics is None:
            return False
        return (t + 1) % self.metrics_every == 0 or t == self._rounds - 1

    def _state_messages(self, t, server_round):
        self._eval = {}
        messages = []
        for i in sorted(self._dirty):
            node = self._node_of.get(i)
            if node is None:
                continue
            messages.append(
                Message(
                    encode_message({}, "request", control=self._control("state", t, i)),
                    dst_node_id=node,
                    message_type=MessageType.EVALUATE,
                    group_id=str(server_round),
                )
            )
            self._eval[node] = i
        self.message_counts_["sent:state"] += len(messages)
        return messages

    def _store_states(self, t, replies):
        waiting = dict(self._eval)
        for message in replies:
            i = waiting.pop(message.metadata.src_node_id, None)
            if i is None:
                continue
            self.message_counts_["received:state"] += 1
            if message.has_error():
                logger.warning("client %d did not send its state: %s", i, _reason(message))
                continue
            try:
                _, flags = self._reply_status(message, "state", i, t)
                self._states[i] = decode_message(message.content, "state")
            except ValueError as exc:
                logger.warning("client %d sent a malformed state: %s", i, exc)
                continue
            self._note_flags(t, i, flags)
            self._dirty.discard(i)

    def _metrics(self, t):
        if self.algorithm.metrics is None:
            return {}
        if self._dirty or any(s is None for s in self._states):
            unknown = sorted(self._dirty | {i for i, s in enumerate(self._states) if s is None})
            logger.warning("round %d: metrics skipped, states of clients %s unknown", t, unknown)
            return {}
        values = self.algorithm.metrics(self._server.state, list(self._states))
        if not isinstance(values, Mapping):
            raise ValueError(f"metrics must return a dict, got {type(values).__name__}")  # noqa: TRY004
        return dict(values)

    # ------------------------------------------------------------------ replies
    @staticmethod
    def _reply_status(message, op, i, t):
        control = message.content.get(CONTROL)
        if not isinstance(control, ConfigRecord):
            raise ValueError("reply has no control record")
        if control.get("op") != op or control.get("client-id") != i or control.get("round") != t:
            raise ValueError(
                f"reply is for op={control.get('op')!r}, client {control.get('client-id')!r}, "
                f"round {control.get('round')!r}; expected {op!r}, {i}, {t}"
            )
        status = control.get("status")
        if status not in ("ok", "dropped"):
            raise ValueError(f"reply has unknown status {status!r}")
        flags = [k for k in ("reinitialised", "restored") if control.get(k) is True]
        return status, flags

    def _note_flags(self, t, i, flags):
        for flag in flags:
            if (t, i, flag) in self.events_:
                continue
            self.events_.append((t, i, flag))
            if flag == "reinitialised":
                message = (
                    f"client {i} lost its private state and re-initialised it in round {t} "
                    "(its node restarted, or the run resumed without the node config "
                    "'state-dir'); the run is no longer the same as an uninterrupted one"
                )
                if self.lost_state == "raise":
                    raise RuntimeError(message)
                logger.warning(message)
            else:
                flwr_log(logging.INFO, "[convexfl] client %d kept its state (round %d)", i, t)
