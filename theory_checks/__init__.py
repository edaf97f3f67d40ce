"""Numerical checks of every claim of the four papers (docs/math.md §5).

Run them all with ``python -m theory_checks`` (``--list``, ``--quick``, ``--only ID...``,
``--seed S``, ``--json FILE``, ``--out DIR``). Each claim is one module with

- ``check(...)`` — usable on your own loss, data and partition, returning numbers;
- a registered ``run(quick, seed, out)`` — many instances inside the assumptions, margins,
  and a control outside them, returning an :class:`Outcome`.

Checks are grouped by paper: :mod:`.armacki`, :mod:`.ckt` (more as the modules they check
land).
"""

from . import armacki, cgpfl, ckt, ppfl  # noqa: F401  (registers the checks)
from .registry import REGISTRY, Control, Outcome, register
from .runner import run_checks, write_report

__all__ = ["REGISTRY", "Outcome", "Control", "register", "run_checks", "write_report"]
