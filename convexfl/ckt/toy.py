r"""PerFed-CKT's toy example (paper Fig. 1, App. E): FedAvg against co-distillation without
and with clustering, on three clients of the linear-regression model."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._kmeans import kmeans
from ..federated import run_federated
from ..federated.reference import fedavg_least_squares
from ._checks import _int, _rng, _scalar, _upsilon
from .codistill import codistillation
from .linear import LinearSetting, _ckt, local_estimates

__all__ = [
    "ToyExample",
    "toy_example",
]


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
