"""SSNAL for convex clustering (quadratic loss)."""

import numpy as np
import pytest
from helpers import make_loss, reference
from hypothesis import given, settings
from hypothesis import strategies as st

import convexfl as cfl
from convexfl.solvers import IncompatibleLossError


def clustered(n_per=6, seed=0, weights=None):
    rng = np.random.default_rng(seed)
    A = 0.4 * np.r_[rng.standard_normal((n_per, 2)), rng.standard_normal((n_per, 2)) + 10.0,
                    rng.standard_normal((n_per, 2)) + [10.0, -10.0]]
    return cfl.losses.Quadratic(A, weights)


@pytest.mark.parametrize("graph", ["complete", "knn"])
def test_ssnal_agrees_with_reference_with_user_weights(graph):
    rng = np.random.default_rng(1)
    loss = clustered(weights=rng.uniform(0.5, 2.0, 18))
    g = (cfl.graphs.complete(18) if graph == "complete"
         else cfl.graphs.knn(loss.points, 4, phi=0.3, warn_disconnected=False))
    prob = cfl.SumOfNorms(loss, g, 0.15 if graph == "complete" else 0.3)
    ref = reference(prob, tol=1e-9)
    res = cfl.solve(prob, method="ssnal", tol=1e-8)
    assert res.converged and res.kkt_residual <= 1e-8
    assert abs(res.objective - ref.objective) <= 1e-8 * abs(ref.objective)
    assert cfl.clusters.same_partition(res.labels(), ref.labels())
    assert 1 < res.n_clusters < 18
    # the multipliers are the flows: feasible by construction
    cap = prob.lam * g.weights
    assert np.all(np.linalg.norm(res.flows, axis=1) <= cap * (1 + 1e-12))
    assert res.history["newton"] and res.history["cg_total"] > 0


@pytest.mark.parametrize("name", ["least_squares", "logistic", "poisson"])
def test_other_losses_raise_incompatible_loss_error(name):
    prob = cfl.SumOfNorms(make_loss(name, n_users=4), cfl.graphs.complete(4), 0.1)
    with pytest.raises(IncompatibleLossError, match="needs the quadratic loss.*method='admm'"):
        cfl.solve(prob, method="ssnal")


def test_auto_picks_ssnal_for_quadratic_and_admm_otherwise():
    prob = cfl.SumOfNorms(clustered(), cfl.graphs.complete(18), 0.08)
    assert cfl.solve(prob, method="auto").method == "ssnal"
    prob = cfl.SumOfNorms(make_loss("logistic", n_users=4), cfl.graphs.complete(4), 0.1)
    assert cfl.solve(prob, method="auto").method == "admm"


def test_truncated_run_is_not_converged():
    prob = cfl.SumOfNorms(clustered(), cfl.graphs.complete(18), 0.08)
    res = cfl.solve(prob, method="ssnal", max_iter=1, tol=1e-12, polish=False)
    assert not res.converged and "max_iter=1" in res.message


def test_warm_start_converges_immediately_and_along_lambda():
    loss = clustered()
    g = cfl.graphs.knn(loss.points, 4, warn_disconnected=False)
    prob = cfl.SumOfNorms(loss, g, 0.3)
    first = cfl.solve(prob, method="ssnal", tol=1e-9)
    again = cfl.solve(prob, method="ssnal", tol=1e-9, warm_start=first)
    # an optimal warm start's partition is certified before any iteration
    assert again.converged and again.n_iter == 0
    assert again.history["warm_partition_certified"]
    nxt = cfl.solve(prob.with_lam(0.35), method="ssnal", tol=1e-9, warm_start=first)
    ref = reference(prob.with_lam(0.35), tol=1e-9)
    assert nxt.converged and abs(nxt.objective - ref.objective) <= 1e-8 * ref.objective


@pytest.mark.parametrize("option, value, exc", [
    ("sigma", 0.0, ValueError), ("sigma_factor", 1.0, ValueError),
    ("sigma_max", -1.0, ValueError), ("max_newton", 0, ValueError),
    ("cg_max_iter", 0, ValueError), ("polish", None, TypeError), ("tol", -1e-3, ValueError),
    ("max_iter", 0, ValueError),
])
def test_bad_options_raise_errors_naming_the_argument(option, value, exc):
    prob = cfl.SumOfNorms(clustered(), cfl.graphs.complete(18), 0.08)
    with pytest.raises(exc, match=option):
        cfl.solve(prob, method="ssnal", **{option: value})


def test_pcg_flushes_subnormal_range_entries_and_solves():
    from convexfl.certificates import pcg
    from convexfl.solvers.ssnal import _flush

    rng = np.random.default_rng(0)
    n = 40
    Q = rng.standard_normal((n, n))
    M = Q @ Q.T + n * np.eye(n)
    B = rng.standard_normal((n, 2))
    B[0, 0] = 1e-200  # would make subnormal products
    X, it = pcg(lambda V: M @ V, B.copy(), lambda R: R / np.diag(M)[:, None], 1e-12, 500)
    B[0, 0] = 0.0
    assert it >= 1 and np.linalg.norm(M @ X - B) <= 1e-9 * np.linalg.norm(B)
    V = np.array([[1e-300, 1.0], [-1e-160, 2.0]])
    assert np.array_equal(_flush(V), [[0.0, 1.0], [0.0, 2.0]])


def test_sigma_stops_growing_once_primal_residual_is_negligible():
    # near-degenerate kNN instance: σ used to climb to sigma_max while Newton stalled
    rng = np.random.default_rng(3)
    A = rng.standard_normal((120, 3))
    g = cfl.graphs.knn(A, 6, warn_disconnected=False)
    prob = cfl.SumOfNorms(cfl.losses.Quadratic(A), g, 0.3)
    res = cfl.solve(prob, method="ssnal", tol=1e-8, max_iter=60)
    hist = res.history
    tol = 1e-8
    for k in range(1, len(hist["sigma"])):
        if hist["sigma"][k] > hist["sigma"][k - 1]:
            # ...or the candidate of iteration k (1-based) failed its certificate with the
            # residual proxy already below tol and no better than the best before it
            proxy = max(hist["eta_p"][k - 1], hist["eta_d"][k - 1])
            at = hist["certify_at"]
            kkts = hist["certified_kkt"]
            no_better = k in at and 0 < at.index(k) and kkts[at.index(k)] >= kkts[at.index(k) - 1]
            assert hist["eta_p"][k - 1] > 1e-4 * tol or (proxy <= tol and no_better)
    ref = reference(prob, tol=1e-9)
    if res.converged:
        assert abs(res.objective - ref.objective) <= 1e-6 * abs(ref.objective)


def test_auto_picks_ssnal_on_dense_graphs_and_admm_then_ssnal_on_sparse_ones(monkeypatch):
    import convexfl.solvers._common as common
    from convexfl.solvers import AUTO_ADMM_ITER

    rng = np.random.default_rng(2)
    A = rng.standard_normal((200, 2))
    loss = cfl.losses.Quadratic(A)
    dense = cfl.solve(cfl.SumOfNorms(loss, cfl.graphs.complete(200), 0.01), method="auto")
    assert dense.method == "ssnal" and dense.converged
    assert "admm_warm_up" not in dense.history
    g = cfl.graphs.knn(A, 5, warn_disconnected=False)
    # many near-degenerate clusters: ADMM does not certify in its first stage, SSNAL does
    hard = cfl.SumOfNorms(loss, g, 0.1)
    # the repair of the ADMM stage's partition certifies it (tests/test_repair.py)...
    repaired = cfl.solve(hard, method="auto")
    assert repaired.stage == "partition repair" and repaired.converged
    # ...without it (no rounds), SSNAL does
    monkeypatch.setattr(common, "REPAIR_ROUNDS", 0)
    sparse = cfl.solve(hard, method="auto")
    assert sparse.method == "ssnal" and sparse.converged
    stage = sparse.history["admm_warm_up"]
    assert stage["n_iter"] == AUTO_ADMM_ITER and stage["kkt_residual"] > sparse.kkt_tol
    assert sparse.history["repair"]["rounds"] == 0
    assert sparse.time_s >= stage["time_s"] + sparse.history["repair"]["time_s"]
    assert sparse.n_clusters == cfl.solve(hard, method="ssnal").n_clusters \
        == repaired.n_clusters
    assert abs(sparse.objective - repaired.objective) <= 1e-6 * abs(sparse.objective)
    # every user its own cluster: ADMM certifies within its first stage
    easy = cfl.solve(cfl.SumOfNorms(loss, g, 1e-3), method="auto")
    assert easy.method == "admm" and easy.converged and easy.n_iter <= AUTO_ADMM_ITER
    # a warm start (as along a path) goes to the ADMM stage, which first tries its
    # partition at the new λ; failing that, ADMM iterations and then SSNAL
    warm = cfl.solve(cfl.SumOfNorms(loss, g, 0.11), method="auto", warm_start=sparse)
    assert warm.converged
    assert (warm.method, warm.stage, warm.n_iter) == ("admm", "warm partition", 0) or \
        warm.history["admm_warm_up"]["n_iter"] == AUTO_ADMM_ITER


@pytest.mark.parametrize("threads", [1, None])
def test_solve_runs_with_the_set_number_of_blas_threads(monkeypatch, threads):
    """``solve`` limits BLAS to ``BLAS_THREADS`` threads while a method runs (None: the
    library's own setting is left alone), and restores it afterwards."""
    from threadpoolctl import threadpool_info, threadpool_limits

    import convexfl.solvers as solvers

    def blas_threads():
        return [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]

    seen = []

    def probe(prob, **options):
        seen.append(blas_threads())
        return solvers.METHODS["ssnal"](prob, **options)

    monkeypatch.setitem(solvers.METHODS, "probe", probe)
    monkeypatch.setattr(solvers, "BLAS_THREADS", threads)
    A = np.random.default_rng(0).standard_normal((12, 2))
    prob = cfl.SumOfNorms(cfl.losses.Quadratic(A), cfl.graphs.complete(12), 0.05)
    with threadpool_limits(2, user_api="blas"):  # so that a limit to 1 can be seen
        before = blas_threads()
        assert cfl.solve(prob, method="probe").converged
        assert blas_threads() == before
    assert seen == [[1] * len(before) if threads == 1 else before]


@pytest.mark.parametrize("kind, dim", [("amg", 3), ("hessian", 3), ("hessian", 2),
                                       ("hessian", 1), ("sparsified", 3), ("sparsified", 2)])
def test_newton_solvers_give_the_lu_solution(kind, dim):
    rng = np.random.default_rng(3)
    A = np.r_[rng.standard_normal((150, dim)), rng.standard_normal((150, dim)) + 4.0]
    g = cfl.graphs.knn(A, 10, warn_disconnected=False)
    prob = cfl.SumOfNorms(cfl.losses.Quadratic(A), g, 0.5)
    lu = cfl.solve(prob, method="ssnal", newton_solver="lu", tol=1e-8)
    other = cfl.solve(prob, method="ssnal", newton_solver=kind, tol=1e-8)
    assert lu.history["newton_solver"] == "lu" and other.history["newton_solver"] == kind
    assert lu.converged and other.converged and other.kkt_residual <= 1e-8
    assert cfl.clusters.same_partition(other.labels(), lu.labels())
    assert abs(other.objective - lu.objective) <= 1e-8 * abs(lu.objective)
    assert np.max(np.abs(other.X - lu.X)) <= 1e-6


def _newton_system(n=60, d=2, seed=0, sigma=2.0):
    """A generalised Hessian of SSNAL with edges both inside and outside the ball: its
    edge terms ``(wts, Q)`` (``hess_terms``) and blocks."""
    from convexfl.solvers._ssnal_kernels import hess_blocks, hess_terms, psi_grad

    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, d))
    g = cfl.graphs.knn(A, 6, warn_disconnected=False)
    coef = np.full(n, 1.0)
    cap = 0.3 * g.weights
    m = g.n_edges
    X = A + 0.1 * rng.standard_normal((n, d))
    Y = rng.standard_normal((m, d))
    G, P, tnorm = np.empty((n, d)), np.empty((m, d)), np.empty(m)
    psi_grad(A, coef, g.edges, cap, X, Y, sigma, G, P, tnorm)
    assert 0 < np.sum(tnorm > cap) < m  # both kinds of edge blocks occur
    wts, Q, blocks = np.empty(m), np.empty((m, d)), np.empty((m, d, d))
    hess_terms(g.edges, cap, P, tnorm, sigma, wts, Q)
    hess_blocks(wts, Q, blocks)
    return coef, g.edges, cap, wts, Q, sigma, blocks


def test_the_hessian_lu_is_the_exact_newton_matrix():
    """The "hessian" preconditioner solves the Newton system itself: its solve inverts the
    matrix-free product ``hess_vec`` to rounding, blocks and ordering included."""
    from convexfl.solvers._ssnal_kernels import hess_blocks, hess_terms, hess_vec, psi_grad
    from convexfl.solvers.ssnal import _Precond

    rng = np.random.default_rng(1)
    coef, edges, cap, wts, Q, sigma, blocks = _newton_system()
    n, d = coef.size, blocks.shape[1]
    pre = _Precond(coef, edges, n, "hessian")
    pre.factor_hessian(blocks)
    V = rng.standard_normal((n, d))
    HV = np.empty((n, d))
    hess_vec(coef, edges, wts, Q, V, HV)
    np.testing.assert_allclose(pre.solve(HV), V, rtol=0, atol=1e-10)
    # the next factorisations keep the first one's ordering (its CSC filled in place):
    # exact at their own σ and iterate
    for sigma2 in (3.0 * sigma, 0.2 * sigma):
        P2, t2 = np.empty_like(Q), np.empty_like(wts)
        A = rng.standard_normal((n, d))
        psi_grad(A, coef, edges, cap, A + 0.1 * rng.standard_normal((n, d)),
                 rng.standard_normal(Q.shape), sigma2, np.empty((n, d)), P2, t2)
        hess_terms(edges, cap, P2, t2, sigma2, wts, Q)
        hess_blocks(wts, Q, blocks)
        pre.factor_hessian(blocks)
        assert pre.layout is not None
        hess_vec(coef, edges, wts, Q, V, HV)
        np.testing.assert_allclose(pre.solve(HV), V, rtol=0, atol=1e-10)


def _preconditioned_spectrum(pre, coef, edges, wts, Q):
    """The eigenvalues of ``M⁻¹H`` (dense), ``M⁻¹`` being ``pre.solve``."""
    from convexfl.solvers._ssnal_kernels import hess_vec

    n, d = coef.size, Q.shape[1]
    H = np.empty((n * d, n * d))
    for k in range(n * d):
        E = np.zeros(n * d)
        E[k] = 1.0
        out = np.empty((n, d))
        hess_vec(coef, edges, wts, Q, E.reshape(n, d), out)
        H[:, k] = out.ravel()
    return np.linalg.eigvals(np.column_stack([pre.solve(H[:, k].reshape(n, d)).ravel()
                                              for k in range(n * d)]))


def _in_zero_two(ev):
    assert np.max(np.abs(ev.imag)) <= 1e-9
    assert ev.real.min() > 0 and ev.real.max() < 2
    assert np.max(np.abs(ev.real - 1)) > 0.1  # not the exact inverse


def test_the_sparsified_matrix_is_within_a_factor_two_of_the_hessian():
    """Dropping the weak edges' off-diagonal blocks (their diagonal blocks kept) gives an
    SPD ``M`` with ``H ⪯ 2M``: the eigenvalues of ``M⁻¹H`` are real and lie in (0, 2), not
    all at 1 (edges were dropped)."""
    from convexfl.solvers.ssnal import STRONG_RATIO, _Precond

    coef, edges, cap, wts, Q, sigma, blocks = _newton_system(sigma=10.0)
    assert 0 < np.sum(wts >= STRONG_RATIO) < edges.shape[0]  # edges kept and dropped
    pre = _Precond(coef, edges, coef.size, "sparsified")
    pre.factor_sparsified(wts, Q, sigma)
    assert pre.n_sparsified == 1 and pre.n_mixed == 0
    _in_zero_two(_preconditioned_spectrum(pre, coef, edges, wts, Q))


def test_the_sparsified_pattern_is_kept_while_few_strong_edges_are_missing(monkeypatch):
    """A factorisation whose strong edges are those of the last analysed pattern but a few
    (at most ``REANALYSE_SHARE`` of its edges) keeps that pattern: the factor is only
    refactorised, the missing edges are dropped, and ``M⁻¹H`` still has its spectrum in
    (0, 2). Past the share, or when the users left to the isotropic block change, the
    pattern is the strong edges' own (analysed anew where its matrix pattern is new)."""
    from convexfl.solvers import ssnal
    from convexfl.solvers.ssnal import STRONG_RATIO, _Precond

    coef, edges, cap, wts, Q, sigma, blocks = _newton_system(sigma=10.0)
    strong = np.flatnonzero(wts >= STRONG_RATIO)
    pre = _Precond(coef, edges, coef.size, "sparsified")
    first = wts.copy()
    first[strong[:2]] = 0.0  # two strong edges fewer at the first factorisation
    monkeypatch.setattr(ssnal, "REANALYSE_SHARE", 2.0 / (strong.size - 2))
    pre.factor_sparsified(first, Q, sigma)
    pre.factor_sparsified(wts, Q, sigma)  # two edges missing from the pattern: kept
    assert pre.n_analysed == 1
    assert np.count_nonzero(pre.kept[0]) == strong.size - 2
    _in_zero_two(_preconditioned_spectrum(pre, coef, edges, wts, Q))
    monkeypatch.setattr(ssnal, "REANALYSE_SHARE", 1.0 / (strong.size - 2))
    pre.factor_sparsified(wts, Q, sigma)  # past the share: the strong edges' own pattern
    assert pre.n_analysed == 2
    assert np.count_nonzero(pre.kept[0]) == strong.size
    pre.kept = (np.zeros_like(pre.kept[0]),
                np.ones(coef.size, bool))  # as if all users had been "big", with no edge
    pre.factor_sparsified(wts, Q, sigma)  # big changed: the strong edges' own pattern again
    assert not pre.kept[1].any() and np.count_nonzero(pre.kept[0]) == strong.size
    assert pre.n_analysed == 2  # ...which is the pattern analysed last


def test_a_block_factor_refused_for_its_pivots_falls_back_to_the_isotropic_matrix(
        monkeypatch):
    """Where rounding would leave a pivot of the block factor not positive definite, the
    Newton system is preconditioned by the isotropic ``C + σ L_w`` of all users instead
    (SPD, ``B_e ⪯ w_e I``), and the refusal is counted; the next factorisation tries the
    blocks again."""
    from convexfl.solvers import _block_ldl
    from convexfl.solvers.ssnal import _Precond

    coef, edges, cap, wts, Q, sigma, blocks = _newton_system(sigma=10.0)
    n, d = coef.size, blocks.shape[1]
    factor = _block_ldl.BlockLDL.factor

    def refused(self, diag, s, Q):
        raise _block_ldl.NotDefiniteError("M is not positive definite")

    monkeypatch.setattr(_block_ldl.BlockLDL, "factor", refused)
    pre = _Precond(coef, edges, n, "sparsified")
    pre.factor_sparsified(wts, Q, sigma)
    assert (pre.n_not_definite, pre.n_sparsified, pre.n_factor) == (1, 0, 1)
    R = np.random.default_rng(2).standard_normal((n, d))
    M = pre._isotropic(wts).toarray()
    np.testing.assert_allclose(M @ pre.solve(R), R, rtol=0, atol=1e-9)
    monkeypatch.setattr(_block_ldl.BlockLDL, "factor", factor)
    pre.factor_sparsified(wts, Q, sigma)
    assert (pre.n_not_definite, pre.n_sparsified, pre.n_factor) == (1, 1, 2)
    _in_zero_two(_preconditioned_spectrum(pre, coef, edges, wts, Q))


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 30), st.integers(1, 3), st.floats(0.0, 1.0), st.integers(0, 2**32 - 1))
def test_the_sparsified_solve_inverts_the_matrix_as_defined(n, d, share, seed):
    """The sparsified Hessian's solve inverts ``C ⊗ I + Σ_e`` (its blocks ``B_e`` on the
    diagonal blocks of both ends) with ``−B_e`` off the diagonal for the kept edges only,
    also when only the values are new (the same edges kept: no new analysis); restricted to
    a set of users no kept edge leaves, it inverts that matrix's block on them. A kept edge
    that leaves the set is refused."""
    from convexfl._flow_kernels import masked_components
    from convexfl.solvers.ssnal import _Precond

    rng = np.random.default_rng(seed)
    pairs = np.array([(i, j) for i in range(n) for j in range(i + 1, n)], dtype=np.int64)
    edges = np.ascontiguousarray(pairs[rng.random(len(pairs)) < 0.4].reshape(-1, 2))
    m = len(edges)
    coef = rng.uniform(0.5, 2.0, n)
    T = rng.standard_normal((m, d))
    T /= np.maximum(np.linalg.norm(T, axis=1, keepdims=True), 1e-12)
    s = rng.uniform(0.0, 3.0, m)
    Q = np.sqrt(s)[:, None, None] * T[:, :, None]  # B_e = s_e (I − T̂T̂ᵀ), as SSNAL's
    s2 = rng.uniform(0.0, 2.0, (m, d))  # other values: diagonal blocks, Q_e of rank d
    Q2 = np.sqrt(s2.max(axis=1)[:, None] - s2)[:, :, None] * np.eye(d)
    s2 = s2.max(axis=1)
    blocks = s[:, None, None] * np.eye(d) - Q @ Q.transpose(0, 2, 1)
    other = s2[:, None, None] * np.eye(d) - Q2 @ Q2.transpose(0, 2, 1)
    keep = rng.random(m) < share

    def assembled(blocks):
        dense = np.kron(np.diag(coef), np.eye(d))
        for (i, j), block, kept in zip(edges, blocks, keep, strict=True):
            for p, q, sign in ((i, i, 1), (j, j, 1)) + (((i, j, -1), (j, i, -1)) if kept
                                                        else ()):
                dense[p * d:(p + 1) * d, q * d:(q + 1) * d] += sign * block
        return dense

    def inverts(solve, dense, users):
        rows = (np.flatnonzero(users)[:, None] * d + np.arange(d)).ravel()
        B = rng.standard_normal((n, d))
        out = np.full((n, d), np.nan)
        solve(B, out)
        np.testing.assert_allclose(dense[np.ix_(rows, rows)] @ out[users].ravel(),
                                   B[users].ravel(), rtol=0, atol=1e-9)
        np.testing.assert_array_equal(solve(B), out[users])
        assert np.all(np.isnan(out[~users]))

    everyone = np.ones(n, dtype=bool)
    pre = _Precond(coef, edges, n, "sparsified")
    inverts(pre._sparsified(s, Q, keep), assembled(blocks), everyone)
    inverts(pre._sparsified(s2, Q2, keep), assembled(other), everyone)  # the same edges kept
    if m:  # control: the first matrix's factor does not invert the second
        with pytest.raises(AssertionError):
            inverts(pre._sparsified(s, Q, keep), assembled(other), everyone)
    assert pre.n_analysed == 1
    comp = masked_components(n, edges, keep)[0]
    users = comp == comp[rng.integers(n)]  # a component of the kept edges
    inverts(pre._sparsified(s, Q, keep, users=users), assembled(blocks), users)
    assert pre.n_analysed == 1 + (not users.all())  # new users: a new analysis
    outside = np.flatnonzero(~users)
    if outside.size:  # one more kept edge, from the component to a user outside it
        leaving = np.r_[edges, [np.sort([np.flatnonzero(users)[0], outside[0]])]]
        with pytest.raises(ValueError, match="keep"):
            _Precond(coef, leaving, n, "sparsified")._sparsified(
                np.r_[s, 1.0], np.r_[Q, np.zeros((1, d, 1))], np.r_[keep, True],
                users=users)


@pytest.mark.parametrize("n", [5, 600])
def test_the_amg_v_cycle_is_pyamgs_on_every_column_and_symmetric(n):
    """``vcycle`` applies, to all columns at once, the V-cycle of pyamg's preconditioner
    (Ruge–Stüben hierarchy, forward Gauss–Seidel before and backward after each coarse
    correction, pseudo-inverse on the coarsest level): the same numbers to rounding, on a
    hierarchy of several levels and on one of a single level; and it is symmetric, as CG
    needs. Forward sweeps after the coarse corrections give other numbers (the control)."""
    import pyamg
    import scipy.sparse as sp

    from convexfl.certificates import vcycle

    rng = np.random.default_rng(3)
    edges = cfl.graphs.knn(rng.standard_normal((n, 3)), min(6, n - 1)).edges
    w = 10.0 ** rng.uniform(-1, 4, len(edges))
    i, j = edges.T
    adj = sp.coo_matrix((np.r_[w, w], (np.r_[i, j], np.r_[j, i])), shape=(n, n)).tocsr()
    M = sp.diags(rng.uniform(0.5, 2.0, n) + np.asarray(adj.sum(axis=1)).ravel(),
                 format="csr") - adj
    ml = pyamg.ruge_stuben_solver(M, presmoother=("gauss_seidel", {"sweep": "forward"}),
                                  postsmoother=("gauss_seidel", {"sweep": "backward"}))
    assert (len(ml.levels) > 2) == (n > 100)
    one = ml.aspreconditioner(cycle="V")
    R = rng.standard_normal((n, 3))
    expected = np.column_stack([one.matvec(R[:, c].copy()) for c in range(3)])
    solve = vcycle(M)
    np.testing.assert_allclose(solve(R), expected, rtol=1e-10, atol=1e-12 * np.abs(expected).max())
    a, b = rng.standard_normal((2, n, 1))
    assert np.vdot(solve(a), b) == pytest.approx(np.vdot(a, solve(b)), rel=1e-10)
    if n > 100:  # the control: forward sweeps after the coarse corrections too
        other = pyamg.ruge_stuben_solver(M, presmoother=("gauss_seidel", {"sweep": "forward"}),
                                         postsmoother=("gauss_seidel", {"sweep": "forward"}))
        control = other.aspreconditioner(cycle="V").matvec(R[:, 0].copy())
        assert not np.allclose(control, expected[:, 0], rtol=1e-6)


@pytest.mark.parametrize("columns", [1, 2, 3, 4])
def test_the_sweep_from_zero_and_its_residual_are_those_of_a_sweep_and_a_product(columns):
    """``gauss_seidel_from_zero`` (the V-cycle's pre-smoothing, reading the lower triangle
    once) gives the forward sweep of ``gauss_seidel`` from zero and the residual ``B − A X``
    after it, to rounding, for any number of columns, a row with a zero diagonal included
    (left at zero by both); the control: the residual before the sweep is not that."""
    import scipy.sparse as sp

    from convexfl._flow_kernels import gauss_seidel, gauss_seidel_from_zero, lower_ends

    rng = np.random.default_rng(columns)
    n = 300
    A = sp.random(n, n, density=0.03, random_state=rng)
    A = (A + A.T + sp.diags(rng.uniform(1.0, 3.0, n) * (np.arange(n) != 7))).tocsr()
    A.sort_indices()
    diag = A.diagonal()
    B = rng.standard_normal((n, columns))
    X, R = np.full((n, columns), np.nan), np.full((n, columns), np.nan)
    gauss_seidel_from_zero(A.indptr, A.indices, A.data, lower_ends(A.indptr, A.indices),
                           diag, X, B, R)
    expected = np.zeros((n, columns))
    gauss_seidel(A.indptr, A.indices, A.data, diag, expected, B, True)
    np.testing.assert_allclose(X, expected, rtol=1e-12, atol=1e-14)
    assert np.all(X[7] == 0.0)
    np.testing.assert_allclose(R, B - A @ expected, rtol=1e-10, atol=1e-12 * np.abs(B).max())
    assert not np.allclose(R, B, atol=1e-3)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 40), st.integers(1, 40), st.integers(1, 40), st.floats(0.0, 0.5),
       st.integers(0, 2**32 - 1))
def test_the_sparse_product_is_scipys_on_a_pattern_fixed_by_the_structure(n, k, m, density,
                                                                          seed):
    """``product_pattern`` and ``product_values`` give ``A B`` as scipy does, each row's
    columns sorted; the pattern holds every structural entry, so a sum that cancels to
    zero keeps its place (scipy drops it) and the pattern serves other values."""
    import scipy.sparse as sp

    from convexfl._flow_kernels import product_pattern, product_values

    rng = np.random.default_rng(seed)
    A = sp.random(n, k, density=density, format="csr", random_state=rng)
    B = sp.random(k, m, density=density, format="csr", random_state=rng)
    Cp, Cj = product_pattern(m, A.indptr, A.indices, B.indptr, B.indices)
    structure = (abs(A).sign() @ abs(B).sign()).tocsr()
    structure.sort_indices()
    np.testing.assert_array_equal(Cp, structure.indptr)
    np.testing.assert_array_equal(Cj, structure.indices)
    for signs in (np.ones(B.nnz), rng.choice([-1.0, 1.0], B.nnz)):
        B2 = sp.csr_matrix((B.data * signs, B.indices, B.indptr), shape=B.shape)
        C = sp.csr_matrix((product_values(m, A.indptr, A.indices, A.data, B2.indptr,
                                          B2.indices, B2.data, Cp, Cj), Cj, Cp),
                          shape=(n, m))
        np.testing.assert_allclose(C.toarray(), (A @ B2).toarray(), rtol=1e-12, atol=1e-15)
    one = sp.csr_matrix(np.array([[1.0, 1.0]]))
    cancel = sp.csr_matrix(np.array([[1.0], [-1.0]]))
    Cp, Cj = product_pattern(1, one.indptr, one.indices, cancel.indptr, cancel.indices)
    assert list(Cj) == [0] and (one @ cancel).nnz == 0
    assert product_values(1, one.indptr, one.indices, one.data, cancel.indptr,
                          cancel.indices, cancel.data, Cp, Cj)[0] == 0.0


def _isotropic_knn(w, n=600):
    import scipy.sparse as sp

    rng = np.random.default_rng(3)
    edges = cfl.graphs.knn(rng.standard_normal((n, 3)), 6).edges
    i, j = edges.T
    adj = sp.coo_matrix((np.r_[w, w], (np.r_[i, j], np.r_[j, i])), shape=(n, n)).tocsr()
    return sp.diags(rng.uniform(0.5, 2.0, n) + np.asarray(adj.sum(axis=1)).ravel(),
                    format="csr") - adj


def test_a_v_cycle_on_earlier_grid_transfers_is_galerkins_and_a_preconditioner():
    """``vcycle(M, transfers)`` keeps an earlier hierarchy's grid transfers ``P``, ``R`` and
    builds the coarse matrices of ``M`` by Galerkin products ``R A P``, as pyamg's set-up
    does: on the earlier hierarchy's own matrix it is that cycle to rounding. On a matrix of
    the same pattern with other weights it is still symmetric and positive definite; with every
    weight changed by a factor between 1/2 and 2 (as between Newton steps at one σ), CG
    under it takes at most 1.5 times the iterations of the matrix's own hierarchy."""
    from convexfl.certificates import pcg, vcycle

    rng = np.random.default_rng(1)
    m = cfl.graphs.knn(np.random.default_rng(3).standard_normal((600, 3)), 6).n_edges
    w = 10.0 ** rng.uniform(-1, 4, m)
    first, second = _isotropic_knn(w), _isotropic_knn(w * 2.0 ** rng.uniform(-1, 1, m))
    own = vcycle(first)
    assert len(own.transfers) >= 2
    R = np.random.default_rng(4).standard_normal((600, 3))
    expected = own(R)
    np.testing.assert_allclose(vcycle(first, own.transfers)(R), expected, rtol=1e-10,
                               atol=1e-12 * np.abs(expected).max())
    kept = vcycle(second, own.transfers)
    a, b = np.random.default_rng(5).standard_normal((2, 600, 1))
    assert np.vdot(kept(a), b) == pytest.approx(np.vdot(a, kept(b)), rel=1e-10)
    assert np.vdot(a, kept(a)) > 0 and np.vdot(b, kept(b)) > 0
    iterations = [pcg(lambda V: second @ V, R, solve, 1e-10, 500)
                  for solve in (vcycle(second), kept)]
    for X, _ in iterations:
        assert np.linalg.norm(R - second @ X) <= 1e-10 * np.linalg.norm(R)
    assert iterations[1][1] <= 1.5 * iterations[0][1], iterations


def test_the_amg_hierarchy_is_set_up_once_per_sigma_and_users():
    """The isotropic preconditioner's V-cycle keeps its grid transfers while σ and the users
    it covers stay (Newton steps within one outer iteration), and sets up a new hierarchy
    when either changes; each cycle is on the current weights."""
    from convexfl.certificates import vcycle
    from convexfl.solvers.ssnal import _Precond

    coef, edges, cap, wts, Q, sigma, blocks = _newton_system(n=400, d=3, sigma=0.3)
    pre = _Precond(coef, edges, coef.size, "amg")
    pre.factor(wts, sigma)
    first = pre.amg
    pre.factor(2.0 * wts, sigma)
    assert pre.n_amg_reused == 1 and pre.amg is first
    R = np.random.default_rng(0).standard_normal((coef.size, 3))
    M = pre._isotropic(2.0 * wts)
    np.testing.assert_allclose(pre.solve(R), vcycle(M, first[2])(R), rtol=1e-12)
    pre.factor(wts, 3.0 * sigma)
    assert pre.n_amg_reused == 1 and pre.amg is not first
    users = np.arange(coef.size) < coef.size // 2
    pre._amg(M[users][:, users], users, 3.0 * sigma)
    assert pre.n_amg_reused == 1 and pre.amg[0] is not None


def _largest_strong_component(coef, edges, wts, ratio):
    from convexfl._flow_kernels import masked_components

    i, j = edges.T
    comp = masked_components(coef.size, edges, wts >= ratio * np.minimum(coef[i], coef[j]))[0]
    return np.bincount(comp).max()


@pytest.mark.parametrize("limit", ["SPARSIFIED_MAX_COMPONENT", "SPARSIFIED_MAX_UNKNOWNS",
                                   "SPARSIFIED_COMPONENT_SHARE"])
def test_a_component_too_large_is_cut_along_its_weakest_edges(monkeypatch, limit):
    """Inside a component of more than ``SPARSIFIED_MAX_COMPONENT`` users, more than
    ``SPARSIFIED_COMPONENT_SHARE`` of all users, or more than ``SPARSIFIED_MAX_UNKNOWNS``
    unknowns (users · d), the ratio is raised (fourfold): its weakest kept edges go, the kept
    edges elsewhere stay, and every component left is small enough."""
    import convexfl.solvers.ssnal as ssnal
    from convexfl._flow_kernels import masked_components

    coef, edges, cap, wts, Q, sigma, blocks = _newton_system(sigma=10.0)
    r = ssnal.STRONG_RATIO
    largest = _largest_strong_component(coef, edges, wts, r)
    assert _largest_strong_component(coef, edges, wts, 4 * r) < largest
    d = blocks.shape[1]
    monkeypatch.setattr(ssnal, "SPARSIFIED_MIN_COMPONENT", 0)  # the share's floor: below
    value = {"SPARSIFIED_MAX_UNKNOWNS": (largest - 1) * d,
             "SPARSIFIED_COMPONENT_SHARE": (largest - 1) / coef.size}.get(limit, largest - 1)
    monkeypatch.setattr(ssnal, limit, value)
    keep, big = ssnal._Precond(coef, edges, coef.size, "sparsified").strong_edges(wts, d)
    first = wts >= r * np.minimum(coef[edges[:, 0]], coef[edges[:, 1]])
    assert not big.any() and np.all(first[keep]) and 0 < keep.sum() < first.sum()
    comp = masked_components(coef.size, edges, first)[0]
    sizes = np.bincount(comp)[comp[edges[:, 0]]]
    np.testing.assert_array_equal(keep[sizes < largest], first[sizes < largest])
    assert np.bincount(masked_components(coef.size, edges, keep)[0]).max() < largest


def _strong_edges_by_raising(n, edges, wts, coef, ratio, ratio_max, max_users):
    """The definition of the strong edges: raise the ratio fourfold inside the components
    (scipy's) that are too large, keep the other components' edges."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    def labels(mask):
        adj = coo_matrix((np.ones(mask.sum()), tuple(edges[mask].T)), shape=(n, n))
        return connected_components(adj, directed=False)[1]

    c_min = np.minimum(coef[edges[:, 0]], coef[edges[:, 1]])
    keep = wts >= ratio * c_min
    while True:
        comp = labels(keep)
        big = (np.bincount(comp) > max_users)[comp]
        if not big.any() or ratio >= ratio_max:
            return keep, big
        ratio *= 4.0
        keep &= ~big[edges[:, 0]] | (wts >= ratio * c_min)


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 40), st.floats(0.1, 0.9), st.integers(1, 30), st.integers(0, 3),
       st.integers(0, 2**32 - 1))
def test_the_strong_edges_in_one_pass_are_those_of_the_raised_ratios(n, density, max_users,
                                                                       raises, seed):
    """``strong_edges_by_level`` (one union–find from the top level down) keeps the edges
    and marks the users that raising the ratio fourfold inside the components too large
    does, for any graph, weights spread over the levels (some exactly at a threshold),
    limit and number of raises. (That the raising cuts something, so that the two differ
    from the plain threshold: ``test_a_component_too_large_is_cut_along_its_weakest_edges``;
    the kernel with ``<`` for ``<=``, or one level fewer, fails here.)"""
    from convexfl.solvers._ssnal_kernels import strong_edges_by_level

    rng = np.random.default_rng(seed)
    pairs = np.array([(i, j) for i in range(n) for j in range(i + 1, n)], dtype=np.int64)
    edges = np.ascontiguousarray(pairs[rng.random(len(pairs)) < density].reshape(-1, 2))
    coef = rng.choice([0.5, 1.0, 2.0], n)
    c_min = np.minimum(coef[edges[:, 0]], coef[edges[:, 1]])
    wts = c_min * 3.0 * 4.0 ** rng.uniform(-1.5, raises + 1.5, len(edges))
    at = rng.random(len(edges)) < 0.2
    wts[at] = c_min[at] * 3.0 * 4.0 ** rng.integers(0, raises + 1, at.sum())
    ratio_max = 3.0 * 4.0**raises
    keep, big = strong_edges_by_level(n, edges, wts, coef, 3.0, ratio_max, max_users)
    want_keep, want_big = _strong_edges_by_raising(n, edges, wts, coef, 3.0, ratio_max,
                                                   max_users)
    np.testing.assert_array_equal(keep, want_keep)
    np.testing.assert_array_equal(big, want_big)


def test_the_share_of_users_in_a_component_has_a_floor(monkeypatch):
    """However small ``SPARSIFIED_COMPONENT_SHARE`` makes the limit, components of up to
    ``SPARSIFIED_MIN_COMPONENT`` users stay whole."""
    import convexfl.solvers.ssnal as ssnal

    coef, edges, cap, wts, Q, sigma, blocks = _newton_system(sigma=10.0)
    largest = _largest_strong_component(coef, edges, wts, ssnal.STRONG_RATIO)
    monkeypatch.setattr(ssnal, "SPARSIFIED_COMPONENT_SHARE", 0.0)
    first = wts >= ssnal.STRONG_RATIO * np.minimum(coef[edges[:, 0]], coef[edges[:, 1]])
    for floor, cut in ((largest, False), (largest - 1, True)):
        monkeypatch.setattr(ssnal, "SPARSIFIED_MIN_COMPONENT", floor)
        pre = ssnal._Precond(coef, edges, coef.size, "sparsified")
        keep, big = pre.strong_edges(wts, blocks.shape[1])
        assert not big.any() and (keep.sum() < first.sum()) == cut


def test_the_mixed_matrix_is_within_a_factor_two_of_the_hessian(monkeypatch):
    """A component that stays too large (the ratio may not be raised here) gets the
    isotropic ``C + L_w`` on its users, the others the sparsified Hessian: still SPD with
    ``H ⪯ 2M`` (``B_e ⪯ w_e I``)."""
    import convexfl.solvers.ssnal as ssnal

    coef, edges, cap, wts, Q, sigma, blocks = _newton_system(sigma=10.0)
    largest = _largest_strong_component(coef, edges, wts, ssnal.STRONG_RATIO)
    assert 1 < largest < coef.size // 2
    monkeypatch.setattr(ssnal, "SPARSIFIED_MAX_COMPONENT", largest - 1)
    monkeypatch.setattr(ssnal, "STRONG_RATIO_MAX", ssnal.STRONG_RATIO)
    pre = ssnal._Precond(coef, edges, coef.size, "sparsified")
    pre.factor_sparsified(wts, Q, sigma)
    assert pre.n_sparsified == pre.n_mixed == 1
    _in_zero_two(_preconditioned_spectrum(pre, coef, edges, wts, Q))


def test_the_sparsified_solver_falls_back_when_the_strong_edges_join_many_users(monkeypatch):
    """Whole (limit 0), in part (a limit the ratio may not cut below) or not at all: the
    same certified solution as the isotropic LU's."""
    import convexfl.solvers.ssnal as ssnal

    rng = np.random.default_rng(3)
    A = np.r_[rng.standard_normal((150, 3)), rng.standard_normal((150, 3)) + 4.0]
    prob = cfl.SumOfNorms(cfl.losses.Quadratic(A), cfl.graphs.knn(A, 10), 0.5)
    own = cfl.solve(prob, method="ssnal", newton_solver="sparsified", tol=1e-8)
    with monkeypatch.context() as patch:
        patch.setattr(ssnal, "SPARSIFIED_MAX_COMPONENT", 40)
        patch.setattr(ssnal, "STRONG_RATIO_MAX", ssnal.STRONG_RATIO)
        mixed = cfl.solve(prob, method="ssnal", newton_solver="sparsified", tol=1e-8)
    monkeypatch.setattr(ssnal, "SPARSIFIED_MAX_COMPONENT", 0)
    fallback = cfl.solve(prob, method="ssnal", newton_solver="sparsified", tol=1e-8)
    lu = cfl.solve(prob, method="ssnal", newton_solver="lu", tol=1e-8)
    assert own.history["n_factor_sparsified"] == own.history["n_factor"] > 0
    assert own.history["n_factor_mixed"] == 0
    assert 0 < mixed.history["n_factor_mixed"] <= mixed.history["n_factor_sparsified"]
    assert fallback.history["n_factor_sparsified"] == 0
    for sol in (own, mixed, fallback):
        assert sol.converged and cfl.clusters.same_partition(sol.labels(), lu.labels())
        assert abs(sol.objective - lu.objective) <= 1e-8 * abs(lu.objective)


@pytest.mark.parametrize("n, m, d, kind", [(100, 300, 3, "dense"), (3000, 2_000_000, 3, "dense"),
                                           (3000, 30_000, 3, "sparsified"),
                                           (5000, 2_000_000, 5, "sparsified"),
                                           (20_000, 170_000, 2, "sparsified"),
                                           (10**5, 6 * 10**5, 3, "sparsified"),
                                           (1797, 12_335, 64, "lu"), (100, 300, 64, "dense"),
                                           (20_000, 170_000, 6, "amg")])
def test_auto_newton_solver_by_size_density_and_dimension(n, m, d, kind):
    from convexfl.solvers.ssnal import newton_solver_for
    assert newton_solver_for(n, m, d) == kind
    assert newton_solver_for(n, m, d, "lu") == "lu"


@pytest.mark.parametrize("value", ["cholmod", None, "AMG"])
def test_bad_newton_solver_raises_value_error(value):
    prob = cfl.SumOfNorms(clustered(), cfl.graphs.complete(18), 0.08)
    with pytest.raises(ValueError, match="newton_solver: expected one of"):
        cfl.solve(prob, method="ssnal", newton_solver=value)


def test_a_warm_start_with_flows_starts_at_a_tenth_of_the_cold_sigma():
    """``WARM_SIGMA_SCALE``: from a warm start with flows (auto's ADMM stage) σ₀ is a tenth
    of the cold one, and the answer is the same certified solution."""
    from convexfl.solvers.ssnal import WARM_SIGMA_SCALE

    rng = np.random.default_rng(3)
    A = np.r_[rng.standard_normal((150, 3)), rng.standard_normal((150, 3)) + 4.0]
    prob = cfl.SumOfNorms(cfl.losses.Quadratic(A), cfl.graphs.knn(A, 10), 0.5)
    cold = cfl.solve(prob, method="ssnal", tol=1e-8)
    rough = cfl.solve(prob, method="admm", max_iter=3, polish=False)
    warm = cfl.solve(prob, method="ssnal", tol=1e-8, warm_start=rough)
    assert not rough.converged and warm.n_iter > 0
    assert warm.history["sigma"][0] == pytest.approx(WARM_SIGMA_SCALE * cold.history["sigma"][0])
    assert cold.converged and warm.converged
    assert cfl.clusters.same_partition(warm.labels(), cold.labels())
    assert abs(warm.objective - cold.objective) <= 1e-8 * abs(cold.objective)


@pytest.mark.parametrize("large_from", [None, 0])
def test_the_cg_tolerance_is_capped_by_the_problems_size(monkeypatch, large_from):
    """Each Newton system's CG stops at ``min(η̄, max(g^τ, 1e-10))``, with η̄ = ``CG_CAP``
    below ``CG_CAP_LARGE_FROM`` users and ``CG_CAP_LARGE`` from there; the looser cap gives
    the same certified answer."""
    from convexfl.solvers import ssnal

    rng = np.random.default_rng(3)
    A = np.r_[rng.standard_normal((150, 3)), rng.standard_normal((150, 3)) + 4.0]
    prob = cfl.SumOfNorms(cfl.losses.Quadratic(A), cfl.graphs.knn(A, 10), 0.5)
    assert prob.n_users < ssnal.CG_CAP_LARGE_FROM  # small: the default cap is CG_CAP
    base = cfl.solve(prob, method="ssnal", tol=1e-8, newton_solver="sparsified")
    if large_from is not None:
        monkeypatch.setattr(ssnal, "CG_CAP_LARGE_FROM", large_from)
    rtols = []

    def spy(matvec, b, solve, rtol, max_iter):
        rtols.append(rtol)
        return pcg(matvec, b, solve, rtol, max_iter)

    pcg = ssnal.pcg
    monkeypatch.setattr(ssnal, "pcg", spy)
    res = cfl.solve(prob, method="ssnal", tol=1e-8, newton_solver="sparsified")
    cap = ssnal.CG_CAP if large_from is None else ssnal.CG_CAP_LARGE
    assert rtols and max(rtols) == cap and min(rtols) >= 1e-10
    assert res.converged and base.converged and res.kkt_residual <= 1e-8
    assert cfl.clusters.same_partition(res.labels(), base.labels())
    assert abs(res.objective - base.objective) <= 1e-8 * abs(base.objective)


def test_rounding_floor_needs_a_plateau_below_the_bound():
    from convexfl.solvers.ssnal import EPS, ROUND_FLOOR, _at_rounding_floor

    X = np.ones((4, 2))
    bound = ROUND_FLOOR * EPS * 1e7 * 1.0 * np.sqrt(100)
    below = 0.5 * bound
    assert _at_rounding_floor([below, below, below], 1e7, X, 100)
    assert not _at_rounding_floor([below, below], 1e7, X, 100)  # two steps at least
    assert not _at_rounding_floor([4 * below, below, below], 1e7, X, 100)  # still halving
    assert not _at_rounding_floor([4 * bound, 2 * bound, 2 * bound], 1e7, X, 100)  # above


def test_tight_solves_do_not_spin_newton_at_the_rounding_floor(monkeypatch):
    # make_moons n = 1200 at tol = 1e-9: once σ ≈ 4·10⁵, ‖∇ψ‖ cannot fall below rounding,
    # and such subproblems ran all their 50 Newton steps; the answer is the same either way.
    # The endgame's checks of every Newton step (_StepChecks) now certify this instance
    # before such subproblems; they are left out here so that the floor is reached
    from sklearn.datasets import make_moons

    import convexfl.solvers.ssnal as ssnal

    monkeypatch.setattr(ssnal._StepChecks, "check", lambda self, candidate, solved: False)
    A, _ = make_moons(n_samples=1200, noise=0.1, random_state=0)
    prob = cfl.SumOfNorms(cfl.losses.Quadratic(A), cfl.graphs.knn(A, 10, phi=2.0), 0.05)
    res = cfl.solve(prob, method="ssnal", tol=1e-9)
    assert res.converged and res.kkt_residual <= 1e-9
    assert max(res.history["newton"]) < 50
    monkeypatch.setattr(ssnal, "_at_rounding_floor", lambda *args: False)
    spun = cfl.solve(prob, method="ssnal", tol=1e-9)
    assert max(spun.history["newton"]) == 50  # the instance does reach the floor
    assert np.array_equal(spun.labels(), res.labels())
    assert abs(spun.objective - res.objective) <= 1e-12 * abs(res.objective)


@pytest.mark.parametrize("d", [1, 2, 3, 4])
def test_the_ssnal_kernels_are_their_formulas_in_every_dimension(d):
    """``psi_grad``, ``psi_value``, ``hess_vec`` and ``hess_blocks`` against the formulas of
    their module's docstring written with numpy, with edges inside and outside the ball:
    d = 2 and 3 run copies compiled with d a constant, the others the general kernel."""
    from convexfl.solvers._ssnal_kernels import (
        hess_blocks,
        hess_terms,
        hess_vec,
        psi_grad,
        psi_value,
    )

    rng = np.random.default_rng(d)
    n = 12
    graph = cfl.graphs.knn(rng.standard_normal((n, 2)), 4)
    edges, m = graph.edges, graph.n_edges
    coef = rng.uniform(0.5, 2.0, n)
    A, X = rng.standard_normal((n, d)), rng.standard_normal((n, d))
    Y, V = 0.3 * rng.standard_normal((m, d)), rng.standard_normal((n, d))
    sigma = 0.7
    T = Y + sigma * (X[edges[:, 0]] - X[edges[:, 1]])
    t = np.linalg.norm(T, axis=1)
    cap = np.median(t) * rng.uniform(0.7, 1.3, m)
    inside = t <= cap
    assert inside.any() and not inside.all()
    proj = T * np.minimum(1.0, cap / t)[:, None]
    moreau = np.where(inside, t**2 / (2 * sigma), (cap * t - cap**2 / 2) / sigma)
    value = 0.5 * np.sum(coef[:, None] * (X - A) ** 2) + moreau.sum() - np.sum(Y**2) / (2 * sigma)
    grad = coef[:, None] * (X - A)
    np.add.at(grad, edges[:, 0], proj)
    np.add.at(grad, edges[:, 1], -proj)
    G, P, tnorm = np.empty((n, d)), np.empty((m, d)), np.empty(m)
    assert psi_grad(A, coef, edges, cap, X, Y, sigma, G, P, tnorm) == pytest.approx(value,
                                                                                  rel=1e-12)
    assert psi_value(A, coef, edges, cap, X, Y, sigma) == pytest.approx(value, rel=1e-12)
    np.testing.assert_allclose(G, grad, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(P, proj, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(tnorm, t, rtol=1e-14)
    hat = T / t[:, None]
    dv = V[edges[:, 0]] - V[edges[:, 1]]
    jdv = np.where(inside[:, None], dv, (cap / t)[:, None]
                   * (dv - np.sum(hat * dv, axis=1)[:, None] * hat))
    want = coef[:, None] * V
    np.add.at(want, edges[:, 0], sigma * jdv)
    np.add.at(want, edges[:, 1], -sigma * jdv)
    wts, Q, out, blocks = np.empty(m), np.empty((m, d)), np.empty((n, d)), np.empty((m, d, d))
    hess_terms(edges, cap, P, tnorm, sigma, wts, Q)
    np.testing.assert_allclose(wts, np.where(inside, sigma, sigma * cap / t), rtol=1e-14)
    hess_vec(coef, edges, wts, Q, V, out)
    np.testing.assert_allclose(out, want, rtol=1e-12, atol=1e-12)
    hess_blocks(wts, Q, blocks)
    np.testing.assert_allclose(np.einsum("eab,eb->ea", blocks, dv), sigma * jdv, rtol=1e-12,
                               atol=1e-12)


def test_sigma_is_lowered_when_newton_runs_out():
    """An outer iteration whose Newton steps ran out (``max_newton``) before its
    subproblem's tolerance divides σ by ``sigma_factor`` instead of raising it; one that
    reached its tolerance never lowers σ. Either way the answer is certified: with one
    Newton step per subproblem only because the subproblems' tolerance then falls to
    ``INNER_SHARE_RAN_OUT`` (at ``INNER_SHARE`` = 2 throughout it stalls at KKT 5·10⁻²)."""
    rng = np.random.default_rng(8)
    A = np.r_[rng.standard_normal((60, 2)), rng.standard_normal((60, 2)) + 3.0]
    prob = cfl.SumOfNorms(cfl.losses.Quadratic(A), cfl.graphs.knn(A, 6), 0.2)
    for max_newton in (1, 50):
        sol = cfl.solve(prob, method="ssnal", max_newton=max_newton, sigma=50.0, tol=1e-8)
        assert sol.converged
        h = sol.history
        steps, sigma = np.array(h["newton"]), np.array(h["sigma"])
        lowered = sigma[1:] < sigma[:-1]
        ran_out = steps[:-1] >= max_newton
        assert not np.any(lowered & ~ran_out)
        assert np.any(lowered) == (max_newton == 1)


def _mixture_1000(lam):
    rng = np.random.default_rng(0)
    centres = rng.standard_normal((5, 3)) * 2.0
    A = centres[rng.integers(0, 5, 1000)] + 0.7 * rng.standard_normal((1000, 3))
    return cfl.SumOfNorms(cfl.losses.Quadratic(A), cfl.graphs.knn(A, 10), lam)


def test_a_failed_check_below_tol_raises_sigma_tenfold_and_checks_every_newton_step(
        monkeypatch):
    """A candidate that fails its certificate while SSNAL's residuals are below ``tol``
    starts the endgame: σ is raised by ``FAIL_RAISE`` (not ``sigma_factor``), the next
    subproblem restarts from that candidate, and from then on the candidate of every Newton
    step is checked (``_StepChecks``). A subproblem whose checks reach a plateau stops
    there and σ is raised tenfold again, from its candidate. The kNN10 mixture N = 1000 at
    λ = 0.4 fails such a check at its 16th outer iteration, stops two subproblems at a
    plateau and certifies at the first Newton step of the third."""
    from convexfl.solvers import ssnal
    from convexfl.solvers.ssnal import FAIL_RAISE

    restarts, original = [], ssnal._clustered

    def clustered(X, n, edges, fused):
        out = original(X, n, edges, fused)
        restarts.append(len(np.unique(out, axis=0)))  # its clusters
        return out

    monkeypatch.setattr(ssnal, "_clustered", clustered)
    prob = _mixture_1000(0.4)
    tol = 1e-6
    sol = cfl.solve(prob, method="ssnal", tol=tol)
    h = sol.history
    row = {it: k for k, it in enumerate(h["iter"])}
    checks, kkts = h["certify_at"], h["certified_kkt"]
    failed = [t for k, t in enumerate(checks)
              if kkts[k] > tol and max(h["eta_p"][row[t]], h["eta_d"][row[t]]) <= tol]
    assert sol.converged and sol.kkt_residual <= tol and failed
    first = failed[0]
    endgame = [t for t in h["iter"] if t > first]
    assert h["newton"][row[first]] < 50 and endgame
    assert h["sigma"][row[first + 1]] == pytest.approx(FAIL_RAISE * h["sigma"][row[first]])
    for t in endgame:  # one check per Newton step, the outer iteration's own included
        assert checks.count(t) == h["newton"][row[t]]
    assert len(h["plateau_at"]) >= 2 and endgame[-1] not in h["plateau_at"]
    for t in h["plateau_at"]:
        assert h["sigma"][row[t + 1]] == pytest.approx(FAIL_RAISE * h["sigma"][row[t]])
    assert len(restarts) == 1 + len(h["plateau_at"]) and min(restarts) < prob.n_users

    # without the plateaus the same subproblems run on to their tolerance
    monkeypatch.setattr(ssnal, "STEP_SOLVED", 0.0)
    on = cfl.solve(prob, method="ssnal", tol=tol)
    assert on.converged and not on.history["plateau_at"]
    assert sum(on.history["newton"]) > sum(h["newton"])
    assert np.array_equal(on.labels(), sol.labels())

def test_the_renumbering_is_a_relabelling_of_users_and_edges():
    """``_Numbering``: the users in reverse Cuthill–McKee order and the edges sorted by their
    new ends; each edge keeps its ends (renamed) and orientation, and ``candidate`` maps
    everything back."""
    from convexfl.solvers.ssnal import _Numbering

    rng = np.random.default_rng(5)
    A = rng.standard_normal((300, 3))
    graph = cfl.graphs.knn(A, 6)
    edges = graph.edges
    order = _Numbering(graph, True)
    assert sorted(order.users) == list(range(300)) and sorted(order.order) == list(
        range(len(edges)))
    assert order.edges.dtype == edges.dtype  # the kernels' compiled signature
    assert not np.array_equal(order.users, np.arange(300))  # a renumbering indeed
    new_A = order.users_in(A)
    assert np.array_equal(new_A[order.edges], A[edges][order.order])
    ends = np.sort(order.edges, axis=1)
    assert np.all(np.diff(ends[:, 0]) >= 0)
    Y = rng.standard_normal((len(edges), 3))
    fused = rng.random(len(edges)) < 0.5
    back = order.candidate(order.edges_in(fused), new_A, order.edges_in(Y))
    assert all(np.array_equal(x, y) for x, y in zip(back, (fused, A, Y), strict=True))
    plain = _Numbering(graph, False)
    assert plain.edges is edges and plain.candidate(fused, A, Y)[1] is A


@pytest.mark.parametrize("warm", [False, True])
def test_renumbered_iterations_give_the_same_certified_solution(monkeypatch, warm):
    """From ``RENUMBER_MIN`` users the iterations run in the renumbered order: the same
    certified solution, cold and from a warm start with flows (given and returned in the
    problem's numbering; a mix-up would fail the certificate). The warm runs skip the
    polish, which would certify the warm partition before any iteration."""
    import convexfl.solvers.ssnal as ssnal

    rng = np.random.default_rng(4)
    A = np.r_[rng.standard_normal((200, 3)), rng.standard_normal((200, 3)) + 3.0]
    prob = cfl.SumOfNorms(cfl.losses.Quadratic(A), cfl.graphs.knn(A, 8), 0.4)
    start = cfl.solve(prob, method="admm", max_iter=5, polish=False) if warm else None
    opts = dict(tol=1e-8, warm_start=start, polish=not warm)
    plain = cfl.solve(prob, method="ssnal", **opts)
    monkeypatch.setattr(ssnal, "RENUMBER_MIN", 1)
    renumbered = cfl.solve(prob, method="ssnal", **opts)
    assert plain.converged and renumbered.converged and renumbered.kkt_residual <= 1e-8
    assert renumbered.n_iter > 0 and 1 < renumbered.n_clusters < 400
    assert cfl.clusters.same_partition(renumbered.labels(), plain.labels())
    assert np.abs(renumbered.X - plain.X).max() <= 1e-6
    assert abs(renumbered.objective - plain.objective) <= 1e-8 * abs(plain.objective)
    # the same iterations, whose candidates' flows reach the certificates in the right order
    # (a mix-up leaves the candidates right but their certified residuals far apart)
    kkt = [np.asarray(sol.history["certified_kkt"]) for sol in (plain, renumbered)]
    k = min(map(len, kkt))
    assert k >= 2 and np.allclose(kkt[0][:k], kkt[1][:k], rtol=1e-2)
    cap = prob.lam * prob.graph.weights
    assert np.all(np.linalg.norm(renumbered.flows, axis=1) <= cap * (1 + 1e-12))
