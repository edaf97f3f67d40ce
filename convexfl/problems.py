r"""The formulations of docs/math.md §1 as data: what is minimised, never how.

Canonical sum-of-norms objective (the one the Armacki et al. theorems hold for):

.. math::

    F_λ(X) = \sum_i f_i(x_i) + λ \sum_{(i,j)∈E} w_{ij}\,\|x_i - x_j\|      \tag{SON}

**λ convention.** Every ``lam`` in convexfl is in the (SON) convention unless a function says
otherwise. The paper's eq. (3), ``(1/N) Σ f_i + λ_p Σ_{i≠j} w_ij ‖x_i − x_j‖`` (ordered
pairs), is (SON) with ``λ = 2 N λ_p``; its eq. (14), ``Σ f_i + λ_14 Σ_{i≠j} ‖z_ij‖``, is (SON)
with ``λ = 2 λ_14``. :func:`from_paper_lambda` and :func:`to_paper_lambda` convert.

Comparators (paper Sec. V): :func:`global_model` (one model for all), :func:`local_models`
(λ = 0), :func:`oracle` (one model per true cluster), :class:`SquaredPenalty` (paper (4)) and
the reduced problem (RED) of a partition, :class:`Reduced`. Global, local and oracle are all
(RED) instances, so one objective formula serves them all.
"""

from __future__ import annotations

import copy

import numpy as np

from ._validation import as_float_array, as_int, as_scalar, check_matrix_rows, check_partition
from .graphs import Graph
from .losses import Loss

__all__ = [
    "CONVENTIONS",
    "Reduced",
    "SquaredPenalty",
    "SumOfNorms",
    "from_paper_lambda",
    "global_model",
    "local_models",
    "oracle",
    "to_paper_lambda",
]

CONVENTIONS = {
    "son": "canonical (SON): Σ f_i + λ Σ_{i<j} w_ij ‖x_i − x_j‖",
    "eq3": "paper eq. (3): (1/N) Σ f_i + λ Σ_{i≠j} w_ij ‖x_i − x_j‖  (λ_SON = 2 N λ)",
    "eq14": "paper eq. (14): Σ f_i + λ Σ_{i≠j} ‖z_ij‖  (λ_SON = 2 λ)",
}


def _factor(n_users: int, form: str) -> float:
    if not isinstance(form, str) or form not in CONVENTIONS:
        raise ValueError(f"form: expected one of {sorted(CONVENTIONS)}, got {form!r}")
    n = as_int(n_users, "n_users", low=1)
    return {"son": 1.0, "eq3": 2.0 * n, "eq14": 2.0}[form]


def from_paper_lambda(lam: float, n_users: int, form: str = "eq3") -> float:
    """Convert a λ printed in the paper's ``form`` ("eq3" or "eq14") to the (SON) λ."""
    return as_scalar(lam, "lam", low=0.0) * _factor(n_users, form)


def to_paper_lambda(lam: float, n_users: int, form: str = "eq3") -> float:
    """Convert a (SON) λ to the paper's ``form`` ("eq3" or "eq14")."""
    return as_scalar(lam, "lam", low=0.0) / _factor(n_users, form)


def _check_loss_graph(loss, graph):
    if not isinstance(loss, Loss):
        raise TypeError(f"loss: expected a convexfl.losses loss, got {type(loss).__name__}")
    if not isinstance(graph, Graph):
        raise TypeError(f"graph: expected a convexfl.graphs.Graph, got {type(graph).__name__}")
    if graph.n_nodes != loss.n_users:
        raise ValueError(f"graph: has {graph.n_nodes} nodes but the loss has "
                         f"{loss.n_users} users")


class SumOfNorms:
    r"""The sum-of-norms problem (SON): ``Σ_i f_i(x_i) + λ Σ_{(i,j)∈E} w_ij ‖x_i − x_j‖``.

    Parameters
    ----------
    loss : convexfl.losses.Loss
    graph : convexfl.graphs.Graph
    lam : float
        λ ≥ 0, in the convention named by ``convention``; stored as :attr:`lam` in the
        canonical (SON) convention.
    convention : {"son", "eq3", "eq14"}
        How ``lam`` is given (see module docstring).
    """

    kind = "sum_of_norms"

    def __init__(self, loss: Loss, graph: Graph, lam: float, *, convention: str = "son"):
        _check_loss_graph(loss, graph)
        self.loss, self.graph = loss, graph
        self.lam_input = as_scalar(lam, "lam", low=0.0)
        if not isinstance(convention, str) or convention not in CONVENTIONS:
            raise ValueError(f"convention: expected one of {sorted(CONVENTIONS)}, "
                             f"got {convention!r}")
        self.convention = convention
        self.lam = from_paper_lambda(self.lam_input, loss.n_users, convention)

    @property
    def n_users(self) -> int:
        return self.loss.n_users

    @property
    def dim(self) -> int:
        return self.loss.dim

    def __repr__(self) -> str:
        return (f"SumOfNorms(loss={self.loss!r}, graph={self.graph!r}, lam={self.lam:g} "
                "[SON convention])")

    def check_X(self, X, name: str = "X", *, copy: bool = True) -> np.ndarray:
        return check_matrix_rows(X, self.n_users, self.dim, name, copy=copy)

    def objective(self, X, distances=None) -> float:
        """``F_λ(X)``; the one objective used by solvers, checks, tests and plots.
        ``distances``: ``graph.distances(X)`` when already computed."""
        X = self.check_X(X, copy=False)
        if distances is None:
            return self.loss.value(X) + self.lam * self.graph.penalty(X)
        return self.loss.value(X) + self.lam * float(self.graph.weights @ distances)

    def with_lam(self, lam: float) -> SumOfNorms:
        """The same loss and graph at another (SON) λ (a copy: they were checked already;
        a path asks for one per λ)."""
        out = copy.copy(self)
        out.lam_input = out.lam = as_scalar(lam, "lam", low=0.0)
        out.convention = "son"
        return out

    def reduced(self, partition) -> Reduced:
        """The reduced problem (RED) of ``partition`` at this λ."""
        return Reduced(self.loss, self.graph, partition, self.lam)


class SquaredPenalty:
    r"""The squared-penalty comparator (paper eq. (4)):
    ``Σ_i f_i(x_i) + γ Σ_{(i,j)∈E} w_ij ‖x_i − x_j‖²``. Smooth; never fuses for finite γ
    unless the local models coincide.
    """

    kind = "squared_penalty"

    def __init__(self, loss: Loss, graph: Graph, gamma: float):
        _check_loss_graph(loss, graph)
        self.loss, self.graph = loss, graph
        self.gamma = as_scalar(gamma, "gamma", low=0.0)

    n_users = SumOfNorms.n_users
    dim = SumOfNorms.dim
    check_X = SumOfNorms.check_X

    def objective(self, X) -> float:
        X = self.check_X(X)
        return self.loss.value(X) + self.gamma * self.graph.squared_penalty(X)

    def gradient(self, X) -> np.ndarray:
        """``∇f_i(x_i) + 2γ Σ_j w_ij (x_i − x_j)``, stacked (N, d)."""
        X = self.check_X(X)
        lap = self.graph.adjacency
        return self.loss.grad(X) + 2.0 * self.gamma * (self.graph.degree[:, None] * X - lap @ X)


class Reduced:
    r"""The reduced problem (RED) of a partition ``C_1..C_K`` (paper eq. (5)):

    .. math::

        \min_{w_1..w_K} \sum_k \sum_{i∈C_k} f_i(w_k) + λ \sum_{k<l} W_{kl}\|w_k - w_l\| ,
        \qquad W_{kl} = \sum_{i∈C_k, j∈C_l} w_{ij} .

    It is itself a (SON) problem on K "super-users" (:attr:`inner`), solved in the reduced
    space; :meth:`expand` maps ``W`` (K, d) to the clustered ``X`` (N, d) with
    ``x_i = w_k`` for ``i ∈ C_k``. The global model is K = 1, the oracle is the true
    partition at λ = 0 and the local models are singletons at λ = 0.
    """

    kind = "reduced"

    def __init__(self, loss: Loss, graph: Graph | None, partition, lam: float = 0.0):
        if not isinstance(loss, Loss):
            raise TypeError(f"loss: expected a convexfl.losses loss, got "
                            f"{type(loss).__name__}")
        self.loss = loss
        self.labels = check_partition(partition, loss.n_users)
        self.lam = as_scalar(lam, "lam", low=0.0)
        n_clusters = int(self.labels.max()) + 1
        if graph is None:
            if self.lam > 0 and n_clusters > 1:
                raise ValueError("graph: required when lam > 0 and there are several clusters")
            reduced_graph = Graph(n_clusters, np.zeros((0, 2)), np.zeros(0), kind="empty")
        else:
            _check_loss_graph(loss, graph)
            reduced_graph = graph.reduce(self.labels)
        self.graph = graph
        self.inner = SumOfNorms(loss.aggregate(self.labels), reduced_graph, self.lam)

    n_users = SumOfNorms.n_users
    dim = SumOfNorms.dim
    check_X = SumOfNorms.check_X

    @property
    def n_clusters(self) -> int:
        return self.inner.n_users

    def with_lam(self, lam: float) -> Reduced:
        """The same partition at another (SON) λ, sharing its reduced graph and loss."""
        lam = as_scalar(lam, "lam", low=0.0)
        if self.graph is None and lam > 0 and self.n_clusters > 1:
            raise ValueError("graph: required when lam > 0 and there are several clusters")
        out = copy.copy(self)
        out.lam, out.inner = lam, self.inner.with_lam(lam)
        return out

    def expand(self, W) -> np.ndarray:
        """``X`` with ``x_i = w_k`` for ``i ∈ C_k``."""
        W = check_matrix_rows(W, self.n_clusters, self.dim, "W")
        return W[self.labels]

    def objective(self, X) -> float:
        """The (SON) objective at ``X`` (equal to (RED)'s value when ``X`` is clustered)."""
        X = self.check_X(X)
        pen = 0.0 if self.graph is None else self.graph.penalty(X)
        return self.loss.value(X) + self.lam * pen


def global_model(loss: Loss) -> Reduced:
    """The global problem (1): ``min_y Σ_i f_i(y)``."""
    return Reduced(loss, None, np.zeros(loss.n_users, dtype=int))


def local_models(loss: Loss) -> Reduced:
    """The local problems (2): ``x_i = argmin f_i`` for every user (λ = 0)."""
    return Reduced(loss, None, np.arange(loss.n_users))


def oracle(loss: Loss, partition) -> Reduced:
    """The oracle: ``x_i = argmin_x Σ_{j∈C_k} f_j(x)`` for the true cluster ``C_k`` of ``i``."""
    return Reduced(loss, None, partition)


def scale_of(X) -> float:
    """``1 + max_i ‖x_i‖``: the scale that relative tolerances on models refer to."""
    X = as_float_array(X, "X", ndim=2, copy=False)
    return 1.0 + float(np.sqrt(np.max(np.einsum("ij,ij->i", X, X))))  # 3x norm(axis=1)
