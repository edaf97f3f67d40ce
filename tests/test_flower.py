"""Tests of the Flower adapter (convexfl.federated.flower), in one process, no network.

Flower's own ServerApp and ClientApp objects run on ``InMemoryGrid``, which sends every
message, reply and node context through Flower's serialisation. The reference is the
in-process runtime :func:`convexfl.federated.run_federated` on the same data and seed.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap

import numpy as np
import pytest

flwr = pytest.importorskip("flwr")

from flwr.app import ArrayRecord, ConfigRecord, Message, RecordDict  # noqa: E402
from flwr.clientapp import ClientApp  # noqa: E402
from flwr.common.serde import message_from_proto, message_to_proto  # noqa: E402
from flwr.proto.message_pb2 import Message as ProtoMessage  # noqa: E402
from flwr.serverapp import ServerApp  # noqa: E402
from flwr.serverapp.strategy import Strategy  # noqa: E402
from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from hypothesis.extra import numpy as hnp  # noqa: E402

from convexfl.federated import (  # noqa: E402
    Algorithm,
    derive_rng,
    fedavg_least_squares,
    flower,
    message_size,
    run_federated,
)
from convexfl.federated.flower import _codec  # noqa: E402
from convexfl.federated.flower.inmemory import _task_identity  # noqa: E402

# ----------------------------------------------------------------------------- problems


def heterogeneous_problem(n_clients=6, n_features=3, seed=0):
    """Least-squares clients of different sizes, each around its own model."""
    rng = np.random.default_rng(seed)
    data = []
    for k in range(n_clients):
        m = 10 + 3 * k
        A = rng.normal(size=(m, n_features))
        data.append((A, A @ rng.normal(size=n_features) + 0.3 * rng.normal(size=m)))
    return data


def realisable_problem(n_clients=8, n_features=3, seed=1):
    """Noiseless clients of one model: the pooled LS solution minimises every client."""
    rng = np.random.default_rng(seed)
    x_true = rng.normal(size=n_features)
    data = []
    for k in range(n_clients):
        A = rng.normal(size=(12 + 2 * k, n_features))
        data.append((A, A @ x_true))
    return data


def pooled_solution(data):
    A = np.vstack([a for a, _ in data])
    b = np.concatenate([bb for _, bb in data])
    return np.linalg.lstsq(A, b, rcond=None)[0]


def consensus_admm(n_features, n_clients, *, rho=5.0, local_steps=10):
    """A stateful toy algorithm: consensus ADMM for pooled least squares.

    Per-client server state (the scaled duals ``u_i`` and last local models ``x_i``), one
    payload per client (``z - u_i``), and a client state that matters (a warm start). The
    server keeps stale ``x_i`` for clients that did not reply, so partial participation
    still converges to the pooled least-squares solution.
    """

    def server_init(rng):
        zeros = np.zeros((n_clients, n_features))
        return {"z": np.zeros(n_features), "u": zeros.copy(), "x": zeros.copy()}

    def client_init(data, rng):
        A, _ = data
        return {"x": np.zeros(n_features), "step": 1.0 / (np.linalg.eigvalsh(A.T @ A)[-1] + rho)}

    def server_payload(state, client_id, round):
        return {"v": state["z"] - state["u"][client_id]}

    def client_update(data, state, payload, rng):
        A, b = data
        x = state["x"]
        for _ in range(local_steps):
            x = x - state["step"] * (A.T @ (A @ x - b) + rho * (x - payload["v"]))
        loss = 0.5 * float(np.sum((A @ x - b) ** 2))
        return {"x": x, "step": state["step"], "loss": loss}, {"x": x}

    def server_update(state, replies, round, rng):
        x, u = state["x"].copy(), state["u"].copy()
        for i, reply in replies.items():
            x[i] = reply["x"]
        z = np.mean(x + u, axis=0)
        for i in replies:
            u[i] += x[i] - z
        return {"z": z, "u": u, "x": x}

    def metrics(state, client_states):
        return {
            "primal": float(np.abs(state["x"] - state["z"]).max()),
            "loss": float(sum(s.get("loss", 0.0) for s in client_states)),
        }

    return Algorithm(
        server_init=server_init,
        client_init=client_init,
        server_payload=server_payload,
        client_update=client_update,
        server_update=server_update,
        metrics=metrics,
        name="consensus_admm",
    )


def stochastic_fedavg():
    # mini-batches: the client_update streams must match too
    return fedavg_least_squares(3, step=0.05, local_steps=3, batch_size=5)


# ----------------------------------------------------------------------------- comparing


def assert_same_value(a, b, where):
    if isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b), where
        for key in a:
            assert_same_value(a[key], b[key], f"{where}[{key!r}]")
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype, where
        np.testing.assert_array_equal(a, b, err_msg=where)
    else:
        assert type(a) is type(b) and a == b, where


def assert_same_run(flower_result, reference):
    """Same models, states, rounds, histories and message counts."""
    assert flower_result.entropy == reference.entropy
    assert flower_result.rounds_completed == reference.rounds_completed
    assert_same_value(flower_result.server_state, reference.server_state, "server_state")
    for i, (a, b) in enumerate(
        zip(flower_result.client_states, reference.client_states, strict=True)
    ):
        assert_same_value(a, b, f"client_states[{i}]")
    assert flower_result.history.initial_metrics == reference.history.initial_metrics
    for a, b in zip(flower_result.history, reference.history, strict=True):
        assert a.participants == b.participants
        assert a.received == b.received
        assert a.dropped == b.dropped
        assert list(a.failed) == list(b.failed)
        assert (a.vectors_down, a.vectors_up, a.bytes_down, a.bytes_up) == (
            b.vectors_down,
            b.vectors_up,
            b.bytes_down,
            b.bytes_up,
        )
        assert a.metrics == b.metrics
    assert flower_result.history.totals() == reference.history.totals()


def in_process(algorithm, data, **kwargs):
    return run_federated(algorithm, data, progress=False, **kwargs)


def apps(algorithm, data, **server_kwargs):
    server_kwargs.setdefault("round_timeout", None)
    server_kwargs.setdefault("connect_timeout", 1.0)
    server = flower.server_app(algorithm, **server_kwargs)
    client = flower.client_app(algorithm, data)
    return server, client


def train_key(message):
    """(round, client id) of a train message, or None for other messages."""
    control = message.content[_codec.CONTROL]
    if control["op"] != "train":
        return None
    return control["round"], control["client-id"]


def runtime_drop_rule(entropy, p):
    """The runtime's dropout draw, for a grid that loses messages the same way."""

    def drops(message):
        key = train_key(message)
        if key is None:
            return False
        return bool(derive_rng(entropy, "dropout", key[0], key[1]).random() < p)

    return drops


# ----------------------------------------------------------------------------- packaging


def test_import_convexfl_does_not_import_flwr():
    code = "import sys, convexfl, convexfl.federated; print('flwr' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_missing_flwr_gives_an_error_naming_the_extra():
    code = textwrap.dedent(
        """
        import sys
        class Block:
            def find_spec(self, name, path=None, target=None):
                if name == "flwr" or name.startswith("flwr."):
                    raise ImportError("No module named 'flwr'")
        sys.meta_path.insert(0, Block())
        try:
            import convexfl.federated.flower
        except ImportError as exc:
            print(exc)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "pip install 'convexfl[flower]'" in out.stdout


def test_apps_are_flowers_own_objects():
    algorithm = fedavg_least_squares(3, step=0.1)
    server, client = apps(algorithm, heterogeneous_problem(), rounds=2)
    assert isinstance(server, ServerApp) and isinstance(client, ClientApp)
    assert issubclass(flower.AlgorithmStrategy, Strategy)


# ----------------------------------------------------------------------------- serialisation

scalars = st.one_of(
    st.booleans(),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
dtypes = st.sampled_from([np.float64, np.float32, np.int64, np.int8, np.uint16, np.bool_])


@st.composite
def numpy_values(draw):
    dtype = np.dtype(draw(dtypes))
    elements = (
        st.floats(-1e6, 1e6, width=32 if dtype == np.float32 else 64) if dtype.kind == "f" else None
    )
    array = draw(
        hnp.arrays(
            dtype,
            hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3),
            elements=elements,
        )
    )
    return array[()] if array.ndim == 0 and draw(st.booleans()) else array


messages = st.dictionaries(
    st.text(min_size=1, max_size=6), st.one_of(scalars, numpy_values()), max_size=6
)


def wire(content):
    """A message through both of Flower's serialisations: the object tree of the
    transport and the protobuf ``Message``."""
    with _task_identity(run_id=7):
        message = Message(content, dst_node_id=123, message_type="train", group_id="1")
    message = flower.roundtrip_message(message)
    data = message_to_proto(message).SerializeToString()
    return message_from_proto(ProtoMessage.FromString(data))


@given(messages)
def test_messages_survive_flower_serialisation(message):
    decoded = flower.decode_message(wire(flower.encode_message(message)).content)
    assert_same_value(decoded, message, "message")
    assert message_size(decoded) == message_size(message)


def test_numpy_scalars_and_zero_d_arrays_keep_their_types():
    message = {
        "a": np.float32(1.5),
        "b": np.array(2.0),
        "c": np.int16(-3),
        "d": np.bool_(True),
        "e": 4,
        "f": True,
        "g": "text",
        "h": np.zeros((0, 3)),
        "x": np.arange(6.0).reshape(2, 3),
    }
    decoded = flower.decode_message(wire(flower.encode_message(message)).content)
    assert_same_value(decoded, message, "message")
    assert decoded["x"].flags.writeable
    assert message_size(decoded) == message_size(message)


def test_decoding_refuses_pickles_and_inconsistent_records():
    pickled = RecordDict(_codec.message_records({"x": [1, 2]}, "state", allow_pickle=True))
    assert flower.decode_message(pickled, "state", allow_pickle=True) == {"x": [1, 2]}
    with pytest.raises(ValueError, match="pickle"):
        flower.decode_message(wire(pickled).content, "state")
    content = flower.encode_message({"x": np.ones(2)})
    content["message.scalars"] = ConfigRecord({"y": 1})
    with pytest.raises(ValueError, match="do not match"):
        flower.decode_message(content)
    with pytest.raises(ValueError, match="no 'message' records"):
        flower.decode_message(RecordDict({"other": ArrayRecord()}))
    with pytest.raises(ValueError):
        flower.encode_message({"x": np.array([np.nan])})


# ----------------------------------------------------------------------------- equivalence


@pytest.mark.parametrize(
    "options",
    [
        {"random_state": 0},
        {"participation": 0.5, "dropout": 0.2, "random_state": 123},
        {"participation": 2, "random_state": 5},
    ],
    ids=["full", "sampled+dropout", "two-per-round"],
)
def test_fedavg_flower_run_equals_in_process_run(options):
    data = heterogeneous_problem()
    reference = in_process(stochastic_fedavg(), data, rounds=12, **options)
    result = flower.run_in_memory(stochastic_fedavg(), data, rounds=12, **options)
    assert_same_run(result, reference)


def test_stateful_algorithm_flower_run_equals_in_process_run():
    data = heterogeneous_problem(n_clients=5)
    options = {"rounds": 15, "participation": 0.8, "dropout": 0.3, "random_state": 9}
    reference = in_process(consensus_admm(3, 5), data, **options)
    server, client = apps(consensus_admm(3, 5), data, **options)
    grid = flower.InMemoryGrid.for_partitions(client, 5)
    result = flower.run_server_app(server, grid)
    assert_same_run(result, reference)
    # the Flower messages: one train message per participant, every one answered
    participants = sum(len(r.participants) for r in reference.history)
    strategy = server.strategy_
    assert strategy.message_counts_["sent:train"] == participants
    assert strategy.message_counts_["received:train"] == participants
    assert strategy.message_counts_["sent:hello"] == 5
    # nodes were mapped to clients by the partition-id in their node config
    for client_id, node in strategy.client_nodes_.items():
        assert grid.contexts[node].node_config["partition-id"] == client_id
    assert list(strategy.client_nodes_.values()) != sorted(strategy.client_nodes_.values())


def test_dropouts_still_reach_the_pooled_least_squares_solution():
    """30 % of the clients drop out at random each round; FedAvg (on clients that share
    their minimiser) and the stateful ADMM (on heterogeneous clients) still converge to the
    pooled least-squares solution, as without drops."""
    data = realisable_problem(n_clients=6)
    x_star = pooled_solution(data)
    algorithm = fedavg_least_squares(3, step=0.5)
    options = {"rounds": 60, "random_state": 3, "metrics_every": 0}
    full = flower.run_in_memory(algorithm, data, **options)
    drops = flower.run_in_memory(algorithm, data, dropout=0.3, **options)
    n_dropped = sum(len(r.dropped) for r in drops.history)
    assert 0.2 < n_dropped / (60 * len(data)) < 0.4
    np.testing.assert_allclose(full.server_state["x"], x_star, rtol=0, atol=1e-9)
    np.testing.assert_allclose(drops.server_state["x"], x_star, rtol=0, atol=1e-9)
    data = heterogeneous_problem(n_clients=6)
    admm = flower.run_in_memory(
        consensus_admm(3, 6, rho=10.0),
        data,
        rounds=100,
        dropout=0.3,
        random_state=3,
        metrics_every=0,
    )
    assert sum(len(r.dropped) for r in admm.history) > 100
    np.testing.assert_allclose(admm.server_state["z"], pooled_solution(data), rtol=0, atol=1e-7)


# ----------------------------------------------------------------------------- failures


@pytest.mark.parametrize("where", ["message", "reply"])
def test_lost_messages_and_replies_count_as_dropouts(where):
    """A grid that loses train messages (or the replies, after the client ran) with the
    runtime's dropout draws gives the run of ``run_federated(dropout=0.3)``: a client
    whose reply did not count keeps its old state (two-phase commit)."""
    data = heterogeneous_problem(n_clients=5)
    options = {"rounds": 12, "participation": 0.8, "random_state": 4}
    reference = in_process(consensus_admm(3, 5), data, dropout=0.3, **options)
    rule = runtime_drop_rule(reference.entropy, 0.3)
    hook = (
        {"lose_message": rule}
        if where == "message"
        else {"lose_reply": lambda message, reply: rule(message)}
    )
    result = flower.run_in_memory(consensus_admm(3, 5), data, grid_options=hook, **options)
    assert_same_run(result, reference)


def failing(algorithm, failures):
    """``algorithm`` whose client update gives an invalid reply (NaN) for the (round,
    client) pairs in ``failures``; client data are ``(A, b, client_id)``."""

    def client_init(data, rng):
        return algorithm.client_init(data[:2], rng)

    def server_payload(state, client_id, round):
        return {**algorithm.server_payload(state, client_id, round), "round": round}

    def client_update(data, state, payload, rng):
        payload = dict(payload)  # (run_federated counts the payload after the update)
        round = payload.pop("round")
        new, reply = algorithm.client_update(data[:2], state, payload, rng)
        if (round, int(data[2])) in failures:
            reply = {**reply, "x": np.full_like(reply["x"], np.nan)}
        return new, reply

    return Algorithm(
        server_init=algorithm.server_init,
        client_init=client_init,
        server_payload=server_payload,
        client_update=client_update,
        server_update=algorithm.server_update,
        name=algorithm.name,
    )


def test_failing_clients_do_not_participate_and_keep_their_state(caplog):
    data = [(A, b, k) for k, (A, b) in enumerate(heterogeneous_problem(n_clients=4))]
    algorithm = failing(consensus_admm(3, 4), {(1, 2), (3, 0), (4, 2)})
    reference = in_process(algorithm, data, rounds=8, random_state=2)
    assert {(r.round, i) for r in reference.history for i in r.failed} == {(1, 2), (3, 0), (4, 2)}
    with caplog.at_level(logging.WARNING, logger="convexfl.federated.flower"):
        result = flower.run_in_memory(algorithm, data, rounds=8, random_state=2)
    assert_same_run(result, reference)
    assert "client 2 failed" in caplog.text and "non-finite" in caplog.text


def test_malformed_replies_are_rejected():
    """Replies broken on the way (bad records, wrong client id) count as failures."""
    data = heterogeneous_problem(n_clients=4)

    def tamper(message, reply):
        key = train_key(message)
        if key == (2, 1):  # unreadable records
            return Message(RecordDict({"junk": ConfigRecord({"a": 1})}), reply_to=message)
        if key == (3, 3):  # a reply that claims to be from another client
            reply.content[_codec.CONTROL]["client-id"] = 0
        return reply

    result = flower.run_in_memory(
        consensus_admm(3, 4), data, rounds=5, random_state=1, grid_options={"tamper_reply": tamper}
    )
    failed = {(r.round, i): reason for r in result.history for i, reason in r.failed.items()}
    assert set(failed) == {(2, 1), (3, 3)}
    assert all("malformed reply" in reason for reason in failed.values())
    # the rejected clients kept their state: the same as the runtime where they failed
    algorithm = failing(consensus_admm(3, 4), {(2, 1), (3, 3)})
    reference = in_process(
        algorithm, [(A, b, k) for k, (A, b) in enumerate(data)], rounds=5, random_state=1
    )
    np.testing.assert_array_equal(result.server_state["z"], reference.server_state["z"])


def test_nodes_leaving_and_rejoining(caplog):
    """Client 3's node leaves after round 1 and a new node (new id, empty context) for
    partition 3 joins after round 3: dropped meanwhile, then re-mapped, with a warning
    that its private state was re-initialised."""
    data = heterogeneous_problem(n_clients=4)
    client = flower.client_app(consensus_admm(3, 4), data)
    grid = flower.InMemoryGrid.for_partitions(client, 4)
    left = {}

    def churn(record, server_state, client_states):
        if record.round == 1:
            node = server.strategy_.client_nodes_[3]
            left.update(grid.contexts[node].node_config)
            grid.remove_node(node)
        if record.round == 3:
            grid.add_node(left)

    server = flower.server_app(
        consensus_admm(3, 4),
        rounds=7,
        random_state=0,
        round_timeout=None,
        connect_timeout=1.0,
        callback=churn,
    )
    with caplog.at_level(logging.WARNING, logger="convexfl.federated.flower"):
        result = flower.run_server_app(server, grid)
    assert [r.round for r in result.history if 3 in r.dropped] == [2, 3]
    assert all(3 in r.received for r in result.history if r.round >= 4)
    assert (4, 3, "reinitialised") in server.strategy_.events_
    assert "lost its private state" in caplog.text
    assert result.rounds_completed == 7


# ----------------------------------------------------------------------------- checkpoints

RESUME_OPTIONS = {"participation": 0.8, "dropout": 0.2, "random_state": 11}


def test_restarted_server_resumes_from_its_checkpoint(tmp_path):
    data = heterogeneous_problem(n_clients=5)
    reference = in_process(consensus_admm(3, 5), data, rounds=10, **RESUME_OPTIONS)
    path = tmp_path / "server.ckpt"
    first, client = apps(consensus_admm(3, 5), data, rounds=4, checkpoint=path, **RESUME_OPTIONS)
    grid = flower.InMemoryGrid.for_partitions(client, 5)
    assert flower.run_server_app(first, grid).rounds_completed == 4
    # a new ServerApp (a restarted server); random_state=None adopts the checkpoint's seed
    options = {**RESUME_OPTIONS, "random_state": None}
    second, _ = apps(consensus_admm(3, 5), data, rounds=10, checkpoint=path, **options)
    result = flower.run_server_app(second, grid)
    assert_same_run(result, reference)
    assert second.strategy_.message_counts_["sent:train"] == sum(
        len(r.participants) for r in reference.history[4:]
    )


def test_server_crash_in_the_middle_of_a_round(tmp_path):
    """The server dies after some clients of round 6 ran; the restarted server replays
    round 6 and those clients drop the state they computed for the lost round."""
    data = heterogeneous_problem(n_clients=5)
    reference = in_process(consensus_admm(3, 5), data, rounds=9, **RESUME_OPTIONS)
    path = tmp_path / "server.ckpt"
    delivered = []

    class Crash(Exception):
        pass

    def crash(message):
        key = train_key(message)
        if key is not None and key[0] == 6:
            delivered.append(key[1])
            if len(delivered) == 3:
                raise Crash
        return False

    server, client = apps(consensus_admm(3, 5), data, rounds=9, checkpoint=path, **RESUME_OPTIONS)
    grid = flower.InMemoryGrid.for_partitions(client, 5, lose_message=crash)
    with pytest.raises(Crash):
        flower.run_server_app(server, grid)
    grid.lose_message = None
    restarted, _ = apps(consensus_admm(3, 5), data, rounds=9, checkpoint=path, **RESUME_OPTIONS)
    assert_same_run(flower.run_server_app(restarted, grid), reference)


def test_new_run_with_fresh_nodes_resumes_from_state_dir(tmp_path):
    """A new Flower run (new node ids, empty contexts) resumes: the clients restore their
    private state from the node config ``state-dir``."""
    data = heterogeneous_problem(n_clients=4)
    options = {"participation": 0.75, "random_state": 2}
    reference = in_process(consensus_admm(3, 4), data, rounds=8, **options)
    path = tmp_path / "server.ckpt"
    node_config = {"state-dir": str(tmp_path / "clients")}
    first, client = apps(consensus_admm(3, 4), data, rounds=3, checkpoint=path, **options)
    flower.run_server_app(
        first, flower.InMemoryGrid.for_partitions(client, 4, node_config=node_config)
    )
    second, client = apps(consensus_admm(3, 4), data, rounds=8, checkpoint=path, **options)
    grid = flower.InMemoryGrid.for_partitions(client, 4, node_config=node_config, run_id=2)
    result = flower.run_server_app(second, grid)
    assert_same_run(result, reference)
    assert {event for _, _, event in second.strategy_.events_} == {"restored"}
    # without the state-dir, fresh nodes re-initialise their state: an error on request
    fresh = flower.InMemoryGrid.for_partitions(
        flower.client_app(consensus_admm(3, 4), data), 4, run_id=3
    )
    strict = flower.AlgorithmStrategy(
        consensus_admm(3, 4), checkpoint=path, lost_state="raise", connect_timeout=1.0, **options
    )
    with _task_identity(run_id=3), pytest.raises(RuntimeError, match="lost its private state"):
        strict.start(fresh, num_rounds=9, timeout=None)


def test_checkpoint_of_the_in_process_runtime_is_refused(tmp_path):
    data = heterogeneous_problem(n_clients=3)
    path = tmp_path / "ckpt"
    in_process(fedavg_least_squares(3, step=0.1), data, rounds=2, checkpoint=path, random_state=0)
    with pytest.raises(ValueError, match="not written by a Flower run"):
        flower.run_in_memory(
            fedavg_least_squares(3, step=0.1), data, rounds=4, checkpoint=path, random_state=0
        )


# ----------------------------------------------------------------------------- configuration


def test_run_config_overrides_the_defaults():
    data = heterogeneous_problem(n_clients=4)
    server, client = apps(fedavg_least_squares(3, step=0.1), data, rounds=50, random_state=1)
    grid = flower.InMemoryGrid.for_partitions(client, 4)
    run_config = {"num-server-rounds": 3, "seed": 8, "participation": 0.5, "checkpoint": ""}
    result = flower.run_server_app(server, grid, run_config=run_config)
    reference = in_process(
        fedavg_least_squares(3, step=0.1), data, rounds=3, participation=0.5, random_state=8
    )
    assert_same_run(result, reference)


def test_no_client_state_leaves_the_clients_with_metrics_every_zero():
    data = heterogeneous_problem(n_clients=4)
    server, client = apps(consensus_admm(3, 4), data, rounds=3, random_state=0, metrics_every=0)
    grid = flower.InMemoryGrid.for_partitions(client, 4)
    result = flower.run_server_app(server, grid)
    assert grid.delivered["evaluate"] == 0
    assert result.client_states == [None] * 4
    assert all(r.metrics == {} for r in result.history)
    reference = in_process(consensus_admm(3, 4), data, rounds=3, random_state=0)
    np.testing.assert_array_equal(result.server_state["z"], reference.server_state["z"])


def test_client_state_stays_in_the_flower_context():
    data = heterogeneous_problem(n_clients=3)
    server, client = apps(consensus_admm(3, 3), data, rounds=2, random_state=0)
    grid = flower.InMemoryGrid.for_partitions(client, 3)
    result = flower.run_server_app(server, grid)
    for node, client_id in ((n, c.node_config["partition-id"]) for n, c in grid.contexts.items()):
        state = grid.contexts[node].state
        book = state["convexfl.client"]
        # the last accepted state is pending until the next message acknowledges it
        assert book["pending-round"] == 1
        stored = flower.decode_message(state, "convexfl.pending")
        np.testing.assert_array_equal(stored["x"], result.client_states[client_id]["x"])


def test_bad_arguments():
    algorithm = fedavg_least_squares(3, step=0.1)
    with pytest.raises(ValueError, match="initial_arrays"):
        flower.AlgorithmStrategy(algorithm).start(object(), initial_arrays=ArrayRecord())
    with pytest.raises(ValueError, match="metrics_every"):
        flower.AlgorithmStrategy(algorithm, metrics_every=-1)
    with pytest.raises(TypeError, match="client_data"):
        flower.client_app(algorithm, {0: None})
    server, client = apps(algorithm, heterogeneous_problem(n_clients=2))
    with pytest.raises(ValueError, match="num-server-rounds"):
        flower.run_server_app(server, flower.InMemoryGrid.for_partitions(client, 2))


def test_client_without_partition_id_is_left_out(caplog):
    data = heterogeneous_problem(n_clients=2)
    server, client = apps(
        fedavg_least_squares(3, step=0.1), data, rounds=2, random_state=0, n_clients=2
    )
    grid = flower.InMemoryGrid(
        client, [{"partition-id": 0}, {"partition-id": 1}, {"something": "else"}]
    )
    with caplog.at_level(logging.WARNING, logger="convexfl.federated.flower"):
        result = flower.run_server_app(server, grid)
    assert "cannot take part" in caplog.text and "partition-id" in caplog.text
    assert result.rounds_completed == 2
