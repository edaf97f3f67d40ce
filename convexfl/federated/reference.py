"""A small reference algorithm for the runtime: FedAvg on least squares."""

from __future__ import annotations

import numbers

import numpy as np

from .runtime import Algorithm

__all__ = ["fedavg_least_squares"]


def _check_positive_int(value, name, allow_none=False):
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    return int(value)


def _client_arrays(client_data, n_features):
    """Validate one client's ``(A, b)`` and return them as float arrays."""
    if not (isinstance(client_data, (tuple, list)) and len(client_data) == 2):
        raise ValueError("client_data entries must be pairs (A, b)")
    A = np.asarray(client_data[0], dtype=float)
    b = np.asarray(client_data[1], dtype=float)
    if A.ndim != 2 or A.shape[1] != n_features or A.shape[0] < 1:
        raise ValueError(f"A must have shape (m, {n_features}) with m >= 1, got {A.shape}")
    if b.shape != (A.shape[0],):
        raise ValueError(f"b must have shape ({A.shape[0]},), got {b.shape}")
    return A, b


def _local_loss(A, b, x):
    residual = A @ x - b
    return float(residual @ residual) / (2 * A.shape[0])


def fedavg_least_squares(n_features, *, step, local_steps=1, batch_size=None, x0=None):
    """FedAvg on a federated least-squares problem.

    Client ``k`` holds ``(A_k, b_k)`` with ``m_k`` rows. The objective is the sample-weighted
    mean of the local losses, i.e. the pooled least-squares objective:

    .. math::

        F(x) = \\sum_k \\frac{m_k}{M} f_k(x), \\qquad
        f_k(x) = \\frac{1}{2 m_k} \\lVert A_k x - b_k \\rVert_2^2, \\qquad M = \\sum_k m_k,

    so :math:`F(x) = \\frac{1}{2M}\\lVert A x - b\\rVert_2^2` for the stacked data. Each round
    the server sends :math:`x`; a participant takes ``local_steps`` gradient steps
    :math:`x \\leftarrow x - s \\nabla f_k(x)` (on a random mini-batch of ``batch_size`` rows
    without replacement when given) and replies ``{"x": x_k, "n_samples": m_k}``; the server
    sets :math:`x = \\sum_{k \\in R} m_k x_k / \\sum_{k \\in R} m_k` over the replies ``R``
    that arrived (and keeps :math:`x` when none did).

    With full participation, ``local_steps=1`` and full batches this is exactly gradient
    descent :math:`x_{t+1} = x_t - s \\nabla F(x_t)`, which converges to the pooled
    least-squares solution for :math:`0 < s < 2 / \\lambda_{\\max}(A^\\top A / M)`.

    Parameters
    ----------
    n_features : int
        Dimension :math:`d` of :math:`x`.
    step : float
        Local step size :math:`s > 0`.
    local_steps : int, default=1
        Local gradient steps per round :math:`E`.
    batch_size : int, optional
        Rows per local step (all rows when ``None`` or larger than :math:`m_k`).
    x0 : array-like of shape (n_features,), optional
        Initial model (zeros by default).

    Returns
    -------
    Algorithm
        Client data are pairs ``(A_k, b_k)``. Server state ``{"x": x}``; client state
        ``{"n_samples": m_k}`` plus ``"loss"``, the local loss :math:`f_k` at the model it
        last received. ``metrics`` returns ``{"loss": ...}``, the sample-weighted mean of
        those losses over the clients that have run (with full participation: :math:`F` at
        the model sent in the last round).
    """
    n_features = _check_positive_int(n_features, "n_features")
    local_steps = _check_positive_int(local_steps, "local_steps")
    batch_size = _check_positive_int(batch_size, "batch_size", allow_none=True)
    if not (isinstance(step, numbers.Real) and np.isfinite(step) and step > 0):
        raise ValueError(f"step must be a positive finite float, got {step!r}")
    step = float(step)
    start = np.zeros(n_features) if x0 is None else np.array(x0, dtype=float)
    if start.shape != (n_features,):
        raise ValueError(f"x0 must have shape ({n_features},), got {start.shape}")

    def server_init(rng):
        return {"x": start.copy()}

    def client_init(client_data, rng):
        A, _ = _client_arrays(client_data, n_features)
        return {"n_samples": A.shape[0]}

    def server_payload(server_state, client_id, round):
        return {"x": server_state["x"]}

    def client_update(client_data, client_state, payload, rng):
        A, b = _client_arrays(client_data, n_features)
        x = payload["x"].astype(float, copy=True)
        loss = _local_loss(A, b, x)
        m = A.shape[0]
        for _ in range(local_steps):
            rows = _batch(rng, m, batch_size)
            A_batch, b_batch = (A, b) if rows is None else (A[rows], b[rows])
            x -= step * (A_batch.T @ (A_batch @ x - b_batch)) / A_batch.shape[0]
        return {"n_samples": m, "loss": loss}, {"x": x, "n_samples": m}

    def server_update(server_state, replies, round, rng):
        if not replies:
            return server_state
        weights = np.array([r["n_samples"] for r in replies.values()], dtype=float)
        models = np.stack([r["x"] for r in replies.values()])
        return {"x": weights @ models / weights.sum()}

    def metrics(server_state, client_states):
        seen = [s for s in client_states if "loss" in s]
        if not seen:
            return {}
        weights = np.array([s["n_samples"] for s in seen], dtype=float)
        losses = np.array([s["loss"] for s in seen])
        return {"loss": float(weights @ losses / weights.sum())}

    return Algorithm(
        server_init=server_init,
        client_init=client_init,
        server_payload=server_payload,
        client_update=client_update,
        server_update=server_update,
        metrics=metrics,
        name="fedavg_least_squares",
    )


def _batch(rng, m, batch_size):
    """Row indices of one mini-batch, or ``None`` for the full batch."""
    if batch_size is None or batch_size >= m:
        return None
    return rng.choice(m, size=batch_size, replace=False)
