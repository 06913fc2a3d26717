"""``OfflineModel``: memory extraction by rules, with no language model behind it.

It answers the memory agent's requests the way a careful model would, through the same
fork, tools and permission gate: the first request gets parallel ``Read`` calls for the
files it may change (and the index, where the prompt leaves the index to the agent rather
than to memdir's tools), the second parallel ``Write`` calls, the third a one-line
summary. Nothing is kept between requests. Every answer is worked out again from
the request alone — the prompt names the directories, the manifest and the message count,
the conversation holds what the user said and what the Reads returned — so the same
request always gets the same answer, and the model never touches the disk itself.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Final

from memdir.errors import UsageError
from memdir.messages import Message, TextBlock, ToolUseBlock, derive_uuid, model_visible
from memdir.models._offline_dream import answer_consolidation
from memdir.models._offline_request import (
    ExtractionPrompt,
    ManifestEntry,
    newest_date,
    parse_extraction_prompt,
    prompt_index,
    prompt_text,
    read_results,
    reads_answered,
    typed_text,
)
from memdir.models._offline_rules import Candidate, Forget, find_cues
from memdir.models._offline_text import clip, mentions, similarity
from memdir.models._types import ModelRequest, ModelResponse, Usage
from memdir.store import (
    ENTRYPOINT_NAME,
    MemoryFormat,
    contains_secret,
    format_memory_file,
    parse_memory_file,
)

__all__ = ["OfflineModel"]

_CHARS_PER_TOKEN = 4  # the estimate the fake servers use too
# Under 150 characters: the index line length the extraction prompt asks for.
_INDEX_LINE_MAX = 149
_POINTER = re.compile(r"^\s*[-*]\s*\[[^\]]*\]\(([^)\s]+)\)")
_TEAM_TYPES: Final = ("project", "reference")  # "lean towards team" / "usually team"
_NOT_A_CHAT = (
    "The offline model only saves memories: it has no language model to answer with. "
    "Configure a provider ('anthropic:MODEL' or 'openai:MODEL') for anything else."
)


@dataclass(kw_only=True)
class _Target:
    """One memory file this run may write, and why."""

    path: str
    root: str
    existing: bool
    candidates: list[Candidate] = field(default_factory=list)
    forgets: list[Forget] = field(default_factory=list)

    @property
    def link(self) -> str:
        return os.path.relpath(self.path, self.root).replace(os.sep, "/")


class OfflineModel:
    """A deterministic, rule-based stand-in for a model: it only saves memories.

    It saves what users state plainly — "remember that…", preferences and corrections,
    their role, dated plans, links to dashboards and trackers — and forgets on request,
    skipping questions and anything holding a credential. ``today`` fixes the date that
    relative dates are read from when a message has no timestamp (default: the newest
    message timestamp in the request, else the current date).

    Memory files are written in the frontmatter layout ``format`` names; by default, in
    the one the extraction prompt's example shows, as a model would (Claude Code's
    current layout when it shows none). The stamps ``originSessionId`` and ``modified``
    are left to the Write tool, which knows the session and the time (see
    :class:`~memdir.tools.MemoryFiles`); an existing file's are carried over.
    """

    def __init__(self, today: date | None = None, *, format: MemoryFormat | None = None) -> None:
        self._today = today
        self._format = format

    @property
    def name(self) -> str:
        """``offline``."""
        return "offline"

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Answer one request of the memory agent (no I/O, no state)."""
        messages = list(request.messages)
        dream = answer_consolidation(messages)  # the consolidation pass: its own rules
        if dream is not None:
            return _respond(request, dream.text, dream.calls, dream.first_id)
        prompt_at = prompt_index(messages)
        system = _system_text(request.system)
        found = prompt_text(messages, prompt_at, system) if prompt_at >= 0 else None
        prompt = parse_extraction_prompt(found) if found is not None else None
        if prompt is None:
            return _respond(request, _NOT_A_CHAT)
        if prompt.memory_dir is None:
            return _respond(request, "Nothing to save: the prompt names no memory directory.")
        own = messages[prompt_at + 1 :]
        if any(u.name == "Write" for m in own for u in m.tool_uses):
            retry = _index_retry(own)
            if retry:
                first = 1 + sum(len(m.tool_uses) for m in own)
                return _respond(request, "", retry, first)
            return _respond(request, _summary(own, prompt.memory_dir))
        today = self._today or newest_date(messages) or date.today()
        targets = _plan(prompt, prompt.memory_dir, messages[:prompt_at], today)
        if not targets:
            return _respond(request, "Nothing to save.")
        first_id = 1 + sum(len(m.tool_uses) for m in own)
        # An index the prompt shows counts as read: its text is right there.
        shown = {os.path.join(d, ENTRYPOINT_NAME): t for d, t in prompt.indexes.items()}
        reading = not any(m.role == "assistant" for m in own)
        reads = [r for r in _reads(prompt, targets) if r not in shown] if reading else []
        if reads:
            calls = [("Read", {"file_path": path}) for path in reads]
            return _respond(request, "", calls, first_id)
        # Second turn, or a first one with nothing to read (only new files).
        layout = self._format or prompt.format or "current"
        writes = _writes(prompt, targets, {**shown, **read_results(own)}, layout)
        if not writes:
            return _respond(request, "Nothing new to save: it is all in memory already.")
        calls = [("Write", {"file_path": path, "content": text}) for path, text in writes]
        return _respond(request, "", calls, first_id)


def _system_text(system: object) -> str:
    if isinstance(system, str):
        return system
    if isinstance(system, Sequence):
        return "\n\n".join(str(b.get("text", "")) for b in system if isinstance(b, Mapping))
    return ""


def _cues(
    prompt: ExtractionPrompt, before: Sequence[Message], today: date
) -> tuple[list[Candidate], list[Forget]]:
    candidates: dict[str, Candidate] = {}
    forgets: list[Forget] = []
    recent = model_visible(before)[-prompt.count :] if prompt.count > 0 else []
    for message in recent:
        said_on = message.timestamp.date() if message.timestamp is not None else today
        for cue in find_cues(typed_text(message), said_on):
            if isinstance(cue, Candidate):
                candidates[cue.slug] = cue  # a later statement of the same fact wins
                continue
            # Forgetting also takes back what was said earlier in the same messages.
            for slug in [s for s, c in candidates.items() if mentions(cue.words, c.body)]:
                del candidates[slug]
            if cue.words not in [f.words for f in forgets]:
                forgets.append(cue)
    return list(candidates.values()), forgets


def _plan(
    prompt: ExtractionPrompt, private: str, before: Sequence[Message], today: date
) -> list[_Target]:
    """The files to change: each forget's files, then each candidate's file, in order."""
    team = prompt.team_dir
    user = prompt.user_dir
    candidates, forgets = _cues(prompt, before, today)
    targets: dict[str, _Target] = {}

    def target(path: str, existing: bool) -> _Target:
        if path not in targets:
            under_team = team is not None and _is_under(path, team)
            root = team if under_team and team is not None else private
            if user is not None and _is_under(path, user):
                root = user
            targets[path] = _Target(path=path, root=root, existing=existing)
        return targets[path]

    for forget in forgets:
        for entry in prompt.manifest:
            if mentions(forget.words, f"{entry.filename} {entry.description}"):
                target(os.path.join(private, entry.filename), True).forgets.append(forget)
    for candidate in candidates:
        home = team if team is not None and candidate.type in _TEAM_TYPES else private
        if user is not None and candidate.type == "user":
            # Who the person is holds in every project: the user layer, when it is on.
            held = [e for e in prompt.user_manifest if e.filename == f"{candidate.slug}.md"]
            path = os.path.join(user, f"{candidate.slug}.md")
            target(path, bool(held)).candidates.append(candidate)
            continue
        match = _match(candidate, prompt.manifest, private, home)
        if match is not None:
            target(os.path.join(private, match.filename), True).candidates.append(candidate)
        else:
            target(os.path.join(home, f"{candidate.slug}.md"), False).candidates.append(candidate)
    return list(targets.values())


def _is_under(path: str, root: str) -> bool:
    return os.path.normpath(path).startswith(os.path.normpath(root) + os.sep)


def _match(
    candidate: Candidate, manifest: Sequence[ManifestEntry], private: str, home: str
) -> ManifestEntry | None:
    """The existing file a candidate updates: same slug (at home first), else the same type
    with the most similar description."""
    same = [e for e in manifest if os.path.basename(e.filename) == f"{candidate.slug}.md"]
    if same:
        at_home = [e for e in same if _is_under(os.path.join(private, e.filename), home)]
        return (at_home or same)[0]
    scored = sorted(
        (-similarity(candidate.description, e.description), e.filename, e)
        for e in manifest
        if e.type == candidate.type
    )
    return scored[0][2] if scored and scored[0][0] < 0 else None


def _edits_index(prompt: ExtractionPrompt) -> bool:
    """Whether the agent keeps ``MEMORY.md`` itself: there is one, and memdir's tools do
    not write its lines (they add, update and drop each memory's line as it is written)."""
    return prompt.index and not prompt.memdir_indexes


def _reads(prompt: ExtractionPrompt, targets: Sequence[_Target]) -> list[str]:
    reads: list[str] = []
    if _edits_index(prompt):
        reads += [os.path.join(t.root, ENTRYPOINT_NAME) for t in targets]
    reads += [t.path for t in targets if t.existing]
    return list(dict.fromkeys(reads))


def _entries(body: str) -> list[str]:
    """A body split into memories: a paragraph with its **Why:** / **How to apply:** lines."""
    entries: list[str] = []
    for paragraph in re.split(r"\n\s*\n", body.strip()):
        if entries and paragraph.startswith(("**Why:**", "**How to apply:**")):
            entries[-1] += f"\n\n{paragraph}"
        elif paragraph.strip():
            entries.append(paragraph)
    return entries


def _norm(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


def _updated(old: str | None, target: _Target, layout: MemoryFormat) -> str | None:
    """The file's new text (``""`` when nothing is left), or ``None`` to leave it alone."""
    parsed = parse_memory_file(old) if old and old.strip() else None
    name = parsed.name if parsed is not None else None
    description = parsed.description if parsed is not None else None
    kind = parsed.type if parsed is not None else None
    entries = _entries(parsed.body) if parsed is not None else []
    changed = False
    for forget in target.forgets:
        kept = [e for e in entries if not mentions(forget.words, e)]
        # Named only in the title or description: the whole memory is about it.
        entries = kept if len(kept) < len(entries) else []
        changed = True
        if entries and mentions(forget.words, description or ""):
            description = clip(entries[0].split("\n")[0], 110)
    for candidate in target.candidates:
        if _norm(candidate.fact) in _norm("\n\n".join(entries)):
            continue
        if not entries:
            name, kind = candidate.name, candidate.type
        entries = [candidate.body] if candidate.replaces else [*entries, candidate.body]
        description, changed = candidate.description, True
    if not changed:
        return None
    if not entries:
        return ""
    # Everything else the file held, its stamps included, in the layout being written.
    extra = dict(parsed.extra_metadata) if parsed is not None else {}
    first = target.candidates[0] if target.candidates else None
    try:
        return format_memory_file(
            name=name or (first.name if first else "Memory"),
            description=description or name or "",
            type=kind or (first.type if first else None),
            body="\n\n".join(entries),
            extra=extra,
            format=layout,
        )
    except UsageError:  # frontmatter that cannot be written back: leave the file as it is
        return None


def _pointer(text: str, link: str, title: str | None = None) -> str:
    """The index line for the memory ``text`` at ``link``; ``title`` overrides its name."""
    parsed = parse_memory_file(text)
    shown = title or parsed.name or link
    title = clip(shown.replace("[", "(").replace("]", ")"), 60)
    head = f"- [{title}]({link})"
    room = _INDEX_LINE_MAX - len(head) - 3
    hook = clip(parsed.description or "", room) if room > 10 else ""
    return f"{head} — {hook}" if hook else head


def _index(old: str, pointers: Mapping[str, str | None], refresh: set[str]) -> str:
    """``old`` with a pointer line per file in ``pointers`` (``None``: drop its line).

    Lines of other files stay as they are; a file's second pointer is dropped; files in
    ``refresh`` get their line rewritten.
    """
    out: list[str] = []
    seen: set[str] = set()
    for line in old.splitlines():
        match = _POINTER.match(line)
        if match is not None:
            link = match.group(1).removeprefix("./")
            if link in seen or (link in pointers and pointers[link] is None):
                continue
            seen.add(link)
            if link in refresh:
                line = pointers.get(link) or line
        out.append(line)
    out += [line for link, line in pointers.items() if line is not None and link not in seen]
    text = "\n".join(out).strip("\n")
    return f"{text}\n" if text else ""


def _writes(
    prompt: ExtractionPrompt,
    targets: Sequence[_Target],
    contents: Mapping[str, str | None],
    layout: MemoryFormat,
) -> list[tuple[str, str]]:
    writes: list[tuple[str, str]] = []
    pointers: dict[str, dict[str, str | None]] = {}
    refresh: set[str] = set()
    for target in targets:
        if target.existing and target.path not in contents:
            continue  # not read, so not writable; the next run tries again
        old = contents.get(target.path)
        new = _updated(old, target, layout)
        if new is not None and contains_secret(new):
            continue  # the gate would refuse it; never try to store a credential
        if new is not None and new != (old or ""):
            writes.append((target.path, new))
            refresh.add(target.path)
        final = new if new is not None else (old or "")
        # A new memory's index line shows its name as said, not the slug the file keeps.
        title = target.candidates[0].name if target.candidates and not target.existing else None
        line = _pointer(final, target.link, title) if final.strip() else None
        pointers.setdefault(target.root, {})[target.link] = line
    if not writes or not _edits_index(prompt):
        return writes
    for root, lines in pointers.items():
        path = os.path.join(root, ENTRYPOINT_NAME)
        if path not in contents:
            continue
        old_index = contents[path] or ""
        changed = {link for link in lines if os.path.join(root, link) in refresh}
        index = _index(old_index, lines, changed)
        if index != old_index and not contains_secret(index):
            writes.append((path, index))
    return writes


# How often a stale index is read again and rewritten before the run gives up: another
# process (``memdir forget``, a second agent) changing it that often in one run is rare.
_INDEX_RETRIES = 2


def _index_retry(own: Sequence[Message]) -> list[tuple[str, Mapping[str, str]]]:
    """The calls that put this run's index lines in after another process changed the
    index since it was read: Read it again, then Write it with the new lines.

    The index is rewritten from what the fresh Read returned, with only the lines of the
    memories this run wrote put in (a file it emptied, or one found gone when read again,
    loses its line), so a line another process removed meanwhile never comes back and
    one it added is kept.
    """
    turns = [m for m in own if m.role == "assistant" and m.tool_uses]
    if not turns:
        return []
    results = {r.tool_use_id: r for m in own for r in m.tool_results}
    last = turns[-1]

    def failed_index_writes(turn: Message) -> list[ToolUseBlock]:
        return [
            u
            for u in turn.tool_uses
            if u.name == "Write"
            and os.path.basename(str(u.input.get("file_path", ""))) == ENTRYPOINT_NAME
            and (r := results.get(u.id)) is not None
            and r.is_error
            and "Read it" in r.text  # changed since it was read, or created meanwhile
        ]

    attempts = sum(
        1
        for t in turns
        for u in t.tool_uses
        if u.name == "Write"
        and os.path.basename(str(u.input.get("file_path", ""))) == ENTRYPOINT_NAME
    )
    written = {
        str(u.input.get("file_path", "")): str(u.input.get("content", ""))
        for t in turns
        for u in t.tool_uses
        if u.name == "Write" and (r := results.get(u.id)) is not None and not r.is_error
    }
    stale = failed_index_writes(last)
    if stale:
        if attempts > _INDEX_RETRIES:
            return []
        # The memories written are read again too: one removed meanwhile gets no line.
        again = [str(u.input["file_path"]) for u in stale]
        again += [p for p in written if os.path.basename(p) != ENTRYPOINT_NAME]
        return [("Read", {"file_path": path}) for path in dict.fromkeys(again)]
    if len(turns) < 2 or any(u.name != "Read" for u in last.tool_uses):
        return []
    answers = own[own.index(last) + 1] if own.index(last) + 1 < len(own) else None
    if answers is None:
        return []
    fresh = reads_answered(last, answers)
    wanted = {str(u.input["file_path"]): u for u in failed_index_writes(turns[-2])}
    calls: list[tuple[str, Mapping[str, str]]] = []
    for path, attempt in wanted.items():
        if path not in fresh:
            continue
        root = os.path.dirname(path)
        meant = {
            m.group(1).removeprefix("./"): line
            for line in str(attempt.input.get("content", "")).splitlines()
            if (m := _POINTER.match(line)) is not None
        }
        pointers: dict[str, str | None] = {}
        for file, text in written.items():
            link = os.path.relpath(file, root).replace(os.sep, "/")
            if os.path.basename(file) == ENTRYPOINT_NAME or link.startswith("../"):
                continue
            if not text.strip() or (file in fresh and fresh[file] is None):
                pointers[link] = None  # emptied, or removed since: its line goes
            elif link in meant:
                pointers[link] = meant[link]
        index = _index(fresh[path] or "", pointers, set(pointers))
        if index != (fresh[path] or "") and not contains_secret(index):
            calls.append(("Write", {"file_path": path, "content": index}))
    return calls


def _summary(own: Sequence[Message], memory_dir: str) -> str:
    results = {r.tool_use_id: r for m in own for r in m.tool_results}
    saved: list[str] = []
    emptied: list[str] = []
    failed: list[str] = []
    for use in (u for m in own for u in m.tool_uses if u.name == "Write"):
        path = str(use.input.get("file_path", ""))
        if os.path.basename(path) == ENTRYPOINT_NAME:
            continue
        shown = os.path.relpath(path, memory_dir).replace(os.sep, "/")
        result = results.get(use.id)
        if result is None or result.is_error:
            reason = result.text.split("\n")[0] if result is not None else "no result"
            failed.append(f"{shown} ({reason})")
        else:
            (saved if use.input.get("content") else emptied).append(shown)
    parts = [f"Saved {', '.join(saved)}."] if saved else []
    parts += [f"Forgot {', '.join(emptied)} (emptied)."] if emptied else []
    parts += [f"Could not write {'; '.join(failed)}."] if failed else []
    return " ".join(parts) or "Nothing was saved."


def _chars(message: Message) -> int:
    total = 0
    for block in message.content:
        if isinstance(block, TextBlock):
            total += len(block.text)
        elif isinstance(block, ToolUseBlock):
            total += len(block.name) + len(json.dumps(dict(block.input), ensure_ascii=False))
        else:
            total += len(getattr(block, "text", ""))
    return total


def _respond(
    request: ModelRequest,
    text: str,
    calls: Sequence[tuple[str, Mapping[str, str]]] = (),
    first_id: int = 1,
) -> ModelResponse:
    blocks: list[TextBlock | ToolUseBlock] = [TextBlock(text=text)] if text else []
    blocks += [
        ToolUseBlock(id=f"toolu_offline_{first_id + n}", name=name, input=dict(arguments))
        for n, (name, arguments) in enumerate(calls)
    ]
    message = Message(role="assistant", content=tuple(blocks))
    previous = request.messages[-1].uuid if request.messages else None
    # Derived, not random, so the same request gives an equal response.
    message = dataclasses.replace(message, uuid=derive_uuid(previous, message))
    system = request.system
    if not isinstance(system, str):
        system = json.dumps(system, default=str)
    spent = sum(_chars(m) for m in request.messages) + len(system)
    spent += len(json.dumps(list(request.tools), default=str))
    return ModelResponse(
        message=message,
        usage=Usage(
            input_tokens=spent // _CHARS_PER_TOKEN,
            output_tokens=_chars(message) // _CHARS_PER_TOKEN,
        ),
        stop_reason="tool_use" if calls else "end_turn",
        model="offline",
        id=f"msg_offline_{message.uuid}",
    )
