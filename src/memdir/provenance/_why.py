"""Reading the records back: a memory's history, a session's view of memory."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memdir.errors import UsageError
from memdir.store import ENTRYPOINT_NAME, MemoryDir
from memdir.store._provenance import (
    Change,
    file_digest,
    read_changes,
    read_shown,
    relative_name,
    shown_log,
)

__all__ = ["MemoryHistory", "SessionTurn", "SessionView", "ShownMemory", "history", "why"]

# The warning Claude Code appends to an index it loaded only in part ("> WARNING: MEMORY.md
# is 300 lines (limit: 200). Only part of it was loaded: …", 2.1.332's wording), and
# memdir's own ("…, so only part of it was loaded: …"), compared lower-cased.
_CUT_MARK = "only part of it was loaded"

_WRITE_TOOLS = frozenset({"Write", "Edit", "MultiEdit"})


@dataclass(frozen=True, kw_only=True)
class MemoryHistory:
    """The story of one memory file."""

    file: str
    """Its path relative to the memory directory."""
    changes: tuple[Change, ...]
    """Every recorded change, oldest first."""
    exists: bool
    """Whether the file is there now."""
    changed_elsewhere: bool
    """The file differs from the digest of its last recorded change: something memdir
    did not record changed it since (a person's editor, a host agent's own write)."""

    @property
    def origin(self) -> Change | None:
        """The change that first recorded it (its creation, where that was recorded)."""
        return self.changes[0] if self.changes else None

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "file": self.file,
            "exists": self.exists,
            "changed_elsewhere": self.changed_elsewhere,
            "changes": [c.to_json() for c in self.changes],
        }


def history(memory: MemoryDir | str | os.PathLike[str], name: str) -> MemoryHistory:
    """The history of the memory ``name`` (its path relative to the memory directory,
    ``.md`` optional). Raises :class:`~memdir.errors.UsageError` when the memory is
    neither in the folder nor in its records."""
    md = memory if isinstance(memory, MemoryDir) else MemoryDir(memory)
    file = relative_name(md, md.root / name) if not os.path.isabs(name) else relative_name(md, name)
    if not file.endswith(".md"):
        file += ".md"
    path = md.root / file
    changes = read_changes(md, file)
    exists = path.is_file()
    if not changes and not exists:
        raise UsageError(f"no memory named {name!r} in {md.root} and no record of one")
    last = changes[-1] if changes else None
    elsewhere = (
        exists and last is not None and last.sha256 is not None and file_digest(path) != last.sha256
    )
    return MemoryHistory(
        file=file, changes=tuple(changes), exists=exists, changed_elsewhere=bool(elsewhere)
    )


@dataclass(frozen=True, kw_only=True)
class ShownMemory:
    """One memory a session was shown, with where it came from."""

    file: str
    """Relative to the memory directory where it is inside it, else the path as given."""
    cut: bool = False
    """For an index: only part of it was loaded."""
    history: MemoryHistory | None = None
    """Its recorded history (``None`` for the index and for a file with no record)."""

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready form."""
        out: dict[str, Any] = {"file": self.file}
        if self.cut:
            out["cut"] = True
        if self.history is not None:
            out["history"] = [c.to_json() for c in self.history.changes]
        return out


@dataclass(kw_only=True)
class SessionTurn:
    """One turn of a session, as memory goes: what it was shown and what came of it."""

    turn: str | None
    """The id of the message that opened it (the person's prompt); ``None`` for what came
    before the first prompt or cannot be placed."""
    prompt: str | None = None
    """The prompt's first line, for a reader to recognise the turn."""
    at: str | None = None
    """When it began."""
    loaded: list[ShownMemory] = field(default_factory=list)
    """Indexes put in its context."""
    surfaced: list[ShownMemory] = field(default_factory=list)
    """Memories recalled for it."""
    saved: list[Change] = field(default_factory=list)
    """Memories saved from its messages."""

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "turn": self.turn,
            "prompt": self.prompt,
            "at": self.at,
            "loaded": [m.to_json() for m in self.loaded],
            "surfaced": [m.to_json() for m in self.surfaced],
            "saved": [c.to_json() for c in self.saved],
        }


@dataclass(frozen=True, kw_only=True)
class SessionView:
    """What one session was shown of memory and what it saved, turn by turn."""

    session: str
    transcript: Path | None
    """The Claude Code transcript read, where one was found."""
    turns: tuple[SessionTurn, ...]
    rules_fired: tuple[dict[str, Any], ...] = ()
    """Each time a feedback memory's rule stopped or warned about a tool call of this
    session (``memdir hook pre-tool-use``): when, which rule and memory, what it stopped."""

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "session": self.session,
            "transcript": str(self.transcript) if self.transcript is not None else None,
            "turns": [t.to_json() for t in self.turns],
            "rules_fired": list(self.rules_fired),
        }


def _lines(path: Path) -> Iterator[dict[str, Any]]:
    try:
        handle = path.open(encoding="utf-8", errors="replace")
    except OSError:
        return
    with handle:
        for line in handle:
            try:
                data = json.loads(line)
            except ValueError:
                continue
            if isinstance(data, dict):
                yield data


def _content(entry: Mapping[str, Any]) -> Any:
    message = entry.get("message")
    return message.get("content") if isinstance(message, Mapping) else None


def _prompt_text(entry: Mapping[str, Any]) -> str | None:
    """The text of a person's prompt line; ``None`` for a line that is not one (a tool
    result, a meta message, a summary)."""
    if entry.get("type") != "user" or entry.get("isMeta") or entry.get("isCompactSummary"):
        return None
    content = _content(entry)
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    texts = []
    for block in content:
        if not isinstance(block, Mapping) or block.get("type") == "tool_result":
            return None
        if block.get("type") == "text":
            texts.append(str(block.get("text") or ""))
    return "\n".join(texts) if texts else None


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0][:200] if text.strip() else ""


class _Builder:
    """Turns in order, with a map from message id to the turn holding it."""

    def __init__(self, md: MemoryDir) -> None:
        self.md = md
        self.turns: list[SessionTurn] = []
        self.turn_of: dict[str, SessionTurn] = {}
        self._histories: dict[str, MemoryHistory | None] = {}

    def current(self) -> SessionTurn:
        if not self.turns:
            self.turns.append(SessionTurn(turn=None))
        return self.turns[-1]

    def open(self, uuid: str | None, prompt: str, at: str | None) -> SessionTurn:
        turn = SessionTurn(turn=uuid, prompt=_first_line(prompt), at=at)
        self.turns.append(turn)
        return turn

    def shown(self, path: str, cut: bool = False) -> ShownMemory:
        file = relative_name(self.md, path)
        if file not in self._histories:
            try:
                found: MemoryHistory | None = (
                    None if Path(file).name == ENTRYPOINT_NAME else history(self.md, file)
                )
            except UsageError:
                found = None
            self._histories[file] = found
        return ShownMemory(file=file, cut=cut, history=self._histories[file])


def _read_transcript(builder: _Builder, path: Path, session: str) -> None:
    md = builder.md
    for entry in _lines(path):
        kind = entry.get("type")
        uuid = entry.get("uuid") if isinstance(entry.get("uuid"), str) else None
        prompt = _prompt_text(entry)
        if prompt is not None:
            turn = builder.open(uuid, prompt, entry.get("timestamp"))
        else:
            turn = builder.current()
        if uuid is not None:
            builder.turn_of[uuid] = turn
        if kind == "attachment":
            _attachment(builder, turn, entry.get("attachment"))
        elif kind == "assistant":
            _direct_writes(md, turn, entry, session)


def _attachment(builder: _Builder, turn: SessionTurn, attachment: object) -> None:
    """The memory in one of Claude Code's attachment records: its ``instructions`` (the
    files of its context; type ``AutoMem`` is the memory index) and ``relevant_memories``
    (``memories``: ``path``, ``content``, ``mtimeMs``, ``header``)."""
    if not isinstance(attachment, Mapping):
        return
    kind = attachment.get("type")
    if kind == "instructions":
        for item in attachment.get("files") or ():
            if isinstance(item, Mapping) and item.get("type") == "AutoMem" and item.get("path"):
                cut = _CUT_MARK in str(item.get("content") or "").lower()
                turn.loaded.append(builder.shown(str(item["path"]), cut=cut))
    elif kind == "relevant_memories":
        for item in attachment.get("memories") or ():
            if isinstance(item, Mapping) and item.get("path"):
                turn.surfaced.append(builder.shown(str(item["path"])))


def _direct_writes(
    md: MemoryDir, turn: SessionTurn, entry: Mapping[str, Any], session: str
) -> None:
    """A memory the session's own agent wrote with its file tools."""
    content = _content(entry)
    if not isinstance(content, list):
        return
    for block in content:
        if not isinstance(block, Mapping) or block.get("type") != "tool_use":
            continue
        given = block.get("input")
        path = given.get("file_path") if isinstance(given, Mapping) else None
        if block.get("name") not in _WRITE_TOOLS or not isinstance(path, str):
            continue
        if not md.is_memory_path(path) or Path(path).name == ENTRYPOINT_NAME:
            continue
        uuid = entry.get("uuid")
        turn.saved.append(
            Change(
                file=relative_name(md, path),
                what="changed",
                at=str(entry.get("timestamp") or ""),
                by="session",
                session=session,
                messages=(uuid,) if isinstance(uuid, str) else (),
            )
        )


def _claude_code_transcript(md: MemoryDir, session: str) -> Path | None:
    # Claude Code keeps a project's sessions beside its memory folder:
    # <config>/projects/<project>/<session>.jsonl next to <config>/projects/<project>/memory/.
    candidate = md.root.parent / f"{session}.jsonl"
    return candidate if candidate.is_file() else None


def why(
    memory: MemoryDir | str | os.PathLike[str],
    session: str,
    *,
    transcript: str | os.PathLike[str] | None = None,
) -> SessionView:
    """What ``session`` loaded, was surfaced and saved, turn by turn, each memory with its
    history.

    ``transcript`` is the session's Claude Code transcript; by default the one Claude
    Code keeps beside the memory folder, if there is one. Raises
    :class:`~memdir.errors.UsageError` for a session nothing is known about."""
    md = memory if isinstance(memory, MemoryDir) else MemoryDir(memory)
    builder = _Builder(md)
    path = Path(transcript) if transcript is not None else _claude_code_transcript(md, session)
    if path is not None and not path.is_file():
        raise UsageError(f"cannot read the transcript {path}")
    if path is not None:
        _read_transcript(builder, path, session)
    shown = read_shown(md, session)
    for record in shown:
        turn = _turn_for(builder, record.turn, record.at, record.extra)
        target = turn.loaded if record.kind == "loaded" else turn.surfaced
        target.extend(builder.shown(f, cut=record.cut) for f in record.files)
    saved = [c for c in read_changes(md) if c.session == session]
    for change in saved:
        placed = next(
            (builder.turn_of[m] for m in reversed(change.messages) if m in builder.turn_of), None
        )
        (placed or _turn_for(builder, None, change.at, {})).saved.append(change)
    from memdir.rules import read_firings

    fired = tuple(f for f in read_firings(md.root) if f.get("session_id") == session)
    if (
        path is None
        and not shown
        and not saved
        and not fired
        and not shown_log(md, session).exists()
    ):
        raise UsageError(
            f"nothing is known of session {session!r} in {md.root}: no transcript beside it, "
            "no record of what it was shown or saved"
        )
    # Lines before the first prompt (queue records, say) open a turn of their own; it is
    # kept only when memory was shown or saved in it.
    turns = [t for t in builder.turns if t.turn is not None or t.prompt or _holds(t)]
    return SessionView(session=session, transcript=path, turns=tuple(turns), rules_fired=fired)


def _holds(turn: SessionTurn) -> bool:
    return bool(turn.loaded or turn.surfaced or turn.saved)


def _turn_for(
    builder: _Builder, turn: str | None, at: str | None, extra: Mapping[str, Any]
) -> SessionTurn:
    """The turn a host's record belongs to: the one it names, or a new one for a recall
    that answered a query of its own; else the latest."""
    query = extra.get("query")
    if turn is None and isinstance(query, str):
        return builder.open(None, query, at)
    if turn is not None:
        for existing in builder.turns:
            if existing.turn == turn:
                return existing
        opened = builder.open(turn, str(query) if isinstance(query, str) else "", at)
        builder.turn_of[turn] = opened
        return opened
    return builder.current()
