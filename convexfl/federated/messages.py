"""Messages exchanged between server and clients: validation, copying and accounting.

A *message* (a server payload or a client reply) is a ``dict`` whose keys are ``str`` and
whose values are either

* a numpy array of a real numeric dtype (bool, signed/unsigned integer, float) with finite
  entries, or
* a scalar: ``bool``, ``int`` (fitting in 64 bits), ``float`` (finite), a numpy scalar of
  the same kinds, or ``str``.

Nothing else (no nested dicts, lists, ``None`` or objects), so that a message maps one to one
onto Flower's records later: arrays to an ``ArrayRecord``, scalars to a ``ConfigRecord``
(see :func:`split_message`).

Accounting convention
---------------------
For every value of a message:

* an array of shape ``(..., d)`` with ``d >= 1`` and ``size > 0`` counts ``size // d`` vectors
  (its last dimension is the vector length: shape ``(d,)`` is 1 vector, ``(k, d)`` is ``k``
  vectors, ``(a, b, d)`` is ``a * b`` vectors);
* an array with ``size == 0`` counts 0 vectors;
* a scalar (including a 0-d array) counts 0 vectors;

and its bytes are ``np.asarray(value).nbytes`` (a Python ``int`` or ``float`` counts 8 bytes,
a ``bool`` 1 byte), except ``str``, which counts the length of its UTF-8 encoding.
The vectors and bytes of a message are the sums over its values.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

__all__ = ["copy_message", "message_size", "split_message", "validate_message"]

_ARRAY_KINDS = "biuf"  # bool, int, unsigned int, float
_INT64 = np.iinfo(np.int64)


def _check_array(key, value):
    if value.dtype.kind not in _ARRAY_KINDS:
        raise ValueError(
            f"array {key!r} has dtype {value.dtype}; only bool, integer and "
            "float arrays can be sent"
        )
    if value.dtype.kind == "f" and not np.all(np.isfinite(value)):
        raise ValueError(f"array {key!r} has non-finite entries")


def _check_scalar(key, value):
    if isinstance(value, (str, bool, np.bool_, np.integer)):
        return
    if isinstance(value, int):
        if not _INT64.min <= value <= _INT64.max:
            raise ValueError(f"int {key!r} does not fit in 64 bits")
        return
    if isinstance(value, (float, np.floating)):
        if not np.isfinite(value):
            raise ValueError(f"scalar {key!r} is not finite")
        return
    raise ValueError(
        f"value {key!r} has type {type(value).__name__}; a message holds only "
        "numpy arrays and scalars (bool, int, float, str)"
    )


def validate_message(message, name="message"):
    """Check that ``message`` is a dict of finite numeric numpy arrays and scalars.

    Parameters
    ----------
    message : object
        The candidate message.
    name : str, default="message"
        What to call it in the error (e.g. ``"payload for client 3 in round 0"``).

    Returns
    -------
    message : dict
        The same object, for chaining.

    Raises
    ------
    ValueError
        If ``message`` is not a dict, a key is not a ``str`` or a value is not allowed
        (see the module docstring). The error names ``name``.
    """
    if not isinstance(message, Mapping):
        # ValueError (not TypeError) by contract: every bad message is a ValueError.
        raise ValueError(  # noqa: TRY004
            f"{name} must be a dict of numpy arrays and scalars, got {type(message).__name__}"
        )
    for key, value in message.items():
        if not isinstance(key, str):
            raise ValueError(f"{name}: keys must be str, got {key!r}")  # noqa: TRY004
        try:
            if isinstance(value, np.ndarray):
                _check_array(key, value)
            else:
                _check_scalar(key, value)
        except ValueError as exc:
            raise ValueError(f"{name}: {exc}") from None
    return message


def copy_message(message):
    """Return a copy of a message as it arrives after transmission.

    Arrays are copied, so the receiver can neither see later changes by the sender nor
    change the sender's arrays; scalars are immutable and kept.

    Parameters
    ----------
    message : dict
        A valid message.

    Returns
    -------
    dict
        A new dict with copied arrays.
    """
    return {
        key: value.copy() if isinstance(value, np.ndarray) else value
        for key, value in message.items()
    }


def _value_size(value):
    if isinstance(value, str):
        return 0, len(value.encode("utf-8"))
    array = np.asarray(value)
    if array.ndim == 0 or array.size == 0:
        return 0, int(array.nbytes)
    return array.size // array.shape[-1], int(array.nbytes)


def message_size(message):
    """Count the vectors and bytes of a message.

    Parameters
    ----------
    message : dict
        A valid message.

    Returns
    -------
    vectors : int
        Sum over arrays of ``size // shape[-1]`` (0 for scalars, 0-d and empty arrays).
    nbytes : int
        Sum of ``np.asarray(value).nbytes`` (UTF-8 length for ``str``).

    Examples
    --------
    >>> import numpy as np
    >>> message_size({"w": np.zeros((3, 5)), "v": np.zeros(7), "s": 2.0})
    (4, 184)
    """
    vectors = nbytes = 0
    for value in message.values():
        v, b = _value_size(value)
        vectors += v
        nbytes += b
    return vectors, nbytes


def split_message(message):
    """Split a message into its arrays and its scalars.

    This is the mapping used to transmit a message with Flower: the arrays go into an
    ``ArrayRecord`` and the scalars into a ``ConfigRecord``.

    Parameters
    ----------
    message : dict
        A valid message.

    Returns
    -------
    arrays : dict of str to numpy.ndarray
        The array values with ``ndim >= 1``.
    scalars : dict of str to bool, int, float or str
        The other values, numpy scalars and 0-d arrays converted to Python scalars.
    """
    arrays, scalars = {}, {}
    for key, value in message.items():
        if isinstance(value, np.ndarray) and value.ndim > 0:
            arrays[key] = value
        elif isinstance(value, (np.ndarray, np.generic)):
            scalars[key] = value.item()
        else:
            scalars[key] = value
    return arrays, scalars
