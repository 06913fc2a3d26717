"""One machine or the queue: the same turns give the same events and the same coverage.

Each case feeds one conversation, turn by turn, to the in-process backend and to the
PostgreSQL queue (its host recording each turn, then the worker's job run directly),
and both must report the same decisions in the same order, cover the same messages and
leave the cursor on the same one. Both backends decide through one coordinator; before
it, the queue's worker had its own copy of the direct-write check, which did not know
Anthropic's ``memory`` tool, and read its turn two never.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pytest

from memdir.extract import ExtractConfig, InProcessBackend, TurnContext
from memdir.messages import Message, ToolResultBlock, ToolUseBlock
from memdir.telemetry import CollectingSink, Event
from memdir.testing import FunctionModel

CONFIG = ExtractConfig(skip_index=True, mode="standalone", every_n_turns=2)
DECISIONS = ("extract.skipped_direct_write", "extract.throttled", "extract.run", "extract.error")
SESSION = "s1"


def plain(k: int) -> list[Message]:
    return [
        Message.user(f"turn {SESSION} {k}", uuid=f"u{k}"),
        Message.assistant(f"noted {k}", uuid=f"a{k}"),
    ]


def saved_by_tool(k: int, name: str, tool_input: dict[str, Any]) -> list[Message]:
    """A turn in which the host's agent saves memory itself with tool ``name``."""
    use = ToolUseBlock(id=f"t{k}", name=name, input=tool_input)
    result = ToolResultBlock(tool_use_id=f"t{k}", content="done")
    return [
        Message.user(f"turn {SESSION} {k}", uuid=f"u{k}"),
        Message(role="assistant", content=(use,), uuid=f"c{k}"),
        Message(role="user", content=(result,), uuid=f"r{k}"),
        Message.assistant(f"saved {k}", uuid=f"a{k}"),
    ]


def memory_tool(k: int, root: Path) -> list[Message]:
    # Anthropic's client-side memory tool: its paths are its own (/memories/...).
    return saved_by_tool(
        k, "memory", {"command": "create", "path": "/memories/x.md", "file_text": "x"}
    )


def write_tool(k: int, root: Path) -> list[Message]:
    return saved_by_tool(k, "Write", {"file_path": f"{root}/x.md", "content": "x"})


@dataclass(frozen=True)
class Case:
    name: str
    turns: tuple[Any, ...]
    """Each turn: a function (k, memory root) → its messages."""
    expected: tuple[tuple[str, int], ...]
    """(event, message_count) for each decision."""


def _plain(k: int, root: Path) -> list[Message]:
    return plain(k)


CASES = [
    Case(
        # The measured divergence: the queue gave throttled, skipped, a run over 2.
        "memory tool on the first turn",
        (memory_tool, _plain, _plain),
        (
            ("extract.skipped_direct_write", 4),
            ("extract.throttled", 0),
            ("extract.run", 4),
        ),
    ),
    Case(
        "plain throttle",
        (_plain, _plain, _plain, _plain),
        (
            ("extract.throttled", 0),
            ("extract.run", 4),
            ("extract.throttled", 0),
            ("extract.run", 4),
        ),
    ),
    Case(
        "Write into the memory on the second turn",
        (_plain, write_tool, _plain),
        (
            ("extract.throttled", 0),
            ("extract.skipped_direct_write", 6),
            ("extract.run", 2),
        ),
    ),
    Case(
        "memory tool that only views",
        (
            lambda k, root: saved_by_tool(k, "memory", {"command": "view", "path": "/memories"}),
            _plain,
        ),
        (("extract.throttled", 0), ("extract.run", 6)),
    ),
]


class Backend(Protocol):
    sink: CollectingSink

    def turn(self, messages: list[Message]) -> None: ...

    def cursor(self) -> str | None: ...

    def close(self) -> None: ...


def quiet_model() -> FunctionModel:
    return FunctionModel(lambda request: "Nothing worth saving.", name="function:quiet")


class InProcess:
    def __init__(self, root: Path) -> None:
        self.sink = CollectingSink()
        self.backend = InProcessBackend(root, quiet_model(), CONFIG, sink=self.sink)
        self.root = root

    def turn(self, messages: list[Message]) -> None:
        self.backend.on_turn_end(
            TurnContext(messages=messages, session_id=SESSION, cwd=str(self.root.parent))
        )
        self.backend.drain_sync()

    def cursor(self) -> str | None:
        extractor = self.backend.extractor(SESSION)
        assert extractor is not None
        return extractor.cursor

    def close(self) -> None:
        self.backend.close()


class Queue:
    def __init__(self, root: Path, dsn: str) -> None:
        from memdir.queue import QueueExtractor, QueueWorker, WorkerSettings

        self.sink = CollectingSink()
        model = quiet_model()
        self.dsn = dsn
        self.worker = QueueWorker(
            WorkerSettings(dsn=dsn, models=lambda _name: model, config=CONFIG, sink=self.sink)
        )
        self.host = QueueExtractor(dsn, "dir", memory_root=root)
        self.root = root

    def turn(self, messages: list[Message]) -> None:
        recorded = self.host.on_turn_end(
            TurnContext(messages=messages, session_id=SESSION, cwd=str(self.root.parent))
        )
        assert recorded is not None
        asyncio.run(self.worker.extract("dir"))

    def cursor(self) -> str | None:
        import psycopg

        with psycopg.connect(self.dsn) as conn:
            row = conn.execute(
                "SELECT cursor_uuid FROM memdir_sessions WHERE session = %s", (SESSION,)
            ).fetchone()
        assert row is not None
        cursor: str | None = row[0]
        return cursor

    def close(self) -> None:
        self.host.close()


def make_backend(kind: str, root: Path, request: pytest.FixtureRequest) -> Backend:
    if kind == "in_process":
        return InProcess(root)
    pytest.importorskip("procrastinate", reason="the [postgres] extra is not installed")
    pytest.importorskip("psycopg", reason="the [postgres] extra is not installed")
    return Queue(root, request.getfixturevalue("pg_dsn"))


def decisions(events: list[Event]) -> list[tuple[str, int]]:
    return [
        (e.name, int(e.fields.get("message_count", 0)))
        for e in events
        if e.name in DECISIONS and not e.fields.get("discarded")
    ]


@pytest.mark.parametrize("kind", ["in_process", "queue"])
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_both_backends_decide_alike(
    kind: str, case: Case, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    root = tmp_path / "memory"
    backend = make_backend(kind, root, request)
    conversation: list[Message] = []
    try:
        for k, make in enumerate(case.turns, start=1):
            conversation += make(k, root)
            backend.turn(list(conversation))
        assert decisions(backend.sink.events) == list(case.expected)
        covered = [count for _, count in case.expected if _ != "extract.throttled"]
        last_cover = max(
            i for i, (name, _) in enumerate(case.expected) if name != "extract.throttled"
        )
        # The cursor sits on the last message of the turn that was last covered.
        turns_covered = last_cover + 1
        upto: list[Message] = []
        for k, make in enumerate(case.turns[:turns_covered], start=1):
            upto += make(k, root)
        assert backend.cursor() == upto[-1].uuid
        assert sum(covered) == len(upto)  # every message covered once
    finally:
        backend.close()
