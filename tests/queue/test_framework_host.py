"""A framework host on the queue backend: the OpenAI Agents hooks hand their turns to a
``QueueExtractor`` (the host core takes any ``MemoryBackend``), a worker saves from them."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("procrastinate", reason="the [postgres] extra is not installed")
pytest.importorskip("psycopg", reason="the [postgres] extra is not installed")
pytest.importorskip("agents", reason="the [openai-agents] extra is not installed")

import agents
from agents import Agent, OpenAIChatCompletionsModel, Runner, SQLiteSession
from openai import AsyncOpenAI

from memdir.extract import MemoryBackend
from memdir.integrations.openai_agents import MemdirRunHooks
from memdir.queue import QueueExtractor, QueueWorker, WorkerSettings, export_dir
from memdir.testing import FakeOpenAIServer
from tests.queue._helpers import CONFIG, memory_name, saving_model

MODEL = "gpt-4.1-mini"


def test_an_openai_agents_host_on_the_queue_backend(pg_dsn: str, tmp_path: Path) -> None:
    agents.set_tracing_disabled(True)
    backend = QueueExtractor(pg_dsn, "dir-a")
    assert isinstance(backend, MemoryBackend)
    session = SQLiteSession("ana")
    hooks = MemdirRunHooks(tmp_path / "memory", session=session, backend=backend)
    with FakeOpenAIServer(handler=lambda body: "Noted.", model=MODEL) as server:

        async def main() -> None:
            async with AsyncOpenAI(base_url=server.base_url, api_key="test") as client:
                agent: Agent[Any] = Agent(
                    name="support",
                    instructions="Answer briefly.",
                    model=OpenAIChatCompletionsModel(MODEL, client),
                )
                for k in (1, 2):
                    await Runner.run(agent, f"turn ana {k}", session=session, hooks=hooks)
            await hooks.drain()

        asyncio.run(main())
        server.assert_no_errors()
    backend.close()

    model = saving_model()
    worker = QueueWorker(WorkerSettings(dsn=pg_dsn, models=lambda _n: model, config=CONFIG))
    run = asyncio.run(worker.extract("dir-a"))
    assert run.committed
    # The conversation is named by the session, and every message of it is read once.
    assert [(o.outcome, o.from_seq, o.to_seq) for o in run.sessions] == [("ran", 1, 4)]
    assert export_dir(pg_dsn, "dir-a", tmp_path / "mirror") == 1
    assert (tmp_path / "mirror" / memory_name("ana", 2)).exists()
