"""numba kernels of the flow problem of :mod:`convexfl.certificates`, and of the linear
solvers it shares with SSNAL (``L D Lᵀ`` factors and solves, the V-cycle's Gauss–Seidel
sweeps, conjugate gradients' updates).

For fused edges ``e = (i, j)`` with capacities ``c_e`` and a fixed residual part ``G``:
``R(u) = G + Bᵀu`` (``R_i += u_e``, ``R_j −= u_e``), the feasible set ``‖u_e‖ ≤ c_e`` and the
dual function ``g(z) = ⟨z, G⟩ − ½‖z‖² − Σ_e c_e ‖z_i − z_j‖`` (a lower bound on ``½‖R(u)‖²``
for every ``z``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from . import _kernels  # also the package's numba set-up (NUMBA_CACHE_DIR)


@njit(cache=True)
def flow_residual(G, edges, u):
    """``R = G + Bᵀu``."""
    d = G.shape[1]
    if d == 2:
        return _flow_residual(G, edges, u, 2)
    if d == 3:
        return _flow_residual(G, edges, u, 3)
    return _flow_residual(G, edges, u, d)


@njit(inline="always")
def _flow_residual(G, edges, u, d):
    R = G.copy()
    for e in range(edges.shape[0]):
        i = edges[e, 0]
        j = edges[e, 1]
        for k in range(d):
            R[i, k] += u[e, k]
            R[j, k] -= u[e, k]
    return R


@njit(cache=True)
def moving_flows(G, X, edges, cap, dist, fused):
    """The flows of the edges that are not fused, ``u_e = c_e (x_i − x_j)/‖x_i − x_j‖``, and
    ``R = G + Bᵀu`` over them; one pass, zero flows on fused edges. Returns ``(R, u)``."""
    R = G.copy()
    d = G.shape[1]
    u = np.zeros((edges.shape[0], d))
    for e in range(edges.shape[0]):
        if fused[e]:
            continue
        i = edges[e, 0]
        j = edges[e, 1]
        s = cap[e] / dist[e]
        for k in range(d):
            v = s * (X[i, k] - X[j, k])
            u[e, k] = v
            R[i, k] += v
            R[j, k] -= v
    return R, u


@njit(inline="always")
def _shrink_row(u, e, c, s, d):
    """Scale row ``u_e`` (``d`` entries), of squared norm ``s``, onto the ball of radius
    ``c`` if outside."""
    if s > c * c:
        f = c / np.sqrt(s)
        for k in range(d):
            u[e, k] *= f


@njit(cache=True)
def project_flows(u, cap):
    """Project every row ``u_e`` onto the ball of radius ``c_e`` (in place); return ``u``."""
    d = u.shape[1]
    for e in range(u.shape[0]):
        s = 0.0
        for k in range(d):
            s += u[e, k] * u[e, k]
        _shrink_row(u, e, cap[e], s, d)
    return u


@njit(cache=True)
def flow_dual(z, G, edges, cap):
    """``max_{t ≥ 0} g(t z)`` with ``g(z) = ⟨z, G⟩ − ½‖z‖² − Σ_e c_e ‖z_i − z_j‖``, the dual
    of ``min ½‖G + B u‖²`` over ``‖u_e‖ ≤ c_e``: a lower bound for every ``z``. Along the ray,
    ``g(t z) = t (⟨z, G⟩ − S) − ½ t² ‖z‖²`` with ``S = Σ_e c_e ‖z_i − z_j‖``, maximal at
    ``t = (⟨z, G⟩ − S)/‖z‖²`` (the residual ``z = R`` of a poor flow is far from the best
    scale: at ``t = 1`` the bound is often negative)."""
    zg = 0.0
    zz = 0.0
    for i in range(z.shape[0]):
        for k in range(z.shape[1]):
            zg += z[i, k] * G[i, k]
            zz += z[i, k] * z[i, k]
    dist = _kernels.edge_norms(z, edges)
    s = 0.0
    for e in range(edges.shape[0]):
        s += cap[e] * dist[e]
    if zg <= s or zz == 0.0:
        return 0.0
    return (zg - s) * (zg - s) / (2.0 * zz)


SPLIT_DUAL_RTOL = 1e-6  # an edge with ‖u_e‖ ≥ (1 − this) c_e counts as saturated in split_dual


@njit(cache=True)
def split_dual(u, R, G, edges, cap):
    """:func:`flow_dual` at ``z̄``: the residual ``R = G + Bᵀu`` averaged over the components
    of the edges that ``u`` leaves unsaturated. At the optimum ``z* = R*`` is constant across
    every unsaturated edge (the dual's penalty only acts across saturated ones), so once
    ``u`` has the optimal saturation pattern ``z̄`` is close to ``z*`` and the bound nearly
    tight, while the ray of ``R`` itself (:func:`flow_dual`) often still gives nothing
    (measured: make_moons n = 5000, λ = 0.2, a minimum of 2.6·10⁻⁴; the bound at ``R`` was
    0 for 1000 iterations, at ``z̄`` 2.5·10⁻⁴ after 10). A lower bound for every ``u``."""
    free = np.empty(edges.shape[0], np.bool_)
    for e in range(edges.shape[0]):
        s = 0.0
        for k in range(u.shape[1]):
            s += u[e, k] * u[e, k]
        c = (1.0 - SPLIT_DUAL_RTOL) * cap[e]
        free[e] = s < c * c
    comp, n_comp = masked_components(R.shape[0], edges, free)
    return flow_dual(R - centred_by_component(R, comp, np.bincount(comp, minlength=n_comp)),
                     G, edges, cap)


_MIX = np.uint64(0x9E3779B97F4A7C15)  # 2⁶⁴/φ, odd: multiplication by it permutes the words


@njit(cache=True)
def fingerprint(edges, w):
    """A 64-bit hash of an edge list and its weights (the cache key of the certificates'
    factorisations): each word, the weights' by their bits, xored in and multiplied by an
    odd constant (mod 2⁶⁴), then the bits mixed once (splitmix64's finaliser). One pass:
    0.17 ms at 4·10⁴ edges, against 0.40 ms for Python's ``hash`` of the arrays' bytes."""
    h = np.uint64(edges.shape[0])
    bits = w.view(np.uint64)
    for e in range(edges.shape[0]):
        h = (h ^ np.uint64(edges[e, 0])) * _MIX
        h = (h ^ np.uint64(edges[e, 1])) * _MIX
        h = (h ^ bits[e]) * _MIX
    h = (h ^ (h >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    h = (h ^ (h >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return h ^ (h >> np.uint64(31))


@njit(cache=True)
def sq_norm(R):
    s = 0.0
    for i in range(R.shape[0]):
        for k in range(R.shape[1]):
            s += R[i, k] * R[i, k]
    return s


@njit(cache=True)
def _projected_step(y, Ry, G, edges, cap, step, un, Rn):
    """``un = Π(y − step ⊙ B Ry)`` (per-edge projection onto the capacity balls) and
    ``Rn = G + Bᵀun``, in one pass over the edges."""
    d = G.shape[1]
    Rn[:] = G
    for e in range(edges.shape[0]):
        i = edges[e, 0]
        j = edges[e, 1]
        s = 0.0
        for k in range(d):
            v = y[e, k] - step[e] * (Ry[i, k] - Ry[j, k])
            un[e, k] = v
            s += v * v
        _shrink_row(un, e, cap[e], s, d)
        for k in range(d):
            Rn[i, k] += un[e, k]
            Rn[j, k] -= un[e, k]


@njit(cache=True)
def _extrapolate(out, a, b, beta):
    """``out = a + β (a − b)``."""
    for e in range(a.shape[0]):
        for k in range(a.shape[1]):
            out[e, k] = a[e, k] + beta * (a[e, k] - b[e, k])


@njit(cache=True)
def fista(G, edges, cap, u, step, n_iter, check_every, lower2, rtol, atol, atarget):
    """Accelerated projected gradient on ``½‖R(u)‖²`` from the feasible ``u`` (adaptive
    restart). Every ``check_every`` iterations the dual bound at the current residual is
    updated; stops when the bounds agree to ``rtol`` (``+ atol``) or, with ``atarget ≥ 0``,
    when the question "``min ‖R‖ ≤ atarget``?" is decided, or when the upper bound's rate
    over the last ``check_every`` iterations would need more than ``3 ×`` the iterations left
    to reach ``atarget`` (a candidate that will not certify: the dual bound that would prove
    it often converges far slower than the flows stall). Returns
    ``(u, ½‖R(u)‖², lower2, iterations)``.

    One pass over the edges per iteration: ``R`` is affine, so the momentum point's residual
    is ``R(y) = R(u_new) + β (R(u_new) − R(u))`` from the two residuals already computed."""
    u = u.copy()
    y = u.copy()
    un = np.empty_like(u)
    R = flow_residual(G, edges, u)
    Ry = R.copy()
    Rn = np.empty_like(R)
    h_u = 0.5 * sq_norm(R)
    up_prev = -1.0
    t = 1.0
    it = 0
    for it in range(1, n_iter + 1):
        _projected_step(y, Ry, G, edges, cap, step, un, Rn)
        h_new = 0.5 * sq_norm(Rn)
        if h_new > h_u:  # adaptive restart
            t = 1.0
            y[:] = u
            Ry[:] = R
        else:
            t_new = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t * t))
            beta = (t - 1.0) / t_new
            _extrapolate(y, un, u, beta)
            _extrapolate(Ry, Rn, R, beta)
            u, un = un, u
            R, Rn = Rn, R
            t = t_new
            h_u = h_new
        if it % check_every == 0 or it == n_iter:
            lower2 = max(lower2, flow_dual(R, G, edges, cap), split_dual(u, R, G, edges, cap))
            up = np.sqrt(2.0 * h_u)
            low = np.sqrt(2.0 * max(lower2, 0.0))
            if up - low <= rtol * up + atol:
                break
            if atarget >= 0.0 and (up <= atarget or lower2 > 0.5 * atarget * atarget):
                break
            if atarget > 0.0 and up_prev > 0.0:
                if up >= up_prev or (check_every * np.log(atarget / up) / np.log(up / up_prev)
                                     > 3.0 * (n_iter - it)):
                    break
            up_prev = up
    return u, h_u, lower2, it


@njit(cache=True)
def anderson_record(u, Tu, last_t, last_f, dT, dF, slot, k, gram, rhs):
    """:class:`convexfl.certificates._Anderson`'s record of a step, over the flattened
    flows: with ``f = T(u) − u``, the new differences ``ΔT[slot] = T(u) − t_last`` and
    ``ΔF[slot] = f − f_last`` (when ``slot ≥ 0``), the Gram row ``gram[slot, j] =
    ⟨ΔF_j, ΔF_slot⟩`` and the right-hand side ``rhs_j = ⟨ΔF_j, f⟩`` (``j < k``); then
    ``t_last, f_last = T(u), f``."""
    for i in range(u.size):
        t = Tu[i]
        f = t - u[i]
        if slot >= 0:
            dT[slot, i] = t - last_t[i]
            dF[slot, i] = f - last_f[i]
        last_t[i] = t
        last_f[i] = f
    for j in range(k):
        gram[slot, j] = gram[j, slot] = _dot(dF[j], dF[slot])
        rhs[j] = _dot(dF[j], last_f)


@njit(cache=True, fastmath=True)
def _dot(a, b):
    """``⟨a, b⟩`` (vectorised: the sum's order is the compiler's)."""
    s = 0.0
    for i in range(a.size):
        s += a[i] * b[i]
    return s


@njit(cache=True)
def anderson_mix(t, gamma, dT, cap):
    """The projected mixture ``v = Π(t − Σ_j γ_j ΔT_j)`` (``t``, ``ΔT_j``: flattened flows,
    each row of ``v`` onto its capacity ball), in one pass."""
    d = t.size // cap.size
    v = np.empty((cap.size, d))
    for e in range(cap.size):
        s = 0.0
        for k in range(d):
            at = e * d + k
            x = t[at]
            for j in range(gamma.size):
                x -= gamma[j] * dT[j, at]
            v[e, k] = x
            s += x * x
        _shrink_row(v, e, cap[e], s, d)
    return v


@njit(cache=True)
def potential_step(u, phi, edges, cap):
    """One alternating-projection step: ``v = Π(u + c_e(φ_i − φ_j))``, the potential flow of
    ``φ`` added and each row projected onto its capacity ball, in one pass. (Its residual
    is a second pass, :func:`flow_residual`: scattered into the nodes in the same loop, the
    whole step measured 2× slower.)"""
    d = u.shape[1]
    if d == 2:
        return _potential_step(u, phi, edges, cap, 2)
    if d == 3:
        return _potential_step(u, phi, edges, cap, 3)
    return _potential_step(u, phi, edges, cap, d)


@njit(inline="always")
def _potential_step(u, phi, edges, cap, d):
    v = np.empty_like(u)
    for e in range(edges.shape[0]):
        i = edges[e, 0]
        j = edges[e, 1]
        s = 0.0
        for k in range(d):
            x = u[e, k] + cap[e] * (phi[i, k] - phi[j, k])
            v[e, k] = x
            s += x * x
        _shrink_row(v, e, cap[e], s, d)
    return v


@njit(cache=True)
def smooth_flows(R, u, edges, cap, n_sweeps, rtol=0.0):
    """``n_sweeps`` passes of exact block coordinate descent on ``½‖R‖²``, ``R = G + Bᵀu``, over
    the edges in their order, in place: edge ``e = (i, j)`` takes
    ``u_e ← Π(u_e + (R_j − R_i)/2)``, the minimiser of ``‖R_i‖² + ‖R_j‖²`` over its own ball
    ``‖u_e‖ ≤ c_e`` with the other flows fixed, and ``R_i``, ``R_j`` follow. No pass increases
    ``‖R‖``; ``R`` is updated incrementally, so a caller that certifies recomputes it from
    ``u``. Each pass goes over the edges with an end whose residual is above
    ``rtol · ‖R‖/√n`` at its start (the others could move only by as much; with
    ``rtol = 0``, over those with any residual at an end: an edge with none moves no flow)."""
    d = R.shape[1]
    if d == 2:
        _smooth_flows(R, u, edges, cap, n_sweeps, rtol, 2)
    elif d == 3:
        _smooth_flows(R, u, edges, cap, n_sweeps, rtol, 3)
    else:
        _smooth_flows(R, u, edges, cap, n_sweeps, rtol, d)


@njit(inline="always")
def _smooth_flows(R, u, edges, cap, n_sweeps, rtol, d):
    n = R.shape[0]
    node_sq = np.empty(n)
    at = np.empty(edges.shape[0], np.int64)
    for _ in range(n_sweeps):
        total = 0.0
        for i in range(n):
            s = 0.0
            for k in range(d):
                s += R[i, k] * R[i, k]
            node_sq[i] = s
            total += s
        floor = rtol * rtol * total / max(n, 1)
        m = 0
        for e in range(edges.shape[0]):
            if node_sq[edges[e, 0]] > floor or node_sq[edges[e, 1]] > floor:
                at[m] = e
                m += 1
        for t in range(m):
            e = at[t]
            i = edges[e, 0]
            j = edges[e, 1]
            s = 0.0
            for k in range(d):
                x = u[e, k] + 0.5 * (R[j, k] - R[i, k])
                s += x * x
            f = 1.0
            if s > cap[e] * cap[e]:
                f = cap[e] / np.sqrt(s)
            for k in range(d):
                x = f * (u[e, k] + 0.5 * (R[j, k] - R[i, k]))
                delta = x - u[e, k]
                u[e, k] = x
                R[i, k] += delta
                R[j, k] -= delta


@njit(cache=True)
def put_rows(out, at, rows):
    """``out[at[r]] = rows[r]`` for every ``r`` (numpy's fancy row assignment is ~30× slower
    for a few columns)."""
    for r in range(at.shape[0]):
        for k in range(rows.shape[1]):
            out[at[r], k] = rows[r, k]


@njit(cache=True)
def sums_by_label(V, labels, k):
    """``S_c = Σ_{i : labels_i = c} V_i`` for ``c = 0..k−1``, shape (k, d) (what
    ``np.add.at`` does, in one pass)."""
    S = np.zeros((k, V.shape[1]))
    for i in range(V.shape[0]):
        for j in range(V.shape[1]):
            S[labels[i], j] += V[i, j]
    return S


@njit(cache=True)
def centred_by_component(R, comp, counts):
    """``R − R̄`` with ``R̄`` the mean of ``R`` over each component."""
    means = sums_by_label(R, comp, counts.size)
    out = np.empty_like(R)
    for i in range(R.shape[0]):
        for k in range(R.shape[1]):
            out[i, k] = R[i, k] - means[comp[i], k] / counts[comp[i]]
    return out


@njit(cache=True)
def edge_flows(phi, edges, cap):
    """``u_e = c_e (φ_i − φ_j)``."""
    u = np.empty((edges.shape[0], phi.shape[1]))
    for e in range(edges.shape[0]):
        for k in range(phi.shape[1]):
            u[e, k] = cap[e] * (phi[edges[e, 0], k] - phi[edges[e, 1], k])
    return u


@njit(cache=True)
def node_gaps_sq(G, edges, cap):
    """``Σ_i max(0, ‖G_i‖ − Σ_{e ∋ i} c_e)²``: a lower bound on ``‖G + Bᵀu‖²`` for every
    feasible flow ``u`` (``‖R_i‖ ≥ ‖G_i‖ − Σ_{e ∋ i} ‖u_e‖``)."""
    node_cap = np.zeros(G.shape[0])
    for e in range(edges.shape[0]):
        node_cap[edges[e, 0]] += cap[e]
        node_cap[edges[e, 1]] += cap[e]
    total = 0.0
    for i in range(G.shape[0]):
        s = 0.0
        for k in range(G.shape[1]):
            s += G[i, k] * G[i, k]
        gap = np.sqrt(s) - node_cap[i]
        if gap > 0.0:
            total += gap * gap
    return total


@njit(cache=True)
def _root(parent, i):
    while parent[i] != i:
        parent[i] = parent[parent[i]]  # path halving
        i = parent[i]
    return i


@njit(cache=True)
def laplacian_rows(n, edges, w, keep, shift, lower):
    """The CSR arrays ``(indptr, indices, data)`` of ``L_w[keep][:, keep] + diag(shift)``
    on the kept nodes, renumbered in increasing order: the weighted degrees (every edge
    counts, also those to dropped nodes) plus ``shift`` on the diagonal, ``−w_e`` at the
    edges between kept nodes; with ``lower``, the entries on and below the diagonal only.
    Each row lists its entries in the order of ``edges``, the diagonal last."""
    local = np.full(n, -1, np.int64)
    size = 0
    for u in range(n):
        if keep[u]:
            local[u] = size
            size += 1
    first = np.zeros(n)  # the degrees by the edges' first ends, then their second ends
    second = np.zeros(n)  # (summed as numpy's bincount: the same rounding as before)
    count = np.ones(size, np.int64)  # the diagonal, then each row's edges
    for e in range(edges.shape[0]):
        i, j = edges[e, 0], edges[e, 1]
        first[i] += w[e]
        second[j] += w[e]
        a, b = local[i], local[j]
        if a >= 0 and b >= 0:
            if not lower or b <= a:
                count[a] += 1
            if not lower or a <= b:
                count[b] += 1
    indptr = np.zeros(size + 1, np.int64)
    for r in range(size):
        indptr[r + 1] = indptr[r] + count[r]
    fill = indptr[:size].copy()
    indices = np.empty(indptr[size], np.int64)
    data = np.empty(indptr[size])
    for e in range(edges.shape[0]):
        a, b = local[edges[e, 0]], local[edges[e, 1]]
        if a >= 0 and b >= 0:
            if not lower or b <= a:
                indices[fill[a]] = b
                data[fill[a]] = -w[e]
                fill[a] += 1
            if not lower or a <= b:
                indices[fill[b]] = a
                data[fill[b]] = -w[e]
                fill[b] += 1
    for u in range(n):
        r = local[u]
        if r >= 0:
            indices[fill[r]] = r
            data[fill[r]] = (first[u] + second[u]) + shift[r]
    return indptr, indices, data


@njit(cache=True)
def masked_components(n, edges, mask):
    """Connected components of the graph on ``n`` nodes with the edges where ``mask`` holds
    (union–find): labels ``0..K−1`` numbered by each component's smallest node (the order of
    :func:`scipy.sparse.csgraph.connected_components`), and ``K``."""
    parent = np.arange(n)
    for e in range(edges.shape[0]):
        if mask[e]:
            a = _root(parent, edges[e, 0])
            b = _root(parent, edges[e, 1])
            if a != b:
                parent[max(a, b)] = min(a, b)
    labels = np.empty(n, np.int64)
    k = 0
    for i in range(n):
        r = _root(parent, i)
        if r == i:
            labels[i] = k
            k += 1
        else:
            labels[i] = labels[r]  # r < i: labelled already
    return labels, k


@njit(cache=True)
def clique_components(comp, counts, edges, w):
    """For each component (``edges`` all lie inside components): whether its edges form a
    complete graph with one weight (``K(K−1)/2`` edges, ``min w = max w``, ``K > 1``; ``edges``
    without duplicates, as a graph's always are), and its largest weight. Returns
    ``(clique, w_max)``."""
    k = counts.size
    n_edges = np.zeros(k, np.int64)
    wmin = np.full(k, np.inf)
    wmax = np.full(k, -np.inf)
    for e in range(edges.shape[0]):
        c = comp[edges[e, 0]]
        n_edges[c] += 1
        wmin[c] = min(wmin[c], w[e])
        wmax[c] = max(wmax[c], w[e])
    out = np.empty(k, np.bool_)
    for c in range(k):
        out[c] = (counts[c] > 1 and n_edges[c] == counts[c] * (counts[c] - 1) // 2
                  and wmin[c] == wmax[c])
    return out, wmax


@njit(cache=True)
def ordered_laplacian(edges, w, position, size):
    """The upper triangle (CSC ``(Ap, Ai, Ax)``, the diagonal first in each column, the
    other rows unsorted) of the grounded Laplacian ``L_w[keep][:, keep]`` in elimination
    order: node ``i`` is row and column ``position[i]`` (``−1``: not kept, grounded or
    dropped; its edges still add to their other end's degree), ``size`` kept nodes; one
    column's repeated rows are summed by :func:`ldl_factor`."""
    count = np.ones(size + 1, np.int64)
    count[0] = 0
    degree = np.zeros(size)
    for e in range(edges.shape[0]):
        a, b = position[edges[e, 0]], position[edges[e, 1]]
        if a >= 0:
            degree[a] += w[e]
        if b >= 0:
            degree[b] += w[e]
        if a >= 0 and b >= 0:
            count[max(a, b) + 1] += 1
    Ap = np.cumsum(count)
    Ai = np.empty(Ap[size], np.int64)
    Ax = np.empty(Ap[size])
    for k in range(size):
        Ai[Ap[k]] = k
        Ax[Ap[k]] = degree[k]
    fill = Ap[:size] + 1
    for e in range(edges.shape[0]):
        a, b = position[edges[e, 0]], position[edges[e, 1]]
        if a >= 0 and b >= 0:
            c = max(a, b)
            Ai[fill[c]] = min(a, b)
            Ax[fill[c]] = -w[e]
            fill[c] += 1
    return Ap, Ai, Ax


@njit(cache=True)
def elimination_tree(Ap, Ai):
    """QDLDL's elimination tree of a symmetric matrix given by its upper triangle (CSC
    ``(Ap, Ai)``, the diagonal stored or not): ``(parent, Lp)``, ``parent[i] = −1`` at a
    root and ``Lp`` the column pointers of its ``L`` (strictly lower)."""
    n = Ap.size - 1
    parent = np.full(n, -1, np.int64)
    mark = np.full(n, -1, np.int64)
    count = np.zeros(n, np.int64)
    for j in range(n):
        mark[j] = j
        for p in range(Ap[j], Ap[j + 1]):
            i = Ai[p]
            while i != j and mark[i] != j:
                if parent[i] == -1:
                    parent[i] = j
                count[i] += 1
                mark[i] = j
                i = parent[i]
    Lp = np.zeros(n + 1, np.int64)
    for j in range(n):
        Lp[j + 1] = Lp[j] + count[j]
    return parent, Lp


@njit(inline="always")
def tree_path(i, k, parent, seen, stack, reach, top):
    """Append to ``reach[top:]`` the path from ``i`` up the elimination tree ``parent``
    that row ``k``'s factorisation has not seen yet (it stops at a node seen or ≥ ``k``),
    top down, after the earlier paths, marking it ``seen``; returns the new ``top``. Read
    bottom up, ``reach`` lists each column after its descendants."""
    depth = 0
    while i != -1 and i < k and not seen[i]:
        seen[i] = True
        stack[depth] = i
        depth += 1
        i = parent[i]
    while depth > 0:
        depth -= 1
        reach[top] = stack[depth]
        top += 1
    return top


@njit(cache=True)
def ldl_factor(Ap, Ai, Ax):
    """``M = L D Lᵀ`` of a symmetric positive definite matrix given by its upper triangle
    (CSC, diagonal included, repeated entries summed), in its own order (no pivoting): the
    elimination tree, then each row of ``L`` by the tree's paths (QDLDL's algorithm, Stellato
    et al., OSQP). Returns ``(Lp, Li, Lx, Dinv)``: ``L`` strictly lower (CSC, unit diagonal
    not stored, rows increasing) and ``1/D``."""
    n = Ap.size - 1
    parent, Lp = elimination_tree(Ap, Ai)
    Li = np.empty(Lp[n], np.int32)
    Lx = np.empty(Lp[n])
    Dinv = np.empty(n)
    y = np.zeros(n)
    seen = np.zeros(n, np.bool_)
    stack = np.empty(n, np.int64)
    reach = np.empty(n, np.int64)
    nxt = Lp[:n].copy()
    for k in range(n):
        d = 0.0
        top = 0
        for p in range(Ap[k], Ap[k + 1]):
            i = Ai[p]
            if i == k:
                d += Ax[p]
                continue
            y[i] += Ax[p]
            top = tree_path(i, k, parent, seen, stack, reach, top)
        for t in range(top - 1, -1, -1):  # bottom up: each column after its descendants
            c = reach[t]
            yc = y[c]
            for q in range(Lp[c], nxt[c]):
                y[Li[q]] -= Lx[q] * yc
            lkc = yc * Dinv[c]
            Li[nxt[c]] = k
            Lx[nxt[c]] = lkc
            nxt[c] += 1
            d -= yc * lkc
            y[c] = 0.0
            seen[c] = False
        Dinv[k] = 1.0 / d
    return Lp, Li, Lx, Dinv


@njit(cache=True)
def ldl_solve_ordered(Lp, Li, Lx, Dinv, order, B):
    """``X = M⁻¹ B`` for a block ``B`` (n, m) from :func:`ldl_factor`'s factor of ``M``
    in elimination order: row ``order[k]`` of ``B`` is that order's ``k``-th. A forward pass
    down ``L``'s columns and a backward pass of dot products, all columns of ``B`` at once
    for ``m = 2`` and ``3`` (compiled with ``m`` a constant: each entry of ``L`` is read
    once for all columns; make_moons n = 5000, the whole graph's factor, 1.6·10⁵ entries:
    0.83 → 0.55 ms for two columns, 1.28 → 0.67 ms for three), column by column otherwise
    (one pass for ``m`` columns not known when compiled was measured 2× slower: the row's
    values are reloaded after every store)."""
    m = B.shape[1]
    if m == 2:
        return _ldl_solve_block(Lp, Li, Lx, Dinv, order, B, 2)
    if m == 3:
        return _ldl_solve_block(Lp, Li, Lx, Dinv, order, B, 3)
    X = np.empty(B.shape)
    for c in range(m):
        X[:, c:c + 1] = _ldl_solve_block(Lp, Li, Lx, Dinv, order, B[:, c:c + 1], 1)
    return X


@njit(inline="always")
def _ldl_solve_block(Lp, Li, Lx, Dinv, order, B, m):
    """:func:`ldl_solve_ordered` of the ``m`` columns of ``B`` in one pass."""
    n = B.shape[0]
    y = np.empty((n, m))
    for k in range(n):
        for c in range(m):
            y[k, c] = B[order[k], c]
    for j in range(n):
        for q in range(Lp[j], Lp[j + 1]):
            r = Li[q]
            for c in range(m):
                y[r, c] -= Lx[q] * y[j, c]
    for j in range(n - 1, -1, -1):
        for c in range(m):
            y[j, c] *= Dinv[j]
        for q in range(Lp[j], Lp[j + 1]):
            r = Li[q]
            for c in range(m):
                y[j, c] -= Lx[q] * y[r, c]
    X = np.empty((n, m))
    for k in range(n):
        for c in range(m):
            X[order[k], c] = y[k, c]
    return X


@njit(cache=True)
def ldl_solve(Lp, Li, Lx, D, perm, b):
    """``x = M⁻¹ b`` from ``M[perm][:, perm]``'s ``L D Lᵀ`` (``L`` unit lower triangular in
    CSC, ``(Lp, Li, Lx)``, its diagonal stored or not): a forward pass down ``L``'s columns,
    the diagonal, and a backward pass of dot products with them (``Lᵀ``'s rows), so ``L`` is
    read twice and ``U`` never."""
    n = b.size
    y = np.empty(n)
    for i in range(n):
        y[perm[i]] = b[i]
    for j in range(n):
        yj = y[j]
        if yj != 0.0:
            for q in range(Lp[j], Lp[j + 1]):
                r = Li[q]
                if r > j:
                    y[r] -= Lx[q] * yj
    for j in range(n - 1, -1, -1):
        s = y[j] / D[j]
        for q in range(Lp[j], Lp[j + 1]):
            r = Li[q]
            if r > j:
                s -= Lx[q] * y[r]
        y[j] = s
    out = np.empty(n)
    for i in range(n):
        out[i] = y[perm[i]]
    return out


@njit(cache=True)
def ldl_solve_rows(Lp, Li, Lx, D, perm, B):
    """:func:`ldl_solve` for a block of right-hand sides ``B`` (n, m), row-major: each entry
    of ``L`` updates a whole row of ``m`` values, read contiguously."""
    n, m = B.shape
    Y = np.empty((n, m))
    for i in range(n):
        Y[perm[i]] = B[i]
    for j in range(n):
        for q in range(Lp[j], Lp[j + 1]):
            r = Li[q]
            if r > j:
                a = Lx[q]
                for c in range(m):
                    Y[r, c] -= a * Y[j, c]
    for j in range(n - 1, -1, -1):
        inv = 1.0 / D[j]
        for c in range(m):
            Y[j, c] *= inv
        for q in range(Lp[j], Lp[j + 1]):
            r = Li[q]
            if r > j:
                a = Lx[q]
                for c in range(m):
                    Y[j, c] -= a * Y[r, c]
    out = np.empty((n, m))
    for i in range(n):
        out[i] = Y[perm[i]]
    return out


@njit(cache=True)
def gauss_seidel(indptr, indices, data, diag, X, B, forward):
    """One Gauss–Seidel sweep on ``A X = B`` for every column of ``X`` (in place), ``A`` in
    CSR with its diagonal ``diag``: row by row, forward or backward, ``x_i ← x_i + (b_i −
    Σ_j a_ij x_j)/a_ii``, which is ``(b_i − Σ_{j≠i} a_ij x_j)/a_ii`` (rows with a zero
    diagonal left as they are), pyamg's ``gauss_seidel`` for one column. The matrix is read
    once for all columns (for 2 and 3 columns compiled with the count a constant), and its
    diagonal is not looked for in the row: a λ = 3 block of SSNAL at kNN10 N = 5·10⁴
    (2·10⁴ users, 2.6·10⁵ non-zeros, three columns) 1.33 → 0.87 ms a sweep, one process."""
    m = X.shape[1]
    if m == 2:
        _gauss_seidel(indptr, indices, data, diag, X, B, forward, 2)
    elif m == 3:
        _gauss_seidel(indptr, indices, data, diag, X, B, forward, 3)
    else:
        _gauss_seidel(indptr, indices, data, diag, X, B, forward, m)


@njit(inline="always")
def _gauss_seidel(indptr, indices, data, diag, X, B, forward, m):
    n = X.shape[0]
    rsum = np.empty(m)
    for t in range(n):
        i = t if forward else n - 1 - t
        for c in range(m):
            rsum[c] = B[i, c]
        for q in range(indptr[i], indptr[i + 1]):
            j = indices[q]
            a = data[q]
            for c in range(m):
                rsum[c] -= a * X[j, c]
        if diag[i] != 0.0:
            for c in range(m):
                X[i, c] += rsum[c] / diag[i]


@njit(cache=True)
def product_pattern(n_cols, Ap, Aj, Bp, Bj):
    """The pattern of the sparse product ``A B`` (CSR, ``n_cols`` columns): ``(Cp, Cj)``,
    each row's columns sorted, every structural entry kept (scipy's product drops the sums
    that come out exactly zero, so its pattern depends on the values)."""
    n_rows = Ap.size - 1
    mark = np.full(n_cols, -1, np.int64)
    Cp = np.zeros(n_rows + 1, np.int32)
    for i in range(n_rows):
        count = 0
        for p in range(Ap[i], Ap[i + 1]):
            k = Aj[p]
            for q in range(Bp[k], Bp[k + 1]):
                if mark[Bj[q]] != i:
                    mark[Bj[q]] = i
                    count += 1
        Cp[i + 1] = Cp[i] + count
    Cj = np.empty(Cp[n_rows], np.int32)
    mark[:] = -1
    for i in range(n_rows):
        t = Cp[i]
        for p in range(Ap[i], Ap[i + 1]):
            k = Aj[p]
            for q in range(Bp[k], Bp[k + 1]):
                if mark[Bj[q]] != i:
                    mark[Bj[q]] = i
                    Cj[t] = Bj[q]
                    t += 1
        Cj[Cp[i]:Cp[i + 1]].sort()
    return Cp, Cj


@njit(cache=True)
def product_values(n_cols, Ap, Aj, Ax, Bp, Bj, Bx, Cp, Cj):
    """The values of ``A B`` on its pattern ``(Cp, Cj)`` from :func:`product_pattern`
    (Gustavson's row-by-row product, a dense row of ``n_cols`` as the accumulator)."""
    w = np.zeros(n_cols)
    Cx = np.empty(Cj.size)
    for i in range(Cp.size - 1):
        for p in range(Ap[i], Ap[i + 1]):
            a = Ax[p]
            k = Aj[p]
            for q in range(Bp[k], Bp[k + 1]):
                w[Bj[q]] += a * Bx[q]
        for t in range(Cp[i], Cp[i + 1]):
            Cx[t] = w[Cj[t]]
            w[Cj[t]] = 0.0
    return Cx


@njit(cache=True)
def lower_ends(indptr, indices):
    """For a CSR matrix with sorted indices, the end of each row's entries left of its
    diagonal: row ``i``'s columns ``j < i`` are ``indices[indptr[i]:lower_end[i]]``."""
    n = indptr.size - 1
    out = np.empty(n, np.int64)
    for i in range(n):
        q = indptr[i]
        while q < indptr[i + 1] and indices[q] < i:
            q += 1
        out[i] = q
    return out


@njit(cache=True)
def gauss_seidel_from_zero(indptr, indices, data, lower_end, diag, X, B, R):
    """One forward Gauss–Seidel sweep on ``A X = B`` from ``X = 0`` (:func:`gauss_seidel`;
    ``X`` is overwritten) and the residual ``R = B − A X`` after it, for a *symmetric*
    ``A`` (CSR, sorted indices, ``lower_end`` from :func:`lower_ends`), reading only its
    strict lower triangle, once: from zero the sweep needs ``x_i = (b_i − Σ_{j<i} a_ij
    x_j)/a_ii`` alone, and then row ``i``'s residual is ``−Σ_{j>i} a_ij x_j``, which row
    ``j`` adds as it passes (``a_ij = a_ji``) while its entries are in the cache. A V-cycle's
    pre-smoothing and residual (:func:`~convexfl.certificates.vcycle`): a λ = 3 block of
    SSNAL at kNN10 N = 5·10⁴ (2·10⁴ users, 2.6·10⁵ non-zeros, three columns) 1.44 ms for
    the sweep and 1.27 ms for scipy's product → 1.21 ms, one process."""
    m = X.shape[1]
    if m == 2:
        _gauss_seidel_from_zero(indptr, indices, data, lower_end, diag, X, B, R, 2)
    elif m == 3:
        _gauss_seidel_from_zero(indptr, indices, data, lower_end, diag, X, B, R, 3)
    else:
        _gauss_seidel_from_zero(indptr, indices, data, lower_end, diag, X, B, R, m)


@njit(inline="always")
def _gauss_seidel_from_zero(indptr, indices, data, lower_end, diag, X, B, R, m):
    n = X.shape[0]
    rsum = np.empty(m)
    for i in range(n):
        for c in range(m):
            rsum[c] = B[i, c]
        for q in range(indptr[i], lower_end[i]):
            j = indices[q]
            a = data[q]
            for c in range(m):
                rsum[c] -= a * X[j, c]
        inv = 1.0 / diag[i] if diag[i] != 0.0 else 0.0
        for c in range(m):
            X[i, c] = rsum[c] * inv
            R[i, c] = rsum[c] - diag[i] * X[i, c]
        for q in range(indptr[i], lower_end[i]):
            j = indices[q]
            a = data[q]
            for c in range(m):
                R[j, c] -= a * X[i, c]


@njit(cache=True)
def flush_sq(V):
    """Zero the entries below 1e-150 in magnitude (their products are subnormal, ~100×
    slower on x86) and return ``‖V‖²`` of the flushed array."""
    flat = V.reshape(-1)
    acc = 0.0
    for k in range(flat.size):
        v = flat[k]
        if abs(v) < 1e-150:
            flat[k] = 0.0
        else:
            acc += v * v
    return acc


@njit(cache=True)
def flush_dot(U, V):
    """``⟨U, V⟩`` after zeroing the entries of both below 1e-150 in magnitude."""
    fu = U.reshape(-1)
    fv = V.reshape(-1)
    acc = 0.0
    for k in range(fu.size):
        a = fu[k]
        b = fv[k]
        if abs(a) < 1e-150:
            fu[k] = 0.0
            continue
        if abs(b) < 1e-150:
            fv[k] = 0.0
            continue
        acc += a * b
    return acc


@njit(cache=True)
def cg_update(X, R, P, AP, a):
    """``X += a P``, ``R −= a AP`` (flushing subnormal-range entries of R); returns ‖R‖²."""
    fx = X.reshape(-1)
    fr = R.reshape(-1)
    fp = P.reshape(-1)
    fa = AP.reshape(-1)
    acc = 0.0
    for k in range(fx.size):
        fx[k] += a * fp[k]
        r = fr[k] - a * fa[k]
        if abs(r) < 1e-150:
            r = 0.0
        fr[k] = r
        acc += r * r
    return acc


@njit(cache=True)
def cg_direction(P, Z, beta):
    """``P = Z + beta P`` (flushed)."""
    fp = P.reshape(-1)
    fz = Z.reshape(-1)
    for k in range(fp.size):
        v = fz[k] + beta * fp[k]
        if abs(v) < 1e-150:
            v = 0.0
        fp[k] = v
