"""Model faults end to end: host agent → MemoryExtractor → fork → Anthropic SDK → fake server.

Every request the memory agent makes goes through the official ``anthropic`` client over
real HTTP to :class:`FakeAnthropicServer`, which answers with scripted faults. Whatever
the provider does, the host's turn is neither delayed nor raised into; a run that fails
leaves the cursor where it was and is reported as ``extract.error``; the next run covers
what the failed one missed; a model that misbehaves with its tools cannot write outside
the memory directory, and one that never stops is cut off at ``max_turns``.
"""

from __future__ import annotations

import asyncio
import gc
import json
import threading
import warnings
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from memdir.extract import ExtractConfig, MemoryExtractor, TurnContext
from memdir.fork import CacheSafeParams
from memdir.messages import Message, ToolUseBlock
from memdir.models import AnthropicModel, RetryPolicy
from memdir.store import parse_memory_file
from memdir.telemetry import CollectingSink, Event
from memdir.testing import FakeAnthropicServer, Fault, RecordedRequest, Reply
from memdir.tools import builtin_tools

# Retries without waiting: the first repeat after 1 ms, no wait ever above 10 ms, even
# when the server asks for an hour with ``retry-after``.
FAST = RetryPolicy(max_retries=2, initial_delay=0.001, max_delay=0.01, jitter=0.0)
SHORT_TIMEOUT = 0.25  # seconds; only for the cases that time out on purpose
LONG_DELAY = 30.0  # a fault's wait that no request outlives; stop() cuts it short
HOLD_LIMIT = 30.0  # the longest a held request waits for the test to release it

MEMORY_TEXT = "---\nname: {name}\ndescription: about {name}\ntype: user\n---\n\n{body}\n"


# --- the server's script ------------------------------------------------------------------


class Script:
    """The fake server's replies, decided by the test as it goes.

    Passed to the server as its handler, so it is called on the server's threads with each
    request that arrives. ``hold_next()`` makes the next request wait, unanswered, until
    ``release`` is set: a test can act while the model call is in flight.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._replies: deque[Reply] = deque()
        self._hold = False
        self.forever: Callable[[int], Reply] | None = None
        """Answers each request once the queue is empty (called with its number)."""
        self.received = 0
        """Requests that reached the script."""
        self.arrived = threading.Event()
        self.release = threading.Event()

    def add(self, *replies: Reply) -> None:
        with self._lock:
            self._replies.extend(replies)

    @property
    def left(self) -> int:
        with self._lock:
            return len(self._replies)

    def hold_next(self) -> None:
        with self._lock:
            self._hold = True
            self.arrived.clear()
            self.release.clear()

    def __call__(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            self.received += 1
            number = self.received
            hold, self._hold = self._hold, False
            if self._replies:
                reply = self._replies.popleft()
            elif self.forever is not None:
                reply = self.forever(number)
            else:
                raise AssertionError(f"request {number} came with no reply scripted")
        if hold:
            self.arrived.set()
            self.release.wait(HOLD_LIMIT)
        return reply


# --- the host agent -----------------------------------------------------------------------


class Host:
    """A host agent's conversation, growing turn by turn, in a project beside the memory."""

    def __init__(self, root: Path, model: AnthropicModel, *, share_cache: bool = True) -> None:
        self.root = root
        self.project = root / "project"
        self.project.mkdir()
        (self.project / "README.md").write_text("The project the host agent works on.\n")
        self.memory = root / "memory"
        self.messages: list[Message] = []
        self.params = (
            CacheSafeParams(
                model=model,
                system="You are the host agent, a careful coding assistant.",
                tools=[t.definition() for t in builtin_tools(self.project)],
                params={"max_tokens": 2048},
            )
            if share_cache
            else None
        )

    def turn(self, text: str) -> TurnContext:
        self.messages += [Message.user(text), Message.assistant(f"Done: {text}")]
        return TurnContext(messages=tuple(self.messages), params=self.params, cwd=str(self.project))


@dataclass
class World:
    """One host, its extractor and the fake server behind the extractor's model."""

    server: FakeAnthropicServer
    script: Script
    model: AnthropicModel
    host: Host
    extractor: MemoryExtractor
    sink: CollectingSink = field(default_factory=CollectingSink)

    def names(self) -> list[str]:
        return [n for n in self.sink.names() if n != "permission.denied"]

    def runs(self) -> list[Event]:
        return self.sink.named("extract.run")

    def run_requests(self) -> list[RecordedRequest]:
        """Requests that start a run: they end with memdir's prompt, not with tool results."""
        return [r for r in self.server.requests if not _ends_with_tool_results(r)]


def _ends_with_tool_results(request: RecordedRequest) -> bool:
    content = request.body["messages"][-1]["content"]
    return isinstance(content, list) and any(b.get("type") == "tool_result" for b in content)


@asynccontextmanager
async def world(
    tmp_path: Path,
    *,
    retry: RetryPolicy = FAST,
    timeout: float = 30.0,  # noqa: ASYNC109 (the model's request timeout, not this call's)
    share_cache: bool = True,
    **config: Any,
) -> AsyncIterator[World]:
    script = Script()
    async with FakeAnthropicServer(handler=script, min_cache_tokens=0) as server:
        model = AnthropicModel(
            "claude-test",
            api_key="test-key",
            base_url=server.base_url,
            retry=retry,
            timeout=timeout,
        )
        host = Host(tmp_path, model, share_cache=share_cache)
        sink = CollectingSink()
        extractor = MemoryExtractor(host.memory, model, ExtractConfig(**config), sink=sink)
        try:
            yield World(server, script, model, host, extractor, sink)
        finally:
            script.release.set()  # a held request must not keep the server from stopping
            await model.client.close()
        server.assert_no_errors()


async def report_and_hold(w: World, turn: TurnContext) -> None:
    """End a host turn while the server holds the run's first request unanswered.

    Shows that ``on_turn_end`` returns before the request is even sent, and that the
    host's loop goes on running while the model call is pending.
    """
    received, events, cursor = w.script.received, len(w.sink.events), w.extractor.cursor
    w.script.hold_next()
    w.extractor.on_turn_end(turn)  # returns at once, and raises nothing
    # Nothing was awaited, so the run has not started: no request, no event.
    assert w.script.received == received
    assert w.extractor.in_flight == 1
    assert len(w.sink.events) == events
    # The host goes on while the server sits on the request.
    assert await asyncio.to_thread(w.script.arrived.wait, HOLD_LIMIT)
    assert w.extractor.in_flight == 1
    assert len(w.sink.events) == events
    assert w.extractor.cursor == cursor
    w.script.release.set()


async def settle(w: World) -> None:
    """Wait for the background work; a run that never ends would show here."""
    await w.extractor.drain(timeout=60)
    assert w.extractor.in_flight == 0


async def first_run(w: World) -> str:
    """A normal run, so that the cursor has a place to stay at; returns that place."""
    w.script.add("Nothing here is worth remembering.")
    w.extractor.on_turn_end(w.host.turn("turn one: I prefer tabs over spaces"))
    await settle(w)
    assert w.names() == ["extract.run"]
    assert w.extractor.cursor == w.host.messages[-1].uuid
    return w.extractor.cursor


def write_call(call_id: str, path: Path | str, name: str, body: str = "body") -> Message:
    use = ToolUseBlock(
        id=call_id,
        name="Write",
        input={"file_path": str(path), "content": MEMORY_TEXT.format(name=name, body=body)},
    )
    return Message(role="assistant", content=(use,))


def save_call(call_id: str, path: Path, name: str, body: str = "body") -> Message:
    """A Write of the memory, which memdir's tool indexes: a save complete in one turn."""
    return write_call(call_id, path, name, body)


def write_and_read(call_id: str, path: Path, name: str, body: str, read: Path) -> Message:
    """A Write with a Read beside it: not a turn of writes alone, so the run goes on."""
    (write,) = write_call(call_id, path, name, body).tool_uses
    look = ToolUseBlock(id=f"{call_id}_read", name="Read", input={"file_path": str(read)})
    return Message(role="assistant", content=(write, look))


def files_under(root: Path) -> dict[str, bytes]:
    """Every file below ``root`` and its bytes, by relative path."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() or p.is_symlink()
    }


def assert_no_partial_files(memory: Path) -> None:
    """Only whole memory files: no temporary file of an interrupted write is left."""
    if not memory.exists():
        return
    for path in memory.rglob("*"):
        assert not path.name.endswith(".tmp"), path
        if path.is_file() and path.suffix == ".md" and path.name != "MEMORY.md":
            assert path.read_text().startswith("---\n"), path


def text_of(request: RecordedRequest) -> str:
    return json.dumps(request.body["messages"], ensure_ascii=False)


# --- a failing run ------------------------------------------------------------------------


@dataclass(frozen=True)
class FailingCase:
    faults: tuple[Fault, ...]
    """What each attempt of the failing run is answered with."""
    retry: RetryPolicy = FAST
    timeout: float = 30.0


def _every_attempt(fault: Fault, retry: RetryPolicy = FAST) -> tuple[Fault, ...]:
    return (fault,) * (retry.max_retries + 1)


ONE_RETRY = RetryPolicy(max_retries=1, initial_delay=0.001, max_delay=0.01, jitter=0.0)

FAILING = {
    "timeout": FailingCase(
        _every_attempt(Fault(status=200, delay=LONG_DELAY), ONE_RETRY),
        retry=ONE_RETRY,
        timeout=SHORT_TIMEOUT,
    ),
    "429": FailingCase(_every_attempt(Fault(status=429))),
    # An hour asked for, capped by the policy's max_delay: the run does not wait it out.
    "429-retry-after-3600": FailingCase(
        _every_attempt(Fault(status=429, headers={"retry-after": "3600"}))
    ),
    "529-overloaded": FailingCase(_every_attempt(Fault(status=529))),
    "500": FailingCase(_every_attempt(Fault(status=500))),
    "malformed-json": FailingCase(_every_attempt(Fault(malformed=True))),
    "truncated-stream": FailingCase(_every_attempt(Fault(truncate_stream=True))),
    # Not worth repeating: fails on the first attempt.
    "400-invalid-request": FailingCase((Fault(status=400),)),
}


@pytest.mark.parametrize("case", list(FAILING.values()), ids=list(FAILING))
def test_a_failed_run_leaves_the_cursor_and_the_next_turn_recovers(
    tmp_path: Path, case: FailingCase
) -> None:
    async def main() -> None:
        async with world(tmp_path, retry=case.retry, timeout=case.timeout) as w:
            cursor = await first_run(w)
            before = len(w.server.requests)

            # The failing turn: the host is neither held up nor raised into.
            w.script.add(*case.faults)
            await report_and_hold(w, w.host.turn("turn two: the deploy key lives in vault"))
            await settle(w)
            assert w.script.left == 0
            assert len(w.server.requests) == before + len(case.faults)  # every attempt, no more
            assert w.extractor.cursor == cursor  # the failed run moved nothing
            assert w.names() == ["extract.run", "extract.error"]
            error = w.sink.named("extract.error")[0].fields
            assert error["error_type"] == "ModelError"
            assert isinstance(error["duration_ms"], int)
            assert files_under(w.host.memory) == {}

            # The server answers again: the next turn covers both turns.
            w.script.add(
                # memdir's Write indexes it: the run ends on that turn.
                write_call("toolu_w", w.host.memory / "deploy_key.md", "Deploy key", "In vault."),
            )
            w.extractor.on_turn_end(w.host.turn("turn three: release on Fridays"))
            await settle(w)
            assert w.names() == ["extract.run", "extract.error", "extract.run"]
            run = w.runs()[-1].fields
            assert run["message_count"] == 4  # turns two and three
            assert run["memories_saved"] == 1
            assert run["hit_max_turns"] is False
            prompt = text_of(w.run_requests()[-1])
            assert "turn two: the deploy key lives in vault" in prompt
            assert "the last ~4 messages" in prompt
            assert w.extractor.cursor == w.host.messages[-1].uuid
            assert (w.host.memory / "deploy_key.md").read_text().endswith("In vault.\n")
            assert_no_partial_files(w.host.memory)

    asyncio.run(main())


def test_a_run_that_fails_after_writing_keeps_whole_files_and_the_cursor(tmp_path: Path) -> None:
    """The fork's first answer saves a memory, then every attempt at its second request
    fails: the file written is whole, the run is an error, the cursor stays, and the next
    run is shown the file in its manifest, so it can update rather than repeat it."""

    async def main() -> None:
        async with world(tmp_path) as w:
            cursor = await first_run(w)
            note = w.host.memory / "ci_flakes.md"
            w.script.add(
                write_and_read(
                    "toolu_1",
                    note,
                    "CI flakes",
                    "Retry the e2e job once.",
                    w.host.project / "README.md",
                ),
                *_every_attempt(Fault(status=529)),
            )
            await report_and_hold(w, w.host.turn("turn two: the e2e job flakes, retry once"))
            await settle(w)
            assert w.names() == ["extract.run", "extract.error"]
            assert w.extractor.cursor == cursor
            written = MEMORY_TEXT.format(name="CI flakes", body="Retry the e2e job once.")
            stored, wanted = parse_memory_file(note.read_text()), parse_memory_file(written)
            assert stored.body == wanted.body
            assert (stored.description, stored.type) == (wanted.description, wanted.type)
            assert_no_partial_files(w.host.memory)

            w.script.add("Already saved.")
            w.extractor.on_turn_end(w.host.turn("turn three"))
            await settle(w)
            assert w.runs()[-1].fields["message_count"] == 4
            prompt = text_of(w.run_requests()[-1])  # the fork's prompt, or the standalone's
            assert "ci_flakes.md" in prompt
            assert "the last ~4 messages" in prompt
            assert w.extractor.cursor == w.host.messages[-1].uuid

    asyncio.run(main())


def test_a_standalone_run_recovers_what_a_failed_one_missed(tmp_path: Path) -> None:
    """Without the host's params memdir sends its own request; recovery is the same."""

    async def main() -> None:
        async with world(tmp_path, share_cache=False) as w:
            cursor = await first_run(w)
            w.script.add(*_every_attempt(Fault(status=529)))
            await report_and_hold(w, w.host.turn("turn two: the staging db is called kiwi"))
            await settle(w)
            assert w.extractor.cursor == cursor
            assert w.names() == ["extract.run", "extract.error"]

            w.script.add("Nothing new.")
            w.extractor.on_turn_end(w.host.turn("turn three: the prod db is called mango"))
            await settle(w)
            assert w.runs()[-1].fields["message_count"] == 4
            assert w.runs()[-1].fields["cache_shared"] is False
            sent = text_of(w.run_requests()[-1])
            assert "kiwi" in sent
            assert "mango" in sent
            assert "the last ~4 messages" in sent
            assert w.extractor.cursor == w.host.messages[-1].uuid

    asyncio.run(main())


def test_a_turn_stashed_during_a_failing_run_recovers_at_once(tmp_path: Path) -> None:
    """A turn that arrives while the failing run is in flight runs right after it fails,
    as the trailing run, and covers the failed run's messages too."""

    async def main() -> None:
        async with world(tmp_path) as w:
            cursor = await first_run(w)
            w.script.add(*_every_attempt(Fault(status=529)), "Nothing new.")
            w.script.hold_next()
            w.extractor.on_turn_end(w.host.turn("turn two"))
            assert await asyncio.to_thread(w.script.arrived.wait, HOLD_LIMIT)
            w.extractor.on_turn_end(w.host.turn("turn three"))
            assert w.extractor.cursor == cursor
            w.script.release.set()
            await settle(w)
            assert w.names() == [
                "extract.run",
                "extract.coalesced",
                "extract.error",
                "extract.run",
            ]
            assert w.runs()[-1].fields["message_count"] == 4
            assert w.extractor.cursor == w.host.messages[-1].uuid

    asyncio.run(main())


def test_a_sync_host_returns_while_the_server_holds_the_request(tmp_path: Path) -> None:
    """From synchronous code the run goes to a background thread; the turn ends at once."""
    script = Script()
    with FakeAnthropicServer(handler=script, min_cache_tokens=0) as server:
        model = AnthropicModel(
            "claude-test", api_key="test-key", base_url=server.base_url, retry=FAST
        )
        host = Host(tmp_path, model)
        sink = CollectingSink()
        extractor = MemoryExtractor(host.memory, model, sink=sink)
        try:
            script.add(*_every_attempt(Fault(status=529)))
            script.hold_next()
            extractor.on_turn_end(host.turn("turn one"))  # returns at once, raises nothing
            assert script.arrived.wait(HOLD_LIMIT)  # the request reached the server …
            assert server.requests == []  # … which has not answered it
            assert extractor.in_flight == 1
            assert sink.events == []
            script.release.set()
            extractor.drain_sync(timeout=60)
            assert extractor.in_flight == 0
            assert sink.names() == ["extract.error"]
            failed_at = extractor.cursor
            assert failed_at is None

            script.add("Nothing to save.")
            extractor.on_turn_end(host.turn("turn two"))
            extractor.drain_sync(timeout=60)
            assert sink.names() == ["extract.error", "extract.run"]
            assert sink.named("extract.run")[0].fields["message_count"] == 4
            assert extractor.cursor == host.messages[-1].uuid
        finally:
            script.release.set()
            extractor.drain_sync(timeout=60)
            extractor.close()  # closes the connections the runs opened on its thread
        server.assert_no_errors()


def test_a_sync_host_leaves_no_connection_open_after_close(tmp_path: Path) -> None:
    """The plain synchronous pattern — on_turn_end, drain_sync, close — with the default
    client: once the extractor is closed and dropped, no socket may be left to leak."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with FakeAnthropicServer(["Nothing to save."], min_cache_tokens=0) as server:
            model = AnthropicModel(
                "claude-test", api_key="test-key", base_url=server.base_url, retry=FAST
            )
            extractor = MemoryExtractor(tmp_path / "memory", model)
            turn = (Message.user("hello"), Message.assistant("hi"))
            extractor.on_turn_end(TurnContext(messages=turn, cwd=str(tmp_path)))
            extractor.drain_sync(timeout=60)
            extractor.close()
            del model, extractor
            gc.collect()
    leaked = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert leaked == []


def test_a_sync_host_reports_turns_after_close(tmp_path: Path) -> None:
    """close() then on_turn_end again starts a new background thread (as documented);
    its run must not fail on a connection left over from the old thread's loop."""
    no_retry = RetryPolicy(max_retries=0)
    with FakeAnthropicServer(["Nothing.", "Nothing."], min_cache_tokens=0) as server:
        model = AnthropicModel(
            "claude-test", api_key="test-key", base_url=server.base_url, retry=no_retry
        )
        sink = CollectingSink()
        extractor = MemoryExtractor(tmp_path / "memory", model, sink=sink)
        messages = [Message.user("hello"), Message.assistant("hi")]
        try:
            for text in ("first", "second"):
                messages += [Message.user(text), Message.assistant(f"ok {text}")]
                extractor.on_turn_end(TurnContext(messages=tuple(messages), cwd=str(tmp_path)))
                extractor.drain_sync(timeout=60)
                extractor.close()
            assert sink.names() == ["extract.run", "extract.run"]
            assert extractor.cursor == messages[-1].uuid
        finally:
            extractor.close()


def test_close_during_a_run_abandons_it_and_leaves_no_connection(tmp_path: Path) -> None:
    """close() while the run waits on the server: the run is stopped before the model's
    connections are closed, so nothing is left open, and a later turn still works."""
    script = Script()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with FakeAnthropicServer(handler=script, min_cache_tokens=0) as server:
            model = AnthropicModel(
                "claude-test", api_key="test-key", base_url=server.base_url, retry=FAST
            )
            host = Host(tmp_path, model)
            sink = CollectingSink()
            extractor = MemoryExtractor(host.memory, model, sink=sink)
            try:
                script.add("Nothing to save.")
                script.hold_next()
                extractor.on_turn_end(host.turn("turn one"))
                assert script.arrived.wait(HOLD_LIMIT)
                extractor.close()  # the run is in flight, its request unanswered
                assert extractor.in_flight == 0
                assert extractor.cursor is None
                script.release.set()

                script.add("Nothing to save.")
                extractor.on_turn_end(host.turn("turn two"))
                extractor.drain_sync(timeout=60)
                assert sink.names() == ["extract.run"]
                assert sink.named("extract.run")[0].fields["message_count"] == 4
            finally:
                script.release.set()
                extractor.close()
            del model, extractor
            gc.collect()
    leaked = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert leaked == []


# --- faults that pass within the retry budget ---------------------------------------------

TRANSIENT = {
    "timeout": Fault(status=200, delay=LONG_DELAY),
    "429": Fault(status=429),
    "429-retry-after": Fault(status=429, headers={"retry-after": "0"}),
    "529-overloaded": Fault(status=529),
    "500": Fault(status=500),
    "malformed-json": Fault(malformed=True),
    "truncated-stream": Fault(truncate_stream=True),
}


@pytest.mark.parametrize("fault", list(TRANSIENT.values()), ids=list(TRANSIENT))
def test_a_fault_that_passes_within_the_retry_budget_is_a_normal_run(
    tmp_path: Path, fault: Fault
) -> None:
    timeout = SHORT_TIMEOUT if fault.delay else 30.0

    async def main() -> None:
        async with world(tmp_path, timeout=timeout) as w:
            cursor = await first_run(w)
            readme = w.host.project / "README.md"
            w.script.add(
                fault,
                fault,  # two failures: still within two retries
                write_and_read("toolu_w", w.host.memory / "style.md", "Style", "Tabs.", readme),
                fault,  # a failure between the fork's turns too
                "Saved.",
            )
            await report_and_hold(w, w.host.turn("turn two: use tabs"))
            await settle(w)
            assert w.script.left == 0
            assert w.names() == ["extract.run", "extract.run"]
            run = w.runs()[-1].fields
            assert run["turn_count"] == 2
            assert run["message_count"] == 2
            assert run["memories_saved"] == 1
            assert w.extractor.cursor != cursor
            assert w.extractor.cursor == w.host.messages[-1].uuid
            assert_no_partial_files(w.host.memory)

    asyncio.run(main())


# --- a model that calls tools wrongly -----------------------------------------------------


@dataclass(frozen=True)
class BadCall:
    name: str
    input: Callable[[Host], dict[str, Any]]
    denied: str | None
    """The gate's reason, or None when the gate lets it through and the tool refuses."""


BAD_CALLS = {
    "write-without-file-path": BadCall(
        "Write", lambda h: {"content": MEMORY_TEXT.format(name="x", body="x")}, "outside_memory_dir"
    ),
    "write-file-path-not-a-string": BadCall(
        "Write", lambda h: {"file_path": 42, "content": "x"}, "outside_memory_dir"
    ),
    "write-content-not-a-string": BadCall(
        "Write", lambda h: {"file_path": str(h.memory / "a.md"), "content": ["x"]}, None
    ),
    "write-content-missing": BadCall(
        "Write", lambda h: {"file_path": str(h.memory / "a.md")}, None
    ),
    "write-absolute-path-outside": BadCall(
        "Write",
        lambda h: {"file_path": str(h.root / "outside.md"), "content": "x"},
        "outside_memory_dir",
    ),
    "write-dotdot-out-of-memory": BadCall(
        "Write",
        lambda h: {"file_path": str(h.memory / ".." / "escaped.md"), "content": "x"},
        "outside_memory_dir",
    ),
    # A relative path starts in the memory directory (``notes.md`` is a memory there):
    # climbing out of it is refused like any other path outside.
    "write-relative-path-climbing-out": BadCall(
        "Write", lambda h: {"file_path": "../notes.md", "content": "x"}, "outside_memory_dir"
    ),
    "edit-outside": BadCall(
        "Edit",
        lambda h: {
            "file_path": str(h.project / "README.md"),
            "old_string": "project",
            "new_string": "memory",
        },
        "outside_memory_dir",
    ),
    "edit-without-strings": BadCall("Edit", lambda h: {"file_path": str(h.memory / "a.md")}, None),
    "bash-that-writes": BadCall(
        "Bash", lambda h: {"command": f"echo x > {h.root / 'outside.md'}"}, "not_read_only"
    ),
    "unknown-tool": BadCall("Deploy", lambda h: {"target": "production"}, "tool_not_allowed"),
}


@pytest.mark.parametrize("bad", list(BAD_CALLS.values()), ids=list(BAD_CALLS))
def test_invalid_tool_input_writes_nothing_and_the_run_goes_on(
    tmp_path: Path, bad: BadCall
) -> None:
    async def main() -> None:
        async with world(tmp_path) as w:
            cursor = await first_run(w)
            outside = {k: v for k, v in files_under(tmp_path).items() if not k.startswith("memory")}
            call = ToolUseBlock(id="toolu_bad", name=bad.name, input=bad.input(w.host))
            w.script.add(Message(role="assistant", content=(call,)), "I could not save it.")
            await report_and_hold(w, w.host.turn("turn two: remember this"))
            await settle(w)

            # The run ended normally: reported, and the cursor moved past the turn.
            assert w.names() == ["extract.run", "extract.run"]
            run = w.runs()[-1].fields
            assert (run["turn_count"], run["files_written"], run["memories_saved"]) == (2, 0, 0)
            assert run["hit_max_turns"] is False
            assert w.extractor.cursor != cursor
            assert w.extractor.cursor == w.host.messages[-1].uuid

            # The model was told the call failed.
            last = w.server.requests[-1].body["messages"][-1]["content"]
            (result,) = [b for b in last if b["type"] == "tool_result"]
            assert result["tool_use_id"] == "toolu_bad"
            assert result["is_error"] is True
            denials = [e.fields for e in w.sink.named("permission.denied")]
            if bad.denied is None:
                assert denials == []
            else:
                assert denials == [{"tool_name": bad.name, "reason": bad.denied}]

            # Nothing written anywhere: not outside the memory, not inside it.
            now = {k: v for k, v in files_under(tmp_path).items() if not k.startswith("memory")}
            assert now == outside
            assert files_under(w.host.memory) == {}

            # The next turn works as usual.
            w.script.add(save_call("toolu_ok", w.host.memory / "note.md", "Note", "Remembered."))
            w.extractor.on_turn_end(w.host.turn("turn three"))
            await settle(w)
            assert w.script.left == 0  # the write ended the run
            assert w.runs()[-1].fields["message_count"] == 2
            assert w.runs()[-1].fields["memories_saved"] == 1
            assert w.extractor.cursor == w.host.messages[-1].uuid
            assert_no_partial_files(w.host.memory)

    asyncio.run(main())


# --- a model that never stops calling tools -----------------------------------------------


def test_a_model_that_never_stops_is_capped_at_max_turns(tmp_path: Path) -> None:
    max_turns = 3

    async def main() -> None:
        async with world(tmp_path, max_turns=max_turns) as w:
            cursor = await first_run(w)
            before = len(w.server.requests)
            # Every answer is more tool calls, a fresh memory file each time.
            readme = w.host.project / "README.md"
            w.script.forever = lambda n: write_and_read(
                f"toolu_{n}", w.host.memory / f"note_{n}.md", f"Note {n}", "body", readme
            )
            await report_and_hold(w, w.host.turn("turn two: keep going"))
            await settle(w)

            assert len(w.server.requests) == before + max_turns
            assert w.names() == ["extract.run", "extract.run"]
            run = w.runs()[-1].fields
            assert run["hit_max_turns"] is True
            assert run["turn_count"] == max_turns
            assert run["files_written"] == max_turns  # the last answer's call still ran
            # A capped run returned normally: the cursor moves.
            assert w.extractor.cursor != cursor
            assert w.extractor.cursor == w.host.messages[-1].uuid
            notes = [p for p in files_under(w.host.memory) if p.startswith("note_")]
            assert len(notes) == max_turns
            # Each indexed by memdir's Write as it was saved.
            index = (w.host.memory / "MEMORY.md").read_text()
            assert all(f"]({note})" in index for note in notes)
            assert_no_partial_files(w.host.memory)

            # The model behaves again: the next run covers only the new turn.
            w.script.forever = None
            w.script.add("Nothing new.")
            w.extractor.on_turn_end(w.host.turn("turn three"))
            await settle(w)
            run = w.runs()[-1].fields
            assert (run["hit_max_turns"], run["turn_count"], run["message_count"]) == (False, 1, 2)
            assert w.extractor.cursor == w.host.messages[-1].uuid

    asyncio.run(main())
