"""Messages and client states as Flower records, and the control record of the protocol.

A convexfl message (see :mod:`convexfl.federated.messages`) travels as three records of a
Flower ``RecordDict`` under a common prefix:

``<prefix>.arrays``
    ``ArrayRecord``: every numpy value, i.e. the arrays of :func:`~convexfl.federated.
    messages.split_message` plus 0-d arrays and numpy scalars (kept as 0-d arrays so that
    their dtype survives).
``<prefix>.scalars``
    ``ConfigRecord``: the Python scalars (``bool``, ``int``, ``float``, ``str``).
``<prefix>.meta``
    ``ConfigRecord``: ``format`` (``"message"``), ``order`` (the keys in order, as JSON)
    and ``numpy`` (the keys that were numpy scalars, as JSON).

Decoding gives back a dict equal to the original: same keys in the same order, same
values, same dtypes and shapes, same Python or numpy scalar types, so that
:func:`~convexfl.federated.messages.message_size` (the message accounting) and every
computation on it are unchanged. Arrays are decoded with ``allow_pickle=False`` (Flower's
``Array.numpy``) and copied when read-only, so the receiver may change them in place.

A client state that is not a valid message (any picklable object is allowed by
:class:`~convexfl.federated.Algorithm`) is kept in the client's own ``Context`` as a
pickle (``meta`` with ``format="pickle"`` and ``data``); pickles are never accepted from
the network.
"""

from __future__ import annotations

import json
import pickle

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, RecordDict

from ..messages import split_message, validate_message

__all__ = ["CONTROL", "decode_message", "encode_message", "message_records"]

#: Name of the ``ConfigRecord`` with the protocol fields in every message and reply.
CONTROL = "convexfl"

_FORMAT_MESSAGE = "message"
_FORMAT_PICKLE = "pickle"


def message_records(message, prefix, *, allow_pickle=False):
    """Encode a message (or, with ``allow_pickle``, any object) as named Flower records.

    Parameters
    ----------
    message : dict or object
        A valid message; with ``allow_pickle=True`` anything picklable, stored as a pickle
        when it is not a valid message.
    prefix : str
        Common prefix of the record names.
    allow_pickle : bool, default=False
        Whether objects that are not messages may be pickled (only for a client's own
        ``Context``, never for what goes over the network).

    Returns
    -------
    dict of str to record
        ``{prefix + ".arrays": ArrayRecord, prefix + ".scalars": ConfigRecord,
        prefix + ".meta": ConfigRecord}`` (only ``.meta`` for a pickle).

    Raises
    ------
    ValueError
        If ``message`` is not a valid message and ``allow_pickle`` is false.
    """
    try:
        validate_message(message, name=prefix)
    except ValueError:
        if not allow_pickle:
            raise
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        return {f"{prefix}.meta": ConfigRecord({"format": _FORMAT_PICKLE, "data": data})}
    arrays, scalars = split_message(message)
    array_record = ArrayRecord()
    config_record = ConfigRecord()
    numpy_scalars = []
    for key, value in message.items():
        if key in arrays:
            array_record[key] = Array(np.asarray(value))
        elif isinstance(value, (np.ndarray, np.generic)):
            # 0-d arrays and numpy scalars: keep the dtype (split_message gives .item())
            array_record[key] = Array(np.asarray(value))
            if isinstance(value, np.generic):
                numpy_scalars.append(key)
        else:
            config_record[key] = scalars[key]
    meta = ConfigRecord(
        {
            "format": _FORMAT_MESSAGE,
            "order": json.dumps(list(message)),
            "numpy": json.dumps(numpy_scalars),
        }
    )
    return {
        f"{prefix}.arrays": array_record,
        f"{prefix}.scalars": config_record,
        f"{prefix}.meta": meta,
    }


def encode_message(message, prefix="message", *, control=None):
    """A ``RecordDict`` holding one message (and optionally a control record).

    Parameters
    ----------
    message : dict
        A valid message.
    prefix : str, default="message"
        Prefix of its records (see the module docstring).
    control : dict, optional
        Protocol fields, stored as the ``ConfigRecord`` named :data:`CONTROL`.

    Returns
    -------
    flwr.app.RecordDict
    """
    content = RecordDict(message_records(message, prefix))
    if control is not None:
        content[CONTROL] = ConfigRecord(dict(control))
    return content


def _as_json_list(meta, key, prefix):
    try:
        value = json.loads(meta[key])
    except (KeyError, TypeError, ValueError):
        raise ValueError(f"{prefix}.meta has no valid {key!r}") from None
    if not (isinstance(value, list) and all(isinstance(k, str) for k in value)):
        raise ValueError(f"{prefix}.meta {key!r} is not a list of str")
    return value


def decode_message(records, prefix="message", *, allow_pickle=False):
    """Decode what :func:`message_records` or :func:`encode_message` wrote.

    Parameters
    ----------
    records : flwr.app.RecordDict or Mapping
        Holds the records named ``prefix + ".arrays"``, ``".scalars"`` and ``".meta"``.
    prefix : str, default="message"
        Their common prefix.
    allow_pickle : bool, default=False
        Accept a pickled object (only for a client's own ``Context``).

    Returns
    -------
    dict or object
        The message (validated), or the unpickled object.

    Raises
    ------
    ValueError
        If the records are missing, inconsistent, hold a pickle while ``allow_pickle`` is
        false, or do not decode to a valid message.
    """
    meta = records.get(f"{prefix}.meta")
    if not isinstance(meta, ConfigRecord):
        raise ValueError(f"no {prefix!r} records in the message")
    kind = meta.get("format")
    if kind == _FORMAT_PICKLE:
        if not allow_pickle:
            raise ValueError(f"{prefix} is a pickle; pickles are not accepted from the network")
        return pickle.loads(meta["data"])
    if kind != _FORMAT_MESSAGE:
        raise ValueError(f"{prefix}.meta has unknown format {kind!r}")
    array_record = records.get(f"{prefix}.arrays")
    config_record = records.get(f"{prefix}.scalars")
    if not isinstance(array_record, ArrayRecord) or not isinstance(config_record, ConfigRecord):
        raise ValueError(f"{prefix}: missing .arrays or .scalars record")
    order = _as_json_list(meta, "order", prefix)
    numpy_scalars = set(_as_json_list(meta, "numpy", prefix))
    present = set(array_record) | set(config_record)
    if (
        len(order) != len(set(order))
        or set(order) != present
        or set(array_record) & set(config_record)
    ):
        raise ValueError(f"{prefix}: keys of .meta, .arrays and .scalars do not match")
    message = {}
    for key in order:
        if key in array_record:
            value = array_record[key].numpy()
            if not value.flags.writeable:
                value = value.copy()
            if key in numpy_scalars:
                if value.ndim != 0:
                    raise ValueError(f"{prefix}: numpy scalar {key!r} is not 0-d")
                value = value[()]
            message[key] = value
        else:
            message[key] = config_record[key]
    return validate_message(message, name=prefix)
