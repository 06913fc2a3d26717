"""The offline model's consolidation ("dream") pass, by rules.

Four turns, each worked out again from the request alone: ``Glob`` the memory directory,
``Read`` every memory file and ``MEMORY.md``, ``Write`` what the rules change (retired
files empty, merged files whole, the index), then a one-line summary. The rules:

- exact duplicates (equal bodies, whitespace aside): the alphabetically first file stays,
  the others are written empty (memdir deletes empty memory files after the pass);
- a newer memory that gives an older one's fact another value (the ship date "moved to
  2026-12-07" after "ships by 2026-12-04"; see :mod:`memdir.models._offline_supersede` for
  when two lines are one fact) replaces it: the newer file stays, with its own name,
  description and index line, its body gains what of the older one still holds and a
  ``**History:**`` line for each replaced fact, and the older file is written empty. Both
  must be of one ``type`` and in one scope (private, or ``team/``);
- near duplicates (same ``type``, similar descriptions or bodies) that contradict nothing:
  the first file stays and takes the other's body lines it lacks, the other is written
  empty (both say the same, so the stable choice by name is as good as any, and does not
  change with the clock);
- the index keeps its other lines and the pointers of the files that remain, drops those of
  files gone or retired, and gains one for each file that had none;
- ``[[name]]`` links survive: a merged file keeps the links of both memories (they are in
  the body lines it takes), and a link to a retired memory, by its name or its file name,
  is pointed at the memory that absorbed it, in every file that remains.

Newer means, for two memories: the later ``metadata.modified`` when both have that stamp
and they differ (Claude Code and memdir write it with every change, and it survives a copy
or a checkout, which reset modification times); otherwise the later modification time, as
the ``Glob`` of the first turn lists the files newest first (ties in path order). A change
announced by wording alone ("moved to") that would fit several older memories replaces none
of them: which one it meant is not for rules to guess.

Merged files are written in the frontmatter layout the prompt describes (Claude Code's
current one unless it names the 2.1.88 one), keeping whatever else their frontmatter held.
"""

from __future__ import annotations

import datetime
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from memdir.errors import UsageError
from memdir.messages import Message
from memdir.models._offline_request import read_results
from memdir.models._offline_supersede import (
    HISTORY,
    Replacement,
    replacement,
    superseded_body,
)
from memdir.models._offline_text import clip, similarity
from memdir.store import (
    ENTRYPOINT_NAME,
    MAX_ENTRYPOINT_LINES,
    MemoryFile,
    MemoryFormat,
    contains_secret,
    format_memory_file,
    memory_slug,
    parse_memory_file,
    replace_links,
)

__all__ = ["DreamAnswer", "answer_consolidation"]

_OPENER = re.compile(
    r"^# Memory consolidation\n\nYou are tidying the memory directory `([^`\n]+)`", re.M
)
# A [[name]] or [[name|label]] link, as a whole: its words say what it points at.
_LINK_TARGET = re.compile(r"\[\[[^\[\]\n]*\]\]")
_POINTER = re.compile(r"^\s*[-*]\s*\[[^\]]*\]\(([^)\s]+)\)")
# How memdir's consolidation prompt names the layouts (memdir.dream._prompt).
_OLD_LAYOUT = re.compile(r"frontmatter with `name`, `description` and `type` \(user")
_LINE_MAX = 149  # index lines stay under 150 characters
_TRUNCATED = "(more results truncated"

_Call = tuple[str, Mapping[str, str]]


@dataclass(frozen=True)
class DreamAnswer:
    """What to answer: text, tool calls, and the number of the first call's id."""

    text: str
    calls: tuple[_Call, ...] = ()
    first_id: int = 1


@dataclass(kw_only=True)
class _Memory:
    path: str
    link: str
    text: str | None  # None: not read whole, so left exactly as it is
    parsed: MemoryFile | None = None
    body: str = ""
    new_text: str | None = None
    absorbed: list[str] = field(default_factory=list)
    rank: int | None = None  # place in the Glob listing, newest first
    modified: datetime.datetime | None = None  # metadata.modified, when it reads as a time


def answer_consolidation(messages: Sequence[Message]) -> DreamAnswer | None:
    """The answer to a consolidation request, or ``None`` when the request is not one."""
    at = _prompt_at(messages)
    match = _OPENER.search(messages[at].text) if at >= 0 else None
    if match is None:
        return None
    own = messages[at + 1 :]
    first_id = 1 + sum(len(m.tool_uses) for m in own)
    layout: MemoryFormat = "2.1.88" if _OLD_LAYOUT.search(messages[at].text) else "current"
    try:
        text, calls = _turn(match.group(1), own, layout)
    except (ValueError, TypeError, KeyError, AttributeError, UsageError) as exc:
        return DreamAnswer(f"Left the memory directory as it was ({type(exc).__name__}).")
    return DreamAnswer(text, tuple(calls), first_id)


def _prompt_at(messages: Sequence[Message]) -> int:
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.role == "user" and not message.is_tool_result:
            return index
    return -1


def _turn(memory_dir: str, own: Sequence[Message], layout: MemoryFormat) -> tuple[str, list[_Call]]:
    asked = [i for i, m in enumerate(own) if m.role == "assistant"]
    if not asked:
        return "", [("Glob", {"pattern": "**/*.md", "path": memory_dir})]
    pair = own[asked[-1] : asked[-1] + 2]
    names = {u.name for u in pair[0].tool_uses}
    if len(pair) < 2 or not names:
        return "Nothing to consolidate.", []
    if names == {"Glob"}:
        return _reads(memory_dir, pair)
    if names == {"Read"}:
        return _decide(memory_dir, pair, layout, _glob_ranks(own))
    if "Write" in names:
        return _summary(memory_dir, pair), []
    return "Nothing to consolidate.", []


def _link(path: str, memory_dir: str) -> str | None:
    """``path`` relative to the memory directory (``/`` separated), or ``None`` outside it."""
    if not os.path.isabs(path) or not path.endswith(".md"):
        return None
    rel = os.path.relpath(path, memory_dir).replace(os.sep, "/")
    return None if rel == ".." or rel.startswith("../") else rel


def _reads(memory_dir: str, pair: Sequence[Message]) -> tuple[str, list[_Call]]:
    results = {r.tool_use_id: r for r in pair[1].tool_results}
    result = results.get(pair[0].tool_uses[0].id)
    if result is None or result.is_error:
        return "Could not list the memory directory; nothing changed.", []
    if _TRUNCATED in result.text:
        return "Too many files to consolidate in one pass; nothing changed.", []
    found = [line.strip() for line in result.text.splitlines()]
    files = sorted(
        (link, path)
        for path in found
        if (link := _link(path, memory_dir)) is not None and link != ENTRYPOINT_NAME
    )
    reads = [path for _, path in files] + [os.path.join(memory_dir, ENTRYPOINT_NAME)]
    return "", [("Read", {"file_path": path}) for path in reads]


def _glob_ranks(own: Sequence[Message]) -> dict[str, int]:
    """Each listed path's place in the first turn's Glob result, newest first.

    memdir's Glob lists files by modification time, newest first, so the order is the
    files' age when the memories themselves carry no ``modified`` stamp.
    """
    for at, message in enumerate(own[:-1]):
        uses = [u for u in message.tool_uses if u.name == "Glob"]
        if not uses:
            continue
        results = {r.tool_use_id: r for r in own[at + 1].tool_results}
        result = results.get(uses[0].id)
        if result is None or result.is_error:
            return {}
        ranks: dict[str, int] = {}
        for rank, line in enumerate(result.text.splitlines()):
            ranks.setdefault(line.strip(), rank)
        return ranks
    return {}


def _stamp(parsed: MemoryFile) -> datetime.datetime | None:
    """``metadata.modified`` as a time (UTC when it names no zone), or ``None``."""
    text = parsed.modified
    if text is None:
        return None
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=datetime.UTC)


def _newer(a: _Memory, b: _Memory) -> bool | None:
    """Whether ``a`` was written after ``b``; ``None`` when nothing tells."""
    if a.modified is not None and b.modified is not None and a.modified != b.modified:
        return a.modified > b.modified
    if a.rank is not None and b.rank is not None and a.rank != b.rank:
        return a.rank < b.rank
    return None


def _same(text: str) -> str:
    return " ".join(text.split())


def _rewrite(keeper: _Memory, body: str, layout: MemoryFormat) -> bool:
    """Give ``keeper`` the body ``body``, its frontmatter kept; ``False`` when it cannot."""
    parsed = keeper.parsed
    if parsed is None:
        return False
    try:
        text = format_memory_file(
            name=parsed.name or keeper.link.removesuffix(".md"),
            description=parsed.description or "",
            type=parsed.type,
            body=body,
            extra=parsed.extra_metadata,
            format=layout,
        )
    except UsageError:
        return False
    if contains_secret(text):
        return False
    keeper.new_text, keeper.body = text, body
    return True


def _merge(keeper: _Memory, other: _Memory, layout: MemoryFormat) -> bool:
    """Append ``other``'s body lines that ``keeper`` lacks; ``False`` when it cannot."""
    if keeper.parsed is None:
        return False
    have = {_same(line) for line in keeper.body.splitlines()}
    lacking = [ln for ln in other.body.splitlines() if ln.strip() and _same(ln) not in have]
    if lacking and not _rewrite(keeper, keeper.body.rstrip() + "\n\n" + "\n".join(lacking), layout):
        return False
    keeper.absorbed.append(other.link)
    return True


def _in_team(memory: _Memory) -> bool:
    """Whether ``memory`` is a team one: a private fact never retires a shared one."""
    return memory.link.startswith("team/")


def _replacements(
    newer: _Memory, candidates: Sequence[_Memory]
) -> list[tuple[_Memory, Replacement]]:
    """The older memories whose facts ``newer`` gives other values, with what it replaces."""
    kind = newer.parsed.type if newer.parsed is not None else None
    found: list[tuple[_Memory, Replacement]] = []
    for older in candidates:
        if (
            kind is None
            or older is newer
            or older.parsed is None
            or older.parsed.type != kind
            or _in_team(older) != _in_team(newer)
            or _newer(newer, older) is not True
        ):
            continue
        replaced = replacement(newer.body, older.body)
        if replaced is not None:
            found.append((older, replaced))
    loose = [pair for pair in found if not pair[1].exact]
    if len(loose) > 1:  # "the date moved" fits several memories: which one is unknown
        found = [pair for pair in found if pair[1].exact]
    return found


def _supersede(memories: Sequence[_Memory], retired: list[_Memory], layout: MemoryFormat) -> None:
    """Let each newer memory replace the older ones it contradicts (see the module notes)."""
    live = [m for m in memories if m not in retired and m.parsed is not None and m.body.strip()]
    # Newest first, so the latest statement absorbs the others before any of them could.
    live.sort(key=lambda m: (m.rank is None, m.rank or 0, m.link))
    for newer in live:
        if newer in retired:
            continue
        candidates = [m for m in live if m not in retired]
        for older, replaced in _replacements(newer, candidates):
            if _rewrite(newer, superseded_body(newer.body, older.body, replaced), layout):
                # What the older one had absorbed is the newer one's now, for _relink.
                newer.absorbed += [older.link, *older.absorbed]
                retired.append(older)


def _near(a: MemoryFile, b: MemoryFile) -> bool:
    if a.type is None or a.type != b.type:
        return False
    described = similarity(a.description or "", b.description or "") > 0
    # The facts only: the **Why:** / **How to apply:** lines share boilerplate wording
    # ("stated by the user on…") that would make unrelated memories look alike.
    return described or similarity(_fact(a.body), _fact(b.body)) > 0


def _fact(body: str) -> str:
    """A memory body without its **Why:**, **How to apply:** and **History:** lines.

    A history line quotes what no longer holds, so it must not make a memory look like
    another that still says it. ``[[link]]`` targets go too: a memory that names another
    is about something else, and the words of the name it links by would make it look
    like a copy of the memory it points at.
    """
    return _LINK_TARGET.sub(
        "",
        "\n".join(
            line
            for line in body.splitlines()
            if not line.lstrip().startswith(("**Why:**", "**How to apply:**", HISTORY))
        ),
    )


def _pointer(memory: _Memory) -> str:
    parsed = parse_memory_file(memory.new_text or memory.text or "")
    title = (parsed.name or memory.link.removesuffix(".md")).replace("[", "(").replace("]", ")")
    head = f"- [{clip(title, 60)}]({memory.link})"
    room = _LINE_MAX - len(head) - 3
    hook = clip(parsed.description or "", room) if room > 10 else ""
    return f"{head} — {hook}" if hook else head


def _index(old: str, remaining: Sequence[_Memory]) -> str:
    by_link = {m.link: m for m in remaining}
    out: list[str] = []
    seen: set[str] = set()
    for line in old.splitlines():
        match = _POINTER.match(line)
        if match is None:
            out.append(line)
            continue
        link = match.group(1).removeprefix("./")
        if link in by_link and link not in seen:
            seen.add(link)
            out.append(line if len(line) <= _LINE_MAX else _pointer(by_link[link]))
    out += [_pointer(m) for m in remaining if m.link not in seen]
    if len(out) > MAX_ENTRYPOINT_LINES:
        out = [line for line in out if _POINTER.match(line)][:MAX_ENTRYPOINT_LINES]
    text = "\n".join(out).strip("\n")
    return f"{text}\n" if text else ""


def _link_names(memory: _Memory) -> list[str]:
    """The names a ``[[link]]`` may call ``memory`` by: its ``name``, then its file name."""
    stem = os.path.basename(memory.link).removesuffix(".md")
    named = memory.parsed.name if memory.parsed is not None else None
    return [slug for slug in (memory_slug(named or ""), memory_slug(stem)) if slug]


def _relink(memories: Sequence[_Memory], remaining: Sequence[_Memory]) -> None:
    """Point links to retired memories at the memory that absorbed each of them."""
    by_link = {m.link: m for m in memories}
    renames: dict[str, str] = {}
    for keeper in remaining:
        names = _link_names(keeper)
        for absorbed in keeper.absorbed:
            for old in _link_names(by_link[absorbed]):
                if names and old not in names:
                    renames.setdefault(old, names[0])
    if not renames:
        return
    for memory in remaining:
        current = memory.new_text or memory.text
        if current is None:
            continue  # not read whole: left exactly as it is
        relinked = replace_links(current, renames)
        if relinked != current and not contains_secret(relinked):
            memory.new_text = relinked


def _decide(
    memory_dir: str, pair: Sequence[Message], layout: MemoryFormat, ranks: Mapping[str, int]
) -> tuple[str, list[_Call]]:
    contents = read_results(pair)
    index_path = os.path.join(memory_dir, ENTRYPOINT_NAME)
    memories: list[_Memory] = []
    for use in pair[0].tool_uses:
        path = use.input.get("file_path")
        link = _link(path, memory_dir) if isinstance(path, str) else None
        if not isinstance(path, str) or link is None or link == ENTRYPOINT_NAME:
            continue
        if path in contents and not (contents[path] or "").strip():
            continue  # gone, or empty already: memdir removes it after the pass
        memory = _Memory(path=path, link=link, text=contents.get(path), rank=ranks.get(path))
        if memory.text is not None:
            memory.parsed = parse_memory_file(memory.text)
            memory.body = memory.parsed.body
            memory.modified = _stamp(memory.parsed)
        memories.append(memory)
    memories.sort(key=lambda m: m.link)
    retired: list[_Memory] = []
    bodies: dict[str, _Memory] = {}
    for memory in memories:  # exact duplicates: the first name stays
        key = _same(memory.body)
        if memory.text is None or not key:
            continue
        if key in bodies:
            bodies[key].absorbed.append(memory.link)
            retired.append(memory)
        else:
            bodies[key] = memory
    _supersede(memories, retired, layout)
    for i, keeper in enumerate(memories):  # near duplicates
        if keeper in retired or keeper.parsed is None:
            continue
        for other in memories[i + 1 :]:
            if other in retired or other.parsed is None or not other.body.strip():
                continue
            if _near(keeper.parsed, other.parsed) and _merge(keeper, other, layout):
                retired.append(other)
    remaining = [m for m in memories if m not in retired]
    _relink(memories, remaining)
    calls: list[_Call] = [
        ("Write", {"file_path": m.path, "content": m.new_text})
        for m in remaining
        if m.new_text is not None
    ]
    calls += [("Write", {"file_path": m.path, "content": ""}) for m in retired]
    if index_path in contents:  # read whole (or missing): safe to rewrite
        old = contents[index_path] or ""
        index = _index(old, remaining)
        if index.rstrip("\n") != old.rstrip("\n") and not contains_secret(index):
            calls.append(("Write", {"file_path": index_path, "content": index}))
    if not calls:
        count = len(remaining)
        return f"Nothing needed to change: {count} memory files, each indexed once.", []
    return "", calls


def _summary(memory_dir: str, pair: Sequence[Message]) -> str:
    results = {r.tool_use_id: r for r in pair[1].tool_results}
    retired: list[str] = []
    merged: list[str] = []
    failed: list[str] = []
    indexed = False
    for use in pair[0].tool_uses:
        path = str(use.input.get("file_path", ""))
        shown = _link(path, memory_dir) or path
        result = results.get(use.id)
        if use.name != "Write":
            continue
        if result is None or result.is_error:
            failed.append(shown)
        elif shown == ENTRYPOINT_NAME:
            indexed = True
        else:
            (merged if use.input.get("content") else retired).append(shown)
    parts = [f"Merged into {', '.join(merged)}."] if merged else []
    parts += [f"Retired {', '.join(retired)}."] if retired else []
    parts += [f"Re-indexed {ENTRYPOINT_NAME}."] if indexed else []
    parts += [f"Could not write {', '.join(failed)}."] if failed else []
    return " ".join(parts) or "Nothing changed."
