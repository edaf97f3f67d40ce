r"""PerFed-CKT: personalised FL by clustered co-distillation (Cho, Wang, Chiruvolu, Joshi).

Client objective (1):

.. math::

    \Phi_k(w_k; \bar s_k) = F_k(w_k) + \frac{\lambda}{|P|}\sum_{x\in P}
    \|\bar s_k(x) - s(w_k, x)\|^2,

with :math:`F_k` the client's mean cross-entropy, :math:`s(w, x) = \mathrm{softmax}` of the
model's logits (the paper's "soft decisions") and :math:`P` a public unlabeled set.
Algorithm 1: the server clusters the soft decisions on :math:`P` received in the previous
round with k-means (``n_clusters`` = the paper's c) and sends the centroids to the round's
participants; each participant picks the centroid closest to its own current soft decisions
(eq. (4)) as :math:`\bar s_k`, runs τ = ``local_steps`` SGD steps (2) on mini-batches of size
``batch_size`` (private) and ``public_batch_size`` (public), and replies with its new soft
decisions on all of :math:`P`. In the first round there are no centroids yet and the
clients train locally. Clients may use different architectures; models never leave them.

Communication (the paper's accounting, numbers of parameters per round): uplink
:math:`m|P|N` (soft decisions of the m participants), downlink :math:`m\,c\,|P|N` (the centroids
to each participant), versus :math:`2\sum_{k\in S_t} n_k` for parameter-sharing methods
(:attr:`PerFedCKT.communication_`).

Participation: the runtime samples participants uniformly without replacement; the paper
samples them with probability :math:`p_k` (not offered by the runtime).
"""

from __future__ import annotations

import numpy as np
import torch

from .._validation import as_int, as_scalar
from ..federated import Algorithm
from ._core import (
    BatchSampler,
    TorchFederatedTrainer,
    as_template,
    cross_entropy_loss,
    forward,
    init_parameters,
    mean_accuracy_metrics,
    seed_int,
    sgd,
    take,
    to_message,
    torch_generator,
)
from ._maths import kmeans
from .models import build_classifier, n_parameters

__all__ = ["PerFedCKT"]


class PerFedCKT(TorchFederatedTrainer):
    r"""PerFed-CKT with deep, possibly heterogeneous client models.

    Parameters
    ----------
    architectures : str or sequence of str, default ("mlp:32", "mlp:64-32", "cnn:8")
        Model specs (:mod:`convexfl.torch.models`). A single spec is used by every client;
        a sequence of length N gives client ``i`` the spec ``architectures[i]``; any other
        sequence is cycled over the clients.
    n_clusters : int, default 2
        c, the number of k-means clusters of soft decisions (clipped to the number of
        replies).
    lam : float, default 1.0
        λ of objective (1).
    public_batch_size : int or None, default 64
        b', public mini-batch size (``None``: all of P).
    rounds, local_steps, lr, batch_size, participation, device, random_state, progress
        As in :class:`~convexfl.torch.FedAvgDNN` (``local_steps`` is τ).

    Attributes
    ----------
    client_archs_ : ndarray of int (N,)
        Index into ``architectures_`` of each client's model.
    architectures_ : tuple of str
    n_parameters_ : ndarray of int (N,)
        Parameters of each client's model.
    client_params_ : list of dict of numpy arrays
    cluster_labels_ : ndarray of int (N,)
        The cluster of each client's last reply (-1 if it never replied).
    centroids_ : ndarray (c, |P|, N_classes)
        The last centroids.
    communication_ : dict
        ``numbers_sent`` per round plus ``parameter_sharing_equivalent`` (per round, what
        sending the participants' models both ways would cost) and ``formula`` (the
        analytic count :math:`m|P|N + m c |P| N` per round).
    """

    name = "perfed_ckt"

    def __init__(self, architectures=("mlp:32", "mlp:64-32", "cnn:8"), *, n_clusters=2,
                 lam=1.0, rounds=20, local_steps=10, lr=0.1, batch_size=32,
                 public_batch_size=64, participation=1.0, device="cpu", random_state=None,
                 progress=False):
        self._store(locals())

    def fit(self, clients, y=None, groups=None, *, public=None):
        """Train; ``public`` (unlabeled inputs) defaults to ``clients.public``."""
        return self._fit(clients, y, groups, public=public)

    def _prepare(self, entries, public):
        if public is None or len(public) == 0:
            raise ValueError("public: PerFed-CKT needs a public unlabeled set; pass "
                             "fit(..., public=X_public) or data with a .public attribute "
                             "(e.g. convexfl.torch.digits_federation)")
        self.n_clusters_ = as_int(self.n_clusters, "n_clusters", low=1)
        self.lam_ = as_scalar(self.lam, "lam", low=0.0)
        if self.public_batch_size is not None:
            as_int(self.public_batch_size, "public_batch_size", low=1)
        archs = self.architectures
        archs = (archs,) if isinstance(archs, str) else tuple(archs)
        if not archs:
            raise ValueError("architectures: is empty")
        N = self.n_clients_
        self.architectures_ = archs
        self.client_archs_ = np.arange(N) % len(archs)
        self._templates = [as_template(lambda a=a: build_classifier(a, self.n_features_,
                                                                    self.n_classes_))
                           for a in archs]
        self.n_parameters_ = np.array([n_parameters(self._templates[a])
                                       for a in self.client_archs_])
        self.public_ = public

    def _public_array(self, public):
        return public

    def _algorithm(self, clients):
        templates, device = self._templates, self.device_
        lam, lr, steps, bs, pbs = (self.lam_, self.lr_, self.local_steps_, self.batch_size,
                                   self.public_batch_size)
        c_max, N = self.n_clusters_, self.n_clients_
        n_pub, n_cls = self.public_.shape[0], self.n_classes_

        def soft(tmpl, params, X):
            return torch.softmax(forward(tmpl, params, X), dim=1)

        def client_init(data, rng):
            return init_parameters(templates[data.arch], torch_generator(rng), device)

        def server_init(rng):
            return {"centroids": np.zeros((0, n_pub, n_cls), dtype=np.float32),
                    "labels": np.full(N, -1, dtype=np.int64)}

        def server_payload(state, cid, t):
            return {"centroids": state["centroids"]}

        def client_update(data, state, payload, rng):
            tmpl, P = templates[data.arch], data.public
            cents = torch.as_tensor(payload["centroids"], device=device)
            target = None
            if cents.shape[0] > 0 and lam > 0:
                with torch.no_grad():
                    s_now = soft(tmpl, state, P)
                    dist = ((cents - s_now[None]) ** 2).sum(dim=(1, 2))
                    target = cents[int(torch.argmin(dist))]  # eq. (4)
            priv = BatchSampler(rng, data.n_train, bs, device)
            pub = BatchSampler(rng, P.shape[0], pbs, device)

            ce = cross_entropy_loss(tmpl, data)

            def loss(params, idx):
                i, j = idx
                out = ce(params, i)
                if target is not None:
                    diff = take(target, j) - soft(tmpl, params, take(P, j))
                    out = out + lam * (diff * diff).sum(dim=1).mean()
                return out

            new = sgd(state, loss, steps=steps, lr=lr, sampler=lambda: (priv(), pub()))
            with torch.no_grad():
                s_new = soft(tmpl, new, P)
            return new, {"s": s_new.cpu().numpy().astype(np.float32)}

        def server_update(state, replies, t, rng):
            if not replies:
                return state
            rows = sorted(replies)
            S = np.stack([replies[i]["s"].astype(np.float64).reshape(-1) for i in rows])
            labels, centres = kmeans(S, c_max, seed_int(rng))  # centres = cluster means
            lab = state["labels"].copy()
            lab[rows] = labels
            return {"centroids": centres.reshape(-1, n_pub, n_cls).astype(np.float32),
                    "labels": lab}

        def metrics(state, client_states):
            out = mean_accuracy_metrics(
                clients, lambda c, X: forward(templates[c.arch], client_states[c.client_id], X))
            out["n_centroids"] = int(state["centroids"].shape[0])
            return out

        return Algorithm(server_init=server_init, client_init=client_init,
                         server_payload=server_payload, client_update=client_update,
                         server_update=server_update, metrics=metrics, name=self.name)

    def _finish(self, result):
        self._states = result.client_states
        self.client_params_ = [to_message(s, "") for s in self._states]
        self.cluster_labels_ = result.server_state["labels"].copy()
        self.centroids_ = result.server_state["centroids"].copy()
        n_pub, n_cls = self.public_.shape[0], self.n_classes_
        formula, sharing = [], []
        sent = int(result.history.initial_metrics.get("n_centroids", 0))
        for r in result.history:
            # round t's payloads carry the centroids built from round t-1's replies
            formula.append((len(r.received) + len(r.participants) * sent) * n_pub * n_cls)
            sharing.append(int(2 * self.n_parameters_[list(r.participants)].sum()))
            sent = int(r.metrics["n_centroids"])
        self.communication_["parameter_sharing_equivalent"] = np.array(sharing)
        self.communication_["formula"] = np.array(formula)

    def _logits(self, client_id, X):
        return forward(self._templates[self.client_archs_[client_id]], self._states[client_id],
                       X)
