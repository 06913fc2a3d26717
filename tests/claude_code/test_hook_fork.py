"""The Stop hook forks from the request Claude Code recorded, and reads Claude Code's cache."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from memdir.messages import Message, ToolUseBlock
from memdir.testing import FakeAnthropicServer, RecordedRequest, Reply
from tests.claude_code._cli import ClaudeCli, is_agent_turn, side_reply
from tests.claude_code.test_hook_cli import hook_settings, wait_for_workers

PROMPT_HEAD = "# Memory update"  # how memdir's extraction prompt begins
BILLING = "x-anthropic-billing-header:"
ANSWER = "Noted, Ana. The ingest job keeps rows by partition."


def text_of(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(str(b.get("text", "")) for b in content or () if b.get("type") == "text")


def is_memdirs(body: Mapping[str, Any]) -> bool:
    return any(
        m.get("role") == "user" and text_of(m).startswith(PROMPT_HEAD)
        for m in body.get("messages") or ()
    )


def answers(module: Path) -> Callable[[dict[str, Any]], Reply]:
    """memdir's requests: nothing to save. Claude Code's turn: read ``module``, answer."""

    def answer(body: dict[str, Any]) -> Reply:
        if is_memdirs(body):
            return "Nothing new to save."
        if not is_agent_turn(body):
            return side_reply(body)
        last = body["messages"][-1]
        content = last.get("content")
        if isinstance(content, list) and any(b.get("type") == "tool_result" for b in content):
            return ANSWER
        calls = sum(
            1
            for m in body["messages"]
            if isinstance(m.get("content"), list)
            for b in m["content"]
            if b.get("type") == "tool_use"
        )
        read = ToolUseBlock(
            id=f"toolu_read_{calls + 1}", name="Read", input={"file_path": str(module)}
        )
        return Message(role="assistant", content=(read,))

    return answer


QUESTIONS = (
    "I'm Ana, I lead the data platform team. What does ingest.py do?",
    "Always use polars, never pandas. Does ingest.py need changing for that?",
    "We freeze merges on 2026-12-18. Anything in ingest.py to finish first?",
)


def fork_run(claude_cli: ClaudeCli, *, billing_counts: bool, turns: int = 1) -> dict[str, Any]:
    """A real session with the hook, each turn of which reads a 150-line module, then
    answers: per turn, the request Claude Code answered last and memdir's fork of it;
    and the hook's log."""
    module = claude_cli.project / "ingest.py"
    module.write_text(
        "".join(
            f"def keep_{i}(rows):\n    return [r for r in rows if r.partition == {i}]\n"
            for i in range(75)
        )
    )
    ignored = () if billing_counts else (BILLING,)
    settings = hook_settings("--model", "anthropic:claude-sonnet-5-5", "--mode", "fork")
    hosts: list[RecordedRequest] = []
    forks: list[RecordedRequest] = []
    session: str | None = None
    with FakeAnthropicServer(handler=answers(module), ignored_system_prefixes=ignored) as server:
        for question in QUESTIONS[:turns]:
            seen = len(server.requests)
            run = claude_cli.run(question, server=server, settings=settings, resume=session)
            session = run.session_id
            assert run.transcript is not None
            wait_for_workers(str(run.transcript))
            new = server.requests[seen:]
            host = [r for r in new if is_agent_turn(r.body) and not is_memdirs(r.body)]
            assert len(host) == 2  # the Read, then the answer
            hosts.append(host[-1])
            forks += [r for r in new if is_memdirs(r.body)]
        server.assert_no_errors()
    assert run.memory_dir is not None
    log = (run.memory_dir / ".memdir" / "hook.log").read_text()
    assert len(forks) == turns, log
    return {"hosts": hosts, "forks": forks, "log": log}


def read_share(*requests: RecordedRequest) -> float:
    read = total = 0
    for request in requests:
        usage = request.usage
        assert usage is not None
        read += int(usage["cache_read_input_tokens"])
        total += int(usage["cache_read_input_tokens"]) + int(usage["input_tokens"])
        total += int(usage["cache_creation_input_tokens"])
    return read / total


def unmarked(message: Mapping[str, Any]) -> Any:
    """A wire message without markers, a string content as the one text block it is."""
    content = message["content"]
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    content = [{k: v for k, v in b.items() if k != "cache_control"} for b in content]
    return {**message, "content": content}


@pytest.mark.parametrize("billing_counts", [False, True], ids=["billing-ignored", "billing-counts"])
def test_the_fork_sends_what_claude_code_sent(claude_cli: ClaudeCli, billing_counts: bool) -> None:
    seen = fork_run(claude_cli, billing_counts=billing_counts)
    (host_request,), (fork_request,) = seen["hosts"], seen["forks"]
    host, fork = host_request.body, fork_request.body
    assert "host request: Claude Code's recorded request" in seen["log"]
    assert "(fork)" in seen["log"]
    # The same model, tools and parameters; the system prompt without the unrecorded block.
    assert fork["model"] == host["model"]
    assert fork["tools"] == host["tools"]
    for key in ("max_tokens", "thinking", "context_management", "output_config"):
        assert fork.get(key) == host.get(key), key
    assert host["system"][0]["text"].startswith(BILLING)
    assert [b["text"] for b in fork["system"]] == [b["text"] for b in host["system"][1:]]
    assert fork_request.headers.get("anthropic-beta") == host_request.headers.get("anthropic-beta")
    # The host's messages as sent, then its answer, then memdir's prompt.
    sent = [unmarked(m) for m in host["messages"]]
    assert [unmarked(m) for m in fork["messages"][: len(sent)]] == sent
    assert fork["messages"][len(sent)]["role"] == "assistant"
    assert text_of(fork["messages"][len(sent)]) == ANSWER
    assert text_of(fork["messages"][-1]).startswith(PROMPT_HEAD)


def test_the_fork_reads_claude_codes_cache_when_the_billing_block_is_ignored(
    claude_cli: ClaudeCli,
) -> None:
    forks = fork_run(claude_cli, billing_counts=False, turns=3)["forks"]
    # Each fork reads everything Claude Code cached and writes its answer and memdir's
    # prompt (about 1,500 tokens, whatever the session's length): 89.9% on the first
    # turn of this small session, more on each turn after it.
    shares = [read_share(f) for f in forks]
    assert shares == sorted(shares)
    assert shares[0] >= 0.85
    assert read_share(*forks) >= 0.9


def test_the_fork_reads_next_to_nothing_when_the_billing_block_counts(
    claude_cli: ClaudeCli,
) -> None:
    # The block is the system prompt's first: without it nothing after the tools matches.
    (fork,) = fork_run(claude_cli, billing_counts=True)["forks"]
    assert read_share(fork) < 0.1


@pytest.mark.parametrize("billing_counts", [False, True], ids=["billing-ignored", "billing-counts"])
def test_the_check_against_the_real_api_tells_both_cases_apart(
    claude_cli: ClaudeCli, billing_counts: bool
) -> None:
    script = Path(__file__).resolve().parents[2] / "scripts" / "check_claude_code_cache.py"
    ignored = () if billing_counts else (BILLING,)
    with FakeAnthropicServer(
        handler=lambda body: "OK" if is_agent_turn(body) else side_reply(body),
        ignored_system_prefixes=ignored,
    ) as server:
        done = subprocess.run(
            [sys.executable, str(script), "--claude", str(claude_cli.binary)],
            env=claude_cli.env(base_url=server.base_url),
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        server.assert_no_errors()
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    if billing_counts:
        assert result["read_share"] < 0.1
        assert "counts" in result["verdict"]
    else:
        assert result["read_share"] > 0.8
        assert "left out" in result["verdict"]
