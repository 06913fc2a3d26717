"""The hook's default for a logged-in user: the memory agent runs inside the user's own
Claude Code (the real CLI, driven by the Agent SDK), which resumes the session as a fork.

The "user" is logged in as Claude Code users are: OAuth tokens in the CLI's
``<config>/.credentials.json``, which the CLI sends as ``Authorization: Bearer`` even to
``ANTHROPIC_BASE_URL``. Neither the CLI nor the hook has an API key in its environment.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import memdir
from memdir._hook_entry import FORK_ENV, HookOptions, choose_backend, find_claude_code
from memdir.messages import Message, ToolUseBlock, model_visible
from memdir.provenance import history
from memdir.state import StateFile
from memdir.store import MemoryDir
from memdir.testing import FakeAnthropicServer, RecordedRequest, Reply
from memdir.transcripts import load_transcript
from tests.claude_code._cli import ClaudeCli, CliRun, memory_dir_in, side_reply
from tests.claude_code.test_hook_cli import hook_settings, wait_for_workers

HOOK = (sys.executable, "-m", "memdir", "hook", "claude-code")
SRC = str(Path(memdir.__file__).resolve().parents[1])
TOKEN = "sk-ant-oat01-memdir-test"
# memdir's extraction prompt starts with this heading (memdir.extract._prompts).
PROMPT_MARK = "# Memory update"
MEMORY_TEXT = (
    "---\nname: user-role\ndescription: Ana leads the data platform team\n"
    "metadata:\n  type: user\n---\n\nAna leads the data platform team.\n"
)
NO_KEYS = {
    "ANTHROPIC_API_KEY": "",
    "ANTHROPIC_AUTH_TOKEN": "",
    "MEMDIR_ANTHROPIC_API_KEY": "",
    "MEMDIR_MODEL": "",
}


def log_in(cli: ClaudeCli) -> None:
    """A subscription login as Claude Code keeps it: OAuth tokens in its config folder."""
    config = cli.home / ".claude"
    config.mkdir(parents=True, exist_ok=True)
    expires = int((time.time() + 3600) * 1000)
    oauth = {
        "accessToken": TOKEN,
        "refreshToken": "sk-ant-ort01-memdir-test",
        "expiresAt": expires,
        "scopes": ["user:inference", "user:profile"],
        "subscriptionType": "max",
    }
    (config / ".credentials.json").write_text(json.dumps({"claudeAiOauth": oauth}))


def _texts(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return "\n".join(
        str(b.get("text", "")) for b in content or () if isinstance(b, dict) and "text" in b
    )


def is_memory_request(body: dict[str, Any]) -> bool:
    """Whether a request is the memory run's: memdir's prompt is one of its user messages."""
    return any(
        m.get("role") == "user" and _texts(m).startswith(PROMPT_MARK)
        for m in body.get("messages") or ()
    )


def _has_tool_result(body: dict[str, Any]) -> bool:
    return any(
        isinstance(b, dict) and b.get("type") == "tool_result"
        for m in body.get("messages") or ()
        if isinstance(m.get("content"), list)
        for b in m["content"]
    )


@dataclasses.dataclass
class Session:
    """One logged-in ``claude -p`` session with memdir's hook, and its memory run."""

    run: CliRun
    memory: Path
    outside: Path
    requests: list[RecordedRequest]
    transcript_at_fork: bytes
    transcript_after: bytes
    log: str


@pytest.fixture(scope="module")
def session(claude_binary: tuple[Path, str], tmp_path_factory: pytest.TempPathFactory) -> Session:
    cli = ClaudeCli(*claude_binary, tmp_path_factory.mktemp("logged-in"))
    log_in(cli)
    outside = cli.project / "outside.txt"
    cli_done = threading.Event()
    seen: dict[str, bytes] = {}

    def answer(body: dict[str, Any]) -> Reply:
        if not body.get("tools"):
            return side_reply(body)
        if not is_memory_request(body):
            return "Noted, Ana."
        if _has_tool_result(body):
            return "Saved."
        # The first request of the memory run: the session has ended; keep its
        # transcript as it is now, to compare once the run is over.
        assert cli_done.wait(120)
        transcript = next(cli.home.glob(".claude/projects/*/*.jsonl"))
        seen["transcript"] = transcript.read_bytes()
        folder = memory_dir_in(body, Path("/"))
        assert folder is not None
        calls = (
            ToolUseBlock(
                id="toolu_mem_1",
                name="Write",
                input={"file_path": str(folder / "user_role.md"), "content": MEMORY_TEXT},
            ),
            ToolUseBlock(
                id="toolu_out_1",
                name="Write",
                input={"file_path": str(outside), "content": "not a memory"},
            ),
            ToolUseBlock(id="toolu_ls_1", name="Bash", input={"command": f"ls -a {folder}"}),
            ToolUseBlock(
                id="toolu_rm_1", name="Bash", input={"command": f"rm -f {folder}/MEMORY.md"}
            ),
        )
        return Message(role="assistant", content=calls)

    with FakeAnthropicServer(handler=answer) as server:
        run = cli.run(
            "I'm Ana, I lead the data platform team.",
            # Rules that let Claude Code itself allow the refused calls without asking:
            # only memdir's own check before each tool call can stop them.
            settings={
                **hook_settings(),
                "permissions": {"allow": ["Bash(rm:*)", "Write", "Edit"]},
            },
            env_extra={**NO_KEYS, "PYTHONPATH": SRC},
            server=server,
        )
        cli_done.set()
        assert run.transcript is not None
        wait_for_workers(str(run.transcript))
        server.assert_no_errors()
        requests = list(server.requests)
    assert run.memory_dir is not None
    log_path = run.memory_dir / ".memdir" / "hook.log"
    return Session(
        run=run,
        memory=run.memory_dir,
        outside=outside,
        requests=requests,
        transcript_at_fork=seen.get("transcript", b""),
        transcript_after=run.transcript.read_bytes(),
        log=log_path.read_text() if log_path.exists() else "",
    )


def test_a_logged_in_user_gets_memories_written_by_the_model(session: Session) -> None:
    saved = (session.memory / "user_role.md").read_text()
    assert "Ana leads the data platform team." in saved
    assert "claude-code" in session.log, session.log
    assert "1 memory(ies) saved, 0 failed" in session.log, session.log
    state = StateFile(session.memory).get(session.run.session_id)
    assert state.cursor is not None
    assert {h.filename for h in MemoryDir(session.memory).scan()} == {"user_role.md"}
    # The model wrote the file alone, as memdir's prompt asks; memdir wrote its line.
    index = (session.memory / "MEMORY.md").read_text()
    assert index == "- [user-role](user_role.md) — Ana leads the data platform team\n"


def test_a_memory_claude_code_saved_names_the_session_and_messages_it_came_from(
    session: Session,
) -> None:
    assert session.run.transcript is not None
    said = load_transcript(session.run.transcript).messages
    (created,) = history(session.memory, "user_role").changes
    assert (created.what, created.by) == ("created", "claude-code")
    assert created.session == session.run.session_id
    assert created.run
    assert created.messages == tuple(m.uuid for m in model_visible(said))


def test_memdirs_prompt_arrives_through_claude_code_with_the_users_login(
    session: Session,
) -> None:
    memory_requests = [r for r in session.requests if is_memory_request(r.body)]
    assert len(memory_requests) == 2  # the Writes, then the answer to their results
    first = memory_requests[0].body
    # The session's own conversation comes first (a fork), memdir's prompt after it.
    texts = [_texts(m) for m in first["messages"]]
    assert any("I'm Ana, I lead the data platform team." in t for t in texts)
    prompt = next(t for t in texts if t.startswith(PROMPT_MARK))
    assert str(session.memory) in prompt
    assert "memdir writes each memory's pointer line" in " ".join(prompt.split())
    for request in session.requests:
        assert request.headers.get("authorization") == f"Bearer {TOKEN}"
        assert not request.headers.get("x-api-key")
    # The session's model, so the fork can read the session's cache.
    assert first["model"] == session.requests[0].body["model"]


def test_the_fork_reads_everything_the_session_cached(session: Session) -> None:
    host = next(r for r in session.requests if r.body.get("tools"))
    fork = next(r for r in session.requests if is_memory_request(r.body))
    assert host.usage is not None
    assert fork.usage is not None
    cached = host.usage["cache_creation_input_tokens"] + host.usage["cache_read_input_tokens"]
    assert cached > 0
    # The same model, system prompt, tools and thinking parameters: the whole prefix the
    # session wrote is read back; only the answer and memdir's prompt are new.
    assert fork.usage["cache_read_input_tokens"] == cached
    assert fork.body["thinking"] == host.body["thinking"]
    assert fork.body["tools"] == host.body["tools"]


def test_the_users_transcript_is_left_untouched(session: Session) -> None:
    assert session.transcript_at_fork  # the memory run did start
    assert session.transcript_after == session.transcript_at_fork
    # The fork saved no session of its own beside the user's.
    assert [p.name for p in session.run.transcript.parent.glob("*.jsonl")] == [  # type: ignore[union-attr]
        f"{session.run.session_id}.jsonl"
    ]


def test_the_forks_own_stop_starts_no_extraction(session: Session) -> None:
    # The fork's CLI runs the user's Stop hook too; it sees the marker and does nothing.
    assert session.log.count("started for") == 1, session.log
    assert sum(is_memory_request(r.body) for r in session.requests) == 2


def test_a_call_outside_what_the_gate_allows_is_refused(session: Session) -> None:
    assert not session.outside.exists()
    last = next(r for r in reversed(session.requests) if is_memory_request(r.body)).body
    results = {
        b["tool_use_id"]: b
        for m in last["messages"]
        if isinstance(m.get("content"), list)
        for b in m["content"]
        if isinstance(b, dict) and b.get("type") == "tool_result"
    }
    # A read-only command runs; one that changes anything is refused, as for memdir's
    # own agent.
    assert not results["toolu_ls_1"].get("is_error")
    assert results["toolu_rm_1"].get("is_error") is True
    assert "limited to read-only commands" in json.dumps(results["toolu_rm_1"])
    refused = results["toolu_out_1"]
    assert refused.get("is_error") is True
    assert "only allowed for files inside the memory directory" in json.dumps(refused)
    assert not results["toolu_mem_1"].get("is_error")


def test_without_a_key_or_a_usable_claude_code_the_user_is_told_and_nothing_saved(
    tmp_path: Path,
) -> None:
    # An Agent SDK without its CLI, and no `claude` on PATH: no model can run.
    stub = tmp_path / "stub"
    (stub / "claude_agent_sdk").mkdir(parents=True)
    (stub / "claude_agent_sdk" / "__init__.py").write_text("")
    bare_path = tmp_path / "bin"
    bare_path.mkdir()
    memory = tmp_path / "memory"
    session_file = tmp_path / "s.jsonl"
    session_file.write_text("")
    env = {
        "PATH": str(bare_path),
        "HOME": str(tmp_path),
        "PYTHONPATH": os.pathsep.join([str(stub), SRC]),
    }
    payload = {
        "session_id": "s",
        "transcript_path": str(session_file),
        "cwd": str(tmp_path),
        "hook_event_name": "Stop",
    }
    done = subprocess.run(
        [*HOOK, "--memory-dir", str(memory), "--timeout", "60"],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 1, done.stdout
    message = json.loads(lines[0])["systemMessage"]
    assert "saved no memories" in message
    assert "no Claude Code executable found" in message
    log = (memory / ".memdir" / "hook.log").read_text()
    assert "extraction not started: no API key in the environment" in log, log
    assert MemoryDir(memory).scan() == []


@dataclasses.dataclass(frozen=True)
class Choice:
    env: dict[str, str]
    model: str | None
    kind: str


@pytest.mark.parametrize(
    "case",
    [
        Choice({"MEMDIR_MODEL": "offline"}, None, "model"),
        Choice({}, "offline", "model"),
        Choice({"ANTHROPIC_API_KEY": "k"}, None, "api"),
        Choice({"ANTHROPIC_AUTH_TOKEN": "t"}, None, "api"),
        Choice({"MEMDIR_ANTHROPIC_API_KEY": "k"}, None, "api"),
        Choice({"OPENAI_API_KEY": "k"}, None, "api"),
        Choice({"OPENAI_BASE_URL": "http://127.0.0.1:8000/v1"}, None, "api"),
        Choice({"ANTHROPIC_API_KEY": ""}, None, "claude-code"),
        # A model named for the hook that cannot run is said at once, not only logged.
        Choice({}, "anthropic:claude-opus-5-5", "none"),
        Choice({"MEMDIR_MODEL": "openai:gpt-4.1-mini"}, None, "none"),
        Choice({"ANTHROPIC_AUTH_TOKEN": "t"}, "anthropic:claude-opus-5-5", "model"),
    ],
)
def test_the_hook_chooses_the_api_only_with_a_key_and_else_claude_code(
    case: Choice, claude_binary: tuple[Path, str]
) -> None:
    env = {"PATH": os.defpath, **case.env}
    chosen = choose_backend(HookOptions(model=case.model), env)
    assert chosen.kind == case.kind
    if chosen.kind == "claude-code":
        assert chosen.claude_path == os.path.realpath(claude_binary[0])


def test_the_hook_does_nothing_inside_memdirs_own_fork(tmp_path: Path) -> None:
    payload = {"session_id": "s", "transcript_path": str(tmp_path / "s.jsonl"), "cwd": "/"}
    done = subprocess.run(
        [*HOOK, "--memory-dir", str(tmp_path), "--timeout", "60"],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env={**os.environ, FORK_ENV: "1", "PYTHONPATH": SRC},
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert not (tmp_path / ".memdir").exists()  # no worker, no log


# How Claude Code's own extractor's prompt begins (its flags on: reference E11).
CLAUDE_CODE_EXTRACTOR = "memory extraction subagent"


def test_claude_codes_own_extractor_does_not_run_on_the_memory_run(claude_cli: ClaudeCli) -> None:
    # Claude Code's extractor forced on, as a server flag would turn it on: it runs after
    # the session's turn, and must not run again after memdir's run in the fork (which
    # saves nothing here, so Claude Code's "the agent wrote memory itself" rule does not
    # hide it).
    log_in(claude_cli)
    flags = {"tengu_passport_quail": True, "tengu_slate_thimble": True}
    (claude_cli.home / ".claude.json").write_text(json.dumps({"cachedGrowthBookFeatures": flags}))

    def answer(body: dict[str, Any]) -> Reply:
        if not body.get("tools"):
            return side_reply(body)
        if is_memory_request(body) or CLAUDE_CODE_EXTRACTOR in json.dumps(body["messages"]):
            return "Nothing new to save."
        return "Noted, Ana."

    with FakeAnthropicServer(handler=answer) as server:
        run = claude_cli.run(
            "I'm Ana, I lead the data platform team.",
            settings=hook_settings(),
            env_extra={
                **NO_KEYS,
                "PYTHONPATH": SRC,
                "CLAUDE_CODE_GB_DISK_CACHE_WHEN_TELEMETRY_OFF": "1",
            },
            server=server,
        )
        assert run.transcript is not None
        wait_for_workers(str(run.transcript))
        server.assert_no_errors()
        bodies = [json.dumps(r.body.get("messages")) for r in server.requests]
    assert sum(CLAUDE_CODE_EXTRACTOR in b for b in bodies) == 1  # the session's, alone
    assert sum(PROMPT_MARK in b for b in bodies) == 1  # memdir's run, once
    assert run.memory_dir is not None
    log = (run.memory_dir / ".memdir" / "hook.log").read_text()
    assert "0 memory(ies) saved, 0 failed" in log, log


@pytest.mark.parametrize("variable", ["ANTHROPIC_AUTH_TOKEN", "MEMDIR_ANTHROPIC_API_KEY"])
def test_a_key_in_the_environment_alone_takes_the_api_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    # A gateway token alone, or memdir's own key, reaches Anthropic's API: never offline.
    import io

    from memdir._hook_worker import run_job
    from tests.cli.conftest import TURNS, write_session

    for name in (*NO_KEYS, "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        # Set first, so that what the worker puts in the environment is undone too.
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    monkeypatch.setenv(variable, "secret-123")
    session_file = write_session(tmp_path / "s.jsonl", TURNS[:1], cwd=str(tmp_path))
    memory = tmp_path / "memory"
    assert choose_backend(HookOptions(), dict(os.environ)).kind == "api"
    log = io.StringIO()
    with FakeAnthropicServer(handler=lambda body: "Nothing new to save.") as server:
        job = {
            "transcript_path": str(session_file),
            "cwd": str(tmp_path),
            "memory_dir": str(memory),
            "base_url": server.base_url,
            "backend": "api",
            "mode": "standalone",
        }
        assert run_job(job, stream=log) == 0, log.getvalue()
        assert server.requests
        headers = server.requests[0].headers
        sent = headers.get("x-api-key", "") + headers.get("authorization", "")
        assert "secret-123" in sent
    assert "offline" not in log.getvalue()
    assert "1 run(s) (standalone)" in log.getvalue(), log.getvalue()


def test_claude_code_shows_the_user_why_no_memory_was_saved(
    claude_cli: ClaudeCli, tmp_path: Path
) -> None:
    # No API key, and an environment where claude-agent-sdk is not installed (a
    # sitecustomize hides it): the hook cannot run the memory agent anywhere. Claude Code
    # shows the hook's one line; nothing is sent for memory and nothing is saved.
    hide = tmp_path / "no-sdk"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text("import sys\nsys.modules['claude_agent_sdk'] = None\n")
    log_in(claude_cli)
    run = claude_cli.run(
        "I'm Ana, I lead the data platform team.",
        replies=["Noted, Ana."],
        settings=hook_settings(),
        env_extra={**NO_KEYS, "PYTHONPATH": os.pathsep.join([str(hide), SRC])},
    )
    assert run.transcript is not None
    wait_for_workers(str(run.transcript))
    shown = [
        entry["attachment"]["content"]
        for entry in map(json.loads, run.transcript.read_text().splitlines())
        if entry.get("type") == "attachment"
        and entry.get("attachment", {}).get("type") == "hook_system_message"
    ]
    assert len(shown) == 1, shown
    assert shown[0].startswith("memdir saved no memories: ")
    assert "claude-agent-sdk" in shown[0]
    assert not any(is_memory_request(r.body) for r in run.requests)
    assert run.memory_dir is not None
    assert MemoryDir(run.memory_dir).scan() == []
    log = (run.memory_dir / ".memdir" / "hook.log").read_text()
    assert "extraction not started: no API key in the environment" in log, log


def test_the_hook_runs_the_claude_code_that_ran_it(tmp_path: Path) -> None:
    # Claude Code gives its hooks CLAUDE_PID: that process's executable comes before any
    # `claude` on PATH or the SDK's bundled CLI.
    import shutil

    own = tmp_path / "bin" / "claude"
    own.parent.mkdir()
    shutil.copy("/bin/sleep", own)
    with subprocess.Popen([str(own), "60"]) as running:
        try:
            env = {"CLAUDE_PID": str(running.pid), "PATH": ""}
            assert find_claude_code(env) == str(own)
            chosen = choose_backend(HookOptions(), env)
            assert (chosen.kind, chosen.claude_path) == ("claude-code", str(own))
        finally:
            running.kill()


def test_runs_on_one_memory_folder_take_turns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # While another run holds the memory folder's extraction lock, the Claude Code run
    # waits for it (here: gives up at once), as memdir's other runs do.
    import asyncio

    from memdir import _claude_code_backend
    from memdir.errors import StoreError
    from memdir.transcripts import load_transcript
    from tests.cli.conftest import TURNS, write_session

    monkeypatch.setattr(_claude_code_backend, "RUN_LOCK_TIMEOUT", 0)
    transcript = load_transcript(write_session(tmp_path / "s.jsonl", TURNS[:1]))
    memory = MemoryDir(tmp_path / "memory")
    memory.ensure()

    def run() -> object:
        return asyncio.run(
            _claude_code_backend.extract_through_claude_code(
                transcript, memory, cli_path="/nonexistent/claude"
            )
        )

    with memory.lock("extraction"), pytest.raises(StoreError, match="locked"):
        run()


def test_a_run_claude_code_cannot_finish_is_cut_off_and_tried_again(
    claude_cli: ClaudeCli, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Claude Code retries an endpoint it cannot use for minutes; the run holds the
    # memory folder's lock meanwhile, so it is cut off and its messages kept for later.
    import asyncio

    from memdir import _claude_code_backend
    from memdir.transcripts import load_transcript

    monkeypatch.setattr(_claude_code_backend, "FORK_TIMEOUT", 2.0)
    release = threading.Event()

    def answer(body: dict[str, Any]) -> Reply:
        if not body.get("tools"):
            return side_reply(body)
        if is_memory_request(body):
            release.wait(120)  # the memory run's model never answers in time
        return "Noted, Ana."

    with FakeAnthropicServer(handler=answer) as server:
        run = claude_cli.run("I'm Ana, I lead the data platform team.", server=server)
        assert run.transcript is not None
        assert run.memory_dir is not None
        memory = MemoryDir(run.memory_dir)
        try:
            report = asyncio.run(
                _claude_code_backend.extract_through_claude_code(
                    load_transcript(run.transcript),
                    memory,
                    cli_path=str(claude_cli.binary),
                    env=run.env,
                )
            )
        finally:
            release.set()
    assert (report.runs, report.errors) == (0, 1)
    assert "did not finish within 2s" in report.error_reasons[0]
    assert StateFile(memory).get(run.session_id).cursor is None


def test_memdirs_own_key_is_never_handed_to_claude_code() -> None:
    from memdir._claude_code_backend import FORK_ENV, fork_environment

    env = fork_environment({"MEMDIR_ANTHROPIC_API_KEY": "memory-key", "CLAUDE_PID": "1", "A": "b"})
    assert env == {"A": "b", FORK_ENV: "1"}


def test_the_quick_path_never_fails_the_session_whatever_it_is_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A settings file nested past the parser's depth is no settings; and whatever else
    goes wrong in the quick path is one line on stderr, never an exception."""
    import io

    from memdir import _claude_settings, _hook_entry

    deep = tmp_path / "settings.json"
    deep.write_text("[" * 100_000)
    assert _claude_settings.read_settings(deep) is None

    def broken(*args: object, **kwargs: object) -> None:
        raise ValueError("embedded null byte")

    monkeypatch.setattr(_hook_entry, "start", broken)
    monkeypatch.setattr("sys.stdin", io.StringIO('{"transcript_path": "/s.jsonl"}'))
    assert _hook_entry.run(["--model", "offline"]) is True
    assert capsys.readouterr().err == "memdir hook: nothing done: ValueError: embedded null byte\n"
