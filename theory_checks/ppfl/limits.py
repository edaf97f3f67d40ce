"""PPFL's two limits (Sec. 2, (4)/(15)): with K = 1 PPFL is FedAvg and its solution is the
pooled GLM; as λ → ∞ the Laplacian penalty makes the memberships of connected clients equal
(λ = 0 leaves them different)."""

from __future__ import annotations

import numpy as np
from scipy.sparse.csgraph import connected_components

from convexfl.ppfl import (
    PPFLProblem,
    alternating,
    default_steps,
    solve_memberships,
    solve_theta,
)

from .._common import figure_path, finish, pyplot, rng_for
from ..registry import Control, outcome, register
from ._glm import FAMILIES, glm_data, random_affinity, run_with_callback

ID = "ppfl.limits"
LAMS = (1e-3, 1e-2, 1e-1, 1.0, 1e1, 1e2, 1e3, 1e4, 1e5)
K1_TOL = 1e-6     # relative coefficient difference, exact K = 1 PPFL vs pooled GLM
FEDAVG_TOL = 1e-10  # K = 1 PPFL iterates vs an independent FedAvg
SPREAD_TOL = 1e-3   # membership spread of connected clients at λ = 1e5


# ----------------------------------------------------------------------------- K = 1


def _pooled_glm(X, y, family):
    """The pooled GLM (one model for all samples) by statsmodels' IRLS (independent oracle)."""
    import statsmodels.api as sm

    fam = {"gaussian": sm.families.Gaussian(), "binomial": sm.families.Binomial(),
           "poisson": sm.families.Poisson()}[family]
    return np.asarray(sm.GLM(y, X, family=fam).fit(tol=1e-14, maxiter=200).params)


def _mean_grad(family, X, y, beta):
    """∇ of the mean negative log-likelihood of one client (written here, independently)."""
    t = X @ beta
    mu = {"gaussian": lambda: t, "binomial": lambda: 1.0 / (1.0 + np.exp(-t)),
          "poisson": lambda: np.exp(t)}[family]()
    return X.T @ (mu - y) / len(y)


def fedavg(X, y, groups, family, *, step, local_steps, rounds, beta0):
    """FedAvg with full-batch local steps and p_i = m_i/M weighted model averaging."""
    clients = [np.flatnonzero(groups == g) for g in np.unique(groups)]
    p = np.array([len(c) for c in clients]) / len(y)
    beta, out = np.array(beta0, dtype=float), []
    for _ in range(rounds):
        models = []
        for rows in clients:
            b = beta.copy()
            for _ in range(local_steps):
                b = b - step * _mean_grad(family, X[rows], y[rows], b)
            models.append(b)
        beta = p @ np.array(models)
        out.append(beta.copy())
    return np.array(out)


def check_k1(X, y, groups, *, family="gaussian", form="parameter", lam=1.0, rounds=20,
             local_steps=2, step=None, seed=0) -> dict:
    """K = 1: the exact PPFL solution against the pooled GLM (statsmodels), and the iterates of
    PPFL's alternating algorithm (full batches) against an independent FedAvg.

    Returns ``max_abs_difference_pooled``, ``rel_difference_pooled`` (divided by 1 + the
    largest |pooled coefficient|), ``rel_difference_fedavg`` (largest over rounds, likewise
    relative), ``memberships_all_one`` (every round) and the ``pooled`` and ``ppfl``
    coefficients.
    """
    prob = PPFLProblem(X, y, groups, n_components=1, family=family, form=form, lam=lam,
                       affinity="uniform")
    ones = np.ones((prob.n_clients, 1))
    # at K = 1 the forms (11) and (12) coincide; the exact Θ-block solver takes (12)
    par = prob if form == "parameter" else PPFLProblem(
        X, y, groups, n_components=1, family=family, form="parameter", lam=lam,
        affinity="uniform")
    exact = solve_theta(par, ones).Theta[0]
    pooled = _pooled_glm(X, y, family)
    rng = np.random.default_rng(seed)
    beta0 = 0.1 * rng.normal(size=X.shape[1])
    init = (beta0[None, :], None, ones)
    if step is None:
        step = default_steps(prob, *init)[0]
    alg = alternating(prob, init=init, theta_step=step, local_steps=local_steps,
                      record=False)
    ours, Pis = [], []
    run_with_callback(prob, alg, rounds, seed,
                      lambda st: (ours.append(st["Theta"][0].copy()), Pis.append(st["Pi"])))
    # PPFL sorts clients by label; FedAvg here takes them in np.unique order: the same
    ref = fedavg(X, y, groups, family, step=step, local_steps=local_steps, rounds=rounds,
                 beta0=beta0)
    if len(ours) != rounds:
        raise RuntimeError(f"check_k1: the federated run stopped after {len(ours)} rounds")
    d_fed = float(np.max(np.abs(np.array(ours) - ref)) / (1.0 + np.abs(ref).max()))
    d_pool = float(np.max(np.abs(exact - pooled)))
    return {"max_abs_difference_pooled": d_pool,
            "rel_difference_pooled": d_pool / (1.0 + np.abs(pooled).max()),
            "rel_difference_fedavg": d_fed,
            "memberships_all_one": bool(all(np.all(P == 1.0) for P in Pis)),
            "pooled": pooled, "ppfl": exact}


# ----------------------------------------------------------------------------- λ → ∞


def spread(Pi, A) -> tuple[float, float]:
    """``(within, between)``: the largest range of a membership coordinate over the clients
    of one connected component of the affinity graph, and over the component means."""
    n, labels = connected_components(np.asarray(A) > 0, directed=False)
    within = max(float(np.max(np.ptp(Pi[labels == c], axis=0))) for c in range(n))
    means = np.array([Pi[labels == c].mean(axis=0) for c in range(n)])
    return within, float(np.max(np.ptp(means, axis=0))) if n > 1 else 0.0


def check_lambda(problem, Theta, omega=None, lams=LAMS) -> dict:
    """Exact memberships ``argmin_Π F(Θ, ω, Π)`` (cvxpy) for each λ in ``lams`` at fixed
    ``(Θ, ω)``; their spread over connected clients.

    Returns ``lams``, ``within`` (spread inside components), ``between`` (across components),
    ``slope_top`` (log-log slope of ``within`` over the three largest λ: −1 for O(1/λ)).
    """
    within, between, lam0 = [], [], problem.lam
    try:
        for lam in lams:
            problem.lam = float(lam)
            Pi = solve_memberships(problem, Theta, omega).Pi
            w, b = spread(Pi, problem.A)
            within.append(w)
            between.append(b)
    finally:
        problem.lam = lam0  # the caller's problem is left as it was
    top = np.array(lams[-3:], dtype=float)
    wt = np.maximum(np.array(within[-3:]), 1e-300)
    slope = float(np.polyfit(np.log(top), np.log(wt), 1)[0]) if min(top) > 0 else np.nan
    return {"lams": list(lams), "within": within, "between": between, "slope_top": slope}


# ----------------------------------------------------------------------------- the check


def check(X, y, groups, *, family="gaussian", form="parameter", n_components=3,
          affinity="uniform", lams=LAMS, seed=0) -> dict:
    """Both limits on one data set: :func:`check_k1` and :func:`check_lambda` (random
    ``Θ ~ N(0, 1)``, ``ω`` none) with the given affinity; keys ``k1`` and ``lam``."""
    prob = PPFLProblem(X, y, groups, n_components=n_components, family=family, form=form,
                       affinity=affinity)
    Theta = np.random.default_rng(seed).normal(size=(n_components, X.shape[1]))
    return {"k1": check_k1(X, y, groups, family=family, form=form, seed=seed),
            "lam": check_lambda(prob, Theta, lams=lams)}


@register(ID, paper="Di et al. (PPFL)", equation="(4), (11)/(12), (15)",
          claim="K = 1 reduces PPFL to FedAvg (π_i ≡ 1, no penalty) whose solution is the "
                "pooled GLM; as λ → ∞ the Laplacian penalty forces equal memberships on every "
                "connected set of clients.",
          assumptions="GLM families gaussian/binomial/poisson, forms (11)/(12) (identical at "
                      "K = 1); full-batch local steps for the FedAvg identity; the λ limit at "
                      "the exact membership block (Θ fixed), graphs with 1–3 components")
def run(quick: bool, seed: int, out):
    n_inst = 3 if quick else 12
    k1_rows, lam_rows = [], []
    for t in range(n_inst):
        rng = rng_for(seed, 51, t)
        family = FAMILIES[t % 3]
        X, y, groups, _ = glm_data(rng, family, m=int(rng.integers(40, 80)))
        form = "output" if family != "gaussian" and t % 2 else "parameter"
        k1_rows.append((family, check_k1(X, y, groups, family=family, form=form,
                                          lam=float(10 ** rng.uniform(-2, 2)),
                                          rounds=10 if quick else 30,
                                          local_steps=int(rng.integers(1, 4)),
                                          seed=seed + t)))
        n_parts = int(rng.integers(1, 4))
        X2, y2, g2, K2 = glm_data(rng, family, n_clients=int(rng.integers(6, 10)))
        prob = PPFLProblem(X2, y2, g2, n_components=K2, family=family,
                           form="output" if family != "gaussian" and t % 2 == 0
                           else "parameter",
                           affinity=random_affinity(rng, g2.max() + 1, n_parts))
        Theta = rng.normal(size=(prob.n_components, prob.d_personal))
        lams = (0.0,) + LAMS if not quick else (0.0, 1e-2, 1.0, 1e2, 1e3, 1e4, 1e5)
        lam_rows.append((family, n_parts, check_lambda(prob, Theta, lams=lams)))
    ok_k1 = [r["rel_difference_pooled"] <= K1_TOL and r["rel_difference_fedavg"] <= FEDAVG_TOL
             and r["memberships_all_one"] for _, r in k1_rows]
    ok_lam = [r["within"][-1] <= SPREAD_TOL and r["slope_top"] <= -0.5 for *_, r in lam_rows]
    margins = {
        "max_spread_connected_at_lam_1e5": max(r["within"][-1] for *_, r in lam_rows),
        "max_rel_difference_k1_vs_pooled_glm": max(r["rel_difference_pooled"]
                                                   for _, r in k1_rows),
        "max_rel_difference_k1_vs_fedavg_iterates": max(r["rel_difference_fedavg"]
                                                        for _, r in k1_rows),
        "max_log_log_slope_spread_vs_lam_top": max(r["slope_top"] for *_, r in lam_rows),
    }
    ctrl_spread = [r["within"][0] for *_, r in lam_rows]
    control = Control("λ = 0 (no penalty): memberships of connected clients must stay "
                      f"different (spread > {SPREAD_TOL:g})",
                      "holds" if all(s <= SPREAD_TOL for s in ctrl_spread) else "fails",
                      {"min_spread_at_lam_0": min(ctrl_spread),
                       "instances": len(ctrl_spread)})
    fig, rel = figure_path(out, ID)
    _plot(lam_rows, fig)
    ok = ok_k1 + ok_lam
    return outcome(
        ID, outcome="holds" if all(ok) else "fails", margins=margins,
        instances=len(k1_rows) + len(lam_rows), seed=seed, control=control, figure=rel,
        details=(f"K = 1: {sum(ok_k1)}/{len(ok_k1)} data sets (the three families) give the "
                 "pooled GLM (PPFL's exact Θ-block vs statsmodels' GLM IRLS, relative "
                 f"tolerance {K1_TOL:g}), memberships stay exactly 1, and the alternating "
                 "algorithm's iterates equal an independent FedAvg (full-batch local steps, "
                 f"p_i-weighted averaging) to {FEDAVG_TOL:g}. λ → ∞: "
                 f"{sum(ok_lam)}/{len(ok_lam)} instances have the spread of the exact "
                 f"memberships over connected clients ≤ {SPREAD_TOL:g} at λ = 1e5 and still "
                 "falling (log-log slope over the three largest λ ≤ −0.5; the largest slope "
                 f"seen is {margins['max_log_log_slope_spread_vs_lam_top']:.2f}, O(1/λ) "
                 "would be −1). (Different components are not tied by the penalty: at "
                 "λ = 1e5 their mean memberships differ by up to "
                 f"{max(r['between'][-1] for *_, r in lam_rows):.3g}.) At λ = 0 the spread "
                 f"over connected clients is at least {min(ctrl_spread):.3g}."))


def _plot(lam_rows, path):
    plt = pyplot()
    f, ax = plt.subplots(figsize=(6, 4))
    for family, n_parts, r in lam_rows:
        lams = np.array(r["lams"])
        ax.loglog(lams[1:], np.maximum(r["within"][1:], 1e-16), "o-", ms=3,
                  label=f"{family}, {n_parts} comp.")
        ax.plot(lams[1] / 10, max(r["within"][0], 1e-16), "s", color="#cf222e", ms=5)
    ax.axhline(SPREAD_TOL, color="k", ls="--", lw=0.8)
    finish(f, ax, path, xlabel="λ   (red squares: λ = 0, drawn at the left)",
           ylabel="max spread of π over connected clients",
           title="PPFL: λ → ∞ equalises connected memberships", legend=6)
