"""In-process federated round runtime shared by every federated algorithm of convexfl.

An algorithm is five plain functions (plus optional metrics) on numpy arrays, bundled in an
:class:`Algorithm`. :func:`run_federated` plays the rounds in one process: sampling,
per-client payloads, client updates, dropouts and failures, the server update, message
accounting, metrics, checkpoints and a progress bar. The same functions are meant to run
unchanged under Flower (``convexfl.federated.flower``): the server functions inside a
``Strategy`` that builds one payload per client, the client functions inside a ``ClientApp``.

Round ``t`` (``t = 0, 1, ...``) runs as follows.

1. Sample the participants: all clients, or ``k`` of them uniformly without replacement.
2. For each participant ``i`` (ascending id) build ``server_payload(server_state, i, t)``.
3. Each participant drops out with probability ``dropout`` (it then does nothing); the others
   run ``client_update(data_i, state_i, payload_i, rng)``. An update that raises, returns
   something other than ``(new_state, reply)`` or a reply that is not a valid message (see
   :mod:`convexfl.federated.messages`) is a *failure*: the client keeps its old state and its
   reply is discarded. Failures and dropouts are recorded, never raised.
4. ``server_state = server_update(server_state, replies, t, rng)`` with the replies that
   arrived, ``{client_id: reply}`` (possibly empty).
5. ``metrics(server_state, client_states)`` if the algorithm defines it; record the round,
   write the checkpoint, call the callback.

Randomness: every generator is derived from one root seed and a key
``(purpose, round, client_id)`` by :func:`derive_rng`, so a run is reproducible from its
seed, a client's draws do not depend on which other clients ran or in which order, and the
root seed plus the round index is the whole random-number position (what makes resuming from
a checkpoint bit-identical).
"""

from __future__ import annotations

import copy
import logging
import numbers
import os
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from .checkpoint import load_checkpoint, save_checkpoint
from .history import History, RoundRecord
from .messages import copy_message, message_size, validate_message

__all__ = [
    "Algorithm",
    "Client",
    "FederatedResult",
    "Server",
    "derive_rng",
    "root_entropy",
    "run_federated",
]

logger = logging.getLogger(__name__)

_PURPOSES = {
    "server_init": 0,
    "client_init": 1,
    "sample": 2,
    "dropout": 3,
    "client_update": 4,
    "server_update": 5,
}
_REQUIRED = ("server_init", "client_init", "server_payload", "client_update", "server_update")


# ----------------------------------------------------------------------------- algorithm


@dataclass(frozen=True, kw_only=True)
class Algorithm:
    """A federated algorithm as plain functions on numpy arrays.

    Messages (payloads and replies) are dicts of numpy arrays and scalars only, see
    :mod:`convexfl.federated.messages`. States are any picklable objects (checkpoints pickle
    them); the server state never leaves the server, but a client state should also be a
    flat dict of arrays and scalars so that a Flower ``ClientApp`` can keep it in its
    context between rounds.

    Parameters
    ----------
    server_init : callable
        ``server_init(rng) -> server_state``.
    client_init : callable
        ``client_init(client_data, rng) -> client_state``.
    server_payload : callable
        ``server_payload(server_state, client_id, round) -> payload``. Called once per
        participant and round; it must not change ``server_state`` (per-client server state,
        such as pair duals or memberships, is read here and written in ``server_update``).
    client_update : callable
        ``client_update(client_data, client_state, payload, rng) -> (new_client_state,
        reply)``. It gets a private copy of the state and of the payload.
    server_update : callable
        ``server_update(server_state, replies, round, rng) -> server_state`` where
        ``replies`` is ``{client_id: reply}`` for the replies that arrived (may be empty).
    metrics : callable, optional
        ``metrics(server_state, client_states) -> dict`` evaluated after every round (and
        once before the first); ``client_states`` is the list of all clients' states.
    name : str, default="algorithm"
        Identifies the algorithm in progress bars and checkpoints (a checkpoint is only
        resumed by an algorithm of the same name).
    """

    server_init: Callable[[np.random.Generator], Any]
    client_init: Callable[[Any, np.random.Generator], Any]
    server_payload: Callable[[Any, int, int], dict]
    client_update: Callable[[Any, Any, dict, np.random.Generator], tuple]
    server_update: Callable[[Any, dict, int, np.random.Generator], Any]
    metrics: Callable[[Any, list], dict] | None = None
    name: str = "algorithm"

    def __post_init__(self):
        for attribute in _REQUIRED:
            if not callable(getattr(self, attribute)):
                raise TypeError(f"Algorithm.{attribute} must be callable")
        if self.metrics is not None and not callable(self.metrics):
            raise TypeError("Algorithm.metrics must be callable or None")
        if not isinstance(self.name, str):
            raise TypeError("Algorithm.name must be a str")


def _as_algorithm(algorithm):
    """Accept an :class:`Algorithm` or any object with the same methods."""
    if isinstance(algorithm, Algorithm):
        return algorithm
    missing = [a for a in _REQUIRED if not callable(getattr(algorithm, a, None))]
    if missing:
        raise TypeError(
            f"algorithm must be an Algorithm or provide {', '.join(_REQUIRED)}; "
            f"missing {', '.join(missing)}"
        )
    functions = {a: getattr(algorithm, a) for a in _REQUIRED}
    return Algorithm(
        **functions,
        metrics=getattr(algorithm, "metrics", None),
        name=getattr(algorithm, "name", type(algorithm).__name__),
    )


# ----------------------------------------------------------------------------- randomness


def root_entropy(random_state=None):
    """Turn a ``random_state`` into the root seed of a run (a non-negative int).

    Parameters
    ----------
    random_state : None, int, numpy.random.SeedSequence, numpy.random.Generator or \
numpy.random.RandomState
        ``None`` draws fresh entropy from the OS; an int is used as is; a seed sequence is
        hashed; a generator gives one draw (and is advanced by it).

    Returns
    -------
    int
        The root entropy. Passing it back as ``random_state`` reproduces the run.
    """
    if random_state is None:
        return int(np.random.SeedSequence().entropy)
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        if random_state < 0:
            raise ValueError(f"random_state must be non-negative, got {random_state}")
        return int(random_state)
    if isinstance(random_state, np.random.SeedSequence):
        words = random_state.generate_state(4, np.uint32)
        return int.from_bytes(words.tobytes(), "little")
    if isinstance(random_state, np.random.Generator):
        return int(random_state.integers(0, 2**63))
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(0, np.iinfo(np.int64).max, dtype=np.int64))
    raise ValueError(
        "random_state must be None, a non-negative int, a SeedSequence, a "
        f"Generator or a RandomState, got {type(random_state).__name__}"
    )


def derive_rng(entropy, purpose, round=0, client_id=0):
    """The generator for one purpose, round and client of a run.

    Parameters
    ----------
    entropy : int
        Root seed of the run (see :func:`root_entropy`).
    purpose : {"server_init", "client_init", "sample", "dropout", "client_update", \
"server_update"}
        What the draws are for.
    round : int, default=0
        Round index (0 where not applicable).
    client_id : int, default=0
        Client index (0 where not applicable).

    Returns
    -------
    numpy.random.Generator
        A PCG64 generator seeded with ``SeedSequence(entropy, spawn_key=(purpose_code,
        round, client_id))``: independent across keys, independent of call order.
    """
    key = (_PURPOSES[purpose], int(round), int(client_id))
    return np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=key))


# ----------------------------------------------------------------------------- parties


class Client:
    """One client: its id, its data and its private state.

    Parameters
    ----------
    algorithm : Algorithm
        The algorithm whose ``client_update`` it runs.
    client_id : int
        Its index in the client list.
    data : object
        Its local data, passed as is to the algorithm's client functions.
    state : object
        Its private state.
    """

    def __init__(self, algorithm, client_id, data, state):
        self.algorithm = algorithm
        self.client_id = client_id
        self.data = data
        self.state = state

    def update(self, payload, rng):
        """Run the local update and return the reply.

        The new state is committed only when the update returns ``(new_state, reply)`` with
        a valid reply; otherwise the state is left untouched and the error propagates.

        Parameters
        ----------
        payload : dict
            The message from the server.
        rng : numpy.random.Generator
            This client's generator for this round.

        Returns
        -------
        dict
            A copy of the validated reply.
        """
        out = self.algorithm.client_update(self.data, copy.deepcopy(self.state), payload, rng)
        if not (isinstance(out, tuple) and len(out) == 2):
            raise ValueError(
                f"client_update must return a tuple (new_state, reply), got {type(out).__name__}"
            )
        new_state, reply = out
        validate_message(reply, name="reply")
        self.state = new_state
        return copy_message(reply)


class Server:
    """The server: its state and the two server-side functions of the algorithm.

    Parameters
    ----------
    algorithm : Algorithm
        The algorithm.
    state : object
        The server state.
    """

    def __init__(self, algorithm, state):
        self.algorithm = algorithm
        self.state = state

    def payload(self, client_id, round):
        """Build, validate and copy the payload for one client.

        Raises
        ------
        ValueError
            If ``server_payload`` does not return a valid message (a bug of the algorithm,
            so it stops the run).
        """
        payload = self.algorithm.server_payload(self.state, client_id, round)
        validate_message(
            payload, name=f"payload for client {client_id} in round {round} (from server_payload)"
        )
        return copy_message(payload)

    def update(self, replies, round, rng):
        """Replace the state by ``server_update(state, replies, round, rng)``."""
        self.state = self.algorithm.server_update(self.state, replies, round, rng)


@dataclass
class FederatedResult:
    """Outcome of :func:`run_federated`.

    Attributes
    ----------
    server_state : object
        Final server state.
    client_states : list
        Final state of every client.
    history : History
        One record per finished round.
    entropy : int
        Root seed; ``random_state=entropy`` reproduces the run.
    """

    server_state: Any
    client_states: list
    history: History
    entropy: int

    @property
    def rounds_completed(self):
        """Number of finished rounds."""
        return len(self.history)


# ----------------------------------------------------------------------------- validation


def _check_rounds(rounds):
    if isinstance(rounds, bool) or not isinstance(rounds, numbers.Integral) or rounds < 1:
        raise ValueError(f"rounds must be an int >= 1, got {rounds!r}")
    return int(rounds)


def _check_client_data(client_data):
    if isinstance(client_data, (str, bytes, Mapping)) or not hasattr(client_data, "__len__"):
        kind = type(client_data).__name__
        raise ValueError(f"client_data must be a list with one entry per client, got {kind}")
    if len(client_data) == 0:
        raise ValueError("client_data is empty; a federation needs at least one client")
    return list(client_data)


def _clients_per_round(participation, n_clients):
    """Number of clients sampled per round (int: a count; float: a fraction)."""
    if isinstance(participation, (bool, np.bool_)):
        # bad arguments are ValueErrors by contract
        raise ValueError(  # noqa: TRY004
            f"participation must be a fraction in (0, 1] or an int count, got {participation!r}"
        )
    if isinstance(participation, numbers.Integral):
        if not 1 <= participation <= n_clients:
            raise ValueError(
                f"participation as an int count must be in [1, {n_clients}] "
                f"(the number of clients), got {participation}"
            )
        return int(participation)
    if isinstance(participation, numbers.Real):
        p = float(participation)
        if not 0.0 < p <= 1.0:
            raise ValueError(f"participation as a fraction must be in (0, 1], got {p}")
        return min(n_clients, max(1, int(np.floor(p * n_clients + 0.5))))
    raise ValueError(
        f"participation must be a fraction in (0, 1] or an int count, "
        f"got {type(participation).__name__}"
    )


def _check_dropout(dropout):
    valid = isinstance(dropout, numbers.Real) and not isinstance(dropout, (bool, np.bool_))
    if not valid or not 0.0 <= float(dropout) < 1.0:
        raise ValueError(f"dropout must be a probability in [0, 1), got {dropout!r}")
    return float(dropout)


@dataclass(frozen=True)
class _Plan:
    """The fixed parameters of a run (also what a checkpoint must match)."""

    algorithm: str
    n_clients: int
    clients_per_round: int
    dropout: float
    entropy: int

    def as_config(self):
        return asdict(self)


# ----------------------------------------------------------------------------- one round


def _sample(plan, t):
    if plan.clients_per_round == plan.n_clients:
        return tuple(range(plan.n_clients))
    rng = derive_rng(plan.entropy, "sample", round=t)
    chosen = rng.choice(plan.n_clients, size=plan.clients_per_round, replace=False)
    return tuple(int(i) for i in np.sort(chosen))


def _drops_out(plan, t, client_id):
    if plan.dropout == 0.0:
        return False
    return bool(derive_rng(plan.entropy, "dropout", t, client_id).random() < plan.dropout)


def _client_reply(client, payload, plan, t):
    """Run one client; return ``(reply, None)`` or ``(None, reason)``."""
    rng = derive_rng(plan.entropy, "client_update", t, client.client_id)
    try:
        return client.update(payload, rng), None
    except Exception as exc:  # noqa: BLE001 -- a failing client must not stop the run
        reason = f"{type(exc).__name__}: {exc}"
        logger.warning("round %d: client %d failed: %s", t, client.client_id, reason)
        return None, reason


def _metrics(server, clients):
    function = server.algorithm.metrics
    if function is None:
        return {}
    values = function(server.state, [c.state for c in clients])
    if not isinstance(values, Mapping):
        raise ValueError(f"metrics must return a dict, got {type(values).__name__}")  # noqa: TRY004
    return dict(values)


def _run_round(server, clients, plan, t):
    participants = _sample(plan, t)
    payloads = {i: server.payload(i, t) for i in participants}
    down = [message_size(p) for p in payloads.values()]  # before a client can mutate one
    replies, dropped, failed = {}, [], {}
    for i in participants:
        if _drops_out(plan, t, i):
            dropped.append(i)
            continue
        reply, reason = _client_reply(clients[i], payloads[i], plan, t)
        if reason is None:
            replies[i] = reply
        else:
            failed[i] = reason
    server.update(replies, t, derive_rng(plan.entropy, "server_update", round=t))
    up = [message_size(r) for r in replies.values()]
    return RoundRecord(
        round=t,
        participants=participants,
        received=tuple(replies),
        dropped=tuple(dropped),
        failed=failed,
        vectors_down=sum(v for v, _ in down),
        vectors_up=sum(v for v, _ in up),
        bytes_down=sum(b for _, b in down),
        bytes_up=sum(b for _, b in up),
        metrics=_metrics(server, clients),
    )


# ----------------------------------------------------------------------------- start/resume


def _fresh_start(algorithm, client_data, plan):
    entropy = plan.entropy
    server = Server(algorithm, algorithm.server_init(derive_rng(entropy, "server_init")))
    clients = [
        Client(
            algorithm,
            i,
            d,
            algorithm.client_init(d, derive_rng(entropy, "client_init", client_id=i)),
        )
        for i, d in enumerate(client_data)
    ]
    history = History(initial_metrics=_metrics(server, clients))
    return server, clients, history


def _check_resume(saved, plan, path):
    for key, value in plan.as_config().items():
        if saved.get(key) != value:
            hint = (
                " (pass random_state=None to adopt the checkpoint's seed)"
                if key == "entropy"
                else ""
            )
            raise ValueError(
                f"checkpoint {os.fspath(path)!r} was written with {key}="
                f"{saved.get(key)!r}, this run has {key}={value!r}{hint}"
            )


def _resume(algorithm, client_data, plan, content, path):
    _check_resume(content["config"], plan, path)
    server = Server(algorithm, content["server_state"])
    clients = [
        Client(algorithm, i, d, s)
        for i, (d, s) in enumerate(zip(client_data, content["client_states"], strict=True))
    ]
    return server, clients, content["history"], int(content["next_round"])


def _start(algorithm, client_data, clients_per_round, dropout, random_state, checkpoint):
    """Return ``(plan, server, clients, history, next_round)``, resumed when possible."""
    content = None
    if checkpoint is not None and os.path.exists(checkpoint):
        content = load_checkpoint(checkpoint)
    if content is not None and random_state is None:
        entropy = int(content["config"]["entropy"])
    else:
        entropy = root_entropy(random_state)
    plan = _Plan(algorithm.name, len(client_data), clients_per_round, dropout, entropy)
    if content is not None:
        return (plan, *_resume(algorithm, client_data, plan, content, checkpoint))
    return (plan, *_fresh_start(algorithm, client_data, plan), 0)


def _save(checkpoint, plan, server, clients, history):
    save_checkpoint(
        checkpoint,
        {
            "config": plan.as_config(),
            "next_round": len(history),
            "server_state": server.state,
            "client_states": [c.state for c in clients],
            "history": history,
        },
    )


# ----------------------------------------------------------------------------- the loop


def _postfix(metrics):
    return {
        k: v for k, v in metrics.items() if isinstance(v, numbers.Real) and not isinstance(v, bool)
    }


def run_federated(
    algorithm,
    client_data,
    *,
    rounds,
    participation=1.0,
    random_state=None,
    callback=None,
    dropout=0.0,
    checkpoint=None,
    progress=True,
):
    """Run a federated algorithm for a number of rounds in this process.

    Parameters
    ----------
    algorithm : Algorithm
        The algorithm (or any object with the same methods and optional ``metrics`` and
        ``name`` attributes).
    client_data : list
        One entry per client, handed as is to the client functions; client ``i`` is
        ``client_data[i]``.
    rounds : int
        Total number of rounds (>= 1). With a checkpoint this counts the rounds already done.
    participation : float or int, default=1.0
        A float is the fraction of clients sampled each round, in ``(0, 1]``; the count is
        ``max(1, floor(participation * n_clients + 0.5))``. An int is the count itself, in
        ``[1, n_clients]``; note that ``participation=1`` means *one* client per round and
        ``participation=1.0`` means all of them. Sampling is uniform without replacement.
    random_state : None, int, SeedSequence, Generator or RandomState, default=None
        Root seed (see :func:`root_entropy`). The same seed gives the same history and
        states. When resuming, ``None`` adopts the checkpoint's seed.
    callback : callable, optional
        ``callback(record, server_state, client_states)`` after every round (after the
        checkpoint is written). Returning a true value stops the run after that round;
        exceptions propagate.
    dropout : float, default=0.0
        Probability in ``[0, 1)`` that a sampled client independently fails to reply; a
        dropped client does not run its update and keeps its state.
    checkpoint : str or os.PathLike, optional
        File written atomically after every round (see
        :mod:`convexfl.federated.checkpoint`). If it exists, the run resumes after its last
        finished round, and the final result is bit-identical to an uninterrupted run. The
        algorithm name, number of clients, clients per round, dropout and seed must match.
    progress : bool, default=True
        Show a tqdm progress bar.

    Returns
    -------
    FederatedResult
        Final server and client states, the :class:`~.History` and the root seed.

    Raises
    ------
    ValueError
        For invalid ``rounds``, ``participation``, ``dropout``, ``client_data`` or
        ``random_state``, an invalid payload from ``server_payload``, a checkpoint that does not
        match, or a checkpoint with more finished rounds than ``rounds``.

    Notes
    -----
    Client failures (an exception in ``client_update`` or a reply that is not a valid
    message) are recorded in ``RoundRecord.failed`` and logged; exceptions in the server
    functions, ``metrics`` or ``callback`` stop the run (the last checkpoint stays valid).
    Message accounting follows :mod:`convexfl.federated.messages`: payloads count for every
    participant, replies only when accepted.
    """
    algorithm = _as_algorithm(algorithm)
    rounds = _check_rounds(rounds)
    client_data = _check_client_data(client_data)
    per_round = _clients_per_round(participation, len(client_data))
    dropout = _check_dropout(dropout)
    if callback is not None and not callable(callback):
        raise TypeError("callback must be callable or None")
    plan, server, clients, history, start = _start(
        algorithm, client_data, per_round, dropout, random_state, checkpoint
    )
    if start > rounds:
        raise ValueError(
            f"rounds={rounds} but checkpoint {os.fspath(checkpoint)!r} already "
            f"holds {start} finished rounds"
        )
    with tqdm(
        total=rounds, initial=start, disable=not progress, desc=algorithm.name, unit="round"
    ) as bar:
        for t in range(start, rounds):
            record = _run_round(server, clients, plan, t)
            history.append(record)
            if checkpoint is not None:
                _save(checkpoint, plan, server, clients, history)
            bar.set_postfix(_postfix(record.metrics), refresh=False)
            bar.update(1)
            if callback is not None and callback(record, server.state, [c.state for c in clients]):
                break
    return FederatedResult(server.state, [c.state for c in clients], history, plan.entropy)
