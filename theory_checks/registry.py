"""The registry of checks and the outcome every check returns.

A check is a function ``run(quick: bool, seed: int, out: Path) -> Outcome`` registered with
:func:`register`. It runs many instances inside the claim's assumptions, reports margins,
and runs a **control** (instances outside the assumptions, or a λ outside the interval)
whose outcome is known to differ — so that a check which cannot fail is visible as such
(docs/math.md §5). A claim that does not hold as printed is reported as ``fails`` with numbers
and a saved counterexample: a finding, not a bug.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

OUTCOMES = ("holds", "fails", "inconclusive")


@dataclass
class Control:
    """A run outside the claim's assumptions, whose outcome is expected to differ."""

    description: str
    outcome: str
    margins: dict = field(default_factory=dict)
    expected: str = "fails"

    @property
    def as_expected(self) -> bool:
        return self.outcome == self.expected


@dataclass
class Outcome:
    """What a check found.

    Attributes
    ----------
    id, paper, equation, claim, assumptions : str
    outcome : {"holds", "fails", "inconclusive"}
    margins : dict of name -> number
        How far inside the claim the instances were (worst case over instances).
    instances : int
    seed : int
    control : Control
    details : str
        A paragraph for the report (findings explained here, with numbers).
    figure : str or None
        The PNG of this check (relative to the output folder).
    counterexample : str or None
        An ``.npz`` with a failing instance, when the claim fails.
    """

    id: str
    paper: str
    equation: str
    claim: str
    assumptions: str
    outcome: str
    margins: dict
    instances: int
    seed: int
    control: Control
    details: str = ""
    figure: str | None = None
    counterexample: str | None = None
    quick: bool = False
    seconds: float = 0.0

    def __post_init__(self):
        if self.outcome not in OUTCOMES:
            raise ValueError(f"outcome: expected one of {OUTCOMES}, got {self.outcome!r}")

    def to_dict(self) -> dict:
        d = asdict(self)
        d["margins"] = {k: _finite(v) for k, v in self.margins.items()}
        d["control"]["margins"] = {k: _finite(v) for k, v in self.control.margins.items()}
        d["control"]["as_expected"] = self.control.as_expected
        return d

    @classmethod
    def from_dict(cls, d: dict) -> Outcome:
        d = dict(d)
        c = dict(d.pop("control"))
        c.pop("as_expected", None)
        return cls(control=Control(**c), **d)


def _finite(v):
    """JSON has no inf/nan: write them as strings."""
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    return v


@dataclass(frozen=True)
class Check:
    id: str
    paper: str
    equation: str
    claim: str
    assumptions: str
    run: Callable


REGISTRY: dict[str, Check] = {}


def register(id: str, *, paper: str, equation: str, claim: str, assumptions: str):
    """Register ``run(quick, seed, out) -> Outcome`` under ``id``."""
    def wrap(fn):
        if id in REGISTRY:
            raise ValueError(f"id: check {id!r} is registered twice")
        REGISTRY[id] = Check(id, paper, equation, claim, assumptions, fn)
        return fn
    return wrap


def outcome(check_id: str, *, outcome: str, margins: dict, instances: int, seed: int,
            control: Control, **extra) -> Outcome:
    """Build an :class:`Outcome` for a registered check (its fixed fields from the registry)."""
    c = REGISTRY[check_id]
    return Outcome(id=c.id, paper=c.paper, equation=c.equation, claim=c.claim,
                   assumptions=c.assumptions, outcome=outcome, margins=margins,
                   instances=instances, seed=seed, control=control, **extra)


def verdict(ok: list[bool], *, inconclusive: bool = False) -> str:
    """``holds`` if every instance holds, ``fails`` if any fails."""
    if inconclusive:
        return "inconclusive"
    return "holds" if all(ok) else "fails"


def save_json_atomic(path: Path, data) -> None:
    """Write JSON through a temporary file and ``os.replace`` (never a torn file)."""
    save_text_atomic(path, json.dumps(data, indent=2))


def save_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` atomically (:func:`convexfl._io.atomic_write_text`)."""
    from convexfl._io import atomic_write_text

    atomic_write_text(path, text)


def load_json(path: Path):
    """The JSON in ``path``, or ``None`` when it is missing, torn or not JSON (a file that
    cannot be read back counts as not written)."""
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
