"""Which model a command runs: the one named, else the host's own, else today's default,
and never the offline engine unless asked for."""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from memdir._cli import cli
from memdir._cli._common import NO_MODEL, default_spec_for, model_spec
from memdir.models import DEFAULT_ANTHROPIC_MODEL, _table
from memdir.testing import FakeAnthropicServer
from memdir.transcripts import load_transcript
from tests.cli.conftest import TURNS, write_session


def session_with_model(path: Path, model: str | None) -> Path:
    """A Claude Code session whose answers say they came from ``model`` (or no model)."""
    write_session(path, TURNS[:1])
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    for entry in lines:
        message = entry.get("message")
        if entry["type"] == "assistant" and isinstance(message, dict):
            if model is None:
                message.pop("model", None)
            else:
                message["model"] = model
    path.write_text("".join(json.dumps(entry) + "\n" for entry in lines))
    return path


def models_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, host: str | None, *args: str
) -> tuple[list[str], str]:
    """The models ``memdir extract`` asked for, and its stderr."""
    tmp_path.mkdir(exist_ok=True)
    session = session_with_model(tmp_path / "s.jsonl", host)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    with FakeAnthropicServer(handler=lambda body: "Nothing to save.") as server:
        result = CliRunner().invoke(
            cli,
            [
                "extract",
                str(session),
                "--base-url",
                server.base_url,
                "--memory-dir",
                str(tmp_path / "m"),
                *args,
            ],
        )
        assert result.exit_code == 0, result.stderr
        return [r.body["model"] for r in server.requests], result.stderr


def test_the_hosts_own_model_is_the_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked, err = models_asked(tmp_path, monkeypatch, "claude-opus-5-5")
    assert asked == ["claude-opus-5-5"]
    assert err == ""


def test_a_retired_host_model_is_replaced_and_said_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked, err = models_asked(tmp_path, monkeypatch, "claude-sonnet-4-5-20250929")
    assert asked == ["claude-sonnet-5-5"]
    assert err == (
        "memdir: the session's model claude-sonnet-4-5-20250929 is retired; "
        "using anthropic:claude-sonnet-5-5\n"
    )


def test_without_a_host_model_todays_default_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked, _ = models_asked(tmp_path, monkeypatch, None)
    assert asked == [DEFAULT_ANTHROPIC_MODEL] == ["claude-sonnet-5-5"]


def test_a_model_named_goes_before_the_hosts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked, _ = models_asked(
        tmp_path, monkeypatch, "claude-opus-5-5", "--model", "anthropic:claude-haiku-5-5"
    )
    assert asked == ["claude-haiku-5-5"]
    monkeypatch.setenv("MEMDIR_MODEL", "anthropic:claude-fable-5-2")
    asked, _ = models_asked(tmp_path / "again", monkeypatch, "claude-opus-5-5")
    assert asked == ["claude-fable-5-2"]


# The SDK warns too (a DeprecationWarning, which Python shows no one by default).
@pytest.mark.filterwarnings("ignore:The model 'claude-opus-4-5' is deprecated:DeprecationWarning")
def test_a_model_to_be_retired_is_announced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_table, "_today", lambda: datetime.date(2026, 12, 4))
    asked, err = models_asked(tmp_path, monkeypatch, None, "--model", "anthropic:claude-opus-4-5")
    assert asked == ["claude-opus-4-5"]
    assert err == (
        "memdir: claude-opus-4-5 (Claude Opus 4.5) will be retired on January 22, 2027; "
        "use anthropic:claude-opus-5-5\n"
    )
    monkeypatch.setattr(_table, "_today", lambda: datetime.date(2027, 1, 22))
    memory = tmp_path / "existing"
    memory.mkdir()
    dream = ["dream", "--force", "--model", "anthropic:claude-opus-4-5", "--memory-dir", memory]
    result = CliRunner().invoke(cli, [str(arg) for arg in dream])
    assert result.exit_code == 2
    assert "was retired on January 22, 2027" in result.stderr


def test_the_memdir_key_alone_is_enough(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    session = session_with_model(tmp_path / "s.jsonl", "claude-opus-5-5")
    monkeypatch.setenv("MEMDIR_ANTHROPIC_API_KEY", "memory-key")
    with FakeAnthropicServer(handler=lambda body: "Nothing to save.") as server:
        args = ["extract", str(session), "--base-url", server.base_url]
        result = CliRunner().invoke(cli, [*args, "--memory-dir", str(tmp_path / "m")])
        assert result.exit_code == 0, result.stderr
        (request,) = server.requests
    assert request.body["model"] == "claude-opus-5-5"
    assert request.headers["authorization"] == "Bearer memory-key"


def test_no_provider_and_no_model_is_one_line_and_nothing_written(tmp_path: Path) -> None:
    session = session_with_model(tmp_path / "s.jsonl", "claude-opus-5-5")
    memory = tmp_path / "m"
    for command in (["extract", str(session)], ["watch", str(session)]):
        result = CliRunner().invoke(cli, [*command, "--memory-dir", str(memory)])
        assert result.exit_code == 2
        assert result.stderr == f"memdir: {NO_MODEL}\n"
        assert result.stdout == ""
        assert not memory.exists()
    # dream works on a memory that exists (it refuses a missing one first).
    memory.mkdir()
    result = CliRunner().invoke(cli, ["dream", "--force", "--memory-dir", str(memory)])
    assert (result.exit_code, result.stderr, result.stdout) == (2, f"memdir: {NO_MODEL}\n", "")
    assert list(memory.iterdir()) == []


@pytest.mark.parametrize(
    ("env", "host", "spec"),
    [
        ({}, "claude-opus-5-5", None),
        ({"ANTHROPIC_AUTH_TOKEN": "t"}, "claude-opus-5-5", "anthropic:claude-opus-5-5"),
        ({"MEMDIR_ANTHROPIC_API_KEY": "k"}, None, "anthropic:claude-sonnet-5-5"),
        ({"ANTHROPIC_API_KEY": "k"}, "claude-sonnet-4", "anthropic:claude-sonnet-5-5"),
        ({"ANTHROPIC_API_KEY": "k"}, "claude-opus-4-20250514", "anthropic:claude-opus-5-5"),
        # The host's provider cannot be reached: the provider that can, with its default.
        ({"OPENAI_API_KEY": "k"}, "claude-opus-5-5", "openai:gpt-4.1-mini"),
        ({"ANTHROPIC_API_KEY": "k"}, "gpt-4o", "anthropic:claude-sonnet-5-5"),
        ({"OPENAI_API_KEY": "k"}, "gpt-4o", "openai:gpt-4o"),
        # A model the table does not know is the host's to name.
        ({"ANTHROPIC_API_KEY": "k"}, "claude-next-1", "anthropic:claude-next-1"),
        ({"MEMDIR_MODEL": "offline"}, "claude-opus-5-5", "offline"),
    ],
)
def test_model_spec(env: dict[str, str], host: str | None, spec: str | None) -> None:
    assert model_spec(None, env, host=host) == spec


def test_default_spec_for_a_transcript(tmp_path: Path) -> None:
    transcript = load_transcript(session_with_model(tmp_path / "s.jsonl", "claude-opus-5-5"))
    assert default_spec_for(transcript, {}) is None
    with_token = {"ANTHROPIC_AUTH_TOKEN": "t"}
    assert default_spec_for(transcript, with_token) == "anthropic:claude-opus-5-5"


def test_the_hook_runs_memory_on_the_sessions_own_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hook's API path, as ``extract`` does: the model of the session's own requests,
    a retired one on its replacement (and the log says so)."""
    import asyncio
    import io

    from memdir._hook_worker import HookLog, extract_session

    monkeypatch.setattr(_table, "_today", lambda: datetime.date(2026, 12, 4))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    monkeypatch.delenv("MEMDIR_MODEL", raising=False)
    for host, wanted in (
        ("claude-opus-5-5", "claude-opus-5-5"),
        ("claude-opus-4-0", "claude-opus-5-5"),
    ):
        session = load_transcript(session_with_model(tmp_path / f"{host}.jsonl", host))
        stream = io.StringIO()
        with FakeAnthropicServer(handler=lambda body: "Nothing to save.") as server:
            status = asyncio.run(
                extract_session(session, tmp_path / host, HookLog(stream), base_url=server.base_url)
            )
            asked = {r.body["model"] for r in server.requests}
        assert (status, asked) == (0, {wanted}), stream.getvalue()
        retired_note = f"the session's model is {host}; memory runs on anthropic:{wanted}"
        assert (retired_note in stream.getvalue()) == (host != wanted)


def test_a_worker_runs_a_retired_host_model_on_its_replacement(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A job shipped by a host still naming a retired model runs on the model that
    replaced it, not on the worker's default (needs no database)."""
    from memdir._cli._queue import _Models
    from memdir.models import OfflineModel

    monkeypatch.setattr(_table, "_today", lambda: datetime.date(2026, 12, 4))
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    models = _Models(OfflineModel(), None)
    assert models("anthropic:claude-opus-4-0").name == "anthropic:claude-opus-5-5"
    assert models("anthropic:claude-opus-5-5").name == "anthropic:claude-opus-5-5"
    assert isinstance(models(None), OfflineModel)
