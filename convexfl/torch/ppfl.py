r"""PPFL with deep canonical models (Di, Yang, Ye, Chang; ``docs/math.md`` §2).

.. math::

    \min_{\Theta,\omega,\pi}\ \sum_i p_i f_i(\Theta, \omega, \pi_i)
    + \frac{\lambda}{2}\sum_{i,j} a_{ij}\|\pi_i - \pi_j\|^2
    \quad\text{s.t.}\ \pi_i \in \Delta_K,

with :math:`f_i` the client's mean cross-entropy of :class:`~convexfl.torch.models.PPFLNet`
(Fig. 2a output mixture or Fig. 2b parameter mixture), :math:`p_i = m_i/\sum m` and
:math:`a_{ij}` the weights of an affinity graph (an edge list; the sum is over ordered pairs,
so it equals :math:`2\sum_{(i,j)\in E} a_{ij}\|\pi_i-\pi_j\|^2`).

Schedules
---------
``"rbcd"`` (paper Algorithm 1): each round the server picks the model block (Θ, ω) with
probability ``block_prob``, else the membership block.
Model block: the participants run ``local_steps`` SGD steps from (Θ, ω) with their π_i
fixed and reply with the change; the server subtracts the ``p``-weighted average change
(eq. (19), FedAvg-like). Membership block: each participant replies with a mini-batch
gradient :math:`g_i = \nabla_{\pi_i} f_i`; the server takes one entropic mirror step per
participant with the *true* Laplacian gradient (from the edge list),

.. math::

    \pi_i \leftarrow \pi_i\odot\exp\big(-\eta_\pi\,[g_i + 2\lambda (L\Pi)_i / p_i]\big)/Z,

then the floor of Remark 2, :math:`(\pi + \varepsilon)/(1 + K\varepsilon)` — both by
:func:`convexfl.ppfl.mirror_step`, in the scaling of :mod:`convexfl.ppfl` (the objective's
gradient in :math:`\pi_i` divided by :math:`p_i`, so that :math:`\eta_\pi` does not depend on
N). The MM surrogate (20) has the same gradient at the current point, so one mirror step on
it is this step.

``"alternating"`` (Algorithm 3): every round the server sends :math:`2\lambda(L\Pi)_i/p_i`
with the model; the client takes the mirror step on its full-data gradient, then runs the local
model steps with the new π_i, and replies with both.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from .._validation import as_int, as_scalar
from ..federated import Algorithm
from ..ppfl import mirror_step
from ._core import (
    BatchSampler,
    SharedParameters,
    TorchFederatedTrainer,
    as_template,
    client_graph,
    cross_entropy_loss,
    forward,
    init_parameters,
    local_sgd,
    mean_accuracy_metrics,
    to_message,
    to_tensors,
    torch_generator,
    vec32,
)
from ._maths import laplacian_gradient, laplacian_penalty
from .models import PPFLNet, build_classifier, build_features

__all__ = ["PPFLDNN"]

_MODEL, _PI = 0, 1


class PPFLDNN(TorchFederatedTrainer):
    r"""PPFL with deep canonical models, trained by RBCD or the alternating schedule.

    Parameters
    ----------
    n_canonical : int, default 3
        ``K``, the number of canonical models.
    architecture : {"output", "parameter"}, default "output"
        Fig. 2a (output mixture) or Fig. 2b (parameter mixture); see
        :class:`~convexfl.torch.models.PPFLNet`.
    canonical_position : {"head", "body"}, default "head"
        ``"head"``: ω is a shared body (feature extractor) and the canonical models are
        heads; ``"body"``: the canonical models are feature extractors and ω the shared head
        (the paper's illustration).
    shared, canonical : str, optional
        Model specs (:mod:`convexfl.torch.models`). Defaults: ``shared="mlp:32"``,
        ``canonical="linear"`` for heads; ``canonical="mlp:32"``, ``shared="linear"`` for
        bodies. A head spec is a classifier of the features; a body spec a feature extractor.
    schedule : {"rbcd", "alternating"}, default "rbcd"
    lam : float, default 0.01
        λ of the Laplacian term (convention above).
    affinity : convexfl.graphs.Graph, optional
        :math:`a_{ij}` as an edge list; default the complete graph with weights 1.
    block_prob : float in (0, 1), default 0.5
        RBCD: probability of the model block.
    lr : float
        Client SGD step for (Θ, ω).
    lr_pi : float, default 1.0
        Mirror step :math:`\eta_\pi` on :math:`g_i + 2\lambda(L\Pi)_i/p_i` (see above); keep
        :math:`2\eta_\pi\lambda\max_i d_i/p_i \lesssim 1`.
    pi_floor : float, default 1e-3
        ε of Remark 2.
    pi_init : {"random", "uniform"}, default "random"
        Initial memberships: Dirichlet(1) draws (floored), or ``1/K`` each. With uniform
        memberships every canonical model receives the same gradient signal at the start,
        and the symmetry between them is broken only by their initial parameters (slow, in
        particular for the output mixture).
    rounds, local_steps, batch_size, participation, device, random_state, progress
        As in :class:`~convexfl.torch.FedAvgDNN`.

    Attributes
    ----------
    params_ : dict of numpy arrays
        Θ and ω (names of :class:`PPFLNet`: ``shared.*``, ``canonical.<k>.*``).
    memberships_ : ndarray (N, K)
        Final π; every row is on the simplex.
    blocks_ : ndarray of int (rounds,)
        RBCD: the block updated in each round (0 model, 1 membership); alternating: all 0.
    history_ : convexfl.federated.History
        Metrics per round: ``mean_test_accuracy``, ``mean_train_accuracy``, ``penalty``
        (the Laplacian term without λ), ``pi_change`` (max-norm mirror-step distance).
    communication_ : dict
        Numbers sent per round (:func:`convexfl.torch.numbers_sent`).
    test_accuracy_, train_accuracy_ : ndarray (N,)
    initial_test_accuracy_ : float
    """

    name = "ppfl_dnn"

    def __init__(self, n_canonical=3, *, architecture="output", canonical_position="head",
                 shared=None, canonical=None, schedule="rbcd", lam=0.01, affinity=None,
                 block_prob=0.5, rounds=20, local_steps=10, lr=0.1, lr_pi=1.0, pi_floor=1e-3,
                 pi_init="random", batch_size=32, participation=1.0, device="cpu",
                 random_state=None, progress=False):
        self._store(locals())

    # ------------------------------------------------------------------ set-up
    def _prepare(self, entries, public):
        K = as_int(self.n_canonical, "n_canonical", low=1)
        if self.schedule not in ("rbcd", "alternating"):
            raise ValueError(f"schedule: must be 'rbcd' or 'alternating', got {self.schedule!r}")
        if self.pi_init not in ("uniform", "random"):
            raise ValueError(f"pi_init: must be 'uniform' or 'random', got {self.pi_init!r}")
        self.lam_ = as_scalar(self.lam, "lam", low=0.0)
        self.lr_pi_ = as_scalar(self.lr_pi, "lr_pi", low=0.0, low_inclusive=False)
        self.pi_floor_ = as_scalar(self.pi_floor, "pi_floor", low=0.0)
        self.block_prob_ = as_scalar(self.block_prob, "block_prob", low=0.0,
                                     low_inclusive=False, high=1.0)
        self.affinity_ = client_graph(self.affinity, self.n_clients_, "affinity")
        pos = self.canonical_position
        if pos not in ("head", "body"):
            raise ValueError(f"canonical_position: must be 'head' or 'body', got {pos!r}")
        p, C = self.n_features_, self.n_classes_

        def build():
            if pos == "head":
                shared, width = build_features(self.shared or "mlp:32", p)
                canonical = build_classifier(self.canonical or "linear", width, C)
            else:
                canonical, width = build_features(self.canonical or "mlp:32", p)
                shared = build_classifier(self.shared or "linear", width, C)
            return PPFLNet(shared, canonical, K, architecture=self.architecture,
                           canonical_position=pos)

        self._set_template(as_template(build))
        self._weights = self.n_train_ / self.n_train_.sum()

    # ------------------------------------------------------------------ algorithm
    def _algorithm(self, clients):
        template, device = self._template, self.device_
        K, N = self._template.n_canonical, self.n_clients_
        lam, lr, lr_pi, floor = self.lam_, self.lr_, self.lr_pi_, self.pi_floor_
        steps, bs, prob = self.local_steps_, self.batch_size, self.block_prob_
        alternating = self.schedule == "alternating"
        edges, aw = self.affinity_.edges, self.affinity_.weights
        p = self._weights
        shared = SharedParameters(device, dict(enumerate(p)))

        def pi_gradient(data, params, pi_np, idx):
            pi = torch.as_tensor(pi_np, dtype=torch.float32, device=device).requires_grad_(True)
            loss = cross_entropy_loss(template, data, pi)(params, idx)
            (g,) = torch.autograd.grad(loss, [pi])
            return g.detach().cpu().numpy().astype(np.float64)

        def server_init(rng):
            params = to_message(init_parameters(template, torch_generator(rng), "cpu"), "")
            if self.pi_init == "uniform":
                Pi = np.full((N, K), 1.0 / K)
            else:
                Pi = mirror_step(rng.dirichlet(np.ones(K), size=N), np.zeros((N, K)), 1.0,
                                 floor=floor)
            block = _MODEL if alternating else _draw_block(rng, prob)
            return {"params": params, "pi": Pi, "block": block, "last_block": -1,
                    "pi_change": 0.0}

        def server_payload(state, cid, t):
            msg = shared.payload(state["params"])
            msg["pi"] = vec32(state["pi"][cid])
            msg["block"] = np.array([state["block"]], dtype=np.int32)
            if alternating:
                lap = 2.0 * lam * laplacian_gradient(state["pi"], edges, aw)[cid] / p[cid]
                msg["lap"] = vec32(lap)
            return msg

        def client_update(data, state, payload, rng):
            params = shared.received(payload)
            pi_np = np.asarray(payload["pi"], dtype=np.float64)
            reply = {}
            if alternating:
                g = pi_gradient(data, params, pi_np, None)  # full gradient, eq. (25)
                grad = g + np.asarray(payload["lap"], np.float64)
                pi_np = mirror_step(pi_np, grad, lr_pi, floor=floor)
                reply["pi"] = vec32(pi_np)
            elif int(payload["block"][0]) == _PI:
                batch = BatchSampler(rng, data.n_train, bs, device)()
                return state, {"g_pi": vec32(pi_gradient(data, params, pi_np, batch))}
            pi = torch.as_tensor(pi_np, dtype=torch.float32, device=device)
            new = local_sgd(params, cross_entropy_loss(template, data, pi), data, rng,
                            steps=steps, lr=lr, batch_size=bs, device=device)
            return state, reply | shared.reply(params, new)

        def server_update(state, replies, t, rng):
            state = dict(state)
            Pi = state["pi"].copy()
            block = state["block"]
            if replies and (alternating or block == _MODEL):
                state["params"] = shared.step(state["params"], replies)
            if replies and alternating:
                for i, r in replies.items():
                    row = np.asarray(r["pi"], dtype=np.float64)
                    Pi[i] = row / row.sum()
            elif replies and block == _PI:
                rows = np.array(sorted(replies))
                G = np.array([np.asarray(replies[i]["g_pi"], np.float64) for i in rows])
                lap = laplacian_gradient(Pi, edges, aw)[rows] / p[rows, None]
                Pi[rows] = mirror_step(Pi[rows], G + 2.0 * lam * lap, lr_pi, floor=floor)
            state["pi_change"] = float(np.abs(Pi - state["pi"]).max())
            state["pi"] = Pi
            state["last_block"] = block
            state["block"] = _MODEL if alternating else _draw_block(rng, prob)
            return state

        def metrics(state, client_states):
            params = to_tensors(state["params"], device)
            Pi = torch.as_tensor(state["pi"], dtype=torch.float32, device=device)
            out = mean_accuracy_metrics(
                clients, lambda c, X: forward(template, params, X, Pi[c.client_id]))
            out["penalty"] = laplacian_penalty(state["pi"], edges, aw)
            out["pi_change"] = state["pi_change"]
            out["block"] = state["last_block"]
            return out

        return Algorithm(server_init=server_init, client_init=lambda d, rng: {},
                         server_payload=server_payload, client_update=client_update,
                         server_update=server_update, metrics=metrics, name=self.name)

    def _finish(self, result):
        state = result.server_state
        self.params_ = state["params"]
        self.memberships_ = state["pi"].copy()
        self.blocks_ = result.history.column("block").astype(np.int64)
        self._params_dev = to_tensors(self.params_, self.device_)
        self._pi_dev = torch.as_tensor(self.memberships_, dtype=torch.float32,
                                       device=self.device_)

    def _logits(self, client_id, X):
        return forward(self._template, self._params_dev, X, self._pi_dev[client_id])

    def objective(self) -> float:
        r"""The PPFL objective at the fitted point (training data, full batch)."""
        self._check_fitted()
        with torch.no_grad():
            f = [float(F.cross_entropy(self._logits(c.client_id, c.X_train), c.y_train))
                 for c in self._clients]
        return float(np.dot(self._weights, f) + 0.5 * self.lam_ * laplacian_penalty(
            self.memberships_, self.affinity_.edges, self.affinity_.weights))


def _draw_block(rng, prob):
    return _MODEL if rng.random() < prob else _PI
