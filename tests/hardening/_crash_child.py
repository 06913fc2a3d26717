"""The child process of the crash-safety tests: it saves memories until it is killed.

Usage: ``python _crash_child.py MODE MEMORY_DIR WORK_DIR SEED CHILD TURNS``

``MODE`` picks the write path, both of them memdir's own code end to end:

- ``extractor``: a :class:`~memdir.extract.MemoryExtractor` in an async host, with a
  :class:`~memdir.testing.FunctionModel` that Reads, then Writes a topic file through the
  fork's tools, which write its ``MEMORY.md`` line; after each run the session cursor
  is recorded with :meth:`~memdir.state.StateFile.put`, as the command line does.
- ``cli``: the ``memdir extract`` path (``extract_transcript``) with the offline model on a
  transcript that grows by a turn or two before each pass.

The child tells the parent what it does, one flushed line per fact, in this order:

- ``READY`` once everything is imported;
- ``WRITE <relpath> <sha256>`` before a Write or Edit call reaches the tools: the exact
  text that call would leave in the file (an intent; the kill may come first);
- ``SAVED <relpath> <sha256>`` when the extractor reports a saved memory, with the digest
  of the file as it is on disk at that moment;
- ``PLAN <session> <uuid>`` for each cursor a pass may record (``cli`` only), and
  ``STATE-PUT <session> <uuid>`` just before a cursor is put (``extractor`` only);
- ``STATE <session> <uuid>`` once the state file holds that cursor;
- ``BEGIN <n>`` / ``END <n>`` around each run (``extractor``) or pass (``cli``);
- ``DONE`` when ``TURNS`` runs or passes are over and nothing is left in flight.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import os
import random
import sys
import threading
from collections.abc import Callable, Mapping
from datetime import date
from pathlib import Path
from typing import Any

import memdir.store._repair
from memdir._cli._run import completed_turn_ends, extract_transcript
from memdir.extract import ExtractConfig, MemoryExtractor, MemorySaved, TurnContext
from memdir.messages import Message, ToolUseBlock, derive_uuid
from memdir.models import Model, ModelRequest, ModelResponse, OfflineModel
from memdir.state import SessionState, StateFile
from memdir.store import ENTRYPOINT_NAME, MemoryDir, atomic_write, format_memory_file
from memdir.testing import FunctionModel
from memdir.tools import MemoryFiles
from memdir.transcripts import load_transcript

SESSION = "crash-session"
TOPICS = 12
_WORDS = ("alpha", "bravo", "delta", "echo", "harbor", "lantern", "meadow", "orbit", "quartz")
_ROLES = ("backend engineer", "site reliability engineer", "data engineer", "product manager")
_SERVICES = ("billing", "search", "checkout", "ledger", "gateway")
_VERBS = ("deploy", "restart", "migrate")

_print_lock = threading.Lock()


def report(*fields: object) -> None:
    """One protocol line on stdout, written and flushed in one piece."""
    line = " ".join(str(f) for f in fields) + "\n"
    with _print_lock:
        sys.stdout.write(line)
        sys.stdout.flush()


def digest(data: str | bytes) -> str:
    raw = data.encode("utf-8") if isinstance(data, str) else data
    return hashlib.sha256(raw).hexdigest()


def relative(root: Path, path: str | os.PathLike[str]) -> str:
    return Path(os.path.relpath(os.path.realpath(path), os.path.realpath(root))).as_posix()


def edited(path: str, use: Mapping[str, Any]) -> str | None:
    """The text an Edit call would leave in ``path``, or ``None`` if it would fail."""
    try:
        text = Path(path).read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    old, new = str(use.get("old_string", "")), str(use.get("new_string", ""))
    if not old or text.count(old) == 0:
        return None
    if use.get("replace_all"):
        return text.replace(old, new)
    return text.replace(old, new, 1) if text.count(old) == 1 else None


class Announcing:
    """A model that tells the parent what each Write or Edit it asks for will write."""

    def __init__(self, inner: Model, root: Path) -> None:
        self._inner = inner
        self._root = root

    @property
    def name(self) -> str:
        return self._inner.name

    async def request(self, request: ModelRequest) -> ModelResponse:
        response = await self._inner.request(request)
        for use in response.message.tool_uses:
            path = str(use.input.get("file_path", ""))
            if use.name == "Write":
                text: str | None = str(use.input.get("content", ""))
            elif use.name == "Edit":
                text = edited(path, use.input)
            else:
                continue
            if text is not None:
                report("WRITE", relative(self._root, path), digest(text))
        return response


_prepare = MemoryFiles.prepare


def _announcing_prepare(self: MemoryFiles, path: Path, text: str) -> str:
    """The text the file tools will store (stamped as Claude Code stamps it), announced
    before the write: the model's text alone is not what lands on disk."""
    stored = _prepare(self, path, text)
    report("WRITE", relative(self.memory_dir.root, path), digest(stored))
    return stored


MemoryFiles.prepare = _announcing_prepare  # type: ignore[method-assign]

# The module's namespace: the name memdir's index writes look up when they run.
_repair_names = vars(memdir.store._repair)
_index_write = _repair_names["atomic_write"]


def _announcing_index_write(path: str | os.PathLike[str], data: str | bytes) -> None:
    """The index lines memdir's tools write with each memory, announced before the write."""
    report("WRITE", relative(Path(path).parent, path), digest(data))
    _index_write(path, data)


_repair_names["atomic_write"] = _announcing_index_write


def notice_for(root: Path) -> Callable[[MemorySaved], None]:
    def notice(event: MemorySaved) -> None:
        for path in event.paths:
            report("SAVED", relative(root, path), digest(Path(path).read_bytes()))

    return notice


# --- extractor mode ---------------------------------------------------------------------


@dataclasses.dataclass
class Plan:
    """What the topic writer does in the current run."""

    turn: int = 0
    child: int = 0
    filler: int = 0
    stage: str = "read"


def topic_path(root: Path, turn: int) -> Path:
    return root / f"topic-{turn % TOPICS}.md"


def topic_text(plan: Plan) -> str:
    topic = plan.turn % TOPICS
    rng = random.Random(plan.turn * 1_000_003 + plan.child)
    filler = " ".join(rng.choice(_WORDS) for _ in range(plan.filler))
    body = f"Turn {plan.turn} (child {plan.child}) noted topic {topic}.\n\n{filler}"
    return format_memory_file(
        name=f"Topic {topic}",
        description=f"Where topic {topic} stood at turn {plan.turn}",
        type="project",
        body=body,
    )


def tool_call(name: str, n: int, **arguments: str) -> Message:
    use = ToolUseBlock(id=f"call_{name.lower()}_{n}", name=name, input=arguments)
    return Message(role="assistant", content=(use,))


def topic_writer(root: Path, plan: Plan) -> Callable[[ModelRequest], Message | str]:
    """The model: Read what exists, then Write the topic file (memdir's Write indexes it)."""

    def answer(request: ModelRequest) -> Message | str:
        if not request.messages[-1].is_tool_result:
            plan.stage = "read"
        if plan.stage == "read":
            plan.stage = "write"
            reads = [p for p in (root / ENTRYPOINT_NAME, topic_path(root, plan.turn)) if p.exists()]
            if reads:
                uses = tuple(
                    ToolUseBlock(
                        id=f"call_read_{plan.turn}_{i}", name="Read", input={"file_path": str(p)}
                    )
                    for i, p in enumerate(reads)
                )
                return Message(role="assistant", content=uses)
        if plan.stage == "write":
            plan.stage = "done"
            return tool_call(
                "Write",
                plan.turn,
                file_path=str(topic_path(root, plan.turn)),
                content=topic_text(plan),
            )
        return f"Saved topic {plan.turn % TOPICS}."

    return answer


class Conversation:
    """The host's conversation: the same turns, with the same ids, in every child."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.turns = 0
        self._last: str | None = None

    def add_turn(self) -> int:
        turn = self.turns
        for message in (
            Message.user(f"Turn {turn}: please keep topic {turn % TOPICS} in mind."),
            Message.assistant(f"Noted, turn {turn}."),
        ):
            self._last = derive_uuid(self._last, message)
            self.messages.append(dataclasses.replace(message, uuid=self._last))
        self.turns += 1
        return turn

    def resume_after(self, cursor: str | None, limit: int = 1_000_000) -> bool:
        """Build the turns up to the one ending at ``cursor``; False if it never comes."""
        if cursor is None:
            return True
        while self.turns < limit:
            self.add_turn()
            if self.messages[-1].uuid == cursor:
                return True
        return False


async def run_extractor(root: Path, seed: int, child: int, turns: int) -> int:
    memory = MemoryDir(root)
    states = StateFile(memory)
    rng = random.Random(seed)
    plan = Plan(child=child)
    model = Announcing(FunctionModel(topic_writer(root, plan)), root)
    extractor = MemoryExtractor(memory, model, ExtractConfig(context_budget_tokens=2_000))
    saved = states.get(SESSION)
    conversation = Conversation()
    if not conversation.resume_after(saved.cursor):
        report("BADCURSOR", saved.cursor)
        return 3
    extractor.restore(saved.cursor, saved.turns_since_run)
    notice = notice_for(root)
    report("READY")
    for _ in range(turns):
        turn = conversation.add_turn()
        plan.turn = turn
        plan.filler = rng.choice((0, 20, 200, 2_000))
        report("BEGIN", turn)
        context = TurnContext(messages=tuple(conversation.messages), cwd=str(root))
        extractor.on_turn_end(context, notify=notice)
        await extractor.drain(timeout=60.0)
        cursor = extractor.cursor
        report("STATE-PUT", SESSION, cursor)
        states.put(SESSION, SessionState(cursor=cursor, turns_since_run=extractor.turns_since_run))
        report("STATE", SESSION, cursor)
        report("END", turn)
    report("DONE")
    return 0


# --- cli mode ---------------------------------------------------------------------------


def statement(rng: random.Random) -> str:
    """Something the offline model saves: a role, a dated plan or a standing rule."""
    roll = rng.random()
    if roll < 0.3:
        return f"I'm a {rng.choice(_ROLES)} on the team {rng.randint(1, 99)}."
    if roll < 0.5:
        verb, weekday = rng.choice(_VERBS), rng.choice(("Friday", "Monday"))
        return f"Never {verb} the {rng.choice(_SERVICES)} service on a {weekday}."
    month, day = rng.randint(1, 12), rng.randint(1, 28)
    return (
        f"The code freeze for the {rng.choice(_SERVICES)} service starts on "
        f"2027-{month:02d}-{day:02d}."
    )


async def run_cli(root: Path, work: Path, seed: int, turns: int) -> int:
    memory = MemoryDir(root)
    states = StateFile(memory)
    rng = random.Random(seed)
    model = Announcing(OfflineModel(today=date(2027, 1, 4)), root)
    session_file = work / "session.json"
    notice = notice_for(root)

    def on_turn() -> None:
        report("STATE", SESSION, states.get(SESSION).cursor)

    report("READY")
    for n in range(turns):
        try:
            data: dict[str, Any] = json.loads(session_file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            data = {"session_id": SESSION, "messages": []}
        for _ in range(rng.randint(1, 2)):
            data["messages"].append({"role": "user", "content": statement(rng)})
            data["messages"].append({"role": "assistant", "content": "Noted."})
        atomic_write(session_file, json.dumps(data, indent=1))
        transcript = load_transcript(session_file)
        cursor = states.get(SESSION).cursor
        uuids = [m.uuid for m in transcript.messages]
        after = uuids.index(cursor) + 1 if cursor in uuids else 0
        for end in completed_turn_ends(transcript.messages[after:]):
            report("PLAN", SESSION, uuids[after + end])
        report("BEGIN", n)
        await extract_transcript(transcript, memory, model, on_saved=notice, on_turn=on_turn)
        report("END", n)
    report("DONE")
    return 0


def main(argv: list[str]) -> int:
    mode, root, work, seed, child, turns = argv
    memory_root = Path(root)
    if mode == "extractor":
        return asyncio.run(run_extractor(memory_root, int(seed), int(child), int(turns)))
    if mode == "cli":
        return asyncio.run(run_cli(memory_root, Path(work), int(seed), int(turns)))
    report("BADMODE", mode)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
