r"""Solution paths of the sum-of-norms problem: λ grids, warm starts, fusion events, merge
table and scipy linkage (Armacki et al. App. A; Hocking et al. 2011 "clusterpath").

For each λ of a grid (in the canonical (SON) convention)

.. math::

    X^*(λ) = \arg\min_X \sum_i f_i(x_i) + λ \sum_{(i,j)∈E} w_{ij}\,\|x_i - x_j\| ,

solved in increasing order of λ, each solve warm-started from the previous solution when the
method accepts it (``warm_start=`` a :class:`~convexfl.solvers.Solution`, or ``X0=``). The
default grid is ``0`` followed by a geometric grid ending at the exact fusion threshold λ̂
(:func:`convexfl.bounds.fusion_threshold`), above which there is one cluster.

**Clusters at a λ** are the connected components of ``{(i, j): ‖x_i − x_j‖ ≤ fuse_tol}``
with the solver's own ``fuse_tol`` (tied to its accuracy: ``1e-5 (1 + max‖x_i‖)`` for the
cvxpy reference, exact fusions for the splitting methods), or the ``fuse_tol`` passed to
:func:`son_path`.

**Fusion events and the dendrogram.** With uniform weights the path is usually
agglomerative, but with general weights clusters can *split* as λ grows. The path reports
this (``monotone``, ``splits``, a warning) instead of hiding it. The merge table and the
scipy linkage use, for every pair, the first grid λ from which the pair stays fused to the
end of the grid (the subdominant ultrametric of the path): for a monotone path these are
exactly the fusion events; for a non-monotone one, a split pair counts as fused only from
its last fusion on.

Submodules: ``trace`` (:func:`son_path`, :func:`default_grid`), ``result``
(:class:`SolutionPath`), ``store`` (checkpoint files), ``metrics`` (:func:`fl_metrics`).
"""

from __future__ import annotations

from .metrics import (
    fl_metrics,
)
from .result import (
    SolutionPath,
)
from .trace import (
    default_grid,
    son_path,
)

__all__ = ["SolutionPath", "son_path", "default_grid", "fl_metrics"]
