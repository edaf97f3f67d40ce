r"""Torch back-ends for the deep-model variants (CPU and CUDA).

Four personalised methods of the source papers with deep models, plus two baselines, all
played on the in-process federated runtime (:func:`convexfl.federated.run_federated`) with
payloads and replies that are dicts of numpy arrays (so the same functions can later run
under Flower). Models stay on the chosen device inside the clients; tensors cross to numpy
only at the message boundary.

- :class:`PPFLDNN` — PPFL with deep canonical models (Di et al., Fig. 2a output mixture and
  Fig. 2b parameter mixture), a shared part ω and memberships on the simplex updated by the
  entropic mirror step with the true Laplacian; RBCD (Alg. 1) or alternating (Alg. 3).
- :class:`PerFedCKT` — clustered co-distillation (Cho et al., objective (1), Alg. 1) with
  heterogeneous client architectures, logits on a public unlabeled set, server k-means on
  logits, partial participation and the paper's communication accounting.
- :class:`CGPFLDNN` — CGPFL Algorithm 1 with deep personalised models and K generalised
  models (k-means++ on the uploaded models); ``n_clusters=1`` is pFedMe.
- :class:`SONHeads` — personalised last layers coupled by the sum-of-norms penalty
  :math:`\lambda \sum_{(i,j)\in E} w_{ij}\|h_i - h_j\|` (canonical SON λ convention), trained by
  network-lasso ADMM whose edge step is block soft-thresholding; clients whose edge
  variables fuse exactly share one head.
- :class:`FedAvgDNN`, :class:`LocalDNN` — baselines.
- :func:`digits_federation` — a clustered federated split of scikit-learn's bundled digits
  with a public unlabeled pool; :func:`compare_on_digits` — the "method vs mean test
  accuracy" table.

Every trainer takes ``device="cpu" | "cuda" | "cuda:<k>" | "auto"``. All randomness flows from
``random_state`` through explicit numpy and torch generators (the global RNGs are neither
used nor changed), so a run on CPU is bit-identical for the same seed; parameters are
initialised on the CPU and then moved, so CPU and CUDA runs start from the same point.

This package needs the optional ``torch`` extra (``pip install 'convexfl[torch]'``); it is
never imported by ``import convexfl``.
"""

from __future__ import annotations

try:  # absolute import: the real PyTorch, not this package
    import torch as _torch  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        "convexfl.torch needs PyTorch, which is the optional 'torch' extra of convexfl; "
        "install it with: pip install 'convexfl[torch]'"
    ) from exc

from ._core import numbers_sent, resolve_device
from .baselines import FedAvgDNN, LocalDNN
from .cgpfl import CGPFLDNN
from .ckt import PerFedCKT
from .compare import ComparisonTable, compare_on_digits
from .data import FederatedDigits, digits_federation
from .models import PPFLNet, build_classifier, build_features, n_parameters
from .ppfl import PPFLDNN
from .son import SONHeads

__all__ = [
    "CGPFLDNN",
    "ComparisonTable",
    "FedAvgDNN",
    "FederatedDigits",
    "LocalDNN",
    "PPFLDNN",
    "PPFLNet",
    "PerFedCKT",
    "SONHeads",
    "build_classifier",
    "build_features",
    "compare_on_digits",
    "digits_federation",
    "n_parameters",
    "numbers_sent",
    "resolve_device",
]
