"""JSON bytes on the per-request path: orjson's speed, json's exact bytes.

A request's body and its canonical form (the workload fingerprint) are encoded once per request; json's
encoder takes ~6 µs for a 32-token body and orjson ~0.4 µs. orjson writes what json writes (compact
separators) for str keys, ints, bools, None, ASCII strings without DEL, and floats json writes without
an exponent; it differs on the rest: json escapes non-ASCII and DEL (orjson writes UTF-8 and DEL
as is), writes 1e-05 and 1e+16 (orjson 0.00001 and 10000000000000000.0), NaN and Infinity (orjson
null). So a value whose bytes could differ, or that orjson cannot encode (an integer over 64 bits,
another type), is encoded by json, as before; the fingerprint of what was sent stays the same.
"""

from __future__ import annotations

import json
import os
from typing import Any

import orjson

try:  # `_same` in C (loadgen/_json.c): one call instead of one a value; LOADGEN_NATIVE=0 checks in Python
    from loadgen import _json  # type: ignore[attr-defined]
except ImportError:  # not built: the same answers, in Python
    _json = None
if os.environ.get("LOADGEN_NATIVE", "1") == "0":
    _json = None

_COMPACT = json.JSONEncoder(separators=(",", ":")).encode
_SORTED = json.JSONEncoder(sort_keys=True, separators=(",", ":")).encode
_PLAIN = frozenset((int, str, bool, type(None)))  # exact types: a subclass may encode otherwise
_SORT = orjson.OPT_SORT_KEYS


def _same(obj: Any) -> bool:
    """Whether orjson writes `obj` as json does, given ASCII output without DEL (module docstring)."""
    kind = type(obj)
    if kind in _PLAIN:
        return True
    if kind is float:  # json writes an exponent outside [1e-4, 1e16); NaN and inf fail both tests
        return obj == 0.0 or 1e-4 <= abs(obj) < 1e16
    if kind is dict:
        return all(map(_same, obj.values()))  # a key orjson does not take raises there
    if kind is list:
        return set(map(type, obj)) <= _PLAIN or all(map(_same, obj))
    return False


_SAME = _same if _json is None else _json.same


def _orjson(obj: Any, option: int) -> bytes | None:
    """orjson's bytes of `obj` when they are json's, else None."""
    if not _SAME(obj):
        return None
    try:
        data = orjson.dumps(obj, option=option)
    except TypeError:  # orjson.JSONEncodeError: a non-str key, an integer over 64 bits
        return None
    return data if data.isascii() and data.find(b"\x7f") < 0 else None


def compact(obj: Any) -> bytes:
    """`json.dumps(obj, separators=(",", ":")).encode()`: a request's body."""
    data = _orjson(obj, 0)
    return _COMPACT(obj).encode() if data is None else data


def canonical(obj: Any) -> bytes:
    """`json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()`: a request's canonical form."""
    data = _orjson(obj, _SORT)
    return _SORTED(obj).encode() if data is None else data
