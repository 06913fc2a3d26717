"""The child processes of the index tests: an extraction, a forget loop, a dream, an undo.

Usage: ``python _index_child.py MODE MEMORY_DIR SEED``

Modes driven line by line on stdin (``tests/hardening/test_index_lock.py``):

- ``extract``: a :class:`~memdir.extract.MemoryExtractor` with the offline engine. ``RUN``
  extracts one new turn; before each request of the memory agent it prints ``STEP <n>``
  and waits for ``GO``, so the parent can run a forget at that exact point. ``FREE <n>``
  extracts ``n`` turns without stopping. Each memory reported saved is printed as
  ``SAVED <relpath>``, each run ends with ``END``.
- ``forget``: ``FORGET`` forgets one memory (seeded choice) and prints ``FORGOT
  <relpath>`` (or ``NONE``); ``LOOP`` forgets one after another until ``STOP``, then
  prints ``STOPPED``.

Modes that work until they are killed (the SIGKILL loop): ``extract-loop``,
``dream-loop``, ``forget-loop``, ``undo-loop``. Each prints ``READY`` first.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import random
import sys
import threading
from datetime import date
from pathlib import Path

from memdir.dream import AutoDream
from memdir.errors import StoreError
from memdir.extract import ExtractConfig, MemoryExtractor, MemorySaved, TurnContext
from memdir.messages import Message, derive_uuid
from memdir.models import ModelRequest, ModelResponse, OfflineModel
from memdir.store import (
    ENTRYPOINT_NAME,
    MemoryDir,
    forget_memory,
    restore_memory,
    trash_entries,
)

_ROLES = ("backend engineer", "site reliability engineer", "data engineer", "product manager")
_SERVICES = ("billing", "search", "checkout", "ledger", "gateway", "payments", "auth")
_VERBS = ("deploy", "restart", "migrate")
_TOOLS = ("pnpm", "uv", "ruff", "pytest", "bazel", "terraform")


def say(*fields: object) -> None:
    sys.stdout.write(" ".join(str(f) for f in fields) + "\n")
    sys.stdout.flush()


def statement(rng: random.Random) -> str:
    """Something the offline engine saves: a role, a rule, a date, a preference."""
    roll = rng.random()
    if roll < 0.2:
        return f"I'm a {rng.choice(_ROLES)} on the platform team."
    if roll < 0.5:
        verb, weekday = rng.choice(_VERBS), rng.choice(("Friday", "Monday"))
        return f"Never {verb} the {rng.choice(_SERVICES)} service on a {weekday}."
    if roll < 0.75:
        month, day = rng.randint(1, 12), rng.randint(1, 28)
        return (
            f"The code freeze for the {rng.choice(_SERVICES)} service starts on "
            f"2027-{month:02d}-{day:02d}."
        )
    return f"Remember that we always use {rng.choice(_TOOLS)} for the {rng.choice(_SERVICES)} repo."


def memories(root: Path) -> list[Path]:
    found = [
        p
        for p in root.rglob("*.md")
        if p.name != ENTRYPOINT_NAME and ".memdir" not in p.parts and p.is_file()
    ]
    return sorted(found)


class Conversation:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.messages: list[Message] = []
        self._last: str | None = None

    def add_turn(self) -> tuple[Message, ...]:
        said = " ".join(statement(self.rng) for _ in range(self.rng.randint(1, 3)))
        for message in (Message.user(said), Message.assistant("Noted.")):
            self._last = derive_uuid(self._last, message)
            self.messages.append(dataclasses.replace(message, uuid=self._last))
        return tuple(self.messages)


class Stepped:
    """The offline engine, stopping before each request until the parent says ``GO``."""

    def __init__(self) -> None:
        self.inner = OfflineModel(today=date(2027, 1, 4))
        self.gated = False
        self.step = 0

    @property
    def name(self) -> str:
        return self.inner.name

    async def request(self, request: ModelRequest) -> ModelResponse:
        if self.gated:
            self.step += 1
            say("STEP", self.step)
            line = await asyncio.to_thread(sys.stdin.readline)
            if line.strip() != "GO":
                raise SystemExit(f"expected GO, got {line!r}")
        return await self.inner.request(request)


async def extract(root: Path, seed: int) -> None:
    md = MemoryDir(root)
    model = Stepped()
    extractor = MemoryExtractor(md, model, ExtractConfig())
    conversation = Conversation(random.Random(seed))

    def notice(event: MemorySaved) -> None:
        for path in event.paths:
            say("SAVED", Path(os.path.relpath(path, root)).as_posix())

    say("READY")
    while line := await asyncio.to_thread(sys.stdin.readline):
        command, *args = line.split()
        if command == "QUIT":
            return
        runs = 1 if command == "RUN" else int(args[0])
        model.gated = command == "RUN"
        for _ in range(runs):
            model.step = 0
            turn = TurnContext(messages=conversation.add_turn(), cwd=str(root))
            extractor.on_turn_end(turn, notify=notice)
            await extractor.drain(timeout=120.0)
        say("END")


def forget_one(md: MemoryDir, rng: random.Random) -> str | None:
    found = memories(md.root)
    while found:
        pick = found.pop(rng.randrange(len(found)))
        try:
            forget_memory(md, pick)
        except StoreError:
            continue  # gone meanwhile: another one
        return pick.relative_to(md.root).as_posix()
    return None


def _set_on_next_line(event: threading.Event) -> None:
    sys.stdin.readline()
    event.set()


def forget(root: Path, seed: int) -> None:
    md = MemoryDir(root)
    rng = random.Random(seed)
    say("READY")
    while line := sys.stdin.readline():
        command = line.strip()
        if command == "QUIT":
            return
        if command == "FORGET":
            name = forget_one(md, rng)
            say("FORGOT", name) if name is not None else say("NONE")
        elif command == "LOOP":
            stop = threading.Event()

            threading.Thread(target=_set_on_next_line, args=(stop,), daemon=True).start()
            while not stop.is_set():
                name = forget_one(md, rng)
                if name is not None:
                    say("FORGOT", name)
                else:
                    stop.wait(0.001)  # nothing to forget yet; the extraction saves more
            say("STOPPED")


async def extract_loop(root: Path, seed: int) -> None:
    md = MemoryDir(root)
    extractor = MemoryExtractor(md, OfflineModel(today=date(2027, 1, 4)), ExtractConfig())
    conversation = Conversation(random.Random(seed))
    say("READY")
    while True:
        extractor.on_turn_end(TurnContext(messages=conversation.add_turn(), cwd=str(root)))
        await extractor.drain(timeout=120.0)


async def dream_loop(root: Path) -> None:
    dream = AutoDream(MemoryDir(root), OfflineModel(today=date(2027, 1, 4)))
    say("READY")
    while True:
        await dream.run()


def forget_loop(root: Path, seed: int) -> None:
    md = MemoryDir(root)
    rng = random.Random(seed)
    say("READY")
    while True:
        forget_one(md, rng)


def undo_loop(root: Path, seed: int) -> None:
    md = MemoryDir(root)
    rng = random.Random(seed)
    say("READY")
    while True:
        if not trash_entries(md):
            forget_one(md, rng)
        try:
            restore_memory(md)
        except StoreError:
            forget_one(md, rng)  # its name is taken: make room by forgetting another


def main(argv: list[str]) -> int:
    mode, root, seed = argv[0], Path(argv[1]), int(argv[2])
    if mode == "extract":
        asyncio.run(extract(root, seed))
    elif mode == "forget":
        forget(root, seed)
    elif mode == "extract-loop":
        asyncio.run(extract_loop(root, seed))
    elif mode == "dream-loop":
        asyncio.run(dream_loop(root))
    elif mode == "forget-loop":
        forget_loop(root, seed)
    elif mode == "undo-loop":
        undo_loop(root, seed)
    else:
        say("BADMODE", mode)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
