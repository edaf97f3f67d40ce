r"""PerFed-CKT's clustered co-distillation (paper Algorithm 1) for linear models, on the
federated runtime.

Client k holds (X_k, Y_k) and a linear model W_k (d × N outputs), s(W, x) = xᵀW, so its
logits on the public set are P W_k (|P| × N). Objective (1) with F_k the sum of squared
errors, as in Sec. 4 / (13):

    Φ_k(W; s̄_k) = ‖X_k W − Y_k‖²_F + (λ/|P|) Σ_{x∈P} ‖s̄_k(x) − s(W, x)‖²,

so λ_k of (13)–(14) is λ/|P| and, for a fixed target s̄_k = P Σ_i α_ki W_i, the exact
minimiser of Φ_k is ckt_estimator(X_kᵀX_k, W, k, λ/|P|, α_k, PᵀP).
"""

from __future__ import annotations

from typing import Literal

import numpy as np

from .._kmeans import kmeans
from ..federated import Algorithm
from ._checks import _choice, _finite_array, _int, _scalar

__all__ = [
    "codistillation",
    "codistillation_cost",
]


def _as_outputs(Y, n: int, name: str) -> np.ndarray:
    Y = _finite_array(Y, name)
    if Y.ndim == 1:
        Y = Y[:, None]
    if Y.ndim != 2 or Y.shape[0] != n:
        raise ValueError(f"{name} must have shape ({n},) or ({n}, N), got {Y.shape}")
    return Y


def _codistill_client(client_data, d: int, n_outputs: int):
    if not (isinstance(client_data, (tuple, list)) and len(client_data) == 2):
        raise ValueError("client_data entries must be pairs (X_k, Y_k)")
    X = _finite_array(client_data[0], "client_data X_k", ndim=2, shape=(None, d))
    Y = _as_outputs(client_data[1], X.shape[0], "client_data Y_k")
    if Y.shape[1] != n_outputs:
        raise ValueError(f"client_data Y_k must have {n_outputs} output column(s), "
                         f"got {Y.shape[1]}")
    return X, Y


def _codistill_grad(W, Xb, Yb, data_scale, Pb, target, lam_b):
    r""":math:`\nabla_W \Phi_k = 2X^T(XW - Y) + 2\tfrac{\lambda}{|P|} P^T(PW - \bar s)`, estimated
    on batches: ``data_scale`` = n_k / b rescales the private sum and ``lam_b`` = λ / b' the
    public mean (``target`` None: no distillation term)."""
    g = (2.0 * data_scale) * (Xb.T @ (Xb @ W - Yb))
    if target is not None:
        g += 2.0 * lam_b * (Pb.T @ (Pb @ W - target))
    return g


def _rows(rng, n, size):
    """Indices of a batch without replacement, or None for all rows."""
    return None if size is None or size >= n else rng.choice(n, size=size, replace=False)


def _nearest(centroids, logits):
    """Eq. (4): the centroid closest to the client's current logits."""
    d2 = ((centroids - logits[None]) ** 2).sum(axis=(1, 2))
    return centroids[int(np.argmin(d2))]


def codistillation(public, *, n_clusters: int = 2, lam: float = 1.0, n_outputs: int = 1,
                   step: float | None = None, local_steps: int = 10,
                   batch_size: int | None = None, public_batch_size: int | None = None,
                   init: Literal["local", "zeros"] = "local", n_init: int = 10) -> Algorithm:
    r"""PerFed-CKT's clustered co-distillation (paper Algorithm 1) for linear models.

    Client :math:`k` minimises objective (1) with :math:`F_k(W) = \|X_kW - Y_k\|_F^2` and the
    logits :math:`s(W, x) = x^TW` of a linear model:

    .. math::

        \Phi_k(W; \bar s_k) = \|X_kW - Y_k\|_F^2
            + \frac{\lambda}{|P|}\sum_{x\in P}\|\bar s_k(x) - x^TW\|^2 .

    Round :math:`t` (the runtime samples the participants :math:`S^{(t)}`):

    1. the server sends the centroids :math:`\{c_j\}` of its last clustering (none in the
       first round) to every participant;
    2. participant :math:`k` computes its logits :math:`s_k = PW_k` and takes the nearest
       centroid, :math:`\bar s_k = \arg\min_{c_j}\|c_j - s_k\|^2` (eq. (4)); it then takes
       ``local_steps`` (τ) gradient steps (update (2)) on :math:`\Phi_k(\cdot; \bar s_k)`,
       on mini-batches of ``batch_size`` private and ``public_batch_size`` public rows when
       given; without centroids the distillation term is absent (local training);
    3. it replies with its new logits :math:`PW_k` (:math:`|P| \times N` numbers);
    4. the server clusters the received logits (flattened) by k-means into
       :math:`\min(c, |R_t|)` clusters (scikit-learn ``KMeans``, seeded from the round's
       generator) and keeps the cluster means as the new centroids. If no reply arrived it
       keeps the old ones.

    Taking the centroid of one's own cluster makes :math:`\alpha_{k,i} = 1/|C|` for the
    members of the cluster (k included) and 0 otherwise; with ``n_clusters=1`` every client
    distils towards the plain average of all received logits (co-distillation without
    clustering, :math:`\alpha_{k,i} = 1/m`).

    Communication (numbers per round, what :func:`codistillation_cost` returns and the
    runtime's ``bytes / 8`` shows): :math:`m\,c\,|P|\,N` down (every participant gets all
    centroids) and :math:`m\,|P|\,N` up — independent of the model size d.

    Parameters
    ----------
    public : array_like (n_public, d)
        The unlabelled public inputs P (known to the clients).
    n_clusters : int, >= 1
        c of Algorithm 1.
    lam : float, >= 0
        λ of (1); :math:`\lambda_k = \lambda/|P|` in the ckt_estimator convention of (13).
    n_outputs : int
        N, the number of outputs (columns of :math:`Y_k`).
    step : float, optional
        η; ``None`` uses :math:`1/L_k`,
        :math:`L_k = 2\lambda_{\max}(X_k^TX_k) + 2\tfrac{\lambda}{|P|}\lambda_{\max}(P^TP)`.
    local_steps : int
        τ.
    batch_size, public_batch_size : int, optional
        b and b' (full batches when None).
    init : {"local", "zeros"}
        Start of each client's model: its least-squares solution (the locally trained model
        whose logits initialise Algorithm 1) or zeros.
    n_init : int
        k-means restarts.

    Returns
    -------
    Algorithm
        Client data: pairs ``(X_k, Y_k)``. Client state ``{"w"}`` (d, N); server state
        ``{"centroids"}`` (c', |P|, N) and ``{"labels"}`` (client id → cluster of the last
        clustering).
    """
    P = _finite_array(public, "public", ndim=2)
    n_pub, d = P.shape
    if n_pub < 1:
        raise ValueError("public must have at least one row")
    c = _int(n_clusters, "n_clusters", minimum=1)
    lam = _scalar(lam, "lam", nonnegative=True)
    N = _int(n_outputs, "n_outputs", minimum=1)
    eta = None if step is None else _scalar(step, "step", positive=True)
    tau = _int(local_steps, "local_steps", minimum=1)
    b = None if batch_size is None else _int(batch_size, "batch_size", minimum=1)
    bp = None if public_batch_size is None else _int(public_batch_size, "public_batch_size",
                                                      minimum=1)
    _choice(init, "init", ("local", "zeros"))
    n_init = _int(n_init, "n_init", minimum=1)
    L_pub = 2.0 * lam / n_pub * float(np.linalg.eigvalsh(P.T @ P)[-1])

    def client_init(client_data, rng):
        X, Y = _codistill_client(client_data, d, N)
        W = np.linalg.lstsq(X, Y, rcond=None)[0] if init == "local" else np.zeros((d, N))
        return {"w": W}

    def client_update(client_data, state, payload, rng):
        X, Y = _codistill_client(client_data, d, N)
        W = state["w"]
        cent = payload["centroids"]
        target = _nearest(cent, P @ W) if cent.shape[0] else None
        lr = eta if eta is not None else 1.0 / (
            2.0 * float(np.linalg.eigvalsh(X.T @ X)[-1]) + L_pub)
        for _ in range(tau):
            rows, prow = _rows(rng, X.shape[0], b), _rows(rng, n_pub, bp)
            Xb, Yb = (X, Y) if rows is None else (X[rows], Y[rows])
            Pb = P if prow is None else P[prow]
            tgt = target if target is None or prow is None else target[prow]
            W = W - lr * _codistill_grad(W, Xb, Yb, X.shape[0] / Xb.shape[0], Pb, tgt,
                                         lam / Pb.shape[0])
        return {"w": W}, {"logits": P @ W}

    def server_update(state, replies, t, rng):
        if not replies:
            return state
        ids = sorted(replies)
        S = np.stack([replies[i]["logits"].reshape(-1) for i in ids])
        labels, means = kmeans(S, min(c, len(ids)), seed=int(rng.integers(2**31 - 1)),
                               n_init=n_init)
        return {"centroids": means.reshape(-1, n_pub, N),
                "labels": {i: int(lab) for i, lab in zip(ids, labels, strict=True)}}

    return Algorithm(
        server_init=lambda rng: {"centroids": np.zeros((0, n_pub, N)), "labels": {}},
        client_init=client_init,
        server_payload=lambda state, cid, t: {"centroids": state["centroids"]},
        client_update=client_update,
        server_update=server_update,
        name=f"codistillation_c{c}",
    )


def codistillation_cost(n_public: int, n_outputs: int, n_clusters: int,
                        clients_per_round: int) -> dict:
    r"""Numbers sent in one round of :func:`codistillation` once centroids exist (the paper's
    "number of parameters communicated per round", uplink plus downlink).

    .. math::

        \text{down} = m\,c'\,|P|\,N,\qquad \text{up} = m\,|P|\,N,\qquad
        c' = \min(c, m),

    m the clients per round (all of them reply). The first round sends no centroids.

    Returns
    -------
    dict
        ``down``, ``up`` and ``total``.
    """
    n_pub = _int(n_public, "n_public", minimum=1)
    N = _int(n_outputs, "n_outputs", minimum=1)
    c = _int(n_clusters, "n_clusters", minimum=1)
    m = _int(clients_per_round, "clients_per_round", minimum=1)
    down, up = m * min(c, m) * n_pub * N, m * n_pub * N
    return {"down": down, "up": up, "total": down + up}
