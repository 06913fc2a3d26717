"""YAML as Claude Code reads and writes it: the YAML 1.2 core schema and Bun's serialiser.

Claude Code runs on Bun, whose YAML parser follows YAML 1.2's core schema (``yes`` and
``2026-03-05`` are text) and whose ``YAML.stringify`` decides the exact bytes of every
memory file Claude Code writes. :func:`load_yaml` reads as Bun does, on top of PyYAML;
:func:`dump_yaml` writes as Bun does. :mod:`memdir.store._frontmatter` builds memory files
on both.
"""

from __future__ import annotations

import array
import math
import re
import sys
from collections.abc import Mapping, Sequence
from typing import Any, Final

import yaml

from memdir.errors import UsageError

__all__ = [
    "STR_TAG",
    "SURROGATE_ESCAPE",
    "core_tag",
    "dump_yaml",
    "join_surrogates",
    "js_key",
    "load_scalar",
    "load_yaml",
]


# --- reading YAML the way Claude Code does -------------------------------------------------


# YAML 1.2's core schema: the tags a plain scalar resolves to, by pattern.
_CORE_RESOLVERS: Final = (
    ("tag:yaml.org,2002:null", re.compile(r"^(?:~|null|Null|NULL|)$"), ["~", "n", "N", ""]),
    (
        "tag:yaml.org,2002:bool",
        re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
        list("tTfF"),
    ),
    (
        "tag:yaml.org,2002:int",
        re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$"),
        list("-+0123456789"),
    ),
    (
        "tag:yaml.org,2002:float",
        re.compile(
            r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
            r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
        ),
        list("-+.0123456789"),
    ),
    # Merge keys are not core YAML, but Bun honours them and so does PyYAML.
    ("tag:yaml.org,2002:merge", re.compile(r"^(?:<<)$"), ["<"]),
)


STR_TAG: Final = "tag:yaml.org,2002:str"


def core_tag(text: str) -> str:
    """The tag YAML 1.2's core schema gives ``text`` as a plain scalar."""
    for tag, pattern, _first in _CORE_RESOLVERS:
        if pattern.match(text):
            return tag
    return STR_TAG


def _core_schema(base: Any) -> Any:
    """A subclass of the PyYAML loader ``base`` that resolves plain scalars by YAML 1.2.

    PyYAML follows YAML 1.1, where ``yes`` is true, ``1_000`` is 1000, ``1:30`` is 90 and
    ``2026-03-05`` is a date. Claude Code (Bun's parser) follows YAML 1.2's core schema,
    and writes those unquoted, so they must read as the text they are.
    """

    class Loader(base):  # type: ignore[misc]
        yaml_implicit_resolvers: dict[Any, Any] = {}  # noqa: RUF012 (PyYAML's class registry)

    for tag, pattern, first in _CORE_RESOLVERS:
        Loader.add_implicit_resolver(tag, pattern, first)
    Loader.add_constructor("tag:yaml.org,2002:int", _construct_int)
    # "<<" merges as a key; as a value it is just the text, as Bun reads it.
    Loader.add_constructor("tag:yaml.org,2002:merge", _construct_text)
    return Loader


def _construct_text(loader: Any, node: Any) -> str:
    return str(loader.construct_scalar(node))


def _construct_int(loader: Any, node: Any) -> int:
    # PyYAML's own reads "017" as octal and rejects "09"; YAML 1.2 has both decimal.
    text = str(loader.construct_scalar(node))
    if text.startswith("0o"):
        return int(text[2:], 8)
    if text.startswith("0x"):
        return int(text[2:], 16)
    return int(text)


class _UncheckedLoader(_core_schema(yaml.SafeLoader)):  # type: ignore[misc]
    """The pure loader without PyYAML's character check.

    Claude Code writes characters such as U+0080 or U+FFFE unescaped, which PyYAML's
    reader refuses outright although nothing else about the document is wrong.
    """

    def check_printable(self, data: str) -> None:
        """Accept every character."""


# The C loader is much faster, but a PyYAML built without libyaml only has the pure one.
# Both are safe loaders: tags such as !!python/object are rejected, never executed.
_LOADER: Any = _core_schema(yaml.CSafeLoader) if hasattr(yaml, "CSafeLoader") else _UncheckedLoader


# "\ud83d\ude80" is one character, as JSON and Bun read it; PyYAML makes it two halves.
SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def join_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")
    if isinstance(value, dict):
        return {join_surrogates(k): join_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [join_surrogates(item) for item in value]
    return value


def load_scalar(text: str) -> tuple[bool, Any]:
    """``(True, value)`` for YAML text that loads, ``(False, None)`` when it does not."""
    try:
        return True, load_yaml(text)
    except Exception:
        return False, None


def load_yaml(text: str) -> Any:
    """Load ``text``; raises whatever PyYAML raises.

    libyaml refuses characters and escapes (U+FFFE, a surrogate pair written as two
    ``\\u`` escapes) that Claude Code writes and reads; the pure loader, without its
    character check, is asked again before giving up.
    """
    try:
        return yaml.load(text, Loader=_LOADER)
    except yaml.YAMLError:
        if _LOADER is _UncheckedLoader:
            raise
        return yaml.load(text, Loader=_UncheckedLoader)


# --- Claude Code's YAML serialiser -----------------------------------------------------------
#
# Claude Code prints frontmatter with Bun's YAML.stringify(value, null, 2). The rules below
# are that serialiser's, checked against the output of the Claude Code 2.1.332 binary
# (the recordings in tests/store/fixtures/, which test_claude_code_layout.py replays): which
# text goes double-quoted, how it is escaped, how numbers print, how maps and lists nest, and
# JavaScript's key order. Where Bun would write something memdir's reader could not read
# back as the same value (a lone surrogate, which has no UTF-8 form), memdir quotes or
# escapes it instead: exactness of the value wins over sameness of the bytes.

_KEYWORDS: Final = frozenset(
    """true True TRUE false False FALSE yes Yes YES no No NO on On ON off Off OFF n N y Y
    null Null NULL ~ .inf .Inf .INF .nan .NaN .NAN +.inf +.Inf +.INF""".split()  # noqa: SIM905
)
_FIRST_QUOTED: Final = frozenset(map(ord, "&*?|-<>!%@:,[]{}#'\"` \t\n\r")) | {0xFEFF}
_ANYWHERE_QUOTED: Final = frozenset(map(ord, "{}[],#`'"))
_SPACES: Final = frozenset((0x20, 0x09, 0x0A, 0x0D))
_MARKER_END: Final = _SPACES | frozenset(map(ord, "[]{},"))
_HEX_LETTERS: Final = frozenset(map(ord, "abcdfABCDF"))
_ESCAPES: Final = {
    0x00: "\\0",
    0x07: "\\a",
    0x08: "\\b",
    0x09: "\\t",
    0x0A: "\\n",
    0x0B: "\\v",
    0x0C: "\\f",
    0x0D: "\\r",
    0x1B: "\\e",
    0x22: '\\"',
    0x5C: "\\\\",
    0x7F: "\\x7f",
    0x85: "\\N",
    0xA0: "\\_",
    0x2028: "\\L",
    0x2029: "\\P",
}
# Keys JavaScript orders first, ascending: canonical array indices (0 to 2**32 - 2).
_ARRAY_INDEX = re.compile(r"0|[1-9][0-9]*")
_MAX_ARRAY_INDEX = 2**32 - 2


def _utf16_units(text: str) -> list[int]:
    """``text`` as JavaScript holds it: UTF-16 code units (Bun's rules index those)."""
    units = array.array("H", text.encode("utf-16-le", "surrogatepass"))
    if sys.byteorder == "big":
        units.byteswap()
    return units.tolist()


def _looks_numeric(units: Sequence[int]) -> bool:
    """Whether Bun reads ``units`` as a number-like word that must be quoted."""
    minus = exponent = dot = False
    base = "dec"
    leading = True  # only signs so far: a 0 here may open 0x / 0o
    i = 0
    while True:
        c = units[i]
        if c == 0x2E:  # .
            if dot or base != "dec":
                return False
            dot, leading = True, False
        elif c == 0x2B:  # +
            if base == "hex":
                return False
        elif c == 0x2D:  # -
            if minus:
                return False
            minus = True
        elif c == 0x30 and leading:  # 0
            leading = False
            if i + 1 < len(units) and units[i + 1] in (0x78, 0x58, 0x6F, 0x4F):
                base = "hex" if units[i + 1] in (0x78, 0x58) else "oct"
                i += 2
                if i >= len(units):
                    return False
                continue
        elif c in (0x65, 0x45):  # e E
            if base != "hex":
                if exponent:
                    return False
                exponent = True
            leading = False
        elif c in _HEX_LETTERS:
            if base != "hex":
                return False
        elif 0x30 <= c <= 0x39:
            leading = False
        else:
            return False
        i += 1
        if i >= len(units):
            return True


def _needs_quotes(text: str) -> bool:
    """Whether Bun's serialiser double-quotes ``text``."""
    units = _utf16_units(text)
    count = len(units)
    if not count:
        return True
    if units[-1] in _SPACES or units[-1] == 0x3A:
        return True
    if units[0] in _FIRST_QUOTED or text in _KEYWORDS:
        return True
    for i, c in enumerate(units):
        if c in _ANYWHERE_QUOTED:
            return True
        if c == 0x3A:  # ":" before a blank
            if i + 1 < count and units[i + 1] in _SPACES:
                return True
        elif c in (0x2D, 0x2E):  # "---" / "..." as a document marker
            marker = i + 2 < count and units[i + 1] == c and units[i + 2] == c
            if marker and (i + 3 >= count or units[i + 3] in _MARKER_END):
                return True
            if i == 0 and _looks_numeric(units):
                return True
        elif 0x30 <= c <= 0x39 or c == 0x2B:
            if i == 0 and (c != 0x2B or count > 1) and _looks_numeric(units):
                return True
        elif c <= 0x1F or c in (0x22, 0x7F, 0x85, 0xA0, 0x2028, 0x2029):
            return True
    # A lone surrogate has no UTF-8 form: only an escape can write it.
    return _LONE_SURROGATE.search(text) is not None


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _double_quoted(text: str) -> str:
    out = ['"']
    for char in text:
        code = ord(char)
        escape = _ESCAPES.get(code)
        if escape is not None:
            out.append(escape)
        elif code < 0x20:
            out.append(f"\\x{code:02x}")
        elif 0xD800 <= code < 0xE000:
            out.append(f"\\u{code:04x}")  # a lone surrogate: no UTF-8 form to write raw
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def _yaml_string(text: str) -> str:
    if _needs_quotes(text):
        return _double_quoted(text)
    if core_tag(text) != STR_TAG:
        return _double_quoted(text)  # Bun would leave it plain; YAML 1.2 reads a non-string
    if _PLAIN_SAFE.fullmatch(text):
        return text  # letters, digits and punctuation PyYAML reads plainly anywhere
    ok, loaded = load_scalar(f"k: {text}")
    if ok and loaded == {"k": text}:
        return text
    # Bun would leave it plain, but it would not read back as this text: quote it.
    return _double_quoted(text)


# Text made of these alone reads back as itself once Bun's rules let it stand plain.
_PLAIN_SAFE = re.compile(r"[\w .,:/()@=~^$%&*!?+-]+")


def _js_number(value: float) -> str:
    """``value`` as Bun prints a JavaScript number (ECMAScript's Number::toString)."""
    if math.isnan(value):
        return ".nan"
    if math.isinf(value):
        return ".inf" if value > 0 else "-.inf"
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    if value.is_integer() and -(2**31) <= value < 2**31:
        return str(int(value))  # held as an integer by the JavaScript engine
    # repr gives the shortest digits that read back as the same double, as JavaScript
    # does; only the layout around them differs.
    mantissa, _, exp = repr(abs(value)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction.rstrip("0")
    point = len(whole) + int(exp or "0")  # the decimal point sits after this many digits
    stripped = digits.lstrip("0")
    point -= len(digits) - len(stripped)
    digits = stripped.rstrip("0")
    sign = "-" if value < 0 else ""
    count = len(digits)
    if count <= point <= 21:
        return sign + digits + "0" * (point - count)
    if 0 < point <= 21:
        return f"{sign}{digits[:point]}.{digits[point:]}"
    if -6 < point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    exponent = point - 1
    shown = digits if count == 1 else f"{digits[0]}.{digits[1:]}"
    return f"{sign}{shown}e{'+' if exponent >= 0 else '-'}{abs(exponent)}"


def js_key(key: object) -> str:
    if isinstance(key, str):
        return key
    if key is None:
        return "null"
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int):
        return str(key)
    if isinstance(key, float):
        return _js_number(key)
    raise UsageError(f"frontmatter key {key!r} cannot be written as YAML")


def _js_ordered(mapping: Mapping[Any, Any]) -> list[tuple[str, Any]]:
    """The entries in JavaScript's property order: array indices first, ascending."""
    entries: dict[str, Any] = {}
    for key, value in mapping.items():
        entries[js_key(key)] = value
    indices = sorted(
        (k for k in entries if _ARRAY_INDEX.fullmatch(k) and int(k) <= _MAX_ARRAY_INDEX),
        key=int,
    )
    rest = [k for k in entries if k not in set(indices)]
    return [(k, entries[k]) for k in (*indices, *rest)]


def _opens_block(value: object) -> bool:
    """Whether a value goes on the lines below its key: a non-empty map or list."""
    return isinstance(value, Mapping | list | tuple) and len(value) > 0


def dump_yaml(value: object, indent: int = 0) -> str:
    """``value`` as Bun's ``YAML.stringify(value, null, 2)`` prints it (no final newline)."""
    out: list[str] = []
    _emit(value, indent, out)
    return "".join(out)


def _emit(value: object, indent: int, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif isinstance(value, bool):
        out.append("true" if value else "false")
    elif isinstance(value, int):
        # Exact digits even past 2**53, where a JavaScript number would round.
        out.append(str(value))
    elif isinstance(value, float):
        out.append(_js_number(value))
    elif isinstance(value, str):
        out.append(_yaml_string(value))
    elif isinstance(value, list | tuple):
        if not value:
            out.append("[]")
            return
        for position, item in enumerate(value):
            if position:
                out.append("\n" + "  " * indent)
            out.append("- ")
            _emit(item, indent + 1, out)
    elif isinstance(value, Mapping):
        entries = _js_ordered(value)
        if not entries:
            out.append("{}")
            return
        for position, (key, item) in enumerate(entries):
            if position:
                out.append("\n" + "  " * indent)
            out.append(_yaml_string(key))
            if _opens_block(item):
                out.append(":\n" + "  " * (indent + 1))
            else:
                out.append(": ")
            _emit(item, indent + 1, out)
    else:
        raise UsageError(
            f"frontmatter value of type {type(value).__name__} cannot be written as YAML"
        )
