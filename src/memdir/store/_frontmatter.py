"""Memory files: YAML frontmatter (``name``, ``description``, ``type``) above a Markdown body.

Reading is lenient on purpose. Memory files are written by models and by hand, and one
with a stray colon must still show up in the manifest, so a parse never raises: bad YAML
is retried with its values quoted, then read line by line, and only then given up as
empty frontmatter. Writing is strict: every value is emitted so that it reads back as
exactly the string that went in.
"""

from __future__ import annotations

import datetime
import json
import re
import types
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, get_args

import yaml

from memdir.errors import UsageError

__all__ = ["MEMORY_TYPES", "MemoryFile", "MemoryType", "format_memory_file", "parse_memory_file"]

MemoryType = Literal["user", "feedback", "project", "reference"]
"""The four kinds of memory Claude Code saves; any other ``type`` value reads as ``None``."""

MEMORY_TYPES: Final[tuple[MemoryType, ...]] = get_args(MemoryType)
"""The valid ``type`` values, in Claude Code's order."""

# The C loader is much faster, but a PyYAML built without libyaml only has the pure one.
# Both are safe loaders: tags such as !!python/object are rejected, never executed.
_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_BOM = "\ufeff"
# Trailing blanks and a CR (from CRLF files) may follow a fence without breaking it.
_FENCE_TRAILING = " \t\r"
# A top-level ``key: value`` line. Indented lines belong to the entry above them.
_TOP_LEVEL_ENTRY = re.compile(r"([A-Za-z_][\w.-]*)[ \t]*:(?:[ \t]+(.*))?")
# A value that opens a block scalar; quoting it would orphan the indented lines below.
_BLOCK_SCALAR_HEADER = re.compile(r"[|>][0-9+-]*")
_EMPTY_MAPPING: Mapping[str, Any] = types.MappingProxyType({})


@dataclass(frozen=True, kw_only=True)
class MemoryFile:
    """A memory file split into its frontmatter and its body."""

    frontmatter: Mapping[str, Any]
    """The frontmatter as parsed (read-only); empty when there was none or it was unusable."""

    body: str
    """The Markdown after the frontmatter, without the blank lines that separate them."""

    malformed: bool
    """Whether the frontmatter was not valid YAML: it needed a fallback, or was dropped."""

    @property
    def name(self) -> str | None:
        """The ``name`` value as text, or ``None`` when absent or not a scalar."""
        return _scalar_text(self.frontmatter.get("name"))

    @property
    def description(self) -> str | None:
        """The ``description`` value as text, or ``None`` when absent or not a scalar."""
        return _scalar_text(self.frontmatter.get("description"))

    @property
    def type(self) -> MemoryType | None:
        """The memory type, or ``None`` when absent or not one of :data:`MEMORY_TYPES`."""
        value = self.frontmatter.get("type")
        for known in MEMORY_TYPES:
            if value == known:
                return known
        return None


def parse_memory_file(text: str) -> MemoryFile:
    """Split ``text`` into frontmatter and body. Never raises.

    Frontmatter is a first line ``---`` up to the next ``---`` line (a BOM, CRLF line
    ends and trailing blanks on the fences are tolerated). Without an opening fence, or
    when the fence is never closed, the frontmatter is empty and the whole text is the
    body (less a BOM).
    """
    block, body = split_frontmatter(text)
    if block is None:
        return MemoryFile(frontmatter=_EMPTY_MAPPING, body=body, malformed=False)
    frontmatter, malformed = _load_block(block.replace("\r\n", "\n"))
    return MemoryFile(
        frontmatter=types.MappingProxyType(frontmatter), body=body, malformed=malformed
    )


def format_memory_file(
    *,
    name: str,
    description: str,
    type: MemoryType | None,
    body: str,
    extra: Mapping[str, Any] | None = None,
) -> str:
    """Render a memory file that :func:`parse_memory_file` reads back unchanged.

    Keys come in the order ``name``, ``description``, ``type`` (left out when ``None``),
    then ``extra``'s. Any string survives the trip, whatever it holds: colons, quotes,
    ``#``, a leading ``-``, line breaks, no text at all. The body loses its leading and
    trailing line breaks and ends with exactly one newline (an empty body stays empty).

    Raises :class:`~memdir.errors.UsageError` for a ``type`` outside
    :data:`MEMORY_TYPES`, an ``extra`` key that repeats a main one, or an ``extra`` value
    YAML cannot represent.
    """
    if type is not None and type not in MEMORY_TYPES:
        raise UsageError(f"unknown memory type {type!r}; expected one of {MEMORY_TYPES}")
    fields: dict[str, Any] = {"name": name, "description": description}
    if type is not None:
        fields["type"] = type
    for key, value in (extra or {}).items():
        if key in ("name", "description", "type"):
            raise UsageError(f"extra frontmatter key {key!r} clashes with a main field")
        fields[key] = value
    try:
        header = yaml.dump(
            fields,
            Dumper=_Dumper,
            sort_keys=False,
            allow_unicode=True,
            default_flow_style=False,
            # Never fold a long value over several lines; one key, one line is easier to edit.
            width=1 << 30,
        )
    except yaml.YAMLError as exc:
        raise UsageError(f"frontmatter value cannot be written as YAML: {exc}") from exc
    return f"---\n{header}---\n\n{_normalise_body(body)}"


def split_frontmatter(text: str) -> tuple[str | None, str]:
    """Return ``(frontmatter block or None, body)``; shared with the entrypoint loader."""
    if text.startswith(_BOM):
        text = text[len(_BOM) :]
    first_end = text.find("\n")
    if first_end < 0 or text[:first_end].rstrip(_FENCE_TRAILING) != "---":
        return None, text
    start = first_end + 1
    pos = start
    while pos < len(text):
        line_end = text.find("\n", pos)
        if line_end < 0:
            line_end = len(text)
        if text[pos:line_end].rstrip(_FENCE_TRAILING) == "---":
            # Blank lines between the closing fence and the body are layout, not content.
            return text[start:pos], text[line_end + 1 :].lstrip("\r\n")
        pos = line_end + 1
    return None, text


def _normalise_body(body: str) -> str:
    core = body.strip("\r\n")
    return f"{core}\n" if core else ""


def _load_block(block: str) -> tuple[dict[str, Any], bool]:
    """Parse a frontmatter block: YAML, then YAML with quoted values, then line by line."""
    loaded = _load_yaml(block)
    if loaded is not None:
        return loaded, False
    quoted = _quote_values(block)
    if quoted != block:
        loaded = _load_yaml(quoted)
        if loaded is not None:
            return loaded, True
    return _parse_lines(block), True


def _load_yaml(block: str) -> dict[str, Any] | None:
    """The block as a mapping with text keys, or ``None`` when it is not one."""
    try:
        data = yaml.load(block, Loader=_LOADER)
    # Malformed input surfaces as YAMLError, but also as ValueError (a date like
    # 2024-13-45), RecursionError (deep nesting) and friends: all mean "not YAML for us".
    except Exception:
        return None
    if data is None:
        return {}
    if not isinstance(data, dict):
        return None
    return {str(key): value for key, value in data.items()}


def _quote_values(block: str) -> str:
    """Quote each top-level value, so ``description: a: b`` reads as the text ``a: b``."""
    lines = block.split("\n")
    for index, line in enumerate(lines):
        match = _TOP_LEVEL_ENTRY.fullmatch(line)
        if match is None or not match.group(2):
            continue
        value = match.group(2).strip()
        if not value or _is_quoted(value) or _BLOCK_SCALAR_HEADER.fullmatch(value):
            continue
        # A JSON string is also a YAML double-quoted scalar with the same meaning.
        lines[index] = f"{match.group(1)}: {json.dumps(value, ensure_ascii=False)}"
    return "\n".join(lines)


def _parse_lines(block: str) -> dict[str, Any]:
    """Last resort: each top-level ``key: value`` line, values as plain text."""
    result: dict[str, Any] = {}
    for line in block.split("\n"):
        match = _TOP_LEVEL_ENTRY.fullmatch(line)
        if match is None:
            continue
        value = (match.group(2) or "").strip()
        if _is_quoted(value):
            value = value[1:-1]
        result[match.group(1)] = value
    return result


def _is_quoted(value: str) -> bool:
    return len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'"


def _scalar_text(value: object) -> str | None:
    """A scalar as text (YAML may have read ``2026-03-05`` as a date); else ``None``."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float | datetime.date):
        return str(value)
    return None


def _plain_ok(text: str) -> bool:
    """Whether PyYAML may choose the style: printable, one line, no edge blanks."""
    if not text or text != text.strip():
        return False
    return all(
        "\x20" <= ch <= "\x7e"
        or ("\xa0" <= ch <= "\ud7ff")
        or ("\ue000" <= ch <= "\ufffd" and ch != _BOM)
        or ("\U00010000" <= ch <= "\U0010fffd")
        for ch in text
    )


class _Dumper(yaml.SafeDumper):
    """A safe dumper whose strings always read back as the same string."""


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    # PyYAML's own choice is plain or single-quoted, which is exact for simple one-line
    # text; anything else goes double-quoted, where every character has an escape.
    style = None if _plain_ok(data) else '"'
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _represent_str)
