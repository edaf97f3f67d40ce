"""Seeded data generators of the papers, and federated splits of data that ships with a
package. No downloads, ever.

Modules: :mod:`.armacki` (planted points, planted classification, the Sec. V ellipses).
"""

from .armacki import armacki_ellipses, planted_classification, planted_points

__all__ = ["armacki_ellipses", "planted_classification", "planted_points"]
