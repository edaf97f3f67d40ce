"""Tests of the in-process federated runtime (convexfl.federated)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from convexfl.federated import (
    Algorithm,
    derive_rng,
    fedavg_least_squares,
    load_checkpoint,
    message_size,
    run_federated,
    split_message,
    validate_message,
)
from convexfl.federated import checkpoint as checkpoint_module

REPO = Path(__file__).resolve().parents[1]

# A stochastic configuration that exercises every random stream: sampling, dropout and
# mini-batches inside the client updates.
STOCHASTIC = {"participation": 0.5, "dropout": 0.2, "random_state": 123}


# ----------------------------------------------------------------------------- helpers


def make_problem(n_clients=6, n_features=3, seed=0):
    """Federated least-squares data: clients of different sizes around one model."""
    rng = np.random.default_rng(seed)
    x_true = rng.normal(size=n_features)
    data = []
    for k in range(n_clients):
        m = 10 + 3 * k
        A = rng.normal(size=(m, n_features))
        data.append((A, A @ x_true + 0.1 * rng.normal(size=m)))
    return data


def stochastic_fedavg():
    return fedavg_least_squares(3, step=0.05, local_steps=3, batch_size=5)


def pooled(data):
    A = np.vstack([a for a, _ in data])
    b = np.concatenate([bb for _, bb in data])
    return A, b


def make_algorithm(payload=None, reply=None, client_update=None, server_payload=None):
    """A minimal algorithm; the server state logs which replies arrived in each round."""

    def default_update(data, state, message, rng):
        state["count"] += 1
        return state, reply() if reply is not None else {"v": np.ones(2)}

    def default_payload(state, client_id, round):
        return payload() if payload is not None else {"x": np.zeros(2)}

    def server_update(state, replies, round, rng):
        return {
            "seen": state["seen"] + [tuple(replies)],
            "values": {**state["values"], round: replies},
        }

    return Algorithm(
        server_init=lambda rng: {"seen": [], "values": {}},
        client_init=lambda data, rng: {"count": 0},
        server_payload=server_payload or default_payload,
        client_update=client_update or default_update,
        server_update=server_update,
        name="probe",
    )


def assert_same_value(a, b):
    """Exact, recursive equality of states (dicts, lists, arrays, scalars)."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys()
        for key in a:
            assert_same_value(a[key], b[key])
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            assert_same_value(x, y)
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)
    else:
        assert a == b


def assert_identical(r1, r2):
    assert r1.entropy == r2.entropy
    assert r1.history.records == r2.history.records
    assert r1.history.initial_metrics == r2.history.initial_metrics
    assert_same_value(r1.server_state, r2.server_state)
    assert_same_value(r1.client_states, r2.client_states)


# ----------------------------------------------------------------------------- messages


@pytest.mark.parametrize(
    "value, expected",
    [
        (np.zeros(7), (1, 56)),
        (np.zeros((3, 5)), (3, 120)),
        (np.zeros((2, 3, 4), dtype=np.int32), (6, 96)),
        (np.zeros(4, dtype=np.float32), (1, 16)),
        (np.zeros((0, 3)), (0, 0)),
        (np.zeros((3, 0)), (0, 0)),
        (np.array(1.5), (0, 8)),
        (2.0, (0, 8)),
        (3, (0, 8)),
        (True, (0, 1)),
        (np.int32(3), (0, 4)),
        ("abc", (0, 3)),
    ],
)
def test_message_size_convention(value, expected):
    assert message_size({"a": value}) == expected


def test_message_size_sums_values():
    message = {"w": np.zeros((3, 5)), "v": np.zeros(7), "s": 2.0}
    assert message_size(message) == (4, 184)


@pytest.mark.parametrize(
    "message, match",
    [
        ([np.ones(2)], "must be a dict"),
        ({1: np.ones(2)}, "keys must be str"),
        ({"a": np.array([1.0, np.nan])}, "non-finite"),
        ({"a": np.array([np.inf])}, "non-finite"),
        ({"a": float("nan")}, "not finite"),
        ({"a": np.float32("inf")}, "not finite"),
        ({"a": 2**70}, "64 bits"),
        ({"a": np.array(["x"], dtype=object)}, "dtype"),
        ({"a": np.array([1 + 1j])}, "dtype"),
        ({"a": None}, "NoneType"),
        ({"a": [1.0, 2.0]}, "list"),
        ({"a": {"b": np.ones(1)}}, "dict"),
    ],
)
def test_validate_message_rejects(message, match):
    with pytest.raises(ValueError, match=match):
        validate_message(message, name="reply")


def test_validate_and_split_message_accepts_arrays_and_scalars():
    message = {
        "x": np.ones((2, 3)),
        "m": np.arange(3),
        "mask": np.array([True, False]),
        "n": 3,
        "s": 0.5,
        "flag": True,
        "phase": "dual",
        "z": np.array(2.0),
        "k": np.int64(4),
    }
    assert validate_message(message) is message
    arrays, scalars = split_message(message)
    assert sorted(arrays) == ["m", "mask", "x"]
    assert scalars == {"n": 3, "s": 0.5, "flag": True, "phase": "dual", "z": 2.0, "k": 4}
    assert type(scalars["z"]) is float and type(scalars["k"]) is int


# ----------------------------------------------------------------------------- determinism


def test_same_seed_gives_identical_runs():
    data = make_problem()
    r1 = run_federated(stochastic_fedavg(), data, rounds=8, progress=False, **STOCHASTIC)
    r2 = run_federated(stochastic_fedavg(), data, rounds=8, progress=False, **STOCHASTIC)
    assert_identical(r1, r2)
    other = dict(STOCHASTIC, random_state=124)
    r3 = run_federated(stochastic_fedavg(), data, rounds=8, progress=False, **other)
    assert [r.participants for r in r3.history] != [r.participants for r in r1.history]


def test_unseeded_run_reproduced_from_its_entropy():
    data = make_problem()
    kwargs = {"participation": 0.5, "dropout": 0.2, "rounds": 4, "progress": False}
    r1 = run_federated(stochastic_fedavg(), data, **kwargs)
    r2 = run_federated(stochastic_fedavg(), data, random_state=r1.entropy, **kwargs)
    assert_identical(r1, r2)


def test_client_streams_do_not_depend_on_other_clients():
    def noisy_update(data, state, payload, rng):
        return state, {"z": rng.normal(size=3)}

    algorithm = make_algorithm(client_update=noisy_update)
    data = [None] * 6
    full = run_federated(algorithm, data, rounds=5, random_state=7, progress=False)
    part = run_federated(algorithm, data, rounds=5, participation=2, random_state=7, progress=False)
    for t, replies in part.server_state["values"].items():
        assert len(replies) == 2
        for cid, reply in replies.items():
            np.testing.assert_array_equal(reply["z"], full.server_state["values"][t][cid]["z"])
            expected = derive_rng(7, "client_update", t, cid).normal(size=3)
            np.testing.assert_array_equal(reply["z"], expected)


# ----------------------------------------------------------------------------- participation


@pytest.mark.parametrize(
    "participation, expected",
    [
        (1.0, 10),
        (0.3, 3),
        (0.25, 3),
        (0.01, 1),
        (0.999, 10),
        (4, 4),
        (1, 1),
        (10, 10),
        (np.int64(2), 2),
        (np.float64(0.5), 5),
    ],
)
def test_partial_participation_counts(participation, expected):
    result = run_federated(
        make_algorithm(),
        [None] * 10,
        rounds=40,
        participation=participation,
        random_state=0,
        progress=False,
    )
    seen = set()
    for record in result.history:
        assert len(record.participants) == expected
        assert list(record.participants) == sorted(set(record.participants))
        assert record.received == record.participants
        seen.update(record.participants)
    assert seen <= set(range(10))
    if expected >= 3:
        assert seen == set(range(10))
    counts = [s["count"] for s in result.client_states]
    assert sum(counts) == 40 * expected


# ----------------------------------------------------------------------------- accounting


def test_message_accounting_exact():
    def payload():
        return {"w": np.zeros((3, 5)), "v": np.zeros(7), "s": 2.0, "tag": "abc"}

    def reply():
        return {
            "g": np.zeros(4, dtype=np.float32),
            "k": np.int64(3),
            "M": np.zeros((2, 3, 4), dtype=np.int32),
        }

    result = run_federated(
        make_algorithm(payload, reply),
        [None] * 5,
        rounds=3,
        participation=2,
        random_state=0,
        progress=False,
    )
    for record in result.history:
        # payload: 3 + 1 vectors, 120 + 56 + 8 + 3 bytes; reply: 1 + 6 vectors, 16 + 8 + 96
        assert (record.vectors_down, record.bytes_down) == (2 * 4, 2 * 187)
        assert (record.vectors_up, record.bytes_up) == (2 * 7, 2 * 120)
    assert result.history.totals() == {
        "vectors_down": 24,
        "vectors_up": 42,
        "bytes_down": 1122,
        "bytes_up": 720,
    }
    np.testing.assert_array_equal(result.history.column("bytes_up"), [240, 240, 240])
    np.testing.assert_array_equal(result.history.column("n_participants"), [2, 2, 2])


def test_fedavg_accounting_counts_one_vector_each_way():
    data = make_problem(n_clients=4)
    result = run_federated(
        fedavg_least_squares(3, step=0.1), data, rounds=2, random_state=0, progress=False
    )
    record = result.history[0]
    assert (record.vectors_down, record.bytes_down) == (4, 4 * 24)
    assert (record.vectors_up, record.bytes_up) == (4, 4 * (24 + 8))


# ----------------------------------------------------------------------------- failures


def test_dropout_excluded_and_logged():
    result = run_federated(
        make_algorithm(), [None] * 20, rounds=10, dropout=0.3, random_state=1, progress=False
    )
    n_dropped = 0
    for record, seen in zip(result.history, result.server_state["seen"], strict=True):
        assert seen == record.received
        assert set(record.received).isdisjoint(record.dropped)
        assert set(record.received) | set(record.dropped) == set(record.participants)
        assert record.failed == {}
        assert (record.vectors_up, record.bytes_up) == (
            len(record.received),
            16 * len(record.received),
        )
        assert record.bytes_down == 16 * 20  # every participant was sent its payload
        n_dropped += len(record.dropped)
    assert 0.15 < n_dropped / 200 < 0.45
    runs = [sum(cid in r.received for r in result.history) for cid in range(20)]
    assert [s["count"] for s in result.client_states] == runs


FAULTS = {
    1: ("raise", "RuntimeError: boom"),
    2: ({"v": np.array([np.nan, 1.0])}, "non-finite"),
    3: ([1.0, 2.0], "must be a dict"),
    4: ("bare", "tuple"),
    5: ({"v": np.array(["a"], dtype=object)}, "dtype"),
    6: ({1: np.ones(2)}, "keys must be str"),
    7: ({"v": None}, "NoneType"),
}


def faulty_update(data, state, payload, rng):
    state["count"] += 1  # mutates the (private copy of the) state before failing
    behaviour = FAULTS.get(data, (None, None))[0]
    if behaviour == "raise":
        raise RuntimeError("boom")
    if behaviour == "bare":
        return {"v": np.ones(2)}
    return state, behaviour if behaviour is not None else {"v": np.ones(2)}


def test_failing_and_malformed_clients_excluded_and_logged(caplog):
    algorithm = make_algorithm(client_update=faulty_update)
    with caplog.at_level("WARNING", logger="convexfl.federated.runtime"):
        result = run_federated(algorithm, list(range(8)), rounds=2, random_state=0, progress=False)
    assert len(result.history) == 2
    for record in result.history:
        assert record.received == (0,)
        assert sorted(record.failed) == list(FAULTS)
        for cid, (_, reason) in FAULTS.items():
            assert reason in record.failed[cid]
        assert record.bytes_up == 16
    assert result.server_state["seen"] == [(0,), (0,)]
    assert [s["count"] for s in result.client_states] == [2] + [0] * 7
    assert len(result.history.failures()) == 14
    assert "client 1 failed: RuntimeError: boom" in caplog.text


def test_messages_copied_so_parties_cannot_alias_each_other():
    def update(data, state, payload, rng):
        payload["x"][:] = 99.0  # must not reach the server's array
        state["last"] = payload["x"]
        return state, {"v": payload["x"]}

    def server_update(state, replies, round, rng):
        for reply in replies.values():
            reply["v"][:] = -1.0  # must not reach the client's state
        return state

    algorithm = Algorithm(
        server_init=lambda rng: {"x": np.zeros(2)},
        client_init=lambda data, rng: {},
        server_payload=lambda state, client_id, round: {"x": state["x"]},
        client_update=update,
        server_update=server_update,
    )
    result = run_federated(algorithm, [None] * 3, rounds=2, random_state=0, progress=False)
    np.testing.assert_array_equal(result.server_state["x"], np.zeros(2))
    for state in result.client_states:
        np.testing.assert_array_equal(state["last"], [99.0, 99.0])


# ----------------------------------------------------------------------------- checkpoints


def test_checkpoint_resume_after_exception_is_identical(tmp_path):
    data = make_problem()
    reference = run_federated(stochastic_fedavg(), data, rounds=10, progress=False, **STOCHASTIC)
    path = tmp_path / "run.ckpt"

    def crash(record, server_state, client_states):
        if record.round == 4:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_federated(
            stochastic_fedavg(),
            data,
            rounds=10,
            checkpoint=path,
            callback=crash,
            progress=False,
            **STOCHASTIC,
        )
    assert load_checkpoint(path)["next_round"] == 5
    resumed = run_federated(
        stochastic_fedavg(), data, rounds=10, checkpoint=path, progress=False, **STOCHASTIC
    )
    assert_identical(resumed, reference)

    # A finished checkpoint is returned as is; None adopts the checkpoint's seed.
    calls = []
    again = run_federated(
        stochastic_fedavg(),
        data,
        rounds=10,
        checkpoint=path,
        progress=False,
        participation=0.5,
        dropout=0.2,
        callback=lambda *args: calls.append(args),
    )
    assert calls == []
    assert_identical(again, reference)


def test_checkpoint_extends_a_finished_run(tmp_path):
    data = make_problem()
    path = tmp_path / "run.ckpt"
    run_federated(
        stochastic_fedavg(), data, rounds=4, checkpoint=path, progress=False, **STOCHASTIC
    )
    extended = run_federated(
        stochastic_fedavg(), data, rounds=7, checkpoint=path, progress=False, **STOCHASTIC
    )
    reference = run_federated(stochastic_fedavg(), data, rounds=7, progress=False, **STOCHASTIC)
    assert_identical(extended, reference)


@pytest.mark.parametrize(
    "change, match",
    [
        ({"dropout": 0.1}, "dropout"),
        ({"random_state": 5}, "entropy"),
        ({"participation": 0.25}, "clients_per_round"),
        ({"rounds": 2}, "rounds"),
        ({"n_clients": 5}, "n_clients"),
    ],
)
def test_checkpoint_mismatch_raises(tmp_path, change, match):
    path = tmp_path / "run.ckpt"
    data = make_problem()
    run_federated(
        stochastic_fedavg(), data, rounds=3, checkpoint=path, progress=False, **STOCHASTIC
    )
    kwargs = dict(STOCHASTIC, rounds=3, checkpoint=path, progress=False)
    n_clients = change.pop("n_clients", len(data))
    kwargs.update(change)
    with pytest.raises(ValueError, match=match):
        run_federated(stochastic_fedavg(), data[:n_clients], **kwargs)


def test_checkpoint_write_is_atomic(tmp_path, monkeypatch):
    path = tmp_path / "state.ckpt"
    checkpoint_module.save_checkpoint(path, {"next_round": 1})

    def broken_replace(src, dst):
        raise OSError("disk gone")

    monkeypatch.setattr(checkpoint_module.os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk gone"):
        checkpoint_module.save_checkpoint(path, {"next_round": 2})
    assert load_checkpoint(path)["next_round"] == 1
    assert os.listdir(tmp_path) == ["state.ckpt"]


def test_load_checkpoint_rejects_foreign_pickle(tmp_path):
    path = tmp_path / "other.pkl"
    path.write_bytes(__import__("pickle").dumps({"hello": 1}))
    with pytest.raises(ValueError, match="not a convexfl federated checkpoint"):
        load_checkpoint(path)


CHILD = """
import sys, time, os, signal
sys.path[:0] = [{repo!r}, {tests!r}]
from test_federated_runtime import make_problem, stochastic_fedavg, STOCHASTIC
from convexfl.federated import run_federated

def callback(record, server_state, client_states):
    if {self_kill} and record.round == 6:
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(0.05)

run_federated(stochastic_fedavg(), make_problem(), rounds={rounds}, checkpoint=sys.argv[1],
              callback=callback, progress=False, **STOCHASTIC)
"""


def wait_for_rounds(path, n_rounds, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and load_checkpoint(path)["next_round"] >= n_rounds:
            return
        time.sleep(0.01)
    raise AssertionError("the child run made no progress")


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX signals")
@pytest.mark.parametrize("killer", ["parent", "self"])
def test_checkpoint_resume_after_kill_is_identical(tmp_path, killer):
    rounds = 30
    script = tmp_path / "child.py"
    script.write_text(
        textwrap.dedent(
            CHILD.format(
                repo=str(REPO), tests=str(REPO / "tests"), self_kill=killer == "self", rounds=rounds
            )
        )
    )
    path = tmp_path / "run.ckpt"
    child = subprocess.Popen([sys.executable, str(script), str(path)])
    try:
        if killer == "parent":
            wait_for_rounds(path, 3)
            child.kill()
        assert child.wait(timeout=60) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
    done = load_checkpoint(path)["next_round"]
    assert (done == 7) if killer == "self" else (3 <= done < rounds)

    data = make_problem()
    resumed = run_federated(
        stochastic_fedavg(), data, rounds=rounds, checkpoint=path, progress=False, **STOCHASTIC
    )
    reference = run_federated(
        stochastic_fedavg(), data, rounds=rounds, progress=False, **STOCHASTIC
    )
    assert_identical(resumed, reference)


# ----------------------------------------------------------------------------- run options


def test_callback_true_stops_and_progress_bar_optional(capsys):
    data = make_problem()
    result = run_federated(
        stochastic_fedavg(),
        data,
        rounds=10,
        progress=True,
        callback=lambda record, *_: record.round == 2,
        **STOCHASTIC,
    )
    assert result.rounds_completed == 3
    assert "fedavg_least_squares" in capsys.readouterr().err
    run_federated(stochastic_fedavg(), data, rounds=2, progress=False, **STOCHASTIC)
    assert capsys.readouterr().err == ""


def test_duck_typed_algorithm_object():
    class Counter:
        name = "counter"

        def server_init(self, rng):
            return {"total": 0}

        def client_init(self, data, rng):
            return {}

        def server_payload(self, state, client_id, round):
            return {"round": round}

        def client_update(self, data, state, payload, rng):
            return state, {"value": data}

        def server_update(self, state, replies, round, rng):
            return {"total": state["total"] + sum(r["value"] for r in replies.values())}

    result = run_federated(Counter(), [1, 2, 3], rounds=2, random_state=0, progress=False)
    assert result.server_state == {"total": 12}


NOT_A_DICT = make_algorithm(server_payload=lambda state, cid, round: [np.zeros(2)])
NAN_PAYLOAD = make_algorithm(server_payload=lambda state, cid, round: {"x": np.array([np.nan])})


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"rounds": 0}, "rounds"),
        ({"rounds": -1}, "rounds"),
        ({"rounds": 2.5}, "rounds"),
        ({"rounds": True}, "rounds"),
        ({"participation": 0.0}, "participation"),
        ({"participation": -0.2}, "participation"),
        ({"participation": 1.5}, "participation"),
        ({"participation": float("nan")}, "participation"),
        ({"participation": 0}, "participation"),
        ({"participation": 11}, "participation"),
        ({"participation": True}, "participation"),
        ({"participation": "all"}, "participation"),
        ({"dropout": 1.0}, "dropout"),
        ({"dropout": -0.1}, "dropout"),
        ({"dropout": float("nan")}, "dropout"),
        ({"random_state": -1}, "random_state"),
        ({"random_state": "seed"}, "random_state"),
        ({"client_data": []}, "client_data"),
        ({"client_data": None}, "client_data"),
        ({"algorithm": NOT_A_DICT}, "payload"),
        ({"algorithm": NAN_PAYLOAD}, "payload"),
    ],
)
def test_bad_input_raises_value_error_naming_argument(kwargs, match):
    arguments = {
        "algorithm": make_algorithm(),
        "client_data": [None] * 10,
        "rounds": 2,
        "progress": False,
    }
    arguments.update(kwargs)
    algorithm = arguments.pop("algorithm")
    client_data = arguments.pop("client_data")
    with pytest.raises(ValueError, match=match):
        run_federated(algorithm, client_data, **arguments)


def test_bad_algorithm_and_callback_raise_type_error():
    with pytest.raises(TypeError, match="server_update"):
        run_federated(object(), [None], rounds=1, progress=False)
    with pytest.raises(TypeError, match="callback"):
        run_federated(make_algorithm(), [None], rounds=1, callback=3, progress=False)


# ----------------------------------------------------------------------------- FedAvg


def test_fedavg_one_local_step_equals_gradient_descent_closed_form():
    data = make_problem(n_clients=5)
    A, b = pooled(data)
    M = A.shape[0]
    H = A.T @ A / M
    x_star = np.linalg.solve(H, A.T @ b / M)
    step = 0.5 / np.linalg.eigvalsh(H).max()
    x0 = np.array([1.0, -2.0, 0.5])
    rounds = 7
    result = run_federated(
        fedavg_least_squares(3, step=step, x0=x0),
        data,
        rounds=rounds,
        random_state=0,
        progress=False,
    )
    contraction = np.linalg.matrix_power(np.eye(3) - step * H, rounds)
    expected = x_star + contraction @ (x0 - x_star)
    np.testing.assert_allclose(result.server_state["x"], expected, rtol=1e-12, atol=1e-12)
    # The metric of the last round is F at the model sent in that round.
    x_last = x_star + np.linalg.matrix_power(np.eye(3) - step * H, rounds - 1) @ (x0 - x_star)
    F = np.sum((A @ x_last - b) ** 2) / (2 * M)
    assert result.history[-1].metrics["loss"] == pytest.approx(F, rel=1e-12)


def test_fedavg_converges_to_pooled_least_squares():
    data = make_problem(n_clients=5)
    A, b = pooled(data)
    x_star = np.linalg.lstsq(A, b, rcond=None)[0]
    L = np.linalg.eigvalsh(A.T @ A / A.shape[0]).max()
    result = run_federated(
        fedavg_least_squares(3, step=1.0 / L), data, rounds=200, random_state=0, progress=False
    )
    np.testing.assert_allclose(result.server_state["x"], x_star, atol=1e-10)
    losses = result.history.column("loss")
    assert np.all(np.diff(losses) <= 1e-15)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"step": 0.0}, "step"),
        ({"step": float("inf")}, "step"),
        ({"step": 0.1, "local_steps": 0}, "local_steps"),
        ({"step": 0.1, "batch_size": 0}, "batch_size"),
        ({"step": 0.1, "x0": np.zeros(2)}, "x0"),
    ],
)
def test_fedavg_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        fedavg_least_squares(3, **kwargs)


def test_fedavg_bad_client_data():
    with pytest.raises(ValueError, match="shape"):
        run_federated(
            fedavg_least_squares(3, step=0.1),
            [(np.ones((4, 2)), np.ones(4))],
            rounds=1,
            progress=False,
        )
