r"""PerFed-CKT: the linear-regression analysis (Cho, Wang, Chiruvolu, Joshi, Sec. 4, App. B).

This module implements, with numpy/scipy only, the Bayesian linear-regression model the paper
uses to motivate clustered knowledge transfer, the CKT estimator (14), the Bayes-optimal
estimator (12), the printed closed form of Theorem 4.2, the *exact* conditional test risk of
(15) in closed form, a numerical minimiser of that risk, a Monte Carlo estimate of it, and a
comparison report (:func:`compare_theorem_4_2`) that a theory check can call.

Model (paper Sec. 4; ``docs/math.md`` §3)
------------------------------------
For clients :math:`k = 1..K`

.. math::

    w_k = \theta + \zeta_k,\quad \zeta_k \sim N(0, \upsilon_k^2 I_d),\qquad
    y_k = X_k w_k + z_k,\quad z_k \sim N(0, \sigma^2 I_n),

with :math:`\theta` "uniform on :math:`\mathbb{R}^d`" (a flat, improper prior).
:math:`\hat w_k = (X_k^T X_k)^{-1} X_k^T y_k = w_k + e_k`, :math:`e_k \sim N(0, S_k)`,
:math:`S_k = \sigma^2 (X_k^T X_k)^{-1}`; hence, given :math:`\theta`,
:math:`\hat w_k \sim N(\theta, \Sigma_k)` independently, :math:`\Sigma_k = S_k + \upsilon_k^2 I`.
(The paper writes :math:`\hat w_k \sim N((X_k^TX_k)^{-1}X_k^Ty_k, \cdot)` and
:math:`z \sim N(0, \sigma^2 I_d)`; the mean is :math:`w_k` and the identity is :math:`I_n`.)

Findings on the printed formulas (derived here, checked by the tests)
---------------------------------------------------------------------
* (6)–(12) are correct for the flat prior: they are exactly Gaussian conditioning
  (see :func:`posterior_mean`; the tests compare with brute-force conditioning of the joint
  Gaussian of :math:`(\theta, w, y)` under a proper prior whose variance is sent to infinity).
* Under :math:`X_k^TX_k = \beta I`, :math:`P^TP = \nu I`, with
  :math:`A_k = (\sum_{i\ne k} 1/(\sigma^2+\beta\upsilon_i^2))^{-1}` one has
  :math:`\bar\Sigma_{\setminus k} = (A_k/\beta) I` and the posterior mean is

  .. math::

      \mu_k = c_k \hat w_k + (1-c_k)\,\bar\theta_{\setminus k},\qquad
      c_k = \frac{A_k + \beta\upsilon_k^2}{\sigma^2 + A_k + \beta\upsilon_k^2},\qquad
      \bar\theta_{\setminus k} = A_k \sum_{i\ne k}\frac{\hat w_i}{\sigma^2+\beta\upsilon_i^2}.

  The printed (45) and the printed :math:`B_k` contain
  :math:`\sigma^2 + A_k\beta\upsilon_k^2`, which is dimensionally inconsistent
  (:math:`A_k` and :math:`\beta\upsilon_k^2` both carry the units of :math:`\sigma^2`); with
  :math:`A_k\beta\upsilon_k^2 \to A_k + \beta\upsilon_k^2` *and the sum over i including k*,
  (45) equals :math:`\mu_k` exactly, and the variance of :math:`\varsigma_k` printed in (45)
  already uses :math:`A_k + \beta\upsilon_k^2`.
* Theorem 4.2, **as printed**, is not the minimiser of (15) (neither reading of
  :math:`\alpha_{kk}` makes :math:`\sum_i \alpha_{ki} = 1` in general, and the risk gap is
  positive; see :func:`compare_theorem_4_2`). The printed weights do have the right *shape*
  (:math:`\propto 1/(\sigma^2+\beta\upsilon_i^2)`, i ∈ [K]) and λ* is right for the
  "included" reading: only the constant :math:`B_k` is wrong. With
  :math:`f = \sum_i\alpha^*_{ki} = (\sigma^2 + A_k + \beta\upsilon_k^2)/(\sigma^2 +
  A_k\beta\upsilon_k^2)` the excess prediction risk over the Bayes risk is exactly
  :math:`\beta(f-1)^2(1-a)^2\|\alpha^c_{kk}\hat w_k + (1-\alpha^c_{kk})\bar\theta_{\setminus k}\|^2`
  (:math:`\alpha^c` the corrected weights, a below): the printed estimator is not
  shift-equivariant, so its gap grows with :math:`\|\theta\|` and vanishes only if f = 1.
  With the denominator corrected to
  :math:`\sigma^2 + A_k + \beta\upsilon_k^2` and :math:`\alpha_{kk}` *included*
  (:math:`\alpha_{ki}^* = B_k/(\sigma^2+\beta\upsilon_i^2)` for every :math:`i \in [K]`, as
  :math:`\bar s_k = \sum_{i=1}^K \alpha_{ki} s(\hat w_i)` in (13)–(14) and the "i ∈ [K]" of
  (16) say), the weights sum to one, :math:`\tilde w_k(\lambda^*, \alpha^*) = \mu_k` exactly and
  the risk equals the Bayes risk, i.e. the corrected closed form *is* a minimiser. The
  minimiser is not unique in that reading: the coefficient of :math:`\hat w_k` is
  :math:`a + (1-a)\alpha_{kk}` with :math:`a = \beta/(\beta+\lambda\nu)`, so every
  :math:`a \in (0, c_k]` with :math:`\alpha_{kk} = (c_k-a)/(1-a)` and
  :math:`\alpha_{ki} = \tfrac{1-c_k}{1-a} A_k/(\sigma^2+\beta\upsilon_i^2)` is optimal; the
  printed :math:`\lambda_k^* = \sigma^2/(\upsilon_k^2\nu)` picks
  :math:`a = \beta\upsilon_k^2/(\sigma^2+\beta\upsilon_k^2)`. With :math:`\alpha_{kk} = 0`
  (*excluded*) the unique minimiser is :math:`\lambda = \beta\sigma^2/(\nu(A_k+\beta\upsilon_k^2))`,
  :math:`\alpha_{ki} = A_k/(\sigma^2+\beta\upsilon_i^2)`, which differs from (16) in both
  :math:`\lambda` and :math:`\alpha`.

Risk definition (paper (15), (46)–(49))
---------------------------------------
The paper's test loss is :math:`F_k(\tilde w_k) = \|X_k\tilde w_k - (X_k w_k + z)\|^2` with
*fresh* test noise :math:`z \sim N(0, \sigma^2 I_n)` at the same design :math:`X_k` ((47); the
step (47)→(48) needs :math:`z` independent of the training data), averaged over everything
unknown given :math:`(\hat w_k, \bar\theta_{\setminus k})`. Because :math:`\tilde w_k` uses the
individual :math:`\hat w_i` and not only :math:`\bar\theta_{\setminus k}`, this expectation also
averages over the GLS residuals :math:`r_i = \hat w_i - \bar\theta_{\setminus k}` (independent of
:math:`\bar\theta_{\setminus k}`, :math:`\hat w_k` and :math:`w_k`). ``condition_on="all"``
conditions instead on every :math:`\hat w_i` (the posterior is the same, the residual term
vanishes). ``metric="parameter"`` gives (49), :math:`E\|\tilde w_k - w_k\|^2`, which equals
(48)/β only when :math:`X_k^TX_k = \beta I`.

Conventions: (13)'s :math:`\lambda_k` multiplies :math:`\|\bar s_k - P w_k\|^2` with :math:`P`
the stacked public inputs (rows), so :math:`\lambda_k = \lambda_{(1)}/|P|` for the λ of (1).
The paper's simplification "P ∈ R^{1×d}" is incompatible with :math:`P^TP = \nu I_d` for
:math:`d > 1`; here P has ``n_public`` ≥ d rows in the isotropic case.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import scipy.optimize as sopt
import scipy.stats as sstats

__all__ = [
    "ClosedFormEvaluation",
    "LinearSetting",
    "MonteCarloRisk",
    "PosteriorParts",
    "RiskMinimum",
    "RiskTerms",
    "Theorem42",
    "Theorem42Comparison",
    "bayes_risk",
    "ckt_estimator",
    "compare_theorem_4_2",
    "conditional_risk",
    "local_estimates",
    "make_linear_setting",
    "minimise_risk",
    "monte_carlo_risk",
    "posterior_mean",
    "theorem_4_2",
]

_SYM_TOL = 1e-8


# ---------------------------------------------------------------------------------------------
# validation helpers
# ---------------------------------------------------------------------------------------------


def _finite_array(x, name: str, *, ndim: int | None = None, shape=None) -> np.ndarray:
    try:
        a = np.asarray(x, dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a real numeric array") from exc
    if ndim is not None and a.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimension(s), got shape {a.shape}")
    if shape is not None and (
        len(shape) != a.ndim
        or any(s is not None and s != t for s, t in zip(shape, a.shape, strict=False))
    ):
            want = tuple("*" if s is None else s for s in shape)
            raise ValueError(f"{name} must have shape {want}, got {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} must be finite (no NaN or inf)")
    return a


def _scalar(x, name: str, *, positive: bool = False, nonnegative: bool = False) -> float:
    if isinstance(x, (bool, np.bool_)):
        raise ValueError(f"{name} must be a real number, got a bool")  # noqa: TRY004
    try:
        v = float(x)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a real number") from exc
    if np.ndim(x) != 0:
        raise ValueError(f"{name} must be a scalar")
    if not math.isfinite(v):
        raise ValueError(f"{name} must be finite (no NaN or inf)")
    if positive and v <= 0:
        raise ValueError(f"{name} must be > 0, got {v}")
    if nonnegative and v < 0:
        raise ValueError(f"{name} must be >= 0, got {v}")
    return v


def _int(x, name: str, *, minimum: int) -> int:
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)):
        raise ValueError(f"{name} must be an integer, got {x!r}")  # noqa: TRY004
    if x < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {x}")
    return int(x)


def _index(k, n: int, name: str = "k") -> int:
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)):
        raise ValueError(f"{name} must be an integer client index, got {k!r}")  # noqa: TRY004
    if not 0 <= k < n:
        raise ValueError(f"{name} must be in [0, {n}), got {k}")
    return int(k)


def _choice(x, name: str, options: tuple[str, ...]) -> str:
    if x not in options:
        raise ValueError(f"{name} must be one of {options}, got {x!r}")
    return x


def _spd(a, name: str, d: int | None = None) -> np.ndarray:
    a = _finite_array(a, name, ndim=2)
    if a.shape[0] != a.shape[1] or (d is not None and a.shape[0] != d):
        want = "square" if d is None else f"({d}, {d})"
        raise ValueError(f"{name} must be {want}, got shape {a.shape}")
    scale = max(1.0, float(np.max(np.abs(a))))
    if np.max(np.abs(a - a.T)) > _SYM_TOL * scale:
        raise ValueError(f"{name} must be symmetric")
    try:
        np.linalg.cholesky(0.5 * (a + a.T))
    except np.linalg.LinAlgError as exc:
        raise ValueError(f"{name} must be positive definite") from exc
    return 0.5 * (a + a.T)


def _psd(a, name: str, d: int) -> np.ndarray:
    a = _finite_array(a, name, ndim=2, shape=(d, d))
    scale = max(1.0, float(np.max(np.abs(a))))
    if np.max(np.abs(a - a.T)) > _SYM_TOL * scale:
        raise ValueError(f"{name} must be symmetric")
    a = 0.5 * (a + a.T)
    if np.linalg.eigvalsh(a)[0] < -1e-10 * scale:
        raise ValueError(f"{name} must be positive semidefinite")
    return a


def _upsilon(u, n_clients: int | None, name: str = "upsilon") -> np.ndarray:
    u = _finite_array(u, name)
    if u.ndim == 0:
        if n_clients is None:
            raise ValueError(f"{name} must be a 1-D array of per-client standard deviations")
        u = np.full(n_clients, float(u))
    if u.ndim != 1 or (n_clients is not None and u.shape[0] != n_clients):
        raise ValueError(f"{name} must be a scalar or have shape ({n_clients},), got {u.shape}")
    if np.any(u <= 0):
        raise ValueError(f"{name} must be > 0 for every client (standard deviations)")
    return u


def _rng(random_state) -> np.random.Generator:
    if isinstance(random_state, np.random.Generator):
        return random_state
    if random_state is None or isinstance(random_state, (int, np.integer)):
        return np.random.default_rng(random_state)
    raise ValueError("random_state must be None, an int or a numpy Generator")


def _frozen(a: np.ndarray | None) -> np.ndarray | None:
    if a is None:
        return None
    a = np.array(a, dtype=float, copy=True)
    a.setflags(write=False)
    return a


def _sym_inv(a: np.ndarray) -> np.ndarray:
    inv = np.linalg.inv(a)
    return 0.5 * (inv + inv.T)


# ---------------------------------------------------------------------------------------------
# the setting
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LinearSetting:
    r"""One draw of the paper's linear-regression model (immutable; arrays are read-only).

    Attributes
    ----------
    X : ndarray, shape (K, n, d)
        Client designs :math:`X_k` (same n for every client).
    y : ndarray, shape (K, n)
        Responses :math:`y_k = X_k w_k + z_k`.
    P : ndarray, shape (n_public, d)
        Public inputs (rows); the logits are :math:`s(w) = P w`.
    upsilon : ndarray, shape (K,)
        Task-spread standard deviations :math:`\upsilon_k`
        (:math:`\zeta_k \sim N(0, \upsilon_k^2 I)`).
    sigma : float
        Label-noise standard deviation :math:`\sigma`.
    theta, w : ndarray or None
        The draw of :math:`\theta` (d,) and of the true models :math:`w_k` (K, d); ``None`` when
        unknown (real data). Only used for reporting and simulation, never by the estimators.
    isotropic : bool
        Whether :math:`X_k^TX_k = \beta I` and :math:`P^TP = \nu I` hold by construction.
    beta, nu : float or None
        The constants of Theorem 4.2 when ``isotropic``.
    """

    X: np.ndarray
    y: np.ndarray
    P: np.ndarray
    upsilon: np.ndarray
    sigma: float
    theta: np.ndarray | None = None
    w: np.ndarray | None = None
    isotropic: bool = False
    beta: float | None = None
    nu: float | None = None

    def __post_init__(self):
        X = _finite_array(self.X, "X", ndim=3)
        K, n, d = X.shape
        if K < 2:
            raise ValueError(f"X must hold at least 2 clients, got {K}")
        if n < d:
            raise ValueError(
                f"X must have n_samples >= dim so X_k^T X_k is invertible, got {n} < {d}"
            )
        y = _finite_array(self.y, "y", shape=(K, n))
        P = _finite_array(self.P, "P", ndim=2, shape=(None, d))
        if P.shape[0] < 1:
            raise ValueError("P must have at least one row")
        ups = _upsilon(self.upsilon, K)
        sigma = _scalar(self.sigma, "sigma", positive=True)
        theta = None if self.theta is None else _finite_array(self.theta, "theta", shape=(d,))
        w = None if self.w is None else _finite_array(self.w, "w", shape=(K, d))
        beta = None if self.beta is None else _scalar(self.beta, "beta", positive=True)
        nu = None if self.nu is None else _scalar(self.nu, "nu", positive=True)
        for kk in range(K):
            try:
                np.linalg.cholesky(X[kk].T @ X[kk])
            except np.linalg.LinAlgError as exc:
                raise ValueError(f"X[{kk}] must have full column rank") from exc
        set_ = object.__setattr__
        set_(self, "X", _frozen(X))
        set_(self, "y", _frozen(y))
        set_(self, "P", _frozen(P))
        set_(self, "upsilon", _frozen(ups))
        set_(self, "sigma", sigma)
        set_(self, "theta", _frozen(theta))
        set_(self, "w", _frozen(w))
        set_(self, "isotropic", bool(self.isotropic))
        set_(self, "beta", beta)
        set_(self, "nu", nu)

    @property
    def n_clients(self) -> int:
        return self.X.shape[0]

    @property
    def n_samples(self) -> int:
        return self.X.shape[1]

    @property
    def dim(self) -> int:
        return self.X.shape[2]

    @property
    def n_public(self) -> int:
        return self.P.shape[0]

    @property
    def XtX(self) -> np.ndarray:
        """Gram matrices :math:`X_k^TX_k`, shape (K, d, d)."""
        g = np.einsum("kni,knj->kij", self.X, self.X)
        return 0.5 * (g + np.swapaxes(g, 1, 2))

    @property
    def PtP(self) -> np.ndarray:
        """:math:`P^TP`, shape (d, d)."""
        q = self.P.T @ self.P
        return 0.5 * (q + q.T)


def _orthonormal_columns(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    q, r = np.linalg.qr(rng.standard_normal((n, d)))
    return q * np.sign(np.diag(r))  # Haar-distributed, orthonormal columns


def make_linear_setting(
    n_clients: int,
    dim: int,
    n_samples: int,
    *,
    upsilon,
    sigma: float,
    n_public: int,
    random_state=None,
    isotropic: bool = False,
    beta: float | None = None,
    nu: float | None = None,
    theta_range: float = 10.0,
) -> LinearSetting:
    r"""Draw one instance of the paper's model.

    The "uniform prior on :math:`\mathbb{R}^d`" cannot be sampled; :math:`\theta` is drawn
    with i.i.d. entries :math:`U(-\text{theta\_range}, \text{theta\_range})`, as in the paper's
    App. E toy example (range 10). Every estimator here is shift-equivariant and the posterior
    uses the flat prior, so the value of :math:`\theta` does not enter any conditional risk.
    Then :math:`w_k = \theta + \upsilon_k \xi_k` with :math:`\xi_k \sim N(0, I_d)`, and
    :math:`y_k = X_k w_k + \sigma \varepsilon_k`, :math:`\varepsilon_k \sim N(0, I_n)`.

    Designs: with ``isotropic=False`` the rows of :math:`X_k` and P are i.i.d. :math:`N(0, I_d)`.
    With ``isotropic=True``, :math:`X_k = \sqrt\beta\, Q_k` and :math:`P = \sqrt\nu\, Q_P` with
    Haar-random orthonormal columns :math:`Q`, so :math:`X_k^TX_k = \beta I` and
    :math:`P^TP = \nu I` hold to rounding, as Theorem 4.2 assumes (needs
    ``n_public >= dim``). Defaults: ``beta = n_samples``, ``nu = n_public`` (the Gram scales of
    standard Gaussian rows).

    Parameters
    ----------
    n_clients : int, >= 2
    dim : int, >= 1
    n_samples : int, >= dim
        Rows per client.
    upsilon : float or array_like, shape (n_clients,)
        :math:`\upsilon_k > 0`.
    sigma : float, > 0
    n_public : int, >= 1 (>= dim when isotropic)
    random_state : None, int or numpy.random.Generator
    isotropic : bool
    beta, nu : float, optional
        Only with ``isotropic=True``.
    theta_range : float, > 0

    Returns
    -------
    LinearSetting
    """
    K = _int(n_clients, "n_clients", minimum=2)
    d = _int(dim, "dim", minimum=1)
    n = _int(n_samples, "n_samples", minimum=d)
    m = _int(n_public, "n_public", minimum=d if isotropic else 1)
    ups = _upsilon(upsilon, K)
    sig = _scalar(sigma, "sigma", positive=True)
    tr = _scalar(theta_range, "theta_range", positive=True)
    if not isotropic and (beta is not None or nu is not None):
        raise ValueError("beta and nu are only used with isotropic=True")
    b = float(n) if beta is None else _scalar(beta, "beta", positive=True)
    v = float(m) if nu is None else _scalar(nu, "nu", positive=True)
    rng = _rng(random_state)

    theta = rng.uniform(-tr, tr, size=d)
    w = theta + ups[:, None] * rng.standard_normal((K, d))
    if isotropic:
        X = np.stack([math.sqrt(b) * _orthonormal_columns(rng, n, d) for _ in range(K)])
        P = math.sqrt(v) * _orthonormal_columns(rng, m, d)
    else:
        X = rng.standard_normal((K, n, d))
        P = rng.standard_normal((m, d))
    y = np.einsum("knd,kd->kn", X, w) + sig * rng.standard_normal((K, n))
    return LinearSetting(
        X=X, y=y, P=P, upsilon=ups, sigma=sig, theta=theta, w=w, isotropic=bool(isotropic),
        beta=b if isotropic else None, nu=v if isotropic else None,
    )


def local_estimates(setting: LinearSetting) -> np.ndarray:
    r"""Least-squares estimates :math:`\hat w_k = (X_k^TX_k)^{-1}X_k^Ty_k`, shape (K, d)."""
    if not isinstance(setting, LinearSetting):
        raise ValueError("setting must be a LinearSetting")  # noqa: TRY004
    rhs = np.einsum("knd,kn->kd", setting.X, setting.y)
    return np.linalg.solve(setting.XtX, rhs[..., None])[..., 0]


# ---------------------------------------------------------------------------------------------
# estimators
# ---------------------------------------------------------------------------------------------


def _check_w_hat(w_hat, K: int | None, d: int | None, name: str = "w_hat") -> np.ndarray:
    w_hat = _finite_array(w_hat, name, ndim=2, shape=(K, d))
    if w_hat.shape[0] < 2:
        raise ValueError(f"{name} must hold at least 2 clients")
    return w_hat


def ckt_estimator(XtX_k, w_hat, k: int, lam_k: float, alpha_k, PtP) -> np.ndarray:
    r"""The PerFed-CKT local minimiser, paper eq. (14).

    .. math::

        \tilde w_k = (X_k^TX_k + \lambda_k P^TP)^{-1}
                     \Big(X_k^TX_k\,\hat w_k + \lambda_k P^TP \sum_{i=1}^K \alpha_{ki}\hat w_i\Big),

    the minimiser of (13),
    :math:`\|X_k w - y_k\|^2 + \lambda_k\|\sum_i\alpha_{ki}P\hat w_i - Pw\|^2`
    (using :math:`X_k^Ty_k = X_k^TX_k\hat w_k`). :math:`\lambda_k = 0` returns :math:`\hat w_k`.
    The weights are not required to sum to one here (the paper's (1) imposes
    :math:`\sum_i \alpha_{ki} = 1`; :func:`theorem_4_2` can return weights that do not).

    Parameters
    ----------
    XtX_k : array_like, shape (d, d)
        Client k's Gram matrix, symmetric positive definite.
    w_hat : array_like, shape (K, d)
        Local estimates of all clients.
    k : int
        Client index (0-based).
    lam_k : float, >= 0
    alpha_k : array_like, shape (K,)
        Weights :math:`\alpha_{k\cdot}` (the i = k entry included).
    PtP : array_like, shape (d, d)
        :math:`P^TP`, symmetric positive semidefinite.

    Returns
    -------
    ndarray, shape (d,)
    """
    w_hat = _check_w_hat(w_hat, None, None)
    K, d = w_hat.shape
    k = _index(k, K)
    G = _spd(XtX_k, "XtX_k", d)
    lam = _scalar(lam_k, "lam_k", nonnegative=True)
    alpha = _finite_array(alpha_k, "alpha_k", shape=(K,))
    Q = _psd(PtP, "PtP", d)
    return _ckt(G, Q, w_hat, k, lam, alpha)


def _ckt(G, Q, w_hat, k, lam, alpha):
    target = alpha @ w_hat
    return np.linalg.solve(G + lam * Q, G @ w_hat[k] + lam * (Q @ target))


@dataclass(frozen=True)
class PosteriorParts:
    r"""The quantities of paper (6)–(12) for one client k.

    Attributes
    ----------
    mean : ndarray (d,)
        Posterior mean :math:`E[w_k \mid \hat w_1..\hat w_K]` (12).
    cov : ndarray (d, d)
        Posterior covariance :math:`\bar\Sigma_k` (11).
    Sigma : ndarray (K, d, d)
        :math:`\Sigma_i = \sigma^2(X_i^TX_i)^{-1} + \upsilon_i^2 I` (6).
    Sigma_bar_minus_k : ndarray (d, d)
        :math:`\bar\Sigma_{\setminus k}` (7).
    theta_bar_minus_k : ndarray (d,)
        :math:`\bar\theta_{\setminus k}` (8).
    Sigma_tilde : ndarray (d, d)
        :math:`\tilde\Sigma_k = \bar\Sigma_{\setminus k} + \upsilon_k^2 I` (10).
    noise_cov : ndarray (d, d)
        :math:`S_k = \sigma^2 (X_k^TX_k)^{-1}`.
    """

    k: int
    mean: np.ndarray
    cov: np.ndarray
    Sigma: np.ndarray
    Sigma_bar_minus_k: np.ndarray
    theta_bar_minus_k: np.ndarray
    Sigma_tilde: np.ndarray
    noise_cov: np.ndarray


def _check_gram_stack(XtX, name="XtX") -> np.ndarray:
    G = _finite_array(XtX, name, ndim=3)
    K, d, d2 = G.shape
    if d != d2:
        raise ValueError(f"{name} must have shape (K, d, d), got {G.shape}")
    for i in range(K):
        _spd(G[i], f"{name}[{i}]", d)
    return 0.5 * (G + np.swapaxes(G, 1, 2))


def _posterior(G, w_hat, k, ups, sigma) -> PosteriorParts:
    K, d = w_hat.shape
    eye = np.eye(d)
    S = sigma**2 * np.stack([_sym_inv(G[i]) for i in range(K)])  # S_i = σ²(X_iᵀX_i)⁻¹
    Sigma = S + (ups**2)[:, None, None] * eye  # (6)
    Sinv = np.stack([_sym_inv(Sigma[i]) for i in range(K)])
    others = [i for i in range(K) if i != k]
    Sbar = _sym_inv(Sinv[others].sum(axis=0))  # (7)
    tbar = Sbar @ np.einsum("iab,ib->a", Sinv[others], w_hat[others])  # (8)
    Stil = Sbar + ups[k] ** 2 * eye  # (10)
    Stil_inv = _sym_inv(Stil)
    Sk_inv = G[k] / sigma**2  # (σ²(X_kᵀX_k)⁻¹)⁻¹
    cov = _sym_inv(Stil_inv + Sk_inv)  # (11)
    mean = cov @ (Sk_inv @ w_hat[k] + Stil_inv @ tbar)  # (12)
    return PosteriorParts(
        k=k, mean=mean, cov=cov, Sigma=Sigma, Sigma_bar_minus_k=Sbar, theta_bar_minus_k=tbar,
        Sigma_tilde=Stil, noise_cov=S[k],
    )


def posterior_mean(XtX, w_hat, k: int, upsilon, sigma: float, *, return_parts: bool = False):
    r"""Bayes-optimal estimate of :math:`w_k` (paper (12)), flat prior on :math:`\theta`.

    Derivation. Given :math:`\theta`, the :math:`\hat w_i \sim N(\theta, \Sigma_i)` are
    independent with :math:`\Sigma_i = \sigma^2(X_i^TX_i)^{-1} + \upsilon_i^2 I` (6). With a
    flat prior, :math:`\theta \mid \{\hat w_i\}_{i\ne k} \sim N(\bar\theta_{\setminus k},
    \bar\Sigma_{\setminus k})` with the GLS quantities (7)–(8). Then
    :math:`w_k = \theta + \zeta_k \mid \{\hat w_i\}_{i \ne k} \sim N(\bar\theta_{\setminus k},
    \tilde\Sigma_k)`, :math:`\tilde\Sigma_k = \bar\Sigma_{\setminus k} + \upsilon_k^2 I` (10),
    and :math:`\hat w_k = w_k + e_k`, :math:`e_k \sim N(0, S_k)`,
    :math:`S_k = \sigma^2(X_k^TX_k)^{-1}`,
    independent of the rest. Bayes' rule for a Gaussian prior and Gaussian observation gives

    .. math::

        w_k \mid \hat w_{1..K} \sim N(\mu_k, \bar\Sigma_k),\quad
        \bar\Sigma_k = (\tilde\Sigma_k^{-1} + S_k^{-1})^{-1},\quad
        \mu_k = \bar\Sigma_k S_k^{-1}\hat w_k
              + \bar\Sigma_k\tilde\Sigma_k^{-1}\bar\theta_{\setminus k},

    which is exactly the paper's (11)–(12): the general (non-isotropic) formulas are correct.
    Its isotropic specialisation (45) is misprinted (see the module docstring); this function
    does not use (45).

    Parameters
    ----------
    XtX : array_like, shape (K, d, d)
        Gram matrices :math:`X_i^TX_i` (symmetric positive definite).
    w_hat : array_like, shape (K, d)
    k : int
    upsilon : array_like, shape (K,) or scalar, > 0
    sigma : float, > 0
    return_parts : bool
        Return a :class:`PosteriorParts` with (6)–(12) instead of the mean only.

    Returns
    -------
    ndarray (d,) or PosteriorParts
    """
    G = _check_gram_stack(XtX)
    K, d = G.shape[:2]
    w_hat = _check_w_hat(w_hat, K, d)
    k = _index(k, K)
    ups = _upsilon(upsilon, K)
    sig = _scalar(sigma, "sigma", positive=True)
    parts = _posterior(G, w_hat, k, ups, sig)
    return parts if return_parts else parts.mean


# ---------------------------------------------------------------------------------------------
# Theorem 4.2
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Theorem42:
    r"""A closed-form (λ, α) for client k (see :func:`theorem_4_2`).

    Attributes
    ----------
    lam : float
    alpha : ndarray (K,)
        Weights including the i = k entry (0 under ``alpha_kk="excluded"``).
    A, B : float
        :math:`A_k`, :math:`B_k` (``B`` is the value actually used for the weights).
    alpha_sum : float
        :math:`\sum_i \alpha_{ki}`; the paper's (1) requires 1.
    form, alpha_kk : str
    """

    k: int
    lam: float
    alpha: np.ndarray
    A: float
    B: float
    alpha_sum: float
    form: str
    alpha_kk: str


def theorem_4_2(
    k: int,
    upsilon,
    sigma: float,
    beta: float,
    nu: float,
    *,
    alpha_kk: Literal["included", "excluded"] = "included",
    form: Literal["printed", "corrected"] = "printed",
) -> Theorem42:
    r"""Closed-form (λ*, α*) of Theorem 4.2 (paper (16)) under :math:`X_k^TX_k = \beta I`,
    :math:`P^TP = \nu I`.

    ``form="printed"`` (verbatim):

    .. math::

        \lambda_k^* = \frac{\sigma^2}{\upsilon_k^2\nu},\quad
        \alpha_{ki}^* = \frac{B_k}{\sigma^2+\beta\upsilon_i^2},\quad
        A_k = \Big(\sum_{i\ne k}\frac{1}{\sigma^2+\beta\upsilon_i^2}\Big)^{-1},\quad
        B_k = \frac{A_k(\sigma^2+\beta\upsilon_k^2)}{\sigma^2 + A_k\beta\upsilon_k^2}.

    Reading of :math:`\alpha_{kk}`: (16) states the formula for "i ∈ [K]" and (13)–(14), (44)
    sum over i = 1..K, so the textual reading is ``"included"`` (:math:`\alpha_{kk}^* =
    B_k/(\sigma^2+\beta\upsilon_k^2)`); only :math:`A_k` excludes k. ``"excluded"`` sets
    :math:`\alpha_{kk} = 0` and keeps the printed values for i ≠ k. As printed, neither
    reading gives :math:`\sum_i\alpha_{ki} = 1` in general (see ``alpha_sum``).

    ``form="corrected"`` returns the exact minimiser of the conditional risk (15) derived in
    the module docstring:

    * ``"included"``: the printed λ*, and :math:`B_k = A_k(\sigma^2+\beta\upsilon_k^2)/
      (\sigma^2 + A_k + \beta\upsilon_k^2)` (the dimensionally consistent denominator); then
      :math:`\sum_{i=1}^K\alpha_{ki} = 1` and :math:`\tilde w_k` equals the posterior mean.
    * ``"excluded"``: :math:`\lambda = \beta\sigma^2/(\nu(A_k + \beta\upsilon_k^2))`,
      :math:`\alpha_{kk} = 0`, :math:`\alpha_{ki} = A_k/(\sigma^2+\beta\upsilon_i^2)`
      (``B`` reports :math:`A_k`).

    Parameters
    ----------
    k : int
    upsilon : array_like, shape (K,), > 0
    sigma, beta, nu : float, > 0
    alpha_kk : {"included", "excluded"}
    form : {"printed", "corrected"}

    Returns
    -------
    Theorem42
    """
    ups = _upsilon(upsilon, None)
    K = ups.shape[0]
    if K < 2:
        raise ValueError("upsilon must have at least 2 clients")
    k = _index(k, K)
    s2 = _scalar(sigma, "sigma", positive=True) ** 2
    b = _scalar(beta, "beta", positive=True)
    v = _scalar(nu, "nu", positive=True)
    _choice(alpha_kk, "alpha_kk", ("included", "excluded"))
    _choice(form, "form", ("printed", "corrected"))

    denom_i = s2 + b * ups**2  # σ² + βυ_i²
    others = np.arange(K) != k
    A = 1.0 / np.sum(1.0 / denom_i[others])
    bu = b * ups[k] ** 2
    if form == "printed":
        lam = s2 / (ups[k] ** 2 * v)
        B = A * (s2 + bu) / (s2 + A * bu)
    elif alpha_kk == "included":
        lam = s2 / (ups[k] ** 2 * v)
        B = A * (s2 + bu) / (s2 + A + bu)
    else:
        lam = b * s2 / (v * (A + bu))
        B = A
    alpha = B / denom_i
    if alpha_kk == "excluded":
        alpha[k] = 0.0
    alpha = _frozen(alpha)
    return Theorem42(
        k=k, lam=float(lam), alpha=alpha, A=float(A), B=float(B), alpha_sum=float(alpha.sum()),
        form=form, alpha_kk=alpha_kk,
    )


# ---------------------------------------------------------------------------------------------
# exact conditional risk
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RiskTerms:
    r"""Decomposition of the conditional risk; ``total`` is the sum of the four terms.

    ``bias`` = :math:`(m-\mu_k)^TW(m-\mu_k)`, ``posterior`` = :math:`\mathrm{tr}(W\bar\Sigma_k)`,
    ``aggregation`` = :math:`\mathrm{tr}(W C_\xi)` (residual spread of the other clients'
    estimates; 0 under ``condition_on="all"``), ``noise`` = :math:`n\sigma^2` (prediction
    metric) or 0 (parameter metric).
    """

    bias: float
    posterior: float
    aggregation: float
    noise: float
    total: float


class _RiskModel:
    """Pre-computed pieces of the conditional risk for one client (internal)."""

    def __init__(self, setting, k, w_hat, condition_on, metric):
        if not isinstance(setting, LinearSetting):
            raise ValueError("setting must be a LinearSetting")  # noqa: TRY004
        K, d = setting.n_clients, setting.dim
        self.k = _index(k, K)
        self.condition_on = _choice(condition_on, "condition_on", ("paper", "all"))
        self.metric = _choice(metric, "metric", ("prediction", "parameter"))
        self.w_hat = local_estimates(setting) if w_hat is None else _check_w_hat(w_hat, K, d)
        self.G_all = setting.XtX
        self.G = self.G_all[self.k]
        self.Q = setting.PtP
        self.K, self.d = K, d
        self.sigma = setting.sigma
        self.post = _posterior(self.G_all, self.w_hat, self.k, setting.upsilon, setting.sigma)
        self.W = self.G if self.metric == "prediction" else np.eye(d)
        self.noise = setting.n_samples * setting.sigma**2 if self.metric == "prediction" else 0.0
        self.post_term = float(np.trace(self.W @ self.post.cov))
        self.others = np.arange(K) != self.k
        trq = float(np.trace(self.Q))
        self.lam_scale = float(np.trace(self.G)) / trq if trq > 0 else 1.0

    def check(self, lam_k, alpha_k):
        lam = _scalar(lam_k, "lam_k", nonnegative=True)
        alpha = _finite_array(alpha_k, "alpha_k", shape=(self.K,))
        return lam, alpha

    def terms(self, lam, alpha) -> RiskTerms:
        k, G, Q, p = self.k, self.G, self.Q, self.post
        M = np.linalg.inv(G + lam * Q)
        if self.condition_on == "all":
            m = M @ (G @ self.w_hat[k] + lam * (Q @ (alpha @ self.w_hat)))
            agg = 0.0
        else:
            a_o = alpha[self.others]
            s = float(a_o.sum())
            # E[Σ_i α_i ŵ_i | ŵ_k, θ̄] = α_k ŵ_k + s θ̄ ; residual covariance
            # V = Cov(Σ_{i≠k} α_i r_i) = Σ_{i≠k} α_i² Σ_i − s² Σ̄_{\k}
            mean_target = alpha[k] * self.w_hat[k] + s * p.theta_bar_minus_k
            m = M @ (G @ self.w_hat[k] + lam * (Q @ mean_target))
            V = np.einsum("i,iab->ab", a_o**2, p.Sigma[self.others]) - s**2 * p.Sigma_bar_minus_k
            L = lam * (M @ Q)
            agg = float(np.trace(self.W @ L @ V @ L.T))
        diff = m - p.mean
        bias = float(diff @ self.W @ diff)
        total = bias + self.post_term + agg + self.noise
        return RiskTerms(bias=bias, posterior=self.post_term, aggregation=agg, noise=self.noise,
                         total=total)

    def estimator(self, lam, alpha):
        return _ckt(self.G, self.Q, self.w_hat, self.k, lam, alpha)


def conditional_risk(
    k: int,
    lam_k: float,
    alpha_k,
    setting: LinearSetting,
    *,
    w_hat=None,
    condition_on: Literal["paper", "all"] = "paper",
    metric: Literal["prediction", "parameter"] = "prediction",
    return_terms: bool = False,
):
    r"""Exact conditional expected test loss of :math:`\tilde w_k(\lambda_k, \alpha_k)`, paper (15).

    Definition (``metric="prediction"``, the paper's (15)/(47)):

    .. math::

        R_k(\lambda, \alpha) = E\big[\|X_k\tilde w_k - (X_kw_k + z)\|^2 \,\big|\,
        \hat w_k, \bar\theta_{\setminus k}\big],\qquad z \sim N(0, \sigma^2 I_n)\ \text{fresh}.

    Closed form. Write :math:`G = X_k^TX_k`, :math:`Q = P^TP`, :math:`M = (G+\lambda Q)^{-1}`,
    :math:`s = \sum_{i\ne k}\alpha_{ki}`. Given :math:`(\hat w_k, \bar\theta_{\setminus k})`,
    (i) :math:`w_k \sim N(\mu_k, \bar\Sigma_k)` (posterior, :func:`posterior_mean`), (ii) the
    GLS residuals :math:`r_i = \hat w_i - \bar\theta_{\setminus k}` (i ≠ k) are independent of
    :math:`(w_k, \hat w_k, \bar\theta_{\setminus k})` with
    :math:`\mathrm{Cov}(\sum_{i\ne k}\alpha_{ki}r_i) = V = \sum_{i\ne k}\alpha_{ki}^2\Sigma_i - s^2
    \bar\Sigma_{\setminus k}`, (iii) z is independent. Hence
    :math:`\tilde w_k = m + \xi` with
    :math:`m = M(G\hat w_k + \lambda Q(\alpha_{kk}\hat w_k + s\,\bar\theta_{\setminus k}))`,
    :math:`\xi = \lambda MQ\sum_{i\ne k}\alpha_{ki}r_i`, and

    .. math::

        R_k = (m-\mu_k)^TG(m-\mu_k) + \mathrm{tr}(G\bar\Sigma_k)
              + \lambda^2\,\mathrm{tr}(G\,MQVQM^T) + n\sigma^2 .

    ``condition_on="all"`` conditions on every :math:`\hat w_i` instead: m becomes the realised
    :math:`\tilde w_k` and the :math:`V` term disappears. ``metric="parameter"`` replaces G by
    I and drops :math:`n\sigma^2` (the paper's (49)). Valid for any α (no sum constraint).

    Parameters
    ----------
    k : int
    lam_k : float, >= 0
    alpha_k : array_like, shape (K,)
    setting : LinearSetting
        Supplies :math:`X_k`, P, :math:`\upsilon`, σ (and the data, unless ``w_hat`` is given).
    w_hat : array_like (K, d), optional
        Local estimates to condition on (default :func:`local_estimates`).
    condition_on : {"paper", "all"}
    metric : {"prediction", "parameter"}
    return_terms : bool
        Return a :class:`RiskTerms` decomposition.

    Returns
    -------
    float or RiskTerms
    """
    model = _RiskModel(setting, k, w_hat, condition_on, metric)
    lam, alpha = model.check(lam_k, alpha_k)
    t = model.terms(lam, alpha)
    return t if return_terms else t.total


def bayes_risk(k: int, setting: LinearSetting, *, w_hat=None,
               metric: Literal["prediction", "parameter"] = "prediction") -> float:
    r"""Risk of the posterior mean: :math:`\mathrm{tr}(W\bar\Sigma_k)` + noise, the smallest
    conditional risk of any estimator (under both conditionings)."""
    model = _RiskModel(setting, k, w_hat, "paper", metric)
    return model.post_term + model.noise


# ---------------------------------------------------------------------------------------------
# numerical minimisation
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RiskMinimum:
    r"""Result of :func:`minimise_risk`.

    Attributes
    ----------
    lam : float
    alpha : ndarray (K,)
    risk : float
        Exact conditional risk at (lam, alpha).
    estimator : ndarray (d,)
        :math:`\tilde w_k(\text{lam}, \text{alpha})`.
    success : bool
        Whether the best start reported convergence.
    start_risks : ndarray
        Final risk of every start (their spread indicates multimodality / flatness).
    messages : tuple of str
    nfev : int
        Total objective evaluations.
    """

    k: int
    lam: float
    alpha: np.ndarray
    risk: float
    estimator: np.ndarray
    success: bool
    start_risks: np.ndarray
    messages: tuple
    nfev: int
    alpha_constraint: str
    alpha_kk: str


_LOG_BOUND = 30.0


def minimise_risk(
    k: int,
    setting: LinearSetting,
    *,
    w_hat=None,
    condition_on: Literal["paper", "all"] = "paper",
    metric: Literal["prediction", "parameter"] = "prediction",
    alpha_constraint: Literal["affine", "simplex"] = "affine",
    alpha_kk: Literal["free", "zero"] = "free",
    n_starts: int = 6,
    random_state=0,
) -> RiskMinimum:
    r"""Numerically minimise the exact conditional risk over :math:`(\lambda_k, \alpha_{k\cdot})`.

    Feasible set. The paper's (1) requires :math:`\sum_{i=1}^K\alpha_{ki} = 1` (i = k
    included) and nothing else; ``alpha_constraint="affine"`` (default) imposes exactly that,
    ``"simplex"`` adds :math:`\alpha \ge 0` (clustering weights). ``alpha_kk="zero"`` fixes
    :math:`\alpha_{kk} = 0` (the "excluded" reading). :math:`\lambda_k \ge 0`.

    Reparametrisation: :math:`\lambda = c\,e^{t}` with :math:`c = \mathrm{tr}(G)/\mathrm{tr}(Q)`,
    :math:`t \in [-30, 30]`; simplex weights by a softmax of logits in [-30, 30]; affine weights
    by free coordinates with one reference weight set to 1 minus their sum. Each start runs
    L-BFGS-B (numerical gradients); starts are the uniform weights with t ∈ {0, ±2} and random
    ones. The best final risk is returned with every start's risk.

    Parameters
    ----------
    k : int
    setting : LinearSetting
    w_hat, condition_on, metric
        As in :func:`conditional_risk`.
    alpha_constraint : {"affine", "simplex"}
    alpha_kk : {"free", "zero"}
    n_starts : int, >= 1
    random_state : None, int or Generator

    Returns
    -------
    RiskMinimum
    """
    model = _RiskModel(setting, k, w_hat, condition_on, metric)
    _choice(alpha_constraint, "alpha_constraint", ("affine", "simplex"))
    _choice(alpha_kk, "alpha_kk", ("free", "zero"))
    n_starts = _int(n_starts, "n_starts", minimum=1)
    rng = _rng(random_state)
    K, kk = model.K, model.k
    free_idx = np.arange(K) if alpha_kk == "free" else np.flatnonzero(np.arange(K) != kk)
    nf = free_idx.size

    if alpha_constraint == "simplex":
        n_par = nf

        def to_alpha(u):
            e = np.exp(u - u.max())
            a = np.zeros(K)
            a[free_idx] = e / e.sum()
            return a

        def uniform_u():
            return np.zeros(n_par)

        def random_u():
            return rng.normal(scale=2.0, size=n_par)
    else:
        ref = free_idx[0] if alpha_kk == "zero" else kk
        coords = np.array([i for i in free_idx if i != ref], dtype=int)
        n_par = coords.size

        def to_alpha(u):
            a = np.zeros(K)
            a[coords] = u
            a[ref] = 1.0 - u.sum()
            return a

        def uniform_u():
            return np.full(n_par, 1.0 / nf)

        def random_u():
            return rng.dirichlet(np.ones(nf))[1:] if nf > 1 else np.zeros(0)

    def unpack(x):
        t = float(np.clip(x[0], -_LOG_BOUND, _LOG_BOUND))
        return model.lam_scale * math.exp(t), to_alpha(x[1:])

    def objective(x):
        lam, a = unpack(x)
        return model.terms(lam, a).total

    starts = [np.concatenate([[t0], uniform_u()]) for t0 in (0.0, 2.0, -2.0)][:n_starts]
    while len(starts) < n_starts:
        starts.append(np.concatenate([[rng.uniform(-4, 4)], random_u()]))
    u_bound = (-_LOG_BOUND, _LOG_BOUND) if alpha_constraint == "simplex" else (None, None)
    bounds = [(-_LOG_BOUND, _LOG_BOUND)] + [u_bound] * n_par
    scale = max(abs(objective(starts[0])), 1e-300)
    results = []
    for x0 in starts:
        res = sopt.minimize(
            lambda x: objective(x) / scale, x0, method="L-BFGS-B", bounds=bounds,
            options={"ftol": 1e-15, "gtol": 1e-11, "maxiter": 2000, "maxfun": 20000},
        )
        results.append(res)
    finals = np.array([objective(r.x) for r in results])
    best = int(np.argmin(finals))
    lam, alpha = unpack(results[best].x)
    return RiskMinimum(
        k=kk, lam=lam, alpha=_frozen(alpha), risk=float(finals[best]),
        estimator=_frozen(model.estimator(lam, alpha)), success=bool(results[best].success),
        start_risks=_frozen(finals), messages=tuple(str(r.message) for r in results),
        nfev=int(sum(r.nfev for r in results)), alpha_constraint=alpha_constraint,
        alpha_kk=alpha_kk,
    )


# ---------------------------------------------------------------------------------------------
# Monte Carlo
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MonteCarloRisk:
    """Monte Carlo estimate of the conditional risk with its standard error and a normal CI."""

    estimate: float
    std_error: float
    ci_low: float
    ci_high: float
    confidence: float
    n_draws: int


def monte_carlo_risk(
    k: int,
    lam_k: float,
    alpha_k,
    setting: LinearSetting,
    *,
    n_draws: int,
    random_state=None,
    w_hat=None,
    condition_on: Literal["paper", "all"] = "paper",
    metric: Literal["prediction", "parameter"] = "prediction",
    confidence: float = 0.95,
) -> MonteCarloRisk:
    r"""Monte Carlo estimate of the risk of :func:`conditional_risk` (same definition).

    Each draw samples, given :math:`(\hat w_k, \bar\theta_{\setminus k})`:
    :math:`w_k \sim N(\mu_k, \bar\Sigma_k)`; for ``condition_on="paper"`` the other clients'
    estimates :math:`\hat w_i = \bar\theta_{\setminus k} + r_i`, with residuals built from
    fresh :math:`\eta_i \sim N(0, \Sigma_i)` as :math:`r_i = \eta_i - \bar\Sigma_{\setminus k}
    \sum_{j\ne k}\Sigma_j^{-1}\eta_j` (no moment formula is used); fresh test noise
    :math:`z \sim N(0, \sigma^2 I_n)`. It then evaluates the loss
    :math:`\|X_k\tilde w_k - (X_kw_k + z)\|^2` (or :math:`\|\tilde w_k - w_k\|^2`) by
    recomputing (14). Returns the mean, its standard error and a normal-approximation CI.

    Parameters
    ----------
    k, lam_k, alpha_k, setting, w_hat, condition_on, metric
        As in :func:`conditional_risk`.
    n_draws : int, >= 2
    random_state : None, int or Generator
    confidence : float in (0, 1)

    Returns
    -------
    MonteCarloRisk
    """
    model = _RiskModel(setting, k, w_hat, condition_on, metric)
    lam, alpha = model.check(lam_k, alpha_k)
    n_draws = _int(n_draws, "n_draws", minimum=2)
    conf = _scalar(confidence, "confidence")
    if not 0 < conf < 1:
        raise ValueError(f"confidence must be in (0, 1), got {conf}")
    rng = _rng(random_state)
    p, kk, d = model.post, model.k, model.d
    Xk = setting.X[kk]
    n = Xk.shape[0]
    A = np.linalg.solve(model.G + lam * model.Q, np.hstack([model.G, lam * model.Q]))
    Ak, Aq = A[:, :d], A[:, d:]  # w̃ = Ak ŵ_k + Aq (Σ α_i ŵ_i)
    Lpost = np.linalg.cholesky(p.cov)
    others = np.flatnonzero(model.others)
    Lsig = np.stack([np.linalg.cholesky(p.Sigma[i]) for i in others])
    Sinv = np.stack([np.linalg.inv(p.Sigma[i]) for i in others])
    losses = np.empty(n_draws)
    chunk = 20000
    for start in range(0, n_draws, chunk):
        b = min(chunk, n_draws - start)
        wk = p.mean + rng.standard_normal((b, d)) @ Lpost.T
        if model.condition_on == "paper":
            eta = np.einsum("iab,nib->nia", Lsig, rng.standard_normal((b, others.size, d)))
            gls = np.einsum("ab,nb->na", p.Sigma_bar_minus_k, np.einsum("iab,nib->na", Sinv, eta))
            w_o = p.theta_bar_minus_k + eta - gls[:, None, :]
            target = alpha[kk] * model.w_hat[kk] + np.einsum("i,nia->na", alpha[others], w_o)
        else:
            target = np.broadcast_to(alpha @ model.w_hat, (b, d))
        wt = model.w_hat[kk] @ Ak.T + target @ Aq.T
        if model.metric == "prediction":
            z = setting.sigma * rng.standard_normal((b, n))
            resid = (wt - wk) @ Xk.T - z
        else:
            resid = wt - wk
        losses[start:start + b] = np.einsum("na,na->n", resid, resid)
    est = float(losses.mean())
    se = float(losses.std(ddof=1) / math.sqrt(n_draws))
    q = float(sstats.norm.ppf(0.5 + conf / 2))
    return MonteCarloRisk(estimate=est, std_error=se, ci_low=est - q * se, ci_high=est + q * se,
                          confidence=conf, n_draws=n_draws)


# ---------------------------------------------------------------------------------------------
# the comparison a theory check calls
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClosedFormEvaluation:
    r"""One closed form (form × reading of :math:`\alpha_{kk}`) evaluated exactly.

    ``rel_gap_to_numerical`` = (risk − numerical risk)/numerical risk (negative only within
    optimiser error), ``rel_gap_to_bayes`` = (risk − Bayes risk)/Bayes risk,
    ``excess_over_bayes`` = risk − Bayes risk (the part not diluted by the noise floor),
    ``dist_to_posterior_mean`` = :math:`\|\tilde w_k(\lambda, \alpha) - \mu_k\|`.
    """

    form: str
    alpha_kk: str
    lam: float
    alpha: np.ndarray
    alpha_sum: float
    risk: float
    rel_gap_to_numerical: float
    rel_gap_to_bayes: float
    excess_over_bayes: float
    dist_to_posterior_mean: float


@dataclass(frozen=True)
class Theorem42Comparison:
    r"""Report of :func:`compare_theorem_4_2`.

    Attributes
    ----------
    k : int
    isotropic : bool
        True when :math:`X_k^TX_k = \beta I` and :math:`P^TP = \nu I` hold for *all* clients to
        ``1e-9`` relative; ``isotropy_deviation`` gives the largest relative deviation.
    beta, nu : float
        Constants used in the closed forms (the setting's, or trace/d plug-ins).
    printed : ClosedFormEvaluation
        The printed Theorem 4.2 under the textual reading (α_kk included).
    closed_forms : tuple of ClosedFormEvaluation
        printed/included, printed/excluded, corrected/included, corrected/excluded.
    numerical : RiskMinimum
        Numerical minimiser over λ ≥ 0, Σα = 1 (α_kk free).
    risk_numerical, risk_posterior_mean : float
        ``risk_posterior_mean`` is the Bayes risk (lower bound for every estimator).
    rel_gap_numerical_to_bayes : float
    numerical_dist_to_posterior_mean : float
    posterior_mean : ndarray (d,)
    """

    k: int
    isotropic: bool
    isotropy_deviation: float
    beta: float
    nu: float
    condition_on: str
    metric: str
    printed: ClosedFormEvaluation
    closed_forms: tuple
    numerical: RiskMinimum
    risk_numerical: float
    risk_posterior_mean: float
    rel_gap_numerical_to_bayes: float
    numerical_dist_to_posterior_mean: float
    posterior_mean: np.ndarray

    def closed_form(self, form: str, alpha_kk: str) -> ClosedFormEvaluation:
        """The evaluation for ``form`` in {"printed", "corrected"} and the given reading."""
        for cf in self.closed_forms:
            if cf.form == form and cf.alpha_kk == alpha_kk:
                return cf
        raise ValueError(f"no closed form with form={form!r}, alpha_kk={alpha_kk!r}")

    def summary(self) -> str:
        """A plain-text table of the comparison."""
        lines = [
            (
                f"Theorem 4.2, client k={self.k}: isotropic={self.isotropic} "
                f"(deviation {self.isotropy_deviation:.1e}), beta={self.beta:.6g}, "
                f"nu={self.nu:.6g}, condition_on={self.condition_on}, metric={self.metric}"
            ),
            (
                f"  Bayes (posterior-mean) risk {self.risk_posterior_mean:.10g}; numerical "
                f"minimum {self.risk_numerical:.10g} "
                f"(rel gap {self.rel_gap_numerical_to_bayes:.2e}, "
                f"|w~ - mu| {self.numerical_dist_to_posterior_mean:.2e}, "
                f"success={self.numerical.success})"
            ),
        ]
        for cf in self.closed_forms:
            lines.append(
                f"  {cf.form:9s}/{cf.alpha_kk:8s}: lam={cf.lam:.6g} sum(alpha)={cf.alpha_sum:.6f} "
                f"risk={cf.risk:.10g} rel_gap_num={cf.rel_gap_to_numerical:.2e} "
                f"excess={cf.excess_over_bayes:.3e} |w~ - mu|={cf.dist_to_posterior_mean:.2e}"
            )
        return "\n".join(lines)


def compare_theorem_4_2(
    setting: LinearSetting,
    k: int,
    *,
    w_hat=None,
    condition_on: Literal["paper", "all"] = "paper",
    metric: Literal["prediction", "parameter"] = "prediction",
    n_starts: int = 6,
    random_state=0,
) -> Theorem42Comparison:
    r"""Compare Theorem 4.2's closed form with the exact risk minimiser and the posterior mean.

    Evaluates, with the exact :func:`conditional_risk`: the printed (16) under both readings of
    :math:`\alpha_{kk}`, the corrected closed forms (:func:`theorem_4_2`), the numerical
    minimiser (:func:`minimise_risk`, Σα = 1 as in the paper's (1), α_kk free) and the
    posterior mean (the Bayes risk). Numbers are reported as computed; nothing is tuned. For a
    non-isotropic setting the closed forms use :math:`\beta = \mathrm{tr}(X_k^TX_k)/d`,
    :math:`\nu = \mathrm{tr}(P^TP)/d` (outside the theorem's assumptions; ``isotropic`` is
    False and ``isotropy_deviation`` says how far).

    Parameters
    ----------
    setting : LinearSetting
    k : int
    w_hat, condition_on, metric
        As in :func:`conditional_risk`.
    n_starts, random_state
        Passed to :func:`minimise_risk`.

    Returns
    -------
    Theorem42Comparison
    """
    model = _RiskModel(setting, k, w_hat, condition_on, metric)
    kk, d = model.k, model.d
    G_all, Q = model.G_all, model.Q
    if setting.isotropic and setting.beta is not None and setting.nu is not None:
        beta, nu = setting.beta, setting.nu
    else:
        beta, nu = float(np.trace(model.G)) / d, float(np.trace(Q)) / d
    eye = np.eye(d)
    dev = max(
        float(np.max(np.abs(G_all - beta * eye))) / beta,
        float(np.max(np.abs(Q - nu * eye))) / nu if nu > 0 else float("inf"),
    )
    isotropic = dev <= 1e-9
    if nu <= 0:
        raise ValueError("setting.P must not be zero (P^T P = 0)")

    numerical = minimise_risk(
        kk, setting, w_hat=model.w_hat, condition_on=condition_on, metric=metric,
        n_starts=n_starts, random_state=random_state,
    )
    r_bayes = model.post_term + model.noise
    mu = model.post.mean
    r_num = numerical.risk

    evals = []
    for form in ("printed", "corrected"):
        for reading in ("included", "excluded"):
            th = theorem_4_2(kk, setting.upsilon, setting.sigma, beta, nu, alpha_kk=reading,
                             form=form)
            r = model.terms(th.lam, th.alpha).total
            evals.append(ClosedFormEvaluation(
                form=form, alpha_kk=reading, lam=th.lam, alpha=th.alpha, alpha_sum=th.alpha_sum,
                risk=r, rel_gap_to_numerical=(r - r_num) / r_num,
                rel_gap_to_bayes=(r - r_bayes) / r_bayes, excess_over_bayes=r - r_bayes,
                dist_to_posterior_mean=float(
                    np.linalg.norm(model.estimator(th.lam, th.alpha) - mu)
                ),
            ))
    return Theorem42Comparison(
        k=kk, isotropic=isotropic, isotropy_deviation=dev, beta=beta, nu=nu,
        condition_on=condition_on, metric=metric, printed=evals[0], closed_forms=tuple(evals),
        numerical=numerical, risk_numerical=r_num, risk_posterior_mean=r_bayes,
        rel_gap_numerical_to_bayes=(r_num - r_bayes) / r_bayes,
        numerical_dist_to_posterior_mean=float(np.linalg.norm(numerical.estimator - mu)),
        posterior_mean=_frozen(mu),
    )


# ---------------------------------------------------------------------------------------------
# clustered co-distillation (paper Algorithm 1) for linear models, on the federated runtime
# ---------------------------------------------------------------------------------------------
#
# Client k holds (X_k, Y_k) and a linear model W_k (d × N outputs), s(W, x) = xᵀW, so its
# logits on the public set are P W_k (|P| × N). Objective (1) with F_k the sum of squared
# errors, as in Sec. 4 / (13):
#
#     Φ_k(W; s̄_k) = ‖X_k W − Y_k‖²_F + (λ/|P|) Σ_{x∈P} ‖s̄_k(x) − s(W, x)‖²,
#
# so λ_k of (13)–(14) is λ/|P| and, for a fixed target s̄_k = P Σ_i α_ki W_i, the exact
# minimiser of Φ_k is ckt_estimator(X_kᵀX_k, W, k, λ/|P|, α_k, PᵀP).

from ._kmeans import kmeans  # noqa: E402
from .federated import Algorithm, run_federated  # noqa: E402
from .federated.reference import fedavg_least_squares  # noqa: E402

__all__ += [  # noqa: PLE0604
    "ToyExample",
    "codistillation",
    "codistillation_cost",
    "toy_example",
]


def _as_outputs(Y, n: int, name: str) -> np.ndarray:
    Y = _finite_array(Y, name)
    if Y.ndim == 1:
        Y = Y[:, None]
    if Y.ndim != 2 or Y.shape[0] != n:
        raise ValueError(f"{name} must have shape ({n},) or ({n}, N), got {Y.shape}")
    return Y


def _codistill_client(client_data, d: int, n_outputs: int):
    if not (isinstance(client_data, (tuple, list)) and len(client_data) == 2):
        raise ValueError("client_data entries must be pairs (X_k, Y_k)")
    X = _finite_array(client_data[0], "client_data X_k", ndim=2, shape=(None, d))
    Y = _as_outputs(client_data[1], X.shape[0], "client_data Y_k")
    if Y.shape[1] != n_outputs:
        raise ValueError(f"client_data Y_k must have {n_outputs} output column(s), "
                         f"got {Y.shape[1]}")
    return X, Y


def _codistill_grad(W, Xb, Yb, data_scale, Pb, target, lam_b):
    r""":math:`\nabla_W \Phi_k = 2X^T(XW - Y) + 2\tfrac{\lambda}{|P|} P^T(PW - \bar s)`, estimated
    on batches: ``data_scale`` = n_k / b rescales the private sum and ``lam_b`` = λ / b' the
    public mean (``target`` None: no distillation term)."""
    g = (2.0 * data_scale) * (Xb.T @ (Xb @ W - Yb))
    if target is not None:
        g += 2.0 * lam_b * (Pb.T @ (Pb @ W - target))
    return g


def _rows(rng, n, size):
    """Indices of a batch without replacement, or None for all rows."""
    return None if size is None or size >= n else rng.choice(n, size=size, replace=False)


def _nearest(centroids, logits):
    """Eq. (4): the centroid closest to the client's current logits."""
    d2 = ((centroids - logits[None]) ** 2).sum(axis=(1, 2))
    return centroids[int(np.argmin(d2))]


def codistillation(public, *, n_clusters: int = 2, lam: float = 1.0, n_outputs: int = 1,
                   step: float | None = None, local_steps: int = 10,
                   batch_size: int | None = None, public_batch_size: int | None = None,
                   init: Literal["local", "zeros"] = "local", n_init: int = 10) -> Algorithm:
    r"""PerFed-CKT's clustered co-distillation (paper Algorithm 1) for linear models.

    Client :math:`k` minimises objective (1) with :math:`F_k(W) = \|X_kW - Y_k\|_F^2` and the
    logits :math:`s(W, x) = x^TW` of a linear model:

    .. math::

        \Phi_k(W; \bar s_k) = \|X_kW - Y_k\|_F^2
            + \frac{\lambda}{|P|}\sum_{x\in P}\|\bar s_k(x) - x^TW\|^2 .

    Round :math:`t` (the runtime samples the participants :math:`S^{(t)}`):

    1. the server sends the centroids :math:`\{c_j\}` of its last clustering (none in the
       first round) to every participant;
    2. participant :math:`k` computes its logits :math:`s_k = PW_k` and takes the nearest
       centroid, :math:`\bar s_k = \arg\min_{c_j}\|c_j - s_k\|^2` (eq. (4)); it then takes
       ``local_steps`` (τ) gradient steps (update (2)) on :math:`\Phi_k(\cdot; \bar s_k)`,
       on mini-batches of ``batch_size`` private and ``public_batch_size`` public rows when
       given; without centroids the distillation term is absent (local training);
    3. it replies with its new logits :math:`PW_k` (:math:`|P| \times N` numbers);
    4. the server clusters the received logits (flattened) by k-means into
       :math:`\min(c, |R_t|)` clusters (scikit-learn ``KMeans``, seeded from the round's
       generator) and keeps the cluster means as the new centroids. If no reply arrived it
       keeps the old ones.

    Taking the centroid of one's own cluster makes :math:`\alpha_{k,i} = 1/|C|` for the
    members of the cluster (k included) and 0 otherwise; with ``n_clusters=1`` every client
    distils towards the plain average of all received logits (co-distillation without
    clustering, :math:`\alpha_{k,i} = 1/m`).

    Communication (numbers per round, what :func:`codistillation_cost` returns and the
    runtime's ``bytes / 8`` shows): :math:`m\,c\,|P|\,N` down (every participant gets all
    centroids) and :math:`m\,|P|\,N` up — independent of the model size d.

    Parameters
    ----------
    public : array_like (n_public, d)
        The unlabelled public inputs P (known to the clients).
    n_clusters : int, >= 1
        c of Algorithm 1.
    lam : float, >= 0
        λ of (1); :math:`\lambda_k = \lambda/|P|` in the ckt_estimator convention of (13).
    n_outputs : int
        N, the number of outputs (columns of :math:`Y_k`).
    step : float, optional
        η; ``None`` uses :math:`1/L_k`,
        :math:`L_k = 2\lambda_{\max}(X_k^TX_k) + 2\tfrac{\lambda}{|P|}\lambda_{\max}(P^TP)`.
    local_steps : int
        τ.
    batch_size, public_batch_size : int, optional
        b and b' (full batches when None).
    init : {"local", "zeros"}
        Start of each client's model: its least-squares solution (the locally trained model
        whose logits initialise Algorithm 1) or zeros.
    n_init : int
        k-means restarts.

    Returns
    -------
    Algorithm
        Client data: pairs ``(X_k, Y_k)``. Client state ``{"w"}`` (d, N); server state
        ``{"centroids"}`` (c', |P|, N) and ``{"labels"}`` (client id → cluster of the last
        clustering).
    """
    P = _finite_array(public, "public", ndim=2)
    n_pub, d = P.shape
    if n_pub < 1:
        raise ValueError("public must have at least one row")
    c = _int(n_clusters, "n_clusters", minimum=1)
    lam = _scalar(lam, "lam", nonnegative=True)
    N = _int(n_outputs, "n_outputs", minimum=1)
    eta = None if step is None else _scalar(step, "step", positive=True)
    tau = _int(local_steps, "local_steps", minimum=1)
    b = None if batch_size is None else _int(batch_size, "batch_size", minimum=1)
    bp = None if public_batch_size is None else _int(public_batch_size, "public_batch_size",
                                                      minimum=1)
    _choice(init, "init", ("local", "zeros"))
    n_init = _int(n_init, "n_init", minimum=1)
    L_pub = 2.0 * lam / n_pub * float(np.linalg.eigvalsh(P.T @ P)[-1])

    def client_init(client_data, rng):
        X, Y = _codistill_client(client_data, d, N)
        W = np.linalg.lstsq(X, Y, rcond=None)[0] if init == "local" else np.zeros((d, N))
        return {"w": W}

    def client_update(client_data, state, payload, rng):
        X, Y = _codistill_client(client_data, d, N)
        W = state["w"]
        cent = payload["centroids"]
        target = _nearest(cent, P @ W) if cent.shape[0] else None
        lr = eta if eta is not None else 1.0 / (
            2.0 * float(np.linalg.eigvalsh(X.T @ X)[-1]) + L_pub)
        for _ in range(tau):
            rows, prow = _rows(rng, X.shape[0], b), _rows(rng, n_pub, bp)
            Xb, Yb = (X, Y) if rows is None else (X[rows], Y[rows])
            Pb = P if prow is None else P[prow]
            tgt = target if target is None or prow is None else target[prow]
            W = W - lr * _codistill_grad(W, Xb, Yb, X.shape[0] / Xb.shape[0], Pb, tgt,
                                         lam / Pb.shape[0])
        return {"w": W}, {"logits": P @ W}

    def server_update(state, replies, t, rng):
        if not replies:
            return state
        ids = sorted(replies)
        S = np.stack([replies[i]["logits"].reshape(-1) for i in ids])
        labels, means = kmeans(S, min(c, len(ids)), seed=int(rng.integers(2**31 - 1)),
                               n_init=n_init)
        return {"centroids": means.reshape(-1, n_pub, N),
                "labels": {i: int(lab) for i, lab in zip(ids, labels, strict=True)}}

    return Algorithm(
        server_init=lambda rng: {"centroids": np.zeros((0, n_pub, N)), "labels": {}},
        client_init=client_init,
        server_payload=lambda state, cid, t: {"centroids": state["centroids"]},
        client_update=client_update,
        server_update=server_update,
        name=f"codistillation_c{c}",
    )


def codistillation_cost(n_public: int, n_outputs: int, n_clusters: int,
                        clients_per_round: int) -> dict:
    r"""Numbers sent in one round of :func:`codistillation` once centroids exist (the paper's
    "number of parameters communicated per round", uplink plus downlink).

    .. math::

        \text{down} = m\,c'\,|P|\,N,\qquad \text{up} = m\,|P|\,N,\qquad
        c' = \min(c, m),

    m the clients per round (all of them reply). The first round sends no centroids.

    Returns
    -------
    dict
        ``down``, ``up`` and ``total``.
    """
    n_pub = _int(n_public, "n_public", minimum=1)
    N = _int(n_outputs, "n_outputs", minimum=1)
    c = _int(n_clusters, "n_clusters", minimum=1)
    m = _int(clients_per_round, "clients_per_round", minimum=1)
    down, up = m * min(c, m) * n_pub * N, m * n_pub * N
    return {"down": down, "up": up, "total": down + up}


@dataclass(frozen=True)
class ToyExample:
    r"""Result of :func:`toy_example` (paper Fig. 1).

    Attributes
    ----------
    setting : LinearSetting
        The data (``setting.w`` are the true models).
    models : dict of str to ndarray (3, d)
        Each method's model for each client.
    distances : dict of str to ndarray (3,)
        :math:`\|w_k^{\text{method}} - w_k\|` for each client k.
    numbers_sent : dict of str to int
        Total numbers communicated (up + down) by the runtime methods over all rounds.
    clusters : ndarray (3,)
        The k-means labels of the clients' logits in the last round of ``codistill_clustered``.
    """

    setting: LinearSetting
    models: dict
    distances: dict
    numbers_sent: dict
    clusters: np.ndarray

    def summary(self) -> str:
        """A plain-text table of the distances."""
        K = self.setting.n_clients
        head = f"{'method':24s}" + "".join(f"  client {k}" for k in range(K))
        rows = [head] + [f"{m:24s}" + "".join(f"{v:10.4f}" for v in dist)
                         for m, dist in self.distances.items()]
        return "\n".join(rows)


def _toy_setting(rng, n_samples, sigma, n_public, zeta_std, x_range):
    ups = np.asarray(zeta_std, dtype=float)
    K, d = ups.shape[0], 2
    theta = rng.uniform(-10.0, 10.0, size=d)
    w = theta + ups[:, None] * rng.standard_normal((K, d))
    X = rng.uniform(-x_range, x_range, size=(K, n_samples, d))
    P = rng.uniform(-x_range, x_range, size=(n_public, d))
    y = np.einsum("knd,kd->kn", X, w) + sigma * rng.standard_normal((K, n_samples))
    return LinearSetting(X=X, y=y, P=P, upsilon=ups, sigma=sigma, theta=theta, w=w)


def _run_bits(algorithm, data, rounds, seed):
    res = run_federated(algorithm, data, rounds=rounds, random_state=seed, progress=False)
    tot = res.history.totals()
    return res, (tot["bytes_down"] + tot["bytes_up"]) // 8


def toy_example(*, random_state=0, n_samples: int = 20, sigma: float = 1.0,
                n_public: int = 20, lam: float = 50.0, rounds: int = 50,
                local_steps: int = 20, zeta_std=(2.0, 5.0, 200.0),
                x_range: float = 10.0) -> ToyExample:
    r"""The paper's toy example (Fig. 1, App. E): FedAvg vs co-distillation without and with
    clustering, as distances of each client's model to its true model.

    Setting (App. E): d = 2, three clients, :math:`w_k = \theta + \zeta_k` with
    :math:`\theta \sim U(-10, 10)^2` and :math:`\zeta_k \sim N(0, \sigma_k^2 I)`,
    :math:`\sigma_k = (2, 5, 200)` (read as standard deviations), so clients 0 and 1 are similar
    and client 2 is different; inputs and public inputs uniform on :math:`[-10, 10]^2`;
    λ = 50. Not given in the paper, chosen here: ``n_samples`` per client, label noise
    ``sigma``, ``n_public``; F_k is the sum of squared errors (the paper's (13)).

    Methods (all but ``local`` and the closed forms run on the federated runtime):

    * ``fedavg`` — :func:`convexfl.federated.fedavg_least_squares` (pooled least squares),
      step :math:`1/\lambda_{\max}(X^TX/M)`, one model for everyone;
    * ``local`` — :func:`local_estimates` (each client alone);
    * ``codistill`` — :func:`codistillation` with c = 1 (the simple average of all logits);
    * ``codistill_clustered`` — :func:`codistillation` with c = 2 (k-means on the logits);
    * ``closed_form_uniform`` / ``closed_form_clustered`` — the one-shot minimiser (14)
      (:func:`ckt_estimator`) with :math:`\lambda_k = \lambda/|P|`, targets built from the
      local estimates with :math:`\alpha_{k\cdot} = 1/3`, resp. :math:`1/|C|` within the
      k-means cluster of the local logits.

    ``numbers_sent`` counts what each runtime method communicated. With d = 2 and
    |P| = 20 public points co-distillation sends *more* than FedAvg (logits cost |P|·N numbers
    per client, a model d·N); the paper's savings need d ≫ |P|·N (deep models).

    Parameters
    ----------
    random_state : None, int or Generator
    n_samples, n_public : int
    sigma, lam : float
    rounds, local_steps : int
    zeta_std : sequence of 3 floats
    x_range : float

    Returns
    -------
    ToyExample
    """
    rng = _rng(random_state)
    n = _int(n_samples, "n_samples", minimum=2)
    sig = _scalar(sigma, "sigma", positive=True)
    n_pub = _int(n_public, "n_public", minimum=2)
    lam = _scalar(lam, "lam", nonnegative=True)
    T = _int(rounds, "rounds", minimum=1)
    tau = _int(local_steps, "local_steps", minimum=1)
    xr = _scalar(x_range, "x_range", positive=True)
    ups = _upsilon(zeta_std, 3, "zeta_std")
    setting = _toy_setting(rng, n, sig, n_pub, ups, xr)
    seed = int(rng.integers(2**31 - 1))
    data = [(setting.X[k], setting.y[k]) for k in range(3)]
    A = setting.X.reshape(-1, 2)
    fed = fedavg_least_squares(2, step=1.0 / float(np.linalg.eigvalsh(A.T @ A / A.shape[0])[-1]))
    res, sent_fed = _run_bits(fed, data, T, seed)
    models = {"fedavg": np.tile(res.server_state["x"], (3, 1)), "local": local_estimates(setting)}
    sent = {"fedavg": sent_fed}
    for name, c in (("codistill", 1), ("codistill_clustered", 2)):
        alg = codistillation(setting.P, n_clusters=c, lam=lam, local_steps=tau)
        res, sent[name] = _run_bits(alg, data, T, seed)
        models[name] = np.stack([s["w"][:, 0] for s in res.client_states])
        if c == 2:
            clusters = np.array([res.server_state["labels"][k] for k in range(3)])
    w_hat, G, Q = models["local"], setting.XtX, setting.PtP
    local_labels, _ = kmeans(w_hat @ setting.P.T, 2, seed=seed, n_init=10)
    for name, labels in (("closed_form_uniform", np.zeros(3)),
                         ("closed_form_clustered", local_labels)):
        alphas = [(labels == labels[k]) / np.sum(labels == labels[k]) for k in range(3)]
        models[name] = np.stack([_ckt(G[k], Q, w_hat, k, lam / n_pub, alphas[k])
                                 for k in range(3)])
    distances = {m: np.linalg.norm(v - setting.w, axis=1) for m, v in models.items()}
    return ToyExample(setting=setting, models=models, distances=distances, numbers_sent=sent,
                      clusters=clusters)
