r"""The PPFL objective for generalised linear models: families, the two prediction forms,
the Laplacian penalty, the entropic mirror step, and the problem object.

Objective (``docs/math.md`` §2; the λ convention of this module)
-----------------------------------------------------------
K canonical models :math:`Θ ∈ R^{K×d_P}` (rows :math:`θ_k`), a shared part
:math:`ω ∈ R^{d_S}` and one membership vector :math:`π_i ∈ Δ_K` per client:

.. math::

    F(Θ, ω, Π) = \sum_i p_i f_i(Θ, ω, π_i) + \frac{α}{2}(\|Θ\|_F^2 + \|ω\|^2)
                 + \frac{λ}{2} \sum_{i,j} a_{ij} \|π_i - π_j\|^2 ,

:math:`p_i = m_i / M`, :math:`f_i = (1/m_i) \sum_j s_j φ(\bar t_j, y_j)` the mean negative
log-likelihood of the family with :math:`φ` the per-sample term of :mod:`convexfl._kernels`
(Gaussian → least squares :math:`φ = ½(t-y)^2`, Bernoulli → logistic, Poisson → log link),
evaluated at the canonical parameter :math:`\bar t_j` of the sample's predicted mean. Sample
:math:`j` of client :math:`i` has shared features :math:`u_j ∈ R^{d_S}` and personal
features :math:`x_j ∈ R^{d_P}`:

* parameter mixture (12), ``form="parameter"``:
  :math:`\bar t_j = u_j^\top ω + x_j^\top Θ^\top π_i`, personal coefficients
  :math:`β_i = Θ^\top π_i`;
* output mixture (11), ``form="output"``: with :math:`t_{jk} = u_j^\top ω + x_j^\top θ_k`,
  :math:`E[y_j] = \sum_k π_{ik} g^{-1}(t_{jk})`, i.e.
  :math:`\bar t_j = g(\sum_k π_{ik} g^{-1}(t_{jk}))` (:math:`g` the canonical link).
  For the Gaussian family both forms coincide.

The penalty equals :math:`λ\,\mathrm{tr}(Π^\top L Π)` with :math:`L = D - A`
(:math:`= λ π^\top (L ⊗ I_K) π`, paper (15)); its gradient is :math:`2λ L Π`. The authors'
public code uses :math:`D` in place of :math:`L` in that gradient; ``laplacian="degree_only"``
is the objective :math:`λ\,\mathrm{tr}(Π^\top D Π) = λ\sum_i d_i \|π_i\|^2` whose gradient that is.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit

from .. import _kernels as K
from .._validation import as_float_array, as_int, as_scalar, check_groups
from ..losses import LeastSquares, Logistic, Poisson
from . import _kernels as kern

__all__ = ["FAMILIES", "FORMS", "LAPLACIANS", "MIRRORS", "PPFLProblem", "get_family",
           "cosine_label_affinity", "label_histograms", "laplacian_matrix", "mirror_step"]

FORMS = ("parameter", "output")
LAPLACIANS = ("laplacian", "degree_only")
MIRRORS = ("entropic", "double_exp")


# ----------------------------------------------------------------------------- φ on arrays


def phi(code, t, y):
    """Vectorised ``φ`` of :mod:`convexfl._kernels` (any array shape, ``y`` broadcast):
    ``(φ, ∂φ/∂t, ∂²φ/∂t²)``."""
    t = np.asarray(t, dtype=float)
    yb = np.broadcast_to(np.asarray(y, dtype=float), t.shape)
    v, d1, d2 = kern.phi_arrays(code, np.ascontiguousarray(t.ravel()),
                                np.ascontiguousarray(yb.ravel()))
    return v.reshape(t.shape), d1.reshape(t.shape), d2.reshape(t.shape)


# ----------------------------------------------------------------------------- families


class _Family:
    """A GLM family: its φ (a code of :mod:`convexfl._kernels`; the output-mixture rule (11)
    is :func:`convexfl.ppfl._kernels.mix`) and its canonical link."""

    name = ""
    code = -1
    loss_cls = None
    curvature = {"parameter": np.inf, "output": np.inf}  # sup ∂²φ/∂t̄² (heuristic for (11))

    def targets(self, y):
        """Targets in the convention of ``φ`` (validated)."""
        return y

    def mean(self, t):
        """``g⁻¹(t)``."""
        raise NotImplementedError

    def cvxpy_nll_of_mean(self, mu, y):
        """``φ(g(μ), y)`` as a cvxpy expression of the mean ``μ`` (the π-block of (11) is
        convex in μ, not in ``t̄``)."""
        raise NotImplementedError


class _Gaussian(_Family):
    name, code, loss_cls = "gaussian", K.LEAST_SQUARES, LeastSquares
    curvature = {"parameter": 1.0, "output": 1.0}

    def mean(self, t):
        return np.asarray(t, dtype=float)

    def cvxpy_nll_of_mean(self, mu, y):
        import cvxpy as cp
        return 0.5 * cp.square(mu - y)


class _Binomial(_Family):
    name, code, loss_cls = "binomial", K.LOGISTIC, Logistic
    curvature = {"parameter": 0.25, "output": 1.0}

    def targets(self, y):
        ok = np.isin(y, (-1.0, 0.0, 1.0))
        if not np.all(ok):
            bad = np.unique(y[~ok])[:5].tolist()
            raise ValueError(f"y: binomial labels must be 0/1 (or -1/+1), found {bad}")
        return np.where(y > 0, 1.0, -1.0)

    def mean(self, t):
        return expit(np.asarray(t, dtype=float))

    def cvxpy_nll_of_mean(self, mu, y):
        import cvxpy as cp
        # y = +1: −log μ;  y = −1: −log(1 − μ)
        return -cp.log((1.0 - y) / 2.0 + cp.multiply(y, mu))


class _Poisson(_Family):
    name, code, loss_cls = "poisson", K.POISSON, Poisson

    def mean(self, t):
        return np.exp(np.asarray(t, dtype=float))

    def cvxpy_nll_of_mean(self, mu, y):
        import cvxpy as cp
        return mu - cp.multiply(y, cp.log(mu))


FAMILIES = {"gaussian": _Gaussian(), "binomial": _Binomial(), "poisson": _Poisson()}
_ALIASES = {"normal": "gaussian", "least_squares": "gaussian", "bernoulli": "binomial",
            "logistic": "binomial"}


def get_family(family):
    """The family object for a name (``"gaussian"``, ``"binomial"``, ``"poisson"``)."""
    if isinstance(family, _Family):
        return family
    name = _ALIASES.get(family, family) if isinstance(family, str) else None
    if name not in FAMILIES:
        raise ValueError(f"family: expected one of {sorted(FAMILIES)}, got {family!r}")
    return FAMILIES[name]


def check_choice(value, name, choices):
    """Return ``value`` if it is one of ``choices``, else raise naming ``name``."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name}: expected one of {list(choices)}, got {value!r}")
    return value


# ----------------------------------------------------------------------------- predictor


def _arrays(F_S, F_P, Theta, omega, Pi, cid):
    return (np.ascontiguousarray(F_S, dtype=float), np.ascontiguousarray(F_P, dtype=float),
            np.ascontiguousarray(Theta, dtype=float), np.ascontiguousarray(omega, dtype=float),
            np.ascontiguousarray(Pi, dtype=float), np.ascontiguousarray(cid, dtype=np.int64))


def predictor(family, form, F_S, F_P, Theta, omega, Pi, cid):
    """The canonical parameter ``t̄`` of every sample and ``∂t̄/∂π`` (m, K).

    Sample ``j`` has shared features ``F_S[j]``, personal features ``F_P[j]`` and the
    memberships ``Pi[cid[j]]``; see :mod:`convexfl.ppfl._kernels`.
    """
    F_S, F_P, Theta, omega, Pi, cid = _arrays(F_S, F_P, Theta, omega, Pi, cid)
    return kern.predict(family.code, form == "output", F_S, F_P, cid, Theta, omega, Pi)


def sample_terms(family, form, F_S, F_P, y, coef, Theta, omega, Pi, cid):
    """``Σ_j coef_j φ(t̄_j, y_j)`` and its gradients.

    Returns
    -------
    value : float
    g_Theta : (K, d_P)
    g_omega : (d_S,)
    g_Pi : array like ``Pi``
        Row ``i``: ``∂/∂π_i`` (only clients in ``cid`` are non-zero).
    """
    F_S, F_P, Theta, omega, Pi, cid = _arrays(F_S, F_P, Theta, omega, Pi, cid)
    return kern.terms(family.code, form == "output", F_S, F_P,
                      np.ascontiguousarray(y, dtype=float),
                      np.ascontiguousarray(coef, dtype=float), cid, Theta, omega, Pi)


# ----------------------------------------------------------------------------- graph


def laplacian_matrix(A, kind="laplacian"):
    """``L = D − A`` (``kind="laplacian"``) or ``D`` (``kind="degree_only"``)."""
    D = np.diag(A.sum(axis=1))
    return D - A if kind == "laplacian" else D


def label_histograms(labels, groups, classes=None):
    """Label counts per client (clients in sorted group order), shape (N, n_classes)."""
    labels = np.asarray(labels)
    _, user = check_groups(groups, labels.shape[0])
    classes = np.unique(labels) if classes is None else np.asarray(classes)
    col = np.searchsorted(classes, labels)
    if np.any(col >= len(classes)) or np.any(classes[np.minimum(col, len(classes) - 1)]
                                             != labels):
        raise ValueError("labels: contains values outside classes")
    H = np.zeros((user.max() + 1, len(classes)))
    np.add.at(H, (user, col), 1.0)
    return H


def cosine_label_affinity(labels, groups, classes=None):
    r"""The paper's affinity (App. C.3): cosine similarity of the clients' label histograms,
    :math:`a_{ij} = ⟨h_i, h_j⟩ / (\|h_i\|\|h_j\|)` (diagonal 1, as the authors' code)."""
    H = label_histograms(labels, groups, classes)
    Hn = H / np.linalg.norm(H, axis=1, keepdims=True)
    return np.clip(Hn @ Hn.T, 0.0, 1.0)


def check_affinity(A, n_clients):
    """Validate a user-given affinity: (N, N), finite, symmetric, ≥ 0."""
    A = as_float_array(A, "affinity", ndim=2)
    if A.shape != (n_clients, n_clients):
        raise ValueError(f"affinity: expected shape ({n_clients}, {n_clients}) (one row per "
                         f"client), got {A.shape}")
    if np.any(A < 0):
        raise ValueError("affinity: entries must be >= 0")
    if not np.allclose(A, A.T, rtol=1e-12, atol=1e-12):
        raise ValueError("affinity: must be symmetric")
    return 0.5 * (A + A.T)


# ----------------------------------------------------------------------------- mirror step


def mirror_step(pi, grad, step, *, kind="entropic", floor=0.0):
    r"""One mirror-descent step on the simplex, row-wise.

    ``kind="entropic"`` (the paper, (21)): :math:`π^+ ∝ π ⊙ \exp(-η g)`.
    ``kind="double_exp"`` (the authors' public code): :math:`π^+ ∝ π ⊙ \exp(\exp(-η g))`.
    With ``floor = ε > 0`` (paper Remark 2) the result is :math:`(π^+ + ε)/(1 + Kε)`, which
    stays on the simplex with every entry ``≥ ε/(1 + Kε)``.
    """
    check_choice(kind, "kind", MIRRORS)
    z = -step * np.asarray(grad, dtype=float)
    if kind == "double_exp":
        z = np.exp(np.minimum(z, 700.0))
    pi = np.asarray(pi, dtype=float)
    # normalise in log space over each row's support, so that zero entries stay zero and
    # the others cannot all underflow (which would give 0/0)
    with np.errstate(divide="ignore"):
        logw = np.where(pi > 0, np.log(pi) + z, -np.inf)
    w = np.exp(logw - np.max(logw, axis=-1, keepdims=True))
    w = w / np.sum(w, axis=-1, keepdims=True)
    if floor > 0.0:
        w = (w + floor) / (1.0 + w.shape[-1] * floor)
    return w


# ----------------------------------------------------------------------------- problem


class PPFLProblem:
    r"""The PPFL objective of a federated GLM data set (see the module docstring).

    Parameters
    ----------
    X_personal : array (M, d_P)
        Features whose coefficients are personalised (``Θᵀπ_i`` or the mixture (11)).
    y : array (M,)
        Targets (binomial: 0/1 or ±1; Poisson: counts ≥ 0).
    groups : array (M,)
        Client of each sample; clients are the distinct labels in sorted order.
    n_components : int
        Number of canonical models K.
    X_shared : array (M, d_S), optional
        Features whose coefficients ``ω`` are common to all clients.
    family : {"gaussian", "binomial", "poisson"}
    form : {"parameter", "output"}
        (12) or (11).
    lam : float
        λ ≥ 0, in the convention ``(λ/2) Σ_{i,j} a_ij ‖π_i − π_j‖²`` (ordered pairs).
    affinity : "auto", "uniform", "cosine_labels" or array (N, N)
        ``"uniform"``: ``a_ij = 1`` for ``i ≠ j``; ``"cosine_labels"``: cosine similarity of the
        label histograms (paper App. C.3; for discrete ``y``); ``"auto"``: cosine of label
        histograms for the binomial family, uniform otherwise; or a symmetric non-negative
        matrix.
    alpha : float
        Ridge ``(α/2)(‖Θ‖² + ‖ω‖²)``.
    sample_weight : array (M,), optional
        Per-sample weights ``s_j`` (``f_i`` is still divided by ``m_i``).
    simplex : bool
        Memberships on the simplex (PPFL) or unconstrained (the GLMM equivalence, form (12)).
    """

    def __init__(self, X_personal, y, groups, *, n_components, X_shared=None,
                 family="gaussian", form="parameter", lam=0.0, affinity="uniform", alpha=0.0,
                 sample_weight=None, simplex=True):
        self.family = get_family(family)
        self.form = check_choice(form, "form", FORMS)
        self.n_components = as_int(n_components, "n_components", low=1)
        self.lam = as_scalar(lam, "lam", low=0.0)
        self.alpha = as_scalar(alpha, "alpha", low=0.0)
        self.simplex = bool(simplex)
        if not self.simplex and self.form != "parameter":
            raise ValueError("simplex: unconstrained memberships need form='parameter'")
        self._set_data(X_personal, X_shared, y, groups, sample_weight)
        self._set_affinity(affinity, y, groups)

    # -- construction ----------------------------------------------------------------
    def _set_data(self, X_personal, X_shared, y, groups, sample_weight):
        XP = as_float_array(X_personal, "X_personal", ndim=2)
        XS = (np.zeros((XP.shape[0], 0)) if X_shared is None
              else as_float_array(X_shared, "X_shared", ndim=2, allow_empty=True))
        if XS.shape[0] != XP.shape[0]:
            raise ValueError(f"X_shared: has {XS.shape[0]} rows but X_personal has "
                             f"{XP.shape[0]}")
        y = as_float_array(y, "y", ndim=1)
        if y.shape[0] != XP.shape[0]:
            raise ValueError(f"y: has {y.shape[0]} entries but X has {XP.shape[0]} rows")
        loss = self.family.loss_cls(np.hstack([XS, XP]), self.family.targets(y), groups,
                                    sample_weight=sample_weight)
        self.loss = loss  # sorted per-client storage (the foundation's GLM loss)
        self.d_shared = XS.shape[1]
        self.F_S = np.ascontiguousarray(loss.F[:, :self.d_shared])
        self.F_P = np.ascontiguousarray(loss.F[:, self.d_shared:])
        self.y, self.coef, self.ptr = loss.y, loss.coef, loss.ptr
        self.user_labels = loss.user_labels
        self.n_samples = np.diff(self.ptr)
        self.client_of_sample = np.repeat(np.arange(self.n_clients), self.n_samples)
        self.p = self.n_samples / self.n_samples.sum()
        self.weights = self.coef * self.p[self.client_of_sample]  # s_j / M

    def _set_affinity(self, affinity, y, groups):
        N = self.n_clients
        if isinstance(affinity, str):
            check_choice(affinity, "affinity", ("auto", "uniform", "cosine_labels"))
            if affinity == "auto":
                affinity = "cosine_labels" if self.family.name == "binomial" else "uniform"
            A = (np.ones((N, N)) - np.eye(N) if affinity == "uniform"
                 else cosine_label_affinity(np.asarray(y), groups))
        else:
            A = check_affinity(affinity, N)
        self.A = A
        self.degrees = A.sum(axis=1)

    # -- shape -----------------------------------------------------------------------
    @property
    def n_clients(self):
        return len(self.n_samples)

    @property
    def d_personal(self):
        return self.F_P.shape[1]

    def __repr__(self):
        return (f"PPFLProblem(family={self.family.name!r}, form={self.form!r}, "
                f"n_clients={self.n_clients}, n_components={self.n_components}, "
                f"d_personal={self.d_personal}, d_shared={self.d_shared}, lam={self.lam})")

    def client_data(self):
        """One dict of arrays per client: ``F_S``, ``F_P``, ``y``, ``coef`` (``s_j / m_i``)."""
        return [{"F_S": self.F_S[a:b], "F_P": self.F_P[a:b], "y": self.y[a:b],
                 "coef": self.coef[a:b]}
                for a, b in zip(self.ptr[:-1], self.ptr[1:], strict=True)]

    def check_point(self, Theta, omega, Pi):
        """Validate ``(Θ, ω, Π)`` shapes and return them as float arrays."""
        Theta = as_float_array(Theta, "Theta", ndim=2)
        if Theta.shape != (self.n_components, self.d_personal):
            raise ValueError(f"Theta: expected shape ({self.n_components}, "
                             f"{self.d_personal}), got {Theta.shape}")
        omega = (np.zeros(0) if omega is None and self.d_shared == 0
                 else as_float_array(omega, "omega", ndim=1, allow_empty=True))
        if omega.shape != (self.d_shared,):
            raise ValueError(f"omega: expected shape ({self.d_shared},), got {omega.shape}")
        Pi = as_float_array(Pi, "Pi", ndim=2)
        if Pi.shape != (self.n_clients, self.n_components):
            raise ValueError(f"Pi: expected shape ({self.n_clients}, {self.n_components}), "
                             f"got {Pi.shape}")
        return Theta, omega, Pi

    # -- objective -------------------------------------------------------------------
    def _terms(self, Theta, omega, Pi):
        return sample_terms(self.family, self.form, self.F_S, self.F_P, self.y, self.weights,
                            Theta, omega, Pi, self.client_of_sample)

    def client_losses(self, Theta, omega, Pi):
        """``[f_i(Θ, ω, π_i)]_i`` (mean negative log-likelihoods), shape (N,)."""
        tbar = predictor(self.family, self.form, self.F_S, self.F_P, Theta, omega, Pi,
                         self.client_of_sample)[0]
        v = phi(self.family.code, tbar, self.y)[0]
        return np.bincount(self.client_of_sample, weights=self.coef * v,
                           minlength=self.n_clients)

    def ridge(self, Theta, omega):
        """``(α/2)(‖Θ‖² + ‖ω‖²)``."""
        return 0.5 * self.alpha * (float(np.sum(Theta ** 2)) + float(omega @ omega))

    def penalty(self, Pi, laplacian="laplacian"):
        """``(λ/2) Σ_ij a_ij ‖π_i − π_j‖² = λ tr(ΠᵀLΠ)``, or ``λ tr(ΠᵀDΠ)`` (degree only)."""
        M = laplacian_matrix(self.A, check_choice(laplacian, "laplacian", LAPLACIANS))
        return self.lam * float(np.sum(Pi * (M @ Pi)))

    def penalty_grad(self, Pi, laplacian="laplacian"):
        """``2λ L Π`` (or ``2λ D Π``), shape (N, K)."""
        return 2.0 * self.lam * (laplacian_matrix(self.A, laplacian) @ Pi)

    def surrogate(self, Pi, Pi_t):
        r"""The MM surrogate of the penalty at ``Π_t`` (paper (20)),

        .. math::

            λ[\mathrm{tr}(Π^\top DΠ) - 2\,\mathrm{tr}(Π^\top AΠ_t) + \mathrm{tr}(Π_t^\top AΠ_t)].

        It equals the penalty at ``Π_t``, has the same gradient ``2λLΠ_t`` there, and majorises
        it when ``A`` is positive semi-definite (as a cosine-similarity matrix is). It is
        separable over clients, so one mirror step on it is local; from ``Π_t`` that step is
        the mirror step with the true gradient.
        """
        AP = self.A @ Pi_t
        return self.lam * float(np.sum(self.degrees[:, None] * Pi ** 2) - 2 * np.sum(Pi * AP)
                                + np.sum(Pi_t * AP))

    def objective(self, Theta, omega, Pi, laplacian="laplacian"):
        """``F(Θ, ω, Π)`` (see the module docstring)."""
        Theta, omega, Pi = self.check_point(Theta, omega, Pi)
        return (self._terms(Theta, omega, Pi)[0] + self.ridge(Theta, omega)
                + self.penalty(Pi, laplacian))

    def gradient(self, Theta, omega, Pi, laplacian="laplacian"):
        """``(∇_Θ F, ∇_ω F, ∇_Π F)``."""
        Theta, omega, Pi = self.check_point(Theta, omega, Pi)
        _, gT, gw, gP = self._terms(Theta, omega, Pi)
        return (gT + self.alpha * Theta, gw + self.alpha * omega,
                gP + self.penalty_grad(Pi, laplacian))

    # -- predictions -----------------------------------------------------------------
    def personal_coefficients(self, Theta, omega, Pi):
        """``[ω, Θᵀπ_i]`` per client, shape (N, d_S + d_P) (exact for (12); for (11) the
        coefficients of the mean model only in the Gaussian case)."""
        return np.hstack([np.tile(omega, (self.n_clients, 1)), Pi @ Theta])

    def initial_point(self, rng, scale=0.1, Theta=None, omega=None, Pi=None):
        """``Θ`` with N(0, scale²) entries (paper App. C.3: random canonical models),
        ``ω = 0`` and ``π_i = 1/K`` (unconstrained: 0), unless given."""
        K = self.n_components
        Theta = rng.normal(scale=scale, size=(K, self.d_personal)) if Theta is None else Theta
        omega = np.zeros(self.d_shared) if omega is None else omega
        if Pi is None:
            Pi = np.full((self.n_clients, K), 1.0 / K if self.simplex else 0.0)
        return self.check_point(Theta, omega, Pi)
