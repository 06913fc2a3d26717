"""Provenance against the real Claude Code CLI: a memory's history outlives the CLI
rewriting the file, and ``memdir why`` reads what a CLI session loaded and surfaced from
the records its transcript keeps."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from memdir._cli import cli
from memdir.messages import Message, ToolUseBlock
from memdir.provenance import history, why
from memdir.store import MemoryDir, default_memory_dir
from memdir.testing import FakeAnthropicServer, Reply
from memdir.transcripts import load_transcript
from tests.claude_code._cli import DEFAULT_TIMEOUT, ClaudeCli, is_agent_turn
from tests.claude_code.test_real_cli import write_then_confirm
from tests.provenance._runs import POLARS_WHY, save_polars

EARLIER = "5a6b7c8d-9e0f-4a1b-8c2d-3e4f5a6b7c8d"

# Claude Code's recall mode on, from the flag cache the CLI reads offline when told to.
FLAGS = {"tengu_moth_copse": True}


def _memory(cli_: ClaudeCli) -> MemoryDir:
    return MemoryDir(default_memory_dir(cli_.project, env=cli_.env()))


def test_the_history_outlives_a_rewrite_by_the_cli_and_why_lists_its_write(
    claude_cli: ClaudeCli,
) -> None:
    memory = _memory(claude_cli)
    said = save_polars(memory.root, EARLIER)
    before = (memory.root / "polars.md").read_text(encoding="utf-8")

    # The CLI's own agent writes the memory again: in its own layout, with its own stamps.
    run = claude_cli.run(
        "Keep the data frame memory.", replies=write_then_confirm("polars.md", POLARS_WHY, "Ok.")
    )
    assert (memory.root / "polars.md").read_text(encoding="utf-8") != before

    story = history(memory, "polars")
    assert [(c.what, c.session) for c in story.changes] == [
        ("created", EARLIER),
        ("changed", EARLIER),
    ]
    assert story.changes[0].messages == (said[0].uuid, said[1].uuid)
    assert story.changes[1].messages == (said[2].uuid, said[3].uuid)
    assert story.changed_elsewhere  # the CLI's write is not one memdir made

    # The CLI session loaded the index memdir wrote, and saved the memory itself.
    view = why(memory, run.session_id)
    assert view.transcript == run.transcript
    (turn,) = [t for t in view.turns if t.loaded or t.saved]
    assert turn.prompt == "Keep the data frame memory."
    assert [(m.file, m.cut) for m in turn.loaded] == [("MEMORY.md", False)]
    (saved,) = turn.saved
    assert (saved.file, saved.by, saved.session) == ("polars.md", "session", run.session_id)


def test_why_lists_what_a_real_session_loaded_and_surfaced_with_provenance(
    claude_cli: ClaudeCli,
) -> None:
    memory = _memory(claude_cli)
    said = save_polars(memory.root, EARLIER, twice=False)
    (claude_cli.project / "notes.txt").write_text("nightly job notes\n", encoding="utf-8")
    (claude_cli.home / ".claude.json").write_text(
        json.dumps({"cachedGrowthBookFeatures": FLAGS, "cachedFeatureFlags": FLAGS}),
        encoding="utf-8",
    )
    chosen = threading.Event()

    def answer(body: dict[str, Any]) -> Reply:
        if not is_agent_turn(body):
            if "output_config" in body:  # Claude Code's memory selector
                chosen.set()
                return '{"selected_memories": ["polars.md"]}'
            return "OK"
        answered = any(
            isinstance(m.get("content"), list)
            and any(b.get("type") == "tool_result" for b in m["content"])
            for m in body["messages"]
        )
        if answered:
            return "Polars."
        # The CLI surfaces what its selector chose with the turn's next request: the
        # agent reads a file first, once the selector has been asked.
        chosen.wait(timeout=DEFAULT_TIMEOUT)
        read = ToolUseBlock(
            id="toolu_read", name="Read", input={"file_path": str(claude_cli.project / "notes.txt")}
        )
        return Message(role="assistant", content=(read,))

    with FakeAnthropicServer(handler=answer) as server:
        run = claude_cli.run(
            "Which data frame library for the nightly job?",
            env_extra={"CLAUDE_CODE_GB_DISK_CACHE_WHEN_TELEMETRY_OFF": "1"},
            server=server,
        )

    view = why(memory, run.session_id)
    (turn,) = [t for t in view.turns if t.surfaced]
    assert run.transcript is not None
    assert turn.turn == load_transcript(run.transcript).messages[0].uuid
    assert turn.prompt == "Which data frame library for the nightly job?"
    (surfaced,) = turn.surfaced
    assert surfaced.file == "polars.md"
    assert surfaced.history is not None
    origin = surfaced.history.origin
    assert origin is not None
    assert (origin.what, origin.session) == ("created", EARLIER)
    assert origin.messages == (said[0].uuid, said[1].uuid)

    result = CliRunner().invoke(
        cli, ["why", run.session_id, "--memory-dir", str(memory.root), "--json"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    listed = [s for t in data["turns"] for s in t["surfaced"]]
    assert listed[0]["file"] == "polars.md"
    assert listed[0]["history"][0]["session"] == EARLIER
    text = CliRunner().invoke(cli, ["why", run.session_id, "--memory-dir", str(memory.root)])
    assert f"turn 1 ({turn.turn}): Which data frame library" in text.output
    assert "  surfaced  polars.md — created " in text.output
    assert f"from session {EARLIER}, messages {said[0].uuid}, {said[1].uuid}" in text.output


def test_loaded_index_cut_by_the_cli_is_reported_as_cut(claude_cli: ClaudeCli) -> None:
    memory = _memory(claude_cli)
    memory.ensure()
    lines = "".join(f"- [Note {n}](note-{n}.md) — a note\n" for n in range(300))
    memory.entrypoint.write_text(lines, encoding="utf-8")

    run = claude_cli.run("Hello.", replies=["Hi."])

    (turn,) = [t for t in why(memory, run.session_id).turns if t.loaded]
    assert [(m.file, m.cut) for m in turn.loaded] == [("MEMORY.md", True)]


def test_why_of_an_unknown_session_is_one_line(tmp_path: Path) -> None:
    memory = tmp_path / "memory"
    memory.mkdir()
    result = CliRunner().invoke(cli, ["why", "no-such-session", "--memory-dir", str(memory)])
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("memdir: nothing is known of session 'no-such-session'")
    as_json = CliRunner().invoke(
        cli, ["why", "no-such-session", "--memory-dir", str(memory), "--json"]
    )
    assert as_json.exit_code == 2
    assert json.loads(as_json.stdout)["error"]["kind"] == "usage"
