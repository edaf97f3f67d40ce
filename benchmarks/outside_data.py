"""The front door on data we did not write: ``ConvexClustering()`` with its defaults (kNN 10,
unit weights, a 30-λ path, λ by the most persistent cluster count, certified 1e-6) on the
data sets bundled with scikit-learn and statsmodels (no network).

``python -m benchmarks.outside_data [--out DIR] [--sets NAME,...]``

Each row: the data's shape, the fit's wall time, the chosen λ (SON, the data's units) and
cluster count, the certified KKT residual of the fit and of every λ of its path, and the
method that answered. Writes ``outside_data.json`` (rewritten after each set).
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings

import numpy as np

from convexfl.estimators import ConvexClustering

from ._report import print_table, yes_no

SETS = ("sk:iris", "sk:wine", "sk:breast_cancer", "sk:diabetes", "sk:linnerud", "sm:longley",
        "sm:stackloss", "sm:statecrime", "sm:star98", "sm:fair", "sk:digits")


def load(name):
    """The numeric columns of a bundled data set: ``sk:<load_ name>`` (scikit-learn) or
    ``sm:<dataset>`` (statsmodels; rows with a missing value dropped)."""
    source, _, key = name.partition(":")
    if source == "sk":
        import sklearn.datasets

        return getattr(sklearn.datasets, "load_" + key)().data.astype(float)
    import statsmodels.api as sm

    frame = getattr(sm.datasets, key).load_pandas().data
    return frame.select_dtypes("number").dropna().to_numpy(float)


def _known(name):
    source, _, key = name.partition(":")
    if source == "sk":
        import sklearn.datasets

        return callable(getattr(sklearn.datasets, "load_" + key, None))
    if source == "sm":
        import statsmodels.api as sm

        return hasattr(getattr(sm.datasets, key, None), "load_pandas")
    return False


def row(name):
    X = load(name)
    start = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = ConvexClustering().fit(X)
    path = est.path_
    return {"set": name, "N": X.shape[0], "d": X.shape[1],
            "time_s": time.perf_counter() - start, "lam": est.lam_,
            "n_clusters": est.n_clusters_, "kkt": est.certificate_.kkt_residual,
            "certified": bool(est.solution_.converged),
            "path_certified": int(np.sum(path.converged)), "path_len": len(path.lambdas),
            "path_kkt_max": float(np.max(path.kkt_residual)),
            "lam_hat": path.meta.get("fusion_threshold", {}).get("kind"),
            "method": est.solution_.method,
            "note": "; ".join(sorted({type(w.message).__name__ for w in caught}))}


COLUMNS = [("set", "set", "17s"), ("N", "N", "5d"), ("d", "d", "3d"),
           ("time [s]", "time_s", "8.2f"), ("λ", "lam", "10.4g"), ("K", "n_clusters", "4d"),
           ("KKT", "kkt", "8.1e"), ("cert", lambda r: yes_no(r["certified"]), ">4s"),
           ("path cert", lambda r: f"{r['path_certified']}/{r['path_len']}", ">9s"),
           ("λ̂", "lam_hat", ">15s"), ("method", "method", ">6s")]


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.outside_data",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--sets", default=",".join(SETS),
                    help="comma-separated sk:<name> / sm:<name> (default: all of SETS)")
    a = ap.parse_args(argv)
    names = [s.strip() for s in a.sets.split(",") if s.strip()]
    unknown = [n for n in names if not _known(n)]
    if unknown or not names:
        ap.error(f"--sets: unknown {unknown}; expected sk:<sklearn.datasets load_ name> or "
                 "sm:<statsmodels.datasets name>, e.g. sk:iris,sm:fair")
    os.makedirs(a.out, exist_ok=True)
    rows = []
    for name in names:
        print(f"[benchmarks] {name}", flush=True)
        rows.append(row(name))
        with open(os.path.join(a.out, "outside_data.json"), "w") as fh:
            json.dump(rows, fh, indent=1, default=float)
    print()
    print_table(rows, COLUMNS)
    print(f"wrote {a.out}/outside_data.json")
    return rows


if __name__ == "__main__":
    main()
