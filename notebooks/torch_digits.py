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
# # Torch back-ends on the digits split — the comparison table
#
# Every deep variant of the package (PPFL-DNN with architectures 2a/2b and schedules
# alternating/RBCD, PerFed-CKT with heterogeneous client models, CGPFL-DNN, sum-of-norms
# heads) against FedAvg and local training, on scikit-learn's digits split into clients with
# label-permuted groups (`convexfl.torch.digits_federation`), the same number of rounds for
# all. `python -m convexfl.torch` prints the same table. SMALL mode runs three methods for one
# round (a smoke test, not a result).

# %%

from _common import OUT, SMALL, save, show  # notebooks/_common.py

from convexfl import experiments as E
from convexfl import plotting as P

print(f"SMALL = {SMALL}; output folder: {OUT}")

# %%
tab = E.torch_digits(**E.sizes("torch_digits", SMALL))
print(tab["summary"]["description"])
print(tab["markdown"])
show(P.study_figures("torch_digits", tab, OUT))

# %%
save("torch_digits", {"torch_digits": tab["summary"]})
