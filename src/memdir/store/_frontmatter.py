"""Memory files: YAML frontmatter above a Markdown body, in either layout Claude Code uses.

Two layouts exist. Claude Code 2.1.88 (and memdir until it followed) wrote ``name``,
``description`` and ``type`` at the top level. Claude Code 2.1.332 rewrites the frontmatter
of every memory file it writes or edits::

    ---
    name: always-use-polars-never-pandas
    description: The user wants polars for dataframes
    metadata:
      node_type: memory
      type: feedback
      originSessionId: 3f2c9a4e-7b1d-4c8e-9a55-1d2e3f4a5b6c
      modified: 2026-03-05T14:03:22.120Z
    ---

    Use polars.

``name`` becomes a slug (:func:`memory_slug`), every other key moves under ``metadata``
after ``node_type: memory``, and ``originSessionId`` and ``modified`` record which session
first wrote the memory and when it was last written. :func:`format_memory_file` writes
that layout by default (``format="2.1.88"`` keeps the old one), :func:`stamp_memory_file`
does what Claude Code does to a file it writes, and the YAML comes out byte for byte as
Claude Code's serialiser (Bun's ``YAML.stringify``) prints it.

Reading is lenient on purpose. Memory files are written by models and by hand, and one
with a stray colon must still show up in the manifest, so a parse never raises: bad YAML
is retried with its values quoted, then read line by line, and only then given up as
empty frontmatter. Both layouts read the same: :attr:`MemoryFile.type` is
``metadata.type`` when there is one, else the top-level ``type``. YAML is read with the
YAML 1.2 core schema, as Claude Code reads it: ``yes`` and ``2026-03-05`` stay text.
Writing is strict: every value is emitted so that it reads back as exactly the value
that went in.
"""

from __future__ import annotations

import datetime
import json
import re
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, get_args

import yaml

from memdir.errors import UsageError
from memdir.store._bun_yaml import (
    STR_TAG,
    SURROGATE_ESCAPE,
    core_tag,
    dump_yaml,
    join_surrogates,
    js_key,
    load_scalar,
    load_yaml,
)

__all__ = [
    "MEMORY_FORMATS",
    "MEMORY_TYPES",
    "MemoryFile",
    "MemoryFormat",
    "MemoryType",
    "find_links",
    "format_memory_file",
    "iso_timestamp",
    "memory_slug",
    "parse_memory_file",
    "replace_links",
    "split_frontmatter",
    "stamp_memory_file",
    "type_of_file_name",
]

MemoryType = Literal["user", "feedback", "project", "reference"]
"""The four kinds of memory Claude Code saves; any other ``type`` value reads as ``None``."""

MEMORY_TYPES: Final[tuple[MemoryType, ...]] = get_args(MemoryType)
"""The valid ``type`` values, in Claude Code's order."""

MemoryFormat = Literal["current", "2.1.88"]
"""The frontmatter layout memdir writes.

``current``: today's Claude Code (2.1.332): slug ``name``, ``description``, and a
``metadata`` map with ``node_type``, ``type``, ``originSessionId`` and ``modified``.
``2.1.88``: the older layout, ``name``, ``description`` and ``type`` at the top level,
for tools that read only that."""

MEMORY_FORMATS: Final[tuple[MemoryFormat, ...]] = get_args(MemoryFormat)
"""The layouts :func:`format_memory_file` can write, the default first."""

# The keys Claude Code keeps at the top level; every other one lives under metadata.
_TOP_LEVEL_KEYS: Final = ("name", "description", "metadata")
# The values Claude Code writes into every memory's metadata.
_NODE_TYPE: Final = "memory"
_MAIN_FIELDS: Final = ("name", "description", "type")

_BOM = "\ufeff"
# Trailing blanks and a CR (from CRLF files) may follow a fence without breaking it.
_FENCE_TRAILING = " \t\r"
# A top-level ``key: value`` line. Indented lines belong to the entry above them.
_TOP_LEVEL_ENTRY = re.compile(r"([A-Za-z_][\w.-]*)[ \t]*:(?:[ \t]+(.*))?")
# A value that opens a block scalar; quoting it would orphan the indented lines below.
_BLOCK_SCALAR_HEADER = re.compile(r"[|>][0-9+-]*")
# A top-level line whose plain value Claude Code reads literally (its quoteLossyValues).
_LOSSY_CANDIDATE = re.compile(r"([A-Za-z0-9_][A-Za-z0-9_.-]*):[ \t]+(.*)")
_NULL_WORDS: Final = frozenset({"null", "Null", "NULL", "~"})
_EMPTY_MAPPING: Mapping[str, Any] = types.MappingProxyType({})
# [[name]] links between memories; the target ends at "|" (a label) or "#" (a section).
_LINK = re.compile(r"\[\[([^\[\]\n|#]+)((?:[|#][^\[\]\n]*)?)\]\]")


# --- the parsed file -----------------------------------------------------------------------


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
    def metadata(self) -> Mapping[str, Any]:
        """Every key but ``name`` and ``description``, as Claude Code sees them.

        That is the top-level keys other than ``name``, ``description`` and ``metadata``
        (those whose value is not null), then the ``metadata`` map's keys; a key in both
        takes the ``metadata`` value. A 2.1.88-layout file's ``type`` is here too.
        """
        return types.MappingProxyType(_metadata_view(self.frontmatter))

    @property
    def name(self) -> str | None:
        """The ``name`` value as text, or ``None`` when absent or not a scalar.

        The top-level ``name``; one under ``metadata`` is used only when there is none.
        """
        return _main_text(self.frontmatter, "name")

    @property
    def description(self) -> str | None:
        """The ``description`` value as text, or ``None`` when absent or not a scalar.

        The top-level ``description``; one under ``metadata`` only when there is none.
        """
        return _main_text(self.frontmatter, "description")

    @property
    def type(self) -> MemoryType | None:
        """The memory type, or ``None`` when absent or not one of :data:`MEMORY_TYPES`.

        ``metadata.type`` wins over a top-level ``type``, as in Claude Code, even when
        its value is not a valid type.
        """
        value = _metadata_view(self.frontmatter).get("type")
        for known in MEMORY_TYPES:
            if value == known:
                return known
        return None

    @property
    def origin_session_id(self) -> str | None:
        """The session the memory came from (``metadata.originSessionId``), or ``None``."""
        return _nonempty_text(_metadata_view(self.frontmatter).get("originSessionId"))

    @property
    def modified(self) -> str | None:
        """When the memory was last written (``metadata.modified``, ISO 8601), or ``None``."""
        return _nonempty_text(_metadata_view(self.frontmatter).get("modified"))

    @property
    def extra_metadata(self) -> Mapping[str, Any]:
        """:attr:`metadata` without ``node_type`` and ``type``: what a rewrite carries over.

        Pass it as ``extra`` to :func:`format_memory_file` to write the memory again with
        everything else it held (its ``originSessionId`` and ``modified`` included).
        """
        view = _metadata_view(self.frontmatter)
        return types.MappingProxyType(
            {k: v for k, v in view.items() if k not in ("node_type", "type")}
        )

    @property
    def links(self) -> tuple[str, ...]:
        """The ``[[name]]`` links in the body, by target, in order, each once."""
        return find_links(self.body)


def _metadata_view(frontmatter: Mapping[str, Any]) -> dict[str, Any]:
    """Claude Code's reading of everything but name and description (see ``metadata``)."""
    view = {
        key: value
        for key, value in frontmatter.items()
        if key not in _TOP_LEVEL_KEYS and value is not None
    }
    nested = frontmatter.get("metadata")
    if isinstance(nested, Mapping):
        view.update({_key_text(key): value for key, value in nested.items()})
    return view


def _key_text(key: object) -> str:
    """A key as JavaScript names it (``1``, ``true``, ``null``); ``str`` for anything else."""
    try:
        return js_key(key)
    except UsageError:
        return str(key)


def _main_text(frontmatter: Mapping[str, Any], key: str) -> str | None:
    value = _scalar_text(frontmatter.get(key))
    if value is None and key not in frontmatter:
        nested = frontmatter.get("metadata")
        if isinstance(nested, Mapping):
            value = _scalar_text(nested.get(key))
    return value


def _nonempty_text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _scalar_text(value: object) -> str | None:
    """A scalar as text (YAML may have read ``42`` as a number); else ``None``."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool | int | float | datetime.date):
        return str(value)
    return None


def parse_memory_file(text: str) -> MemoryFile:
    """Split ``text`` into frontmatter and body. Never raises.

    Frontmatter is a first line ``---`` up to the next ``---`` line (a BOM, CRLF line
    ends and trailing blanks on the fences are tolerated). Without an opening fence, or
    when the fence is never closed, the frontmatter is empty and the whole text is the
    body (less a BOM).

    A top-level plain value that YAML would cut short, such as ``description: use uv #
    not pip`` (a comment to YAML), is read whole, as Claude Code reads it.
    """
    block, body = split_frontmatter(text)
    if block is None:
        return MemoryFile(frontmatter=_EMPTY_MAPPING, body=body, malformed=False)
    frontmatter, malformed = _load_block(block.replace("\r\n", "\n"))
    return MemoryFile(
        frontmatter=types.MappingProxyType(frontmatter), body=body, malformed=malformed
    )


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


def _load_block(block: str) -> tuple[dict[str, Any], bool]:
    """Parse a frontmatter block: YAML, then YAML with quoted values, then line by line."""
    literal = _quote_lossy_values(block)
    if literal != block:
        loaded = _load_yaml(literal)
        if loaded is not None:
            return loaded, False
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
        data = load_yaml(block)
    # Malformed input surfaces as YAMLError, but also as ValueError, RecursionError
    # (deep nesting) and friends: all mean "not YAML for us".
    except Exception:
        return None
    if data is None:
        return {}
    if not isinstance(data, dict):
        return None
    if SURROGATE_ESCAPE.search(block):
        data = join_surrogates(data)
    return {str(key): value for key, value in data.items()}


def _quote_lossy_values(block: str) -> str:
    """Quote top-level plain values that YAML would read as something shorter.

    Claude Code's reader does this first: ``description: use uv # not pip`` is the text
    ``use uv # not pip`` to it, not ``use uv``, and ``key: #x`` is ``#x``, not null.
    """
    lines = block.split("\n")
    changed = False
    for index, line in enumerate(lines):
        match = _LOSSY_CANDIDATE.fullmatch(line)
        if match is None:
            continue
        value = match.group(2).rstrip()
        if not value or value[0] in "\"'|>":
            continue
        if "#" not in value and value[0] not in "&!":
            continue  # nothing YAML would drop: a comment, an anchor or a tag
        ok, loaded = load_scalar(value)
        if not ok:
            continue
        shortened = isinstance(loaded, str) and loaded != value
        if shortened or (loaded is None and value not in _NULL_WORDS):
            escaped = value.replace("\\", "\\\\").replace('"', '\\"')
            lines[index] = f'{match.group(1)}: "{escaped}"'
            changed = True
    return "\n".join(lines) if changed else block


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


# --- names and links -----------------------------------------------------------------------

_SLUG = re.compile(r"[a-z0-9_-]+")
_NOT_SLUG = re.compile(r"[^a-z0-9]+")


def type_of_file_name(filename: str) -> MemoryType | None:
    """The memory type a file's name starts with (``feedback_testing.md``: feedback), as
    memory files are named: ``None`` for a name that starts with none."""
    prefix = filename.rsplit("/", 1)[-1].split("_", 1)[0]
    return next((kind for kind in MEMORY_TYPES if kind == prefix), None)


def memory_slug(name: str) -> str:
    """The ``name`` Claude Code writes for a memory called ``name``.

    A name made only of ``a-z``, ``0-9``, ``_`` and ``-`` is kept as it is. Any other is
    lower-cased, each run of characters outside ``a-z0-9`` becomes one ``-``, and ``-``
    is trimmed from both ends: ``"Always use polars, never pandas"`` gives
    ``always-use-polars-never-pandas``, ``"Deploy v2.3"`` gives ``deploy-v2-3``. Accented
    and other non-ASCII letters are separators too (``"Café crème"`` gives
    ``caf-cr-me``), a name with nothing else gives ``""``, and there is no length limit:
    all of this is Claude Code's own rule, kept exactly so that both tools name a memory
    alike.
    """
    if _SLUG.fullmatch(name):
        return name
    return _NOT_SLUG.sub("-", name.lower()).strip("-")


def find_links(text: str) -> tuple[str, ...]:
    """The targets of the ``[[name]]`` links in ``text``, in order, each once.

    ``[[name|label]]`` and ``[[name#section]]`` link to ``name``. Targets are returned as
    written (surrounding blanks removed); compare them through :func:`memory_slug`.
    """
    found: dict[str, None] = {}
    for match in _LINK.finditer(text):
        target = match.group(1).strip()
        if target:
            found.setdefault(target, None)
    return tuple(found)


def replace_links(text: str, renames: Mapping[str, str]) -> str:
    """``text`` with each link to a renamed memory pointing at its new name.

    ``renames`` maps old names to new ones; a link matches when the slugs of its target
    and of an old name are equal. A label or section after the target is kept.
    """
    by_slug = {memory_slug(old): new for old, new in renames.items()}

    def swap(match: re.Match[str]) -> str:
        new = by_slug.get(memory_slug(match.group(1).strip()))
        return match.group(0) if new is None else f"[[{new}{match.group(2)}]]"

    return _LINK.sub(swap, text)


# --- writing -------------------------------------------------------------------------------


def iso_timestamp(moment: datetime.datetime) -> str:
    """``moment`` as JavaScript's ``toISOString()`` writes it: UTC, milliseconds, ``Z``.

    A naive ``moment`` is taken to be UTC. Sub-millisecond digits are dropped, as a
    JavaScript ``Date`` never has them.
    """
    if moment.tzinfo is not None:
        moment = moment.astimezone(datetime.UTC)
    return (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}T{moment.hour:02d}:"
        f"{moment.minute:02d}:{moment.second:02d}.{moment.microsecond // 1000:03d}Z"
    )


def format_memory_file(
    *,
    name: str,
    description: str,
    type: MemoryType | None,
    body: str,
    extra: Mapping[str, Any] | None = None,
    format: MemoryFormat = "current",
    origin_session_id: str | None = None,
    modified: str | datetime.datetime | None = None,
) -> str:
    """Render a memory file in the layout ``format`` names.

    ``current`` (the default) writes what Claude Code 2.1.332 writes, byte for byte::

        ---
        name: <memory_slug(name)>
        description: <description>
        metadata:
          node_type: memory
          type: <type>
          <extra...>
          originSessionId: <origin_session_id>
          modified: <modified>
        ---

        <body>

    ``description`` is left out when empty, ``type`` when ``None``, and extra keys whose
    value is ``None`` are dropped (Claude Code writes no nulls there). ``origin_session_id``
    and ``modified`` replace values of the same key in ``extra`` where it has them, and
    are added at the end otherwise; left at ``None`` they are written only when ``extra``
    has them (:func:`stamp_memory_file` adds them when the file is stored).
    ``modified`` may be a ``datetime`` (written by :func:`iso_timestamp`) or the text.

    ``2.1.88`` writes ``name`` as given, ``description`` and ``type`` at the top level,
    then ``extra``'s keys, and neither stamp; :func:`parse_memory_file` reads every
    value back unchanged.

    Either way any string survives the trip, whatever it holds: colons, quotes, ``#``,
    a leading ``-``, line breaks, no text at all. The body loses its leading and
    trailing line breaks and ends with exactly one newline (an empty body stays empty).

    Raises :class:`~memdir.errors.UsageError` for a ``type`` outside
    :data:`MEMORY_TYPES`, an unknown ``format``, an ``extra`` key that repeats a main
    one (``name``, ``description``, ``type``; ``node_type`` and ``metadata`` too in the
    current layout), or an ``extra`` value YAML cannot represent.
    """
    if type is not None and type not in MEMORY_TYPES:
        raise UsageError(f"unknown memory type {type!r}; expected one of {MEMORY_TYPES}")
    if format not in MEMORY_FORMATS:
        raise UsageError(f"unknown memory format {format!r}; expected one of {MEMORY_FORMATS}")
    reserved = _MAIN_FIELDS if format == "2.1.88" else (*_MAIN_FIELDS, "node_type", "metadata")
    for key in extra or {}:
        if key in reserved:
            raise UsageError(f"extra frontmatter key {key!r} clashes with a main field")
    if format == "2.1.88":
        return _format_2_1_88(name, description, type, body, extra or {})
    metadata: dict[str, Any] = {"node_type": _NODE_TYPE}
    if type is not None:
        metadata["type"] = type
    metadata.update({str(k): v for k, v in (extra or {}).items() if v is not None})
    if origin_session_id is not None:
        metadata["originSessionId"] = origin_session_id
    if isinstance(modified, datetime.datetime):
        modified = iso_timestamp(modified)
    if modified is not None:
        metadata["modified"] = modified
    return _render_current(name, description or None, metadata, _normalise_body(body))


def _format_2_1_88(
    name: str,
    description: str,
    type: MemoryType | None,
    body: str,
    extra: Mapping[str, Any],
) -> str:
    fields: dict[str, Any] = {"name": name, "description": description}
    if type is not None:
        fields["type"] = type
    fields.update(extra)
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


def _render_current(
    name: str | None, description: str | None, metadata: Mapping[str, Any], body: str
) -> str:
    """The current layout around ``body``, as Claude Code's serialiser prints it."""
    fields: dict[str, Any] = {"name": memory_slug(name or "")}
    if description is not None:
        fields["description"] = description
    fields["metadata"] = {
        "node_type": _NODE_TYPE,
        **{k: v for k, v in metadata.items() if k != "node_type" and v is not None},
    }
    return f"---\n{dump_yaml(fields)}\n---\n\n{body}"


def _normalise_body(body: str) -> str:
    core = body.strip("\r\n")
    return f"{core}\n" if core else ""


# --- what Claude Code does to a memory file it writes --------------------------------------

# JavaScript's \s, which Claude Code's patterns use: not quite Python's (no U+0085 or
# U+001C-U+001F, but U+FEFF).
_JS_SPACE = "[\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]"
# Claude Code's two frontmatter patterns: the loose one it splits a file with, and the
# strict one (fences on lines of their own) it checks the split against.
_CC_SPLIT = re.compile(rf"---{_JS_SPACE}*\n([\s\S]*?)---{_JS_SPACE}*\n?")
_CC_FENCED = re.compile(r"---[ \t]*\r?\n([\s\S]*?)\r?\n---[ \t]*(?:\r?\n|\Z)")
_MODIFIED_LINE = re.compile(r"(\s*)modified\s*:([\s\S]*)")
_METADATA_KEY = re.compile(r"metadata:")
_METADATA_BLOCK = re.compile(r"metadata:\s*(?:#.*)?")
_INDENTED = re.compile(r"\s+\S")
_BLANK_OR_COMMENT = re.compile(r"\s*(?:#.*)?")
_INLINE_COMMENT = re.compile(r"(?:^|[ \t])#")
_QUOTED_SPANS = re.compile(r"\"(?:[^\"\\]|\\.)*\"|'(?:[^']|'')*'")
_COMMENT_TAIL = re.compile(r"([ \t]+#.*)$")


@dataclass(frozen=True, kw_only=True)
class _Stampable:
    """A file's frontmatter as Claude Code reads it when it rewrites the file."""

    name: str | None
    description: str | None
    metadata: dict[str, Any]
    body: str
    hazard: bool  # a rewrite could lose or misplace something: only touch `modified`


def stamp_memory_file(
    text: str,
    *,
    session_id: str | None,
    now: str | datetime.datetime,
    team: bool = False,
    default_name: str | None = None,
    default_type: str | None = None,
) -> str:
    """``text`` as Claude Code 2.1.332 stores it when it writes a memory file.

    - Without frontmatter (no ``---`` first line, a BOM before it included) the text is
      returned unchanged.
    - Without an ``originSessionId``, the frontmatter is written again in the current
      layout (:func:`format_memory_file`'s), with ``originSessionId: session_id`` and
      ``modified: now`` added, and the body kept byte for byte (only the blank lines and
      spaces between the closing fence and its first text are layout). A ``session_id``
      of ``None`` (unknown) writes no ``originSessionId`` line, as Claude Code's
      serialiser leaves out a missing value; the next writer that knows its session
      adds one.
    - With an ``originSessionId``, or under ``team/`` (``team=True``), or when a
      rewrite could lose something (a ``#`` comment on a value, a ``---`` inside a value,
      YAML that only the line-by-line fallback reads), only the ``modified:`` line is
      updated, or added at the end of the ``metadata`` block (before the closing fence
      when there is none); where that has no safe place, the text is unchanged.

    A file already in the current layout with both stamps thus only ever changes in its
    ``modified:`` line. ``now`` is a ``datetime`` (see :func:`iso_timestamp`) or the text.
    ``default_name`` names a memory written again whose frontmatter has no ``name`` (or
    an empty one), as its slug, and ``default_type`` types one that has no ``type``:
    memdir's tools pass what the file's name says (``feedback_testing.md``), so the
    memory agent need not spend output on what its file name already says.
    """
    stamp = iso_timestamp(now) if isinstance(now, datetime.datetime) else now
    split = _CC_SPLIT.match(text)
    if split is None:
        return text
    if not team:
        read = _read_stampable(text)
        unclaimed = read is not None and not _nonempty_text(read.metadata.get("originSessionId"))
        if read is not None and unclaimed and not read.hazard:
            metadata = dict(read.metadata)
            if default_type and "type" in metadata and not _nonempty_text(metadata["type"]):
                metadata["type"] = default_type  # an empty one, in its place
            elif default_type and "type" not in metadata:
                # Where Claude Code writes it: before the stamps.
                metadata = {"type": default_type, **metadata}
            metadata.update(originSessionId=session_id, modified=stamp)
            try:
                body = read.body.lstrip("\n")
                name = read.name if _nonempty_text(read.name) else default_name
                return _render_current(name, read.description, metadata, body)
            except UsageError:
                pass  # a value the serialiser cannot write: leave it where it is
    text = _with_defaults(text, default_name, default_type)
    updated = _update_modified_line(text, stamp)
    return text if updated is None else updated


_TOP_LEVEL_KEY = "^{key}[ \t]*:"


def _with_defaults(text: str, name: str | None, kind: str | None) -> str:
    """``text`` with a ``name:`` and a ``type:`` line added at the top of its frontmatter
    where it has no such key at all: a file that is not written again in the current
    layout (a team file, one that claims its session, one a rewrite could harm) still
    gets what its file name says. Left as it is where the frontmatter is not fenced."""
    fenced = _CC_FENCED.match(text)
    read = _read_stampable(text, literal=False) if fenced is not None else None
    if fenced is None or read is None:
        return text
    head = fenced.group(1)
    added = []
    if name and re.search(_TOP_LEVEL_KEY.format(key="name"), head, re.M) is None:
        added.append(f"name: {memory_slug(name)}")
    typed = _nonempty_text(read.metadata.get("type")) or re.search(
        _TOP_LEVEL_KEY.format(key="type"), head, re.M
    )
    if kind and not typed and not re.search(r"^[ \t]+type[ \t]*:", head, re.M):
        added.append(f"type: {kind}")
    if not added:
        return text
    first = text.index("\n") + 1
    cr = "\r" if text[first - 2 : first] == "\r\n" else ""
    return text[:first] + "".join(f"{line}{cr}\n" for line in added) + text[first:]


def _js_trim(text: str) -> str:
    return re.sub(rf"\A{_JS_SPACE}+|{_JS_SPACE}+\Z", "", text)


def _read_stampable(text: str, *, literal: bool = True) -> _Stampable | None:
    """Claude Code's reading of a file it rewrites, or ``None`` without frontmatter.

    ``literal`` reads top-level plain values whole (see :func:`parse_memory_file`) and
    looks for what a rewrite could lose, as Claude Code does before it re-serialises;
    without it the reading is the plain one it checks a ``modified:`` update with.
    """
    split = _CC_SPLIT.match(text)
    if split is None:
        return None
    raw = split.group(1)
    fenced = _CC_FENCED.match(text)
    hazard = False
    if literal and (_js_trim(raw) or (fenced is not None and _js_trim(fenced.group(1)))):
        # A "---" inside a value ends the loose split early: the two readings disagree.
        hazard = fenced is None or _js_trim(fenced.group(1)) != _js_trim(raw)
    block = raw.replace("\r\n", "\n")
    frontmatter: dict[str, Any] | None = None
    if literal:
        hazard = hazard or _has_unkept_comment(block)
        quoted = _quote_lossy_values(block)
        if quoted != block:
            frontmatter = _load_yaml(quoted)
            hazard = hazard or frontmatter is None
    if frontmatter is None:
        frontmatter = _load_yaml(block)
    if frontmatter is None:
        frontmatter = _load_yaml(_requote_special_values(block))
    if frontmatter is None:
        hazard, frontmatter = True, {}
    if block.strip() and not frontmatter:
        hazard = True
    return _Stampable(
        name=_nonempty_text(frontmatter.get("name")),
        description=_nonempty_text(frontmatter.get("description")),
        metadata=_metadata_view(frontmatter),
        body=text[split.end() :],
        hazard=hazard,
    )


_RETRY_ENTRY = re.compile(r"([a-zA-Z_-]+):\s+(\S.*)")
_RETRY_SPECIAL = re.compile(r"[{}\[\]*&#!|>%@`]|: ")


def _requote_special_values(block: str) -> str:
    """Claude Code's second try at YAML that failed: values with YAML syntax quoted."""
    lines = []
    for line in block.split("\n"):
        match = _RETRY_ENTRY.fullmatch(line)
        if match is not None:
            key, value = match.groups()
            quoted = len(value) >= 1 and value[0] == value[-1] and value[0] in "\"'"
            flow_list = False
            if value.startswith("[") and value.endswith("]"):
                ok, loaded = load_scalar(value)
                flow_list = ok and isinstance(loaded, list)
            if not quoted and not flow_list and _RETRY_SPECIAL.search(value):
                escaped = value.replace("\\", "\\\\").replace('"', '\\"')
                line = f'{key}: "{escaped}"'
        lines.append(line)
    return re.sub(r"^\t+", lambda m: "  " * len(m.group(0)), "\n".join(lines), flags=re.M)


_QUOTED_KEY_ENTRY = (
    re.compile(r'("(?:[^"\\]|\\.)*"):[ \t]+(.*)'),
    re.compile(r"('(?:[^']|'')*'):[ \t]+(.*)"),
    re.compile(r"([^\s#][^:\n]*?):[ \t]+(.*)"),
)


def _has_unkept_comment(block: str) -> bool:
    """Whether a top-level value carries a ``#`` comment that a rewrite would drop."""
    for line in block.split("\n"):
        if "#" not in line:
            continue
        match = _LOSSY_CANDIDATE.fullmatch(line)
        if match is not None:
            value = match.group(2).rstrip()
            if not value:
                continue
            if value[0] not in "\"'|>":
                ok, loaded = load_scalar(value)
                if not ok or isinstance(loaded, str) or loaded is None:
                    continue  # read whole by the lossy-value quoting, comment and all
        if _comment_after_value(line):
            return True
    return False


def _comment_after_value(line: str) -> bool:
    for pattern in _QUOTED_KEY_ENTRY:
        match = pattern.fullmatch(line)
        if match is not None:
            key, value = match.groups()
            if not key or not value:
                return False
            return _INLINE_COMMENT.search(_QUOTED_SPANS.sub("", value.rstrip())) is not None
    return False


def _update_modified_line(text: str, stamp: str) -> str | None:
    """``text`` with its ``modified:`` line set to ``stamp``; ``None`` when that is unsafe."""
    split = _CC_SPLIT.match(text)
    fenced = _CC_FENCED.match(text)
    if split is None or fenced is None or _js_trim(split.group(1)) != _js_trim(fenced.group(1)):
        return None
    before = _read_stampable(text, literal=False)
    if before is None or (
        before.name is None and before.description is None and not before.metadata
    ):
        return None
    head_end = fenced.end()
    head = text[:head_end]
    lines = head.split("\n")
    cr = "\r" if "\r\n" in head else ""

    def line(indent: str, tail: str = "") -> str:
        return f"{indent}modified: {stamp}{tail}{cr}"

    found = [
        k
        for k, ln in enumerate(lines)
        if 0 < k < len(lines) - 1 and _MODIFIED_LINE.match(ln.removesuffix("\r"))
    ]
    if len(found) > 1 or (not found and "modified" in before.metadata):
        return None
    if found:
        at = found[0]
        indent, rest = _modified_parts(lines[at].removesuffix("\r"))
        new_lines: list[str] | None = [*lines[:at], line(indent, rest), *lines[at + 1 :]]
    else:
        new_lines = _insert_modified(lines, line)
    if new_lines is None:
        return None
    result = "\n".join(new_lines) + text[head_end:]
    after = _read_stampable(result, literal=False)
    refenced = _CC_FENCED.match(result)
    expected = {**before.metadata, "modified": stamp}
    if (
        after is None
        or refenced is None
        or (after.name, after.description) != (before.name, before.description)
        or after.metadata != expected
        or result[refenced.end() :] != text[head_end:]
    ):
        return None
    return result


def _modified_parts(line: str) -> tuple[str, str]:
    """A ``modified:`` line's indentation, and the comment after its value to keep."""
    match = _MODIFIED_LINE.match(line)
    assert match is not None
    value = match.group(2)
    if re.match(r"[\"']", value.lstrip()):
        return match.group(1), ""
    comment = _COMMENT_TAIL.search(value)
    return match.group(1), comment.group(1) if comment else ""


def _insert_modified(lines: list[str], line: Callable[[str], str]) -> list[str] | None:
    """``lines`` with a ``modified:`` line at the end of the metadata block, or the header."""
    plain = [ln.removesuffix("\r") for ln in lines]
    key = next((k for k, ln in enumerate(plain) if k > 0 and _METADATA_KEY.match(ln)), -1)
    block = next((k for k, ln in enumerate(plain) if k > 0 and _METADATA_BLOCK.fullmatch(ln)), -1)
    if key != -1 and block == -1:
        return None  # metadata written inline, `metadata: {...}`: no line to add to
    if block == -1:
        fence = max((k for k, ln in enumerate(plain) if ln.strip() == "---"), default=-1)
        return [*lines[:fence], line(""), *lines[fence:]] if fence > 0 else None
    end = block + 1
    while end < len(plain) - 1:
        if _INDENTED.match(plain[end]):
            end += 1
            continue
        if _BLANK_OR_COMMENT.fullmatch(plain[end]):
            ahead = end + 1
            while ahead < len(plain) - 1 and _BLANK_OR_COMMENT.fullmatch(plain[ahead]):
                ahead += 1
            if ahead < len(plain) - 1 and _INDENTED.match(plain[ahead]):
                end = ahead
                continue
        break
    child = next(
        (
            ln
            for ln in plain[block + 1 : end]
            if _INDENTED.match(ln) and not _BLANK_OR_COMMENT.fullmatch(ln)
        ),
        None,
    )
    indent = re.match(r"\s+", child).group(0) if child else "  "  # type: ignore[union-attr]
    return [*lines[:end], line(indent), *lines[end:]]


# --- the 2.1.88 layout's serialiser (PyYAML) -----------------------------------------------


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
    # text under YAML 1.1. A plain scalar that YAML 1.2 reads otherwise (``1_000``) or the
    # other way round goes double-quoted, where every character has an escape.
    style = None if _plain_ok(data) and _plain_agrees(data) else '"'
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


def _plain_agrees(text: str) -> bool:
    """Whether YAML 1.2 reads ``text`` unquoted as text wherever YAML 1.1 does."""
    tag = _V11_RESOLVER.resolve(yaml.ScalarNode, text, (True, False))  # type: ignore[no-untyped-call]
    if tag != STR_TAG:
        return True  # PyYAML quotes it itself
    return core_tag(text) == STR_TAG


_V11_RESOLVER = yaml.resolver.Resolver()


_Dumper.add_representer(str, _represent_str)
