"""The "method vs mean test accuracy" table on the federated digits.

Run ``python -m convexfl.torch`` (``--help`` for the options) to print it.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field

import numpy as np

from .baselines import FedAvgDNN, LocalDNN
from .cgpfl import CGPFLDNN
from .ckt import PerFedCKT
from .data import digits_federation
from .ppfl import PPFLDNN
from .son import SONHeads

__all__ = ["ComparisonTable", "compare_on_digits", "default_methods"]

METHODS = ("PPFL-DNN 2a (alt.)", "PPFL-DNN 2b (alt.)", "PPFL-DNN 2b (RBCD)", "PerFed-CKT",
           "CGPFL-DNN", "SON heads", "FedAvg-DNN", "Local")


def default_methods(*, rounds, n_groups, device, random_state):
    """The trainers of the table with their settings (a dict name -> unfitted trainer).

    Every method gets the same number of rounds; a round is 10 local SGD steps (batch 32;
    SON heads: full batch) of a 64-32-10 MLP, except PerFed-CKT (clients cycle through
    ``mlp:32``, ``mlp:64-32`` and ``cnn:8``) and CGPFL (R·S = 4·5 steps). The settings were
    tuned once on the default 8-client label-permuted split (seed 0) and are not re-tuned
    per split.
    """
    common = {"rounds": rounds, "device": device, "random_state": random_state}
    K = max(int(n_groups), 2)
    ppfl = {"lr": 0.3, "lam": 0.001, "lr_pi": 2.0, **common}
    return {
        "PPFL-DNN 2a (alt.)": PPFLDNN(K, architecture="output", schedule="alternating",
                                      **ppfl),
        "PPFL-DNN 2b (alt.)": PPFLDNN(K, architecture="parameter", schedule="alternating",
                                      **ppfl),
        "PPFL-DNN 2b (RBCD)": PPFLDNN(K, architecture="parameter", schedule="rbcd",
                                      block_prob=0.7, **ppfl),
        "PerFed-CKT": PerFedCKT(n_clusters=K, lam=2.0, lr=0.3, **common),
        "CGPFL-DNN": CGPFLDNN(n_clusters=K, lam=1.0, lr=0.2, beta=0.5, **common),
        "SON heads": SONHeads(lam=0.04, rho=0.1, lr=0.3, **common),
        "FedAvg-DNN": FedAvgDNN(lr=0.3, **common),
        "Local": LocalDNN(lr=0.3, **common),
    }


@dataclass
class ComparisonTable:
    """Rows of ``(method, mean test accuracy, std over clients, numbers sent, seconds)``."""

    rows: list = field(default_factory=list)
    description: str = ""

    def to_records(self) -> list:
        return [dict(r) for r in self.rows]

    def to_markdown(self) -> str:
        head = ("| method | mean test accuracy | std over clients | initial | numbers sent | "
                "seconds |\n|---|---|---|---|---|---|")
        lines = [f"| {r['method']} | {r['mean_test_accuracy']:.3f} | "
                 f"{r['std_test_accuracy']:.3f} | {r['initial_test_accuracy']:.3f} | "
                 f"{r['numbers_sent']:.3g} | {r['seconds']:.1f} |" for r in self.rows]
        return "\n".join([head, *lines])

    def __str__(self) -> str:
        return (self.description + "\n" if self.description else "") + self.to_markdown()


def compare_on_digits(*, n_clients=8, n_groups=2, kind="permuted", rounds=30,
                      samples_per_client=120, methods=None, device="cpu", random_state=0,
                      data=None) -> ComparisonTable:
    """Fit every method on one digits federation and tabulate mean test accuracy.

    Parameters
    ----------
    n_clients, n_groups, kind, samples_per_client
        The federation (:func:`convexfl.torch.digits_federation`): ``kind="permuted"``
        (label-permuted groups, the default) or ``"label_groups"``.
    rounds : int
        Communication rounds for every method.
    methods : dict of str to trainer, or sequence of names, optional
        Unfitted trainers keyed by row name, or names among :data:`METHODS` (default all).
    device : {"cpu", "cuda", "auto"}
    random_state : int
        Seeds the data and every trainer.
    data : FederatedDigits, optional
        Use this federation instead of building one.

    Returns
    -------
    ComparisonTable
        Also holds the fitted trainers in ``.rows[i]["trainer"]``.
    """
    if data is None:
        data = digits_federation(n_clients, n_groups, kind=kind,
                                 samples_per_client=samples_per_client,
                                 random_state=random_state)
    available = default_methods(rounds=rounds, n_groups=int(np.unique(data.groups).size)
                                if data.groups is not None else n_groups, device=device,
                                random_state=random_state)
    if methods is None:
        chosen = available
    elif isinstance(methods, dict):
        chosen = dict(methods)
    else:
        unknown = [m for m in methods if m not in available]
        if unknown:
            raise ValueError(f"methods: unknown {unknown}; choose among {list(available)}")
        chosen = {m: available[m] for m in methods}
    table = ComparisonTable(description=f"{data.description}; {rounds} rounds")
    for name, trainer in chosen.items():
        t0 = time.perf_counter()
        trainer.fit(data)
        acc = trainer.test_accuracy_[np.isfinite(trainer.test_accuracy_)]
        table.rows.append({
            "method": name,
            "mean_test_accuracy": float(acc.mean()),
            "std_test_accuracy": float(acc.std()),
            "initial_test_accuracy": float(trainer.initial_test_accuracy_),
            "numbers_sent": int(trainer.communication_["grand_total"]),
            "seconds": time.perf_counter() - t0,
            "trainer": trainer,
        })
    return table


def main(argv=None):
    import argparse

    parser = argparse.ArgumentParser(prog="python -m convexfl.torch",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--groups", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--samples", type=int, default=120, help="samples per client")
    parser.add_argument("--kind", default="permuted", choices=("permuted", "label_groups"))
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    args = parser.parse_args(argv)
    if args.threads is not None and args.threads < 1:
        parser.error(f"argument --threads: must be >= 1, got {args.threads}")
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    try:
        table = compare_on_digits(n_clients=args.clients, n_groups=args.groups,
                                  rounds=args.rounds, samples_per_client=args.samples,
                                  kind=args.kind, device=args.device, random_state=args.seed)
    except (ValueError, TypeError) as exc:
        print(f"python -m convexfl.torch: error: {exc}", file=sys.stderr)
        return 2
    print(table)
    return 0
