r"""The papers' experiments as functions: data in, numbers out (no plotting here).

Notebooks and the report call these, so each experiment is written once.

:func:`armacki_sec5` — Armacki et al. Sec. V (Figs. 2 and 3): squared-hinge users on the
three-cluster ellipse data; test accuracy and within-cluster model distance against λ for
(SON), the squared penalty (4), and the global, local and oracle models.

λ is in the (SON) convention; ``lam_paper = λ / (2N)`` is the paper's eq. (3) value.

The notebooks' experiments (``notebooks/``; each returns arrays and a JSON-ready
``"summary"`` with a ``"paper_vs_ours"`` table; :func:`sizes` holds the full and SMALL sizes,
:func:`run_study` runs one by name, :func:`convexfl.plotting.study_figures` draws it):

- :func:`armacki_sec5_study` — Sec. V in full: Figs. 2–3, exact recovery vs the theorems;
- :func:`armacki_appc_study` — App. C Fig. 6: cluster structure at the paper's λ;
- :func:`armacki_pdmm_gap` — App. C Fig. 5: PDMM's optimality gap;
- :func:`convex_clustering_study` — iris, digits, make_moons: paths, ARI;
- :func:`ppfl_memberships`, :func:`ppfl_glmm` — PPFL Fig. 6 and the GLMM equivalence;
- :func:`ckt_toy`, :func:`ckt_theorem_4_2` — PerFed-CKT Fig. 1 and Theorem 4.2;
- :func:`cgpfl_accuracy_vs_k` — CGPFL Fig. 3;
- :func:`torch_digits` — the torch comparison table.

One submodule a paper: ``armacki``, ``clustering``, ``ppfl``, ``ckt``, ``cgpfl``, ``deep``
(torch); ``studies`` runs them by name; ``_common`` holds what they share.
"""

from __future__ import annotations

from ._common import (  # noqa: F401
    default_method,
    format_rows,
)
from .armacki import (  # noqa: F401
    APPC_LAMBDAS,
    PAPER,
    accuracy,
    armacki_appc_study,
    armacki_pdmm_gap,
    armacki_sec5,
    armacki_sec5_study,
    mean_user_accuracy,
    within_cluster_distance,
)
from .cgpfl import (  # noqa: F401
    cgpfl_accuracy_vs_k,
)
from .ckt import (  # noqa: F401
    ckt_theorem_4_2,
    ckt_toy,
)
from .clustering import (  # noqa: F401
    convex_clustering,
    convex_clustering_study,
    sklearn_points,
)
from .deep import (  # noqa: F401
    torch_digits,
)
from .ppfl import (  # noqa: F401
    ppfl_glmm,
    ppfl_memberships,
)
from .studies import (  # noqa: F401
    STUDIES,
    run_study,
    sizes,
)
