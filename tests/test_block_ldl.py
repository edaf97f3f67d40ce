"""The block ``L D Lᵀ`` of SSNAL's sparsified Hessians (convexfl.solvers._block_ldl)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convexfl._flow_kernels import elimination_tree
from convexfl.solvers._block_ldl import BlockLDL, user_ordering


def _pairs(k, density, rng):
    """Random pairs of ``k`` users, in random order, either end first."""
    pairs = np.array([(i, j) for i in range(k) for j in range(i + 1, k)], dtype=np.int64)
    pairs = pairs[rng.random(len(pairs)) < density].reshape(-1, 2)
    rng.shuffle(pairs)
    return np.ascontiguousarray(pairs[:, ::-1] if rng.random() < 0.5 else pairs)


def _matrix(k, d, pairs, rng, r=None):
    """Positive semidefinite edge blocks ``B_e = s_e I − Q_e Q_eᵀ`` (``Q_e``: d × r, any
    rank) and diagonal blocks ``c_u I + Σ_{e ∋ u} B_e`` on ``pairs``: ``(diag, s, Q,
    dense)`` with the off-diagonal blocks ``−B_p``."""
    r = int(rng.integers(1, d + 1)) if r is None else r
    Q = rng.standard_normal((len(pairs), d, r))
    s = np.linalg.norm(Q, ord=2, axis=(1, 2)) ** 2 * rng.uniform(1.0, 3.0, len(pairs))
    off = s[:, None, None] * np.eye(d) - Q @ Q.transpose(0, 2, 1)
    diag = np.zeros((k, d, d))
    np.add.at(diag, pairs[:, 0], off)
    np.add.at(diag, pairs[:, 1], off)
    diag += rng.uniform(0.01, 1.0, k)[:, None, None] * np.eye(d)
    dense = np.zeros((k * d, k * d))
    for u in range(k):
        dense[u * d:(u + 1) * d, u * d:(u + 1) * d] = diag[u]
    for (i, j), block in zip(pairs, off, strict=True):
        dense[i * d:(i + 1) * d, j * d:(j + 1) * d] = -block
        dense[j * d:(j + 1) * d, i * d:(i + 1) * d] = -block
    return diag, s, Q, dense


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 25), st.integers(1, 4), st.floats(0.0, 1.0), st.integers(0, 2**32 - 1))
def test_the_block_factor_solves_the_matrix(k, d, density, seed):
    """For any graph (empty, a tree, complete), block size and rank of the blocks' ``Q_e``,
    the solve of the factor is ``M⁻¹`` to rounding, also for a second matrix on the same
    pattern (the analysis reused)."""
    rng = np.random.default_rng(seed)
    pairs = _pairs(k, density, rng)
    ldl = BlockLDL(k, pairs)
    assert np.array_equal(np.sort(ldl.order), np.arange(k))
    for _ in range(2):
        diag, s, Q, dense = _matrix(k, d, pairs, rng)
        B = rng.standard_normal((k, d))
        X = ldl.factor(diag, s, Q)(B)
        np.testing.assert_allclose(X.ravel(), np.linalg.solve(dense, B.ravel()), rtol=1e-8,
                                   atol=1e-8 * np.abs(X).max())
    if len(pairs):  # control: without one pair's block the solve is another matrix's
        s, Q = s.copy(), Q.copy()
        s[0], Q[0] = 0.0, 0.0
        X = ldl.factor(diag, s, Q)(B)
        assert not np.allclose(dense @ X.ravel(), B.ravel(), rtol=1e-8, atol=1e-8)


def test_the_off_diagonal_blocks_are_read_through_rows_and_the_users_at_rows():
    """With ``rows``, pair ``p``'s block is that of edge ``rows[p]`` (SSNAL passes all its
    edge terms and the kept edges' indices); with ``at``, the users' right-hand sides are
    those rows of a larger array, and ``solve(B, out)`` writes to those rows of ``out``
    only."""
    rng = np.random.default_rng(3)
    pairs = _pairs(12, 0.5, rng)
    diag, s, Q, dense = _matrix(12, 3, pairs, rng, r=1)
    rows = rng.permutation(len(pairs) + 5)[:len(pairs)]
    s_all, Q_all = np.zeros(len(pairs) + 5), np.zeros((len(pairs) + 5, 3, 1))
    s_all[rows], Q_all[rows] = s, Q
    B = rng.standard_normal((12, 3))
    X = BlockLDL(12, pairs, rows).factor(diag, s_all, Q_all)(B)
    np.testing.assert_allclose(dense @ X.ravel(), B.ravel(), rtol=0, atol=1e-9)
    at = np.sort(rng.permutation(20)[:12])
    big = np.full((20, 3), np.nan)
    big[at] = B
    solve = BlockLDL(12, pairs, rows, at=at).factor(diag, s_all, Q_all)
    np.testing.assert_array_equal(solve(big), X)
    out = np.full((20, 3), 7.0)
    assert solve(big, out) is out
    np.testing.assert_array_equal(out[at], X)
    assert np.all(np.delete(out, at, axis=0) == 7.0)


def test_a_matrix_that_is_not_positive_definite_is_refused():
    """A pivot that is not positive definite stops the factorisation with the user named."""
    rng = np.random.default_rng(4)
    pairs = _pairs(6, 1.0, rng)
    diag, s, Q, _ = _matrix(6, 2, pairs, rng)
    diag[3] = -np.eye(2)
    with pytest.raises(ValueError, match="not positive definite"):
        BlockLDL(6, pairs).factor(diag, s, Q)


def test_the_elimination_tree_counts_the_factors_nonzeros():
    """On a path ordered end to end there is no fill (each column of ``L`` has one block);
    on a star with its centre first every leaf fills in against the others."""
    k = 6
    path = np.array([(u, u + 1) for u in range(k - 1)])
    Ap = np.r_[0, np.arange(k)]  # column j holds row j − 1
    Ai = np.arange(k - 1)
    parent, Lp = elimination_tree(Ap, Ai)
    assert list(parent) == [1, 2, 3, 4, 5, -1] and Lp[-1] == k - 1
    star = np.r_[0, 0, np.ones(k - 1, np.int64)].cumsum()  # every column j > 0 holds row 0
    parent, Lp = elimination_tree(star, np.zeros(k - 1, np.int64))
    assert Lp[-1] == (k - 1) * k // 2  # column i holds the rows i+1, …, k−1
    assert user_ordering(k, path).size == k
