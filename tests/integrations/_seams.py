"""A scripted provider for the seams tests: the host agent, and a memory agent that saves
each code word the user gave in the messages memdir's prompt calls new.

The user says ``Please remember: the code word is ALPHA.``; the memory agent saves
``code_alpha.md`` and, unless the prompt says memdir writes the index lines (as memdir's
own runs do), appends one line for it to ``MEMORY.md``. It trusts memdir's prompt
as a model does: it looks only at the "last ~N messages" the prompt names, and does not
check whether a memory is already there, so a run that is shown old turns as new saves
their facts again, and the index gets duplicate lines.

Requests are told apart by their body only: memdir's requests end with its extraction
prompt ("Look at the last ~N messages ..."), or with the results of the memory agent's
own saves.
"""

from __future__ import annotations

import itertools
import json
import logging
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memdir.messages import Message, ToolUseBlock
from memdir.testing import RecordedRequest, Reply

__all__ = [
    "DEPLOYS_FILE",
    "DEPLOYS_LINE",
    "MemoryAgentScript",
    "attempts_on_a_closed_client",
    "code_word",
    "index_lines",
    "new_count",
    "seed_memory",
]

_NEW = re.compile(r"Look at the last ~(\d+) messages?")
_WORD = re.compile(r"the code word is ([A-Z]{3,})")
_SAVE_ID = "save_"

DEPLOYS_LINE = "- [Deploys](deploys.md) — we deploy on Fridays"
DEPLOYS_FILE = (
    "---\nname: Deploys\ndescription: when the team deploys\ntype: project\n---\n\n"
    "The team deploys on Fridays, after the weekly review.\n"
)


def code_word(word: str) -> str:
    """What the user says to give a fact worth saving."""
    return f"Please remember: the code word is {word.upper()}."


def seed_memory(memory: Path) -> None:
    """A memory directory an earlier conversation left: one memory and its index line."""
    memory.mkdir(parents=True, exist_ok=True)
    (memory / "MEMORY.md").write_text(DEPLOYS_LINE + "\n", encoding="utf-8")
    (memory / "deploys.md").write_text(DEPLOYS_FILE, encoding="utf-8")


def index_lines(memory: Path) -> list[str]:
    """The lines of ``MEMORY.md``, blank ones left out."""
    index = memory / "MEMORY.md"
    if not index.exists():
        return []
    return [line for line in index.read_text(encoding="utf-8").splitlines() if line.strip()]


def attempts_on_a_closed_client(records: Sequence[logging.LogRecord]) -> int:
    """How many requests an SDK tried to send on a closed client, from its debug log
    (each failed attempt is logged with the transport's "client has been closed")."""
    count = 0
    for record in records:
        if not record.name.startswith(("anthropic", "openai")) or record.exc_info is None:
            continue
        error: BaseException | None = record.exc_info[1]
        while error is not None:
            if "client has been closed" in str(error):
                count += 1
                break
            error = error.__cause__ or error.__context__
    return count


def _text(content: Any) -> str:
    """The text of one message's content, in either provider's shape."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return ""


def _last(body: Mapping[str, Any]) -> Mapping[str, Any]:
    messages = body.get("messages") or [{}]
    last = messages[-1]
    return last if isinstance(last, Mapping) else {}


def new_count(body: Mapping[str, Any]) -> int | None:
    """The N of memdir's "Look at the last ~N messages", when the request is a memory
    agent's first request of a run; else None."""
    found = _NEW.search(_text(_last(body).get("content")))
    return int(found.group(1)) if found else None


def _answers_a_save(body: Mapping[str, Any]) -> bool:
    """Whether the request carries back the results of the memory agent's own saves."""
    tail = json.dumps(list(body.get("messages") or [])[-2:])
    return f'"{_SAVE_ID}' in tail and ('"tool_result"' in tail or '"role": "tool"' in tail)


def _tool_names(body: Mapping[str, Any]) -> list[str]:
    names = []
    for tool in body.get("tools") or ():
        if isinstance(tool, Mapping):
            function = tool.get("function")
            named = function if isinstance(function, Mapping) else tool
            names.append(str(named.get("name")))
    return names


@dataclass
class MemoryAgentScript:
    """A fake server's handler: the host's answers, and a memory agent that saves code words.

    ``host`` is what the host agent answers, in order, then "Noted." for ever after.
    """

    memory: Path
    host: Sequence[str] = ()
    memory_requests: list[dict[str, Any]] = field(default_factory=list)
    """The first request of each memory agent's run, in order."""
    _host: Any = None
    _ids: Any = field(default_factory=itertools.count)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self._host = iter(self.host)

    def is_memory(self, request: RecordedRequest | Mapping[str, Any]) -> bool:
        """Whether a request is one of memdir's: told by its body alone."""
        body = request.body if isinstance(request, RecordedRequest) else request
        return new_count(body) is not None or _answers_a_save(body)

    def __call__(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            if _answers_a_save(body):
                return "Saved."
            count = new_count(body)
            if count is None:
                return next(self._host, "Noted.")
            self.memory_requests.append(body)
            return self._save(body, count)

    def _save(self, body: Mapping[str, Any], count: int) -> Reply:
        # The new messages and memdir's prompt after them: the prompt shows the index as
        # it is, whose lines never read "the code word is".
        seen = json.dumps(list(body.get("messages") or [])[-(count + 1) :])
        words = list(dict.fromkeys(w.lower() for w in _WORD.findall(seen)))
        if not words:
            return "Nothing worth saving."
        tools = _tool_names(body)
        # memdir's tools write each new memory's index line: the files alone, then.
        files_only = _MEMDIR_INDEXES in json.dumps(body, ensure_ascii=False)
        index = self.memory / "MEMORY.md"
        known = index.read_text(encoding="utf-8") if index.exists() else ""
        lines = "".join(f"- [Code word {w}](code_{w}.md) — a code word\n" for w in words)
        uses: list[ToolUseBlock] = []
        if "memory" in tools and "Write" not in tools:
            for word in words:
                note = {
                    "command": "create",
                    "path": f"/memories/code_{word}.md",
                    "file_text": _memory_file(word),
                }
                uses.append(self._use("memory", note))
            if files_only:
                return Message(role="assistant", content=tuple(uses))
            pointer: dict[str, Any] = (
                {"command": "insert", "insert_line": len(known.splitlines()), "insert_text": lines}
                if known
                else {"command": "create", "file_text": lines}
            )
            uses.append(self._use("memory", {**pointer, "path": "/memories/MEMORY.md"}))
        else:
            for word in words:
                path = str(self.memory / f"code_{word}.md")
                uses.append(self._use("Write", {"file_path": path, "content": _memory_file(word)}))
            if files_only:
                return Message(role="assistant", content=tuple(uses))
            if known and not known.endswith("\n"):
                known += "\n"
            uses.append(self._use("Write", {"file_path": str(index), "content": known + lines}))
        return Message(role="assistant", content=tuple(uses))

    def _use(self, name: str, arguments: dict[str, Any]) -> ToolUseBlock:
        return ToolUseBlock(id=f"{_SAVE_ID}{next(self._ids)}", name=name, input=arguments)


_MEMDIR_INDEXES = "memdir writes each memory's"
"""What memdir's prompt says when its tools write the index lines themselves."""


def _memory_file(word: str) -> str:
    return (
        f"---\nname: Code word {word}\ndescription: a code word the user gave\n"
        f"type: user\n---\n\nThe user's code word is {word}.\n"
    )


def assert_saved_once_across_a_restart(
    script: MemoryAgentScript, before: int, memory: Path
) -> None:
    """After a restart over the same conversation: one memory run, shown only the new turn
    (the user's words and the answer), the new fact saved, and no fact indexed twice."""
    after = script.memory_requests[before:]
    assert [new_count(body) for body in after] == [2]
    assert sorted(p.name for p in memory.glob("code_*.md")) == [
        "code_alpha.md",
        "code_bravo.md",
        "code_charlie.md",
    ]
    lines = index_lines(memory)
    assert len(lines) == len(set(lines)) == 3, lines


def assert_the_last_turn_saved_without_retries(
    records: Sequence[logging.LogRecord], script: MemoryAgentScript, memory: Path
) -> None:
    """After a host client closed before drain(): the closed client was tried once at
    most, never retried, and the last turn's memory was saved by one memory run."""
    assert attempts_on_a_closed_client(records) <= 1
    assert (memory / "code_delta.md").exists(), "the last turn's memory was lost"
    lines = index_lines(memory)
    assert len(lines) == 1, lines
    assert "](code_delta.md) — a code word" in lines[0]
    assert len(script.memory_requests) == 1
