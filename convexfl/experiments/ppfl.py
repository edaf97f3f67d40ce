"""PPFL: memberships over rounds (Fig. 6) and the GLMM equivalence (Thm 3)."""

from __future__ import annotations

import numpy as np

from .._validation import as_int
from ._common import _jsonready, _row, _seed


def ppfl_memberships(*, n_clients: int = 30, n_groups: int = 3, n_components: int = 3,
                     rounds: int = 150, snapshot_rounds=(0, 5, 20, 50, 150), lam: float = 1e-3,
                     theta_step: float = 4.0, pi_step: float = 2.0, local_steps: int = 5,
                     init_scale: float = 1.0, random_state=0) -> dict:
    r"""PPFL's membership vectors during training (Di et al. Fig. 6, on scikit-learn's digits).

    The pathological label-group split of the digits (:func:`convexfl.datasets.ppfl.
    digits_label_groups`, the paper's MNIST construction) with the binary GLM target "digit ≥
    5" (the convex part of the package is GLMs; the paper's Fig. 6 uses a 10-class DNN), the
    paper's cosine label affinity, Bernoulli parameter mixture (12), and Algorithm 3
    (alternating) on the federated runtime. ``Π`` is recorded before training (round "0":
    all ``1/K``) and after each round in ``snapshot_rounds``.

    ``purity`` per snapshot: the share of clients whose largest membership is the canonical
    model most used by their label group, with distinct models for distinct groups (Hungarian
    matching of groups to canonical models); ``mean_max`` the mean largest membership (1 =
    one-hot).

    Returns
    -------
    dict
        ``snapshots`` ({round: Π (N, K)}), ``client_group``, ``objective`` (per round),
        ``summary``.
    """
    from scipy.optimize import linear_sum_assignment

    from ..datasets.ppfl import digits_label_groups
    from ..federated import run_federated
    from ..ppfl import PPFLProblem, alternating, cosine_label_affinity

    seed = _seed(random_state)
    rounds = as_int(rounds, "rounds", low=1)
    wanted = sorted({as_int(r, "snapshot_rounds", low=0, high=rounds) for r in snapshot_rounds})
    s = digits_label_groups(n_clients, n_groups, random_state=seed)
    y = (s.y >= 5).astype(float)
    prob = PPFLProblem(s.X, y, s.groups, n_components=n_components, family="binomial",
                       form="parameter", lam=lam,
                       affinity=cosine_label_affinity(s.y, s.groups))
    init = prob.initial_point(np.random.RandomState(seed), init_scale)
    alg = alternating(prob, init=init, theta_step=theta_step, pi_step=pi_step,
                      local_steps=local_steps)
    snaps = {0: np.array(init[2], float)} if 0 in wanted else {}

    def keep(record, server_state, client_states):
        if record.round + 1 in wanted:
            snaps[record.round + 1] = server_state["Pi"].copy()

    result = run_federated(alg, prob.client_data(), rounds=rounds, random_state=seed,
                           callback=keep, progress=False)
    g = s.client_group

    def purity(P):
        G = np.array([P[g == k].mean(axis=0) for k in range(int(g.max()) + 1)])
        rows, cols = linear_sum_assignment(-G)
        target = np.full(int(g.max()) + 1, -1)
        target[rows] = cols
        return float(np.mean(np.argmax(P, axis=1) == target[g]))

    metrics = {int(r): {"purity": purity(P), "mean_max": float(P.max(axis=1).mean())}
               for r, P in snaps.items()}
    objective = result.history.column("objective")
    last = max(snaps)
    summary = {
        "n_clients": int(n_clients), "n_groups": int(len(s.label_groups)),
        "label_groups": [list(map(int, lg)) for lg in s.label_groups],
        "n_components": int(n_components), "lam": lam, "rounds": rounds,
        "snapshots": {str(r): m for r, m in metrics.items()},
        "final_purity": metrics[last]["purity"], "final_mean_max": metrics[last]["mean_max"],
        "objective_first": float(objective[0]), "objective_last": float(objective[-1]),
        "paper": "Fig. 6 (MNIST, 10-class DNN): memberships identify each client's group "
                 "after a few rounds and tend to unit vectors",
    }
    summary["paper_vs_ours"] = [
        _row("clients whose largest membership is their group's canonical model",
             "all, after a few rounds (Fig. 6, heatmap)", metrics[last]["purity"],
             "share of clients", f"after {last} rounds; digits, binary GLM target"),
        _row("mean largest membership (1 = unit vectors)", "→ 1 (Fig. 6)",
             metrics[last]["mean_max"], "—", f"after {last} rounds")]
    return {"snapshots": snaps, "client_group": g, "objective": objective,
            "label_groups": s.label_groups, "summary": _jsonready(summary)}


def _glmm_dataset(name):
    import os

    import statsmodels.api as sm

    if name == "grunfeld":
        d = sm.datasets.grunfeld.load_pandas().data
        X = sm.add_constant(d[["value", "capital"]]).to_numpy(dtype=float)
        return d["invest"].to_numpy(dtype=float), X, d["firm"].to_numpy(), "value"
    if name == "dietox":
        import pandas as pd
        import statsmodels
        path = os.path.join(os.path.dirname(statsmodels.__file__), "regression", "tests",
                            "results", "dietox.csv")
        d = pd.read_csv(path)
        X = sm.add_constant(d[["Time"]]).to_numpy(dtype=float)
        return d["Weight"].to_numpy(dtype=float), X, d["Pig"].to_numpy(), "Time"
    raise ValueError(f"names: expected 'grunfeld' or 'dietox', got {name!r}")


def ppfl_glmm(*, names=("grunfeld", "dietox"), random=("intercept", "slope")) -> dict:
    r"""PPFL's GLMM equivalence (Di et al. Thm 3) on statsmodels' bundled panels: the PPFL
    solution (:func:`convexfl.ppfl.fit_mixed_model`) against ``statsmodels`` ``MixedLM``
    (REML variances plugged in), random intercept and random intercept + slope.

    ``grunfeld``: investment of 10 firms over 20 years on firm value and capital;
    ``dietox``: weights of 72 pigs over 12 weeks (the file statsmodels ships for its tests).

    Returns
    -------
    dict
        ``fits`` ({"<data>/<random>": {"ppfl", "mixedlm" (fixed and random effects)}}) and
        ``summary`` (max absolute differences per fit).
    """
    import warnings

    import statsmodels.api as sm

    from ..ppfl import fit_mixed_model

    fits, rows = {}, []
    for name in names:
        y, X, g, slope = _glmm_dataset(name)
        for kind in random:
            Z = X[:, :1] if kind == "intercept" else X[:, :2]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ml = sm.MixedLM(y, X, groups=g, exog_re=Z).fit(reml=True, method="lbfgs")
            out = fit_mixed_model(y, X, Z, g, sigma2=ml.scale, cov_re=np.asarray(ml.cov_re))
            blups = np.array([np.asarray(ml.random_effects[k]) for k in out.groups])
            fe = np.asarray(ml.fe_params)
            key = f"{name}/{kind}"
            fits[key] = {"ppfl_fixed": out.fixed_effects, "ppfl_random": out.random_effects,
                         "mixedlm_fixed": fe, "mixedlm_random": blups}
            rows.append({"fit": key, "n_groups": int(len(out.groups)), "n_samples": int(len(y)),
                         "random_effects": "intercept" if kind == "intercept" else
                         f"intercept + {slope}",
                         "lam": float(out.lam), "sigma2": float(ml.scale),
                         "max_abs_diff_fixed": float(np.max(np.abs(out.fixed_effects - fe))),
                         "max_abs_diff_blups": float(np.max(np.abs(out.random_effects - blups))),
                         "max_abs_blup": float(np.max(np.abs(blups))),
                         "ppfl_converged": bool(out.converged),
                         "mixedlm_converged": bool(ml.converged)})
    summary = {"fits": rows,
               "max_abs_diff": max(max(r["max_abs_diff_fixed"], r["max_abs_diff_blups"])
                                   for r in rows),
               "paper": "Thm 3 / App. A.2: the LMM with known variances is a PPFL problem "
                        "(no numbers printed)"}
    summary["paper_vs_ours"] = [
        _row(f"{r['fit']}: max |Δ| fixed effects / BLUPs vs MixedLM", "equal (Thm 3)",
             [r["max_abs_diff_fixed"], r["max_abs_diff_blups"]], f"λ = {r['lam']:.3g}",
             f"BLUPs up to {r['max_abs_blup']:.3g} in size") for r in rows]
    return {"fits": fits, "summary": _jsonready(summary)}
