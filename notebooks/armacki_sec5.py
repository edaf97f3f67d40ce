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
# # Armacki et al., Sec. V — personalisation, generalisation and clustering vs λ
#
# Three clusters of users; in each cluster the two classes are uniform on two overlapping
# ellipses in R² (not linearly separable), 200 training points per cluster, 20 users per
# cluster each sampling 10 of them, squared hinge loss with c = 1e-3
# (`convexfl.datasets.armacki_ellipses`; the paper does not print its ellipses' parameters,
# ours are documented there). We compare the sum-of-norms model (SON), the squared penalty
# (4), the global (1), local (2) and oracle models: average test accuracy (Fig. 2) and
# average within-cluster model distance (Fig. 3) against λ, then the exact λ-interval of
# 3-cluster recovery against the theorems' intervals.
#
# **Conventions.** Every λ of convexfl is in the SON form Σ f_i + λ Σ_{i<j} ‖x_i − x_j‖. The
# paper's eq. (3), (1/N) Σ f_i + λ_p Σ_{i≠j} ‖x_i − x_j‖, is the same problem with
# λ_SON = 2Nλ_p (N = 60 here); eq. (14) (no 1/N) has λ_SON = 2λ_14. The figures use the
# paper's eq. (3)/(4) units; the tables give both.

# %%

from _common import OUT, SMALL, save, show  # notebooks/_common.py

from convexfl import experiments as E
from convexfl import plotting as P

print(f"SMALL = {SMALL}; output folder: {OUT}")

# %% [markdown]
# ## Accuracy and model distance vs λ (Figs. 2 and 3), recovery interval
#
# `armacki_sec5_study` runs `armacki_sec5` on a λ grid tied to the exact fusion threshold
# λ̂ (above which every model is the global one), a warm-started path for the cluster
# counts, and `recovery_interval` for the planted partition (exact, by the partition
# certificate) with Theorems 1+2, 3 and the conservative bounds (23)/(24).

# %%
sec5 = E.armacki_sec5_study(**E.sizes("armacki_sec5", SMALL))
s = sec5["summary"]
print(f"{s['n_users']} users, SON solver: {s['method']}; λ̂ = {s['lam_hat']:.4g} (SON) = "
      f"{s['lam_hat'] / s['lam_paper_factor']:.3g} (eq. (3))")
print(f"peak accuracy: SON {s['peak_accuracy_son']:.3f}, squared penalty "
      f"{s['peak_accuracy_squared']:.3f}; global {s['global_accuracy']:.3f}, "
      f"local {s['local_accuracy']:.3f}, oracle {s['oracle_accuracy']:.3f}")
print("exact 3-cluster recovery interval:", s["recovery_interval"])

# %%
show(P.study_figures("armacki_sec5", sec5, OUT))

# %% [markdown]
# ## The paper's numbers next to ours
#
# Peak accuracies are read off the grid. On our ellipses the planted 3-cluster structure is
# **never** the SON solution (the recovery interval is empty: before the clusters' models
# fuse inside, the clusters fuse with each other, and the few-cluster solutions are one big
# group plus outlying users), and the paper's interval (0.0892, 0.0919) lies beyond our λ̂
# under either reading of its convention: the paper's 3-cluster recovery is **not reproduced**
# on these ellipses (the paper does not print its ellipse parameters). At the peak-accuracy λ
# every user's model is distinct. `convexfl.datasets.ellipse_search` searches the ellipse
# geometry (centre distance, rotation, semi-axes, class overlap) inside the paper's
# description: no geometry of its grid has a window at 10 samples per user (rows "closest
# ellipses" below: φ = max_k ρ_k/λ > 1 just below the clusters' first merge); the closest
# has one with 40. The App. C setting (85 % of the points per user, notebook
# `armacki_appc.py`) does have an exact recovery interval.

# %%
print(E.format_rows(s["paper_vs_ours"]))
save("armacki_sec5", {"armacki_sec5": s})
