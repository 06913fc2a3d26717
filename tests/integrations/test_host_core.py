"""The host core on its own: client settings read and rebuilt, the fork builders' refusals,
bounded per-conversation state, and the work it keeps off the host's loop."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
from openai import AsyncOpenAI

from memdir.integrations import _host
from memdir.integrations._host import (
    ClientSettings,
    Endpoint,
    HostCore,
    SentRequest,
    Sessions,
    _core,
    fork_params,
    has_cache_breakpoint,
)
from memdir.testing import FunctionModel


def test_an_openai_clients_settings_are_read_and_rebuilt() -> None:
    async def main() -> None:
        async with AsyncOpenAI(
            base_url="http://127.0.0.1:9/v1",
            api_key="k",
            organization="org-acme",
            project="proj_x",
            default_headers={"X-Gateway-Key": "g"},
        ) as host:
            settings = ClientSettings.of(host.with_options(max_retries=5))
            assert settings is not None
            assert (settings.organization, settings.project) == ("org-acme", "proj_x")
            assert ("X-Gateway-Key", "g") in settings.default_headers
            assert settings.http_client is None  # the SDK's own pool: nothing to copy
            own = await asyncio.to_thread(settings.new_client)
            try:
                assert own is not host
                assert own.organization == "org-acme"
                assert own.project == "proj_x"
                assert own.max_retries == 0  # memdir retries on its own
                again = ClientSettings.of(own)
                assert again is not None
                assert again.default_headers == settings.default_headers
            finally:
                await own.close()

    asyncio.run(main())
    assert ClientSettings.of(object()) is None


def test_a_request_that_forces_a_tool_or_caches_nothing_is_not_forked() -> None:
    model = FunctionModel(lambda request: "x")
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": []}
    forced = SentRequest(wire="chat", body={**body, "tool_choice": "required"}, replaces=1)
    assert fork_params(model, forced) == (None, forced_reason(forced))
    params, reason = fork_params(model, SentRequest(wire="chat", body=body, replaces=1))
    assert reason is None
    assert params is not None
    assert params.wire_replaces == 1

    plain = {"model": "c", "system": "s", "messages": [{"role": "user", "content": "hi"}]}
    assert not has_cache_breakpoint(plain)
    params, reason = fork_params(model, SentRequest(wire="anthropic", body=plain, replaces=1))
    assert params is None
    assert reason is not None
    # An answer that reported cache use says a breakpoint was there after all.
    cached = SentRequest(wire="anthropic", body=plain, replaces=1, cached=True)
    assert fork_params(model, cached)[0] is not None
    marked = {
        **plain,
        "messages": [
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t",
                        "content": [
                            {"type": "text", "text": "r", "cache_control": {"type": "ephemeral"}}
                        ],
                    }
                ],
            }
        ],
        "betas": ["b1"],
    }
    assert has_cache_breakpoint(marked)  # inside a tool result counts too
    params, _ = fork_params(model, SentRequest(wire="anthropic", body=marked, replaces=1))
    assert params is not None
    assert params.params["extra_headers"] == {"anthropic-beta": "b1"}
    assert "betas" not in params.params


def forced_reason(sent: SentRequest) -> str:
    return (
        f"the last request forces tool_choice={sent.body['tool_choice']!r}: the memory "
        "agent must choose its own tools"
    )


def test_sessions_let_the_least_recently_used_go() -> None:
    sessions: Sessions[list[int]] = Sessions(list, limit=2)
    a = sessions.get("a")
    sessions.get("b")
    assert sessions.get("a") is a
    sessions.get("c")  # "b" is the least recently used
    assert len(sessions) == 2
    assert sessions.peek("b") is None
    assert sessions.peek("a") is a


def test_a_failed_report_is_an_error_event_and_never_raises(tmp_path: Path) -> None:
    from memdir.telemetry import CollectingSink

    sink = CollectingSink()
    core = HostCore(tmp_path / "memory", "offline", sink=sink)

    def broken() -> None:
        raise ValueError("no conversation here\nsecond line")

    core.report(broken)
    (event,) = sink.named("extract.error")
    assert event.fields["error_type"] == "ValueError"
    assert event.fields["reason"] == "no conversation here"


def test_the_host_model_and_the_scanner_are_built_off_the_callers_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built_on: list[str] = []
    scanned_on: list[str] = []
    scanned = threading.Event()
    monkeypatch.setattr(_core, "warm_ssl_contexts", lambda: scanned_on.append("ssl"))
    real_new_client = ClientSettings.new_client

    def new_client(self: ClientSettings) -> object:
        built_on.append(threading.current_thread().name)
        return real_new_client(self)

    def scan(text: str) -> bool:
        scanned_on.append(threading.current_thread().name)
        scanned.set()
        return False

    monkeypatch.setattr(ClientSettings, "new_client", new_client)
    monkeypatch.setattr(_core, "contains_secret", scan)
    monkeypatch.setattr(_core, "_warmed", threading.Event())
    core = HostCore(tmp_path / "memory", "offline")
    assert scanned.wait(timeout=30)
    settings = ClientSettings(provider="openai", api_key="k", base_url="http://127.0.0.1:9/v1")
    model = core.host_model(Endpoint(settings, "gpt-4.1-mini"))
    assert core.host_model(Endpoint(settings, "gpt-4.1-mini")) is model  # one per endpoint
    built = asyncio.run(model.model())
    assert built.name == "openai:gpt-4.1-mini"
    here = threading.current_thread().name
    assert built_on
    assert here not in built_on
    assert scanned_on == ["ssl", "memdir-warm-up"]
    assert _host.default_backend is not None


def test_memdirs_clients_share_one_ssl_context_made_ahead_of_time() -> None:
    """Loading the CA bundle takes 10-20 ms, much of it holding the GIL: memdir makes the
    SSL context once per process (ahead of the first turn), and each client of its own
    sends on it."""
    from memdir.integrations._host._client import sdk_ssl_context

    settings = ClientSettings(provider="openai", api_key="k", base_url="http://127.0.0.1:9/v1")

    async def main() -> None:
        first, second = settings.new_client(), settings.new_client()
        try:
            for client in (first, second):
                pool = client._client._transport._pool
                assert pool._ssl_context is sdk_ssl_context("openai")
        finally:
            await first.close()
            await second.close()

    asyncio.run(main())


def test_memory_that_cannot_be_read_is_not_shown_and_fails_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def unreadable(*args: object, **kwargs: object) -> str:
        raise PermissionError("MEMORY.md")

    monkeypatch.setattr(_core, "memory_reminder", unreadable)
    core = HostCore(tmp_path / "memory", "offline")
    assert core.load_memory("c1") is None
    assert asyncio.run(core.aload_memory("c1")) is None


def test_memory_saved_during_a_conversation_is_noticed_once(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    memory.mkdir()
    index = memory / "MEMORY.md"
    index.write_text("- [Polars](polars.md) — dataframes\n", encoding="utf-8")
    core = HostCore(memory, "offline")

    first = core.load_memory("c1")
    assert first is not None
    assert first.notice is None
    # Nothing changed: the same loaded memory, no notice, request after request.
    assert core.load_memory("c1") is first
    assert asyncio.run(core.aload_memory("c1")) is first

    (memory / "deploys.md").write_text("---\nname: deploys\n---\n\nTuesdays.\n", "utf-8")
    index.write_text("- [Polars](polars.md) — dataframes\n- [Deploys](deploys.md) — days\n")
    noticed = asyncio.run(core.aload_memory("c1"))
    assert noticed is not None
    # Same instructions and index (the cached prefix), and a notice that the copy is stale.
    assert (noticed.instructions, noticed.index) == (first.instructions, first.index)
    assert "Deploys" not in noticed.index
    assert noticed.notice is not None
    assert "saved deploys.md; updated MEMORY.md." in noticed.notice
    assert f"Read {index} again" in noticed.notice
    # Once per change; another conversation loads the new index and has nothing to hear.
    later = core.load_memory("c1")
    assert later is not None
    assert later.notice is None
    other = core.load_memory("c2")
    assert other is not None
    assert "Deploys" in other.index
    assert other.notice is None
