"""CGPFL with K = 1 is pFedMe (T. Dinh et al. 2020), iterate for iterate."""

from __future__ import annotations

import numpy as np

from convexfl import baselines, cgpfl
from convexfl.datasets import clustered_mlr

from ..registry import Control, outcome, register

ID = "cgpfl.k1_pfedme"
KW = dict(lam=3.0, lr=0.03, inner_steps=3, local_steps=4)


def check(data, *, n_clusters=1, rounds=5, participation=1.0, random_state=0, **kw) -> dict:
    """Largest difference between CGPFL(K) and the independent pFedMe, round by round, of the
    server models and the personalised models (same data, seeds and hyper-parameters)."""
    kw = {**KW, **kw}
    p, c = data.n_features, data.n_classes
    traces = {}
    for name, alg, get in (("cgpfl", cgpfl.cgpfl(p, c, n_clusters=n_clusters, **kw),
                            lambda s: s["Omega"][0]),
                           ("pfedme", baselines.pfedme(p, c, **kw), lambda s: s["w"])):
        rows = []
        baselines.run(alg, data, rounds=rounds, participation=participation,
                      random_state=random_state,
                      callback=lambda rec, st, cs, rows=rows, get=get: rows.append(
                          (get(st).copy(), np.stack([s["theta"] for s in cs]))))
        traces[name] = rows
    diff = max(max(np.abs(a[0] - b[0]).max(), np.abs(a[1] - b[1]).max())
               for a, b in zip(traces["cgpfl"], traces["pfedme"], strict=True))
    return {"max_abs_difference": float(diff), "rounds": rounds}


@register(ID, paper="CGPFL", equation="(2) with K = 1; Algorithm 1",
          claim="With K = 1 CGPFL is pFedMe: the same iterates for the same seeds.",
          assumptions="ℓ2-regularised multinomial logistic regression; server step α equal "
                      "to pFedMe's β; same sampling seeds")
def run(quick: bool, seed: int, out):
    n_inst = 2 if quick else 6
    diffs = []
    for t in range(n_inst):
        data = clustered_mlr(10, 2, 4, 3, n_samples=30, random_state=seed * 100 + t)
        part = 1.0 if t % 2 == 0 else 0.5
        diffs.append(check(data, participation=part, random_state=seed + t)["max_abs_difference"])
    data = clustered_mlr(10, 2, 4, 3, n_samples=30, random_state=seed)
    ctrl = check(data, n_clusters=2)["max_abs_difference"]
    control = Control("K = 2 (not pFedMe): the iterates must differ",
                      "holds" if ctrl == 0 else "fails", {"max_abs_difference": ctrl})
    return outcome(ID, outcome="holds" if max(diffs) == 0 else "fails",
                   margins={"max_abs_difference": max(diffs)}, instances=n_inst, seed=seed,
                   control=control,
                   details="Bit-identical server and personalised models in every round "
                           "(full and half participation)." if max(diffs) == 0 else
                   f"Largest difference {max(diffs):.3g}.")
