r"""Network-lasso ADMM for convex clustering in PyTorch, on the CPU or a CUDA device.

.. math::

    \min_X \sum_i \frac{c_i}{2}\|x_i - a_i\|^2 + λ \sum_{(i,j)∈E} w_{ij}\|x_i - x_j\| ,

λ in the canonical (SON) convention. The iteration is :mod:`convexfl.solvers.admm`'s
(edge copies ``z_ie``, ``z_je``, scaled duals ``u_ie``, ``u_je``, over-relaxation ``α``,
residual-balancing ρ, the same default ρ and the same outer loop,
:func:`convexfl.solvers.admm.iterate`), vectorised over users and edges: with
``S_i = Σ_{e∋i} (z_ie − u_ie)`` (``index_add_``) the per-user proximal step of the quadratic
loss is closed form,

.. math::

    x_i = \frac{c_i a_i + ρ S_i}{c_i + ρ \deg_i},

then per edge ``a = x̂_i + u_ie``, ``b = x̂_j + u_je`` with ``x̂ = α x + (1 − α) z``
(``index_select``), ``θ = max(1 − λ w_e / (ρ‖a − b‖), ½)``, ``z_ie = θ a + (1 − θ) b``,
``z_je = (1 − θ) a + θ b``, and ``u ← u + x̂ − z``.

The iterates live on ``device``. Every ``check_every`` iterations a few residuals (scalars)
come back to the host; when they are small the exactly fused edges (``θ = ½``), ``X`` and
the flows ``u_e = ρ (u_ie − u_je)/2`` are copied to numpy and handed to the certified
stopping test every fast solver shares (:class:`~convexfl.solvers._common.Run`): the answer,
its polish and its certificate (:func:`convexfl.certificates.kkt_residual`) are computed in
float64 on the host whatever ``dtype`` the iterations use.

``dtype=torch.float32`` halves the memory traffic (and is much faster on most GPUs), but its
rounding (``≈ 6e-8`` relative) limits how far the ADMM residuals can fall. The certificate
does not depend on it (the polished candidate is float64). When the residuals stop
improving for ``STALL_ITER`` iterations, the last candidate gets the final polish, and if
that does not certify, the iterations go on in float64 from where they are (mixed
precision, ``refine=True``, the default); with ``refine=False`` the run stops there with
``converged=False`` and says so.

Only the quadratic loss is supported; other losses raise
:class:`~convexfl.solvers.IncompatibleLossError` (use ``method="admm"``). Needs the optional
``torch`` extra.
"""

from __future__ import annotations

import contextlib

import numpy as np

from ..certificates import normalised
from ._common import COARSEN_MIN, Run, check_bool, son_dispatch
from .admm import check_options, iterate, reduced_merges, solve_admm, start_point
from .ssnal import check_loss

try:
    import torch
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise ImportError("method='torch' needs PyTorch, the optional 'torch' extra of convexfl; "
                      "install it with: pip install 'convexfl[torch]'") from exc

from .._devices import resolve_device

__all__ = ["solve_torch", "STALL_ITER"]

STALL_ITER = 300  # reduced precision: float64 (or stop) after this many iterations without progress
DTYPES = {"float64": torch.float64, "float32": torch.float32}


def solve_torch(prob, *, device="cpu", dtype=None, refine: bool = True, tol: float = 1e-6,
                max_iter: int = 20000, rho: float | None = None, alpha: float = 1.6,
                adaptive_rho: bool = True, check_every: int = 10, polish: bool = True,
                X0=None, flows0=None, warm_start=None):
    """Solve quadratic-loss (SON) (convex clustering) by network-lasso ADMM in PyTorch.

    Parameters
    ----------
    prob : SumOfNorms or Reduced with a ``Quadratic`` loss
    device : {"cpu", "cuda", "cuda:<k>", "auto"} or torch.device
        Where the iterates live (:func:`convexfl._devices.resolve_device`).
    dtype : {None, "float64", "float32"} or torch.dtype
        Precision of the iterations (default float64). The certificate is float64 always.
    refine : bool
        In reduced precision, when the residuals stall (``STALL_ITER`` iterations without a
        10 % improvement), the last candidate gets the final polish; if that does not
        certify, the iterations go on in float64 from where they are (default), within
        ``max_iter`` in all (``history["float64_from"]``: the iteration of the switch).
        False: stop there, with ``converged=False`` unless the polish certified.
    tol, max_iter : float, int
        The certified KKT target and the limit on ADMM iterations, as for every
        method (:mod:`convexfl.solvers`).
    rho, alpha, adaptive_rho, check_every
        As for :func:`convexfl.solvers.admm.solve_admm` (its defaults, and its residual
        balancing ``mu`` and ``tau_incr``); ``check_every`` iterations run on the device
        between looks at the residuals.
    polish : bool or "small"
        Refine candidates by Newton on the reduced problem before certifying (``"small"``:
        only reduced problems with ``K·d ≤ 300``; see :func:`~convexfl.solvers.admm.solve_admm`).
    X0, flows0, warm_start
        Warm start: models (N, d), edge flows (E, d), or a previous ``Solution``.

    Returns
    -------
    Solution
        ``method="torch"``; ``history`` as for ``"admm"``, plus ``device`` and ``dtype``.
    """
    dev = resolve_device(device)
    dt = _dtype(dtype)
    refine = check_bool(refine, "refine")
    defaults = solve_admm.__kwdefaults__
    rho, alpha, adaptive_rho, mu, tau_incr, check_every = check_options(
        rho, alpha, adaptive_rho, defaults["mu"], defaults["tau_incr"], check_every)
    opts = dict(device=dev, dtype=dt, refine=refine, tol=tol, max_iter=max_iter, rho=rho,
                alpha=alpha, adaptive_rho=adaptive_rho, mu=mu, tau_incr=tau_incr,
                check_every=check_every, polish=polish, X0=X0, flows0=flows0, warm_start=warm_start)
    with _cpu_threads(dev):
        return son_dispatch(prob, "torch", _solve_son, opts)


@contextlib.contextmanager
def _cpu_threads(device):
    """On the CPU, torch's intra-op threads limited to :data:`convexfl.solvers.BLAS_THREADS`
    (as BLAS is inside ``solve``) for the solve, restored afterwards. Measured on this
    2-core machine with another process busy, kNN10 N = 1000 (6220 edges): 0.9 ms per
    iteration with one thread, 9.5 ms with torch's default two."""
    from . import BLAS_THREADS

    before = torch.get_num_threads()
    if device.type == "cpu" and BLAS_THREADS is not None:
        torch.set_num_threads(BLAS_THREADS)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _dtype(dtype):
    if dtype is None:
        return torch.float64
    if isinstance(dtype, torch.dtype) and dtype in DTYPES.values():
        return dtype
    if isinstance(dtype, str) and dtype in DTYPES:
        return DTYPES[dtype]
    raise ValueError(f"dtype: expected None, 'float64', 'float32' or the torch dtype, "
                     f"got {dtype!r}")


def _solve_son(prob, *, device, dtype, refine, tol, max_iter, rho, alpha, adaptive_rho, mu,
               tau_incr, check_every, polish, X0, flows0, warm_start):
    check_loss(prob.loss, "torch")
    run = Run(prob, "torch", merges=reduced_merges, tol=tol, max_iter=max_iter,
              polish=polish, X0=X0, flows0=flows0, warm_start=warm_start)
    done = run.closed_form() or run.warm_partition()
    if done is not None:
        return done
    state = _TorchState(prob, run.X0, run.flows0, rho, alpha, device, dtype)
    loop = dict(check_every=check_every, adaptive_rho=adaptive_rho, mu=mu, tau_incr=tau_incr,
                coarsen=polish and prob.n_users >= COARSEN_MIN)
    converged, it, hist, stage, message = iterate(
        run, state, warm=run.X0 is not None and run.flows0 is not None,
        stall_iter=None if dtype == torch.float64 else STALL_ITER, **loop)
    polished = False
    if message.startswith("stalled"):
        message += f" in {str(dtype).removeprefix('torch.')}: its rounding limits the " \
                   "iterations' accuracy"
        polished = run.final_polish(state.candidate())
        if refine and not polished:
            hist["float64_from"] = it
            state.to_float64()
            converged, it, hist, stage, message = iterate(run, state, warm=False,
                                                          resume=(it, hist), **loop)
        elif not polished:
            message += "; use refine=True or dtype='float64'"
    hist["device"], hist["dtype"] = str(device), str(dtype)
    return run.solution(state.candidate(), converged=converged, n_iter=it, history=hist,
                        stage=stage, message=message, polished=polished)


class _TorchState:
    """The ADMM iterates on a torch device, for :func:`convexfl.solvers.admm.iterate`.

    Edge copies and duals are stacked as ``(2, E, d)`` tensors (side 0: the edge's ``i``,
    side 1: its ``j``), so that one ``index_select`` / ``index_add_`` over
    ``nodes = [i_e; j_e]`` moves between users and edge copies.
    """

    def __init__(self, prob, X0, flows0, rho, alpha, device, dtype):
        X, self.rho = start_point(prob, X0, rho)
        self.alpha = alpha
        self.prob, self.device = prob, device
        m, d = prob.graph.n_edges, prob.dim
        edges = prob.graph.edges
        self.shape = (2, m, d)
        self.nodes = torch.as_tensor(np.r_[edges[:, 0], edges[:, 1]], device=device)
        self._constants(dtype)
        self.X = self._put(X)
        self.Z = self.X.index_select(0, self.nodes).view(self.shape)
        self.U = torch.zeros(self.shape, dtype=dtype, device=device)
        if flows0 is not None:
            U0 = self._put(flows0 / self.rho)
            self.U[0], self.U[1] = U0, -U0
        self.fused = torch.zeros(m, dtype=torch.bool, device=device)

    def _put(self, a):
        return torch.as_tensor(np.ascontiguousarray(a), dtype=self.dtype, device=self.device)

    def _constants(self, dtype):
        """The problem's data in ``dtype``, from its float64 arrays."""
        self.dtype = dtype
        prob, loss = self.prob, self.prob.loss
        self.cap = self._put(prob.lam * prob.graph.weights)
        self.c = self._put(loss.coef)[:, None]
        self.cA = self._put(loss.coef[:, None] * loss.F)
        self.deg = self._put(np.bincount(prob.graph.edges.ravel(), minlength=prob.n_users))
        self.deg = self.deg[:, None]
        self._rho_terms()

    def to_float64(self):
        """Go on in float64 from the current iterates (the data re-read in float64)."""
        self._constants(torch.float64)
        self.X, self.Z, self.U = (t.to(torch.float64) for t in (self.X, self.Z, self.U))

    def _node_sum(self, V):
        """``Σ_{e∋i}`` of the stacked edge quantities ``V`` (2, E, d), per user."""
        return torch.zeros_like(self.X).index_add_(0, self.nodes, V.reshape(-1, V.shape[2]))

    def _iteration(self):
        Z = self.Z
        self.X = torch.add(self.cA, self._node_sum(Z - self.U), alpha=self.rho).div_(self.denom)
        Xe = self.X.index_select(0, self.nodes).view(self.shape)
        P = torch.lerp(Z, Xe, self.alpha).add_(self.U)  # x̂ + u
        diff = P[0] - P[1]
        nrm = torch.linalg.vector_norm(diff, dim=1)
        self.fused = nrm <= 2.0 * self.cap_rho
        th = torch.where(self.fused, 0.5, 1.0 - self.cap_rho / nrm)
        t = diff.mul_(th[:, None])
        self.Z = torch.stack((P[1] + t, P[0] - t))  # θ a + (1 − θ) b, (1 − θ) a + θ b
        self.U = P.sub_(self.Z)  # u + x̂ − z
        return Xe, Z

    def step(self, n_steps):
        """``n_steps`` iterations; the residuals of the last, as in
        :func:`convexfl.solvers._admm_kernels.admm_run` and :func:`gradient_residual
        <convexfl.solvers._common_kernels.gradient_residual>` (one transfer to the host)."""
        for _ in range(n_steps):
            Xe, Zold = self._iteration()
        norm = torch.linalg.vector_norm
        r = norm(Xe - self.Z)
        s = self.rho * norm(self._node_sum(self.Z - Zold))
        xn = torch.sqrt(torch.sum(self.deg * self.X * self.X))
        zn = norm(self.Z)
        un = self.rho * norm(self.U)
        G = self.c * self.X - self.cA
        gn = norm(G)
        flows = self._flows()
        gres = norm(self._node_sum(torch.stack((flows, -flows))) + G)
        r, s, xn, zn, un, gn, gres = torch.stack((r, s, xn, zn, un, gn, gres)).double().cpu()
        finite = bool(torch.isfinite(r) and torch.isfinite(s))
        return (float(r / max(xn, zn, 1e-300)), float(s / max(un, 1e-300)),
                float(normalised(gres, gn)), finite)

    def _flows(self):
        return 0.5 * self.rho * (self.U[0] - self.U[1])

    def candidate(self):
        """``(fused, X, flows)`` as numpy arrays (float64) for the certificate."""
        def host(t):
            return t.cpu().numpy().astype(np.float64, copy=False)
        return self.fused_mask(), host(self.X), host(self._flows())

    def fused_mask(self):
        return self.fused.cpu().numpy()

    def scale_rho(self, factor):
        self.rho *= factor
        self.U /= factor
        self._rho_terms()

    def _rho_terms(self):
        self.denom = self.c + self.rho * self.deg  # of the users' proximal steps
        self.cap_rho = self.cap / self.rho
