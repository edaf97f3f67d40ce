"""Shared machinery of the torch trainers: devices, generators, parameters, local SGD and
FedAvg's protocol (:class:`SharedParameters`), messages, client data, the clients' graph
and the common estimator base class (its ``fit``, its argument storage, its template).

Conventions
-----------
* Parameters are plain ``dict[str, torch.Tensor]`` (float32, on the trainer's device),
  evaluated through ``torch.func.functional_call`` on a module *template* built on the
  ``meta`` device (the template holds shapes only, so building it neither allocates nor
  touches any random generator).
* Every random draw comes from an explicit generator derived from the run's seed: numpy
  generators (handed to each client update by the runtime) for mini-batches and sampling,
  and CPU ``torch.Generator`` objects seeded from them for initial parameters. The global
  torch and numpy generators are never used, so results do not depend on what the caller
  did with them, and a run on CPU is bit-identical for the same seed.
* Messages are dicts of float32 (or int32) numpy arrays, no scalars, so that
  "numbers sent" = bytes / 4 (see :func:`numbers_sent`).
"""

from __future__ import annotations

import copy
import math
import numbers
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted
from torch.func import functional_call

from .._devices import resolve_device
from .._validation import as_int, as_scalar, users_of, validate_estimator_data
from ..federated import root_entropy, run_federated
from ..graphs import Graph, complete
from .models import build_classifier, n_parameters

__all__ = ["resolve_device"]  # from convexfl._devices (torch-free at import)

DTYPE = torch.float32


# ----------------------------------------------------------------------------- randomness


def torch_generator(rng: np.random.Generator) -> torch.Generator:
    """A CPU torch generator seeded by one draw of ``rng``."""
    gen = torch.Generator(device="cpu")
    gen.manual_seed(int(rng.integers(0, 2**62)))
    return gen


def seed_int(rng: np.random.Generator) -> int:
    """One 31-bit seed drawn from ``rng`` (for scikit-learn's ``random_state``)."""
    return int(rng.integers(0, 2**31 - 1))


class BatchSampler:
    """Mini-batch indices (drawn with numpy, moved to ``device``); ``None`` = full batch."""

    def __init__(self, rng, n, batch_size, device):
        self.rng = rng
        self.n = int(n)
        self.full = batch_size is None or batch_size >= self.n
        self.batch_size = self.n if self.full else int(batch_size)
        self.device = device

    def __call__(self):
        if self.full:
            return None
        idx = self.rng.choice(self.n, size=self.batch_size, replace=False)
        return torch.as_tensor(idx, dtype=torch.long, device=self.device)


def take(t, idx):
    """``t[idx]``, or ``t`` itself when ``idx`` is ``None`` (full batch)."""
    return t if idx is None else t.index_select(0, idx)


# ----------------------------------------------------------------------------- parameters


def as_template(model) -> torch.nn.Module:
    """A shape-only module on the meta device (for ``functional_call``).

    ``model`` is a zero-argument builder, called under ``torch.device("meta")`` (so that no
    memory is allocated and no random generator is touched), or a module, which is copied
    (the caller's module is left as it is).
    """
    if isinstance(model, torch.nn.Module):
        if all(p.is_meta for p in model.parameters()):
            return model
        return copy.deepcopy(model).to("meta")
    with torch.device("meta"):
        return model()


def init_parameters(template, generator: torch.Generator, device) -> dict:
    """Fresh parameters for ``template``, drawn on the CPU and moved to ``device``.

    Weights and biases of a layer with fan-in ``f`` are uniform on ``[-1/sqrt(f), 1/sqrt(f)]``
    (PyTorch's default for linear and convolution layers); 1-D weights of normalisation
    layers start at 1 and their biases at 0.
    """
    out = {}
    for mname, sub in template.named_modules():
        own = dict(sub.named_parameters(recurse=False))
        if not own:
            continue
        weight = own.get("weight")
        norm_layer = weight is not None and weight.ndim == 1
        fan_in = math.prod(weight.shape[1:]) if weight is not None and weight.ndim >= 2 else 1
        bound = 1.0 / math.sqrt(max(fan_in, 1))
        for pname, p in own.items():
            key = f"{mname}.{pname}" if mname else pname
            if norm_layer:
                value = torch.ones(p.shape, dtype=DTYPE) if pname == "weight" else torch.zeros(
                    p.shape, dtype=DTYPE)
            else:
                value = (torch.rand(p.shape, generator=generator, dtype=DTYPE) * 2 - 1) * bound
            out[key] = value
    return {k: out[k].to(device) for k, _ in template.named_parameters()}


def to_message(params: dict, prefix: str) -> dict:
    """Parameters as a message: ``{prefix + name: float32 numpy array}``."""
    return {prefix + k: v.detach().to("cpu", DTYPE).numpy().copy() for k, v in params.items()}


def from_message(message: dict, prefix: str, device) -> dict:
    """The entries of ``message`` under ``prefix`` as float32 tensors on ``device``."""
    n = len(prefix)
    return {k[n:]: torch.as_tensor(np.asarray(v, dtype=np.float32), device=device)
            for k, v in message.items() if k.startswith(prefix)}


def to_tensors(arrays: dict, device) -> dict:
    """Numpy parameters as float32 tensors on ``device``."""
    return from_message(arrays, "", device)


def numpy_params(message: dict, prefix: str) -> dict:
    """The entries of ``message`` under ``prefix`` as float32 numpy arrays (server side)."""
    n = len(prefix)
    return {k[n:]: np.asarray(v, dtype=np.float32) for k, v in message.items()
            if k.startswith(prefix)}


def with_prefix(arrays: dict, prefix: str) -> dict:
    return {prefix + k: np.asarray(v, dtype=np.float32) for k, v in arrays.items()}


def vec32(x) -> np.ndarray:
    """A float32 1-D numpy array (a message value)."""
    return np.atleast_1d(np.asarray(x, dtype=np.float32))


# ----------------------------------------------------------------------------- local SGD


def sgd(params: dict, loss_fn, *, steps: int, lr: float, sampler, trainable=None) -> dict:
    """``steps`` plain SGD steps on ``loss_fn(params, batch_index)``.

    ``trainable`` (a set of names) restricts the update; the other entries are constants.
    Returns new detached tensors (the input dict is not changed).
    """
    cur = {k: v.detach() for k, v in params.items()}
    names = [k for k in cur if trainable is None or k in trainable]
    for _ in range(steps):
        idx = sampler()
        for k in names:
            cur[k] = cur[k].detach().requires_grad_(True)
        loss = loss_fn(cur, idx)
        grads = torch.autograd.grad(loss, [cur[k] for k in names])
        with torch.no_grad():
            for k, g in zip(names, grads, strict=True):
                cur[k] = cur[k] - lr * g
    return {k: v.detach() for k, v in cur.items()}


def forward(template, params, *args):
    return functional_call(template, params, args)


def cross_entropy_loss(template, data, *extra):
    """``loss(params, idx)``: the mean cross-entropy of ``forward(template, params, X,
    *extra)`` on the mini-batch ``idx`` of ``data``'s training set."""

    def loss(params, idx):
        return F.cross_entropy(forward(template, params, take(data.X_train, idx), *extra),
                               take(data.y_train, idx))

    return loss


def local_sgd(start, loss_fn, data, rng, *, steps, lr, batch_size, device) -> dict:
    """:func:`sgd` from ``start`` on mini-batches of ``data``'s training set drawn with
    ``rng`` (``batch_size=None``: full batches)."""
    sampler = BatchSampler(rng, data.n_train, batch_size, device)
    return sgd(start, loss_fn, steps=steps, lr=lr, sampler=sampler)


def weighted_average(deltas: dict, weights: dict) -> dict:
    """``Σ_i w_i Δ_i / Σ_i w_i`` over the received clients, per array name (numpy)."""
    total = sum(weights[i] for i in deltas)
    out = None
    for i, d in deltas.items():
        scaled = {k: (weights[i] / total) * v.astype(np.float64) for k, v in d.items()}
        out = scaled if out is None else {k: out[k] + scaled[k] for k in out}
    return out


class SharedParameters:
    """FedAvg's protocol for parameters the server holds and the clients train (a whole
    model, or the shared part of one): sent as ``"w.*"``, the clients reply with their
    changes ``"d.*"``, the server subtracts their ``weights``-weighted average
    (:func:`weighted_average`). Server-side parameters are float32 numpy arrays, client-side
    tensors on ``device``."""

    def __init__(self, device, weights: dict):
        self.device, self.weights = device, weights

    def payload(self, params: dict) -> dict:
        return with_prefix(params, "w.")

    def received(self, payload: dict) -> dict:
        return from_message(payload, "w.", self.device)

    @staticmethod
    def reply(start: dict, new: dict, names=None) -> dict:
        """The change ``start − new`` of the parameters ``names`` (default all)."""
        return {"d." + k: (start[k] - new[k]).cpu().numpy()
                for k in (start if names is None else names)}

    def step(self, params: dict, replies: dict) -> dict:
        avg = weighted_average({i: numpy_params(r, "d.") for i, r in replies.items()},
                               self.weights)
        return {k: (v - avg[k]).astype(np.float32) for k, v in params.items()}


@torch.no_grad()
def accuracy_of(logits: torch.Tensor, y: torch.Tensor) -> float:
    if y.numel() == 0:
        return float("nan")
    return float((logits.argmax(dim=1) == y).to(torch.float64).mean().item())


# ----------------------------------------------------------------------------- data


@dataclass
class ClientTensors:
    """One client's data on the device, handed to the client functions by the runtime."""

    client_id: int
    X_train: torch.Tensor
    y_train: torch.Tensor
    X_test: torch.Tensor
    y_test: torch.Tensor
    public: torch.Tensor | None = None
    arch: int = 0

    @property
    def n_train(self) -> int:
        return int(self.X_train.shape[0])


def _client_arrays(c):
    """``(X_train, y_train, X_test, y_test)`` of one client entry."""
    if all(hasattr(c, a) for a in ("X_train", "y_train", "X_test", "y_test")):
        return c.X_train, c.y_train, c.X_test, c.y_test
    if isinstance(c, (tuple, list)) and len(c) in (2, 4):
        if len(c) == 2:
            X, y = c
            return X, y, np.zeros((0, np.asarray(X).shape[1])), np.zeros(0, dtype=np.int64)
        return tuple(c)
    raise TypeError("clients: each entry must have X_train, y_train, X_test, y_test "
                    "(e.g. a ClientSplit) or be a tuple (X, y) or (X_train, y_train, X_test, "
                    f"y_test); got {type(c).__name__}")


def prepare_clients(data, y=None, groups=None):
    """Validate federated data; return ``(list of 4-tuples of numpy arrays, n_features,
    n_classes, public or None)``.

    ``data`` is a sequence of client entries (see :func:`_client_arrays`, e.g. a
    ``FederatedDataset``) or, with ``y`` and ``groups``, one array ``X`` whose rows belong
    to the users named by ``groups`` (training data only).
    """
    from .._validation import as_float_array, check_groups

    public = getattr(data, "public", None)
    if y is not None or groups is not None:
        if y is None:
            raise ValueError("y: fit(X, y, groups) needs the labels y with the groups")
        X = as_float_array(data, "X", ndim=2)
        yy = np.asarray(y)
        if yy.shape != (X.shape[0],):
            raise ValueError(f"y: expected shape ({X.shape[0]},), got {yy.shape}")
        _, user = check_groups(np.zeros(X.shape[0], int) if groups is None else groups,
                               X.shape[0])
        entries = [(X[user == i], yy[user == i]) for i in range(int(user.max()) + 1)]
    else:
        if isinstance(data, (np.ndarray, str, bytes)) or not hasattr(data, "__len__"):
            raise TypeError("clients: expected a sequence of client splits (e.g. a "
                            f"FederatedDataset), got {type(data).__name__}")
        entries = list(data)
    if len(entries) == 0:
        raise ValueError("clients: is empty; a federation needs at least one client")
    out, n_features, n_classes = [], None, 0
    for i, c in enumerate(entries):
        Xtr, ytr, Xte, yte = _client_arrays(c)
        Xtr = as_float_array(Xtr, f"clients[{i}].X_train", ndim=2)
        Xte = as_float_array(Xte, f"clients[{i}].X_test", ndim=2, allow_empty=True)
        ytr, yte = _labels(ytr, f"clients[{i}].y_train"), _labels(yte, f"clients[{i}].y_test")
        if Xtr.shape[0] != ytr.shape[0] or Xte.shape[0] != yte.shape[0]:
            raise ValueError(f"clients[{i}]: X and y have different numbers of rows")
        n_features = Xtr.shape[1] if n_features is None else n_features
        if Xtr.shape[1] != n_features or (Xte.size and Xte.shape[1] != n_features):
            raise ValueError(f"clients[{i}]: has {Xtr.shape[1]} features, client 0 has "
                             f"{n_features}")
        n_classes = max(n_classes, int(ytr.max(initial=-1)) + 1, int(yte.max(initial=-1)) + 1)
        out.append((Xtr, ytr, Xte.reshape(-1, n_features), yte))
    n_classes = max(n_classes, int(getattr(data, "n_classes", 0) or 0))
    if n_classes < 2:
        raise ValueError("clients: need at least 2 classes among the labels, got 1 class")
    if public is not None:
        public = as_float_array(public, "public", ndim=2)
        if public.shape[1] != n_features:
            raise ValueError(f"public: has {public.shape[1]} features, clients have "
                             f"{n_features}")
    return out, n_features, n_classes, public


def _labels(y, name):
    y = np.asarray(y)
    if y.ndim != 1:
        raise ValueError(f"{name}: expected a 1-D array of class labels, got shape {y.shape}")
    if y.size and (y.dtype.kind not in "iuf" or np.any(y != np.round(y)) or y.min() < 0):
        raise ValueError(f"{name}: Unknown label type: class labels must be integers "
                         "0..C-1")
    return y.astype(np.int64)


def to_device(entries, device, public=None, archs=None):
    pub = None if public is None else torch.as_tensor(public, dtype=DTYPE, device=device)
    out = []
    for i, (Xtr, ytr, Xte, yte) in enumerate(entries):
        out.append(ClientTensors(
            client_id=i,
            X_train=torch.as_tensor(Xtr, dtype=DTYPE, device=device),
            y_train=torch.as_tensor(ytr, dtype=torch.long, device=device),
            X_test=torch.as_tensor(Xte, dtype=DTYPE, device=device),
            y_test=torch.as_tensor(yte, dtype=torch.long, device=device),
            public=pub,
            arch=0 if archs is None else int(archs[i]),
        ))
    return out


# ----------------------------------------------------------------------------- accounting


def numbers_sent(history) -> dict:
    """Numbers (array entries) sent per round, from a run's message accounting.

    Every message of these trainers holds only 4-byte arrays (float32 / int32), so a round's
    count of numbers is its bytes / 4.

    Returns
    -------
    dict
        ``up``, ``down``, ``total``: int arrays with one entry per round; ``total_up``,
        ``total_down``, ``grand_total``: ints.
    """
    up = history.column("bytes_up") // 4
    down = history.column("bytes_down") // 4
    return {"up": up, "down": down, "total": up + down, "total_up": int(up.sum()),
            "total_down": int(down.sum()), "grand_total": int(up.sum() + down.sum())}


# ----------------------------------------------------------------------------- base class


def client_graph(graph, n_clients: int, name: str) -> Graph:
    """The clients' graph: ``graph`` checked (a :class:`~convexfl.graphs.Graph` on
    ``n_clients`` nodes; ``name`` is the argument's), or by default the complete graph
    with weights 1 (no edges for one client)."""
    if graph is None:
        if n_clients > 1:
            return complete(n_clients)
        return Graph(1, np.zeros((0, 2), dtype=np.int64), np.zeros(0))
    if not isinstance(graph, Graph):
        raise TypeError(f"{name}: expected a convexfl.graphs.Graph, got {type(graph).__name__}")
    if graph.n_nodes != n_clients:
        raise ValueError(f"{name}: has {graph.n_nodes} nodes, there are {n_clients} clients")
    return graph


def classifier_template(model, n_features: int, n_classes: int) -> torch.nn.Module:
    """The template of ``model``: a spec (:func:`~convexfl.torch.models.build_classifier`)
    or a module mapping ``(B, p)`` to logits."""
    if isinstance(model, torch.nn.Module):
        return as_template(model)
    return as_template(lambda: build_classifier(model, n_features, n_classes))


class TorchFederatedTrainer(BaseEstimator):
    """Common ``fit`` / ``score`` plumbing (scikit-learn manners: ``__init__`` only stores its
    arguments, ``get_params`` / ``clone`` work, fitted attributes end in ``_``)."""

    name = "trainer"

    def _store(self, arguments: dict):
        """The body of every ``__init__``: store each of its arguments as it is
        (``arguments`` is its ``locals()``)."""
        for key in self._get_param_names():
            setattr(self, key, arguments[key])

    def fit(self, clients, y=None, groups=None):
        """Train on federated data (a sequence of client splits, or ``X, y, groups``)."""
        return self._fit(clients, y, groups)

    def _set_template(self, template):
        self._template = template
        self.n_parameters_ = n_parameters(template)

    def _common_checks(self):
        self.rounds_ = as_int(self.rounds, "rounds", low=1)
        self.local_steps_ = as_int(self.local_steps, "local_steps", low=1)
        self.lr_ = as_scalar(self.lr, "lr", low=0.0, low_inclusive=False)
        if self.batch_size is not None:
            as_int(self.batch_size, "batch_size", low=1)
        p = self.participation
        if isinstance(p, bool) or not isinstance(p, numbers.Real):
            raise TypeError(f"participation: expected a fraction or a count, got {p!r}")
        self.device_ = resolve_device(self.device)

    def _fit(self, data, y=None, groups=None, *, public=None):
        self._common_checks()
        if y is not None:  # X, y[, groups]: scikit-learn's checks and messages
            data, y = validate_estimator_data(self, data, y, dtype=np.float64)
        self.groups_ = None if y is None else np.unique(
            np.zeros(len(y), int) if groups is None else np.asarray(groups))
        entries, n_features, n_classes, pub = prepare_clients(data, y, groups)
        self.n_features_in_ = n_features
        if public is not None:
            pub = _check_public(public, n_features)
        self.n_clients_ = len(entries)
        self.n_features_ = n_features
        self.n_classes_ = n_classes
        self.n_train_ = np.array([e[0].shape[0] for e in entries])
        self.entropy_ = root_entropy(self.random_state)
        self._prepare(entries, pub)
        clients = to_device(entries, self.device_, self._public_array(pub),
                            getattr(self, "client_archs_", None))
        self._clients = clients
        algorithm = self._algorithm(clients)
        result = run_federated(algorithm, clients, rounds=self.rounds_,
                               participation=self.participation, random_state=self.entropy_,
                               progress=bool(self.progress))
        failures = result.history.failures()
        if failures:
            t, cid, reason = failures[0]
            raise RuntimeError(f"{self.name}: client {cid} failed in round {t}: {reason} "
                               f"({len(failures)} failure(s) in all)")
        self.result_ = result
        self.history_ = result.history
        self.communication_ = numbers_sent(result.history)
        self._finish(result)
        self.train_accuracy_ = self.client_accuracy(which="train")
        self.test_accuracy_ = self.client_accuracy(which="test")
        self.initial_test_accuracy_ = result.history.initial_metrics.get(
            "mean_test_accuracy", float("nan"))
        return self

    # hooks -------------------------------------------------------------------------
    def _prepare(self, entries, public):  # pragma: no cover - overridden when needed
        pass

    def _public_array(self, public):
        return None

    def _finish(self, result):
        pass

    def _logits(self, client_id, X):  # pragma: no cover - abstract
        raise NotImplementedError

    # evaluation ----------------------------------------------------------------------
    def _check_fitted(self):
        check_is_fitted(self, "result_")

    def predict_logits(self, X, client=None, *, groups=None) -> np.ndarray:
        """Personalised logits on rows ``X`` (numpy, float32): of client ``client`` (an
        index ``0..n_clients_−1``), or row by row of the client named by ``groups`` (the
        labels given to ``fit``); with neither, the only client."""
        self._check_fitted()
        X = self._check_rows(X)
        rows = self._clients_of(X.shape[0], client, groups)
        out = np.zeros((X.shape[0], self.n_classes_), np.float32)
        with torch.no_grad():
            for c in np.unique(rows):
                Xt = torch.as_tensor(X[rows == c], dtype=DTYPE, device=self.device_)
                out[rows == c] = self._logits(int(c), Xt).detach().cpu().numpy()
        return out

    def _clients_of(self, n_rows, client, groups):
        if client is not None and groups is not None:
            raise ValueError("client, groups: give one of them")
        if groups is not None:
            if self.groups_ is None:
                raise ValueError("groups: the model was fitted on client splits; pass client=")
            return users_of(groups, self.groups_, n_rows)
        if client is None:
            if self.n_clients_ != 1:
                raise ValueError(f"client: the model has {self.n_clients_} clients; say "
                                 "which (client=i or groups=...)")
            client = 0
        client = as_int(client, "client", low=0, high=self.n_clients_ - 1)
        return np.full(n_rows, client)

    def _check_rows(self, X) -> np.ndarray:
        """``X`` as finite float rows with the features seen in fit (scikit-learn's
        checks and messages)."""
        return validate_estimator_data(self, X, dtype=np.float64, reset=False)

    def predict(self, X, client=None, *, groups=None) -> np.ndarray:
        """Predicted classes of the personalised models (see :meth:`predict_logits`)."""
        return self.predict_logits(X, client, groups=groups).argmax(axis=1)

    def client_accuracy(self, data=None, which: str = "test") -> np.ndarray:
        """Accuracy of every client's personalised model on its own train or test data."""
        self._check_fitted()
        if which not in ("train", "test"):
            raise ValueError(f"which: must be 'train' or 'test', got {which!r}")
        if data is None:
            clients = self._clients
            pairs = [(getattr(c, f"X_{which}"), getattr(c, f"y_{which}")) for c in clients]
        else:
            entries, *_ = prepare_clients(data)
            if len(entries) != self.n_clients_:
                raise ValueError(f"data: has {len(entries)} clients, the model {self.n_clients_}")
            col = (0, 1) if which == "train" else (2, 3)
            pairs = [(torch.as_tensor(e[col[0]], dtype=DTYPE, device=self.device_),
                      torch.as_tensor(e[col[1]], dtype=torch.long, device=self.device_))
                     for e in entries]
        with torch.no_grad():
            return np.array([accuracy_of(self._logits(i, X), y) if len(y) else np.nan
                             for i, (X, y) in enumerate(pairs)])

    def score(self, X=None, y=None, groups=None) -> float:
        """Accuracy of :meth:`predict` on ``X, y`` (rows of the clients named by ``groups``;
        without ``y``: ``X`` is federated data or None, and the score is the mean over
        clients with test data of their personalised test accuracy)."""
        if y is not None:
            return float(np.mean(self.predict(X, groups=groups) == np.asarray(y)))
        acc = self.client_accuracy(X, which="test")
        acc = acc[np.isfinite(acc)]
        return float(acc.mean()) if acc.size else float("nan")


def _check_public(public, n_features):
    from .._validation import as_float_array

    pub = as_float_array(public, "public", ndim=2)
    if pub.shape[1] != n_features:
        raise ValueError(f"public: has {pub.shape[1]} features, clients have {n_features}")
    return pub


def mean_accuracy_metrics(clients, logits_fn) -> dict:
    """``mean_test_accuracy`` and ``mean_train_accuracy`` over clients (runtime metrics)."""
    with torch.no_grad():
        te = [accuracy_of(logits_fn(c, c.X_test), c.y_test) for c in clients if len(c.y_test)]
        tr = [accuracy_of(logits_fn(c, c.X_train), c.y_train) for c in clients]
    return {"mean_test_accuracy": float(np.mean(te)) if te else float("nan"),
            "mean_train_accuracy": float(np.mean(tr))}
