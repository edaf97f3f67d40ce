r"""Federated sum-of-norms: network-lasso ADMM (Hallac, Leskovec, Boyd, KDD 2015) as an
:class:`~convexfl.federated.Algorithm` (docs/math.md §1.5).

For (SON) ``Σ_i f_i(x_i) + λ Σ_{(i,j)∈E} w_ij ‖x_i − x_j‖`` every edge ``(i, j)`` keeps two
copies ``z_ij`` (on the side of ``i``) and ``z_ji`` (side of ``j``) and scaled duals
``u_ij``, ``u_ji``. One round:

* **server → client i**: the rows ``z_ij − u_ij`` of the ``deg_i`` edges of ``i``
  (``{"v": array (deg_i, d)}``, one payload per client);
* **client i** (holds only its own loss ``f_i``):
  ``x_i = argmin f_i(x) + (ρ/2) Σ_j ‖x − z_ij + u_ij‖²``
  ``= prox_{f_i/(ρ deg_i)}(mean_j(z_ij − u_ij))``,
  replies ``{"x": x_i}``. A client without edges solves ``argmin f_i`` by proximal-point
  steps ``x ← prox_{f_i/ρ}(x)`` (one per round);
* **server**: stores the received ``x_i``. Then every edge with at least one endpoint among
  this round's repliers, and whose other endpoint has sent an ``x`` at least once, gets the
  closed-form edge step on ``a = x_i + u_ij``, ``b = x_j + u_ji``:
  ``(z_ij, z_ji) = m ± ½ S_{2λw_ij/ρ}(a − b)`` with ``m = (a + b)/2`` and ``S_t`` block
  soft-thresholding, followed by the dual step ``u_ij += x_i − z_ij``, ``u_ji += x_j − z_ji``.
  **Stale models**: for an endpoint that did not reply this round (not sampled, dropped out,
  failed) the server uses the last ``x`` it received from that client. Edges with no
  replying endpoint are left as they are; an edge whose other endpoint has never replied
  waits until it has. With full participation this is exactly the synchronous
  network-lasso ADMM.

The server's model matrix ``X`` (row ``i`` = last received ``x_i``, zeros before the first
reply) is the output; :func:`son_admm`'s ``metrics`` report ``prob.objective(X)`` and the
certified KKT residual :func:`convexfl.certificates.kkt_residual` of ``X``.
"""

from __future__ import annotations

import numbers

import numpy as np

from .runtime import Algorithm

__all__ = ["son_admm", "son_client_data", "user_loss"]


def block_soft_threshold(V, threshold) -> np.ndarray:
    r"""Row-wise block soft-thresholding :math:`v\,\max(0, 1 - t/\|v\|)`.

    The prox of :math:`t\|\cdot\|`; a row with :math:`\|v\| \le t` becomes exactly zero.

    Parameters
    ----------
    V : array (E, d)
    threshold : float or array (E,)
    """
    V = np.asarray(V, dtype=np.float64)
    t = np.broadcast_to(np.asarray(threshold, dtype=np.float64), V.shape[:1])
    norms = np.linalg.norm(V, axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.where(norms > t, 1.0 - t / np.where(norms > 0, norms, 1.0), 0.0)
    return V * scale[:, None]


def network_lasso_edge_update(Ui, Uj, Hi, Hj, lam_w, rho):
    r"""Edge step of network-lasso ADMM (Hallac et al. 2015) for :math:`\lambda w\|z_{ij}-z_{ji}\|`.

    With :math:`a = h_i + u_{ij}` and :math:`b = h_j + u_{ji}`:
    :math:`(z_{ij}, z_{ji}) = \arg\min \lambda w\|z_{ij}-z_{ji}\| + (\rho/2)(\|z_{ij}-a\|^2
    + \|z_{ji}-b\|^2)`, i.e. the mean :math:`m=(a+b)/2` plus/minus half of the block
    soft-thresholded difference :math:`S_{2\lambda w/\rho}(a-b)`; then the scaled duals
    :math:`u_{ij} \mathrel{+}= h_i - z_{ij}`, :math:`u_{ji} \mathrel{+}= h_j - z_{ji}`.
    A thresholded difference is exactly zero, so ``z_ij == z_ji`` bitwise on fused edges.

    Returns
    -------
    Zi, Zj, Ui, Uj : arrays (E, d)
    """
    A, B = Hi + Ui, Hj + Uj
    M = 0.5 * (A + B)
    D = block_soft_threshold(A - B, 2.0 * np.asarray(lam_w) / rho)
    Zi, Zj = M + 0.5 * D, M - 0.5 * D
    return Zi, Zj, Ui + Hi - Zi, Uj + Hj - Zj


def user_loss(loss, i):
    """The one-user loss of user ``i`` of ``loss`` (a :class:`convexfl.losses.Loss` holding
    only that user's rows, of the same type)."""
    n = loss.n_users
    if isinstance(i, bool) or not isinstance(i, numbers.Integral) or not 0 <= i < n:
        raise ValueError(f"i: user index must be an int in 0..{n - 1}, got {i!r}")
    i = int(i)
    lo, hi = int(loss.ptr[i]), int(loss.ptr[i + 1])
    out = object.__new__(type(loss))
    out.__dict__.update({k: v for k, v in loss.__dict__.items()
                         if k not in ("lipschitz", "strong_convexity")})
    out._set_arrays(loss.F[lo:hi].copy(), loss.y[lo:hi].copy(), loss.coef[lo:hi].copy(),
                    np.array([0, hi - lo]), loss.ridge[i:i + 1].copy(),
                    loss.offset[i:i + 1].copy(), loss.delta, np.asarray(loss.user_labels)[i:i + 1])
    return out


def son_client_data(prob):
    """Per-client data for :func:`son_admm`: client ``i`` gets ``f_i`` alone,
    ``user_loss(prob.loss, i)``, a one-user loss built from user ``i``'s rows."""
    return [user_loss(prob.loss, i) for i in range(prob.n_users)]


def son_admm(prob, rho=1.0, *, certify_every=1, prox_tol=1e-12, prox_max_iter=50):
    r"""Network-lasso ADMM for a :class:`convexfl.problems.SumOfNorms`, federated.

    Parameters
    ----------
    prob : SumOfNorms
    rho : float, default=1.0
        ADMM penalty ``ρ > 0``.
    certify_every : int, default=1
        ``metrics`` adds the KKT certificate (``"kkt"``) every this many server updates
        (and before the first); the objective is reported every time.
    prox_tol, prox_max_iter
        Newton tolerance and iteration limit of the clients' prox.

    Returns
    -------
    Algorithm
        Client data: :func:`son_client_data` ``(prob)`` (client ``i`` holds ``f_i``). Server
        state: ``X`` (N, d) last received models, ``seen`` (N,) bool, edge arrays ``Zi``,
        ``Zj``, ``Ui``, ``Uj`` (E, d) for ``z_ij``, ``z_ji``, ``u_ij``, ``u_ji`` of the
        graph's edges ``(i, j)``, ``i < j``, and ``updates`` (server updates done). Client
        state: ``{"x": x_i}`` (its last model, the Newton warm start). Metrics:
        ``{"objective": F_λ(X), "kkt": kkt_residual(prob, X).kkt_residual}``.
    """
    from ..certificates import kkt_residual
    from ..problems import SumOfNorms

    if not isinstance(prob, SumOfNorms):
        raise TypeError(f"prob must be a SumOfNorms, got {type(prob).__name__}")
    if not (isinstance(rho, numbers.Real) and np.isfinite(rho) and rho > 0):
        raise ValueError(f"rho must be a positive finite float, got {rho!r}")
    if isinstance(certify_every, bool) or not isinstance(certify_every, numbers.Integral) \
            or certify_every < 1:
        raise ValueError(f"certify_every must be an int >= 1, got {certify_every!r}")
    rho = float(rho)
    n, d = prob.n_users, prob.dim
    edges = prob.graph.edges
    lam_w = prob.lam * prob.graph.weights
    E = edges.shape[0]
    # incidence: for client i, its edge ids and whether it is the first endpoint
    incident = [[] for _ in range(n)]
    for e, (a, b) in enumerate(edges):
        incident[a].append((e, True))
        incident[b].append((e, False))

    def server_init(rng):
        zeros = np.zeros((E, d))
        return {"X": np.zeros((n, d)), "seen": np.zeros(n, dtype=bool), "Zi": zeros.copy(),
                "Zj": zeros.copy(), "Ui": zeros.copy(), "Uj": zeros.copy(), "updates": 0}

    def client_init(client_data, rng):
        if client_data.n_users != 1 or client_data.dim != d:
            raise ValueError(f"client data must be a one-user loss of dimension {d}")
        return {"x": np.zeros(d)}

    def server_payload(state, client_id, round):
        rows = [(state["Zi"][e] - state["Ui"][e]) if first else (state["Zj"][e] - state["Uj"][e])
                for e, first in incident[client_id]]
        v = np.array(rows, dtype=float).reshape(len(rows), d)
        return {"v": v}

    def client_update(client_data, state, payload, rng):
        v = np.asarray(payload["v"], dtype=float)
        x0 = np.asarray(state["x"], dtype=float)
        if v.shape[0] == 0:  # isolated user: proximal-point step towards argmin f_i
            centre, weight = x0, rho
        else:
            centre, weight = v.mean(axis=0), rho * v.shape[0]
        x = client_data.prox(centre[None, :], weight, x0[None, :], tol=prox_tol,
                             max_iter=prox_max_iter)[0]
        return {"x": x}, {"x": x}

    def server_update(state, replies, round, rng):
        state = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in state.items()}
        state["updates"] += 1
        if not replies:
            return state
        X, seen = state["X"], state["seen"]
        for i, reply in replies.items():
            X[i] = reply["x"]
            seen[i] = True
        replied = np.zeros(n, dtype=bool)
        replied[list(replies)] = True
        if E:
            i, j = edges[:, 0], edges[:, 1]
            active = (replied[i] | replied[j]) & seen[i] & seen[j]
            if np.any(active):
                Zi, Zj, Ui, Uj = network_lasso_edge_update(
                    state["Ui"][active], state["Uj"][active], X[i[active]], X[j[active]],
                    lam_w[active], rho)
                state["Zi"][active], state["Zj"][active] = Zi, Zj
                state["Ui"][active], state["Uj"][active] = Ui, Uj
        return state

    def metrics(state, client_states):
        X = state["X"]
        out = {"objective": float(prob.objective(X))}
        if state["updates"] % certify_every == 0:
            out["kkt"] = float(kkt_residual(prob, X).kkt_residual)
        return out

    return Algorithm(
        server_init=server_init,
        client_init=client_init,
        server_payload=server_payload,
        client_update=client_update,
        server_update=server_update,
        metrics=metrics,
        name="son_admm",
    )
