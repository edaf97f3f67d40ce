r"""PerFed-CKT's linear-regression model and estimators (Cho, Wang, Chiruvolu, Joshi, Sec. 4,
App. B): the model, the CKT estimator (14), the Bayes-optimal estimator (12) and the closed
form of Theorem 4.2, printed and corrected. The risk they are judged by is in
:mod:`convexfl.ckt.risk`.

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

from ._checks import (
    _choice,
    _finite_array,
    _frozen,
    _index,
    _int,
    _psd,
    _rng,
    _scalar,
    _spd,
    _sym_inv,
    _upsilon,
)

__all__ = [
    "LinearSetting",
    "PosteriorParts",
    "Theorem42",
    "ckt_estimator",
    "local_estimates",
    "make_linear_setting",
    "posterior_mean",
    "theorem_4_2",
]


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
