r"""Figures of solution paths and λ-bounds (matplotlib, imported lazily, ``Agg`` backend).

Every function draws what :mod:`convexfl.path` and :mod:`convexfl.bounds` computed — no
computing here — and returns the matplotlib ``Figure``; pass ``out="file.png"`` to save it.
All λ axes are in the canonical (SON) convention (the paper's eq. (3) λ is
``λ_SON / (2N)``; :func:`plot_separators` prints both).

- :func:`plot_n_clusters` — number of clusters vs λ, with the theorem intervals and the exact
  recovery interval shaded and λ̂ marked;
- :func:`plot_intervals` — the λ-intervals alone (no path), as bars on a λ axis;
- :func:`plot_clusterpath` — the users' models as λ grows, in two coordinates (Hocking et al.);
- :func:`plot_dendrogram` — the merge tree, heights = fusion λ;
- :func:`plot_fl_curves` — average test accuracy and within-cluster model distance vs λ
  (Armacki et al. Figs. 2 and 3);
- :func:`plot_separators` — data and the distinct classifiers at several λ (their Fig. 6);
- the notebooks' figures, one function each (``plot_armacki_sec5``, ``plot_pdmm_gap``,
  ``plot_membership_heatmaps``, ``plot_ckt_toy``, ``plot_accuracy_vs_k``, …), drawn from the
  results of :mod:`convexfl.experiments`; :func:`study_figures` draws all of one experiment.

Submodules: ``paths`` (paths and λ-intervals), ``armacki`` and ``studies`` (the papers'
figures), ``_base`` (what they share).

Needs the ``plot`` extra: ``pip install 'convexfl[plot]'``.
"""

from __future__ import annotations

from ._base import (
    INTERVAL_STYLE,
)
from .armacki import (
    plot_armacki_appc_panels,
    plot_armacki_appc_path,
    plot_armacki_appc_squared,
    plot_armacki_sec5,
    plot_armacki_sec5_recovery,
    plot_model_panels,
    plot_pdmm_gap,
)
from .paths import (
    plot_clusterpath,
    plot_dendrogram,
    plot_fl_curves,
    plot_intervals,
    plot_n_clusters,
    plot_separators,
)
from .studies import (
    plot_accuracy_vs_k,
    plot_ari_paths,
    plot_ckt_toy,
    plot_glmm_agreement,
    plot_membership_heatmaps,
    plot_method_accuracies,
    plot_theorem_4_2,
    study_figures,
)

__all__ = [
    "INTERVAL_STYLE", "plot_accuracy_vs_k", "plot_ari_paths", "plot_armacki_appc_panels",
    "plot_armacki_appc_path", "plot_armacki_appc_squared", "plot_armacki_sec5",
    "plot_armacki_sec5_recovery", "plot_ckt_toy", "plot_clusterpath", "plot_dendrogram",
    "plot_fl_curves", "plot_glmm_agreement", "plot_intervals", "plot_membership_heatmaps",
    "plot_method_accuracies", "plot_model_panels", "plot_n_clusters", "plot_pdmm_gap",
    "plot_separators", "plot_theorem_4_2", "study_figures"
]
