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
# # PerFed-CKT (Cho, Wang, Chiruvolu, Joshi) — the toy example and Theorem 4.2
#
# **Toy example (Fig. 1, App. E).** Linear regression in R² with three clients,
# w_k = θ + ζ_k, θ ~ U(−10, 10)², ζ_k ~ N(0, σ_k² I) with σ_k = (2, 5, 200): clients 0 and 1
# are alike, client 2 is not. FedAvg fits one model for all; co-distillation on public data
# (λ = 50) without clustering pulls every client towards the average of all logits; with
# clustering (k-means on the logits) each client is pulled towards its own cluster. Sample
# size (20) and noise (σ = 1) are not in the paper.
#
# **Theorem 4.2.** With X_kᵀX_k = βI and PᵀP = νI the paper claims that λ_k* = σ²/(υ_k²ν)
# and α_ki* = B_k/(σ² + βυ_i²) minimise the conditional expected test loss and give the
# Bayes posterior mean. We evaluate the exact risk of the printed closed form (both readings
# of α_kk), of a corrected B_k, of the numerical minimiser and of the posterior mean.

# %%

from _common import OUT, SMALL, save, show  # notebooks/_common.py

from convexfl import experiments as E
from convexfl import plotting as P

print(f"SMALL = {SMALL}; output folder: {OUT}")

# %% [markdown]
# ## Toy example

# %%
toy = E.ckt_toy(**E.sizes("ckt_toy", SMALL))
print(toy["examples"][0].summary())
print("clustering closest for every client:",
      [r["clustering_closest"] for r in toy["summary"]["per_seed"]])
show(P.study_figures("ckt_toy", toy, OUT))

# %% [markdown]
# ## Theorem 4.2

# %%
thm = E.ckt_theorem_4_2(**E.sizes("ckt_theorem_4_2", SMALL))
print(thm["comparisons"][0].summary())
show(P.study_figures("ckt_theorem_4_2", thm, OUT))

# %%
print(E.format_rows(toy["summary"]["paper_vs_ours"] + thm["summary"]["paper_vs_ours"]))
save("perfed_ckt", {"ckt_toy": toy["summary"], "ckt_theorem_4_2": thm["summary"]})
