r"""Sum-of-norms personalised heads: the deep analogue of convex clustering.

Every client has the shared body ω (a feature extractor) and its own last layer
:math:`h_i` (weights and bias, flattened). The objective, in the canonical (SON) λ
convention of ``docs/math.md`` §1.1, is

.. math::

    \min_{\omega, h}\ \sum_i f_i(\omega, h_i) + \lambda \sum_{(i,j)\in E} w_{ij}\|h_i - h_j\|,

with :math:`f_i` the client's mean cross-entropy. It is trained by network-lasso ADMM
(Hallac et al. 2015; §1.5) on the heads, with FedAvg on the body:

1. the server sends ω and, for client i, the anchor :math:`v_i = \mathrm{mean}_{j\sim i}
   (z_{ij} - u_{ij})` and the coefficient :math:`\rho\,|N(i)|`;
2. the client runs ``local_steps`` SGD steps on
   :math:`f_i(\omega, h) + (\rho|N(i)|/2)\|h - v_i\|^2` (= the ADMM x-update
   :math:`f_i + (\rho/2)\sum_j\|h - z_{ij} + u_{ij}\|^2` up to a constant) in ω and h, and
   replies with its body change and its head;
3. the server averages the body changes (weights :math:`m_i`), and for every edge applies
   the prox of :math:`\lambda w_{ij}\|z_{ij}-z_{ji}\|` — block soft-thresholding of
   :math:`(h_i+u_{ij}) - (h_j+u_{ji})` at :math:`2\lambda w_{ij}/\rho` — then the dual step.

A thresholded difference is exactly zero, so on a *fused* edge :math:`z_{ij} = z_{ji}`
bitwise. The fused clusters are the connected components of the fused edges (as in
:mod:`convexfl.clusters`, with "distance 0 between the edge variables" as the criterion, the
way the convex ADMM solver reads its clusters), and each client's deployed head
(``fused_heads_``, used by ``predict``) is the mean of its cluster's heads: clients of one
cluster end with identical heads, exactly. The clients' own iterates ``heads_`` agree inside
a cluster only to the accuracy of the ADMM primal residual. Without fusion (λ = 0) every
client keeps its own head. Memory is O(E d) on the server (edge lists, never N×N).

The body's features are L2-normalised (``feature_scale``) before the head: with a ReLU
body, :math:`(c\,\phi, h/c)` give the same predictions for every c > 0, so without the
normalisation training could shrink the penalty at no cost by growing the body, and λ
would not select clusters.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from .._validation import as_scalar, check_partition
from ..federated import Algorithm
from ._core import (
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
from ._maths import network_lasso_edge_update
from .models import build_classifier

__all__ = ["SONHeads"]


class SONHeads(TorchFederatedTrainer):
    r"""Personalised heads coupled by the sum-of-norms penalty, trained by ADMM.

    Parameters
    ----------
    body : str, default "mlp:32"
        Feature-extractor spec of the shared body (:mod:`convexfl.torch.models`); the head
        is a linear layer on its features.
    lam : float, default 0.04
        λ in the canonical (SON) convention (no 1/N, each unordered pair once).
    graph : convexfl.graphs.Graph, optional
        Edges and weights :math:`w_{ij}`; default the complete graph with weights 1.
    rho : float, default 0.1
        ADMM penalty ρ (keep ``lr · ρ · max degree`` well below 1: the local steps are
        gradient steps on a term with curvature ρ·|N(i)|).
    head_init : {"random", "common"}, default "random"
        Heads start from independent random draws (edges unfused) or from one common draw
        (every edge fused at the start).
    feature_scale : float or None, default 4.0
        The body's features are scaled to this norm before the head
        (:class:`~convexfl.torch.models.L2Normalize`). Without it, a ReLU body can grow by c
        while the heads shrink by 1/c, leaving the predictions unchanged and making the
        penalty as small as it likes, so λ would lose its meaning. ``None`` disables it.
    batch_size : int or None, default None
        ``None``: full local batches (noise-free local steps, which lets edges fuse
        exactly sooner).
    rounds, local_steps, lr, participation, device, random_state, progress
        As in :class:`~convexfl.torch.FedAvgDNN`.

    Attributes
    ----------
    body_ : dict of numpy arrays
    heads_ : ndarray (N, d_head)
        The clients' heads :math:`h_i` (weights then bias, flattened).
    labels_ : ndarray of int (N,)
        Fused clusters (components of the fused edges), numbered by first appearance.
    fused_heads_ : ndarray (N, d_head)
        The deployed heads: the mean of ``heads_`` over each fused cluster (identical rows
        inside a cluster).
    edge_fused_ : ndarray of bool (E,)
        Whether :math:`z_{ij} = z_{ji}` exactly.
    edge_variables_ : tuple of ndarray
        ``(z_ij, z_ji, u_ij, u_ji)``, each (E, d_head).
    """

    name = "son_heads"

    def __init__(self, body="mlp:32", *, lam=0.04, graph=None, rho=0.1, head_init="random",
                 feature_scale=4.0, rounds=30, local_steps=10, lr=0.1, batch_size=None,
                 participation=1.0, device="cpu", random_state=None, progress=False):
        self._store(locals())

    def _prepare(self, entries, public):
        self.lam_ = as_scalar(self.lam, "lam", low=0.0)
        self.rho_ = as_scalar(self.rho, "rho", low=0.0, low_inclusive=False)
        if self.head_init not in ("random", "common"):
            raise ValueError(f"head_init: must be 'random' or 'common', got {self.head_init!r}")
        self.graph_ = client_graph(self.graph, self.n_clients_, "graph")
        scale = (None if self.feature_scale is None
                 else as_scalar(self.feature_scale, "feature_scale", low=0.0, low_inclusive=False))
        self._set_template(as_template(lambda: build_classifier(
            self.body, self.n_features_, self.n_classes_, normalize=scale)))
        names = [k for k, _ in self._template.named_parameters()]
        last = str(len(self._template) - 1) + "."
        self._head_names = [k for k in names if k.startswith(last)]
        self._body_names = [k for k in names if not k.startswith(last)]
        shapes = dict((k, tuple(p.shape)) for k, p in self._template.named_parameters())
        self._head_shapes = [(k, shapes[k]) for k in self._head_names]
        self.head_dim_ = int(sum(np.prod(s) for _, s in self._head_shapes))

    # head vector <-> tensors -------------------------------------------------------
    def _head_tensors(self, vec, device):
        out, start = {}, 0
        v = torch.as_tensor(np.asarray(vec, dtype=np.float32), device=device)
        for k, shape in self._head_shapes:
            n = int(np.prod(shape))
            out[k] = v[start:start + n].reshape(shape)
            start += n
        return out

    def _head_vector(self, params):
        return torch.cat([params[k].reshape(-1) for k in self._head_names])

    def _algorithm(self, clients):
        template, device = self._template, self.device_
        lam, rho, lr, steps, bs = self.lam_, self.rho_, self.lr_, self.local_steps_, \
            self.batch_size
        edges, ew = self.graph_.edges, self.graph_.weights
        N, body_names = self.n_clients_, self._body_names
        counts = np.bincount(edges.ravel(), minlength=N).astype(np.float64)
        shared = SharedParameters(device, dict(enumerate(self.n_train_ / self.n_train_.sum())))
        lam_w = lam * ew

        def anchors(H, Zi, Zj, Ui, Uj):
            A = np.zeros_like(H)
            np.add.at(A, edges[:, 0], Zi - Ui)
            np.add.at(A, edges[:, 1], Zj - Uj)
            has = counts > 0
            A[has] /= counts[has, None]
            A[~has] = H[~has]
            return A

        def server_init(rng):
            gen = torch_generator(rng)
            p0 = init_parameters(template, gen, "cpu")
            if self.head_init == "common":
                H = np.tile(self._head_vector(p0).numpy().astype(np.float64), (N, 1))
            else:
                H = np.stack([self._head_vector(init_parameters(template, gen, "cpu"))
                              .numpy().astype(np.float64) for _ in range(N)])
            Zi, Zj = H[edges[:, 0]].copy(), H[edges[:, 1]].copy()
            Ui, Uj = np.zeros_like(Zi), np.zeros_like(Zj)
            state = {"body": to_message({k: p0[k] for k in body_names}, ""), "H": H,
                     "Zi": Zi, "Zj": Zj, "Ui": Ui, "Uj": Uj}
            state["anchor"] = anchors(H, Zi, Zj, Ui, Uj)
            return state

        def server_payload(state, cid, t):
            msg = shared.payload(state["body"])
            msg["anchor"] = vec32(state["anchor"][cid])
            msg["coef"] = vec32(rho * counts[cid])
            return msg

        def client_update(data, state, payload, rng):
            anchor = torch.as_tensor(payload["anchor"], device=device)
            coef = float(payload["coef"][0])
            head = state if state else self._head_tensors(payload["anchor"], device)
            start = shared.received(payload) | head
            ce = cross_entropy_loss(template, data)

            def loss(params, idx):
                out = ce(params, idx)
                if coef > 0:
                    diff = self._head_vector(params) - anchor
                    out = out + 0.5 * coef * (diff * diff).sum()
                return out

            new = local_sgd(start, loss, data, rng, steps=steps, lr=lr, batch_size=bs,
                            device=device)
            reply = shared.reply(start, new, body_names)
            reply["h"] = self._head_vector(new).cpu().numpy().astype(np.float32)
            return {k: new[k] for k in self._head_names}, reply

        def server_update(state, replies, t, rng):
            state = dict(state)
            if replies:
                state["body"] = shared.step(state["body"], replies)
                H = state["H"].copy()
                for i, r in replies.items():
                    H[i] = np.asarray(r["h"], dtype=np.float64)
                state["H"] = H
            if len(edges):
                H = state["H"]
                Zi, Zj, Ui, Uj = network_lasso_edge_update(
                    state["Ui"], state["Uj"], H[edges[:, 0]], H[edges[:, 1]], lam_w, rho)
                state.update(Zi=Zi, Zj=Zj, Ui=Ui, Uj=Uj, anchor=anchors(H, Zi, Zj, Ui, Uj))
            return state

        def metrics(state, client_states):
            labels, fused = self._fusion(state)
            body = to_tensors(state["body"], device)
            heads = [self._head_tensors(h, device) for h in fused]
            out = mean_accuracy_metrics(
                clients, lambda c, X: forward(template, body | heads[c.client_id], X))
            out["n_clusters"] = int(labels.max()) + 1
            out["n_fused_edges"] = int(np.sum(self._edge_fused(state)))
            return out

        return Algorithm(server_init=server_init, client_init=lambda d, rng: {},
                         server_payload=server_payload, client_update=client_update,
                         server_update=server_update, metrics=metrics, name=self.name)

    # fusion ------------------------------------------------------------------------
    def _edge_fused(self, state):
        if not len(self.graph_.edges):
            return np.zeros(0, dtype=bool)
        return np.all(state["Zi"] == state["Zj"], axis=1)

    def _fusion(self, state):
        mask = self._edge_fused(state)
        N = self.n_clients_
        if mask.size:
            labels = check_partition(self.graph_.subgraph_edges(mask).component_labels, N)
        else:
            labels = np.arange(N)
        H = state["H"]
        fused = np.empty_like(H)
        for k in range(int(labels.max()) + 1):
            fused[labels == k] = H[labels == k].mean(axis=0)
        return labels, fused

    def _finish(self, result):
        state = result.server_state
        self.body_ = state["body"]
        self.heads_ = state["H"].copy()
        self.edge_fused_ = self._edge_fused(state)
        self.labels_, self.fused_heads_ = self._fusion(state)
        self.edge_variables_ = (state["Zi"], state["Zj"], state["Ui"], state["Uj"])
        body = to_tensors(self.body_, self.device_)
        self._params = [body | self._head_tensors(h, self.device_) for h in self.fused_heads_]

    def _logits(self, client_id, X):
        return forward(self._template, self._params[client_id], X)

    def objective(self) -> float:
        """The (SON) objective at the deployed (fused) heads, on the training data."""
        self._check_fitted()
        with torch.no_grad():
            f = sum(float(F.cross_entropy(self._logits(c.client_id, c.X_train), c.y_train))
                    for c in self._clients)
        return f + self.lam_ * self.graph_.penalty(self.fused_heads_)
