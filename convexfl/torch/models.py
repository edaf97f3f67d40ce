r"""Model builders and the PPFL canonical-model network.

A model is described by a short *spec* string:

- ``"linear"`` — no hidden layer (as a feature extractor: the identity);
- ``"mlp:64"``, ``"mlp:64-32"`` — fully connected ReLU layers of those widths;
- ``"cnn"`` / ``"cnn:8-16"`` — 3×3 convolutions (padding 1) with those channel counts, each
  followed by ReLU and 2×2 max-pooling, on square single-channel images of side
  ``sqrt(n_features)`` (8×8 for the digits); default channels ``8``.

:func:`build_features` gives the feature extractor and its output width;
:func:`build_classifier` adds the final linear layer. Trainers build these on the ``meta``
device as templates and keep the parameters in plain dicts.
"""

from __future__ import annotations

import copy
import math

import torch
from torch import nn
from torch.func import functional_call

__all__ = ["L2Normalize", "PPFLNet", "build_classifier", "build_features", "n_parameters"]


class L2Normalize(nn.Module):
    """Rows scaled to Euclidean norm ``scale`` (features ``scale · φ/‖φ‖``).

    Placed before a head it removes the rescaling symmetry between a ReLU body and its
    head (``(c·φ, h/c)`` give the same logits), so that a penalty on the heads cannot be
    evaded by growing the body.
    """

    def __init__(self, scale: float = 1.0, eps: float = 1e-12):
        super().__init__()
        self.scale = float(scale)
        self.eps = float(eps)

    def forward(self, x):
        return self.scale * x / x.norm(dim=1, keepdim=True).clamp_min(self.eps)

    def extra_repr(self):
        return f"scale={self.scale}"


def _parse(spec: str):
    if not isinstance(spec, str):
        raise TypeError(f"spec: expected a string such as 'mlp:64', got {type(spec).__name__}")
    kind, _, rest = spec.strip().lower().partition(":")
    if kind not in ("linear", "mlp", "cnn"):
        raise ValueError(f"spec: unknown model kind {kind!r} in {spec!r}; use 'linear', "
                         "'mlp:<w1>-<w2>...' or 'cnn:<c1>-<c2>...'")
    widths = []
    if rest:
        try:
            widths = [int(w) for w in rest.split("-")]
        except ValueError:
            raise ValueError(f"spec: widths must be integers separated by '-', got {spec!r}"
                             ) from None
        if any(w < 1 for w in widths):
            raise ValueError(f"spec: widths must be >= 1, got {spec!r}")
    if kind == "linear" and widths:
        raise ValueError(f"spec: 'linear' takes no widths, got {spec!r}")
    if kind == "mlp" and not widths:
        raise ValueError(f"spec: 'mlp' needs hidden widths, e.g. 'mlp:64', got {spec!r}")
    if kind == "cnn" and not widths:
        widths = [8]
    return kind, widths


def build_features(spec: str, n_features: int):
    """A feature extractor for inputs of ``n_features`` and its output width.

    Returns
    -------
    module : torch.nn.Module
        Maps ``(B, n_features)`` to ``(B, out_features)``.
    out_features : int
    """
    kind, widths = _parse(spec)
    if kind == "linear":
        return nn.Identity(), int(n_features)
    if kind == "mlp":
        layers, width = [], int(n_features)
        for w in widths:
            layers += [nn.Linear(width, w), nn.ReLU()]
            width = w
        return nn.Sequential(*layers), width
    side = math.isqrt(int(n_features))
    if side * side != n_features:
        raise ValueError(f"spec: {spec!r} needs square single-channel images, but "
                         f"n_features={n_features} is not a perfect square")
    layers, channels = [nn.Unflatten(1, (1, side, side))], 1
    for c in widths:
        layers += [nn.Conv2d(channels, c, 3, padding=1), nn.ReLU()]
        if side >= 2:
            layers.append(nn.MaxPool2d(2))
            side //= 2
        channels = c
    layers.append(nn.Flatten())
    return nn.Sequential(*layers), channels * side * side


def build_classifier(spec: str, n_features: int, n_classes: int, *,
                     normalize: float | None = None) -> nn.Module:
    """The feature extractor of ``spec`` followed by a linear layer to ``n_classes`` logits.

    The last layer (the head) is ``module[-1]``. With ``normalize=s`` the features are
    scaled to norm ``s`` before the head (:class:`L2Normalize`).
    """
    body, width = build_features(spec, n_features)
    layers = list(body) if isinstance(body, nn.Sequential) else []
    if normalize is not None:
        layers.append(L2Normalize(normalize))
    return nn.Sequential(*layers, nn.Linear(width, int(n_classes)))


def n_parameters(module_or_params) -> int:
    """Number of scalar parameters of a module or a parameter dict."""
    if isinstance(module_or_params, dict):
        return int(sum(p.numel() for p in module_or_params.values()))
    return int(sum(p.numel() for p in module_or_params.parameters()))


class PPFLNet(nn.Module):
    r"""PPFL network: ``K`` canonical modules :math:`\theta_1..\theta_K`, a shared part ω and a
    membership vector :math:`\pi \in \Delta_K` passed to :meth:`forward`.

    Parameters
    ----------
    shared : torch.nn.Module
        ω. With ``canonical_position="head"`` it is the shared body (features); with
        ``"body"`` it is the shared head that maps the mixed features to logits.
    canonical : torch.nn.Module
        One canonical module; ``n_canonical`` copies are made (the trainer gives each its
        own parameters).
    n_canonical : int
        ``K``.
    architecture : {"output", "parameter"}
        ``"output"`` — Di et al. Fig. 2a: the canonical outputs are mixed with weights π.
        As the last layer (``canonical_position="head"``) the mixed outputs are class
        probabilities, :math:`p(y|x)=\sum_k \pi_k\,\mathrm{softmax}(\theta_k(\omega(x)))_y`
        (the classification analogue of the GLM output mixture (11); mixing linear logits
        would coincide with the parameter mixture), and :meth:`forward` returns their log
        (valid logits for the cross-entropy). As the body, the features
        :math:`\sum_k \pi_k\theta_k(x)` are passed to ω.
        ``"parameter"`` — Fig. 2b: one module with parameters :math:`\sum_k\pi_k\theta_k`.
    canonical_position : {"head", "body"}, default "head"
        Where the canonical modules sit.
    """

    def __init__(self, shared: nn.Module, canonical: nn.Module, n_canonical: int, *,
                 architecture: str = "output", canonical_position: str = "head"):
        super().__init__()
        if architecture not in ("output", "parameter"):
            raise ValueError(f"architecture: must be 'output' (Fig. 2a) or 'parameter' "
                             f"(Fig. 2b), got {architecture!r}")
        if canonical_position not in ("head", "body"):
            raise ValueError(f"canonical_position: must be 'head' or 'body', got "
                             f"{canonical_position!r}")
        if int(n_canonical) < 1:
            raise ValueError(f"n_canonical: must be >= 1, got {n_canonical}")
        self.architecture = architecture
        self.canonical_position = canonical_position
        self.shared = shared
        self.canonical = nn.ModuleList([copy.deepcopy(canonical) for _ in range(n_canonical)])

    @property
    def n_canonical(self) -> int:
        return len(self.canonical)

    def _mixed_parameters(self, pi):
        ps = [dict(c.named_parameters()) for c in self.canonical]
        return {n: sum(pi[k] * ps[k][n] for k in range(len(ps))) for n in ps[0]}

    def _canonical_mix(self, u, pi, probabilities):
        if self.architecture == "parameter":
            return functional_call(self.canonical[0], self._mixed_parameters(pi), (u,))
        outs = [c(u) for c in self.canonical]
        if probabilities:
            logp = torch.stack([torch.log_softmax(o, dim=1) for o in outs])  # (K, B, C)
            logpi = torch.log(pi.clamp_min(torch.finfo(pi.dtype).tiny))
            return torch.logsumexp(logp + logpi[:, None, None], dim=0)
        return sum(pi[k] * outs[k] for k in range(len(outs)))

    def forward(self, x, pi):
        """Logits (or mixture log-probabilities, see ``architecture``) for inputs ``x``."""
        if self.canonical_position == "head":
            return self._canonical_mix(self.shared(x), pi, probabilities=True)
        return self.shared(self._canonical_mix(x, pi, probabilities=False))
