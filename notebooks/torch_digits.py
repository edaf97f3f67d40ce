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
import json
import os
from pathlib import Path

from convexfl import experiments as E
from convexfl import plotting as P

# SMALL: tiny sizes for CI (CONVEXFL_SMALL=1); CONVEXFL_OUT: where the PNGs and JSON go
SMALL = os.environ.get("CONVEXFL_SMALL") == "1"
_here = Path(__file__).resolve().parent if "__file__" in globals() else Path.cwd()
if _here.name != "notebooks" and (_here / "notebooks").is_dir():
    _here = _here / "notebooks"
OUT = Path(os.environ.get("CONVEXFL_OUT") or _here / "out")
OUT.mkdir(parents=True, exist_ok=True)


def show(paths):
    """Display the PNGs inline under Jupyter; print their paths when run as a script."""
    try:
        from IPython import get_ipython
        from IPython.display import Image, display
        inline = get_ipython() is not None
    except ImportError:
        inline = False
    for p in paths:
        if inline:
            display(Image(filename=str(p)))
        else:
            print("wrote", p)


def save(name, summaries):
    """Write the notebook's numbers (JSON, no NaN) next to its figures."""
    path = OUT / f"{name}.json"
    path.write_text(json.dumps({"small": SMALL, **summaries}, indent=2, allow_nan=False))
    print("wrote", path)


print(f"SMALL = {SMALL}; output folder: {OUT}")

# %%
tab = E.torch_digits(**E.sizes("torch_digits", SMALL))
print(tab["summary"]["description"])
print(tab["markdown"])
show(P.study_figures("torch_digits", tab, OUT))

# %%
save("torch_digits", {"torch_digits": tab["summary"]})
