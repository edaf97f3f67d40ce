r"""CGPFL with deep models (clustered generalisation; ``docs/math.md`` §4).

.. math::

    \min_\Theta \frac1N\sum_i \Big[f_i(\theta_i) + \frac\lambda2\|\theta_i-\omega_{k(i)}\|^2\Big]
    \ \text{s.t.}\ (\Omega^*, C^*) \in \arg\min_{\Omega, C}\sum_k\sum_{j\in C_k}
    \|\theta_j-\omega_k\|^2 .

Algorithm 1, per round: the server sends each participant the generalised model
:math:`\omega_{k(i)}` of its cluster. The client runs R = ``local_steps`` local rounds, each
made of S = ``inner_steps`` SGD steps on the Moreau-envelope subproblem
:math:`f_i(\theta) + (\lambda/2)\|\theta-\omega\|^2` (its personalised model θ_i is kept
between rounds) followed by :math:`\omega \leftarrow \omega - \beta\lambda(\omega-\theta_i)`,
and replies with ω. The server clusters the uploaded ω's with k-means++
(:func:`convexfl._kmeans.kmeans`), matches the new clusters to the current generalised models
(Hungarian matching, ``convexfl.cgpfl._align``, so that cluster k keeps its identity), and
updates
:math:`\omega_k \leftarrow (1-\alpha)\omega_k + \alpha\,\mathrm{mean}_{i\in C_k}\omega_i`
(:math:`\Omega \leftarrow \Omega - \alpha(\Omega - \Omega_I P)`). ``n_clusters=1`` is pFedMe.

All K generalised models start from one common initialisation (with distinct random
initialisations the first clustering would follow the initialisations, not the data);
clients start in random clusters.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from .._validation import as_int, as_scalar
from ..cgpfl import _align
from ..federated import Algorithm
from ._core import (
    TorchFederatedTrainer,
    classifier_template,
    cross_entropy_loss,
    forward,
    from_message,
    init_parameters,
    local_sgd,
    mean_accuracy_metrics,
    seed_int,
    to_message,
    torch_generator,
    with_prefix,
)
from ._maths import kmeans

__all__ = ["CGPFLDNN"]


class CGPFLDNN(TorchFederatedTrainer):
    r"""CGPFL Algorithm 1 with deep personalised models and K generalised models.

    Parameters
    ----------
    model : str or torch.nn.Module, default "mlp:32"
    n_clusters : int, default 2
        K generalised models (1 gives pFedMe).
    lam : float, default 15.0
        λ of the proximal coupling (pFedMe's default scale).
    inner_steps : int, default 5
        S, SGD steps on the personalised subproblem per local round.
    local_steps : int, default 4
        R, local rounds (ω updates) per communication round.
    lr : float, default 0.05
        η, SGD step of θ (keep ηλ < 1).
    beta : float, default 0.05
        β, step of the local ω update (keep βλ ≤ 1).
    alpha : float, default 1.0
        α, server mixing of the generalised models.
    persistent_theta : bool, default True
        Keep θ_i between rounds (Θ⁰ is an input of Algorithm 1 and Θᵀ its output); with
        ``False`` θ_i restarts from the received ω every round, as in the convex
        :func:`convexfl.cgpfl.cgpfl`.
    rounds, batch_size, participation, device, random_state, progress
        As in :class:`~convexfl.torch.FedAvgDNN`.

    Attributes
    ----------
    generalized_ : list of dict of numpy arrays
        The K generalised models.
    assignments_ : ndarray of int (N,)
        Each client's cluster.
    client_params_ : list of dict of numpy arrays
        Personalised models θ_i.
    """

    name = "cgpfl_dnn"

    def __init__(self, model="mlp:32", *, n_clusters=2, lam=15.0, inner_steps=5,
                 local_steps=4, lr=0.05, beta=0.05, alpha=1.0, persistent_theta=True, rounds=20,
                 batch_size=32, participation=1.0, device="cpu", random_state=None,
                 progress=False):
        self._store(locals())

    def _prepare(self, entries, public):
        self.n_clusters_ = as_int(self.n_clusters, "n_clusters", low=1)
        self.lam_ = as_scalar(self.lam, "lam", low=0.0)
        self.inner_steps_ = as_int(self.inner_steps, "inner_steps", low=1)
        self.beta_ = as_scalar(self.beta, "beta", low=0.0)
        self.alpha_ = as_scalar(self.alpha, "alpha", low=0.0, high=1.0)
        self._set_template(classifier_template(self.model, self.n_features_,
                                               self.n_classes_))
        self._shapes = [(k, tuple(p.shape)) for k, p in self._template.named_parameters()]

    def _unflat(self, vec):
        out, start = {}, 0
        for k, shape in self._shapes:
            n = math.prod(shape)
            out[k] = np.asarray(vec[start:start + n], dtype=np.float32).reshape(shape)
            start += n
        return out

    def _algorithm(self, clients):
        template, device, shapes = self._template, self.device_, self._shapes
        K, N = self.n_clusters_, self.n_clients_
        lam, lr, beta, alpha = self.lam_, self.lr_, self.beta_, self.alpha_
        R, S, bs = self.local_steps_, self.inner_steps_, self.batch_size
        unflat, persistent = self._unflat, bool(self.persistent_theta)

        def flat_np(arrays):
            return np.concatenate([np.asarray(arrays[k], np.float64).ravel() for k, _ in shapes])

        def server_init(rng):
            w0 = flat_np(to_message(init_parameters(template, torch_generator(rng), "cpu"), ""))
            return {"omega": np.tile(w0, (K, 1)), "assign": rng.integers(0, K, size=N)}

        def server_payload(state, cid, t):
            return with_prefix(unflat(state["omega"][state["assign"][cid]]), "w.")

        def client_update(data, state, payload, rng):
            omega = from_message(payload, "w.", device)
            theta = dict(state) if (state and persistent) else dict(omega)
            ce = cross_entropy_loss(template, data)

            def moreau(anchor):
                def loss(params, idx):
                    prox = sum(((params[k] - anchor[k]) ** 2).sum() for k in params)
                    return ce(params, idx) + 0.5 * lam * prox
                return loss

            for _ in range(R):
                theta = local_sgd(theta, moreau(omega), data, rng, steps=S, lr=lr,
                                  batch_size=bs, device=device)
                omega = {k: omega[k] - beta * lam * (omega[k] - theta[k]) for k in omega}
            return theta, {"w." + k: v.cpu().numpy() for k, v in omega.items()}

        def server_update(state, replies, t, rng):
            if not replies:
                return state
            rows = np.array(sorted(replies))
            W = np.stack([flat_np({k[2:]: v for k, v in replies[i].items()}) for i in rows])
            labels, means = kmeans(W, K, seed_int(rng))
            perm = _align(state["omega"], means)
            old = perm[labels]
            omega = state["omega"].copy()
            for j, k in enumerate(perm):
                omega[k] = omega[k] - alpha * (omega[k] - means[j])
            assign = state["assign"].copy()
            assign[rows] = old
            return {"omega": omega, "assign": assign}

        def personal(state, client_states, cid):
            if client_states[cid]:
                return client_states[cid]
            return {k: torch.as_tensor(v, device=device)
                    for k, v in unflat(state["omega"][state["assign"][cid]]).items()}

        def metrics(state, client_states):
            return mean_accuracy_metrics(
                clients, lambda c, X: forward(template, personal(state, client_states,
                                                                 c.client_id), X))

        self._personal = personal
        return Algorithm(server_init=server_init, client_init=lambda d, rng: {},
                         server_payload=server_payload, client_update=client_update,
                         server_update=server_update, metrics=metrics, name=self.name)

    def _finish(self, result):
        state = result.server_state
        self.generalized_ = [self._unflat(w) for w in state["omega"]]
        self.assignments_ = state["assign"].copy()
        self._states = [self._personal(state, result.client_states, i)
                        for i in range(self.n_clients_)]
        del self._personal  # a closure: the fitted model stays picklable
        self.client_params_ = [to_message(s, "") for s in self._states]

    def _logits(self, client_id, X):
        return forward(self._template, self._states[client_id], X)
