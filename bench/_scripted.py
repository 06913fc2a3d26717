"""What the benchmarks' scripted memory agent reads from a request, and how it saves.

The fake servers hand a request body (Anthropic's or OpenAI's wire shape) to a function
that decides the reply. For the memory agent's requests it needs the same few facts a
real model would take from memdir's prompt: the memory directory, how many messages are
new, the text of ``MEMORY.md``, what its own earlier turns did and what Reads returned.
Everything here works on either provider's shape and on both of memdir's layouts (the
fork's single prompt, the standalone request's state message and prompt).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memdir.messages import Message, TextBlock, ToolUseBlock

__all__ = [
    "PROMPT_HEAD",
    "MemoryRequest",
    "Save",
    "is_memory_request",
    "memory_file",
    "parse_memory_request",
    "save_calls",
    "text_of",
]

PROMPT_HEAD = "# Memory update"
"""How memdir's extraction prompt begins."""
_MEMORY_DIR = re.compile(r"^The memory directory is `([^`]+)`\.$", re.M)
_COUNT = re.compile(r"Look at the last ~(\d+) messages?\b")
_INDEX = re.compile(
    r"^## `MEMORY\.md` as it is now\n\n(?:[^\n]*(?P<lead>holds exactly this|Shown here without)"
    r"[^\n]*\n\n(?P<fence>`{3,})markdown\n(?P<text>.*?)\n(?P=fence)$|[^\n]*does not exist yet)",
    re.M | re.S,
)
# A line of the prompt's list of memory files: `- [type] file.md (mtime): description`.
# The prompt's line that says memdir's tools write the index lines themselves.
_MEMDIR_INDEXES = re.compile(r"memdir writes each memory's")
# The prompt's line that says a relative path starts from the memory directory.
_RELATIVE = re.compile(r"\(relative paths start (?:there|in the private one)\)")
# The frontmatter layout the prompt shows: with a `name` line, or without (memdir names it).
_NAME_LINE = re.compile(r"^name: <", re.M)
_TYPE_LINE = re.compile(r"^ *type: <", re.M)
# The prompt's line that asks for no words beside the calls.
_NO_WORDS = re.compile(r"no words beside them")
_LISTED = re.compile(r"^- (?:\[[a-z]+\] )?(\S+\.md) \(", re.M)
_NUMBERED = re.compile(r"^\s*\d+\t(.*)$")


def text_of(message: Mapping[str, Any]) -> str:
    """The text of one wire message, whatever its shape: a string, or text parts."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    parts = []
    for block in content or ():
        if not isinstance(block, Mapping):
            continue
        if block.get("type") == "text":
            parts.append(str(block.get("text", "")))
        elif block.get("type") == "tool_result":
            inner = block.get("content")
            parts.append(inner if isinstance(inner, str) else text_of({"content": inner}))
    return "\n".join(parts)


def _is_prompt(message: Mapping[str, Any]) -> bool:
    return message.get("role") == "user" and text_of(message).startswith(PROMPT_HEAD)


def is_memory_request(body: Mapping[str, Any]) -> bool:
    """Whether ``body`` is the memory agent's: one of its user messages is memdir's prompt."""
    return any(_is_prompt(m) for m in body.get("messages") or ())


@dataclass(frozen=True, kw_only=True)
class MemoryRequest:
    """What the memory agent is told, and what it did so far in this run."""

    memory_dir: str
    """Where memories go."""
    new_texts: tuple[str, ...]
    """The texts of the messages it should look at (the new ones)."""
    index: str | None
    """The text of ``MEMORY.md`` (None: it does not exist yet), as the prompt shows it."""
    index_whole: bool = True
    """Whether the prompt shows the index whole; else without its pointer lines, its last
    line exact."""
    listed: frozenset[str] = frozenset()
    """The memory files the prompt lists."""
    memdir_indexes: bool = False
    """Whether the prompt says memdir writes each new memory's index line itself (the
    agent then writes the files alone)."""
    relative_paths: bool = False
    """Whether the prompt says a relative path starts from the memory directory (the
    agent then names its files alone, as a model told so does)."""
    quiet: bool = False
    """Whether the prompt asks for no words beside the calls."""
    named: bool = True
    """Whether the prompt's frontmatter layout has a ``name`` line (else memdir names
    the memory after its file, and the agent writes none)."""
    typed: bool = True
    """Whether it has a ``type`` line (else memdir types the memory by its file name)."""
    turn: int
    """Requests of this run so far, this one included (1 for the first)."""
    read: Mapping[str, str]
    """What each Read of this run returned, by path (the file's text)."""
    found: frozenset[str] = frozenset()
    """The memory files (by name) that this run's searches (Grep, Glob) came back with."""


def parse_memory_request(body: Mapping[str, Any]) -> MemoryRequest:
    """Read ``body``, a memory agent's request."""
    messages = list(body["messages"])
    at = max(i for i, m in enumerate(messages) if _is_prompt(m))
    prompt = text_of(messages[at])
    everything = "\n\n".join(text_of(m) for m in messages)
    # Said in the instructions: the standalone request's system prompt (a system message
    # on OpenAI's wire), the fork's prompt.
    instructions = f"{_system_of(body)}\n{everything}"
    # The fork's prompt names the directory; memdir's own request, its system prompt.
    found = _MEMORY_DIR.search(prompt) or _MEMORY_DIR.search(instructions)
    if found is None:
        raise ValueError("the prompt names no memory directory")
    count_match = _COUNT.search(prompt)
    count = int(count_match.group(1)) if count_match else 0
    before = [m for m in messages[:at] if m.get("role") in ("user", "assistant")]
    new = [text_of(m) for m in before[len(before) - count :]] if count else []
    shown = _INDEX.search(everything)
    index = None
    if shown is not None and shown.group("text") is not None:
        index = "" if shown.group("text") == "(empty)" else shown.group("text") + "\n"
    own = messages[at + 1 :]
    return MemoryRequest(
        memory_dir=found.group(1),
        new_texts=tuple(new),
        index=index,
        index_whole=shown is None or shown.group("lead") != "Shown here without",
        listed=frozenset(_LISTED.findall(everything)),
        memdir_indexes=_MEMDIR_INDEXES.search(instructions) is not None,
        relative_paths=_RELATIVE.search(instructions) is not None,
        quiet=_NO_WORDS.search(instructions) is not None,
        named=_NAME_LINE.search(instructions) is not None or "## How to save" not in instructions,
        typed=_TYPE_LINE.search(instructions) is not None or "## How to save" not in instructions,
        turn=1 + sum(1 for m in own if m.get("role") == "assistant"),
        read=_reads(own),
        found=_found(own),
    )


def _system_of(body: Mapping[str, Any]) -> str:
    """The text of an Anthropic request's system prompt (a string or text blocks)."""
    system = body.get("system")
    if isinstance(system, str):
        return system
    return text_of({"content": system}) if isinstance(system, list) else ""


def _reads(own: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Read results by path, from either provider's shape of calls and results."""
    paths: dict[str, str] = {}
    for message in own:
        content = message.get("content")
        for block in content if isinstance(content, list) else ():
            if isinstance(block, Mapping) and block.get("type") == "tool_use":
                paths[str(block["id"])] = str(block["input"].get("file_path", ""))
        for call in message.get("tool_calls") or ():
            arguments = json.loads(call["function"]["arguments"] or "{}")
            paths[str(call["id"])] = str(arguments.get("file_path", ""))
    out: dict[str, str] = {}
    for message in own:
        results: list[tuple[str, str]] = []
        if message.get("role") == "tool":
            results.append((str(message.get("tool_call_id")), text_of(message)))
        content = message.get("content")
        for block in content if isinstance(content, list) else ():
            if isinstance(block, Mapping) and block.get("type") == "tool_result":
                inner = block.get("content")
                text = inner if isinstance(inner, str) else text_of({"content": inner})
                results.append((str(block.get("tool_use_id")), text))
        for call_id, text in results:
            lines = [_NUMBERED.match(line) for line in text.split("\n")]
            if call_id in paths and lines and all(lines):
                out[paths[call_id]] = "\n".join(m.group(1) for m in lines if m) + "\n"
    return out


_FOUND_FILE = re.compile(r"([^\s/]+\.md)$", re.M)


def _found(own: Sequence[Mapping[str, Any]]) -> frozenset[str]:
    """The file names in the results of this run's searches: each line of a result that
    ends in a Markdown file's name (a Read's numbered lines are not such results)."""
    names: set[str] = set()
    for message in own:
        texts = [text_of(message)] if message.get("role") == "tool" else []
        content = message.get("content")
        for block in content if isinstance(content, list) else ():
            if isinstance(block, Mapping) and block.get("type") == "tool_result":
                texts.append(text_of({"content": [block]}))
        for text in texts:
            if not any(_NUMBERED.match(line) for line in text.split("\n")):
                names.update(_FOUND_FILE.findall(text))
    return frozenset(names)


@dataclass(frozen=True, kw_only=True)
class Save:
    """One memory the scripted agent keeps: a file, its type, what it says."""

    filename: str
    """The file's name in the memory directory."""
    title: str
    """The frontmatter ``name`` and the index link's text."""
    type: str
    """user, feedback, project or reference."""
    description: str
    """The one-line description."""
    body: str
    """What it says."""


def feedback_saves(turns: Iterable[int], user_text: Callable[[int], str]) -> list[Save]:
    """One feedback memory per turn in ``turns``, holding what the user said then: the
    saves the benches' scripted memory agent makes."""
    return [
        Save(
            filename=f"feedback_turn_{t:03d}.md",
            title=f"Note from turn {t}",
            type="feedback",
            description=f"what the user asked for in turn {t}",
            body=user_text(t),
        )
        for t in turns
    ]


def memory_file(save: Save, named: bool = True, typed: bool = True) -> str:
    """The file's text: frontmatter (``named``: with a ``name`` line; ``typed``: with a
    ``type`` line), body, and for feedback and project the Why/How lines."""
    name = f"name: {save.title}\n" if named else ""
    kind = f"type: {save.type}\n" if typed else ""
    text = f"---\n{name}description: {save.description}\n{kind}---\n\n{save.body}\n"
    if save.type in ("feedback", "project"):
        text += "\n**Why:** the user said so.\n\n**How to apply:** in every answer about it.\n"
    return text


def save_calls(request: MemoryRequest, saves: Sequence[Save], known: Iterable[str] = ()) -> Message:
    """The turn that saves ``saves``: a file each and, where the prompt leaves the index
    to the agent, the index pointers, all at once (where memdir's tools write the
    pointers, as memdir's prompt says today, the files alone).

    A file that exists and was not Read in this run is Read first (the next turn writes
    it); one that was Read gets the new text after its last line by a small ``Edit``, as
    the prompt asks (a ``Write`` of old and new text where that line is not unique). A
    file in ``known`` (memories an earlier turn saved: what the agent updates) that the
    prompt neither lists nor indexes is searched for first with ``Grep``, as the prompt
    asks of a store too large to list, by the topic its name gives.
    """
    root = request.memory_dir
    first_id = 100 * request.turn  # ids stay unique over the run's turns
    calls: list[ToolUseBlock] = []
    earlier = set(known)
    hidden = [
        s
        for s in saves
        if s.filename in earlier and not _exists(request, s) and s.filename not in request.found
    ]
    if hidden and not request.found:
        for n, save in enumerate(hidden):
            topic = re.sub(r"^(?:user|feedback|project|reference)_", "", save.filename[:-3])
            word = topic.split("_")[0]
            calls.append(_call(first_id + n, "Grep", pattern=word, **{"-i": True}))
        return Message(role="assistant", content=tuple(calls))
    unread = [s for s in saves if _exists(request, s) and _path(request, s) not in request.read]
    if unread:
        for n, save in enumerate(unread):
            calls.append(_call(first_id + n, "Read", file_path=_path(request, save)))
        return Message(role="assistant", content=tuple(calls))
    pointers = []
    for n, save in enumerate(saves):
        path = _path(request, save)
        old = request.read.get(path)
        last = old.rstrip("\n").rsplit("\n", 1)[-1] if old is not None else ""
        if old is None or not last.strip() or old.count(last) != 1:
            text = (
                memory_file(save, request.named, request.typed)
                if old is None
                else old.rstrip("\n") + f"\n\n{save.body}\n"
            )
            calls.append(_call(first_id + n, "Write", file_path=path, content=text))
        else:
            # The prompt asks for a small Edit of a file that exists: the new words go
            # after its last line, which is unique in it.
            new_string = f"{last}\n\n{save.body}"
            calls.append(
                _call(first_id + n, "Edit", file_path=path, old_string=last, new_string=new_string)
            )
        if request.memdir_indexes:
            continue
        if old is None and f"]({save.filename})" not in (request.index or ""):
            pointers.append(f"- [{save.title}]({save.filename}) — {save.description}\n")
    if pointers:
        index_path = f"{root}/MEMORY.md"
        added = "".join(pointers)
        if request.index is None or not request.index.strip():
            calls.append(_call(first_id + 90, "Write", file_path=index_path, content=added))
        else:
            old = request.index.rstrip("\n")
            if not request.index_whole:
                old = old.rsplit("\n", 1)[-1]  # the one line it shows exact: append after it
            calls.append(
                _call(
                    first_id + 90,
                    "Edit",
                    file_path=index_path,
                    old_string=old,
                    new_string=old + "\n" + added.rstrip("\n"),
                )
            )
    if request.quiet:
        return Message(role="assistant", content=tuple(calls))
    intro = TextBlock(text="Worth keeping.")
    return Message(role="assistant", content=(intro, *calls))


def _path(request: MemoryRequest, save: Save) -> str:
    if request.relative_paths:
        return save.filename
    return f"{request.memory_dir}/{save.filename}"


def _exists(request: MemoryRequest, save: Save) -> bool:
    return (
        save.filename in request.listed
        or save.filename in request.found
        or f"]({save.filename})" in (request.index or "")
    )


def _call(n: int, name: str, **tool_input: Any) -> ToolUseBlock:
    return ToolUseBlock(id=f"toolu_mem_{n:03d}", name=name, input=tool_input)
