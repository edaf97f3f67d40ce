"""PDMM (paper Algorithm 1): E[F(x^t) − F*] = O(1/t), and its message accounting.

Checked at the paper's λ (App. C: above full fusion, one cluster, as in its Fig. 5) and at a
λ with three clusters (0.3 λ̂), where the 1/t regime starts only after ~10⁴ iterations.

The paper (Sec. IV) states ``E[F(x^(t)) − F*] = O(1/t)`` "by applying Theorem 3 in [16]"
(Wang, Banerjee & Luo, PDMM, NIPS 2014). That theorem is an *ergodic* bound, on the
average iterate ``x̄^t = (1/t) Σ_{s≤t} x^s`` (and it bounds the split objective plus a
constraint-violation term, which dominates F(x̄^t) − F* up to constants). The paper's Fig. 5
plots the *last* iterate. The verdict here uses the average iterate (what the cited bound
covers); the last iterate is reported alongside.

PDMM's iterates are observed by running its numba kernel one iteration at a time (a wrapper
around ``convexfl.solvers._pdmm_kernels.pdmm_run`` for the duration of the solve, restored
afterwards): the iterates are PDMM's own — the history's objective is checked against
F(x^t) at the observed iterates, and every iteration's selected users S_P are recorded to
recount the messages independently.
"""

from __future__ import annotations

import inspect
import math

import numpy as np

import convexfl as cfl

from .._common import figure_path, finish, pyplot, save_counterexample
from ..registry import Control, outcome, register

ID = "armacki.pdmm_rate"
LAM_PAPER = 0.02        # App. C, in eq. (3)'s convention
CLUSTERED = 0.3         # the second λ: this fraction of the fusion threshold λ̂ (3 clusters)
SLOPE_TOL = 0.1         # O(1/t) holds if the fitted tail slope is ≤ −1 + SLOPE_TOL
TAIL = 0.1              # the fit uses t ∈ [TAIL·T, T]
PAPER = {"rho": 10.0, "eta": 10.0, "tau": 0.8, "nu": 0.2, "fraction": 0.4,
         "zero_start": True}
_PER_ITER = ("obj", "up", "down", "up_saved", "down_saved")


class _Tracer:
    """Run PDMM's kernel one iteration at a time and record what happens (see module doc)."""

    def __init__(self, prob, record_at):
        from convexfl.solvers import _pdmm_kernels as pk
        from convexfl.units import standardise

        # the kernel runs on the standard problem (convexfl.units): F = σ F' there
        self.pk, self.orig = pk, pk.pdmm_run
        units, std = standardise(prob)
        self.objective = lambda Z: units.fscale * std.objective(Z)
        names = list(inspect.signature(self.orig.py_func).parameters)
        missing = [n for n in ("sel", "X", *_PER_ITER) if n not in names]
        if missing:
            raise RuntimeError(f"pdmm_run's signature changed (no {missing}); update "
                               f"{__name__}._Tracer")
        self.idx = {n: names.index(n) for n in ("sel", "X", *_PER_ITER)}
        self.record_at = set(int(t) for t in record_at)
        self.total, self.n = None, 0
        self.t, self.f_avg, self.f_last = [], [], []
        self.selections, self.outside_changes, self.diverged_at = [], 0, None

    def __enter__(self):
        self.pk.pdmm_run = self._run
        return self

    def __exit__(self, *exc):
        self.pk.pdmm_run = self.orig
        return False

    def _run(self, *args):
        args = list(args)
        sel, X = args[self.idx["sel"]], args[self.idx["X"]]
        per = {n: args[self.idx[n]] for n in _PER_ITER}
        for t in range(sel.shape[0]):
            args[self.idx["sel"]] = sel[t:t + 1]
            for n in _PER_ITER:
                args[self.idx[n]] = per[n][t:t + 1]
            before = X.copy()
            self.orig(*args)
            changed = np.flatnonzero(np.any(X != before, axis=1))
            self.outside_changes += int(np.setdiff1d(changed, sel[t]).size)
            self.selections.append(sel[t].copy())
            self.n += 1
            if self.diverged_at is None and not np.all(np.isfinite(X)):
                self.diverged_at = self.n
            if self.diverged_at is not None:
                continue
            self.total = X.copy() if self.total is None else self.total + X
            if self.n in self.record_at:
                self.t.append(self.n)
                self.f_avg.append(self.objective(self.total / self.n))
                self.f_last.append(self.objective(X))


def run_traced(prob, T, *, seed=0, **options):
    """PDMM on ``prob`` for exactly ``T`` iterations (paper defaults unless overridden),
    observed by :class:`_Tracer`. Returns ``(solution or None, tracer, error or None)``."""
    ts = np.unique(np.r_[np.geomspace(1, T, 80).astype(int), T])
    opts = {**PAPER, **options}
    with _Tracer(prob, ts) as tr:
        try:
            sol = cfl.solve(prob, method="pdmm", max_iter=T, tol=1e-300, polish=False,
                            random_state=seed, check_every=T, **opts)
            err = None
        except (ValueError, FloatingPointError, cfl.SolverError) as exc:
            sol, err = None, exc
    return sol, tr, err


def tail_slope(t, gap, T, tail=TAIL):
    """Least-squares slope of log(gap) against log(t) over ``t ∈ [tail·T, T]``."""
    t, gap = np.asarray(t, float), np.asarray(gap, float)
    sel = (t >= tail * T) & np.isfinite(gap) & (gap > 0)
    if sel.sum() < 3:
        return math.nan
    return float(np.polyfit(np.log(t[sel]), np.log(gap[sel]), 1)[0])


def expected_messages(prob, selections, splitting="ordered"):
    """The paper's accounting recomputed from the selected users of every iteration:
    uplink = S_P = |x's updated| + |z's updated| (user i owns one z per ordered pair
    (i, j), j a neighbour), downlink = S_P + S_D (S_D: the duals of the updated z's)."""
    deg = prob.graph.degree if splitting == "ordered" else np.bincount(
        prob.graph.edges[:, 0], minlength=prob.n_users)
    up = np.array([len(s) + int(deg[s].sum()) for s in selections])
    return up, up + np.array([int(deg[s].sum()) for s in selections])


def check(prob, T, *, seeds=(0,), f_star=None, **options) -> dict:
    """PDMM's rate and message accounting on ``prob`` (λ in the SON convention).

    ``F*`` from the cvxpy reference (certified) unless given. Runs ``T`` iterations per seed
    (``options`` override the paper's defaults) and returns: ``f_star``, ``ref_kkt``,
    ``ref_clusters`` (clusters of the reference solution; 0 when ``f_star`` is given),
    ``slope_avg`` (tail slope of E[F(x̄^t) − F*]), ``slope_last`` (of E[F(x^t) − F*]),
    ``gap_avg``/``gap_last`` (mean over seeds at the recorded t), ``t``, ``messages_exact``
    (history == recount, every iteration), ``n_selected``, ``outside_changes`` (x's changed
    outside S_P: 0 by (S4)), ``history_matches`` (history objective == F at the observed
    iterates), ``diverged``.
    """
    ref_kkt, ref_clusters = math.nan, 0
    if f_star is None:
        ref = cfl.solve(prob, method="cvxpy", tol=1e-10)
        f_star, ref_kkt, ref_clusters = ref.objective, ref.kkt_residual, ref.n_clusters
    g_avg, g_last, t_rec = [], [], None
    msgs_ok, hist_ok, outside, n_sel, diverged, last_hist = True, True, 0, set(), False, []
    for s in seeds:
        sol, tr, err = run_traced(prob, T, seed=s, **options)
        outside += tr.outside_changes
        n_sel |= {len(x) for x in tr.selections}
        if err is not None or tr.diverged_at is not None or sol is None:
            diverged = True
        t_rec = np.array(tr.t)
        g_avg.append(np.array(tr.f_avg) - f_star)
        g_last.append(np.array(tr.f_last) - f_star)
        if sol is not None:
            h = sol.history
            up, down = expected_messages(prob, tr.selections)
            msgs_ok &= (len(h["uplink"]) == T and np.array_equal(h["uplink"], up)
                        and np.array_equal(h["downlink"], down)
                        and h["messages"]["uplink"] == int(up.sum())
                        and h["messages"]["downlink"] == int(down.sum()))
            obj = np.asarray(h["objective"])
            if len(tr.t):
                hist_ok &= bool(np.allclose(obj[np.array(tr.t) - 1], tr.f_last, rtol=1e-12,
                                            atol=1e-12))
            last_hist.append(obj - f_star)
    m = min(len(g) for g in g_avg)
    ga = np.mean([g[:m] for g in g_avg], axis=0)
    gl = np.mean([g[:m] for g in g_last], axis=0)
    t_rec = t_rec[:m]
    # diverged: non-finite iterates, or a gap beyond 1e6 (1 + |F*|)
    if diverged or m < len(np.unique(np.r_[np.geomspace(1, T, 80).astype(int), T])) or \
            not np.all(np.isfinite(gl)) or np.max(gl) > 1e6 * (1 + abs(f_star)):
        diverged = True
    return {"f_star": float(f_star), "ref_kkt": float(ref_kkt), "ref_clusters": ref_clusters,
            "t": t_rec, "gap_avg": ga,
            "gap_last": gl, "slope_avg": tail_slope(t_rec, ga, T),
            "slope_last": tail_slope(t_rec, gl, T), "messages_exact": bool(msgs_ok),
            "history_matches": bool(hist_ok), "outside_changes": int(outside),
            "n_selected": sorted(n_sel), "diverged": bool(diverged), "T": T,
            "last_history": last_hist, "n_seeds": len(seeds)}


def appc_problem(seed: int, lam_paper: float = LAM_PAPER):
    """App. C data (3 clusters × 10 users, 85 % of the cluster's points each, squared hinge
    c = 1e-3, complete graph) at the paper's λ = 0.02 of eq. (3), converted to (SON)."""
    D = cfl.datasets.armacki_ellipses(10, 170, random_state=seed)
    loss = cfl.losses.SquaredHinge.from_groups(D["X"], D["y"], D["groups"], c=1e-3)
    lam = cfl.from_paper_lambda(lam_paper, loss.n_users, "eq3")
    return cfl.SumOfNorms(loss, cfl.graphs.complete(loss.n_users), lam), D


@register(ID, paper="Armacki et al.", equation="Sec. IV (Algorithm 1), App. C (Fig. 5)",
          claim="PDMM (Algorithm 1) with ρ = 10, η = 10, τ = 4/5, ν = 1/5, 40 % of the users "
                "per iteration and a zero start has E[F(x^t) − F*] = O(1/t) (ergodic: average "
                "iterate, as in the cited PDMM theorem); per iteration it sends S_P vectors "
                "up and S_P + S_D down.",
          assumptions="App. C data, λ = 0.02 in eq. (3)'s convention (λ_SON = 2Nλ = 1.2, "
                       "above full fusion) and λ_SON = 0.3 λ̂ (three clusters), complete graph, "
                       "ordered-pair splitting (the paper's); F* from the certified cvxpy "
                       "reference; O(1/t) read as a tail slope of log E[gap] vs log t ≤ "
                       "−1 + 0.1 (tail: t ∈ [0.1T, T])")
def run(quick: bool, seed: int, out):
    T = 1000 if quick else 5000
    seeds = tuple(range(2 if quick else 5))
    prob, _ = appc_problem(seed)
    lam_hat = cfl.bounds.fusion_threshold(prob).value
    r = check(prob, T, seeds=tuple(seed * 100 + s for s in seeds))
    # the second λ, with several clusters: far slower to reach its 1/t regime (Fig. 5 has
    # one cluster), hence many more iterations
    T_k, seeds_k = (30000, seeds[:1]) if quick else (60000, seeds[:3])
    rk = check(prob.with_lam(CLUSTERED * lam_hat), T_k,
               seeds=tuple(seed * 100 + s for s in seeds_k))

    def rate_ok(x):
        return (x["slope_avg"] <= -1 + SLOPE_TOL and x["messages_exact"]
                and x["history_matches"] and x["outside_changes"] == 0 and not x["diverged"]
                and x["ref_kkt"] <= 1e-9 and x["n_selected"] == [round(0.4 * prob.n_users)])
    ok = rate_ok(r) and rate_ok(rk) and rk["ref_clusters"] >= 2
    margins = {
        "slope_average_iterate": r["slope_avg"],
        "slope_last_iterate": r["slope_last"],
        "slope_margin_avg": (-1 + SLOPE_TOL) - r["slope_avg"],
        "gap_avg_at_T": float(r["gap_avg"][-1]),
        "gap_last_at_T": float(r["gap_last"][-1]),
        "t_gap_avg_at_T": float(r["gap_avg"][-1] * T),
        "reference_kkt": r["ref_kkt"],
        "messages_exact": r["messages_exact"],
        "uplink_per_iter": int(round(0.4 * prob.n_users)) * prob.n_users,
        "downlink_per_iter": int(round(0.4 * prob.n_users)) * (2 * prob.n_users - 1),
        "x_changed_outside_S_P": r["outside_changes"],
        "lam_son": prob.lam, "lam_hat": lam_hat,
        "clustered_slope_average_iterate": rk["slope_avg"],
        "clustered_slope_last_iterate": rk["slope_last"],
        "clustered_lam_son": CLUSTERED * lam_hat,
        "clustered_n_clusters": rk["ref_clusters"],
        "clustered_iterations": T_k,
        "clustered_gap_avg_at_T": float(rk["gap_avg"][-1]),
        "clustered_t_gap_avg_peak": float(np.max(rk["t"] * rk["gap_avg"])),
        "clustered_t_gap_avg_at_T": float(rk["gap_avg"][-1] * T_k),
        "clustered_messages_exact": rk["messages_exact"],
    }
    extra = ""
    if not quick:   # informational: a tiny ρ (and η = 0) is *not* enough to break the rate
        tiny = check(prob, 2000, seeds=(seed,), f_star=r["f_star"], rho=0.01, eta=0.0)
        margins["slope_avg_rho_0.01_eta_0"] = tiny["slope_avg"]
        tau2 = check(prob, 2000, seeds=(seed,), f_star=r["f_star"], tau=2.0)
        margins["slope_avg_tau_2"] = tau2["slope_avg"]
        extra = (f" Informational (2000 iterations, one seed): with ρ = 0.01, η = 0 the "
                 f"average-iterate slope is {tiny['slope_avg']:.3f} and with τ = 2 it is "
                 f"{tau2['slope_avg']:.3f} (diverged: {tau2['diverged']}) — neither a tiny ρ "
                 "nor τ = 2 breaks the rate here: the damping conditions are sufficient, not "
                 "necessary.")
    cex = None
    if not ok:
        cex = save_counterexample(out, ID, t=r["t"], gap_avg=r["gap_avg"],
                                  gap_last=r["gap_last"], lam=prob.lam)
    # control: dual over-relaxation τ = 3 (far outside the damping that stabilises PDMM)
    T_c = 200 if quick else 400
    c = check(prob, T_c, seeds=(seed,), f_star=r["f_star"], tau=3.0)
    ck = check(prob.with_lam(CLUSTERED * lam_hat), T_c, seeds=(seed,), f_star=rk["f_star"],
               tau=3.0)
    c_holds = any(not x["diverged"] and x["slope_avg"] <= -1 + SLOPE_TOL for x in (c, ck))
    finite = c["gap_last"][np.isfinite(c["gap_last"])]
    control = Control("τ = 3 (dual step 3ρ, no longer damped; paper τ = 4/5), at both λ: "
                      "PDMM diverges, so the O(1/t) claim fails",
                      "holds" if c_holds else "fails",
                      {"iterations": T_c, "diverged": c["diverged"],
                       "slope_average_iterate": c["slope_avg"],
                       "max_finite_gap": float(finite.max()) if finite.size else math.nan,
                       "clustered_diverged": ck["diverged"]})
    fig, rel = figure_path(out, ID)
    _plot(r, c, rk, fig)
    return outcome(
        ID, outcome="holds" if ok else "fails", margins=margins, instances=len(seeds),
        seed=seed, control=control, figure=rel, counterexample=cex,
        details=f"App. C data (N = {prob.n_users}), λ = 0.02 in eq. (3) = {prob.lam:g} in "
                f"(SON) — above the exact fusion threshold λ̂ = {lam_hat:.4g}, so F* is the "
                "consensus (global) model's objective; F* certified by cvxpy (KKT "
                f"{r['ref_kkt']:.1e}). {len(seeds)} seeds × {T} iterations, paper defaults. "
                f"Tail fit over t ∈ [{TAIL:g}T, T] of log E[F − F*] vs log t: average iterate "
                f"{r['slope_avg']:.3f}, last iterate {r['slope_last']:.3f} (both ≤ −1 + "
                f"{SLOPE_TOL:g}: the claim holds; the last iterate, which Fig. 5 plots, even "
                "converges faster than 1/t here; the average iterate's gap decays more "
                "slowly than the last iterate's, as the early iterates weigh on the average). "
                "The gap is the same in eq. (3)'s convention up to the factor 1/N, so the "
                "slopes are convention-free. Messages: the history's uplink/downlink equal, "
                "at every iteration, the recount from the selected users (uplink = |S_P| x's "
                f"+ their {prob.n_users - 1} z's each = {margins['uplink_per_iter']}, "
                f"downlink = that + S_D = {margins['downlink_per_iter']}); no x outside S_P "
                "changed (S4); the history's objective equals F at the observed iterates."
                f" Several clusters: at λ_SON = {CLUSTERED:g} λ̂ = {CLUSTERED * lam_hat:.4g} the "
                f"reference solution has {rk['ref_clusters']} clusters; {len(seeds_k)} seed(s) "
                f"× {T_k} iterations: tail slopes {rk['slope_avg']:.3f} (average iterate) and "
                f"{rk['slope_last']:.3f} (last). The rate holds, but its regime starts late: "
                f"t·E[F(x̄^t) − F*] grows to {margins['clustered_t_gap_avg_peak']:.3g} before "
                f"it falls ({margins['clustered_t_gap_avg_at_T']:.3g} at T; "
                f"{margins['clustered_t_gap_avg_peak'] / rk['gap_avg'][0]:.3g} times the "
                "initial gap), so a thousand iterations (enough above fusion) would show a "
                "far shallower slope. Messages recount exactly at this λ too: "
                f"{rk['messages_exact']}." + extra +
                f" Control τ = 3: diverged = {c['diverged']} (gap up to "
                f"{control.margins['max_finite_gap']:.2e} within {T_c} iterations).")


def _plot(r, c, rk, path):
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for i, g in enumerate(r["last_history"]):
        t = np.arange(1, len(g) + 1)
        ax.loglog(t, np.maximum(g, 1e-16), color="#0969da", alpha=0.25, lw=0.8,
                  label="last iterate, per seed" if i == 0 else None)
    ax.loglog(r["t"], np.maximum(r["gap_last"], 1e-16), color="#0969da", lw=2,
              label=f"E[F(x^t)] − F* (slope {r['slope_last']:.2f})")
    ax.loglog(r["t"], np.maximum(r["gap_avg"], 1e-16), color="#bc4c00", lw=2,
              label=f"E[F(x̄^t)] − F*, average iterate (slope {r['slope_avg']:.2f})")
    ax.loglog(rk["t"], np.maximum(rk["gap_avg"], 1e-16), color="#8250df", lw=2,
              label=f"{rk['ref_clusters']} clusters: average iterate "
                    f"(slope {rk['slope_avg']:.2f})")
    ax.loglog(rk["t"], np.maximum(rk["gap_last"], 1e-16), color="#8250df", lw=1, ls="--",
              label=f"{rk['ref_clusters']} clusters: last iterate (slope {rk['slope_last']:.2f})")
    t0 = r["t"][r["t"] >= TAIL * r["T"]][0]
    g0 = r["gap_avg"][r["t"] >= TAIL * r["T"]][0]
    tt = np.array([t0, r["T"]], float)
    ax.loglog(tt, g0 * t0 / tt, color="#555", ls="--", lw=1, label="C/t")
    cg = np.where(np.isfinite(c["gap_last"]), c["gap_last"], np.nan)
    ax.loglog(c["t"], np.clip(cg, 1e-16, 1e6), color="#cf222e", lw=1.2,
              label="control τ = 3 (clipped at 1e6)")
    finish(fig, ax, path, xlabel="iteration t", ylabel="F − F* (SON convention)",
           title="PDMM on the App. C data (paper Fig. 5): fused λ and 3 clusters", legend=7)
