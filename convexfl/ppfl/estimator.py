r"""``PPFL``: a scikit-learn style estimator for PPFL with generalised linear models."""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils.validation import check_is_fitted

from .._validation import (
    as_int,
    as_scalar,
    check_random_state,
    users_of,
    validate_estimator_data,
)
from ..federated import run_federated
from . import algorithms
from ._model import FORMS, LAPLACIANS, PPFLProblem, check_choice, get_family, predictor
from .exact import exact_bcd

__all__ = ["PPFL"]

_SOLVERS = ("alternating", "rbcd", "exact_bcd")


class PPFL(BaseEstimator):
    r"""Population personalised federated learning (Di, Yang, Ye, Chang) for GLMs.

    Minimises, over canonical models ``Θ`` (K × d_P), an optional shared part ``ω`` and
    memberships ``π_i ∈ Δ_K``,

    .. math::

        \sum_i p_i f_i(Θ, ω, π_i) + \frac{α}{2}(\|Θ\|_F^2 + \|ω\|^2)
        + \frac{λ}{2}\sum_{i,j} a_{ij}\|π_i - π_j\|^2 ,

    ``p_i = m_i/M``, ``f_i`` the mean negative log-likelihood of client ``i`` under the
    parameter mixture (12) or the output mixture (11) (see :mod:`convexfl.ppfl`). λ is in
    this ordered-pair convention.

    Federated data enter as ``fit(X, y, groups)``: one client per distinct label of
    ``groups`` (``groups=None``: a single client). ``predict`` and ``score`` take the rows'
    ``groups`` too (``None`` only for a model fitted on one client). ``groups`` is a
    keyword that metadata routing can carry (``set_fit_request(groups=True)``,
    ``set_score_request(groups=True)``), so ``GridSearchCV`` over ``lam`` works.

    Parameters
    ----------
    n_components : int, default=3
        Number of canonical models K.
    family : {"gaussian", "binomial", "poisson"}, default="gaussian"
    form : {"parameter", "output"}, default="parameter"
        (12) ``β_i = Θᵀπ_i`` or (11) ``E[y] = Σ_k π_ik g⁻¹(θ_kᵀx)``.
    lam : float, default=1e-3
        λ ≥ 0.
    affinity : "auto", "uniform", "cosine_labels" or array (N, N), default="auto"
        ``a_ij``; ``"cosine_labels"`` is the paper's cosine similarity of label histograms
        (for discrete ``y``; pass :func:`~convexfl.ppfl.cosine_label_affinity` of other
        labels as an array), ``"uniform"`` is ``a_ij = 1`` (i ≠ j), ``"auto"`` the former for
        the binomial family and the latter otherwise.
    shared : array-like of int or bool mask, optional
        Columns of ``X`` whose coefficients ``ω`` are common to all clients.
    alpha : float, default=0.0
        Ridge on ``Θ`` and ``ω``.
    solver : {"alternating", "rbcd", "exact_bcd"}, default="alternating"
        Algorithm 3, Algorithm 1 (both run by :func:`convexfl.federated.run_federated`), or
        centralised BCD with exact block solves (parameter form or Gaussian only).
    laplacian : {"laplacian", "degree_only"}, default="laplacian"
        The paper's model, or the authors' code (degree matrix in the penalty gradient and the
        double-exponential mirror step unless ``mirror`` says otherwise).
    mirror : {"entropic", "double_exp"}, optional
    rounds : int, default=300
        Maximum number of rounds (sweeps for ``"exact_bcd"``).
    theta_step, pi_step : float or "auto", default="auto"
    local_steps : int, default=1
    batch_size : int, optional
    block_prob : float, default=0.5
        RBCD's probability of the Θ-block.
    participation : float or int, default=1.0
        Clients per round (see :func:`~convexfl.federated.run_federated`).
    floor : float, default=1e-6
        ε of Remark 2.
    tol : float, default=0.0
        Stop when both criteria of Sec. 3.2 (``grad_theta``, ``pi_gap``) are ``≤ tol``; a
        run that uses all ``rounds`` without it issues a ``ConvergenceWarning``.
    init_scale : float, default=0.1
        Standard deviation of the random initial canonical models (``π_i = 1/K`` initially).
    random_state : int, RandomState or None
        Through :func:`sklearn.utils.check_random_state`: draws the initial ``Θ`` and the
        run's root seed.

    Attributes
    ----------
    memberships_ : ndarray (N, K)
        ``π_i`` per client (clients in sorted group order, ``groups_``).
    canonical_models_ : ndarray (K, d_P)
        ``Θ`` (coefficients of the personalised columns).
    shared_coef_ : ndarray (d_S,)
        ``ω``.
    personal_coefficients_ : ndarray (N, d)
        Per client, ``ω`` in the shared columns and ``Θᵀπ_i`` in the others (the model's
        coefficients under (12); a parameter-space summary under (11)).
    groups_ : ndarray (N,)
    affinity_ : ndarray (N, N)
    objective_ : float
        Final objective with the true Laplacian.
    objective_degree_only_ : float
        Final objective with the degree-only penalty ``λ Σ d_i‖π_i‖²``.
    history_ : History or list
        The run's per-round records (criteria in ``record.metrics``); for ``"exact_bcd"``
        the objective after each sweep.
    problem_ : PPFLProblem
    n_iter_ : int
    n_features_in_ : int
    """

    def __init__(self, n_components=3, *, family="gaussian", form="parameter", lam=1e-3,
                 affinity="auto", shared=None, alpha=0.0, solver="alternating",
                 laplacian="laplacian", mirror=None, rounds=300, theta_step="auto",
                 pi_step="auto", local_steps=1, batch_size=None, block_prob=0.5,
                 participation=1.0, floor=1e-6, tol=0.0, init_scale=0.1, random_state=None):
        self.n_components = n_components
        self.family = family
        self.form = form
        self.lam = lam
        self.affinity = affinity
        self.shared = shared
        self.alpha = alpha
        self.solver = solver
        self.laplacian = laplacian
        self.mirror = mirror
        self.rounds = rounds
        self.theta_step = theta_step
        self.pi_step = pi_step
        self.local_steps = local_steps
        self.batch_size = batch_size
        self.block_prob = block_prob
        self.participation = participation
        self.floor = floor
        self.tol = tol
        self.init_scale = init_scale
        self.random_state = random_state

    # -- fit -------------------------------------------------------------------------
    def fit(self, X, y, groups=None, sample_weight=None):
        """Fit on federated data: one client per distinct label of ``groups`` (``None``:
        a single client).

        Returns
        -------
        self
        """
        X, y = validate_estimator_data(self, X, y, dtype=np.float64, y_numeric=True)
        groups = np.zeros(X.shape[0], int) if groups is None else groups
        if sample_weight is not None and not np.any(np.asarray(sample_weight) != 0):
            raise ValueError("sample_weight: every weight is zero; at least one sample must "
                             "count")
        mask = self._shared_mask(X.shape[1])
        problem = PPFLProblem(X[:, ~mask], y, groups, n_components=self.n_components,
                              X_shared=X[:, mask], family=self.family, form=self.form,
                              lam=self.lam, affinity=self.affinity, alpha=self.alpha,
                              sample_weight=sample_weight)
        check_choice(self.solver, "solver", _SOLVERS)
        check_choice(self.laplacian, "laplacian", LAPLACIANS)
        rounds = as_int(self.rounds, "rounds", low=1)
        tol = as_scalar(self.tol, "tol", low=0.0)
        rng = check_random_state(self.random_state)
        init = problem.initial_point(rng, as_scalar(self.init_scale, "init_scale", low=0.0))
        if self.solver == "exact_bcd":
            Theta, omega, Pi, met = self._fit_exact(problem, init, rounds, tol)
        else:
            Theta, omega, Pi, met = self._fit_federated(problem, init, rounds, tol, rng)
        self._store(problem, mask, Theta, omega, Pi)
        if tol > 0 and not met:  # a run that meets tol in its last round has converged
            warnings.warn(f"PPFL: the stopping criteria did not reach tol={tol:g} within "
                          f"rounds={rounds}", ConvergenceWarning, stacklevel=2)
        return self

    def _shared_mask(self, d):
        mask = np.zeros(d, dtype=bool)
        if self.shared is None:
            return mask
        s = np.asarray(self.shared)
        if s.dtype == bool:
            if s.shape != (d,):
                raise ValueError(f"shared: a boolean mask needs length {d}, got {s.shape}")
            mask = s.copy()
        elif s.ndim != 1 or s.dtype.kind not in "iu" or np.any((s < 0) | (s >= d)):
            raise ValueError(f"shared: expected column indices in 0..{d - 1} or a mask")
        else:
            mask[s] = True
        if mask.all():
            raise ValueError("shared: at least one column must be personalised")
        return mask

    def _fit_federated(self, problem, init, rounds, tol, rng):
        kw = dict(init=init, theta_step=self.theta_step, pi_step=self.pi_step,
                  local_steps=self.local_steps, batch_size=self.batch_size,
                  laplacian=self.laplacian, mirror=self.mirror, floor=self.floor)
        if self.solver == "rbcd":
            alg = algorithms.rbcd(problem, block_prob=self.block_prob, **kw)
        else:
            alg = algorithms.alternating(problem, **kw)

        met = [False]

        def stop(record, server_state, client_states):
            m = record.metrics
            met[0] = tol > 0 and m["grad_theta"] <= tol and m["pi_gap"] <= tol
            return met[0]

        result = run_federated(alg, problem.client_data(), rounds=rounds,
                               participation=self.participation, random_state=rng,
                               callback=stop, progress=False)
        self.history_ = result.history
        self.n_iter_ = result.rounds_completed
        s = result.server_state
        return s["Theta"], s["omega"], s["Pi"], met[0]

    def _fit_exact(self, problem, init, rounds, tol):
        res = exact_bcd(problem, *init, max_iter=rounds, tol=max(tol, 1e-12),
                        laplacian=self.laplacian)
        self.history_ = res.history
        self.n_iter_ = res.n_iter
        return res.Theta, res.omega, res.Pi, res.status == "optimal"

    def _store(self, problem, mask, Theta, omega, Pi):
        self.problem_ = problem
        self.groups_ = problem.user_labels
        self.affinity_ = problem.A
        self.memberships_ = Pi
        self.canonical_models_ = Theta
        self.shared_coef_ = omega
        self.shared_mask_ = mask
        coef = np.zeros((problem.n_clients, mask.size))
        coef[:, mask] = omega
        coef[:, ~mask] = Pi @ Theta
        self.personal_coefficients_ = coef
        self.objective_ = problem.objective(Theta, omega, Pi, "laplacian")
        self.objective_degree_only_ = problem.objective(Theta, omega, Pi, "degree_only")

    # -- predict ---------------------------------------------------------------------
    def score(self, X, y, groups=None, sample_weight=None):
        """R² of the predicted mean ``E[y]`` (binomial: of the predicted probability, a
        Brier skill score); higher is better."""
        from sklearn.metrics import r2_score
        return float(r2_score(y, self.predict(X, groups), sample_weight=sample_weight))

    def predict(self, X, groups=None):
        """Predicted mean ``E[y]`` of each sample under its client's personal model
        (binomial: the probability of the positive class); ``groups=None`` for a model
        fitted on a single client."""
        check_is_fitted(self, "memberships_")
        X = validate_estimator_data(self, X, dtype=np.float64, reset=False)
        idx = users_of(groups, self.groups_, X.shape[0])
        family = get_family(self.family)
        tbar = predictor(family, check_choice(self.form, "form", FORMS),
                         X[:, self.shared_mask_], X[:, ~self.shared_mask_],
                         self.canonical_models_, self.shared_coef_, self.memberships_, idx)[0]
        return family.mean(tbar)
