"""Atomic checkpoints of a federated run.

A checkpoint is one pickle file holding a dict with the keys

``format``
    ``"convexfl.federated.checkpoint"``.
``version``
    ``1``.
``config``
    What must match to resume: algorithm name, number of clients, clients per round,
    dropout probability and the root seed entropy.
``next_round``
    The number of finished rounds (= the index of the next round).
``server_state``, ``client_states``, ``history``
    The states after round ``next_round - 1`` and the :class:`~.History` so far.

Every random draw of round ``t`` is derived from the root entropy and ``t`` only (see
:func:`convexfl.federated.runtime.derive_rng`), so the root entropy and ``next_round`` are
the whole random-number position.

The file is written to a temporary file in the same folder, flushed to disk and moved over
the old one with :func:`os.replace`, so a reader (or a resumed run) sees either the previous
or the new checkpoint, never a partial one. A run killed while writing can leave a stale
``.<name>.*.tmp`` file next to the checkpoint; it is never read.

Warning: checkpoints are pickles. Load only files you wrote yourself.
"""

from __future__ import annotations

import os
import pickle

from .._io import atomic_write

__all__ = ["load_checkpoint", "save_checkpoint"]

FORMAT = "convexfl.federated.checkpoint"
VERSION = 1


def save_checkpoint(path, content):
    """Write ``content`` (a dict, see the module docstring) to ``path`` atomically.

    Parameters
    ----------
    path : str or os.PathLike
        Destination file.
    content : dict
        Picklable checkpoint content, without ``format``/``version`` (added here).
    """
    path = os.fspath(path)
    data = pickle.dumps(
        {"format": FORMAT, "version": VERSION, **content}, protocol=pickle.HIGHEST_PROTOCOL
    )
    atomic_write(path, lambda fh: fh.write(data), binary=True)


def load_checkpoint(path):
    """Read a checkpoint written by :func:`save_checkpoint`.

    Parameters
    ----------
    path : str or os.PathLike
        Checkpoint file.

    Returns
    -------
    dict
        The checkpoint content (see the module docstring).

    Raises
    ------
    ValueError
        If the file is not a convexfl federated checkpoint of a known version (including
        a truncated file or one that is not a pickle).
    """
    with open(path, "rb") as handle:
        try:
            content = pickle.load(handle)
        except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError,
                ImportError, IndexError, KeyError) as exc:
            raise ValueError(
                f"checkpoint {os.fspath(path)!r} could not be read (truncated, corrupted or "
                f"not a checkpoint): {type(exc).__name__}: {exc}"
            ) from None
    if not isinstance(content, dict) or content.get("format") != FORMAT:
        raise ValueError(f"checkpoint {os.fspath(path)!r} is not a convexfl federated checkpoint")
    if content.get("version") != VERSION:
        raise ValueError(
            f"checkpoint {os.fspath(path)!r} has version {content.get('version')}, "
            f"expected {VERSION}"
        )
    return content
