"""The torch comparison table on scikit-learn's digits."""

from __future__ import annotations

from ._common import _jsonready, _row, _seed


def torch_digits(*, n_clients: int = 8, n_groups: int = 2, rounds: int = 30,
                 samples_per_client: int = 120, methods=None, random_state=0) -> dict:
    """The torch comparison table (:func:`convexfl.torch.compare_on_digits`) on the
    label-permuted digits split, without the fitted trainers (needs the ``torch`` extra).

    Returns
    -------
    dict
        ``rows`` (method, mean/std test accuracy, initial accuracy, numbers sent, seconds),
        ``markdown``, ``summary``.
    """
    from ..torch import compare_on_digits

    table = compare_on_digits(n_clients=n_clients, n_groups=n_groups, rounds=rounds,
                              samples_per_client=samples_per_client, methods=methods,
                              random_state=_seed(random_state))
    rows = [{k: v for k, v in r.items() if k != "trainer"} for r in table.rows]
    summary = {"description": table.description, "rows": rows,
               "best_method": max(rows, key=lambda r: r["mean_test_accuracy"])["method"]}
    summary["paper_vs_ours"] = [
        _row(f"{r['method']}: mean test accuracy", "— (papers: MNIST / CIFAR, not digits)",
             r["mean_test_accuracy"], "—", f"± {r['std_test_accuracy']:.3f} over clients")
        for r in rows]
    return {"rows": rows, "markdown": table.to_markdown(), "summary": _jsonready(summary)}
