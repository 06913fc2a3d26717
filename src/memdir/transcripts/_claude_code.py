"""Claude Code session transcripts: ``~/.claude/projects/<project>/<session>.jsonl``.

A session file is an append-only log, one JSON object per line, and the conversation is
not the file read top to bottom. Lines form a tree through ``uuid``/``parentUuid``: a
rewind starts a sibling branch, so the conversation is the path from the newest leaf back
to the root. A compaction starts a new root whose ``logicalParentUuid`` names the last
message before it; following that link gives the whole conversation, with the synthetic
summary flagged. Subagent lines (``isSidechain``) stay off the main thread.

One API response is logged as several ``assistant`` lines (one per block) that share
``message.id``, and each tool result as a ``user`` line under the line of its call. With
parallel calls the single path misses lines: the first call's result hangs off the first
call's line while the path runs on through the second (hook ``progress`` lines may stand
between them), or the path runs through the first result and misses the later calls.
Claude Code's loader puts such lines back, and so does this one: for each response the
path touches, its other lines are taken back, in the order they were logged, and so is
the result line of each of its calls that the path leaves unanswered. A rewind cannot
come back in that way: the abandoned branch starts with a new prompt, which is neither a
line of the response nor a tool result, and what hangs below it stays out. The results
are then put in the order of their calls.

Files written by other tools may have no ``uuid`` at all; their lines are read in file
order, with ids derived from their content. A ``tool_use`` block without an ``id`` is
kept with a stable id made from its line, and a ``tool_result`` without ``tool_use_id``
answers the id-less call of the line it names (``sourceToolAssistantUUID``, else its
parent), so the call and its output stay in the conversation as a pair the API accepts.
Bad lines are skipped and counted, never fatal.

Since 2.1.332 the file also records the requests Claude Code sent; they are rebuilt by
:mod:`memdir.transcripts._claude_code_requests`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from memdir.errors import UsageError
from memdir.messages import Message, ToolResultBlock, derive_uuid, message_from_anthropic
from memdir.transcripts._claude_code_requests import REQUEST_RECORD_TYPES, RequestRecords
from memdir.transcripts._types import SkippedLine, Transcript

__all__ = ["is_claude_code_entry", "load_claude_code", "subagent_files"]

_MESSAGE_TYPES = frozenset({"user", "assistant"})
_TITLE_TYPES = frozenset({"summary", "custom-title", "ai-title"})
# Lines that belong to the format but carry no conversation; they are read past quietly.
# The list is the one Claude Code 2.1.332's loader knows, plus older types and the
# entries of its workflow journals.
_BOOKKEEPING_TYPES = frozenset(
    {
        "system",
        "progress",
        "attachment",
        "file-history-snapshot",
        "file-history-delta",
        "queue-operation",
        "turn_end",
        "attribution-snapshot",
        "tag",
        "agent-name",
        "agent-color",
        "agent-setting",
        "pr-link",
        "last-prompt",
        "atis-latch",
        "tools-used",
        "cost-state",
        "mode",
        "permission-mode",
        "worktree-state",
        "relocated",
        "frame-link",
        "bridge-session",
        "api-request-resumed",
        "content-replacement",
        "continued-in",
        "resume-head-vouch",
        "data-flow-records",
        "data-flow-incomplete",
        "derived-from",
        "fork-context-ref",
        "ended-by-model",
        "artifact-comment-monitor",
        "artifact-autoreact-ledger",
        "history-suppression",
        "isolation-latch",
        "session-owner",
        "dev-mods",
        "memory-mode",
        "observer-ref",
        "host-row",
        "repl-mode",
        "hybrid-organization",
        "line-withheld",
        "launched",
        "started",
        "result",
        "failed",
    }
)
_KNOWN_TYPES = _MESSAGE_TYPES | _TITLE_TYPES | REQUEST_RECORD_TYPES | _BOOKKEEPING_TYPES
_SYNTHETIC = "memdir:synthetic_id"
"""Set on a tool call or result whose id the loader made up (never sent to a model)."""


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
    response_id: str | None = None
    parent: str | None = None


def _timestamp(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


class _ToolIds:
    """Makes up ids for id-less tool calls and pairs id-less results with them.

    :meth:`repair` proposes the changes to one line; :meth:`commit` makes them count, once
    the line has been read as a message.
    """

    def __init__(self) -> None:
        self._open: dict[str, list[str]] = {}  # line uuid -> its unanswered made-up ids
        self._made: set[str] = set()  # a repeated line must not open its calls again
        self._latest: str | None = None
        self._pending: tuple[str, list[str], list[tuple[str, str]]] | None = None

    def repair(self, entry: Mapping[str, Any], payload: Mapping[str, Any], seed: str) -> Any:
        """``payload`` with ids filled in and unpairable id-less results left out.

        Raises UsageError when nothing is left of the content.
        """
        self._pending = None
        content = payload.get("content")
        if not isinstance(content, list):
            return payload
        blocks: list[Any] = []
        opened: list[str] = []
        answered: list[tuple[str, str]] = []  # (line, call) pairs
        changed = False
        for position, block in enumerate(content):
            kind = block.get("type") if isinstance(block, Mapping) else None
            if kind == "tool_use" and not _is_id(block.get("id")):
                digest = hashlib.sha256(f"{seed}\n{position}".encode()).hexdigest()[:24]
                block = {**block, "id": f"toolu_{digest}", _SYNTHETIC: True}
                if block["id"] not in self._made:
                    opened.append(block["id"])
                changed = True
            elif kind == "tool_result" and not _is_id(block.get("tool_use_id")):
                changed = True
                found = self._answer(entry, answered)
                if found is None:
                    continue
                answered.append(found)
                block = {**block, "tool_use_id": found[1], _SYNTHETIC: True}
            blocks.append(block)
        if not changed:
            return payload
        if content and not blocks:
            raise UsageError("its tool results have no tool_use_id and no call to answer")
        self._pending = (seed, opened, answered)
        return {**payload, "content": blocks}

    def commit(self) -> None:
        """Make the last repair count: its calls wait for results, its results are taken."""
        if self._pending is None:
            return
        seed, opened, answered = self._pending
        self._pending = None
        for line, call in answered:
            self._open[line].remove(call)
        if opened:
            self._made.update(opened)
            self._open.setdefault(seed, []).extend(opened)
            self._latest = seed

    def _answer(
        self, entry: Mapping[str, Any], taken: list[tuple[str, str]]
    ) -> tuple[str, str] | None:
        named = [entry.get("sourceToolAssistantUUID"), entry.get("parentUuid")]
        names = [n for n in named if isinstance(n, str)]
        if not names and self._latest is not None:
            names = [self._latest]  # an unthreaded file: the newest call that waits
        for name in names:
            for call in self._open.get(name, ()):
                if (name, call) not in taken:
                    return name, call
        return None


def _is_id(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


def _to_message(entry: Mapping[str, Any], uuid: str, ids: _ToolIds) -> Message:
    """The Message of a user/assistant line; raises UsageError when it is malformed.

    ``uuid`` is the line's, or a stand-in naming the line; made-up tool ids derive from it.
    """
    payload = entry.get("message")
    if not isinstance(payload, Mapping):
        raise UsageError("its 'message' is not an object")
    role = payload.get("role", entry.get("type"))
    if role != entry.get("type"):
        raise UsageError(f"a {entry.get('type')} line holding a {role!r} message")
    if "role" not in payload:
        payload = {**payload, "role": role}
    payload = ids.repair(entry, payload, uuid)
    message = message_from_anthropic(payload, uuid=uuid)
    ids.commit()
    return dataclasses.replace(
        message,
        timestamp=_timestamp(entry.get("timestamp")),
        is_meta=entry.get("isMeta") is True,
        is_compact_summary=entry.get("isCompactSummary") is True,
        is_sidechain=entry.get("isSidechain") is True,
    )


def _decode(
    lines: Iterable[tuple[int, str]], skipped: list[SkippedLine], records: RequestRecords
) -> list[tuple[int, dict[str, Any]]]:
    """The lines that are JSON objects of a known type, with their numbers."""
    entries: list[tuple[int, dict[str, Any]]] = []
    for number, text in lines:
        try:
            entry = json.loads(text)
        except (ValueError, RecursionError):
            skipped.append(SkippedLine(line=number, reason="not JSON"))
            records.note_line(None)
            continue
        if not isinstance(entry, dict):
            skipped.append(SkippedLine(line=number, reason="not a JSON object"))
            records.note_line(None)
            continue
        records.note_line(entry)
        kind = entry.get("type")
        if not isinstance(kind, str) or kind not in _KNOWN_TYPES:
            skipped.append(SkippedLine(line=number, reason=f"unknown type {kind!r}"))
            continue
        if kind in REQUEST_RECORD_TYPES:
            problem = records.add(entry, number)
            if problem is not None:
                skipped.append(SkippedLine(line=number, reason=problem))
            continue
        entries.append((number, entry))
    return entries


def _read_nodes(
    lines: Iterable[tuple[int, str]], skipped: list[SkippedLine], records: RequestRecords
) -> tuple[list[_Node], list[Mapping[str, Any]]]:
    """Decode the lines into tree nodes (file order) and the title lines."""
    entries = _decode(lines, skipped, records)
    # A file whose messages carry no uuid at all was not threaded: read it in file order.
    threaded = any(e.get("type") in _MESSAGE_TYPES and _is_id(e.get("uuid")) for _, e in entries)
    nodes: list[_Node] = []
    titles: list[Mapping[str, Any]] = []
    seen: dict[str, _Node] = {}
    ids = _ToolIds()
    derived: str | None = None
    for number, entry in entries:
        kind = entry["type"]
        if kind in _TITLE_TYPES:
            titles.append(entry)
            continue
        given = entry.get("uuid")
        if not _is_id(given) and (threaded or kind not in _MESSAGE_TYPES):
            if kind in _MESSAGE_TYPES:
                skipped.append(SkippedLine(line=number, reason=f"{kind} line without a uuid"))
            continue
        uuid = given if isinstance(given, str) and given else f"line {number}"
        earlier = seen.get(uuid)
        if earlier is not None and earlier.message is not None:
            # A repeated line (resumed sessions copy history) adds nothing.
            skipped.append(
                SkippedLine(line=number, reason=f"repeats uuid {uuid!r} of line {earlier.line}")
            )
            continue
        message = None
        problem = None
        if kind in _MESSAGE_TYPES:
            try:
                message = _to_message(entry, uuid, ids)
            except UsageError as exc:
                problem = f"malformed {kind}: {exc}"
        if uuid != given:
            if message is None:
                skipped.append(SkippedLine(line=number, reason=str(problem)))
                continue
            derived = derive_uuid(derived, message)
            uuid = derived
            message = dataclasses.replace(message, uuid=uuid)
        earlier = seen.get(uuid)
        if earlier is not None:
            # The first copy was unreadable: a readable repeat takes its place.
            if message is not None:
                earlier.entry, earlier.message = entry, message
                earlier.response_id = _response_id(entry)
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
            response_id=_response_id(entry) if message is not None else None,
        )
        seen[uuid] = node
        nodes.append(node)
    return nodes, titles


def _response_id(entry: Mapping[str, Any]) -> str | None:
    """The API response an assistant line belongs to (``message.id``)."""
    if entry.get("type") != "assistant":
        return None
    payload = entry.get("message")
    response = payload.get("id") if isinstance(payload, Mapping) else None
    return response if isinstance(response, str) and response else None


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


def _with_parallel_calls(branch: list[_Node], nodes: list[_Node]) -> list[_Node]:
    """The branch with the lines of its responses and their results that it passed by.

    For each response the branch touches, its other lines go right after the response's
    last line on the branch, followed by the result lines of its calls that the branch
    does not answer, each in file order. Merging and result ordering come later.
    """
    on_branch = {n.uuid for n in branch}
    last_on_branch = {n.response_id: i for i, n in enumerate(branch) if n.response_id}
    if not last_on_branch:
        return branch
    members: dict[str, list[_Node]] = {}
    results: dict[str, list[_Node]] = {}  # call id -> result lines off the branch
    answered: set[str] = set()
    for node in nodes:
        if node.message is None:
            continue
        if node.response_id in last_on_branch:
            members.setdefault(node.response_id, []).append(node)
        for block in node.message.tool_results:
            if node.uuid in on_branch:
                answered.add(block.tool_use_id)
            else:
                results.setdefault(block.tool_use_id, []).append(node)
    out: list[_Node] = []
    taken: set[str] = set()
    for position, node in enumerate(branch):
        out.append(node)
        response = node.response_id
        if response is None or last_on_branch[response] != position:
            continue
        group = members.get(response, [])
        extra = [m for m in group if m.uuid not in on_branch]
        found: list[_Node] = []
        for member in group:
            for call in member.message.tool_uses if member.message else ():
                if call.id in answered:
                    continue
                line = next((r for r in results.get(call.id, []) if r.uuid not in taken), None)
                if line is None or line.message is None:
                    continue
                taken.add(line.uuid)
                found.append(line)
                answered.update(b.tool_use_id for b in line.message.tool_results)
        taken.update(m.uuid for m in extra)
        out.extend(sorted(extra, key=lambda n: n.line))
        out.extend(sorted(found, key=lambda n: n.line))
    return out


def _merge_responses(nodes: list[_Node]) -> list[Message]:
    """Join assistant messages of one API response, wherever its blocks were logged.

    The merged message takes the position of the response's first line and its blocks
    in the order they were logged; it takes the uuid of the line logged last, so a
    cursor left on it is never mistaken for having seen blocks that were logged later.
    """
    out: list[Message] = []
    parts: list[list[tuple[int, Message]]] = []  # each slot's lines, joined at the end
    slot: dict[str, int] = {}
    for node in nodes:
        message, response = node.message, node.response_id
        if message is None:
            continue
        if response is not None and response in slot:
            parts[slot[response]].append((node.line, message))
            continue
        if response is not None:
            slot[response] = len(out)
        out.append(message)
        parts.append([(node.line, message)])
    merged: list[Message] = []
    for message, lines in zip(out, parts, strict=True):
        if len(lines) == 1:
            merged.append(message)
            continue
        lines.sort(key=lambda item: item[0])
        content = tuple(block for _, m in lines for block in m.content)
        merged.append(dataclasses.replace(message, content=content, uuid=lines[-1][1].uuid))
    return _order_tool_results(merged)


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


def _title(titles: list[Mapping[str, Any]], branch: set[str]) -> str | None:
    for kind, key in (("custom-title", "customTitle"), ("ai-title", "aiTitle")):
        named = [t.get(key) for t in titles if t.get("type") == kind]
        named = [c for c in named if isinstance(c, str) and c]
        if named:
            return named[-1]
    summaries = [t for t in titles if isinstance(t.get("summary"), str) and t.get("summary")]
    leaves = [(t, t.get("leafUuid")) for t in summaries]
    on_branch = [t for t, leaf in leaves if isinstance(leaf, str) and leaf in branch]
    chosen = (on_branch or summaries)[-1:]
    return str(chosen[0]["summary"]) if chosen else None


def load_claude_code(
    path: Path, lines: Iterable[tuple[int, str]], skipped: list[SkippedLine]
) -> Transcript:
    """Build the transcript of a Claude Code session from its numbered lines."""
    records = RequestRecords()
    nodes, titles = _read_nodes(lines, skipped, records)
    main = [n for n in nodes if not n.sidechain]
    side = [n for n in nodes if n.sidechain]
    if not main:  # a subagent's own file: its conversation is the one asked for
        main, side = side, []
    index = _link(main)
    branch = _current_branch(main, index)
    conversation = _with_parallel_calls(branch, main)

    sidechains: dict[str, list[_Node]] = {}
    for node in side:
        agent = node.entry.get("agentId")
        sidechains.setdefault(agent if isinstance(agent, str) else "sidechain", []).append(node)

    requests, unusable = records.build()
    session = next((n.entry.get("sessionId") for n in main if n.entry.get("sessionId")), None)
    cwd = next((n.entry.get("cwd") for n in reversed(branch or main) if n.entry.get("cwd")), None)
    return Transcript(
        path=path,
        format="claude-code",
        messages=tuple(_merge_responses(conversation)),
        session_id=session if isinstance(session, str) else path.stem,
        title=_title(titles, {n.uuid for n in branch}),
        cwd=cwd if isinstance(cwd, str) else None,
        sidechains={k: tuple(_merge_responses(v)) for k, v in sidechains.items()},
        skipped=tuple(skipped),
        requests=tuple(requests),
        unusable_requests=tuple(unusable),
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
