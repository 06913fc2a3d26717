"""Claude Code session transcripts: ``~/.claude/projects/<project>/<session>.jsonl``.

A session file is an append-only log, one JSON object per line, and the conversation is
not the file read top to bottom. Lines form a tree through ``uuid``/``parentUuid``: a
rewind starts a sibling branch, so the conversation is the path from the newest leaf back
to the root. A compaction starts a new root whose ``logicalParentUuid`` names the last
message before it; following that link gives the whole conversation, with the synthetic
summary flagged. One API response is logged as several ``assistant`` lines (one per
block) that share ``message.id``; they are merged, and tool results are put back in the
order of the calls they answer. Subagent lines (``isSidechain``) stay off the main thread.
Bad lines are skipped and counted, never fatal.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from memdir.errors import UsageError
from memdir.messages import Message, ToolResultBlock, message_from_anthropic
from memdir.transcripts._types import SkippedLine, Transcript

__all__ = ["is_claude_code_entry", "load_claude_code", "subagent_files"]

_MESSAGE_TYPES = frozenset({"user", "assistant"})
# Lines that belong to the format but carry no conversation; they are read past quietly.
_BOOKKEEPING_TYPES = frozenset(
    {
        "system",
        "summary",
        "custom-title",
        "file-history-snapshot",
        "queue-operation",
        "progress",
        "attachment",
        "turn_end",
        "attribution-snapshot",
        "tag",
        "agent-name",
        "pr-link",
        "last-prompt",
    }
)
_KNOWN_TYPES = _MESSAGE_TYPES | _BOOKKEEPING_TYPES


def is_claude_code_entry(entry: Any) -> bool:
    """Whether a decoded line looks like one of Claude Code's conversation lines."""
    return isinstance(entry, Mapping) and entry.get("type") in ("user", "assistant", "system")


@dataclass(kw_only=True)
class _Node:
    line: int
    uuid: str
    entry: Mapping[str, Any]
    message: Message | None
    sidechain: bool
    parent: str | None = None


def _timestamp(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


def _to_message(entry: Mapping[str, Any], uuid: str) -> Message:
    """The Message of a user/assistant line; raises UsageError when it is malformed."""
    payload = entry.get("message")
    if not isinstance(payload, Mapping):
        raise UsageError("its 'message' is not an object")
    role = payload.get("role", entry.get("type"))
    if role != entry.get("type"):
        raise UsageError(f"a {entry.get('type')} line holding a {role!r} message")
    message = message_from_anthropic(payload, uuid=uuid)
    return dataclasses.replace(
        message,
        timestamp=_timestamp(entry.get("timestamp")),
        is_meta=entry.get("isMeta") is True,
        is_compact_summary=entry.get("isCompactSummary") is True,
        is_sidechain=entry.get("isSidechain") is True,
    )


def _read_nodes(
    lines: Iterable[tuple[int, str]], skipped: list[SkippedLine]
) -> tuple[list[_Node], list[Mapping[str, Any]]]:
    """Decode the lines into tree nodes (file order) and the title lines."""
    nodes: list[_Node] = []
    titles: list[Mapping[str, Any]] = []
    seen: dict[str, _Node] = {}
    for number, text in lines:
        try:
            entry = json.loads(text)
        except (ValueError, RecursionError):
            skipped.append(SkippedLine(line=number, reason="not JSON"))
            continue
        if not isinstance(entry, dict):
            skipped.append(SkippedLine(line=number, reason="not a JSON object"))
            continue
        kind = entry.get("type")
        if not isinstance(kind, str) or kind not in _KNOWN_TYPES:
            skipped.append(SkippedLine(line=number, reason=f"unknown type {kind!r}"))
            continue
        if kind in ("summary", "custom-title"):
            titles.append(entry)
            continue
        uuid = entry.get("uuid")
        if not isinstance(uuid, str) or not uuid:
            if kind in _MESSAGE_TYPES:
                skipped.append(SkippedLine(line=number, reason=f"{kind} line without a uuid"))
            continue
        message = None
        problem = None
        if kind in _MESSAGE_TYPES:
            try:
                message = _to_message(entry, uuid)
            except UsageError as exc:
                problem = f"malformed {kind}: {exc}"
        earlier = seen.get(uuid)
        if earlier is not None:
            # A repeated line (resumed sessions copy history) adds nothing, unless the
            # first copy was unreadable: then the readable one takes its place.
            if earlier.message is None and message is not None:
                earlier.entry, earlier.message = entry, message
            else:
                skipped.append(
                    SkippedLine(line=number, reason=f"repeats uuid {uuid!r} of line {earlier.line}")
                )
            continue
        if problem is not None:
            # The line still threads the tree; it just contributes no message.
            skipped.append(SkippedLine(line=number, reason=problem))
        node = _Node(
            line=number,
            uuid=uuid,
            entry=entry,
            message=message,
            sidechain=entry.get("isSidechain") is True,
        )
        seen[uuid] = node
        nodes.append(node)
    return nodes, titles


def _link(nodes: list[_Node]) -> dict[str, _Node]:
    """Set each node's parent, stitching compactions and legacy unthreaded lines."""
    index = {node.uuid: node for node in nodes}
    previous: _Node | None = None
    for node in nodes:
        entry = node.entry
        wanted = entry.get("parentUuid")
        if entry.get("type") == "system" and entry.get("subtype") == "compact_boundary":
            wanted = entry.get("logicalParentUuid")
        if isinstance(wanted, str) and wanted in index and wanted != node.uuid:
            node.parent = wanted
        elif previous is not None:
            # No usable parent after the first line: older logs did not thread their
            # lines, and a parent missing from the file would otherwise cut the session
            # in two. File order is the order they were written in.
            node.parent = previous.uuid
        previous = node
    return index


def _current_branch(nodes: list[_Node], index: Mapping[str, _Node]) -> list[_Node]:
    """The path from the root to the newest leaf that carries a message."""
    has_message_below: set[str] = set()
    for node in nodes:
        if node.message is None:
            continue
        parent = node.parent
        while parent is not None and parent not in has_message_below:
            has_message_below.add(parent)
            parent = index[parent].parent if parent in index else None
    leaves = [n for n in nodes if n.message is not None and n.uuid not in has_message_below]
    if not leaves:
        return []
    path: list[_Node] = []
    visited: set[str] = set()
    current: _Node | None = max(leaves, key=lambda n: n.line)
    while current is not None and current.uuid not in visited:
        visited.add(current.uuid)
        path.append(current)
        current = index.get(current.parent) if current.parent is not None else None
    path.reverse()
    return path


def _merge_responses(messages: list[Message], response_ids: list[str | None]) -> list[Message]:
    """Join assistant messages of one API response, wherever its blocks were logged.

    The merged message takes the position of the response's first line and the uuid of
    its last, so a cursor left on it is never mistaken for having seen blocks that were
    logged later.
    """
    out: list[Message] = []
    parts: list[list[Any]] = []  # each slot's blocks, joined once at the end
    slot: dict[str, int] = {}
    for message, response_id in zip(messages, response_ids, strict=True):
        if message.role == "assistant" and response_id is not None and response_id in slot:
            at = slot[response_id]
            parts[at].extend(message.content)
            out[at] = dataclasses.replace(out[at], uuid=message.uuid)
            continue
        if message.role == "assistant" and response_id is not None:
            slot[response_id] = len(out)
        out.append(message)
        parts.append(list(message.content))
    out = [
        m if len(p) == len(m.content) else dataclasses.replace(m, content=tuple(p))
        for m, p in zip(out, parts, strict=True)
    ]
    return _order_tool_results(out)


def _order_tool_results(messages: list[Message]) -> list[Message]:
    """Put the tool results after each call in the order the calls were made."""
    out = list(messages)
    i = 0
    while i < len(out):
        calls = {b.id: n for n, b in enumerate(out[i].tool_uses)}
        i += 1
        if not calls:
            continue
        start = i
        while i < len(out) and out[i].is_tool_result:
            i += 1
        out[start:i] = _sorted_results(out[start:i], calls)
    return out


def _sorted_results(run: list[Message], calls: Mapping[str, int]) -> list[Message]:
    """Tool-result messages (and the results inside each) sorted by call order."""

    def rank(block: ToolResultBlock) -> int:
        return calls.get(block.tool_use_id, len(calls))

    ordered: list[Message] = []
    for message in run:
        results: list[ToolResultBlock] = sorted(message.tool_results, key=rank)
        ordered.append(dataclasses.replace(message, content=tuple(results)))
    ordered.sort(key=lambda m: min(rank(b) for b in m.tool_results))
    return ordered


def _messages_of(nodes: list[_Node]) -> list[Message]:
    kept = [n for n in nodes if n.message is not None]
    ids: list[str | None] = []
    for node in kept:
        payload = node.entry.get("message")
        response_id = payload.get("id") if isinstance(payload, Mapping) else None
        ids.append(response_id if isinstance(response_id, str) else None)
    return _merge_responses([n.message for n in kept if n.message is not None], ids)


def _title(titles: list[Mapping[str, Any]], branch: set[str]) -> str | None:
    custom = [t.get("customTitle") for t in titles if t.get("type") == "custom-title"]
    custom = [c for c in custom if isinstance(c, str) and c]
    if custom:
        return custom[-1]
    summaries = [t for t in titles if isinstance(t.get("summary"), str) and t.get("summary")]
    leaves = [(t, t.get("leafUuid")) for t in summaries]
    on_branch = [t for t, leaf in leaves if isinstance(leaf, str) and leaf in branch]
    chosen = (on_branch or summaries)[-1:]
    return str(chosen[0]["summary"]) if chosen else None


def load_claude_code(
    path: Path, lines: Iterable[tuple[int, str]], skipped: list[SkippedLine]
) -> Transcript:
    """Build the transcript of a Claude Code session from its numbered lines."""
    nodes, titles = _read_nodes(lines, skipped)
    main = [n for n in nodes if not n.sidechain]
    side = [n for n in nodes if n.sidechain]
    if not main:  # a subagent's own file: its conversation is the one asked for
        main, side = side, []
    index = _link(main)
    branch = _current_branch(main, index)

    sidechains: dict[str, list[_Node]] = {}
    for node in side:
        agent = node.entry.get("agentId")
        sidechains.setdefault(agent if isinstance(agent, str) else "sidechain", []).append(node)

    session = next((n.entry.get("sessionId") for n in main if n.entry.get("sessionId")), None)
    cwd = next((n.entry.get("cwd") for n in reversed(branch or main) if n.entry.get("cwd")), None)
    return Transcript(
        path=path,
        format="claude-code",
        messages=tuple(_messages_of(branch)),
        session_id=session if isinstance(session, str) else path.stem,
        title=_title(titles, {n.uuid for n in branch}),
        cwd=cwd if isinstance(cwd, str) else None,
        sidechains={k: tuple(_messages_of(v)) for k, v in sidechains.items()},
        skipped=tuple(skipped),
    )


def subagent_files(session_path: Path) -> list[Path]:
    """The subagent transcripts Claude Code keeps beside a session file.

    Newer versions write ``<session>/subagents/agent-<id>.jsonl``; the
    ``agent-acompact-*`` files are compaction internals, not conversations.
    """
    folder = session_path.with_suffix("") / "subagents"
    try:
        found = sorted(folder.glob("agent-*.jsonl"))
    except OSError:
        return []
    return [f for f in found if not f.name.startswith("agent-acompact-") and f.is_file()]
