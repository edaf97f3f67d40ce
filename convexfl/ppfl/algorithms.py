r"""PPFL's federated algorithms as :class:`convexfl.federated.Algorithm` functions.

Both algorithms keep ``Θ``, ``ω`` and every membership ``π_i`` on the server (the Laplacian
term needs all of them) and send client ``i`` only ``Θ``, ``ω`` and its own ``π_i`` (plus, in
Algorithm 3, its row of the penalty gradient). Messages are dicts of arrays, so the same
functions run under :func:`convexfl.federated.run_federated` and, later, Flower.

**Θ-block (paper (18)–(19), FedAvg-like).** Client ``i`` takes ``E = local_steps`` (mini-batch)
gradient steps on :math:`f_i + (α/2)(\|Θ\|^2 + \|ω\|^2)` from the server's ``(Θ, ω)`` with its
``π_i`` fixed, and replies the accumulated gradients :math:`G_i = \sum_e g_{i,e}`; the server
sets :math:`Θ ← Θ - η_Θ \sum_{i∈R} w_i G_i` with :math:`w_i = p_i / \sum_{j∈R} p_j` over the
replies ``R`` (with full participation, ``E = 1`` and full batches: gradient descent on F).

**π-block (paper (20)–(24)).** One mirror step per client on the MM surrogate of the
Laplacian term (from ``Π^t`` its gradient is the true one, :math:`2λ(LΠ^t)_i`):

.. math::

    π_i^+ ∝ π_i ⊙ \exp\big(-η_π\, [∇_{π_i} f_i + 2λ (LΠ^t)_i / p_i]\big),

i.e. a step :math:`η_π / p_i` on :math:`∇_{π_i} F` (the diagonal scaling by
:math:`Λ^{-1} = \mathrm{diag}(1/p_i)` keeps the data and penalty parts of one client on the
scale of ``f_i``), followed by the floor of Remark 2, :math:`π ← (π + ε)/(1 + Kε)`.
``laplacian="degree_only"`` uses ``D`` in place of ``L`` and, by default, the authors'
double-exponential step (:func:`~convexfl.ppfl.mirror_step`).

**Algorithm 1 (RBCD, :func:`rbcd`).** Each round the server draws the block: ``Θ`` with
probability ``block_prob``, else ``Π``. Stochastic gradients (``batch_size``) in both blocks.

**Algorithm 3 (alternating, :func:`alternating`).** Each round each client first takes the
π-step with its full gradient (25), then the Θ local steps with the new ``π_i``, and replies
both; no extra synchronisation round.

**Convergence criteria (Sec. 3.2)**, recorded per round by ``metrics``: ``grad_theta`` =
:math:`\|∇_{(Θ,ω)} F\|` and ``pi_gap`` = :math:`\|Π - Π^+\|_F / η_π` with :math:`Π^+` the
full-gradient mirror step (25) without floor, plus the objective with the true Laplacian and
with the degree-only penalty. (``metrics`` evaluates on the full data: a simulation diagnostic.)
"""

from __future__ import annotations

import numpy as np

from .._validation import as_int, as_scalar
from ..federated import Algorithm
from ._model import LAPLACIANS, MIRRORS, check_choice, mirror_step, predictor, sample_terms

__all__ = ["rbcd", "alternating", "criteria", "default_steps", "client_terms"]

THETA_BLOCK, PI_BLOCK = 0, 1


# ----------------------------------------------------------------------------- client maths


def client_terms(problem, data, Theta, omega, pi, rows=None):
    """``f_i`` and its gradients on one client's data (``rows``: a mini-batch, rescaled so
    that the gradient is an unbiased estimate).

    Returns ``(value, g_Theta, g_omega, g_pi)`` (without the ridge).
    """
    F_S, F_P, y, coef = data["F_S"], data["F_P"], data["y"], data["coef"]
    if rows is not None:
        F_S, F_P, y = F_S[rows], F_P[rows], y[rows]
        coef = coef[rows] * (len(data["y"]) / len(rows))
    v, gT, gw, gP = sample_terms(problem.family, problem.form, F_S, F_P, y, coef, Theta,
                                 omega, pi[None, :], np.zeros(len(y), dtype=np.int64))
    return v, gT, gw, gP[0]


def _batch(rng, m, batch_size):
    if batch_size is None or batch_size >= m:
        return None
    return rng.choice(m, size=batch_size, replace=False)


def _local_theta_steps(problem, data, Theta, omega, pi, cfg, rng):
    """``E`` local (mini-batch) gradient steps; returns the accumulated gradients."""
    Theta, omega = Theta.copy(), omega.copy()
    G_T, G_w = np.zeros_like(Theta), np.zeros_like(omega)
    for _ in range(cfg["local_steps"]):
        rows = _batch(rng, len(data["y"]), cfg["batch_size"])
        _, gT, gw, _ = client_terms(problem, data, Theta, omega, pi, rows)
        gT, gw = gT + problem.alpha * Theta, gw + problem.alpha * omega
        Theta -= cfg["theta_step"] * gT
        omega -= cfg["theta_step"] * gw
        G_T += gT
        G_w += gw
    return G_T, G_w


def _pi_step(pi, grad, pen, cfg):
    return mirror_step(pi, grad + pen, cfg["pi_step"], kind=cfg["mirror"], floor=cfg["floor"])


# ----------------------------------------------------------------------------- server maths


def _scaled_penalty_grad(problem, Pi, laplacian):
    """``∇_Π(penalty) / p_i`` row-wise."""
    return problem.penalty_grad(Pi, laplacian) / problem.p[:, None]


def _apply_theta(problem, state, replies, step):
    w = np.array([problem.p[i] for i in replies])
    w = w / w.sum()
    G_T = sum(wi * r["G_Theta"] for wi, r in zip(w, replies.values(), strict=True))
    G_w = sum(wi * r["G_omega"] for wi, r in zip(w, replies.values(), strict=True))
    state["Theta"] = state["Theta"] - step * G_T
    state["omega"] = state["omega"] - step * G_w


def criteria(problem, Theta, omega, Pi, *, pi_step, laplacian="laplacian", mirror="entropic"):
    """The convergence criteria of Sec. 3.2 and both objectives at ``(Θ, ω, Π)``.

    Returns
    -------
    dict
        ``objective`` (true Laplacian), ``objective_degree_only``, ``grad_theta``
        (``‖∇_{Θ,ω} F‖``), ``pi_gap`` (``‖Π − Π⁺‖_F / η_π``, Π⁺ the full-gradient step (25)
        of the algorithm's mirror map and penalty, without floor).
    """
    gT, gw, gP = problem.gradient(Theta, omega, Pi, laplacian)
    Pi_plus = mirror_step(Pi, gP / problem.p[:, None], pi_step, kind=mirror)
    return {"objective": problem.objective(Theta, omega, Pi, "laplacian"),
            "objective_degree_only": problem.objective(Theta, omega, Pi, "degree_only"),
            "grad_theta": float(np.sqrt(np.sum(gT ** 2) + np.sum(gw ** 2))),
            "pi_gap": float(np.linalg.norm(Pi - Pi_plus) / pi_step)}


def default_steps(problem, Theta, omega, Pi):
    r"""Heuristic step sizes from the starting point.

    ``η_Θ = 1/(max_i L_i + α)`` with :math:`L_i = κ\, λ_{\max}((1/m_i)\sum_j z_j z_j^\top)`,
    ``z_j = [u_j, x_j]`` and κ the family's sup of ``∂²φ/∂t̄²`` (Poisson: twice its value at
    the start). ``η_π = 1/(κ \max_i (1/m_i) \sum_j \max_k (∂t̄_j/∂π_k)^2
    + 4λ \max_i d_i / p_i)``, an ℓ1/ℓ∞ smoothness bound of the scaled π-gradient at the start.
    """
    tbar, d_P = predictor(problem.family, problem.form, problem.F_S, problem.F_P, Theta,
                          omega, Pi, problem.client_of_sample)
    kappa = problem.family.curvature.get(problem.form, np.inf)
    if not np.isfinite(kappa):
        kappa = 2.0 * float(np.exp(np.clip(tbar, None, 50.0)).max())
    Z = np.hstack([problem.F_S, problem.F_P])
    lips = []
    for a, b in zip(problem.ptr[:-1], problem.ptr[1:], strict=True):
        Zi = Z[a:b] * np.sqrt(problem.coef[a:b])[:, None]
        lips.append(np.linalg.norm(Zi, 2) ** 2 if Zi.size else 0.0)
    theta_step = 1.0 / (kappa * max(lips) + problem.alpha + 1e-12)
    per_sample = problem.coef * np.max(d_P ** 2, axis=1)
    data_pi = np.bincount(problem.client_of_sample, weights=per_sample).max() * kappa
    pen_pi = 4.0 * problem.lam * float(np.max(problem.degrees / problem.p))
    return theta_step, 1.0 / (data_pi + pen_pi + 1e-12)


# ----------------------------------------------------------------------------- configuration


def _config(problem, init, theta_step, pi_step, local_steps, batch_size, laplacian, mirror,
            floor):
    if not problem.simplex:
        raise ValueError("problem: the federated PPFL algorithms need simplex memberships "
                         "(simplex=True)")
    laplacian = check_choice(laplacian, "laplacian", LAPLACIANS)
    if mirror is None:
        mirror = "entropic" if laplacian == "laplacian" else "double_exp"
    mirror = check_choice(mirror, "mirror", MIRRORS)
    Theta, omega, Pi = problem.check_point(*init)
    auto_t, auto_p = default_steps(problem, Theta, omega, Pi)
    return {
        "init": (Theta, omega, Pi),
        "theta_step": auto_t if _is_auto(theta_step) else as_scalar(
            theta_step, "theta_step", low=0.0),
        "pi_step": auto_p if _is_auto(pi_step) else as_scalar(
            pi_step, "pi_step", low=0.0, low_inclusive=False),
        "local_steps": as_int(local_steps, "local_steps", low=1),
        "batch_size": None if batch_size is None else as_int(batch_size, "batch_size", low=1),
        "laplacian": laplacian, "mirror": mirror,
        "floor": as_scalar(floor, "floor", low=0.0, high=1.0),
    }


def _is_auto(value):
    return isinstance(value, str) and value == "auto"


def _server_init(problem, cfg):
    def server_init(rng):
        Theta, omega, Pi = (a.copy() for a in cfg["init"])
        return {"Theta": Theta, "omega": omega, "Pi": Pi,
                "pen": _scaled_penalty_grad(problem, Pi, cfg["laplacian"]),
                "block": THETA_BLOCK, "last_block": -1}
    return server_init


def _client_init(data, rng):
    return {"n_samples": int(len(data["y"]))}


def _metrics(problem, cfg):
    def metrics(server_state, client_states):
        out = criteria(problem, server_state["Theta"], server_state["omega"],
                       server_state["Pi"], pi_step=cfg["pi_step"],
                       laplacian=cfg["laplacian"], mirror=cfg["mirror"])
        out["block"] = int(server_state["last_block"])
        return out
    return metrics


# ----------------------------------------------------------------------------- Algorithm 1


def rbcd(problem, *, init, theta_step="auto", pi_step="auto", local_steps=1, batch_size=None,
         block_prob=0.5, laplacian="laplacian", mirror=None, floor=1e-6, record=True):
    r"""PPFL's random block coordinate descent (paper Algorithm 1) as an ``Algorithm``.

    Parameters
    ----------
    problem : PPFLProblem
        With ``simplex=True``. Client ``i``'s data is ``problem.client_data()[i]``.
    init : tuple (Θ, ω, Π)
        Starting point (e.g. ``problem.initial_point(rng)``).
    theta_step, pi_step : float or "auto"
        ``η_Θ`` and ``η_π`` (see :func:`default_steps` for "auto").
    local_steps : int
        Local Θ steps ``E`` per round.
    batch_size : int, optional
        Mini-batch per local step and for the π-gradient (full batch when ``None``).
    block_prob : float
        Probability of the Θ-block in a round (the π-block otherwise).
    laplacian : {"laplacian", "degree_only"}
        The paper's ``L = D − A`` or the authors' code's ``D``.
    mirror : {"entropic", "double_exp"}, optional
        Default: entropic with the Laplacian, double exponential with ``"degree_only"``.
    floor : float
        ε of Remark 2.
    record : bool
        Record the criteria of Sec. 3.2 each round (``metrics``).

    Returns
    -------
    Algorithm
        Server state ``{"Theta", "omega", "Pi", "pen", "block", "last_block"}``; ``block`` is
        the block of the next round (0 = Θ, 1 = π), drawn in ``server_update``.
    """
    cfg = _config(problem, init, theta_step, pi_step, local_steps, batch_size, laplacian,
                  mirror, floor)
    prob_theta = as_scalar(block_prob, "block_prob", low=0.0, high=1.0)
    base_init = _server_init(problem, cfg)

    def server_init(rng):
        state = base_init(rng)
        state["block"] = _draw_block(rng, prob_theta)
        return state

    def server_payload(state, client_id, round):
        return {"block": int(state["block"]), "Theta": state["Theta"],
                "omega": state["omega"], "pi": state["Pi"][client_id]}

    def client_update(data, state, payload, rng):
        Theta, omega, pi = payload["Theta"], payload["omega"], payload["pi"]
        if payload["block"] == THETA_BLOCK:
            G_T, G_w = _local_theta_steps(problem, data, Theta, omega, pi, cfg, rng)
            return state, {"G_Theta": G_T, "G_omega": G_w}
        rows = _batch(rng, len(data["y"]), cfg["batch_size"])
        return state, {"grad_pi": client_terms(problem, data, Theta, omega, pi, rows)[3]}

    def server_update(state, replies, round, rng):
        state = dict(state)
        if replies and state["block"] == THETA_BLOCK:
            _apply_theta(problem, state, replies, cfg["theta_step"])
        elif replies:
            Pi = state["Pi"].copy()
            for i, r in replies.items():
                Pi[i] = _pi_step(Pi[i], r["grad_pi"], state["pen"][i], cfg)
            state["Pi"] = Pi
            state["pen"] = _scaled_penalty_grad(problem, Pi, cfg["laplacian"])
        state["last_block"] = state["block"]
        state["block"] = _draw_block(rng, prob_theta)
        return state

    return Algorithm(server_init=server_init, client_init=_client_init,
                     server_payload=server_payload, client_update=client_update,
                     server_update=server_update,
                     metrics=_metrics(problem, cfg) if record else None, name="ppfl_rbcd")


def _draw_block(rng, prob_theta):
    return THETA_BLOCK if rng.random() < prob_theta else PI_BLOCK


# ----------------------------------------------------------------------------- Algorithm 3


def alternating(problem, *, init, theta_step="auto", pi_step="auto", local_steps=1,
                batch_size=None, laplacian="laplacian", mirror=None, floor=1e-6, record=True):
    r"""PPFL's alternating variant (paper Algorithm 3) as an ``Algorithm``.

    Each round client ``i`` receives ``(Θ, ω, π_i)`` and its row of the scaled penalty
    gradient ``2λ(LΠ)_i / p_i``, takes the π-step with its full gradient, then ``E`` local
    Θ-steps with the new ``π_i``, and replies ``π_i⁺`` and the accumulated Θ-gradients.
    Parameters as in :func:`rbcd` (no ``block_prob``; ``batch_size`` applies to the Θ-steps).
    """
    cfg = _config(problem, init, theta_step, pi_step, local_steps, batch_size, laplacian,
                  mirror, floor)

    def server_payload(state, client_id, round):
        return {"Theta": state["Theta"], "omega": state["omega"],
                "pi": state["Pi"][client_id], "pen": state["pen"][client_id]}

    def client_update(data, state, payload, rng):
        Theta, omega = payload["Theta"], payload["omega"]
        grad = client_terms(problem, data, Theta, omega, payload["pi"])[3]
        pi = _pi_step(payload["pi"], grad, payload["pen"], cfg)
        G_T, G_w = _local_theta_steps(problem, data, Theta, omega, pi, cfg, rng)
        return state, {"pi": pi, "G_Theta": G_T, "G_omega": G_w}

    def server_update(state, replies, round, rng):
        state = dict(state)
        if replies:
            _apply_theta(problem, state, replies, cfg["theta_step"])
            Pi = state["Pi"].copy()
            for i, r in replies.items():
                Pi[i] = r["pi"]
            state["Pi"] = Pi
            state["pen"] = _scaled_penalty_grad(problem, Pi, cfg["laplacian"])
        state["last_block"] = -1
        return state

    return Algorithm(server_init=_server_init(problem, cfg), client_init=_client_init,
                     server_payload=server_payload, client_update=client_update,
                     server_update=server_update,
                     metrics=_metrics(problem, cfg) if record else None,
                     name="ppfl_alternating")
