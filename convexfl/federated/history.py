"""The record of a federated run: one :class:`RoundRecord` per finished round."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

__all__ = ["History", "RoundRecord"]

_COUNTERS = ("vectors_down", "vectors_up", "bytes_down", "bytes_up")


@dataclass(frozen=True)
class RoundRecord:
    """What happened in one round.

    Attributes
    ----------
    round : int
        Round index, starting at 0.
    participants : tuple of int
        Clients sampled this round (sorted); each was sent a payload.
    received : tuple of int
        Clients whose reply arrived and was accepted; the server update saw exactly these.
    dropped : tuple of int
        Sampled clients that dropped out (simulated with ``dropout``); they did not run.
    failed : dict of int to str
        Sampled clients whose update raised or whose reply was malformed, with the reason.
    vectors_down, bytes_down : int
        Size of all payloads sent this round (to every participant, including those that
        then dropped out or failed), see :mod:`convexfl.federated.messages`.
    vectors_up, bytes_up : int
        Size of the accepted replies.
    metrics : dict
        What ``Algorithm.metrics`` returned after the server update (empty without one).
    """

    round: int
    participants: tuple
    received: tuple
    dropped: tuple
    failed: dict
    vectors_down: int
    vectors_up: int
    bytes_down: int
    bytes_up: int
    metrics: dict = field(default_factory=dict)


@dataclass
class History:
    """Per-round records of a run, plus the metrics before the first round.

    Attributes
    ----------
    records : list of RoundRecord
        One per finished round, in order.
    initial_metrics : dict
        ``Algorithm.metrics`` evaluated on the initial states (empty without one).
    """

    records: list = field(default_factory=list)
    initial_metrics: dict = field(default_factory=dict)

    def __len__(self):
        return len(self.records)

    def __iter__(self):
        return iter(self.records)

    def __getitem__(self, index):
        return self.records[index]

    def append(self, record):
        """Add the record of the next round."""
        self.records.append(record)

    def column(self, name):
        """One number per round, as an array.

        Parameters
        ----------
        name : str
            A counter (``"vectors_down"``, ``"vectors_up"``, ``"bytes_down"``,
            ``"bytes_up"``), ``"n_participants"``, ``"n_received"`` or a metric name.

        Returns
        -------
        numpy.ndarray
            Shape ``(len(self),)``; NaN where a metric is missing in a round.
        """
        if name in _COUNTERS:
            return np.array([getattr(r, name) for r in self.records], dtype=np.int64)
        if name in ("n_participants", "n_received"):
            attribute = "participants" if name == "n_participants" else "received"
            return np.array([len(getattr(r, attribute)) for r in self.records], dtype=np.int64)
        return np.array([r.metrics.get(name, np.nan) for r in self.records], dtype=float)

    def totals(self):
        """Total vectors and bytes sent each way over all rounds.

        Returns
        -------
        dict of str to int
            Keys ``vectors_down``, ``vectors_up``, ``bytes_down``, ``bytes_up``.
        """
        return {name: int(sum(getattr(r, name) for r in self.records)) for name in _COUNTERS}

    def failures(self):
        """All client failures of the run.

        Returns
        -------
        list of tuple
            ``(round, client_id, reason)``, in order.
        """
        return [(r.round, cid, reason) for r in self.records for cid, reason in r.failed.items()]

    def to_records(self):
        """The history as a list of plain dicts (one per round), e.g. for a DataFrame."""
        return [asdict(r) for r in self.records]
