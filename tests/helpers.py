"""Small builders shared by the tests (random losses of every kind)."""

import numpy as np

import convexfl as cfl

LOSS_NAMES = ["quadratic", "least_squares", "logistic", "squared_hinge", "huber", "poisson"]


def make_loss(name, n_users=4, dim=3, m=6, seed=0, c=0.1):
    """A random loss with ``n_users`` users; model dimension ``dim`` (the squared hinge uses
    ``dim − 1`` features plus its offset)."""
    rng = np.random.default_rng(seed)
    if name == "quadratic":
        return cfl.losses.Quadratic(rng.standard_normal((n_users, dim)))
    p = dim - 1 if name == "squared_hinge" else dim
    X = rng.standard_normal((n_users * m, p))
    groups = np.repeat(np.arange(n_users), m)
    if name in ("logistic", "squared_hinge"):
        y = np.where(rng.uniform(size=n_users * m) < 0.5, -1.0, 1.0)
    elif name == "poisson":
        X *= 0.3
        y = rng.poisson(2.0, size=n_users * m).astype(float)
    else:
        y = rng.standard_normal(n_users * m)
    cls = {"least_squares": cfl.losses.LeastSquares, "logistic": cfl.losses.Logistic,
           "squared_hinge": cfl.losses.SquaredHinge, "huber": cfl.losses.Huber,
           "poisson": cfl.losses.Poisson}[name]
    return cls.from_groups(X, y, groups, c=c)


def reference(prob, **options):
    """The cvxpy reference (``cfl.solve``'s default is ``"auto"``): the slow cross-check."""
    return cfl.solve(prob, method="cvxpy", **options)


def failed_sklearn_checks(estimator):
    """scikit-learn's ``check_estimator`` on ``estimator``: the checks that failed, as
    ``(name, message)``; asserts that none was skipped but the array-API one (it needs
    ``SCIPY_ARRAY_API`` set)."""
    import warnings

    from sklearn.utils.estimator_checks import check_estimator

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        results = check_estimator(estimator, on_fail=None)
    skipped = {r["check_name"] for r in results if r["status"] == "skipped"}
    assert skipped <= {"check_array_api_input"}, skipped
    return [(r["check_name"], str(r["exception"])[:200]) for r in results
            if r["status"] == "failed"]
