"""The canonical JSON text Claude Code hashes its request records with.

Claude Code 2.1.332 names each recorded message, each system-and-tools shape and each
whole request by the SHA-256 of one serialisation of the value: the text of JavaScript's
``JSON.stringify`` with every object's keys sorted (as JavaScript's ``Array.sort`` orders
strings: by UTF-16 code units) and no whitespace, optionally leaving out every key named
``cache_control``. :func:`canonical_json` writes that text from a value decoded by
Python's :mod:`json`, so the hashes come out the same: numbers are written as JavaScript
writes them (``1e-7``, ``100000000000000000000``), and a lone surrogate, which has no UTF-8
form, as its ``\\udxxx`` escape.
"""

from __future__ import annotations

import decimal
import hashlib
import json.encoder
import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["canonical_json", "sha256_hex", "utf8"]

_encode_string: Callable[[str], str] = (
    json.encoder.c_encode_basestring or json.encoder.py_encode_basestring  # type: ignore[attr-defined]
)
_SURROGATE = re.compile("[\ud800-\udfff]")
# Integers up to 2**53 are exact doubles; JavaScript writes larger ones after rounding.
_EXACT_INT = 2**53


def canonical_json(value: Any, *, omit_cache_control: bool = False) -> str:
    """``value`` as Claude Code's canonical JSON text (see the module docstring)."""
    parts: list[str] = []
    _write(value, parts.append, omit_cache_control)
    return "".join(parts)


def utf8(text: str) -> bytes:
    """``text`` in UTF-8, lone surrogates written as JavaScript escapes them in JSON.

    Lone surrogates only occur inside string values of :func:`canonical_json`'s text, where
    ``JSON.stringify`` writes them as ``\\udxxx``.
    """
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text).encode("utf-8")


def sha256_hex(text: str) -> str:
    """The SHA-256 of :func:`utf8` of ``text``, as lower-case hex."""
    return hashlib.sha256(utf8(text)).hexdigest()


def _utf16(key: str) -> bytes:
    return key.encode("utf-16-be", "surrogatepass")


def _write(value: Any, out: Callable[[str], object], omit: bool) -> None:
    if isinstance(value, str):
        out(_encode_string(value))
    elif isinstance(value, Mapping):
        keys = sorted(value)
        if not all(map(str.isascii, keys)):
            keys = sorted(value, key=_utf16)
        out("{")
        first = True
        for key in keys:
            if omit and key == "cache_control":
                continue
            if not first:
                out(",")
            first = False
            out(_encode_string(key))
            out(":")
            _write(value[key], out, omit)
        out("}")
    elif isinstance(value, Sequence):
        out("[")
        for index, item in enumerate(value):
            if index:
                out(",")
            _write(item, out, omit)
        out("]")
    elif value is None or value is True or value is False:
        out("null" if value is None else "true" if value else "false")
    elif isinstance(value, int):
        out(str(value) if -_EXACT_INT <= value <= _EXACT_INT else _number(value))
    elif isinstance(value, float):
        out(_number(value))
    else:
        out("null")  # JSON.stringify writes what it cannot represent as null


def _number(value: float) -> str:
    """``value`` as JavaScript's ``Number.prototype.toString`` writes it (JSON's subset)."""
    try:
        number = float(value)
    except OverflowError:
        return "null"  # beyond a double: Infinity, which JSON.stringify writes as null
    if not math.isfinite(number):
        return "null"
    if number == 0:
        return "0"
    sign = "-" if number < 0 else ""
    # repr gives the shortest digits that read back as the same double, as JavaScript does.
    parsed = decimal.Decimal(repr(abs(number))).normalize().as_tuple()
    digits = "".join(map(str, parsed.digits))
    exponent = int(parsed.exponent)
    k = len(digits)
    n = exponent + k  # value = 0.digits * 10**n
    if k <= n <= 21:
        text = digits + "0" * (n - k)
    elif 0 < n <= 21:
        text = f"{digits[:n]}.{digits[n:]}"
    elif -6 < n <= 0:
        text = "0." + "0" * -n + digits
    else:
        power = n - 1
        mantissa = digits if k == 1 else f"{digits[0]}.{digits[1:]}"
        text = f"{mantissa}e{'+' if power >= 0 else '-'}{abs(power)}"
    return sign + text
