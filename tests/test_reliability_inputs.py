"""Issue 11, item 1: every public entry point under bad input.

Each case calls a public function, estimator, CLI command or ``python -m`` entry point with
input that could have been checked at the door, and asserts

* a ``ValueError``/``TypeError`` (``FileNotFoundError`` for a missing file) whose message
  names the offending argument, and
* that the exception was raised in convexfl's own code (``convexfl/`` or
  ``theory_checks/``), not deep inside numpy, scipy, scikit-learn, cvxpy or numba.

The foundation cases of ``tests/test_validation.py`` are not repeated here.
"""

from __future__ import annotations

import pickle
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import convexfl as cfl
from convexfl import baselines, ckt, experiments, report
from convexfl import cgpfl as cg
from convexfl import datasets as ds
from convexfl import ppfl as pp
from convexfl.certificates import kkt_residual
from convexfl.federated import fedavg_least_squares, load_checkpoint, run_federated
from convexfl.federated.checkpoint import save_checkpoint
from theory_checks.__main__ import main as theory_checks_main

REPO = Path(__file__).resolve().parents[1]
OWN_CODE = (str(REPO / "convexfl"), str(REPO / "theory_checks"))

L, G = cfl.losses, cfl.graphs
RNG = np.random.default_rng(0)
A6 = RNG.standard_normal((6, 2))
X8 = RNG.standard_normal((8, 2))
Y8 = np.array([1.0, -1.0] * 4)
G8 = np.repeat(np.arange(4), 2)
Q6 = L.Quadratic(A6)
K6 = G.complete(6)
P6 = cfl.SumOfNorms(Q6, K6, 0.5)
LS8 = L.LeastSquares.from_groups(X8, RNG.standard_normal(8), G8, c=0.1)


# --------------------------------------------------------------------------------- helpers


def _raised_in_own_code(excinfo) -> bool:
    tb = excinfo.tb
    while tb.tb_next is not None:
        tb = tb.tb_next
    return tb.tb_frame.f_code.co_filename.startswith(OWN_CODE)


def _names(message: str, name: str) -> bool:
    """The message (or a CLI's ``error:`` line) starts with the argument's name."""
    lead = rf"(?:^|error: |argument ){re.escape(name)}(?![\w])"
    return re.search(lead, message, re.M) is not None


def assert_refused(call, name, exc=(ValueError, TypeError)):
    """``call()`` raises ``exc`` in convexfl's code with a message naming ``name``."""
    with pytest.raises(exc) as ei:
        call()
    message = str(ei.value)
    assert _names(message, name), f"message does not name {name!r}: {message!r}"
    assert _raised_in_own_code(ei), (
        f"raised deep inside a dependency: {ei.traceback[-1].path}: {message!r}")
    return message


def _sh(x, n_users=6):
    """A squared-hinge loss on two features (plus offset) for ``n_users`` users."""
    m = 4
    rng = np.random.default_rng(1)
    return L.SquaredHinge.from_groups(rng.standard_normal((n_users * m, 2)),
                                      np.tile([1.0, -1.0], n_users * m // 2),
                                      np.repeat(np.arange(n_users), m), c=x)


# --------------------------------------------------------------------------------- cases
# (id, call, name): one distinct bad input each.

CASES = [
    # losses ----------------------------------------------------------------------------
    ("quadratic-inf-point", lambda: L.Quadratic([[0.0, np.inf], [1.0, 2.0]]), "A"),
    ("quadratic-3d-points", lambda: L.Quadratic(np.zeros((2, 2, 2))), "A"),
    ("quadratic-nan-weight", lambda: L.Quadratic(A6, weights=[1, 1, np.nan, 1, 1, 1]),
     "weights"),
    ("quadratic-string-points", lambda: L.Quadratic("abc"), "A"),
    ("glm-X-1d", lambda: L.LeastSquares.from_groups(np.ones(8), np.ones(8), G8), "X"),
    ("glm-groups-2d", lambda: L.LeastSquares.from_groups(X8, np.ones(8), G8[:, None]),
     "groups"),
    ("glm-groups-none-label", lambda: L.LeastSquares.from_groups(
        X8, np.ones(8), np.array([0, 1, None, 1, 0, 1, 0, 1], dtype=object)), "groups"),
    ("logistic-labels-0-1", lambda: L.Logistic.from_groups(X8, (Y8 > 0).astype(float), G8),
     "y"),
    ("hinge-labels-nan", lambda: L.SquaredHinge.from_groups(X8, np.r_[Y8[:-1], np.nan], G8),
     "y"),
    ("huber-delta-inf", lambda: L.Huber.from_groups(X8, Y8, G8, delta=np.inf), "delta"),
    ("glm-sample-weight-nan", lambda: L.LeastSquares.from_groups(
        X8, Y8, G8, sample_weight=np.r_[np.ones(7), np.nan]), "sample_weight"),
    ("from-users-feature-mismatch", lambda: L.LeastSquares.from_users(
        [np.ones((2, 2)), np.ones((2, 3))], [np.ones(2), np.ones(2)]), "Xs"),
    ("from-users-y-length", lambda: L.LeastSquares.from_users(
        [np.ones((2, 2)), np.ones((3, 2))], [np.ones(2), np.ones(2)]), "ys"),
    ("prox-rho-wrong-length", lambda: Q6.prox(A6, np.ones(4)), "rho"),
    ("prox-rho-nan", lambda: Q6.prox(A6, np.nan), "rho"),
    ("prox-tol-negative", lambda: LS8.prox(np.zeros((4, 2)), 1.0, tol=-1.0), "tol"),
    ("prox-max-iter-zero", lambda: LS8.prox(np.zeros((4, 2)), 1.0, max_iter=0), "max_iter"),
    ("prox-start-wrong-shape", lambda: LS8.prox(np.zeros((4, 2)), 1.0, X0=np.zeros((3, 2))),
     "X0"),
    ("hessian-index-not-int", lambda: Q6.hessian(1.5, A6[0]), "i"),
    ("hessian-index-negative", lambda: Q6.hessian(-1, A6[0]), "i"),
    ("grad-nan-iterate", lambda: Q6.grad(np.full((6, 2), np.nan)), "X"),
    ("aggregate-uncovered", lambda: Q6.aggregate([[0, 1], [2, 3]]), "partition"),
    ("aggregate-out-of-range", lambda: Q6.aggregate([[0, 1, 2], [3, 4, 9]]), "partition"),
    ("aggregate-float-members", lambda: Q6.aggregate([[0.0, 1.0, 2.0], [3, 4, 5]]),
     "partition"),
    ("decision-function-shape", lambda: _sh(0.1).decision_function(np.zeros(3),
                                                                  np.zeros((5, 4))), "A"),
    # graphs ----------------------------------------------------------------------------
    ("complete-zero-users", lambda: G.complete(0), "n_users"),
    ("complete-weight-nan", lambda: G.complete(4, weight=np.nan), "weight"),
    ("knn-k-larger-than-N", lambda: G.knn(A6, k=6), "k"),
    ("knn-k-zero", lambda: G.knn(A6, k=0), "k"),
    ("knn-one-point", lambda: G.knn(A6[:1], k=1), "points"),
    ("knn-nan-point", lambda: G.knn(np.r_[A6, [[np.nan, 0.0]]], k=2), "points"),
    ("knn-phi-negative", lambda: G.knn(A6, k=2, phi=-1.0), "phi"),
    ("knn-phi-underflow", lambda: G.knn(A6 * 1e3, k=2, phi=1e6), "phi"),
    ("edges-self-loop", lambda: G.from_edges([[0, 1], [2, 2]]), "edges"),
    ("edges-duplicate-reversed", lambda: G.from_edges([[0, 1], [1, 0]]), "edges"),
    ("edges-negative-index", lambda: G.from_edges([[0, -1]]), "edges"),
    ("edges-three-columns", lambda: G.from_edges([[0, 1, 2]]), "edges"),
    ("edges-empty", lambda: G.from_edges(np.zeros((0, 2), dtype=int)), "edges"),
    ("edges-index-beyond-n-nodes", lambda: G.from_edges([[0, 5]], n_nodes=3), "edges"),
    ("edges-weight-zero", lambda: G.from_edges([[0, 1], [1, 2]], [1.0, 0.0]), "weights"),
    ("graph-ctor-index-out-of-range", lambda: G.Graph(3, [[0, 5]], [1.0]), "edges"),
    ("graph-ctor-weights-length", lambda: G.Graph(3, [[0, 1], [1, 2]], [1.0]), "weights"),
    ("graph-ctor-weight-negative", lambda: G.Graph(3, [[0, 1]], [-1.0]), "weights"),
    ("graph-penalty-wrong-rows", lambda: K6.penalty(np.zeros((5, 2))), "X"),
    ("graph-reduce-partition-length", lambda: K6.reduce([0, 1, 0]), "partition"),
    ("disconnected-graph-required", lambda: G.from_edges([[0, 1], [2, 3]]).require_connected(
        "fusion"), "graph"),
    # problems --------------------------------------------------------------------------
    ("son-lam-negative", lambda: cfl.SumOfNorms(Q6, K6, -1.0), "lam"),
    ("son-lam-nan", lambda: cfl.SumOfNorms(Q6, K6, np.nan), "lam"),
    ("son-lam-inf", lambda: cfl.SumOfNorms(Q6, K6, np.inf), "lam"),
    ("son-lam-string", lambda: cfl.SumOfNorms(Q6, K6, "1"), "lam"),
    ("son-convention-unknown", lambda: cfl.SumOfNorms(Q6, K6, 1.0, convention="eq5"),
     "convention"),
    ("son-loss-not-a-loss", lambda: cfl.SumOfNorms(A6, K6, 1.0), "loss"),
    ("son-graph-not-a-graph", lambda: cfl.SumOfNorms(Q6, np.ones((6, 6)), 1.0), "graph"),
    ("son-graph-size-mismatch", lambda: cfl.SumOfNorms(Q6, G.complete(5), 1.0), "graph"),
    ("paper-lambda-form", lambda: cfl.from_paper_lambda(1.0, 6, "eq4"), "form"),
    ("paper-lambda-n-users", lambda: cfl.to_paper_lambda(1.0, 0), "n_users"),
    ("squared-penalty-gamma-negative", lambda: cfl.SquaredPenalty(Q6, K6, -0.1), "gamma"),
    ("reduced-needs-graph", lambda: cfl.Reduced(Q6, None, [0, 0, 0, 1, 1, 1], lam=1.0),
     "graph"),
    ("reduced-lam-nan", lambda: cfl.Reduced(Q6, K6, [0, 0, 0, 1, 1, 1], lam=np.nan), "lam"),
    ("oracle-partition-not-covering", lambda: cfl.oracle(Q6, [[0, 1, 2], [3, 4]]),
     "partition"),
    ("oracle-partition-overlap", lambda: cfl.oracle(Q6, [[0, 1, 2], [2, 3, 4, 5]]),
     "partition"),
    ("expand-wrong-shape", lambda: cfl.global_model(Q6).expand(np.zeros((2, 2))), "W"),
    ("objective-inf-iterate", lambda: P6.objective(np.full((6, 2), np.inf)), "X"),
    # certificates ----------------------------------------------------------------------
    ("kkt-not-a-problem", lambda: kkt_residual("prob", A6), "prob"),
    ("kkt-wrong-shape", lambda: kkt_residual(P6, A6[:, :1]), "X"),
    ("kkt-fuse-tol-negative", lambda: kkt_residual(P6, A6, fuse_tol=-1.0), "fuse_tol"),
    ("kkt-rtol-zero", lambda: kkt_residual(P6, A6, rtol=0.0), "rtol"),
    ("kkt-max-iter-negative", lambda: kkt_residual(P6, A6, max_iter=-3), "max_iter"),
    ("kkt-flows-wrong-shape", lambda: kkt_residual(P6, np.zeros((6, 2)), flows=np.zeros((3, 2))),
     "flows"),
    ("kkt-target-nan", lambda: kkt_residual(P6, A6, target=np.nan), "target"),
    # clusters --------------------------------------------------------------------------
    ("labels-nan", lambda: cfl.clusters.labels(np.full((3, 2), np.nan)), "X"),
    ("labels-tol-negative", lambda: cfl.clusters.labels(A6, tol=-1e-3), "tol"),
    ("labels-graph-mismatch", lambda: cfl.clusters.labels(A6, graph=G.complete(4)), "graph"),
    ("same-partition-length", lambda: cfl.clusters.same_partition([0, 1], [0, 1, 1]), "b"),
    ("compare-length", lambda: cfl.clusters.compare([0, 0, 1], [0, 1]), "truth"),
    # cvxpy reference through cfl.solve --------------------------------------------------
    ("solve-method-unknown", lambda: cfl.solve(P6, method="newton"), "method"),
    ("solve-method-none", lambda: cfl.solve(P6, method=None), "method"),
    ("solve-tol-negative", lambda: cfl.solve(P6, method="cvxpy", tol=-1e-8), "tol"),
    ("solve-tol-nan", lambda: cfl.solve(P6, method="cvxpy", tol=np.nan), "tol"),
    ("solve-max-iter-zero", lambda: cfl.solve(P6, method="cvxpy", max_iter=0), "max_iter"),
    ("solve-kkt-tol-inf", lambda: cfl.solve(P6, method="cvxpy", kkt_tol=np.inf), "kkt_tol"),
    ("solve-fuse-tol-negative", lambda: cfl.solve(P6, method="cvxpy", fuse_tol=-1.0), "fuse_tol"),
    ("solve-backend-unknown", lambda: cfl.solve(P6, method="cvxpy", solver="MOSEK"), "solver"),
    ("solve-not-a-problem", lambda: cfl.solve(Q6), "prob"),
    # datasets --------------------------------------------------------------------------
    ("planted-points-radius-negative", lambda: ds.planted_points(radius=-1.0), "radius"),
    ("planted-points-dim-float", lambda: ds.planted_points(dim=2.0), "dim"),
    ("planted-points-seed-string", lambda: ds.planted_points(random_state="seed"),
     "random_state"),
    ("planted-classification-flip", lambda: ds.planted_classification(flip=0.7), "flip"),
    ("planted-classification-one-sample", lambda: ds.planted_classification(
        samples_per_user=1), "samples_per_user"),
    ("ellipses-too-many-samples", lambda: ds.armacki_ellipses(2, 201), "samples_per_user"),
    ("ellipses-three-axes", lambda: ds.armacki_ellipses(2, 5, axes=(3.0, 1.0, 1.0)), "axes"),
    ("ellipses-shift-negative", lambda: ds.armacki_ellipses(2, 5, class_shift=-0.5),
     "class_shift"),
    ("mlr-more-groups-than-clients", lambda: ds.clustered_mlr(3, 4), "n_groups"),
    ("mlr-test-fraction-one", lambda: ds.clustered_mlr(4, 2, test_fraction=1.0),
     "test_fraction"),
    ("mlr-sample-range-reversed", lambda: ds.clustered_mlr(4, 2, n_samples=(10, 5)),
     "n_samples[1]"),
    ("from-groups-fractional-labels", lambda: ds.from_groups(X8, np.full(8, 0.5), G8), "y"),
    ("from-groups-n-classes-too-small", lambda: ds.from_groups(X8, np.arange(8) % 3, G8,
                                                               n_classes=2), "n_classes"),
    ("mixture-box-reversed", lambda: ds.synthetic_mixture(4, box=(1.0, -1.0)), "box"),
    ("mixture-family-unknown", lambda: ds.synthetic_mixture(4, family="poisson"), "family"),
    ("mixture-zero-samples", lambda: ds.synthetic_mixture(4, n_samples=0), "n_samples"),
    ("digits-overlapping-label-groups", lambda: ds.digits_label_groups(
        6, label_groups=[[0, 1], [1, 2]]), "label_groups"),
    ("digits-fewer-clients-than-groups", lambda: ds.digits_label_groups(2, 3), "n_clients"),
    # PPFL --------------------------------------------------------------------------------
    ("ppfl-nan-features", lambda: pp.PPFL(2).fit(np.full((8, 2), np.nan), Y8, G8), "X"),
    ("ppfl-binomial-labels", lambda: pp.PPFL(2, family="binomial").fit(X8, np.arange(8), G8),
     "y"),
    ("ppfl-family-unknown", lambda: pp.PPFLProblem(X8, Y8, G8, n_components=2,
                                                   family="gamma"), "family"),
    ("ppfl-components-zero", lambda: pp.PPFLProblem(X8, Y8, G8, n_components=0),
     "n_components"),
    ("ppfl-lam-negative", lambda: pp.PPFLProblem(X8, Y8, G8, n_components=2, lam=-1.0),
     "lam"),
    ("ppfl-affinity-shape", lambda: pp.PPFLProblem(X8, Y8, G8, n_components=2,
                                                   affinity=np.ones((3, 3))), "affinity"),
    ("ppfl-affinity-asymmetric", lambda: pp.PPFLProblem(
        X8, Y8, G8, n_components=2, affinity=np.triu(np.ones((4, 4)), 1)), "affinity"),
    ("ppfl-shared-all-columns", lambda: pp.PPFL(2, shared=[0, 1]).fit(X8, Y8, G8), "shared"),
    ("ppfl-rounds-zero", lambda: pp.PPFL(2, rounds=0).fit(X8, Y8, G8), "rounds"),
    ("ppfl-solver-unknown", lambda: pp.PPFL(2, solver="sgd").fit(X8, Y8, G8), "solver"),
    ("ppfl-mirror-kind-unknown", lambda: pp.mirror_step(np.full((2, 2), 0.5), np.ones((2, 2)),
                                                        0.1, kind="euclid"), "kind"),
    ("glmm-lambda-zero-groups", lambda: pp.glmm_lambda(1.0, 1.0, 0, 10), "n_groups"),
    ("glmm-lambda-variance-zero", lambda: pp.glmm_lambda(1.0, 0.0, 3, 10), "sigma_b2"),
    # PerFed-CKT --------------------------------------------------------------------------
    ("ckt-one-client", lambda: ckt.make_linear_setting(1, 2, 5, upsilon=1.0, sigma=1.0,
                                                       n_public=3), "n_clients"),
    ("ckt-fewer-samples-than-dim", lambda: ckt.make_linear_setting(
        3, 4, 2, upsilon=1.0, sigma=1.0, n_public=3), "n_samples"),
    ("ckt-upsilon-negative", lambda: ckt.make_linear_setting(
        3, 2, 5, upsilon=[1.0, -1.0, 1.0], sigma=1.0, n_public=3), "upsilon"),
    ("ckt-sigma-zero", lambda: ckt.make_linear_setting(3, 2, 5, upsilon=1.0, sigma=0.0,
                                                       n_public=3), "sigma"),
    ("ckt-beta-without-isotropic", lambda: ckt.make_linear_setting(
        3, 2, 5, upsilon=1.0, sigma=1.0, n_public=3, beta=2.0), "beta"),
    ("ckt-w-hat-nan", lambda: ckt.posterior_mean(np.stack([np.eye(2)] * 3),
                                                np.full((3, 2), np.nan), 0, 1.0, 1.0), "w_hat"),
    ("ckt-client-index", lambda: ckt.posterior_mean(np.stack([np.eye(2)] * 3), np.ones((3, 2)),
                                                   3, 1.0, 1.0), "k"),
    ("ckt-gram-not-spd", lambda: ckt.ckt_estimator(-np.eye(2), np.ones((3, 2)), 0, 1.0,
                                                   np.full(3, 1 / 3), np.eye(2)), "XtX_k"),
    ("codistill-clusters-zero", lambda: ckt.codistillation(np.ones((4, 2)), n_clusters=0),
     "n_clusters"),
    ("codistill-public-nan", lambda: ckt.codistillation(np.full((4, 2), np.nan)), "public"),
    # CGPFL -------------------------------------------------------------------------------
    ("cgpfl-mu-negative", lambda: cg.heuristic_k(np.ones((4, 3)), np.ones(4), mu=-1.0), "mu"),
    ("cgpfl-k-max-beyond-N", lambda: cg.heuristic_k(np.ones((4, 3)), np.ones(4), mu=1.0,
                                                    k_max=5), "k_max"),
    ("cgpfl-sample-counts-zero", lambda: cg.heuristic_k(np.ones((4, 3)), np.zeros(4), mu=1.0),
     "n_samples"),
    ("cgpfl-centers-columns", lambda: cg.clustering_cost(np.ones((4, 3)), np.ones((2, 2))),
     "centers"),
    ("cgpfl-auto-needs-mu", lambda: cg.cgpfl(3, 2, n_clusters="auto"), "mu"),
    ("cgpfl-lam-zero", lambda: cg.cgpfl(3, 2, lam=0.0), "lam"),
    ("cgpfl-classifier-one-class", lambda: cg.CGPFLClassifier(2).fit(X8, np.ones(8), G8), "y"),
    # baselines ---------------------------------------------------------------------------
    ("fedavg-lr-negative", lambda: baselines.fedavg(3, 2, lr=-0.1), "lr"),
    ("local-steps-zero", lambda: baselines.local_training(3, 2, local_steps=0), "local_steps"),
    ("pfedme-batch-zero", lambda: baselines.pfedme(3, 2, batch_size=0), "batch_size"),
    ("ditto-one-class", lambda: baselines.ditto(3, 1), "n_classes"),
    ("baseline-init-shape", lambda: baselines.fedavg(3, 2, init=np.zeros(3)), "init"),
    ("evaluate-needs-n-classes", lambda: baselines.evaluate(np.zeros((2, 8)), [(X8, Y8)] * 2),
     "n_classes"),
    # federated runtime -------------------------------------------------------------------
    ("fedavg-ls-step-zero", lambda: fedavg_least_squares(3, step=0.0), "step"),
    ("fedavg-ls-x0-shape", lambda: fedavg_least_squares(3, step=0.1, x0=np.zeros(2)), "x0"),
    # experiments and report --------------------------------------------------------------
    ("experiment-lambdas-negative", lambda: experiments.armacki_sec5(lambdas=[-1.0, 1.0]),
     "lambdas"),
    ("experiment-gammas-nan", lambda: experiments.armacki_sec5(lambdas=[1.0],
                                                              gammas=[np.nan]), "gammas"),
    ("experiment-users-zero", lambda: experiments.armacki_sec5(users_per_cluster=0),
     "users_per_cluster"),
    ("experiment-method-unknown", lambda: experiments.armacki_sec5(method="newton"), "method"),
    ("report-unknown-section", lambda: report.run_report(only=["nope"], progress=False),
     "only"),
]


@pytest.mark.parametrize("call, name", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_is_refused_at_the_door(call, name):
    assert_refused(call, name)


def test_cases_are_distinct_and_many():
    ids = [c[0] for c in CASES]
    assert len(set(ids)) == len(ids)
    assert len(ids) >= 60


# --------------------------------------------------------------------------------- hypothesis

BAD_NUMBERS = [-1.0, -1e-300, float("nan"), float("inf"), float("-inf"), "0.1", True, [1.0]]

ARRAY_ENTRY_POINTS = {
    "Quadratic(A)": ("A", lambda M: L.Quadratic(M)),
    "LeastSquares(X)": ("X", lambda M: L.LeastSquares.from_groups(M, np.ones(6),
                                                                    np.arange(6))),
    "Logistic(y)": ("y", lambda M: L.Logistic.from_groups(
        np.ones((12, 1)), np.where(np.isfinite(M.ravel()), 1.0, M.ravel()), np.arange(12) % 3)),
    "knn(points)": ("points", lambda M: G.knn(M, k=2)),
    "labels(X)": ("X", lambda M: cfl.clusters.labels(M)),
    "objective(X)": ("X", lambda M: P6.objective(M)),
    "kkt_residual(X)": ("X", lambda M: kkt_residual(P6, M)),
    "clustering_cost(models)": ("models", lambda M: cg.clustering_cost(M, np.zeros((1, 2)))),
    "PPFLProblem(X_personal)": ("X_personal", lambda M: pp.PPFLProblem(
        M, np.ones(6), np.arange(6) % 2, n_components=2)),
    "from_groups(X)": ("X", lambda M: ds.from_groups(M, np.arange(6) % 2, np.arange(6) % 3)),
}


@given(entry=st.sampled_from(sorted(ARRAY_ENTRY_POINTS)), row=st.integers(0, 5),
       col=st.integers(0, 1), bad=st.sampled_from([np.nan, np.inf, -np.inf]))
def test_a_non_finite_entry_anywhere_is_refused(entry, row, col, bad):
    name, call = ARRAY_ENTRY_POINTS[entry]
    M = np.array(A6)
    M[row, col] = bad
    assert_refused(lambda: call(M), name)


SCALAR_ENTRY_POINTS = {
    # name: (argument, call(value), None is valid)
    "SumOfNorms.lam": ("lam", lambda v: cfl.SumOfNorms(Q6, K6, v), False),
    "SquaredPenalty.gamma": ("gamma", lambda v: cfl.SquaredPenalty(Q6, K6, v), False),
    "solve.tol": ("tol", lambda v: cfl.solve(P6, method="cvxpy", tol=v), False),
    "solve.kkt_tol": ("kkt_tol", lambda v: cfl.solve(P6, method="cvxpy", kkt_tol=v), True),
    "kkt_residual.fuse_tol": ("fuse_tol", lambda v: kkt_residual(P6, A6, fuse_tol=v), True),
    "labels.tol": ("tol", lambda v: cfl.clusters.labels(A6, tol=v), True),
    "complete.weight": ("weight", lambda v: G.complete(3, weight=v), False),
    "knn.phi": ("phi", lambda v: G.knn(A6, k=2, phi=v), True),
    "LeastSquares.c": ("c", lambda v: L.LeastSquares.from_groups(X8, Y8, G8, c=v), False),
    "prox.rho": ("rho", lambda v: Q6.prox(A6, v), False),
    "from_paper_lambda.lam": ("lam", lambda v: cfl.from_paper_lambda(v, 6), False),
    "planted_points.separation": ("separation",
                                  lambda v: ds.planted_points(separation=v), False),
    "PPFLProblem.alpha": ("alpha", lambda v: pp.PPFLProblem(X8, Y8, G8, n_components=2,
                                                            alpha=v), False),
    "heuristic_k.mu": ("mu", lambda v: cg.heuristic_k(np.eye(4), np.ones(4), mu=v), False),
    "fedavg.l2": ("l2", lambda v: baselines.fedavg(3, 2, l2=v), False),
    "ckt.sigma": ("sigma", lambda v: ckt.make_linear_setting(3, 2, 4, upsilon=1.0, sigma=v,
                                                             n_public=3), False),
}


@given(entry=st.sampled_from(sorted(SCALAR_ENTRY_POINTS)), bad=st.sampled_from(
    BAD_NUMBERS + [None]))
def test_negative_non_finite_or_non_numeric_parameters_are_refused(entry, bad):
    name, call, none_ok = SCALAR_ENTRY_POINTS[entry]
    if bad is None and none_ok:
        return
    assert_refused(lambda: call(bad), name)


@given(n=st.integers(2, 8), data=st.data())
def test_a_partition_that_misses_a_user_is_refused(n, data):
    members = data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n - 1,
                                 unique=True))
    split = data.draw(st.integers(1, len(members)))
    partition = [members[:split]] + ([members[split:]] if members[split:] else [])
    loss = L.Quadratic(np.arange(2 * n, dtype=float).reshape(n, 2))
    graph = G.complete(n)
    for call in (lambda: loss.aggregate(partition), lambda: cfl.oracle(loss, partition),
                 lambda: graph.reduce(partition),
                 lambda: cfl.Reduced(loss, graph, partition, 1.0)):
        assert_refused(call, "partition")


@given(n=st.integers(2, 8), extra=st.integers(0, 4))
def test_k_at_least_n_is_refused(n, extra):
    points = np.arange(2 * n, dtype=float).reshape(n, 2)
    assert_refused(lambda: G.knn(points, k=n + extra), "k")


@given(labels=st.lists(st.sampled_from([-1.0, 1.0, 0.0, 2.0, -0.5, 3.0]), min_size=4,
                       max_size=4).filter(lambda v: any(x not in (-1.0, 1.0) for x in v)),
       cls=st.sampled_from([L.Logistic, L.SquaredHinge]))
def test_labels_outside_plus_minus_one_are_refused(labels, cls):
    assert_refused(lambda: cls.from_groups(X8[:4], labels, [0, 0, 1, 1]), "y")


@given(shape=st.tuples(st.integers(1, 8), st.integers(1, 3)).filter(lambda s: s != (6, 2)),
       which=st.sampled_from(["values", "grad", "objective", "kkt", "penalty"]))
def test_an_iterate_of_the_wrong_shape_is_refused(shape, which):
    X = np.ones(shape)
    call = {"values": lambda: Q6.values(X), "grad": lambda: Q6.grad(X),
            "objective": lambda: P6.objective(X), "kkt": lambda: kkt_residual(P6, X),
            "penalty": lambda: K6.penalty(X) if shape[0] != 6 else Q6.values(X)}[which]
    assert_refused(call, "X")


# --------------------------------------------------------------------------------- files


def _corrupt(path: Path, how: str) -> Path:
    if how == "truncated":
        save_checkpoint(path, {"next_round": 1, "server_state": {"x": np.arange(100.0)}})
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    elif how == "text":
        path.write_text("round,loss\n1,0.5\n")
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "foreign-pickle":
        path.write_bytes(pickle.dumps([1, 2, 3]))
    return path


@pytest.mark.parametrize("how", ["truncated", "text", "empty", "foreign-pickle"])
def test_a_corrupt_checkpoint_is_refused_naming_it(tmp_path, how):
    path = _corrupt(tmp_path / "run.ckpt", how)
    assert_refused(lambda: load_checkpoint(path), "checkpoint")
    data = [(np.eye(3), np.ones(3))] * 2
    assert_refused(lambda: run_federated(fedavg_least_squares(3, step=0.1), data, rounds=2,
                                         checkpoint=path, progress=False), "checkpoint")
    assert path.exists()  # the bad file is left for the user to look at, not overwritten


def test_a_missing_checkpoint_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.ckpt"):
        load_checkpoint(tmp_path / "missing.ckpt")


def test_a_torn_report_section_is_run_again(tmp_path):
    calls = []

    @report.section("_reliability_torn")
    def _torn(out, quick):
        calls.append(quick)
        return {"title": "torn", "text": "ok", "figures": [], "data": {"n": len(calls)}}

    try:
        sections = tmp_path / "sections"
        sections.mkdir()
        (sections / "_reliability_torn.json").write_text('{"title": "torn", "sta')
        report.run_report(out=tmp_path, only=["_reliability_torn"], progress=False)
        assert calls == [False]
        assert not list(sections.glob(".*.tmp"))
    finally:
        report.SECTIONS.pop("_reliability_torn")


def test_report_output_folder_that_is_a_file(tmp_path):
    f = tmp_path / "report"
    f.write_text("not a folder")
    assert_refused(lambda: report.run_report(out=f, only=["theory_checks"], progress=False),
                   "out")


# --------------------------------------------------------------------------------- CLIs


def _run_main(main, argv, capsys):
    try:
        rc = main(argv)
    except SystemExit as exc:  # argparse
        rc = exc.code
    captured = capsys.readouterr()
    return rc, captured.err


def test_theory_checks_cli_refuses_an_output_path_that_is_a_file(tmp_path, capsys):
    f = tmp_path / "out.txt"
    f.write_text("x")
    rc, err = _run_main(theory_checks_main, ["--only", "cgpfl.k1_pfedme", "--no-progress",
                                             "--out", str(f)], capsys)
    assert rc == 2 and _names(err, "out") and "Traceback" not in err


def test_theory_checks_cli_refuses_a_json_path_that_is_a_folder(tmp_path, capsys):
    rc, err = _run_main(theory_checks_main, ["--only", "cgpfl.k1_pfedme", "--no-progress",
                                             "--out", str(tmp_path / "o"), "--json",
                                             str(tmp_path)], capsys)
    assert rc == 2 and "--json" in err
    assert not (tmp_path / "o" / "checks").exists()  # refused before any work


@pytest.mark.parametrize("seed, name", [("-3", "seed"), ("1.5", "--seed"), ("x", "--seed")])
def test_theory_checks_cli_refuses_bad_seeds(tmp_path, capsys, seed, name):
    rc, err = _run_main(theory_checks_main, ["--only", "cgpfl.k1_pfedme", "--no-progress",
                                             "--out", str(tmp_path), "--seed", seed], capsys)
    assert rc == 2 and name in err


def test_theory_checks_cli_reruns_a_torn_check_file(tmp_path, capsys):
    checks = tmp_path / "checks"
    checks.mkdir()
    (checks / "cgpfl.k1_pfedme.json").write_text('{"id": "cgpfl.k1_pfedme", "outc')
    rc, _ = _run_main(theory_checks_main, ["--only", "cgpfl.k1_pfedme", "--no-progress",
                                           "--out", str(tmp_path)], capsys)
    assert rc == 0
    assert "holds" in (checks / "cgpfl.k1_pfedme.json").read_text()


def test_python_m_theory_checks_bad_output_folder_gives_no_traceback(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    proc = subprocess.run([sys.executable, "-m", "theory_checks", "--only", "armacki.thm4",
                           "--out", str(f), "--no-progress"], capture_output=True, text=True,
                          cwd=REPO)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and _names(proc.stderr, "out")


def test_python_m_convexfl_demo_bad_seed_gives_no_traceback():
    proc = subprocess.run([sys.executable, "-m", "convexfl", "demo", "--seed", "-1"],
                          capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "random_state" in proc.stderr


@pytest.fixture(scope="module")
def data_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("data")
    np.savez(d / "points.npz", A=A6)
    np.savez(d / "nan.npz", A=np.r_[A6, [[np.nan, 0.0]]])
    np.savez(d / "nokeys.npz", B=A6)
    np.savez(d / "badpart.npz", A=A6, partition=np.array([0, 0, 1]))
    raw = (d / "points.npz").read_bytes()
    (d / "truncated.npz").write_bytes(raw[: len(raw) // 2])
    (d / "notzip.npz").write_text("a,b\n1,2\n")
    (d / "words.csv").write_text("a,b\n1,two\n")
    (d / "ragged.csv").write_text("a,b\n1,2,3\n")
    (d / "points.txt").write_text("1 2\n3 4\n")
    (d / "part_header.csv").write_text("cluster\n0\n0\n0\n1\n1\n1\n")
    return d


CLI_CASES = [
    ("bounds-missing-file", ["bounds", "{d}/missing.npz"], "data"),
    ("bounds-wrong-extension", ["bounds", "{d}/points.txt"], "data"),
    ("bounds-npz-without-points", ["bounds", "{d}/nokeys.npz"], "data"),
    ("bounds-nan-point", ["bounds", "{d}/nan.npz"], "A"),
    ("bounds-csv-non-numeric", ["bounds", "{d}/words.csv"], "data"),
    ("bounds-csv-ragged", ["bounds", "{d}/ragged.csv"], "data"),
    ("bounds-partition-short", ["bounds", "{d}/badpart.npz"], "partition"),
    ("bounds-knn-k-zero", ["bounds", "{d}/points.npz", "--graph", "knn", "--k", "0"], "k"),
    ("path-negative-lambda", ["path", "{d}/points.npz", "--lambdas", "-1", "2"], "lambdas"),
    ("path-unknown-method", ["path", "{d}/points.npz", "--method", "newton"], "method"),
    ("path-n-lambdas-zero", ["path", "{d}/points.npz", "--n-lambdas", "0"], "n_lambdas"),
    ("bounds-unknown-loss", ["bounds", "{d}/points.npz", "--loss", "hinge"], "--loss"),
]

CLI_FILE_CASES = [  # unreadable data and partition files
    ("bounds-truncated-npz", ["bounds", "{d}/truncated.npz"], "data"),
    ("bounds-npz-not-a-zip", ["bounds", "{d}/notzip.npz"], "data"),
    ("bounds-partition-file-missing", ["bounds", "{d}/points.npz", "--partition",
                                       "{d}/missing.csv"], "partition"),
    ("bounds-partition-file-with-header", ["bounds", "{d}/points.npz", "--partition",
                                           "{d}/part_header.csv"], "partition"),
]


def _cli(argv, data_files, tmp_path, capsys):
    from convexfl.cli import main

    argv = [a.format(d=data_files) for a in argv] + ["--no-plot", "--out", str(tmp_path)]
    try:
        rc = main(argv)
        err = capsys.readouterr().err
    except SystemExit as exc:
        rc, err = exc.code, capsys.readouterr().err
    return rc, err


@pytest.mark.parametrize("argv, name", [c[1:] for c in CLI_CASES],
                         ids=[c[0] for c in CLI_CASES])
def test_convexfl_cli_refuses_bad_data_and_options(argv, name, data_files, tmp_path, capsys):
    rc, err = _cli(argv, data_files, tmp_path, capsys)
    assert rc == 2 and _names(err, name), err


@pytest.mark.parametrize("argv, name", [c[1:] for c in CLI_FILE_CASES],
                         ids=[c[0] for c in CLI_FILE_CASES])
def test_convexfl_cli_refuses_unreadable_files(argv, name, data_files, tmp_path, capsys):
    rc, err = _cli(argv, data_files, tmp_path, capsys)
    assert rc == 2 and _names(err, name), err


# --------------------------------------------------------------------------------- torch


@pytest.fixture(scope="module")
def ct():
    return pytest.importorskip("convexfl.torch")


@pytest.fixture(scope="module")
def digits(ct):
    return ct.digits_federation(3, 1, samples_per_client=30, n_public=20, random_state=0)


TORCH_CASES = [
    ("device-unknown", lambda ct, d: ct.resolve_device("gpu"), "device"),
    ("rounds-zero", lambda ct, d: ct.FedAvgDNN(rounds=0).fit(d), "rounds"),
    ("lr-nan", lambda ct, d: ct.LocalDNN(lr=np.nan).fit(d), "lr"),
    ("no-clients", lambda ct, d: ct.FedAvgDNN().fit([]), "clients"),
    ("client-without-samples", lambda ct, d: ct.FedAvgDNN(rounds=1).fit(
        [(np.zeros((0, 64)), np.zeros(0, int), np.zeros((1, 64)), np.zeros(1, int))]),
     "clients[0].X_train"),
    ("fractional-class-labels", lambda ct, d: ct.FedAvgDNN(rounds=1).fit(
        np.zeros((6, 3)), np.array([0, 1, 0.5, 1, 0, 1]), np.repeat([0, 1], 3)),
     "clients[0].y_train"),
    ("son-graph-size", lambda ct, d: ct.SONHeads(graph=G.complete(5)).fit(d), "graph"),
    ("ppfl-schedule", lambda ct, d: ct.PPFLDNN(rounds=1, schedule="sgd").fit(d), "schedule"),
    ("ckt-public-features", lambda ct, d: ct.PerFedCKT(rounds=1).fit(
        d, public=np.zeros((3, 5))), "public"),
    ("participation-string", lambda ct, d: ct.FedAvgDNN(participation="all").fit(d),
     "participation"),
    ("digits-kind", lambda ct, d: ct.digits_federation(kind="rotated"), "kind"),
]


@pytest.mark.parametrize("call, name", [c[1:] for c in TORCH_CASES],
                         ids=[c[0] for c in TORCH_CASES])
def test_torch_trainers_refuse_bad_input(ct, digits, call, name):
    assert_refused(lambda: call(ct, digits), name)


def test_python_m_convexfl_torch_bad_option_gives_a_clean_error(ct, capsys):
    from convexfl.torch.compare import main

    rc, err = _run_main(main, ["--clients", "0"], capsys)
    assert rc == 2 and "n_clients" in err and "Traceback" not in err
