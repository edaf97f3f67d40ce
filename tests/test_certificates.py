import numpy as np
import pytest
from helpers import LOSS_NAMES, make_loss, reference
from hypothesis import given, settings
from hypothesis import strategies as st

import convexfl as cfl
from convexfl import certificates
from convexfl.certificates import kkt_residual


@pytest.mark.parametrize("name", LOSS_NAMES)
@pytest.mark.parametrize("lam", [0.05, 0.4, 3.0])
def test_residual_vanishes_at_solutions_and_not_at_perturbed_points(name, lam):
    loss = make_loss(name, n_users=6, seed=21)
    prob = cfl.SumOfNorms(loss, cfl.graphs.complete(6), lam)
    res = reference(prob, tol=1e-9)
    cert = kkt_residual(prob, res.X)  # standalone: no solver flows
    assert cert.kkt_residual < 1e-8 and cert.exact
    assert cert.kkt_abs_lower <= cert.kkt_abs + 1e-15
    bumped = res.X + 1e-3 * np.random.default_rng(0).standard_normal(res.X.shape)
    worse = kkt_residual(prob, bumped)
    assert worse.kkt_residual > 1e-5
    assert worse.kkt_abs_lower <= worse.kkt_abs * (1 + 1e-12)
    assert worse.objective >= res.objective - 1e-12


@pytest.mark.parametrize("name", LOSS_NAMES)
def test_certificate_flows_attain_the_upper_bound_within_capacity(name):
    loss = make_loss(name, n_users=7, seed=5)
    g = cfl.graphs.from_edges([(0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (5, 6), (6, 0),
                               (0, 3)], n_nodes=7)
    prob = cfl.SumOfNorms(loss, g, 0.3)
    res = cfl.solve(prob, method="admm", tol=1e-8)
    for X in (res.X, res.X + 1e-4):  # a solution, and a shifted (non-optimal) point
        cert = kkt_residual(prob, X, fuse_tol=res.fuse_tol)
        R = loss.grad(X)
        np.add.at(R, g.edges[:, 0], cert.flows)
        np.subtract.at(R, g.edges[:, 1], cert.flows)
        assert np.linalg.norm(R) == pytest.approx(cert.kkt_abs, rel=1e-9, abs=1e-13)
        norms = np.linalg.norm(cert.flows, axis=1)
        assert np.all(norms <= prob.lam * g.weights * (1 + 1e-12))


def test_perturbing_inside_a_cluster_is_detected():
    A, _truth = cfl.datasets.planted_points(2, 4, 2, separation=20.0, random_state=3)
    prob = cfl.SumOfNorms(cfl.losses.Quadratic(A), cfl.graphs.complete(8), 2.0)
    res = reference(prob)
    X = res.X.copy()
    X[0] += 1e-3  # breaks a fusion: the pair is no longer "fused" at fuse_tol 1e-6
    assert kkt_residual(prob, X, fuse_tol=1e-6).kkt_residual > 1e-4


def test_theorem1_flow_certifies_a_complete_cluster_in_closed_form():
    """At consensus on a complete uniform graph with λ ≥ max‖g_i − g_j‖/N, the potential
    flow u_ij = (g_j − g_i)/N is feasible: the certificate is exact without iterations."""
    A = np.random.default_rng(0).standard_normal((7, 3))
    loss = cfl.losses.Quadratic(A)
    y = A.mean(axis=0)
    g = y - A
    lam = max(np.linalg.norm(g[i] - g[j]) for i in range(7) for j in range(7)) / 7
    cert = kkt_residual(cfl.SumOfNorms(loss, cfl.graphs.complete(7), lam), np.tile(y, (7, 1)))
    assert cert.flow_iterations == 0 and cert.exact and cert.kkt_residual < 1e-14


@given(seed=st.integers(0, 10_000), lam=st.floats(0.01, 5.0))
def test_bounds_bracket_and_flows_hint_does_not_change_the_verdict(seed, lam):
    loss = make_loss("logistic", n_users=5, seed=seed)
    prob = cfl.SumOfNorms(loss, cfl.graphs.complete(5), lam)
    res = reference(prob)
    plain = kkt_residual(prob, res.X, fuse_tol=res.fuse_tol)
    hinted = kkt_residual(prob, res.X, fuse_tol=res.fuse_tol, flows=res.flows)
    for c in (plain, hinted):
        assert c.kkt_abs_lower <= c.kkt_abs * (1 + 1e-12) + 1e-15
    assert abs(plain.kkt_residual - hinted.kkt_residual) <= 1e-3 * max(
        plain.kkt_residual, hinted.kkt_residual) + 1e-12


def test_squared_penalty_and_reduced_certificates():
    loss = make_loss("least_squares", n_users=4, seed=4)
    g = cfl.graphs.complete(4)
    sp = cfl.SquaredPenalty(loss, g, 0.2)
    res = reference(sp, tol=1e-10)
    assert kkt_residual(sp, res.X).kkt_residual < 1e-8
    assert kkt_residual(sp, res.X + 0.01).kkt_residual > 1e-4
    red = cfl.Reduced(loss, g, [0, 0, 1, 1], lam=0.1)
    rres = reference(red, tol=1e-9)
    assert kkt_residual(red, rres.X).kkt_residual < 1e-8


def test_certificate_argument_errors():
    prob = cfl.SumOfNorms(make_loss("quadratic"), cfl.graphs.complete(4), 1.0)
    X = np.zeros((4, 3))
    with pytest.raises(ValueError, match="X: expected shape"):
        kkt_residual(prob, np.zeros((3, 3)))
    bad = X.copy()
    bad[0, 0] = np.nan
    with pytest.raises(ValueError, match="X: contains 1 NaN"):
        kkt_residual(prob, bad)
    with pytest.raises(ValueError, match="fuse_tol: must be >= 0"):
        kkt_residual(prob, X, fuse_tol=-1.0)
    with pytest.raises(ValueError, match="flows: expected shape"):
        kkt_residual(prob, X, flows=np.zeros((2, 3)))
    with pytest.raises(ValueError, match="flows: expected shape"):
        kkt_residual(prob, X, flows=np.zeros((2, 6, 2)))
    with pytest.raises(TypeError, match="prob: expected SumOfNorms"):
        kkt_residual("nope", X)


@pytest.mark.parametrize("block_min", [200, 3])
def test_potential_flow_moves_every_excess_to_its_component_mean(block_min, monkeypatch):
    """The certificate's starting flow, on a fused subgraph mixing a uniform clique (closed
    form, no factorisation), a clique with unequal weights and a path (sparse LU: one for
    both, or one each as blocks when components that small get their own) and a lone user:
    the residual is each component's mean, and the flow is the potential flow
    ``u_e = c_e(φ_i − φ_j)`` with ``L_c φ = −(R − R̄)`` (dense pseudo-inverse here)."""
    from convexfl._flow_kernels import flow_residual
    from convexfl.certificates import _potential_solver

    monkeypatch.setattr(certificates, "BLOCK_MIN", block_min)
    certificates.clear_cache()

    rng = np.random.default_rng(0)
    clique = [(i, j) for i in range(5) for j in range(i + 1, 5)]
    uneven = [(5, 6), (5, 7), (6, 7)]
    path = [(8, 9), (9, 10)]
    edges = np.array(clique + uneven + path, dtype=np.int64)
    w = np.r_[np.full(len(clique), 2.0), [1.0, 2.0, 3.0], [0.5, 4.0]]
    n, lam = 12, 0.7
    R = rng.standard_normal((n, 3))
    flow, means = _potential_solver(n, edges, w, lam)
    u = flow(R)
    comps = [range(5), range(5, 8), range(8, 11), [11]]
    left = flow_residual(R, edges, u)
    for c in comps:
        c = list(c)
        mean = np.tile(R[c].mean(axis=0), (len(c), 1))
        np.testing.assert_allclose(left[c], mean, atol=1e-12)
        np.testing.assert_allclose(means(R)[c], mean, atol=1e-12)
    L = np.zeros((n, n))
    for (i, j), c_e in zip(edges, lam * w, strict=True):
        L[[i, j], [i, j]] += c_e
        L[i, j] -= c_e
        L[j, i] -= c_e
    excess = R.copy()
    for c in comps:
        excess[list(c)] -= R[list(c)].mean(axis=0)
    phi = -np.linalg.pinv(L) @ excess
    expected = (lam * w)[:, None] * (phi[edges[:, 0]] - phi[edges[:, 1]])
    np.testing.assert_allclose(u, expected, atol=1e-12)
    blocks = certificates._potential_factor(n, edges, w)[5]
    assert len(blocks) == (2 if block_min == 3 else 0)


def test_a_component_keeps_its_factor_when_another_changes(monkeypatch):
    """Along a path a merge elsewhere leaves a cluster's LU as it was: the fused subgraph
    changes (a new entry), its unchanged component's block is the cached one."""
    monkeypatch.setattr(certificates, "BLOCK_MIN", 3)
    certificates.clear_cache()
    path = [(0, 1), (1, 2), (2, 3)]
    before = np.array(path + [(4, 5), (5, 6)], dtype=np.int64)
    after = np.array(path + [(4, 5), (5, 6), (6, 7)], dtype=np.int64)  # user 7 joins
    w1, w2 = np.linspace(1.0, 2.0, 5), np.r_[np.linspace(1.0, 2.0, 5), 3.0]
    (nodes, first), other = certificates._potential_factor(8, before, w1)[5]
    (nodes2, again), changed = certificates._potential_factor(8, after, w2)[5]
    np.testing.assert_array_equal(nodes, nodes2)
    assert again is first and changed[1] is not other[1]


def _anisotropic_hessian(edges, n, d, scales, rng):
    """``I + Σ_e s_e (I − t̂_e t̂_eᵀ) ⊗ (e_i − e_j)(e_i − e_j)ᵀ`` with random unit ``t̂_e``: the
    pattern and kind of a reduced Hessian (Newton polish, SSNAL's ``"hessian"`` systems)."""
    T = rng.standard_normal((len(edges), d))
    T /= np.linalg.norm(T, axis=1, keepdims=True)
    blocks = scales[:, None, None] * (np.eye(d) - T[:, :, None] * T[:, None, :])
    H = np.eye(n * d)
    for (i, j), block in zip(edges, blocks, strict=True):
        for p, q, sign in ((i, i, 1), (j, j, 1), (i, j, -1), (j, i, -1)):
            H[p * d:(p + 1) * d, q * d:(q + 1) * d] += sign * block
    return H


def test_factor_spd_does_not_pivot_on_ill_conditioned_reduced_hessians():
    """A reduced Hessian whose edge blocks span ten decades (clusters about to meet) has
    the factor's fill of the same pattern with unit blocks (the diagonal pivots of a
    positive definite matrix are kept; SuperLU's default threshold pivoting gives 55 443
    non-zeros here against 29 988), and its solves stay accurate."""
    import scipy.sparse as sp

    from convexfl.certificates import factor_spd

    rng = np.random.default_rng(0)
    n, d = 150, 3
    edges = cfl.graphs.knn(rng.standard_normal((n, d)), 6).edges
    ill = _anisotropic_hessian(edges, n, d, 10.0 ** rng.uniform(-2, 8, len(edges)), rng)
    unit = _anisotropic_hessian(edges, n, d, np.ones(len(edges)), rng)
    lu, lu_unit = factor_spd(sp.csc_matrix(ill)), factor_spd(sp.csc_matrix(unit))
    assert np.array_equal(lu.perm_r, lu.perm_c)
    assert lu.L.nnz + lu.U.nnz == lu_unit.L.nnz + lu_unit.U.nnz
    b = rng.standard_normal(n * d)
    x = lu.solve(b)
    np.testing.assert_allclose(x, np.linalg.solve(ill, b), rtol=1e-6,
                               atol=1e-9 * np.abs(x).max())


@settings(max_examples=25, deadline=None)
@given(st.integers(20, 120), st.integers(1, 3), st.floats(-2.0, 8.0), st.integers(0, 2**32 - 1))
def test_repeated_solves_are_the_lu_solves(n, d, decades, seed):
    """A factor that solves many times (SSNAL's preconditioners): the first solve is
    SuperLU's, the later ones the ``L D Lᵀ`` of its factor; every one solves the system to
    rounding, on reduced-Hessian-like matrices whose edge blocks span up to ten decades
    (the two solves agree to their forward error, ``κ ε``: hypothesis found entries
    1.7e-10 apart, relative to the largest, at κ = 2.2e8, both backward errors 1e-17)."""
    import scipy.sparse as sp

    from convexfl.certificates import factor_spd, repeated_solves

    rng = np.random.default_rng(seed)
    edges = cfl.graphs.knn(rng.standard_normal((n, 3)), 5, warn_disconnected=False).edges
    H = _anisotropic_hessian(edges, n, d, 10.0 ** rng.uniform(-2, decades, len(edges)), rng)
    lu = factor_spd(sp.csc_matrix(H))
    solve = repeated_solves(lu)
    kappa = np.linalg.cond(H)
    for _ in range(3):
        b = rng.standard_normal(n * d)
        x = solve(b)
        assert np.abs(x - lu.solve(b)).max() <= 1e-14 * kappa * np.abs(x).max()
        assert np.linalg.norm(H @ x - b) <= 1e-9 * np.linalg.norm(H) * np.linalg.norm(x)


@settings(max_examples=25, deadline=None)
@given(st.integers(20, 150), st.sampled_from([1, 3, 7, 8, 9, 64]), st.floats(-2.0, 8.0),
       st.integers(0, 2**32 - 1))
def test_repeated_solves_of_blocks_are_the_lu_solves(n, m, decades, seed):
    """Blocks of right-hand sides (the isotropic ``C + L_w`` of all coordinates at once):
    below ``ROWS_SOLVE_MIN`` columns SuperLU's solve, from there the row-major ``L D Lᵀ``;
    either solves the system to rounding, with weights over up to ten decades."""
    import scipy.sparse as sp

    from convexfl.certificates import factor_spd, repeated_solves
    from convexfl.solvers._common import isotropic_matrix

    rng = np.random.default_rng(seed)
    edges = cfl.graphs.knn(rng.standard_normal((n, 3)), 5, warn_disconnected=False).edges
    w = 10.0 ** rng.uniform(-2, decades, len(edges))
    M = isotropic_matrix(rng.uniform(0.5, 2.0, n), edges, w, n)
    lu = factor_spd(sp.csc_matrix(M))
    solve = repeated_solves(lu)
    kappa = np.linalg.cond(M.toarray())
    for _ in range(2):
        B = rng.standard_normal((n, m))
        X = solve(B)
        assert X.shape == (n, m)
        assert np.abs(X - lu.solve(B)).max() <= 1e-14 * kappa * np.abs(X).max()
        assert np.linalg.norm(M @ X - B) <= 1e-9 * sp.linalg.norm(M) * np.linalg.norm(X)


@settings(max_examples=25, deadline=None)
@given(st.integers(20, 120), st.integers(1, 3), st.floats(-2.0, 8.0), st.integers(0, 2**32 - 1))
def test_pattern_ldl_solves_and_reanalyses_only_new_patterns(n, d, decades, seed):
    """``PatternLDL`` (SSNAL's sparsified Hessians, given by their upper triangles) solves
    each matrix to rounding, with edge blocks over up to ten decades; a matrix with the last
    one's pattern is only refactorised (its values changed, its ordering kept), and one with
    another pattern is analysed anew."""
    import scipy.sparse as sp

    from convexfl.certificates import PatternLDL

    rng = np.random.default_rng(seed)
    edges = cfl.graphs.knn(rng.standard_normal((n, 3)), 5, warn_disconnected=False).edges
    fewer = edges[rng.random(len(edges)) < 0.5]
    ldl = PatternLDL()
    for k, (es, analysed) in enumerate([(edges, 1), (edges, 1), (fewer, 2), (fewer, 2)]):
        scales = 10.0 ** rng.uniform(-2, decades, len(es))
        H = _anisotropic_hessian(es, n, d, scales, rng)
        lap = np.zeros((n, n))  # an isotropic part too, so that no edge block is zero (d = 1)
        np.add.at(lap, (es[:, 0], es[:, 1]), -0.1 * scales)
        lap += lap.T
        lap[np.diag_indices(n)] = -lap.sum(axis=1)
        H += np.kron(lap, np.eye(d))
        solve = ldl.factor(sp.triu(sp.csc_matrix(H), format="csc"))
        assert ldl.n_analysed == analysed, k
        b = rng.standard_normal(n * d)
        x = solve(b)
        assert np.linalg.norm(H @ x - b) <= 1e-9 * np.linalg.norm(H) * np.linalg.norm(x)


def test_pattern_ldl_reads_the_upper_triangle_only():
    """The control of the test above: the lower triangle is not read (a matrix whose lower
    triangle is garbage solves as its symmetric upper part), so a full matrix given by
    mistake would not be caught by the solves alone, and callers pass ``triu``."""
    import scipy.sparse as sp

    from convexfl.certificates import PatternLDL

    S = np.array([[4.0, 1.0, 0.0], [1.0, 3.0, 2.0], [0.0, 2.0, 5.0]])
    garbage = np.triu(S) + np.tril(np.full((3, 3), 7.0), -1)
    b = np.array([1.0, 2.0, 3.0])
    x = PatternLDL().factor(sp.triu(sp.csc_matrix(garbage), format="csc"))(b)
    np.testing.assert_allclose(S @ x, b, atol=1e-12)
    assert not np.allclose(garbage @ x, b, atol=1e-3)


def test_blocks_are_solved_by_ldl_from_rows_solve_min_columns():
    """The control of the test above: on a non-symmetric matrix factored without pivoting
    (``U ≠ D Lᵀ``) a block of ``ROWS_SOLVE_MIN`` columns, solved by ``L D Lᵀ``, is wrong,
    while one column fewer (SuperLU's solve) is right: the block path is taken, and only
    from that width."""
    import scipy.sparse as sp

    from convexfl.certificates import ROWS_SOLVE_MIN, factor_spd, repeated_solves

    A = sp.csc_matrix(np.array([[4.0, 1.0, 0.0], [0.0, 3.0, 2.0], [1.0, 0.0, 5.0]]))
    solve = repeated_solves(factor_spd(A))
    B = np.arange(1.0, 1.0 + 3 * ROWS_SOLVE_MIN).reshape(3, ROWS_SOLVE_MIN)
    np.testing.assert_allclose(A @ solve(B[:, :-1]), B[:, :-1], atol=1e-12)
    assert not np.allclose(A @ solve(B), B, atol=1e-3)


def test_repeated_solves_need_a_symmetric_factor():
    """The control of the test above: without pivoting but on a non-symmetric matrix
    (``U ≠ D Lᵀ``) the second solve, which reads ``L`` and ``D`` only, is wrong while the
    first (SuperLU's) is right: the comparison with SuperLU can fail, and the ``L D Lᵀ``
    solve is for the symmetric factors of ``factor_spd`` only."""
    import scipy.sparse as sp

    from convexfl.certificates import factor_spd, repeated_solves

    A = sp.csc_matrix(np.array([[4.0, 1.0, 0.0], [0.0, 3.0, 2.0], [1.0, 0.0, 5.0]]))
    lu = factor_spd(A)
    assert np.array_equal(lu.perm_r, lu.perm_c)
    solve = repeated_solves(lu)
    b = np.array([1.0, 2.0, 3.0])
    np.testing.assert_allclose(A @ solve(b), b, atol=1e-12)
    assert not np.allclose(A @ solve(b), b, atol=1e-3)


def test_repeated_solves_keep_superlus_solve_after_pivoting():
    """A factor whose rows were pivoted (``perm_r ≠ perm_c``: not a factor of
    ``factor_spd``) is not taken for ``L D Lᵀ``: its solves stay SuperLU's."""
    import scipy.sparse as sp
    from scipy.sparse.linalg import splu

    from convexfl.certificates import repeated_solves

    A = sp.csc_matrix(np.array([[1e-8, 1.0, 0.0], [1.0, 1.0, 2.0], [0.0, 3.0, 1.0]]))
    lu = splu(A, permc_spec="NATURAL")
    assert not np.array_equal(lu.perm_r, lu.perm_c)
    solve = repeated_solves(lu)
    b = np.array([1.0, 2.0, 3.0])
    for _ in range(2):
        np.testing.assert_allclose(A @ solve(b), b, atol=1e-12)


def test_pattern_lu_sums_repeated_entries_and_keeps_the_first_ordering():
    """Matrices given as COO triplets with repeated entries (a reduced Hessian's diagonal
    blocks summed over edges): the first factorisation orders, the later ones reuse that
    ordering, and every solve is the dense one of its own values."""
    from convexfl.certificates import PatternLU

    rng = np.random.default_rng(1)
    n, d = 40, 2
    edges = cfl.graphs.knn(rng.standard_normal((n, 2)), 5).edges
    a, b = np.divmod(np.arange(d * d), d)
    i, j = edges.T
    rows = np.concatenate([np.arange(n)[:, None] * d + a, i[:, None] * d + a,
                           j[:, None] * d + a, i[:, None] * d + a, j[:, None] * d + a],
                          axis=None)
    cols = np.concatenate([np.arange(n)[:, None] * d + b, i[:, None] * d + b,
                           j[:, None] * d + b, j[:, None] * d + b, i[:, None] * d + b],
                          axis=None)
    system = PatternLU(n * d, rows, cols)
    for scale in (1.0, 1e-3, 1e4):
        blocks = _anisotropic_blocks(len(edges), d, scale * 10.0 ** rng.uniform(-2, 2, len(edges)),
                                     rng)
        v = blocks.reshape(len(edges), -1)
        values = np.concatenate([np.full((n, d * d), 0.0) + np.eye(d).ravel(), v, v, -v, -v],
                                axis=None)
        dense = np.zeros((n * d, n * d))
        np.add.at(dense, (rows, cols), values)
        rhs = rng.standard_normal(n * d)
        x = system.factor(values)(rhs)
        np.testing.assert_allclose(dense @ x, rhs, atol=1e-9 * np.abs(rhs).max())
        assert system.ldl.n_analysed == 1


def _anisotropic_blocks(m, d, scales, rng):
    """``m`` positive semidefinite ``d × d`` blocks ``s (I − t̂t̂ᵀ)`` with random ``t``."""
    t = rng.standard_normal((m, d))
    t /= np.linalg.norm(t, axis=1, keepdims=True)
    return scales[:, None, None] * (np.eye(d)[None] - t[:, :, None] * t[:, None, :])


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 40), st.integers(0, 120), st.integers(0, 2**32 - 1))
def test_masked_components_are_scipys_connected_components(n, m, seed):
    """The union–find of certificates and certifiers labels components exactly as scipy's
    connected_components does (numbered by smallest node)."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import connected_components

    from convexfl._flow_kernels import masked_components

    rng = np.random.default_rng(seed)
    edges = rng.integers(0, n, (m, 2))
    edges = np.ascontiguousarray(edges[edges[:, 0] != edges[:, 1]], dtype=np.int64)
    mask = rng.random(len(edges)) < 0.5
    labels, k = masked_components(n, edges.reshape(-1, 2), mask)
    e = edges.reshape(-1, 2)[mask]
    adj = sp.coo_matrix((np.ones(len(e)), (e[:, 0], e[:, 1])), shape=(n, n))
    k_ref, ref = connected_components(adj, directed=False)
    assert k == k_ref
    np.testing.assert_array_equal(labels, ref)


def _random_flow_problem(seed, n, lam, density, d, g_range):
    """``(rng, edges, w, cap, G)``: a random graph on ``n`` nodes (each pair an edge with
    probability ``density``), weights in [0.5, 2], ``c = λw`` and ``G`` (n, d) at a random
    scale in ``g_range``."""
    rng = np.random.default_rng(seed)
    edges = np.array([(i, j) for i in range(n) for j in range(i + 1, n)
                      if rng.random() < density], dtype=np.int64).reshape(-1, 2)
    w = rng.uniform(0.5, 2.0, len(edges))
    G = rng.standard_normal((n, d)) * rng.uniform(*g_range)
    return rng, edges, w, lam * w, G


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 12), st.floats(0.01, 3.0), st.integers(0, 2**32 - 1))
def test_one_pass_bounds_never_exceed_the_least_residual(n, lam, seed):
    """The node bound ``Σ_i max(0, ‖G_i‖ − Σ_{e∋i} c_e)²`` and the scaled dual
    ``max_t g(t z)`` of any ``z`` are lower bounds on ``min_u ‖G + Bᵀu‖²`` over feasible
    flows: neither exceeds the certified upper bound found by the flow search (run to
    agreement, no target); the scaled dual is at least ``g(z)``; without edges the node
    bound is ‖G‖² itself."""
    from convexfl._flow_kernels import flow_dual, node_gaps_sq
    from convexfl.certificates import _min_residual

    rng, edges, w, cap, G = _random_flow_problem(seed, n, lam, 0.6, 3, (0.1, 10.0))
    upper, lower, _, _ = _min_residual(G, edges, w, lam, None, 1e-9, 20000)
    node = node_gaps_sq(G, edges, cap)
    z = rng.standard_normal((n, 3))
    dual = flow_dual(z, G, edges, cap)
    g_z = np.sum(z * G) - 0.5 * np.sum(z * z) - cap @ np.linalg.norm(z[edges[:, 0]]
                                                                     - z[edges[:, 1]], axis=1)
    assert dual >= g_z - 1e-12 * (1 + abs(g_z))
    for bound_sq in (node, 2 * dual):
        assert np.sqrt(bound_sq) <= upper * (1 + 1e-9) + 1e-12
    if len(edges) == 0:
        assert np.sqrt(node) == pytest.approx(np.linalg.norm(G))


@settings(max_examples=40, deadline=None)
@given(st.integers(3, 14), st.floats(0.01, 1.0), st.integers(0, 2**32 - 1))
def test_split_dual_is_a_lower_bound_and_tight_at_the_least_residual(n, lam, seed):
    """``split_dual`` (the dual at the residual averaged over the unsaturated components) is
    a lower bound on ``½ min ‖G + Bᵀu‖²`` for any flow, feasible or not, and at the flows
    of a search run to agreement it meets the minimum: there the residual is constant
    across every unsaturated edge. (The bound at the residual's own ray, ``flow_dual``,
    need not be: on the make_moons repair it stayed 0 for 1000 iterations.)"""
    from convexfl._flow_kernels import flow_residual, split_dual
    from convexfl.certificates import _min_residual

    rng, edges, w, cap, G = _random_flow_problem(seed, n, lam, 0.5, 2, (1.0, 10.0))
    upper, _, _, u = _min_residual(G, edges, w, lam, None, 1e-10, 50000)
    any_u = rng.standard_normal((len(edges), 2))
    assert split_dual(any_u, flow_residual(G, edges, any_u), G, edges, cap) <= \
        0.5 * upper ** 2 * (1 + 1e-9) + 1e-12
    # moved off the optimum inside the unsaturated edges' slack: within each of their
    # components the residual changes by a divergence that sums to zero, so z̄ is unchanged
    slack = cap - np.linalg.norm(u, axis=1)
    free = slack > 1e-3 * cap
    moved = u.copy()
    moved[free] += 0.5 * slack[free, None] * rng.uniform(-0.7, 0.7, (int(free.sum()), 2))
    for flows in (u, moved):
        tight = split_dual(flows, flow_residual(G, edges, flows), G, edges, cap)
        assert np.sqrt(2 * tight) <= upper * (1 + 1e-9) + 1e-12
        assert np.sqrt(2 * tight) >= upper * (1 - 1e-4) - 1e-9


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 10), st.floats(0.01, 2.0), st.integers(0, 2**32 - 1))
def test_coordinate_passes_never_raise_the_residual_and_reach_its_minimum(n, lam, seed):
    """``smooth_flows``: each pass keeps every flow within its capacity, keeps ``R`` the
    residual of the flows, never raises ``‖R‖``, and many passes reach the least residual
    (that of a flow search run to agreement)."""
    from convexfl._flow_kernels import flow_residual, project_flows, smooth_flows
    from convexfl.certificates import _min_residual

    rng, edges, w, cap, G = _random_flow_problem(seed, n, lam, 0.7, 2, (0.1, 5.0))
    if len(edges) == 0:
        return
    u = project_flows(rng.standard_normal((len(edges), 2)) * cap[:, None], cap)
    R = flow_residual(G, edges, u)
    last = np.linalg.norm(R)
    for _ in range(5):
        smooth_flows(R, u, edges, cap, 1)
        assert np.all(np.linalg.norm(u, axis=1) <= cap * (1 + 1e-12))
        np.testing.assert_allclose(R, flow_residual(G, edges, u), atol=1e-12 * (1 + last))
        assert np.linalg.norm(R) <= last * (1 + 1e-12) + 1e-15
        last = np.linalg.norm(R)
    smooth_flows(R, u, edges, cap, 5000)
    least = _min_residual(G, edges, w, lam, None, 1e-10, 50000)[0]
    assert np.linalg.norm(flow_residual(G, edges, u)) <= least * (1 + 1e-3) + 1e-9


def test_one_coordinate_pass_is_not_the_least_residual_many_are():
    """The control of the test above: on a path ``0 − 1 − 2`` with ``G = (1, 0, −1)`` and
    ample capacities the least residual is 0 (flows of −1 on both edges), but one pass
    leaves ``R = (½, −¼, −¼)``; the passes converge to it."""
    from convexfl._flow_kernels import flow_residual, smooth_flows

    edges = np.array([[0, 1], [1, 2]])
    G = np.array([[1.0], [0.0], [-1.0]])
    cap = np.full(2, 10.0)
    u = np.zeros((2, 1))
    R = flow_residual(G, edges, u)
    smooth_flows(R, u, edges, cap, 1)
    np.testing.assert_allclose(R.ravel(), [0.5, -0.25, -0.25])
    smooth_flows(R, u, edges, cap, 200)
    assert np.linalg.norm(flow_residual(G, edges, u)) < 1e-12
    np.testing.assert_allclose(u.ravel(), [-1.0, -1.0])


def test_coordinate_passes_skip_edges_whose_ends_carry_no_residual():
    """With ``rtol`` each pass goes over the edges with an end above ``rtol`` times the rms
    residual at its start: on a path ``0 − 1 − 2 − 3 − 4`` with the residual at node 0 only,
    the first pass moves the flows of edges (0, 1) and, since node 1 then has a residual,
    the second pass those of (1, 2) too, while (3, 4) never moves; every pass still lowers
    ``‖R‖`` and keeps ``R = G + Bᵀu``."""
    from convexfl._flow_kernels import flow_residual, smooth_flows

    edges = np.array([[0, 1], [1, 2], [2, 3], [3, 4]])
    G = np.zeros((5, 2))
    G[0] = [1.0, -2.0]
    cap = np.full(4, 10.0)
    u = np.zeros((4, 2))
    R = flow_residual(G, edges, u)
    smooth_flows(R, u, edges, cap, 1, 1e-3)
    assert np.any(u[0] != 0) and np.all(u[1:] == 0)
    before = np.linalg.norm(R)
    smooth_flows(R, u, edges, cap, 1, 1e-3)
    assert np.all(u[1] != 0) and np.all(u[3] == 0)
    assert np.linalg.norm(R) < before
    np.testing.assert_allclose(R, flow_residual(G, edges, u), atol=1e-15)


def test_anderson_mixing_speeds_up_a_slow_linear_fixed_point_iteration():
    from convexfl.certificates import _Anderson

    rng = np.random.default_rng(0)
    Q = np.linalg.qr(rng.standard_normal((20, 20)))[0]
    M = Q @ np.diag(np.linspace(0.5, 0.97, 20)) @ Q.T  # contraction, slow modes near 1
    b = rng.standard_normal((20, 1))
    fixed = np.linalg.solve(np.eye(20) - M, b)
    plain = np.zeros((20, 1))
    mixed = np.zeros((20, 1))
    mix = _Anderson(5)
    for _ in range(30):
        plain = M @ plain + b
        Tu = M @ mixed + b
        fast = mix.step(mixed, Tu)
        mixed = Tu if fast is None else fast
    err_plain = np.linalg.norm(plain - fixed)
    err_mixed = np.linalg.norm(mixed - fixed)
    assert err_mixed < 1e-3 * err_plain


def test_anderson_ring_buffer_is_the_least_squares_mixture_of_the_last_m_steps():
    """Past the buffer's wrap-around, the mixture is ``T(u_k) − ΔT γ`` with ``γ`` the
    least-squares fit of ``f_k`` by the last ``m`` differences ``Δf`` (computed here from
    scratch, in their own order)."""
    from convexfl.certificates import _Anderson

    rng = np.random.default_rng(3)
    m, steps = 3, 8
    us = [rng.standard_normal((6, 2)) for _ in range(steps)]
    Ts = [rng.standard_normal((6, 2)) for _ in range(steps)]
    mix = _Anderson(m)
    for k in range(steps):
        out = mix.step(us[k], Ts[k])
        if k == 0:
            assert out is None
            continue
        lo = max(1, k - m + 1)
        f = [(Ts[i] - us[i]).ravel() for i in range(steps)]
        dF = np.array([f[i] - f[i - 1] for i in range(lo, k + 1)])
        dT = np.array([(Ts[i] - Ts[i - 1]).ravel() for i in range(lo, k + 1)])
        gamma = np.linalg.lstsq(dF.T, f[k], rcond=None)[0]
        np.testing.assert_allclose(out.ravel(), Ts[k].ravel() - gamma @ dT, atol=1e-10)


@settings(max_examples=30, deadline=None)
@given(st.integers(3, 12), st.floats(0.05, 2.0), st.integers(0, 2**32 - 1))
def test_fused_steps_are_the_steps_they_replace(n, lam, seed):
    """The one-pass alternating-projection step and the projected Anderson mixture give
    what their separate passes give: ``S(Π(u + potential(R)))`` (``S`` the coordinate
    passes) and ``Π(t − ΔT γ)``, and the residuals of those flows."""
    from convexfl._flow_kernels import edge_flows, flow_residual, project_flows, smooth_flows
    from convexfl.certificates import SMOOTH_SWEEPS, _Anderson, _potential_solver

    rng, edges, w, cap, G = _random_flow_problem(seed, n, lam, 0.6, 2, (0.1, 5.0))
    if len(edges) == 0:
        return
    flow, _ = _potential_solver(n, edges, w, lam)
    u = project_flows(rng.standard_normal((len(edges), 2)), cap)
    R = flow_residual(G, edges, u)
    v, R_v, sq = flow.step(u, R, G)
    expected = project_flows(u + edge_flows(flow.phi(R), edges, cap), cap)
    smooth_flows(flow_residual(G, edges, expected), expected, edges, cap, SMOOTH_SWEEPS)
    np.testing.assert_array_equal(v, expected)
    np.testing.assert_allclose(R_v, flow_residual(G, edges, expected), atol=1e-12)
    assert sq == pytest.approx(float(np.sum(R_v ** 2)), rel=1e-12, abs=1e-300)
    mix = _Anderson(3)
    for _ in range(4):
        gamma = mix.coefficients(u, v)
        u, v = v, project_flows(v + 0.1 * rng.standard_normal(v.shape), cap)
    gamma = mix.coefficients(u, v)
    if gamma is not None:
        mixed, R_m, sq_m = mix.projected(gamma, G, edges, cap)
        plain = project_flows((mix.last_t - gamma @ mix.dT[:gamma.size]).reshape(v.shape),
                              cap)
        np.testing.assert_allclose(mixed, plain, atol=1e-12)
        np.testing.assert_allclose(R_m, flow_residual(G, edges, mixed), atol=1e-12)


def test_no_start_from_zero_flows_where_the_hints_are_close_everywhere(monkeypatch):
    """The potential flow of ``G`` is computed as a start only when a hint leaves some
    component with edges at more than ``FROM_ZERO_SHARE`` of its ``‖G_C‖``; the answer's
    bounds are the same either way."""
    from convexfl.certificates import _min_residual

    G, edges, w, lam, _ = _easy_and_hard_components()
    exact = _min_residual(G, edges, w, lam, None, 1e-12, 50000)
    good = exact[3] * (1 - 1e-4)  # within the capacities, residual near the least
    starts = []
    step = certificates._PotentialFlow.step
    monkeypatch.setattr(certificates._PotentialFlow, "step",
                        lambda self, u, R, G_: starts.append(not np.any(u)) or step(self, u, R, G_))
    noise = np.random.default_rng(0).standard_normal(good.shape)
    saturated = noise / np.linalg.norm(noise, axis=1)[:, None] * lam * w[:, None]
    for hint, from_zero in ((good, False), (saturated, True)):
        starts.clear()
        up, lo, _, _ = _min_residual(G, edges, w, lam, hint, 1e-9, 50000)
        assert any(starts[1:]) == from_zero  # the first step is the hint's own
        assert lo <= exact[0] * (1 + 1e-9) + 1e-12 and up >= exact[1] * (1 - 1e-9) - 1e-12


def _just_fused(share):
    """``(prob, X, fb, rng)``: two Gaussian groups on a kNN graph, all fused at their mean,
    at ``λ = λ̂ (1 + share·(u/λ̂ − 1))`` with ``u`` the fusion threshold's upper bound
    (λ̂'s flow has slack there); ``rng`` goes on from the data's draw."""
    rng = np.random.default_rng(1)
    A = np.r_[rng.standard_normal((120, 2)), rng.standard_normal((120, 2)) + 3.0]
    prob = cfl.SumOfNorms(cfl.losses.Quadratic(A), cfl.graphs.knn(A, 8), 1.0)
    fb = cfl.bounds.fusion_threshold(prob)
    prob = prob.with_lam((1.0 + share * (fb.related["upper"].value / fb.value - 1.0)) * fb.value)
    return prob, np.tile(fb.inputs["y_star"], (len(A), 1)), fb, rng


@pytest.mark.parametrize("eps", [0.3, 0.1, 0.01])
def test_a_hint_mixed_with_saturated_noise_still_starts_well(eps):
    """A hint that is a poor start although its residual is small (λ̂'s flow mixed with
    random flows at full capacity, λ just above λ̂): the search still takes its few
    iterations (the start from zero flows is kept there; skipping it whenever the hint's
    residual was near the target made this take 486–986 iterations)."""
    prob, X, fb, rng = _just_fused(0.02)
    noise = rng.standard_normal((prob.graph.n_edges, 2))
    noise *= (prob.lam * prob.graph.weights / np.linalg.norm(noise, axis=1))[:, None]
    for target in (1e-3, 1e-5):
        cert = kkt_residual(prob, X, flows=(1 - eps) * fb.inputs["_flow"] + eps * noise,
                            target=target)
        assert cert.kkt_residual <= target and cert.flow_iterations <= 10


def test_a_hint_one_correction_from_the_flows_certifies_without_iterations():
    """The hint is scored after one projection step, like the potential flow: a hint that
    differs from feasible flows by a flow that only moves the node balances (whatever its
    size) is corrected by that step, and the certificate needs no iteration. (Scored as
    given, its large residual lost to the potential flow's, whose search took iterations.)"""
    from convexfl.certificates import _potential_solver

    rng = np.random.default_rng(1)
    A = np.r_[rng.standard_normal((120, 2)), rng.standard_normal((120, 2)) + 3.0]
    prob = cfl.SumOfNorms(cfl.losses.Quadratic(A), cfl.graphs.knn(A, 8), 1.0)
    fb = cfl.bounds.fusion_threshold(prob)
    # the fused model at a λ where λ̂'s flow has slack and the potential flow does not fit
    slack = 0.5 * (fb.related["upper"].value / fb.value - 1.0)
    assert slack > 0
    prob = prob.with_lam((1.0 + slack) * fb.value)
    X = np.tile(fb.inputs["y_star"], (len(A), 1))
    g = prob.graph
    nudge = _potential_solver(len(A), g.edges, g.weights, prob.lam)[0](
        rng.standard_normal(A.shape))
    nudge *= 0.5 * slack * fb.value / np.max(np.linalg.norm(nudge, axis=1) / g.weights)
    hint = fb.inputs["_flow"] + nudge
    assert np.max(np.linalg.norm(hint, axis=1) / (prob.lam * g.weights)) < 1  # no clipping
    plain = kkt_residual(prob, X, target=1e-8)
    hinted = kkt_residual(prob, X, flows=hint, target=1e-8)
    assert hinted.kkt_residual <= 1e-8 and hinted.flow_iterations == 0
    assert plain.flow_iterations > 0


def test_several_flow_guesses_are_tried_in_order(monkeypatch):
    """``flows`` may stack several guesses, tried in order: the first that decides the
    question is taken, wherever it stands in the stack."""
    prob, X, fb, rng = _just_fused(0.5)  # as above: the potential flow does not fit
    good = fb.inputs["_flow"]
    bad = prob.lam * prob.graph.weights[:, None] * rng.standard_normal(good.shape)
    alone = kkt_residual(prob, X, flows=bad, target=1e-8)
    assert alone.flow_iterations > 0
    phi = certificates._PotentialFlow.phi
    solves = []
    monkeypatch.setattr(certificates._PotentialFlow, "phi",
                        lambda self, R: solves.append(1) or phi(self, R))
    for stack in (np.stack([good, bad]), np.stack([bad, good])):
        solves.clear()
        both = kkt_residual(prob, X, flows=stack, target=1e-8)
        assert both.kkt_residual <= 1e-8 and both.flow_iterations == 0
        assert both.kkt_abs_lower <= both.kkt_abs
        # the good guess decides as given, wherever it stands: no projection step is taken
        # before every guess has been scored
        assert not solves
        fused = both.fused
        assert np.allclose(both.flows[fused], good[fused])


def test_guesses_right_on_different_components_are_combined(monkeypatch):
    """Two guesses, each exact on one fused component and random on the other: neither
    decides alone, their best on each component does, before any projection step. A
    control: with one of them alone the search must iterate."""
    from convexfl._flow_kernels import flow_residual
    from convexfl.certificates import _min_residual

    rng = np.random.default_rng(3)
    ring = np.array([[i, (i + 1) % 6] for i in range(6)] + [[0, 3]])
    edges = np.r_[ring, ring + 6]  # two components of 6 nodes
    w = rng.uniform(0.5, 1.5, len(edges))
    lam = 1.0
    exact = 0.5 * lam * w[:, None] * rng.uniform(-1, 1, (len(edges), 2)) / np.sqrt(2)
    G = -flow_residual(np.zeros((12, 2)), edges, exact)  # G + Bᵀ exact = 0, inside the balls
    noise = 0.9 * lam * w[:, None] * rng.uniform(-1, 1, (len(edges), 2)) / np.sqrt(2)
    first, second = exact.copy(), exact.copy()
    first[7:], second[:7] = noise[7:], noise[:7]
    phi = certificates._PotentialFlow.phi
    solves = []
    monkeypatch.setattr(certificates._PotentialFlow, "phi",
                        lambda self, R: solves.append(1) or phi(self, R))
    up, low, it, u = _min_residual(G, edges, w, lam, np.stack([first, second]), 1e-9, 1000,
                                   1e-10)
    assert up <= 1e-10 and it == 0 and not solves and low <= up
    np.testing.assert_allclose(u, exact)
    up_alone = _min_residual(G, edges, w, lam, first, 1e-9, 1000, 1e-10)[0]
    assert solves and up_alone <= 1e-10  # found, but by a projection step or the search


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 9), st.floats(0.1, 10.0)), min_size=2, max_size=4),
       st.floats(0.05, 2.0), st.integers(0, 2**32 - 1),
       st.one_of(st.none(), st.floats(1e-4, 3.0)))
def test_flow_search_over_components_is_the_sum_of_its_parts(parts, lam, seed, target):
    """The flow problem is separable over the fused components, ``‖R‖² = Σ_C ‖R_C‖²``, and
    the search treats them one by one: on a disjoint union of random problems (each part at
    its own scale) the certified bounds bracket the union's least residual, computed part
    by part; run to agreement they meet it; with a target the question is decided
    correctly whenever the bounds decide it."""
    from convexfl._flow_kernels import flow_residual, project_flows
    from convexfl.certificates import (
        _min_residual,
        _potential_factor,
        _potential_solver,
        _search_components,
    )

    Gs, Es, ws, least_lo, least_up, offset = [], [], [], 0.0, 0.0, 0
    for k, (n, scale) in enumerate(parts):
        _, edges, w, _, G = _random_flow_problem(seed + k, n + 1, lam, 0.7, 2,
                                                 (scale, scale))
        up, lo, _, _ = _min_residual(G, edges, w, lam, None, 1e-10, 50000)
        least_lo, least_up = least_lo + lo ** 2, least_up + up ** 2
        Gs.append(G)
        Es.append(edges + offset)
        ws.append(w)
        offset += n + 1
    G, edges, w = np.concatenate(Gs), np.concatenate(Es), np.concatenate(ws)
    least_lo, least_up = np.sqrt(least_lo), np.sqrt(least_up)
    atarget = None if target is None else target * least_up
    # the whole search, and the component search alone from the projected potential flow
    flow, _ = _potential_solver(len(G), edges, w, lam)
    start = project_flows(flow(G), lam * w)
    comp = _potential_factor(len(G), edges, w)[0]
    atol = 1e-13 * (1 + np.linalg.norm(G))
    coarse = _search_components(G, edges, w, lam, start, flow_residual(G, edges, start), 0.0,
                                comp, 1e-2, 50000, None, atol)
    assert coarse[0] - coarse[1] <= 1e-2 * coarse[0] + atol
    for up, lo, _, u in (_min_residual(G, edges, w, lam, None, 1e-9, 50000, atarget),
                         _search_components(G, edges, w, lam, start,
                                            flow_residual(G, edges, start), 0.0, comp, 1e-9,
                                            50000, atarget, atol)):
        assert np.all(np.linalg.norm(u, axis=1) <= lam * w * (1 + 1e-12))
        assert np.linalg.norm(flow_residual(G, edges, u)) == pytest.approx(up, rel=1e-9,
                                                                            abs=1e-12)
        assert lo <= least_up * (1 + 1e-9) + 1e-12 and up >= least_lo * (1 - 1e-9) - 1e-12
        if atarget is None:
            assert up == pytest.approx(least_up, rel=1e-6, abs=1e-10)
            assert up - lo <= 1e-9 * up + atol  # to rtol, though small components are skipped
        elif up <= atarget:
            assert least_lo <= atarget * (1 + 1e-9) + 1e-12
        elif lo > atarget:
            assert least_up > atarget * (1 - 1e-9)


def _easy_and_hard_components():
    """``(G, edges, w, lam, small)``: a 30-user component whose potential flow is feasible
    and a 6-user one whose is not (13 projection steps alone to reach 2e-16)."""
    _, e1, w1, _, G1 = _random_flow_problem(1, 30, 0.5, 0.4, 2, (1.0, 1.0))
    _, e2, w2, _, G2 = _random_flow_problem(2, 6, 0.5, 0.8, 2, (1.0, 1.0))
    G1 -= G1.mean(axis=0)  # zero residual reachable in both components
    G2 -= G2.mean(axis=0)
    G, edges, w = np.r_[G1, G2], np.r_[e1, e2 + 30], np.r_[w1, 0.03 * w2]
    return G, edges, w, 10.0, np.arange(len(G)) >= 30


def test_the_search_hands_over_to_the_component_that_holds_the_residual(monkeypatch):
    """Once the residual sits in the small component, the search goes on there alone."""
    from convexfl.certificates import _min_residual

    G, edges, w, lam, _ = _easy_and_hard_components()
    calls = []
    alone = certificates._search_components
    monkeypatch.setattr(certificates, "_search_components",
                        lambda *args: calls.append(1) or alone(*args))
    up, lo, _, _ = _min_residual(G, edges, w, lam, None, 1e-9, 5000)
    assert calls == [1]
    assert up - lo <= 1e-9 * up + 1e-12 and up < 1e-10


def test_a_residual_concentrated_from_the_start_is_handed_over_before_any_step():
    """Where the starting residual already sits in the small component (the potential
    flow from 0 settles the large one), no projection step is taken on the whole graph."""
    from convexfl._flow_kernels import flow_residual, project_flows
    from convexfl.certificates import _potential_factor, _potential_solver, _search

    G, edges, w, lam, small = _easy_and_hard_components()
    flow, _ = _potential_solver(len(G), edges, w, lam)
    comp = _potential_factor(len(G), edges, w)[0]
    start = project_flows(flow(G), lam * w)
    R = flow_residual(G, edges, start)
    up, _, it, u, handed = _search(G, edges, lam * w, start, R, 0.0, flow, 1e-9, 5000, None,
                                   1e-13, comp)
    assert it == 0 and handed is not None and u is start
    assert up == pytest.approx(np.linalg.norm(R), rel=1e-12)


def test_the_component_search_leaves_settled_components_and_hands_over_when_concentrated():
    """Of two components, the one whose residual fits in the budget keeps its flows; the
    other is searched to its share. The hand-over test fires when the residual sits in
    components with less than a third of the edges, not when it is spread."""
    from convexfl._flow_kernels import flow_residual, project_flows
    from convexfl.certificates import (
        _concentrated,
        _potential_factor,
        _potential_solver,
        _search_components,
    )

    G, edges, w, lam, small = _easy_and_hard_components()
    flow, _ = _potential_solver(len(G), edges, w, lam)
    comp = _potential_factor(len(G), edges, w)[0]
    start = project_flows(flow(G), lam * w)
    R = flow_residual(G, edges, start)
    n_big = int(np.sum(edges[:, 0] < 30))
    assert np.sum(R[~small] ** 2) < 1e-20 and np.sum(R[small] ** 2) > 1e-3
    assert _concentrated(R, comp, edges)
    assert not _concentrated(np.ones_like(R), comp, edges)
    target = 1e-3 * np.linalg.norm(R)
    up, lo, _, u = _search_components(G, edges, w, lam, start, R, 0.0, comp, 1e-9, 5000,
                                      target, 1e-13)
    np.testing.assert_array_equal(u[:n_big], start[:n_big])
    assert up <= target and lo <= up
    assert np.sum(flow_residual(G, edges, u)[small] ** 2) <= target ** 2


def test_the_factorisation_cache_changes_no_certificate():
    """A certificate from an empty cache and one that reuses the cached factorisations of
    the same fused subgraph are the same: the cache only saves time."""
    rng = np.random.default_rng(4)
    A = np.r_[rng.normal(0, 0.3, (30, 2)), rng.normal(3, 0.3, (30, 2))]
    prob = cfl.SumOfNorms(cfl.losses.Quadratic(A), cfl.graphs.knn(A, 6), 0.5)
    sol = cfl.solve(prob)
    certificates.clear_cache()
    assert not certificates._POTENTIAL_CACHE
    cold = certificates.kkt_residual(prob, sol.X)
    assert certificates._POTENTIAL_CACHE  # the fused subgraph's factorisation was kept
    warm = certificates.kkt_residual(prob, sol.X)
    assert (cold.kkt_residual, cold.kkt_abs_lower, cold.flow_iterations) == \
        (warm.kkt_residual, warm.kkt_abs_lower, warm.flow_iterations)
    np.testing.assert_array_equal(cold.flows, warm.flows)
    certificates.clear_cache()
    assert not certificates._POTENTIAL_CACHE


def test_grounded_laplacian_is_the_laplacian_restricted_to_the_kept_nodes():
    rng = np.random.default_rng(5)
    n = 12
    edges = np.array([(i, j) for i in range(n) for j in range(i + 1, n) if rng.random() < 0.4],
                     dtype=np.int64)
    w = rng.random(len(edges)) + 0.1
    keep = rng.random(n) < 0.7
    L = np.zeros((n, n))
    for (i, j), w_e in zip(edges, w, strict=True):
        L[[i, j], [i, j]] += w_e
        L[i, j] -= w_e
        L[j, i] -= w_e
    M = certificates.grounded_laplacian(n, edges, w, keep)
    assert M.format == "csc"
    np.testing.assert_allclose(M.toarray(), L[np.ix_(keep, keep)], rtol=0, atol=1e-14)
    U = certificates.grounded_laplacian(n, edges[:, ::-1], w, keep, upper=True)  # any order
    assert U.format == "csc"
    np.testing.assert_allclose(U.toarray(), np.triu(L[np.ix_(keep, keep)]), rtol=0, atol=1e-14)
    b = rng.standard_normal(int(keep.sum()))
    np.testing.assert_allclose(certificates.LDLFactor(U, upper=True).solve(b),
                               np.linalg.solve(L[np.ix_(keep, keep)], b), rtol=1e-9)
    assert M.has_sorted_indices and U.has_sorted_indices
    for kept in (keep, np.ones(n, bool)):  # with a diagonal shift; every node kept
        shift = rng.random(int(kept.sum()))
        S = certificates.grounded_laplacian(n, edges, w, kept, shift=shift)
        np.testing.assert_allclose(S.toarray(), L[np.ix_(kept, kept)] + np.diag(shift),
                                   rtol=0, atol=1e-14)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 30), density=st.floats(0.05, 0.6), repeats=st.integers(0, 3),
       seed=st.integers(0, 10**6))
def test_ordered_ldl_solves_the_grounded_laplacian_in_any_order(n, density, repeats, seed):
    """The numba ``L D Lᵀ`` in an inherited elimination order (any ranks, repeated edges
    summed) solves ``L_w[keep][:, keep]`` as a dense solve does, one column or a block."""
    rng = np.random.default_rng(seed)
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n) if rng.random() < density]
    pairs += [(i, i + 1) for i in range(n - 1)]  # connected: the grounded matrix is SPD
    pairs += [pairs[rng.integers(len(pairs))] for _ in range(repeats)]
    edges = np.array(pairs, dtype=np.int64)
    w = rng.random(len(edges)) + 0.1
    keep = np.ones(n, bool)
    keep[rng.integers(n)] = False  # grounded
    L = np.zeros((n, n))
    for (i, j), w_e in zip(edges, w, strict=True):
        L[[i, j], [i, j]] += w_e
        L[i, j] -= w_e
        L[j, i] -= w_e
    M = L[np.ix_(keep, keep)]
    factor = certificates.OrderedLDL(n, edges, w, keep, rng.permutation(n))
    for m in (1, 2, 3, 4):  # 2 and 3 columns in one pass, the others column by column
        b = rng.standard_normal((int(keep.sum()), m))
        np.testing.assert_allclose(M @ factor.solve(b), b, atol=1e-9 * (1 + np.abs(M).max()))
    np.testing.assert_allclose(M @ factor.solve(b[:, 0]), b[:, 0],
                               atol=1e-9 * (1 + np.abs(M).max()))


def test_an_inherited_order_fills_no_more_than_the_whole_graphs():
    """A subgraph factorised in the order of its whole graph
    (:attr:`~convexfl.graphs.Graph.elimination_rank`) fills at most the whole graph's
    factor on its nodes: every path of the subgraph is one of the graph."""
    rng = np.random.default_rng(2)
    A = rng.standard_normal((300, 2))
    graph = cfl.graphs.knn(A, 8)
    rank = graph.elimination_rank
    assert np.array_equal(np.sort(rank), np.arange(300))
    keep = np.ones(300, bool)
    keep[int(np.argmin(rank))] = False
    whole = certificates.OrderedLDL(300, graph.edges, graph.weights, keep, rank)
    sub = rng.random(graph.n_edges) < 0.5
    part = certificates.OrderedLDL(300, graph.edges[sub], graph.weights[sub], keep, rank)
    assert part.nnz <= whole.nnz


def test_the_certificates_cache_key_tells_edges_and_weights_apart():
    from convexfl._flow_kernels import fingerprint

    rng = np.random.default_rng(3)
    edges = rng.integers(0, 500, (2000, 2))
    w = rng.random(2000)
    key = fingerprint(edges, w)
    other = edges.copy()
    other[7, 1] += 1
    nudged = w.copy()
    nudged[11] = np.nextafter(nudged[11], 2.0)
    assert fingerprint(other, w) != key and fingerprint(edges, nudged) != key
    assert fingerprint(edges[:-1], w[:-1]) != key
    assert fingerprint(np.ascontiguousarray(edges.astype(np.int32)), w) == key


def test_the_reported_upper_bound_is_the_residual_of_the_returned_flows():
    """The flow search updates its residual in place (the coordinate passes): the
    certificate's upper bound is computed afresh from the flows it returns."""
    from convexfl._flow_kernels import flow_residual

    rng = np.random.default_rng(6)
    A = rng.standard_normal((80, 2))
    prob = cfl.SumOfNorms(cfl.losses.Quadratic(A), cfl.graphs.knn(A, 8), 0.2)
    X = cfl.solve(prob).X + 1e-4 * rng.standard_normal(A.shape)
    cert = kkt_residual(prob, X, fuse_tol=1e-2)
    grad = prob.loss.grad(X)
    R = flow_residual(grad, prob.graph.edges, cert.flows)
    assert cert.kkt_abs == pytest.approx(np.linalg.norm(R), rel=1e-12)


def test_graphs_above_the_order_limit_are_not_ordered_whole(monkeypatch):
    """The whole graph's elimination order costs about one factorisation of it (seconds at
    5·10⁴ users in d = 3): certificates compute it at their first factorisation up to
    ``ORDER_MAX_USERS`` users only, and give the same verdict either way."""
    rng = np.random.default_rng(7)
    A = rng.standard_normal((60, 2))
    X = np.repeat(A.mean(axis=0, keepdims=True), 60, axis=0)  # one cluster: a factorisation
    verdicts = []
    for limit in (10, 10**6):
        monkeypatch.setattr(certificates, "ORDER_MAX_USERS", limit)
        certificates.clear_cache()
        prob = cfl.SumOfNorms(cfl.losses.Quadratic(A), cfl.graphs.knn(A, 8), 0.05)
        cert = kkt_residual(prob, X)
        assert ("elimination_rank" in vars(prob.graph)) == (limit > 60)
        verdicts.append(cert.kkt_residual)
    assert verdicts[0] == pytest.approx(verdicts[1], rel=1e-6)


def test_multigrid_solves_a_grounded_laplacian_to_its_tolerance():
    """:class:`MultigridSolve` (CG with one V-cycle) solves a grounded Laplacian of a kNN
    graph in d = 3 to ``POTENTIAL_RTOL`` of the right-hand side, one column or a block, and
    counts its CG iterations; an exact solve is within that of it."""
    from convexfl.certificates import MultigridSolve, grounded_laplacian

    rng = np.random.default_rng(11)
    n = 3000
    graph = cfl.graphs.knn(rng.standard_normal((n, 3)), 10)
    keep = np.ones(n, bool)
    keep[0] = False
    w = rng.uniform(0.5, 2.0, graph.n_edges)
    M = grounded_laplacian(n, graph.edges, w, keep)
    U = grounded_laplacian(n, graph.edges, w, keep, upper=True)
    solver = MultigridSolve(M)
    for b in (rng.standard_normal(n - 1), rng.standard_normal((n - 1, 3))):
        x = solver.solve(b)
        assert x.shape == b.shape
        assert np.linalg.norm(b - M @ x) <= certificates.POTENTIAL_RTOL * np.linalg.norm(b)
        exact = certificates.LDLFactor(U, upper=True).solve(b)
        assert np.linalg.norm(x - exact) <= 1e-4 * np.linalg.norm(exact)
    assert 0 < solver.iterations <= 2 * certificates.POTENTIAL_CG_MAX
    assert solver.nnz > M.nnz


def test_large_components_by_multigrid_give_the_certificates_of_exact_factors(monkeypatch):
    """In graphs too large to be ordered whole, fused components of ``POTENTIAL_AMG_MIN``
    nodes or more get :class:`MultigridSolve` instead of an exact ``L D Lᵀ`` (limits lowered
    here to a 1200-user kNN graph in d = 3): the certificates of the solution and of a
    candidate at another λ agree with those of the exact factors to the flow search's ``rtol``,
    with the same verdicts, and both bounds stay certified (lower ≤ upper)."""
    from convexfl.certificates import MultigridSolve

    rng = np.random.default_rng(5)
    A = np.concatenate([rng.standard_normal((600, 3)), 3.0 + rng.standard_normal((600, 3))])
    prob = cfl.SumOfNorms(cfl.losses.Quadratic(A), cfl.graphs.knn(A, 10), 2.0)
    sol = cfl.solve(prob, method="ssnal", tol=1e-8)
    assert sol.converged and sol.n_clusters < 20
    other = cfl.solve(cfl.SumOfNorms(prob.loss, prob.graph, 1.7), method="ssnal", tol=1e-8)
    candidates = [sol.X, other.X]  # the solution, and that of another λ
    monkeypatch.setattr(certificates, "ORDER_MAX_USERS", 100)
    results = {}
    for amg_min in (10**9, 200):
        monkeypatch.setattr(certificates, "POTENTIAL_AMG_MIN", amg_min)
        certificates.clear_cache()
        results[amg_min] = [kkt_residual(prob, X, fuse_tol=1e-6) for X in candidates]
        kinds = {type(entry[3]) for entry in certificates._POTENTIAL_CACHE.values()}
        assert (MultigridSolve in kinds) == (amg_min == 200)
    for exact, multigrid in zip(results[10**9], results[200], strict=True):
        assert multigrid.kkt_abs_lower <= multigrid.kkt_abs
        assert (multigrid.kkt_residual <= 1e-6) == (exact.kkt_residual <= 1e-6)
        assert multigrid.kkt_abs == pytest.approx(exact.kkt_abs, rel=2e-3, abs=1e-9)
        assert multigrid.kkt_abs_lower <= exact.kkt_abs and exact.kkt_abs_lower <= multigrid.kkt_abs


@pytest.mark.parametrize("d", [1, 2, 3, 4])
def test_the_flow_kernels_are_their_formulas_in_every_dimension(d):
    """``flow_residual``, ``potential_step``, ``edge_norms`` and one pass of ``smooth_flows``
    against numpy: d = 2 and 3 run copies compiled with d a constant, the others the
    general kernel."""
    from convexfl._flow_kernels import flow_residual, potential_step, smooth_flows
    from convexfl._kernels import edge_norms

    rng = np.random.default_rng(d)
    n = 10
    edges = cfl.graphs.knn(rng.standard_normal((n, 2)), 3).edges
    m = len(edges)
    cap = rng.uniform(0.2, 1.0, m)
    G, phi = rng.standard_normal((n, d)), rng.standard_normal((n, d))
    u = 0.3 * rng.standard_normal((m, d))
    R = G.copy()
    np.add.at(R, edges[:, 0], u)
    np.add.at(R, edges[:, 1], -u)
    np.testing.assert_allclose(flow_residual(G, edges, u), R, rtol=1e-14, atol=1e-14)
    diff = phi[edges[:, 0]] - phi[edges[:, 1]]
    np.testing.assert_allclose(edge_norms(phi, edges), np.linalg.norm(diff, axis=1),
                               rtol=1e-14)
    v = u + cap[:, None] * diff
    v *= np.minimum(1.0, cap / np.linalg.norm(v, axis=1))[:, None]
    np.testing.assert_allclose(potential_step(u, phi, edges, cap), v, rtol=1e-14, atol=1e-14)
    want_u, want_R = u.copy(), R.copy()
    for e, (i, j) in enumerate(edges):  # the pass, edge by edge (every edge: rtol 0)
        x = want_u[e] + 0.5 * (want_R[j] - want_R[i])
        x *= min(1.0, cap[e] / np.linalg.norm(x))
        want_R[i] += x - want_u[e]
        want_R[j] -= x - want_u[e]
        want_u[e] = x
    smooth_flows(R, u, edges, cap, 1)
    np.testing.assert_allclose(u, want_u, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(R, want_R, rtol=1e-13, atol=1e-14)
