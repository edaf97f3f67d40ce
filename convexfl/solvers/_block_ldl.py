"""Sparse ``L D Lᵀ`` of symmetric positive definite matrices made of ``d × d`` blocks.

SSNAL's sparsified Hessians (:meth:`convexfl.solvers.ssnal._Precond.factor_sparsified`) are
``k × k`` arrays of ``d × d`` blocks: one diagonal block per user and one off-diagonal block
``−B_e`` per kept edge, given as ``B_e = s_e I − Q_e Q_eᵀ`` (``Q_e``: d × r; SSNAL's are of
rank one, ``r = 1``, and any symmetric block can be written so). Factorised by blocks,
``M = P L D Lᵀ Pᵀ`` with ``L`` unit lower triangular by blocks, ``D`` block diagonal
(``d × d`` symmetric positive definite pivots, no pivoting: those of a symmetric positive
definite matrix are) and ``P`` an ordering of the users: an index per block instead of one
per entry, and the ``d × d`` products unrolled.

The algorithm is QDLDL's (Stellato, Banjac, Goulart, Bemporad, Boyd; the OSQP project:
elimination tree, then the up-looking factorisation, row by row) with every scalar a block:
row ``k`` of ``L`` solves ``L w = M[:, k]`` over the elimination tree's reach of the
column's entries, ``L[k, i] = w_iᵀ D_i⁻¹`` and ``D_k = M[k, k] − Σ_i L[k, i] w_i``. The
ordering is approximate minimum degree on the users' graph (qdldl's, :func:`user_ordering`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .._flow_kernels import elimination_tree, tree_path


class NotDefiniteError(ValueError):
    """A pivot of :class:`BlockLDL` is not positive definite: the matrix is not (to
    rounding)."""


def user_ordering(k, pairs):
    """The approximate-minimum-degree ordering (qdldl's AMD, of ``L + I`` as
    :attr:`~convexfl.graphs.Graph.elimination_rank`) of the graph on ``k`` users with the
    edges ``pairs`` (m, 2): ``order[new] = old``."""
    import qdldl
    import scipy.sparse as sp

    from ..certificates import grounded_laplacian

    pairs = np.asarray(pairs, dtype=np.int64)
    L = grounded_laplacian(k, pairs, np.ones(len(pairs)), np.ones(k, bool), upper=True)
    return np.asarray(qdldl.Solver(L + sp.eye(k, format="csc"), upper=True).factors()[2],
                      dtype=np.int64)


@njit(cache=True)
def block_pattern(k, pairs, rows, back):
    """The upper triangle, by columns, of the users' graph in the order whose inverse is
    ``back`` (``back[old] = new``): ``(Ap, Ai, Ae)``, the rows of column ``j`` in
    ``Ai[Ap[j]:Ap[j + 1]]`` and in ``Ae`` the ``rows`` entry of the pair each comes from
    (diagonals not stored)."""
    m = pairs.shape[0]
    Ap = np.zeros(k + 1, np.int64)
    for e in range(m):
        Ap[max(back[pairs[e, 0]], back[pairs[e, 1]]) + 1] += 1
    for j in range(k):
        Ap[j + 1] += Ap[j]
    fill = Ap[:k].copy()
    Ai = np.empty(m, np.int64)
    Ae = np.empty(m, np.int64)
    for e in range(m):
        a, b = back[pairs[e, 0]], back[pairs[e, 1]]
        col, row = max(a, b), min(a, b)
        Ai[fill[col]] = row
        Ae[fill[col]] = rows[e]
        fill[col] += 1
    return Ap, Ai, Ae


@njit(inline="always")
def edge_block(s, Q, e, a, b):
    """Entry ``(a, b)`` of the edge block ``s_e I − Q_e Q_eᵀ`` (``s`` (m,), ``Q`` (m, d,
    r))."""
    acc = 0.0
    for t in range(Q.shape[2]):
        acc += Q[e, a, t] * Q[e, b, t]
    return (s[e] if a == b else 0.0) - acc


@njit(cache=True)
def block_factor(order, Ap, Ai, Ae, parent, Lp, diag, s, Q, Li, Lx, Dinv):
    """The numeric factorisation: ``diag`` (k, d, d) the diagonal blocks in the users' own
    numbering, ``−(s_e I − Q_e Q_eᵀ)`` with ``e = Ae[p]`` the off-diagonal block of entry
    ``p`` (``s`` (m,), ``Q`` (m, d, r)). Fills ``Li``, ``Lx`` (L's blocks by columns) and
    ``Dinv`` (the inverse pivots). Returns the first row (in the new order) whose pivot is
    not positive definite, or −1."""
    d = diag.shape[1]
    if d == 2:
        return _block_factor(order, Ap, Ai, Ae, parent, Lp, diag, s, Q, Li, Lx, Dinv, 2)
    if d == 3:
        return _block_factor(order, Ap, Ai, Ae, parent, Lp, diag, s, Q, Li, Lx, Dinv, 3)
    return _block_factor(order, Ap, Ai, Ae, parent, Lp, diag, s, Q, Li, Lx, Dinv, d)


@njit(inline="always")
def _block_factor(order, Ap, Ai, Ae, parent, Lp, diag, s_off, Q, Li, Lx, Dinv, d):
    k = Ap.size - 1
    Y = np.zeros((k, d, d))  # w = L⁻¹ M[:, row], by blocks
    used = np.zeros(k, np.bool_)
    reach = np.empty(k, np.int64)
    stack = np.empty(k, np.int64)
    nxt = Lp[:k].copy()  # the next free slot of each column of L
    Dk = np.empty((d, d))
    for row in range(k):
        u = order[row]
        for a in range(d):
            for b in range(d):
                Dk[a, b] = diag[u, a, b]
        n_reach = 0
        for p in range(Ap[row], Ap[row + 1]):
            i = Ai[p]
            e = Ae[p]
            for a in range(d):
                for b in range(d):
                    Y[i, a, b] -= edge_block(s_off, Q, e, a, b)
            n_reach = tree_path(i, row, parent, used, stack, reach, n_reach)
        for q in range(n_reach - 1, -1, -1):
            c = reach[q]
            for s in range(Lp[c], nxt[c]):  # Y[r] −= L[r, c] Y[c]
                r = Li[s]
                for a in range(d):
                    for b in range(d):
                        acc = 0.0
                        for t in range(d):
                            acc += Lx[s, a, t] * Y[c, t, b]
                        Y[r, a, b] -= acc
            s = nxt[c]
            Li[s] = row
            for a in range(d):  # L[row, c] = Y[c]ᵀ D_c⁻¹
                for b in range(d):
                    acc = 0.0
                    for t in range(d):
                        acc += Y[c, t, a] * Dinv[c, t, b]
                    Lx[s, a, b] = acc
            for a in range(d):  # D_row −= L[row, c] Y[c]
                for b in range(d):
                    acc = 0.0
                    for t in range(d):
                        acc += Lx[s, a, t] * Y[c, t, b]
                    Dk[a, b] -= acc
            nxt[c] += 1
            used[c] = False
            for a in range(d):
                for b in range(d):
                    Y[c, a, b] = 0.0
        if not _inverse_spd(Dk, Dinv[row], d):
            return row
    return -1


@njit(inline="always")
def _inverse_spd(A, out, d):
    """``out = A⁻¹`` for a symmetric positive definite ``A`` (d × d) by its Cholesky factor;
    False when a pivot is not positive (``A`` is not positive definite)."""
    C = np.zeros((d, d))
    for j in range(d):
        s = A[j, j]
        for t in range(j):
            s -= C[j, t] * C[j, t]
        if not s > 0.0:
            return False
        C[j, j] = np.sqrt(s)
        for i in range(j + 1, d):
            s = 0.5 * (A[i, j] + A[j, i])
            for t in range(j):
                s -= C[i, t] * C[j, t]
            C[i, j] = s / C[j, j]
    W = np.zeros((d, d))  # C⁻¹, lower triangular
    for j in range(d):
        W[j, j] = 1.0 / C[j, j]
        for i in range(j + 1, d):
            s = 0.0
            for t in range(j, i):
                s -= C[i, t] * W[t, j]
            W[i, j] = s / C[i, i]
    for a in range(d):  # A⁻¹ = C⁻ᵀ C⁻¹
        for b in range(d):
            s = 0.0
            for t in range(max(a, b), d):
                s += W[t, a] * W[t, b]
            out[a, b] = s
    return True


@njit(cache=True)
def block_solve(source, target, Lp, Li, Lx, Dinv, B, X):
    """``M⁻¹`` from the factors of :func:`block_factor`: the right-hand side's row of the
    user ``i``-th in the factor's order is ``B[source[i]]``, and its solution is written
    to ``X[target[i]]`` (the users' own numbering: both the order; or the rows of a
    larger array)."""
    d = B.shape[1]
    if d == 2:
        _block_solve(source, target, Lp, Li, Lx, Dinv, B, X, 2)
    elif d == 3:
        _block_solve_3(source, target, Lp, Li, Lx, Dinv, B, X)
    else:
        _block_solve(source, target, Lp, Li, Lx, Dinv, B, X, d)


@njit(inline="always")
def _block_solve(source, target, Lp, Li, Lx, Dinv, B, X, d):
    k = source.size
    Y = np.empty((k, d))
    for i in range(k):
        for a in range(d):
            Y[i, a] = B[source[i], a]
    for c in range(k):  # L z = y, by columns
        for s in range(Lp[c], Lp[c + 1]):
            r = Li[s]
            for a in range(d):
                acc = 0.0
                for t in range(d):
                    acc += Lx[s, a, t] * Y[c, t]
                Y[r, a] -= acc
    z = np.empty(d)
    for c in range(k):
        for a in range(d):
            acc = 0.0
            for t in range(d):
                acc += Dinv[c, a, t] * Y[c, t]
            z[a] = acc
        for a in range(d):
            Y[c, a] = z[a]
    for c in range(k - 1, -1, -1):  # Lᵀ x = z
        for s in range(Lp[c], Lp[c + 1]):
            r = Li[s]
            for a in range(d):
                acc = 0.0
                for t in range(d):
                    acc += Lx[s, t, a] * Y[r, t]
                Y[c, a] -= acc
    for i in range(k):
        for a in range(d):
            X[target[i], a] = Y[i, a]


@njit(inline="always")
def _block_solve_3(source, target, Lp, Li, Lx, Dinv, B, X):
    """:func:`_block_solve` for ``d = 3`` written out: the column's entries kept in locals,
    which the compiler cannot do in the generic loops (a write to ``Y[r]`` might alias
    ``Y[c]``). Captured λ = 3 factors of SSNAL at kNN10 N = 5·10⁴ (3·10⁴ users, 2.2·10⁵
    blocks), one process: 2.75 → 2.3 ms a solve; the same arithmetic, the same results."""
    k = source.size
    Y = np.empty((k, 3))
    for i in range(k):
        for a in range(3):
            Y[i, a] = B[source[i], a]
    for c in range(k):  # L z = y, by columns
        y0, y1, y2 = Y[c, 0], Y[c, 1], Y[c, 2]
        for s in range(Lp[c], Lp[c + 1]):
            r = Li[s]
            Y[r, 0] -= Lx[s, 0, 0] * y0 + Lx[s, 0, 1] * y1 + Lx[s, 0, 2] * y2
            Y[r, 1] -= Lx[s, 1, 0] * y0 + Lx[s, 1, 1] * y1 + Lx[s, 1, 2] * y2
            Y[r, 2] -= Lx[s, 2, 0] * y0 + Lx[s, 2, 1] * y1 + Lx[s, 2, 2] * y2
    for c in range(k):
        y0, y1, y2 = Y[c, 0], Y[c, 1], Y[c, 2]
        for a in range(3):
            Y[c, a] = Dinv[c, a, 0] * y0 + Dinv[c, a, 1] * y1 + Dinv[c, a, 2] * y2
    for c in range(k - 1, -1, -1):  # Lᵀ x = z
        x0, x1, x2 = Y[c, 0], Y[c, 1], Y[c, 2]
        for s in range(Lp[c], Lp[c + 1]):
            r = Li[s]
            z0, z1, z2 = Y[r, 0], Y[r, 1], Y[r, 2]
            x0 -= Lx[s, 0, 0] * z0 + Lx[s, 1, 0] * z1 + Lx[s, 2, 0] * z2
            x1 -= Lx[s, 0, 1] * z0 + Lx[s, 1, 1] * z1 + Lx[s, 2, 1] * z2
            x2 -= Lx[s, 0, 2] * z0 + Lx[s, 1, 2] * z1 + Lx[s, 2, 2] * z2
        Y[c, 0], Y[c, 1], Y[c, 2] = x0, x1, x2
    for i in range(k):
        for a in range(3):
            X[target[i], a] = Y[i, a]


class BlockLDL:
    """``M = P L D Lᵀ Pᵀ`` by ``d × d`` blocks for matrices on ``k`` users whose off-diagonal
    blocks sit on the graph ``pairs`` (m, 2), that of pair ``p`` being ``−(s_e I − Q_e
    Q_eᵀ)`` with ``e = rows[p]`` (``rows``: by default ``p``): the ordering, the pattern and
    the elimination tree are computed once (:meth:`__init__`), each matrix's values by
    :meth:`factor`. ``at``: the rows of the right-hand sides that hold the ``k`` users
    (by default ``0, …, k − 1``)."""

    def __init__(self, k, pairs, rows=None, at=None):
        pairs = np.ascontiguousarray(pairs, dtype=np.int64).reshape(-1, 2)
        rows = np.arange(len(pairs)) if rows is None else np.asarray(rows, dtype=np.int64)
        self.k = k
        self.order = (user_ordering(k, pairs) if pairs.size else np.arange(k, dtype=np.int64))
        self.at = (self.order if at is None
                   else np.ascontiguousarray(np.asarray(at, dtype=np.int64)[self.order]))
        back = np.empty(k, np.int64)
        back[self.order] = np.arange(k)
        self.Ap, self.Ai, self.Ae = block_pattern(k, pairs, rows, back)
        self.parent, self.Lp = elimination_tree(self.Ap, self.Ai)
        self.nnz_blocks = int(self.Lp[-1])

    def factor(self, diag, s, Q):
        """The solve of the matrix with the diagonal blocks ``diag`` (k, d, d) and the
        off-diagonal blocks ``−(s_e I − Q_e Q_eᵀ)`` (``s`` (m,), ``Q`` (m, d, r)):
        ``solve(B)`` returns ``M⁻¹ B[at]`` (k, d); ``solve(B, out)`` writes it to
        ``out[at]`` and returns ``out``. Raises :class:`NotDefiniteError` when ``M`` is not
        positive definite."""
        d = diag.shape[1]
        Li = np.empty(self.nnz_blocks, np.int64)
        Lx = np.empty((self.nnz_blocks, d, d))
        Dinv = np.empty((self.k, d, d))
        bad = block_factor(self.order, self.Ap, self.Ai, self.Ae, self.parent, self.Lp,
                           np.ascontiguousarray(diag, dtype=float),
                           np.ascontiguousarray(s, dtype=float),
                           np.ascontiguousarray(Q, dtype=float), Li, Lx, Dinv)
        if bad >= 0:
            raise NotDefiniteError(f"M is not positive definite: the pivot of user "
                                   f"{self.order[bad]} is not")
        order, at, Lp = self.order, self.at, self.Lp

        def solve(B, out=None):
            B = np.ascontiguousarray(B, dtype=float)
            if out is None:
                out = np.empty((order.size, B.shape[1]))
                block_solve(at, order, Lp, Li, Lx, Dinv, B, out)
            else:
                block_solve(at, at, Lp, Li, Lx, Dinv, B, out)
            return out

        return solve
