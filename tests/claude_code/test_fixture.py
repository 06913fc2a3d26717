"""The CLI fixture itself: settings reach the CLI, and nothing that goes wrong is hidden."""

from __future__ import annotations

import json
import shlex
import sys

import pytest

from tests.claude_code._cli import ClaudeCli, side_reply


def test_user_settings_reach_the_cli_and_its_stop_hook_runs(claude_cli: ClaudeCli) -> None:
    seen = claude_cli.home / "stop-hook-input.json"
    copy_stdin = f"import shutil,sys; shutil.copyfileobj(sys.stdin, open({str(seen)!r}, 'w'))"
    command = f"{shlex.quote(sys.executable)} -c {shlex.quote(copy_stdin)}"
    settings = {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": command}]}]}}

    run = claude_cli.run("hi", replies=["Hello."], settings=settings)

    event = json.loads(seen.read_text())
    assert event["hook_event_name"] == "Stop"
    assert event["session_id"] == run.session_id
    assert event["transcript_path"] == str(run.transcript)
    assert event["last_assistant_message"] == "Hello."
    assert run.side_requests == ()  # nonessential traffic is off: one request per turn


def test_a_turn_past_the_script_is_reported(claude_cli: ClaudeCli) -> None:
    run = claude_cli.run("hi", replies=[], check=False)
    assert run.exit_code == 0
    assert run.problems == ("an agent turn came after the scripted replies ran out",)
    with pytest.raises(AssertionError, match="ran out"):
        run.check()


def test_a_failing_reply_function_is_reported(claude_cli: ClaudeCli) -> None:
    def broken(body: object) -> str:
        raise ValueError("no answer")

    run = claude_cli.run("hi", replies=broken, check=False)
    assert len(run.problems) == 1
    assert "ValueError: no answer" in run.problems[0]


def test_side_requests_get_text_or_the_smallest_fitting_json() -> None:
    assert side_reply({"messages": []}) == "OK"
    schema = {
        "type": "object",
        "properties": {
            "selected_memories": {"type": "array", "items": {"type": "string"}},
            "note": {"type": "string"},
        },
        "required": ["selected_memories"],
    }
    body = {"output_config": {"format": {"type": "json_schema", "schema": schema}}}
    reply = side_reply(body)
    assert isinstance(reply, str)
    assert json.loads(reply) == {"selected_memories": []}
