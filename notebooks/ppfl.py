# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # PPFL (Di, Yang, Ye, Chang) — membership vectors during training, and the GLMM equivalence
#
# **Memberships (paper Fig. 6).** The paper trains on MNIST split into label groups and shows
# the matrix of membership vectors Π (clients × canonical models) during training: from all
# 1/K it identifies each client's group after a few rounds and tends to unit vectors. Here:
# scikit-learn's digits with the same pathological split (30 clients in 3 label groups), the
# cosine label affinity of the paper, K = 3 canonical models, and — the convex part of the
# package being GLMs — a Bernoulli GLM for the binary target "digit ≥ 5" under the parameter
# mixture (12), trained by Algorithm 3 (alternating) on the federated runtime.
#
# **GLMM equivalence (Thm 3, App. A.2).** A linear mixed model with known variances is a PPFL
# problem with λ = (σ²/σ_b²)/(2NM); solved as such, it must give statsmodels' MixedLM fixed
# effects and BLUPs (REML variances plugged in). Data bundled with statsmodels: grunfeld
# (10 firms × 20 years) and dietox (72 pigs × 12 weeks), random intercept and random
# intercept + slope.

# %%

from _common import OUT, SMALL, save, show  # notebooks/_common.py

from convexfl import experiments as E
from convexfl import plotting as P

print(f"SMALL = {SMALL}; output folder: {OUT}")

# %% [markdown]
# ## Membership vectors during training

# %%
mem = E.ppfl_memberships(**E.sizes("ppfl_memberships", SMALL))
for r, m in mem["summary"]["snapshots"].items():
    print(f"round {r:>4}: share of clients on their group's model {m['purity']:.2f}, "
          f"mean largest membership {m['mean_max']:.2f}")
show(P.study_figures("ppfl_memberships", mem, OUT))

# %% [markdown]
# ## GLMM equivalence against statsmodels

# %%
glmm = E.ppfl_glmm(**E.sizes("ppfl_glmm", SMALL))
for r in glmm["summary"]["fits"]:
    print(f"{r['fit']:>20}: max |Δ fixed| {r['max_abs_diff_fixed']:.1e}, max |Δ BLUP| "
          f"{r['max_abs_diff_blups']:.1e} (λ = {r['lam']:.3g})")
show(P.study_figures("ppfl_glmm", glmm, OUT))

# %%
print(E.format_rows(mem["summary"]["paper_vs_ours"] + glmm["summary"]["paper_vs_ours"]))
save("ppfl", {"ppfl_memberships": mem["summary"], "ppfl_glmm": glmm["summary"]})
