"""Seeded data generators of the papers, and federated splits of data that ships with a
package. No downloads, ever.

Modules: :mod:`.armacki` (planted points, planted classification, the Sec. V ellipses).
"""

from .armacki import armacki_ellipses, planted_classification, planted_points
from .mlr import ClientSplit, FederatedDataset, clustered_mlr, federated_digits, from_groups
from .ppfl import digits_label_groups, synthetic_mixture

__all__ = ["armacki_ellipses", "planted_classification", "planted_points"]
__all__ += ["ClientSplit", "FederatedDataset", "clustered_mlr", "federated_digits", "from_groups"]
__all__ += ["synthetic_mixture", "digits_label_groups"]
